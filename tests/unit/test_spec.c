/* Unit tests for spec loading (src/pipeline/spec.c): top-level and stage
 * validation, op schemas, interpolation, ${stages.X} references, -S
 * overrides, resources, and the exact positions and hints of errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "millrace/spec.h"

/* A second op so that typed params and "did you mean" can be tested. */
static const mr_param_def train_params[] = {
    {"source", MR_PT_STR, 1, "file or ${stages.X} to read"},
    {"rounds", MR_PT_INT, 0, "boosting rounds"},
    {"learning_rate", MR_PT_FLOAT, 0, "shrinkage"},
    {"features", MR_PT_STRSEQ, 0, "feature columns"},
    {"extra", MR_PT_ANY, 0, "anything"},
    {NULL, 0, 0, NULL},
};
static const mr_op train_op = {"toytrain", 1, train_params, NULL, NULL, NULL, 0, NULL, NULL, NULL, NULL};

static int setup(void **state)
{
    (void)state;
    mr_ops_register_builtin();
    mr_op_register(&train_op);
    return 0;
}

static mr_spec *parse_ok_ov(const char *text, const char *const *ov, size_t n_ov)
{
    mr_error err;
    mr_error_init(&err);
    mr_spec *spec = NULL;
    mr_status st = mr_spec_parse(text, strlen(text), "millrace.yaml", ov, n_ov, &spec, &err);
    if (st != MR_OK)
        fail_msg("spec failed (%s): %s:%ld:%ld: %s (hint: %s)", mr_status_name(st), err.file, err.line, err.col, err.msg,
                 err.hint);
    assert_alloc(spec);
    return spec;
}

static mr_spec *parse_ok(const char *text) { return parse_ok_ov(text, NULL, 0); }

static mr_status parse_err_ov(const char *text, const char *const *ov, size_t n_ov, mr_error *err)
{
    mr_spec *spec = NULL;
    mr_error_init(err);
    mr_status st = mr_spec_parse(text, strlen(text), "millrace.yaml", ov, n_ov, &spec, err);
    assert_null(spec);
    assert_int_not_equal(st, MR_OK);
    assert_int_equal(st, err->code);
    return st;
}

static mr_status parse_err(const char *text, mr_error *err) { return parse_err_ov(text, NULL, 0, err); }

#define assert_contains(hay, needle)                                                   \
    do {                                                                               \
        if (!strstr((hay), (needle))) fail_msg("'%s' does not contain '%s'", (hay), (needle)); \
    } while (0)

static void assert_at(const mr_error *err, long line, long col)
{
    if (err->line != line || err->col != col)
        fail_msg("error at %ld:%ld, expected %ld:%ld: %s", err->line, err->col, line, col, err->msg);
    assert_string_equal(err->file, "millrace.yaml");
}

static const char *BASIC =
    "params:\n"
    "  train: {rounds: 100, lr: 0.1, name: model, on: true, layers: [64, 32], opt: {kind: adam}}\n"
    "  data: raw.csv\n"
    "stages:\n"
    "  prepare:\n"
    "    op: exec\n"
    "    cmd: python3 prep.py --in ${params.data} --n ${params.train.rounds}\n"
    "    deps: [prep.py, \"${params.data}\"]\n"
    "    outs: [clean.csv]\n"
    "  fit:\n"
    "    op: toytrain\n"
    "    source: ${stages.prepare}\n"
    "    rounds: ${params.train.rounds}\n"
    "    learning_rate: ${params.train.lr}\n"
    "    extra: {layers: \"${params.train.layers}\", opt: \"${params.train.opt}\", flag: \"${params.train.on}\"}\n"
    "    desc: \"lr=${params.train.lr} on=${params.train.on} model=${stages.prepare.clean.csv} $${HOME}\"\n"
    "    resources: {cpus: 2, mem: 512M}\n";

/* ---- happy path -------------------------------------------------------- */

static void test_basic(void **state)
{
    (void)state;
    mr_spec *spec = parse_ok(BASIC);
    assert_string_equal(spec->path, "millrace.yaml");
    assert_int_equal(spec->n_stages, 2);
    assert_int_equal(spec->n_overrides, 0);
    assert_int_equal(spec->params->kind, MR_V_MAP);

    const mr_stage_spec *p = &spec->stages[0];
    assert_string_equal(p->name, "prepare");
    assert_int_equal(p->line, 5);
    assert_int_equal(p->col, 3);
    assert_string_equal(p->op->name, "exec");
    assert_true(p->cpus == 1.0);
    assert_true(p->mem_bytes == 0);
    /* embedded references become text */
    assert_string_equal(mr_value_get(p->def, "cmd")->str, "python3 prep.py --in raw.csv --n 100");
    const mr_value *deps = mr_value_get(p->def, "deps");
    assert_string_equal(deps->items[1]->str, "raw.csv");
    assert_int_equal(deps->items[1]->line, 8);
    assert_int_equal(p->n_param_paths, 2);
    assert_string_equal(p->param_paths[0], "data");
    assert_string_equal(p->param_paths[1], "train.rounds");
    assert_int_equal(p->n_refs, 0);
    /* the raw document is kept uninterpolated */
    assert_contains(mr_value_get_path(spec->root, "stages.prepare.cmd")->str, "${params.data}");

    const mr_stage_spec *f = mr_spec_stage(spec, "fit");
    assert_ptr_equal(f, &spec->stages[1]);
    assert_null(mr_spec_stage(spec, "nope"));
    assert_string_equal(f->op->name, "toytrain");
    /* whole-string references take the param's type, at the string's position */
    const mr_value *rounds = mr_value_get(f->def, "rounds");
    assert_int_equal(rounds->kind, MR_V_INT);
    assert_int_equal(rounds->u.i, 100);
    assert_int_equal(rounds->line, 13);
    assert_int_equal(rounds->col, 13);
    assert_int_equal(mr_value_get(f->def, "learning_rate")->kind, MR_V_FLOAT);
    const mr_value *extra = mr_value_get(f->def, "extra");
    assert_int_equal(mr_value_get(extra, "layers")->kind, MR_V_SEQ);
    assert_int_equal(mr_value_get(extra, "layers")->n, 2);
    assert_int_equal(mr_value_get_path(extra, "opt.kind")->kind, MR_V_STR);
    assert_int_equal(mr_value_get(extra, "flag")->kind, MR_V_BOOL);
    /* stage refs are left verbatim; $${ is an escape */
    assert_string_equal(mr_value_get(f->def, "source")->str, "${stages.prepare}");
    assert_string_equal(mr_value_get(f->def, "desc")->str,
                        "lr=0.1 on=true model=${stages.prepare.clean.csv} ${HOME}");
    assert_int_equal(f->n_refs, 2);
    assert_string_equal(f->refs[0].stage, "prepare");
    assert_null(f->refs[0].output);
    assert_int_equal(f->refs[0].line, 12);
    assert_int_equal(f->refs[0].col, 13);
    assert_string_equal(f->refs[1].stage, "prepare");
    assert_string_equal(f->refs[1].output, "clean.csv");
    assert_int_equal(f->refs[1].line, 16);
    /* sorted, unique */
    const char *want[] = {"train.layers", "train.lr", "train.on", "train.opt", "train.rounds"};
    assert_int_equal(f->n_param_paths, 5);
    for (size_t i = 0; i < 5; i++) assert_string_equal(f->param_paths[i], want[i]);
    assert_true(f->cpus == 2.0);
    assert_true(f->mem_bytes == 512ull << 20);
    mr_spec_free(spec);
}

static void test_no_params(void **state)
{
    (void)state;
    mr_spec *spec = parse_ok("stages:\n  a: {op: exec, cmd: echo hi}\n");
    assert_alloc(spec->params);
    assert_int_equal(spec->params->kind, MR_V_MAP);
    assert_int_equal(spec->params->n, 0);
    assert_int_equal(spec->stages[0].n_param_paths, 0);
    assert_null(spec->stages[0].param_paths);
    mr_spec_free(spec);
    spec = parse_ok("params:\nstages: {}\n");
    assert_int_equal(spec->params->kind, MR_V_MAP);
    assert_int_equal(spec->n_stages, 0);
    mr_spec_free(spec);
}

static void test_exec_declared_params(void **state)
{
    (void)state;
    mr_spec *spec = parse_ok("params: {train: {rounds: 3, lr: 0.1}, seed: 1}\n"
                             "stages:\n"
                             "  a:\n"
                             "    op: exec\n"
                             "    cmd: [\"run --seed ${params.seed}\", \"also ${params.train.lr}\"]\n"
                             "    params: [train.rounds, seed, train]\n"
                             "    env: {LR: \"${params.train.lr}\", N: \"x${params.train.rounds}\"}\n");
    const mr_stage_spec *a = &spec->stages[0];
    const char *want[] = {"seed", "train", "train.lr", "train.rounds"};
    assert_int_equal(a->n_param_paths, 4);
    for (size_t i = 0; i < 4; i++) assert_string_equal(a->param_paths[i], want[i]);
    assert_string_equal(mr_value_get(a->def, "cmd")->items[0]->str, "run --seed 1");
    assert_true(mr_value_get_path(a->def, "env.LR")->u.f == 0.1);
    assert_string_equal(mr_value_get_path(a->def, "env.N")->str, "x3");
    mr_spec_free(spec);

    spec = parse_ok("params: {seed: 1}\nstages:\n  a: {op: exec, cmd: x, params: seed}\n");
    assert_int_equal(spec->stages[0].n_param_paths, 1);
    mr_spec_free(spec);

    mr_error err;
    assert_status(parse_err("params: {train: {rounds: 3}}\n"
                               "stages:\n"
                               "  a:\n"
                               "    op: exec\n"
                               "    cmd: x\n"
                               "    params: [train.rounds, train.round]\n",
                               &err), MR_E_NOT_FOUND);
    assert_at(&err, 6, 28);
    assert_contains(err.msg, "'train.round'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'train.rounds'?"); /* best effort */
}

static void test_resources(void **state)
{
    (void)state;
    struct {
        const char *res;
        double cpus;
        uint64_t mem;
    } ok[] = {
        {"{cpus: 0.5, mem: 2G}", 0.5, 2ull << 30},
        {"{mem: 100K}", 1.0, 100ull << 10},
        {"{mem: 4096}", 1.0, 4096},
        {"{mem: \"1.5GiB\"}", 1.0, 3ull << 29},
        {"{mem: 64MB, cpus: 8}", 8.0, 64ull << 20},
        {"{}", 1.0, 0},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        char *text = mr_asprintf("stages:\n  a: {op: exec, cmd: x, resources: %s}\n", ok[i].res);
        assert_alloc(text);
        mr_spec *spec = parse_ok(text);
        assert_true(spec->stages[0].cpus == ok[i].cpus);
        assert_true(spec->stages[0].mem_bytes == ok[i].mem);
        mr_spec_free(spec);
        mr_free(text);
    }
    /* from params */
    mr_spec *spec = parse_ok("params: {c: 3, m: 1G}\n"
                             "stages:\n  a: {op: exec, cmd: x, resources: {cpus: \"${params.c}\", mem: \"${params.m}\"}}\n");
    assert_true(spec->stages[0].cpus == 3.0);
    assert_true(spec->stages[0].mem_bytes == 1ull << 30);
    mr_spec_free(spec);

    mr_error err;
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    resources:\n      cpus: 0\n", &err), MR_E_SCHEMA);
    assert_at(&err, 6, 13);
    assert_contains(err.msg, "resources.cpus");
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    resources: {cpus: many}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 5, 23);
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    resources: {mem: lots}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 5, 22);
    assert_contains(err.msg, "resources.mem");
    assert_contains(err.msg, "\"lots\"");
    assert_status(parse_err("stages:\n  a: {op: exec, cmd: x, resources: {mem: -5}}\n", &err), MR_E_SCHEMA);
    assert_status(parse_err("stages:\n  a: {op: exec, cmd: x, resources: {mem: 12Q}}\n", &err), MR_E_SCHEMA);
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    resources:\n      cpu: 2\n", &err), MR_E_SCHEMA);
    assert_at(&err, 6, 7);
    assert_contains(err.msg, "unknown key 'cpu' in resources");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'cpus'?"); /* the hint is best effort */
    assert_status(parse_err("stages:\n  a: {op: exec, cmd: x, resources: [1]}\n", &err), MR_E_SCHEMA);
    assert_contains(err.msg, "key 'resources' expected a mapping, got list");
}

/* ---- top level --------------------------------------------------------- */

static void test_top_level_errors(void **state)
{
    (void)state;
    mr_error err;
    assert_status(parse_err("params: {}\nstagse:\n  a: {op: exec, cmd: x}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 1);
    assert_contains(err.msg, "unknown top-level key 'stagse'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'stages'?"); /* the hint is best effort */

    assert_status(parse_err("stages: {}\nzzzzzzzzz: 1\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 1);
    assert_contains(err.hint, "top-level keys are 'params', 'stages', 'remotes', and the feature store's 'entities'");

    assert_status(parse_err("params: {a: 1}\n", &err), MR_E_SCHEMA);
    assert_contains(err.msg, "missing required top-level key 'stages'");

    assert_status(parse_err("stages: [a, b]\n", &err), MR_E_SCHEMA);
    assert_at(&err, 1, 9);
    assert_contains(err.msg, "'stages' must be a mapping");

    assert_status(parse_err("params: [1]\nstages: {}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 1, 9);

    assert_status(parse_err("- a\n- b\n", &err), MR_E_SCHEMA);
    assert_at(&err, 1, 1);
    assert_status(parse_err("", &err), MR_E_SCHEMA);
    assert_contains(err.msg, "empty");

    /* YAML-level errors come through with positions */
    assert_status(parse_err("stages:\n  a: {op: exec, cmd: [x}\n", &err), MR_E_PARSE);
    assert_int_equal(err.line, 2);
    assert_true(err.col > 1);
    assert_string_equal(err.file, "millrace.yaml");
    assert_contains(err.msg, "invalid YAML");

    assert_status(parse_err("stages:\n  a: {op: exec, cmd: x}\n  a: {op: exec, cmd: y}\n", &err), MR_E_PARSE);
    assert_at(&err, 3, 3);
    assert_contains(err.msg, "duplicate key 'a'");
    assert_contains(err.msg, "line 2");
    assert_contains(err.msg, "line 3");

    assert_status(parse_err("stages: {}\n---\nstages: {}\n", &err), MR_E_PARSE);
    assert_at(&err, 2, 1);
    assert_status(parse_err("x: &a {op: exec}\nstages: {b: *a}\n", &err), MR_E_PARSE);
    assert_at(&err, 1, 4);
}

/* ---- stages ------------------------------------------------------------ */

static void test_stage_errors(void **state)
{
    (void)state;
    mr_error err;
    assert_status(parse_err("stages:\n  1abc: {op: exec, cmd: x}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 3);
    assert_contains(err.msg, "invalid stage name '1abc'");
    assert_status(parse_err("stages:\n  \"a b\": {op: exec, cmd: x}\n", &err), MR_E_SCHEMA);
    assert_status(parse_err("stages:\n  -x: {op: exec, cmd: x}\n", &err), MR_E_SCHEMA);
    mr_spec *spec = parse_ok("stages:\n  _a-b_9: {op: exec, cmd: x}\n  Z: {op: exec, cmd: y}\n");
    mr_spec_free(spec);

    assert_status(parse_err("stages:\n  a: echo hi\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 6);
    assert_contains(err.msg, "stage 'a': expected a mapping");
    assert_contains(err.msg, "got string");
    assert_status(parse_err("stages:\n  a:\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 3);

    assert_status(parse_err("stages:\n  a:\n    cmd: x\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 3);
    assert_contains(err.msg, "missing required key 'op'");
    assert_contains(err.hint, "exec");

    assert_status(parse_err("stages:\n  a:\n    op: exce\n    cmd: x\n", &err), MR_E_SCHEMA);
    assert_at(&err, 3, 9);
    assert_contains(err.msg, "stage 'a': unknown op 'exce'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'exec'?"); /* the hint is best effort */
    assert_status(parse_err("stages:\n  a:\n    op: quantum_annealer\n", &err), MR_E_SCHEMA);
    assert_contains(err.hint, "known ops: exec, train");
    assert_status(parse_err("stages:\n  a:\n    op: [exec]\n", &err), MR_E_SCHEMA);
    assert_at(&err, 3, 9);

    assert_status(parse_err("stages:\n  train:\n    op: toytrain\n    source: x\n    learning_rat: 0.1\n", &err), MR_E_SCHEMA);
    assert_at(&err, 5, 5);
    assert_string_equal(err.msg, "stage 'train': unknown key 'learning_rat' for op 'toytrain'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'learning_rate'?"); /* the hint is best effort */
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    despc: d\n", &err), MR_E_SCHEMA);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'desc'?"); /* the hint is best effort */
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    qqqqqqqq: d\n", &err), MR_E_SCHEMA);
    assert_contains(err.hint, "op 'exec' takes: op, desc, resources, cmd, deps");

    assert_status(parse_err("stages:\n  a:\n    op: exec\n    deps: [x]\n", &err), MR_E_SCHEMA);
    assert_at(&err, 2, 3);
    assert_contains(err.msg, "missing required key 'cmd' for op 'exec'");
    assert_contains(err.hint, "cmd: shell command");
}

static void test_type_errors(void **state)
{
    (void)state;
    mr_error err;
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    deps: {a: 1}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 5, 11);
    assert_string_equal(err.msg, "stage 'a': key 'deps' expected a list of strings, got mapping");
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    outs: [a, 1]\n", &err), MR_E_SCHEMA);
    assert_at(&err, 5, 15);
    assert_contains(err.msg, "got a list containing int");
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: 3\n", &err), MR_E_SCHEMA);
    assert_contains(err.msg, "key 'cmd' expected a string or a list of strings, got int");
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    always_changed: \"yes\"\n", &err), MR_E_SCHEMA);
    assert_contains(err.msg, "expected a bool, got string");
    assert_status(parse_err("stages:\n  a:\n    op: exec\n    cmd: x\n    env: [a]\n", &err), MR_E_SCHEMA);
    assert_status(parse_err("stages:\n  a:\n    op: toytrain\n    source: x\n    rounds: 1.5\n", &err), MR_E_SCHEMA);
    assert_at(&err, 5, 13);
    assert_contains(err.msg, "key 'rounds' expected an int, got float");
    assert_status(parse_err("stages:\n  a:\n    op: toytrain\n    source: x\n    learning_rate: fast\n", &err), MR_E_SCHEMA);
    assert_contains(err.msg, "expected a number, got string");
    /* typed after interpolation */
    assert_status(parse_err("params: {r: 1.5}\nstages:\n  a:\n    op: toytrain\n    source: x\n    rounds: ${params.r}\n",
                               &err), MR_E_SCHEMA);
    assert_at(&err, 6, 13);
    /* accepted forms */
    mr_spec *spec = parse_ok("stages:\n"
                             "  a: {op: toytrain, source: x, learning_rate: 1, features: f1, extra: [1, {a: b}]}\n"
                             "  b: {op: toytrain, source: x, features: [f1, f2], rounds: 7}\n"
                             "  c: {op: exec, cmd: [a, b], deps: one, always_changed: true, env: {}}\n");
    assert_int_equal(mr_value_get(spec->stages[0].def, "learning_rate")->kind, MR_V_INT);
    mr_spec_free(spec);
}

/* ---- interpolation ----------------------------------------------------- */

static void test_interpolation_errors(void **state)
{
    (void)state;
    mr_error err;
    const char *head = "params:\n  train: {rounds: 100, lr: 0.1, opt: {k: v}}\nstages:\n  a:\n    op: exec\n";
    char *t = mr_asprintf("%s    cmd: run --n ${params.train.round}\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_NOT_FOUND);
    assert_at(&err, 6, 10);
    assert_string_equal(err.msg, "stage 'a': unknown param 'params.train.round'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'params.train.rounds'?"); /* the hint is best effort */
    mr_free(t);

    t = mr_asprintf("%s    cmd: x\n    deps: [a, \"--opt ${params.train.opt}\"]\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_SCHEMA);
    assert_at(&err, 7, 15);
    assert_contains(err.msg, "cannot embed mapping param 'params.train.opt'");
    mr_free(t);

    t = mr_asprintf("%s    cmd: run ${params.train.rounds\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_SCHEMA);
    assert_at(&err, 6, 10);
    assert_contains(err.msg, "unterminated '${'");
    assert_contains(err.hint, "$${");
    mr_free(t);

    t = mr_asprintf("%s    cmd: echo ${foo}\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_SCHEMA);
    assert_contains(err.msg, "unknown reference '${foo}', expected ${params.PATH} or ${stages.NAME}");
    mr_free(t);
    t = mr_asprintf("%s    cmd: echo ${params}\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_SCHEMA);
    assert_contains(err.msg, "unknown reference");
    mr_free(t);
    t = mr_asprintf("%s    cmd: echo ${params.}\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_SCHEMA);
    mr_free(t);
    /* nested inside maps and lists */
    t = mr_asprintf("%s    cmd: x\n    env: {A: [\"${params.nope}\"]}\n", head);
    assert_alloc(t);
    assert_status(parse_err(t, &err), MR_E_NOT_FOUND);
    assert_at(&err, 7, 15);
    mr_free(t);
}

static void test_escape(void **state)
{
    (void)state;
    mr_spec *spec = parse_ok("params: {a: 1}\nstages:\n"
                             "  s: {op: exec, cmd: \"echo $${params.a} $$HOME $${ ${params.a}$$\"}\n");
    assert_string_equal(mr_value_get(spec->stages[0].def, "cmd")->str, "echo ${params.a} $$HOME ${ 1$$");
    assert_int_equal(spec->stages[0].n_param_paths, 1);
    mr_spec_free(spec);
}

static void test_stage_refs(void **state)
{
    (void)state;
    mr_spec *spec = parse_ok("stages:\n"
                             "  b:\n"
                             "    op: exec\n"
                             "    cmd: [\"cat ${stages.a.model} ${stages.c}\", x]\n"
                             "  a: {op: exec, cmd: y, outs: [model]}\n"
                             "  c: {op: exec, cmd: \"${stages.a}\"}\n");
    const mr_stage_spec *b = &spec->stages[0];
    assert_int_equal(b->n_refs, 2);
    assert_string_equal(b->refs[0].stage, "a");
    assert_string_equal(b->refs[0].output, "model");
    assert_int_equal(b->refs[0].line, 4);
    assert_int_equal(b->refs[0].col, 11);
    assert_string_equal(b->refs[1].stage, "c");
    assert_null(b->refs[1].output);
    assert_string_equal(mr_value_get(b->def, "cmd")->items[0]->str, "cat ${stages.a.model} ${stages.c}");
    assert_int_equal(spec->stages[2].n_refs, 1);
    mr_spec_free(spec);

    mr_error err;
    assert_status(parse_err("stages:\n  prepare: {op: exec, cmd: x}\n  b:\n    op: exec\n    cmd: ${stages.prepar}\n",
                               &err), MR_E_NOT_FOUND);
    assert_at(&err, 5, 10);
    assert_contains(err.msg, "unknown stage 'prepar'");
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'prepare'?"); /* best effort */
    assert_status(parse_err("stages:\n  x:\n    op: exec\n    cmd: run ${stages.x.out}\n", &err), MR_E_SCHEMA);
    assert_at(&err, 4, 10);
    assert_string_equal(err.msg, "stage 'x' refers to itself");
    assert_status(parse_err("stages:\n  x: {op: exec, cmd: \"${stages.}\"}\n", &err), MR_E_SCHEMA);
    assert_status(parse_err("stages:\n  x: {op: exec, cmd: \"${stages}\"}\n", &err), MR_E_SCHEMA);
    assert_status(parse_err("stages:\n  y: {op: exec, cmd: a}\n  x: {op: exec, cmd: \"${stages.y.}\"}\n", &err), MR_E_SCHEMA);
}

/* ---- overrides --------------------------------------------------------- */

static const char *OV_SPEC = "params:\n"
                             "  train: {rounds: 100, lr: 0.1, name: model, on: true, opt: {k: v}, list: [1]}\n"
                             "  nothing: null\n"
                             "stages:\n"
                             "  a: {op: exec, cmd: \"r ${params.train.rounds} ${params.train.lr} ${params.train.name}\"}\n";

static void test_overrides(void **state)
{
    (void)state;
    const char *ov[] = {"train.rounds=300", "train.lr=1", "train.name=007", "train.on=false",
                        "+extra.deep=x", "nothing=3", "train.lr=2.5e-3", "+train.new=[1, 2]"};
    mr_spec *spec = parse_ok_ov(OV_SPEC, ov, 8);
    assert_int_equal(spec->n_overrides, 8);
    for (size_t i = 0; i < 8; i++) {
        assert_string_equal(spec->overrides[i], ov[i]);
        assert_ptr_not_equal(spec->overrides[i], ov[i]);
    }
    const mr_value *p = spec->params;
    assert_int_equal(mr_value_get_path(p, "train.rounds")->kind, MR_V_INT);
    assert_int_equal(mr_value_get_path(p, "train.rounds")->u.i, 300);
    assert_int_equal(mr_value_get_path(p, "train.lr")->kind, MR_V_FLOAT);
    assert_true(mr_value_get_path(p, "train.lr")->u.f == 2.5e-3);
    assert_int_equal(mr_value_get_path(p, "train.name")->kind, MR_V_STR);
    assert_string_equal(mr_value_get_path(p, "train.name")->str, "007");
    assert_int_equal(mr_value_get_path(p, "train.on")->u.b, 0);
    assert_string_equal(mr_value_get_path(p, "extra.deep")->str, "x");
    assert_int_equal(mr_value_get_path(p, "nothing")->kind, MR_V_INT);
    assert_int_equal(mr_value_get_path(p, "train.new")->kind, MR_V_SEQ);
    /* the raw document's params are untouched */
    assert_int_equal(mr_value_get_path(spec->root, "params.train.rounds")->u.i, 100);
    /* applied before interpolation */
    assert_string_equal(mr_value_get(spec->stages[0].def, "cmd")->str, "r 300 0.0025 007");
    mr_spec_free(spec);

    const char *ov2[] = {"train.lr=1"};
    spec = parse_ok_ov(OV_SPEC, ov2, 1);
    assert_int_equal(mr_value_get_path(spec->params, "train.lr")->kind, MR_V_FLOAT);
    assert_true(mr_value_get_path(spec->params, "train.lr")->u.f == 1.0);
    assert_string_equal(mr_value_get(spec->stages[0].def, "cmd")->str, "r 100 1.0 model");
    mr_spec_free(spec);

    const char *ov3[] = {"train.opt={k: w, j: 1}", "train.list=[2, 3]"};
    spec = parse_ok_ov(OV_SPEC, ov3, 2);
    assert_int_equal(mr_value_get_path(spec->params, "train.opt.j")->u.i, 1);
    assert_int_equal(mr_value_get_path(spec->params, "train.list")->n, 2);
    mr_spec_free(spec);
}

static void ov_err(const char *ov, mr_status want, const char *msg_part, mr_error *err)
{
    const char *ovs[] = {"train.rounds=5", ov};
    assert_status(parse_err_ov(OV_SPEC, ovs, 2, err), want);
    assert_int_equal(err->line, 0);
    assert_contains(err->msg, "-S ");
    assert_contains(err->msg, ov);
    assert_contains(err->msg, msg_part);
}

static void test_override_errors(void **state)
{
    (void)state;
    mr_error err;
    ov_err("train.round=3", MR_E_NOT_FOUND, "no param 'train.round'", &err);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'train.rounds'?"); /* the hint is best effort */
    assert_string_equal(err.key, "train.round");
    ov_err("zzzzzzzzzzzz=3", MR_E_NOT_FOUND, "no param", &err);
    assert_contains(err.hint, "-S +zzzzzzzzzzzz=3");
    ov_err("train.rounds=1.5", MR_E_INVALID_ARG, "expected int, got float", &err);
    ov_err("train.rounds=abc", MR_E_INVALID_ARG, "expected int, got string", &err);
    ov_err("train.lr=abc", MR_E_INVALID_ARG, "expected float, got string", &err);
    ov_err("train.on=1", MR_E_INVALID_ARG, "expected bool, got int", &err);
    ov_err("train.opt=1", MR_E_INVALID_ARG, "is a mapping", &err);
    ov_err("train=x", MR_E_INVALID_ARG, "is a mapping", &err);
    ov_err("train.list=1", MR_E_INVALID_ARG, "is a list", &err);
    ov_err("train.list={a: 1}", MR_E_INVALID_ARG, "is a list", &err);
    ov_err("train.rounds", MR_E_INVALID_ARG, "expected PATH=VALUE", &err);
    ov_err("=3", MR_E_INVALID_ARG, "invalid param path", &err);
    ov_err("train..rounds=3", MR_E_INVALID_ARG, "invalid param path", &err);
    ov_err("+train.rounds.x=3", MR_E_INVALID_ARG, "not a mapping", &err);
    ov_err("train.rounds=[1, 2", MR_E_INVALID_ARG, "invalid YAML flow value", &err);
}

/* ---- files ------------------------------------------------------------- */

static void test_load_file(void **state)
{
    (void)state;
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/mr_test_spec_XXXXXX", mr_test_tmpdir());
    assert_non_null(mkdtemp(dir));
    char *path = mr_asprintf("%s/millrace.yaml", dir);
    assert_alloc(path);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(BASIC, f);
    fclose(f);
    const char *ov[] = {"train.rounds=7"};
    mr_error err;
    mr_error_init(&err);
    mr_spec *spec = NULL;
    assert_ok(mr_spec_load(path, ov, 1, &spec, &err));
    assert_string_equal(spec->path, path);
    assert_string_equal(mr_value_get(spec->stages[0].def, "cmd")->str, "python3 prep.py --in raw.csv --n 7");
    mr_spec_free(spec);

    /* errors carry the file name */
    f = fopen(path, "w");
    fputs("stages:\n  a: {op: exec, cmd: x, dpes: []}\n", f);
    fclose(f);
    mr_error_init(&err);
    spec = NULL;
    assert_status(mr_spec_load(path, NULL, 0, &spec, &err), MR_E_SCHEMA);
    assert_null(spec);
    assert_string_equal(err.file, path);
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 25);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'deps'?"); /* the hint is best effort */
    char line[1024];
    mr_error_format(&err, line, sizeof(line));
    assert_contains(line, ":2:25: stage 'a': unknown key 'dpes' for op 'exec'");
    unlink(path);

    mr_error_init(&err);
    assert_int_not_equal(mr_spec_load(path, NULL, 0, &spec, &err), MR_OK);
    assert_null(spec);
    assert_contains(err.msg, path);
    rmdir(dir);
    mr_free(path);
}

/* OOM torture: every allocation failure returns an error and leaks nothing
 * (leaks are caught by the sanitizer build). */
static void test_oom(void **state)
{
    (void)state;
    const char *ov[] = {"train.rounds=5", "+x.y=[1]"};
    int saw_ok = 0;
    for (long k = 1; k < 5000 && !saw_ok; k++) {
        mr_error err;
        mr_error_init(&err);
        mr_spec *spec = NULL;
        mr_alloc_fail_after(k);
        mr_status st = mr_spec_parse(BASIC, strlen(BASIC), "m.yaml", ov, 2, &spec, &err);
        mr_alloc_fail_after(0);
        if (st == MR_OK) {
            saw_ok = 1;
            mr_buf b;
            mr_buf_init(&b);
            assert_ok(mr_yaml_emit(spec->params, &b));
            mr_buf_free(&b);
        } else {
            assert_null(spec);
        }
        mr_spec_free(spec);
    }
    assert_true(saw_ok);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_basic),
        cmocka_unit_test(test_no_params),
        cmocka_unit_test(test_exec_declared_params),
        cmocka_unit_test(test_resources),
        cmocka_unit_test(test_top_level_errors),
        cmocka_unit_test(test_stage_errors),
        cmocka_unit_test(test_type_errors),
        cmocka_unit_test(test_interpolation_errors),
        cmocka_unit_test(test_escape),
        cmocka_unit_test(test_stage_refs),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_override_errors),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_oom),
    };
    return mr_test_run(tests, setup, NULL);
}
