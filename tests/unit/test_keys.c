/* Unit tests for stage planning and cache keys (src/pipeline/plan.c):
 * mr__plan_outputs, mr__plan_inputs and mr__plan_key on specs parsed from
 * YAML text. No workspace: input ids are set by hand in the plan structs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "millrace/csv.h"
#include "pipeline/pipeline_int.h"

#define assert_contains(hay, needle)                                                         \
    do {                                                                                     \
        if (!strstr((hay), (needle))) fail_msg("'%s' does not contain '%s'", (hay), (needle)); \
    } while (0)

/* A built-in style op whose version the tests can bump (the registry keeps
 * the pointer, so the spec sees the change). */
static const mr_param_def ver_params[] = {
    {"source", MR_PT_STR, 0, "input"},
    {"rate", MR_PT_FLOAT, 0, "a number"},
    {NULL, 0, 0, NULL},
};
static const char *const ver_outputs[] = {"model", "report", NULL};
static mr_op ver_op = {"verop", 1, ver_params, ver_outputs, NULL, NULL, 0, NULL, NULL, NULL, NULL};

static int setup(void **state)
{
    (void)state;
    mr_ops_register_builtin();
    assert_ok(mr_op_register(&ver_op));
    return 0;
}

/* ---- planning a whole spec ------------------------------------------------ */

typedef struct planned {
    mr_spec *spec;
    mr_dag *dag;
    mr__plan *plans;
} planned;

/* Overrides of the artifact ids that would otherwise be derived from paths. */
typedef struct id_override {
    const char *path;
    const char *id;
} id_override;

static void fake_id(const char *kind, const char *path, const id_override *ov, char *id)
{
    for (; ov && ov->path; ov++)
        if (!strcmp(ov->path, path)) {
            snprintf(id, MR_ARTIFACT_ID_LEN, "%s", ov->id);
            return;
        }
    char s[512]; /* no allocation: also used under the OOM hook */
    snprintf(s, sizeof(s), "%s:%s", kind, path);
    mr_hash_hex(mr_hash_bytes(s, strlen(s)), id);
}

static planned plan_all(const char *yaml, const char *const *overrides, size_t n_overrides, int smoke,
                        const id_override *ids)
{
    planned r = {0};
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_spec_parse(yaml, strlen(yaml), "millrace.yaml", overrides, n_overrides, &r.spec, &err);
    if (st != MR_OK) fail_msg("spec failed: %s:%ld:%ld: %s", err.file, err.line, err.col, err.msg);
    st = mr_dag_build(r.spec, &r.dag, &err);
    if (st != MR_OK) fail_msg("dag failed: %s", err.msg);
    size_t n = mr_dag_n(r.dag);
    r.plans = mr_calloc(n ? n : 1, sizeof(*r.plans));
    assert_alloc(r.plans);
    for (size_t k = 0; k < n; k++) {
        size_t i = mr_dag_order(r.dag)[k];
        mr__plan *p = &r.plans[i];
        if (mr__plan_outputs(r.dag, i, p, &err) != MR_OK) fail_msg("outputs: %s", err.msg);
        /* what the stage "produced": ids derived from the output path */
        for (size_t o = 0; o < p->n_outs; o++) fake_id("out", p->outs[o].path, ids, p->outs[o].id);
        if (mr__plan_inputs(r.dag, i, r.plans, &err) != MR_OK) fail_msg("inputs: %s", err.msg);
        /* workspace files: ids as mr__plan_hash_inputs would set them */
        for (size_t d = 0; d < p->n_ins; d++)
            if (p->ins[d].from_stage < 0) {
                assert_string_equal(p->ins[d].id, "");
                fake_id("ws", p->ins[d].path, ids, p->ins[d].id);
            }
        if (mr__plan_key(r.spec, i, smoke, "", p, &err) != MR_OK) fail_msg("key: %s", err.msg);
        assert_int_equal(strlen(p->key), MR_HASH_HEX_LEN);
    }
    return r;
}

static void planned_free(planned *r)
{
    for (size_t i = 0; r->dag && i < mr_dag_n(r->dag); i++) mr__plan_free(&r->plans[i]);
    mr_free(r->plans);
    mr_dag_free(r->dag);
    mr_spec_free(r->spec);
    memset(r, 0, sizeof(*r));
}

static const mr__plan *plan_of(const planned *r, const char *stage)
{
    ssize_t i = mr__dag_index(r->dag, stage);
    if (i < 0) fail_msg("no stage '%s'", stage);
    return &r->plans[i];
}

/* Key and key document of one stage. */
static void key_of(const char *yaml, const char *const *ov, size_t n_ov, int smoke, const id_override *ids,
                   const char *stage, char *key, char **doc)
{
    planned r = plan_all(yaml, ov, n_ov, smoke, ids);
    const mr__plan *p = plan_of(&r, stage);
    memcpy(key, p->key, MR_HASH_HEX_LEN + 1);
    if (doc) *doc = mr_strdup(p->key_doc);
    planned_free(&r);
    if (doc) assert_alloc(*doc);
}

#define KEY(yaml, stage, key) key_of((yaml), NULL, 0, 0, NULL, (stage), (key), NULL)

static void assert_same_key(const char *y1, const char *y2, const char *stage)
{
    char k1[33], k2[33];
    char *d1 = NULL, *d2 = NULL;
    key_of(y1, NULL, 0, 0, NULL, stage, k1, &d1);
    key_of(y2, NULL, 0, 0, NULL, stage, k2, &d2);
    if (strcmp(k1, k2) != 0) fail_msg("stage '%s': keys differ\n  doc1: %s\n  doc2: %s", stage, d1, d2);
    assert_string_equal(d1, d2);
    mr_free(d1);
    mr_free(d2);
}

static void assert_other_key(const char *y1, const char *y2, const char *stage)
{
    char k1[33], k2[33];
    char *d1 = NULL, *d2 = NULL;
    key_of(y1, NULL, 0, 0, NULL, stage, k1, &d1);
    key_of(y2, NULL, 0, 0, NULL, stage, k2, &d2);
    if (!strcmp(k1, k2)) fail_msg("stage '%s': keys equal, want different\n  doc: %s", stage, d1);
    mr_free(d1);
    mr_free(d2);
}

/* ---- the base pipeline ---------------------------------------------------- */

static const char *base_yaml = "params:\n"
                               "  train: {lr: 0.1, rounds: 100}\n"
                               "  other: 5\n"
                               "stages:\n"
                               "  prep:\n"
                               "    op: exec\n"
                               "    cmd: python3 prep.py\n"
                               "    deps: [prep.py, raw.csv]\n"
                               "    outs: [clean.csv]\n"
                               "  fit:\n"
                               "    op: exec\n"
                               "    cmd: python3 fit.py --lr ${params.train.lr}\n"
                               "    deps: [clean.csv, fit.py]\n"
                               "    outs: [model.bin]\n"
                               "    metrics: [scores.json]\n"
                               "    env: {A: \"1\", B: two}\n";

static void test_plan_outputs_and_inputs(void **state)
{
    (void)state;
    planned r = plan_all(base_yaml, NULL, 0, 0, NULL);
    const mr__plan *prep = plan_of(&r, "prep"), *fit = plan_of(&r, "fit");
    assert_int_equal(prep->n_outs, 1);
    assert_string_equal(prep->outs[0].path, "clean.csv");
    assert_int_equal(prep->n_metrics, 0);
    assert_int_equal(fit->n_outs, 2);
    assert_int_equal(fit->n_metrics, 1);
    assert_string_equal(fit->outs[1].path, "scores.json");
    assert_int_equal(prep->n_ins, 2);
    assert_int_equal(prep->ins[0].from_stage, -1);
    assert_int_equal(fit->n_ins, 2);
    /* clean.csv comes from prep, by id */
    assert_string_equal(fit->ins[0].name, "clean.csv");
    assert_int_equal(fit->ins[0].from_stage, mr__dag_index(r.dag, "prep"));
    assert_string_equal(fit->ins[0].id, prep->outs[0].id);
    assert_int_equal(fit->ins[1].from_stage, -1);
    /* the key document */
    assert_contains(fit->key_doc, "\"op\":\"exec\"");
    assert_contains(fit->key_doc, "\"op_version\":1");
    assert_contains(fit->key_doc, "\"smoke\":false");
    assert_contains(fit->key_doc, "\"params\":{\"train.lr\":0.1}");
    assert_contains(fit->key_doc, "\"cmd\":\"python3 fit.py --lr 0.1\"");
    assert_contains(fit->key_doc, "\"inputs\":{\"clean.csv\":\"");
    assert_null(strstr(fit->key_doc, "\"desc\""));
    {
        mr_buf pj;
        mr_buf_init(&pj);
        assert_ok(mr_value_to_json(fit->params, 1, &pj));
        assert_string_equal(pj.data, "{\"train\":{\"lr\":0.1}}");
        mr_buf_free(&pj);
    }
    /* the key is the hash of the document */
    char hex[33];
    mr_hash_hex(mr_hash_bytes(fit->key_doc, strlen(fit->key_doc)), hex);
    assert_string_equal(fit->key, hex);
    assert_string_not_equal(fit->key, prep->key);
    planned_free(&r);
}

static void test_plan_builtin_op_outputs_and_refs(void **state)
{
    (void)state;
    const char *yaml = "stages:\n"
                       "  src: {op: exec, cmd: x, outs: [data/a.csv, data/b.csv]}\n"
                       "  m: {op: verop, source: \"${stages.src}\"}\n"
                       "  r: {op: verop, source: \"${stages.m.report}\"}\n";
    planned r = plan_all(yaml, NULL, 0, 0, NULL);
    const mr__plan *m = plan_of(&r, "m"), *rp = plan_of(&r, "r");
    assert_int_equal(m->n_outs, 2);
    assert_string_equal(m->outs[0].name, "model");
    assert_string_equal(m->outs[0].path, "out/m/model");
    assert_string_equal(m->outs[1].path, "out/m/report");
    /* ${stages.src}: every output of src */
    assert_int_equal(m->n_ins, 2);
    assert_string_equal(m->ins[0].name, "stages.src.data/a.csv");
    assert_string_equal(m->ins[1].name, "stages.src.data/b.csv");
    assert_string_equal(m->ins[1].path, "data/b.csv");
    /* ${stages.m.report}: just that one */
    assert_int_equal(rp->n_ins, 1);
    assert_string_equal(rp->ins[0].name, "stages.m.report");
    assert_string_equal(rp->ins[0].id, m->outs[1].id);
    assert_int_equal(rp->ins[0].from_stage, mr__dag_index(r.dag, "m"));
    planned_free(&r);
}

static void test_key_ignores_formatting(void **state)
{
    (void)state;
    /* same pipeline: keys reordered (stage keys, params, env), flow vs block
     * style, comments, blank lines, quoting, equal numbers spelt differently */
    const char *other = "# the same pipeline, written differently\n"
                        "stages:\n"
                        "  prep: {outs: ['clean.csv'], op: exec, deps: [\"prep.py\", raw.csv], cmd: 'python3 prep.py'}\n"
                        "\n"
                        "  fit:\n"
                        "    env:\n"
                        "      B: \"two\"   # quoted now\n"
                        "      A: '1'\n"
                        "    metrics:\n"
                        "      - scores.json\n"
                        "    outs: [ model.bin ]\n"
                        "    deps:   [clean.csv,   'fit.py']\n"
                        "    cmd: \"python3 fit.py --lr ${params.train.lr}\"\n"
                        "    op: exec\n"
                        "params:\n"
                        "  other: 5\n"
                        "  train:\n"
                        "    rounds: 100\n"
                        "    lr: 0.10\n";
    assert_same_key(base_yaml, other, "fit");
    assert_same_key(base_yaml, other, "prep");
}

static char *replace(const char *s, const char *from, const char *to)
{
    const char *at = strstr(s, from);
    if (!at) fail_msg("'%s' not in the yaml", from);
    char *ret_ = mr_asprintf("%.*s%s%s", (int)(at - s), s, to, at + strlen(from));
    assert_alloc(ret_);
    return ret_;
}

static void test_key_params(void **state)
{
    (void)state;
    /* a referenced param changes fit's key but not prep's */
    char *lr = replace(base_yaml, "lr: 0.1", "lr: 0.2");
    assert_other_key(base_yaml, lr, "fit");
    assert_same_key(base_yaml, lr, "prep");
    /* params fit does not reference do not */
    char *rounds = replace(base_yaml, "rounds: 100", "rounds: 300");
    assert_same_key(base_yaml, rounds, "fit");
    char *oth = replace(base_yaml, "other: 5", "other: 6");
    assert_same_key(base_yaml, oth, "fit");
    char *added = replace(base_yaml, "other: 5", "other: 5\n  unused: {deep: [1, 2]}");
    assert_same_key(base_yaml, added, "fit");
    /* ... until the stage declares one */
    char *decl = replace(base_yaml, "    env:", "    params: [train.rounds]\n    env:");
    char *decl_rounds = replace(decl, "rounds: 100", "rounds: 300");
    assert_other_key(decl, decl_rounds, "fit");

    /* a -S override is the same as editing the file */
    const char *ov[] = {"train.lr=0.2"};
    char k_ov[33], k_edit[33];
    key_of(base_yaml, ov, 1, 0, NULL, "fit", k_ov, NULL);
    KEY(lr, "fit", k_edit);
    assert_string_equal(k_ov, k_edit);
    mr_free(lr);
    mr_free(rounds);
    mr_free(oth);
    mr_free(added);
    mr_free(decl);
    mr_free(decl_rounds);
}

static void test_key_inputs(void **state)
{
    (void)state;
    char base[33], k[33];
    KEY(base_yaml, "fit", base);
    char prep_base[33];
    KEY(base_yaml, "prep", prep_base);

    /* a workspace file with other content */
    const id_override ws[] = {{"fit.py", "0123456789abcdef0123456789abcdef"}, {NULL, NULL}};
    key_of(base_yaml, NULL, 0, 0, ws, "fit", k, NULL);
    assert_string_not_equal(k, base);
    key_of(base_yaml, NULL, 0, 0, ws, "prep", k, NULL);
    assert_string_equal(k, prep_base);

    /* an upstream output with other content */
    const id_override up[] = {{"clean.csv", "fedcba9876543210fedcba9876543210"}, {NULL, NULL}};
    key_of(base_yaml, NULL, 0, 0, up, "fit", k, NULL);
    assert_string_not_equal(k, base);
    /* a file that became a directory with the same hash is another artifact */
    const id_override dir[] = {{"fit.py", "0123456789abcdef0123456789abcdef.dir"}, {NULL, NULL}};
    char k_dir[33];
    key_of(base_yaml, NULL, 0, 0, dir, "fit", k_dir, NULL);
    key_of(base_yaml, NULL, 0, 0, ws, "fit", k, NULL);
    assert_string_not_equal(k_dir, k);
    /* one more dependency */
    char *more = replace(base_yaml, "deps: [clean.csv, fit.py]", "deps: [clean.csv, fit.py, extra.txt]");
    assert_other_key(base_yaml, more, "fit");
    mr_free(more);
}

static void test_key_smoke(void **state)
{
    (void)state;
    char k0[33], k1[33];
    char *doc = NULL;
    key_of(base_yaml, NULL, 0, 0, NULL, "fit", k0, NULL);
    key_of(base_yaml, NULL, 0, 1, NULL, "fit", k1, &doc);
    assert_string_not_equal(k0, k1);
    assert_contains(doc, "\"smoke\":true");
    mr_free(doc);
}

static void test_key_op_version(void **state)
{
    (void)state;
    const char *yaml = "stages:\n  m: {op: verop, rate: 0.5}\n";
    char k1[33], k2[33];
    char *doc = NULL;
    key_of(yaml, NULL, 0, 0, NULL, "m", k1, &doc);
    assert_contains(doc, "\"op\":\"verop\"");
    assert_contains(doc, "\"op_version\":1");
    mr_free(doc);
    ver_op.version = 2; /* the op's logic changed */
    key_of(yaml, NULL, 0, 0, NULL, "m", k2, &doc);
    ver_op.version = 1;
    assert_contains(doc, "\"op_version\":2");
    assert_string_not_equal(k1, k2);
    mr_free(doc);
    /* exec is at version 1 */
    key_of(base_yaml, NULL, 0, 0, NULL, "prep", k1, &doc);
    assert_contains(doc, "\"op_version\":1");
    mr_free(doc);
}

static void test_key_ignores_desc_and_resources(void **state)
{
    (void)state;
    char *with = replace(base_yaml, "    env:", "    desc: fits the model\n    resources: {cpus: 4, mem: 2G}\n    env:");
    assert_same_key(base_yaml, with, "fit");
    char *changed = replace(with, "cpus: 4", "cpus: 1");
    char *changed2 = replace(changed, "fits the model", "another description");
    assert_same_key(with, changed2, "fit");
    /* but a real setting does count */
    char *env = replace(base_yaml, "B: two", "B: three");
    assert_other_key(base_yaml, env, "fit");
    char *cmd = replace(base_yaml, "python3 prep.py\n", "python3 prep.py --fast\n");
    assert_other_key(base_yaml, cmd, "prep");
    mr_free(with);
    mr_free(changed);
    mr_free(changed2);
    mr_free(env);
    mr_free(cmd);
}

static void test_key_int_vs_float(void **state)
{
    (void)state;
    /* The param is declared, not interpolated, so only its typed value in
     * "params" differs. 1 and 1.0 give different keys on purpose: the type
     * is part of the value (canonical JSON prints 1 vs 1.0), and a program
     * that reads params.yaml/JSON can behave differently for an int and a
     * float (range(n), integer division, a schema check). Equal floats
     * spelt differently (1.0, 1.00, 1e0) are one value and share a key. */
    const char *i1 = "params: {x: 1}\nstages:\n  s: {op: exec, cmd: run, params: [x]}\n";
    const char *f1 = "params: {x: 1.0}\nstages:\n  s: {op: exec, cmd: run, params: [x]}\n";
    const char *f2 = "params: {x: 1.00}\nstages:\n  s: {op: exec, cmd: run, params: [x]}\n";
    const char *f3 = "params: {x: 1e0}\nstages:\n  s: {op: exec, cmd: run, params: [x]}\n";
    const char *s1 = "params: {x: \"1\"}\nstages:\n  s: {op: exec, cmd: run, params: [x]}\n";
    char ki[33], kf[33], ks[33];
    char *di = NULL, *df = NULL;
    key_of(i1, NULL, 0, 0, NULL, "s", ki, &di);
    key_of(f1, NULL, 0, 0, NULL, "s", kf, &df);
    assert_contains(di, "\"params\":{\"x\":1}");
    assert_contains(df, "\"params\":{\"x\":1.0}");
    assert_string_not_equal(ki, kf);
    assert_same_key(f1, f2, "s");
    assert_same_key(f1, f3, "s");
    /* and a quoted "1" is a string, a third value */
    KEY(s1, "s", ks);
    assert_string_not_equal(ks, ki);
    assert_string_not_equal(ks, kf);
    mr_free(di);
    mr_free(df);
}

/* OOM torture over planning: allocation k fails, k = 1..; every call
 * returns MR_OK or MR_E_NOMEM. Runs in a child process (no cmocka calls
 * there) so that a crash in the library is reported instead of killing the
 * test program; the child exits normally so LeakSanitizer still checks it.
 * Exit codes: 0 ok, 2 unexpected status, 3 wrong key, 4 never succeeded. */
static int plan_oom_child(void)
{
    mr_error err;
    mr_error_init(&err);
    mr_spec *spec = NULL;
    mr_dag *dag = NULL;
    if (mr_spec_parse(base_yaml, strlen(base_yaml), "millrace.yaml", NULL, 0, &spec, &err) != MR_OK ||
        mr_dag_build(spec, &dag, &err) != MR_OK)
        return 2;
    size_t n = mr_dag_n(dag);
    size_t fit = (size_t)mr__dag_index(dag, "fit");
    char ref_key[33] = "";
    int clean_runs = 0, rc = 0;
    for (long k = 1; k < 3000 && clean_runs < 3 && rc == 0; k++) {
        mr__plan *plans = mr_calloc(n, sizeof(*plans));
        if (!plans) return 2;
        mr_status st = MR_OK;
        mr_error_clear(&err);
        mr_alloc_fail_after(k);
        for (size_t q = 0; q < n && st == MR_OK; q++) {
            size_t i = mr_dag_order(dag)[q];
            st = mr__plan_outputs(dag, i, &plans[i], &err);
            for (size_t o = 0; st == MR_OK && o < plans[i].n_outs; o++)
                fake_id("out", plans[i].outs[o].path, NULL, plans[i].outs[o].id);
            if (st == MR_OK) st = mr__plan_inputs(dag, i, plans, &err);
            for (size_t d = 0; st == MR_OK && d < plans[i].n_ins; d++)
                if (plans[i].ins[d].from_stage < 0) fake_id("ws", plans[i].ins[d].path, NULL, plans[i].ins[d].id);
            if (st == MR_OK) st = mr__plan_key(spec, i, 0, "", &plans[i], &err);
        }
        mr_alloc_fail_after(0);
        if (st == MR_OK) {
            if (!ref_key[0]) memcpy(ref_key, plans[fit].key, sizeof(ref_key));
            if (strcmp(ref_key, plans[fit].key) != 0) rc = 3;
            clean_runs++;
        } else if (st != MR_E_NOMEM || err.code != MR_E_NOMEM) {
            fprintf(stderr, "k=%ld: %s (%s)\n", k, mr_status_name(st), err.msg);
            rc = 2;
        } else {
            clean_runs = 0;
        }
        for (size_t i = 0; i < n; i++) mr__plan_free(&plans[i]);
        mr_free(plans);
    }
    if (rc == 0 && clean_runs < 3) rc = 4;
    mr_dag_free(dag);
    mr_spec_free(spec);
    return rc;
}

/* A built-in op reading a CSV file has the CSV reader's version in its key;
 * one reading Parquet does not (its key does not change with the reader). */
static void test_key_csv_reader(void **state)
{
    (void)state;
    char key[33];
    char *doc = NULL;
    key_of("stages:\n  m: {op: train, train: data/t.csv, label: y}\n", NULL, 0, 0, NULL, "m", key, &doc);
    char want[64];
    snprintf(want, sizeof(want), "\"csv_reader\":%d", MR_CSV_READER_VERSION);
    assert_contains(doc, want);
    mr_free(doc);
    key_of("stages:\n  m: {op: train, train: data/t.tsv, label: y}\n", NULL, 0, 0, NULL, "m", key, &doc);
    assert_contains(doc, want);
    mr_free(doc);
    key_of("stages:\n  m: {op: train, train: data/t.parquet, label: y}\n", NULL, 0, 0, NULL, "m", key, &doc);
    assert_null(strstr(doc, "csv_reader"));
    mr_free(doc);
    /* an exec stage reads its files itself */
    key_of("stages:\n  e: {op: exec, cmd: cat a.csv, deps: [a.csv], outs: [b.txt]}\n", NULL, 0, 0, NULL, "e", key, &doc);
    assert_null(strstr(doc, "csv_reader"));
    mr_free(doc);
}

static void test_plan_oom(void **state)
{
    (void)state;
    char ref_key[33];
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) exit(plan_oom_child());
    int wst = 0;
    assert_int_equal(waitpid(pid, &wst, 0), pid);
    /* a clean run must also agree with the normal path */
    KEY(base_yaml, "fit", ref_key);
    assert_int_equal(strlen(ref_key), 32);
    assert_true(WIFEXITED(wst));
    assert_int_equal(WEXITSTATUS(wst), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_outputs_and_inputs),
        cmocka_unit_test(test_plan_builtin_op_outputs_and_refs),
        cmocka_unit_test(test_key_ignores_formatting),
        cmocka_unit_test(test_key_params),
        cmocka_unit_test(test_key_inputs),
        cmocka_unit_test(test_key_smoke),
        cmocka_unit_test(test_key_op_version),
        cmocka_unit_test(test_key_ignores_desc_and_resources),
        cmocka_unit_test(test_key_int_vs_float),
        cmocka_unit_test(test_key_csv_reader),
        cmocka_unit_test(test_plan_oom),
    };
    return mr_test_run(tests, setup, NULL);
}
