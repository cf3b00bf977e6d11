/* Unit tests for the DAG (src/pipeline/dag.c): edges from exec deps/outs and
 * ${stages.X} references, topological order, cycle and overlap errors,
 * rendering. Specs are built from YAML text with mr_spec_parse. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <string.h>

#include "pipeline/pipeline_int.h"

#define assert_contains(hay, needle)                                                         \
    do {                                                                                     \
        if (!strstr((hay), (needle))) fail_msg("'%s' does not contain '%s'", (hay), (needle)); \
    } while (0)

static int setup(void **state)
{
    (void)state;
    mr_ops_register_builtin();
    return 0;
}

static mr_spec *parse(const char *yaml)
{
    mr_error err;
    mr_error_init(&err);
    mr_spec *spec = NULL;
    mr_status st = mr_spec_parse(yaml, strlen(yaml), "millrace.yaml", NULL, 0, &spec, &err);
    if (st != MR_OK) fail_msg("spec failed: %s:%ld:%ld: %s", err.file, err.line, err.col, err.msg);
    return spec;
}

static mr_dag *build(const mr_spec *spec)
{
    mr_error err;
    mr_error_init(&err);
    mr_dag *dag = NULL;
    mr_status st = mr_dag_build(spec, &dag, &err);
    if (st != MR_OK) fail_msg("dag failed: %s", err.msg);
    assert_alloc(dag);
    return dag;
}

/* Stage names of the topological order, joined by spaces. */
static void order_str(const mr_dag *dag, const mr_spec *spec, char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < mr_dag_n(dag); k++) {
        int w = snprintf(buf + off, len - off, "%s%s", k ? " " : "", spec->stages[mr_dag_order(dag)[k]].name);
        assert_true(w > 0 && (size_t)w < len - off);
        off += (size_t)w;
    }
}

/* Upstream stage names of stage `name`, joined by commas. */
static void up_str(const mr_dag *dag, const mr_spec *spec, const char *name, char *buf, size_t len)
{
    ssize_t i = mr__dag_index(dag, name);
    assert_true(i >= 0);
    size_t n = 0, off = 0;
    const size_t *up = mr_dag_upstream(dag, (size_t)i, &n);
    buf[0] = '\0';
    for (size_t k = 0; k < n; k++) {
        int w = snprintf(buf + off, len - off, "%s%s", k ? "," : "", spec->stages[up[k]].name);
        assert_true(w > 0 && (size_t)w < len - off);
        off += (size_t)w;
    }
}

static const char *diamond_yaml = "stages:\n"
                                  "  a: {op: exec, cmd: gen, outs: [a.txt]}\n"
                                  "  b: {op: exec, cmd: \"use ${stages.a}\", outs: [b.txt]}\n"
                                  "  c: {op: exec, cmd: use, deps: [./a.txt], outs: [c.txt]}\n"
                                  "  d: {op: exec, cmd: join, deps: [c.txt, b.txt, input.csv], outs: [d.txt]}\n";

static void test_diamond_edges(void **state)
{
    (void)state;
    mr_spec *spec = parse(diamond_yaml);
    mr_dag *dag = build(spec);
    char buf[256];
    assert_int_equal(mr_dag_n(dag), 4);
    up_str(dag, spec, "a", buf, sizeof(buf));
    assert_string_equal(buf, "");
    up_str(dag, spec, "b", buf, sizeof(buf)); /* ${stages.a} */
    assert_string_equal(buf, "a");
    up_str(dag, spec, "c", buf, sizeof(buf)); /* deps ./a.txt == a's out a.txt */
    assert_string_equal(buf, "a");
    up_str(dag, spec, "d", buf, sizeof(buf)); /* ascending stage index, no workspace file */
    assert_string_equal(buf, "b,c");
    order_str(dag, spec, buf, sizeof(buf));
    assert_string_equal(buf, "a b c d");
    /* declared paths are normalised */
    const mr__stage_paths *pc = mr__dag_paths(dag, 2);
    assert_int_equal(pc->n_deps, 1);
    assert_string_equal(pc->deps[0], "a.txt");
    assert_int_equal(mr__dag_index(dag, "nope"), -1);
    mr_dag_free(dag);
    mr_spec_free(spec);
}

static void test_edges_through_directories(void **state)
{
    (void)state;
    /* a dep under another stage's out dir, and an out under a dep dir */
    mr_spec *spec = parse("stages:\n"
                          "  prep: {op: exec, cmd: p, outs: [data]}\n"
                          "  feat: {op: exec, cmd: f, deps: [data/clean.csv], outs: [models/feat.bin]}\n"
                          "  fit: {op: exec, cmd: t, deps: [models], outs: [fit.bin], metrics: [m.json]}\n"
                          "  lone: {op: exec, cmd: l, deps: [datax/y], outs: [lone.txt]}\n");
    mr_dag *dag = build(spec);
    char buf[256];
    up_str(dag, spec, "feat", buf, sizeof(buf));
    assert_string_equal(buf, "prep");
    up_str(dag, spec, "fit", buf, sizeof(buf));
    assert_string_equal(buf, "feat");
    up_str(dag, spec, "lone", buf, sizeof(buf)); /* "datax" is not under "data" */
    assert_string_equal(buf, "");
    const mr__stage_paths *pf = mr__dag_paths(dag, 2);
    assert_int_equal(pf->n_outs, 2); /* outs then metrics */
    assert_int_equal(pf->n_metrics, 1);
    assert_string_equal(pf->outs[1], "m.json");
    mr_dag_free(dag);
    mr_spec_free(spec);
}

static void test_path_within(void **state)
{
    (void)state;
    assert_true(mr__path_within("data/x", "data"));
    assert_true(mr__path_within("data", "data"));
    assert_true(mr__path_within("a/b/c", "a/b"));
    assert_false(mr__path_within("datax", "data"));
    assert_false(mr__path_within("data", "data/x"));
    assert_false(mr__path_within("dat", "data"));
    assert_true(mr__path_within(".", "."));
    /* "." (the normalised workspace root) contains every path */
    int any = mr__path_within("anything", ".");
    int dotted = mr__path_within(".git", ".");
    assert_true(dotted);
    assert_true(any);
}

static void test_order_keeps_file_order(void **state)
{
    (void)state;
    char buf[256];
    /* independent stages: file order, not name order */
    mr_spec *spec = parse("stages:\n"
                          "  zeta: {op: exec, cmd: z}\n"
                          "  alpha: {op: exec, cmd: a}\n"
                          "  mid: {op: exec, cmd: m}\n");
    mr_dag *dag = build(spec);
    order_str(dag, spec, buf, sizeof(buf));
    assert_string_equal(buf, "zeta alpha mid");
    mr_dag_free(dag);
    mr_spec_free(spec);

    /* peers after a common upstream stay in file order */
    spec = parse("stages:\n"
                 "  second: {op: exec, cmd: s, deps: [root.txt]}\n"
                 "  first: {op: exec, cmd: f, deps: [root.txt]}\n"
                 "  root: {op: exec, cmd: r, outs: [root.txt]}\n");
    dag = build(spec);
    order_str(dag, spec, buf, sizeof(buf));
    assert_string_equal(buf, "root second first");
    mr_dag_free(dag);
    mr_spec_free(spec);
}

static void test_order_independent_stage_not_overtaken(void **state)
{
    (void)state;
    /* docs/spec.md: "among independent stages, file order decides who starts
     * first". a and b are independent and a comes first in the file, so a
     * must come before b; c needs b. The only order honouring both rules is
     * "a b c". */
    mr_spec *spec = parse("stages:\n"
                          "  c: {op: exec, cmd: c, deps: [b.txt]}\n"
                          "  a: {op: exec, cmd: a}\n"
                          "  b: {op: exec, cmd: b, outs: [b.txt]}\n");
    mr_dag *dag = build(spec);
    char buf[256];
    order_str(dag, spec, buf, sizeof(buf));
    mr_dag_free(dag);
    mr_spec_free(spec);
    assert_string_equal(buf, "a b c");
}

static void test_cycle_message(void **state)
{
    (void)state;
    const char *yaml = "stages:\n"
                       "  a: {op: exec, cmd: x, deps: [c.txt], outs: [a.txt]}\n"
                       "  b: {op: exec, cmd: x, deps: [a.txt], outs: [b.txt]}\n"
                       "  c: {op: exec, cmd: x, deps: [b.txt], outs: [c.txt]}\n"
                       "  ok: {op: exec, cmd: x}\n";
    mr_spec *spec = parse(yaml);
    mr_error err;
    mr_error_init(&err);
    mr_dag *dag = NULL;
    assert_status(mr_dag_build(spec, &dag, &err), MR_E_SCHEMA);
    assert_null(dag);
    assert_status(err.code, MR_E_SCHEMA);
    assert_contains(err.msg, "cycle");
    assert_contains(err.msg, "a <- c <- b <- a");
    assert_string_equal(err.file, "millrace.yaml");
    assert_int_equal(err.line, 2); /* the stage that closes the cycle */
    assert_true(err.hint[0] != '\0');
    char text[MR_ERR_MSG_MAX * 2];
    mr_error_format(&err, text, sizeof(text));
    assert_contains(text, "millrace.yaml:2:3: ");
    mr_spec_free(spec);

    /* through ${stages.X} references, and a two-stage cycle */
    spec = parse("stages:\n"
                 "  p: {op: exec, cmd: \"run ${stages.q}\", outs: [p.out]}\n"
                 "  q: {op: exec, cmd: \"run ${stages.p}\", outs: [q.out]}\n");
    mr_error_clear(&err);
    assert_status(mr_dag_build(spec, &dag, &err), MR_E_SCHEMA);
    assert_contains(err.msg, "p <- q <- p");
    mr_spec_free(spec);
}

static void test_overlapping_outs(void **state)
{
    (void)state;
    static const char *const bad[] = {
        /* same file in two stages */
        "stages:\n  a: {op: exec, cmd: x, outs: [m.bin]}\n  b: {op: exec, cmd: y, outs: [./m.bin]}\n",
        /* a file inside another stage's out directory */
        "stages:\n  a: {op: exec, cmd: x, outs: [models]}\n  b: {op: exec, cmd: y, outs: [models/m.bin]}\n",
        /* a metrics file that is another stage's out */
        "stages:\n  a: {op: exec, cmd: x, outs: [m.json]}\n  b: {op: exec, cmd: y, metrics: [m.json]}\n",
        /* twice in one stage */
        "stages:\n  a: {op: exec, cmd: x, outs: [o, o/p]}\n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mr_spec *spec = parse(bad[i]);
        mr_error err;
        mr_error_init(&err);
        mr_dag *dag = NULL;
        mr_status st = mr_dag_build(spec, &dag, &err);
        if (st != MR_E_SCHEMA) fail_msg("case %zu: got %s, want E_SCHEMA", i, mr_status_name(st));
        assert_null(dag);
        assert_contains(err.msg, "'a'");
        if (i < 3) assert_contains(err.msg, "'b'");
        assert_true(err.line > 0);
        mr_spec_free(spec);
    }
    /* siblings that merely share a prefix do not overlap */
    mr_spec *spec = parse("stages:\n  a: {op: exec, cmd: x, outs: [model]}\n  b: {op: exec, cmd: y, outs: [model.bin]}\n");
    mr_dag *dag = build(spec);
    mr_dag_free(dag);
    mr_spec_free(spec);
}

static void test_escaping_paths(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *key, *path;
    } bad[] = {
        {"stages:\n  a: {op: exec, cmd: x, outs: [/tmp/out.txt]}\n", "outs", "/tmp/out.txt"},
        {"stages:\n  a: {op: exec, cmd: x, outs: [../out.txt]}\n", "outs", "../out.txt"},
        {"stages:\n  a: {op: exec, cmd: x, outs: [sub/../../out.txt]}\n", "outs", "sub/../../out.txt"},
        {"stages:\n  a: {op: exec, cmd: x, deps: [../secret]}\n", "deps", "../secret"},
        {"stages:\n  a: {op: exec, cmd: x, metrics: [/m.json]}\n", "metrics", "/m.json"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        mr_spec *spec = parse(bad[i].yaml);
        mr_error err;
        mr_error_init(&err);
        mr_dag *dag = NULL;
        assert_status(mr_dag_build(spec, &dag, &err), MR_E_SCHEMA);
        assert_null(dag);
        assert_contains(err.msg, "'a'");
        assert_contains(err.msg, bad[i].key);
        assert_contains(err.msg, bad[i].path);
        assert_string_equal(err.file, "millrace.yaml");
        assert_int_equal(err.line, 2);
        mr_spec_free(spec);
    }
}

static void test_render(void **state)
{
    (void)state;
    mr_spec *spec = parse(diamond_yaml);
    mr_dag *dag = build(spec);
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_dag_render(dag, 0, &b));
    assert_string_equal(b.data, "a (exec)\n"
                                "b (exec) <- a\n"
                                "c (exec) <- a\n"
                                "d (exec) <- b, c\n");
    mr_buf_free(&b);

    mr_buf_init(&b);
    assert_ok(mr_dag_render(dag, 1, &b));
    assert_contains(b.data, "digraph millrace {");
    assert_contains(b.data, "\"a\" -> \"b\";");
    assert_contains(b.data, "\"a\" -> \"c\";");
    assert_contains(b.data, "\"b\" -> \"d\";");
    assert_contains(b.data, "\"c\" -> \"d\";");
    assert_contains(b.data, "\"d\" [label=\"d\\n(exec)\"];");
    assert_null(strstr(b.data, "\"a\" -> \"d\""));
    assert_int_equal(b.data[b.len - 2], '}');
    /* exactly four edges */
    size_t edges = 0;
    for (const char *p = b.data; (p = strstr(p, " -> ")) != NULL; p++) edges++;
    assert_int_equal(edges, 4);
    mr_buf_free(&b);
    mr_dag_free(dag);
    mr_spec_free(spec);
}

static void test_empty_pipeline(void **state)
{
    (void)state;
    mr_spec *spec = parse("stages: {}\n");
    mr_dag *dag = build(spec);
    assert_int_equal(mr_dag_n(dag), 0);
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_dag_render(dag, 0, &b));
    assert_true(b.len == 0);
    mr_buf_free(&b);
    mr_dag_free(dag);
    mr_spec_free(spec);
}

/* OOM torture: allocation k fails, k = 1..; every run returns MR_OK or
 * MR_E_NOMEM, crashes nothing and (under ASan) leaks nothing. */
static void test_dag_oom(void **state)
{
    (void)state;
    const char *cyc = "stages:\n"
                      "  a: {op: exec, cmd: x, deps: [c.txt], outs: [a.txt]}\n"
                      "  b: {op: exec, cmd: x, deps: [a.txt], outs: [b.txt]}\n"
                      "  c: {op: exec, cmd: x, deps: [b.txt], outs: [c.txt]}\n";
    const char *const yamls[] = {diamond_yaml, cyc};
    for (size_t y = 0; y < 2; y++) {
        mr_spec *spec = parse(yamls[y]);
        mr_status want = y == 0 ? MR_OK : MR_E_SCHEMA;
        int clean_runs = 0;
        for (long k = 1; k < 2000 && clean_runs < 3; k++) {
            mr_error err;
            mr_error_init(&err);
            mr_dag *dag = NULL;
            mr_alloc_fail_after(k);
            mr_status st = mr_dag_build(spec, &dag, &err);
            mr_alloc_fail_after(0);
            if (st == want) {
                clean_runs++;
            } else {
                clean_runs = 0;
                if (st != MR_E_NOMEM) fail_msg("k=%ld: %s (%s)", k, mr_status_name(st), err.msg);
                assert_status(err.code, MR_E_NOMEM);
                assert_null(dag);
            }
            if (dag) {
                mr_buf b;
                mr_buf_init(&b);
                mr_alloc_fail_after(1);
                assert_status(mr_dag_render(dag, k & 1, &b), MR_E_NOMEM);
                mr_alloc_fail_after(0);
                mr_buf_free(&b);
            }
            mr_dag_free(dag);
        }
        assert_int_equal(clean_runs, 3);
        mr_spec_free(spec);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_diamond_edges),
        cmocka_unit_test(test_edges_through_directories),
        cmocka_unit_test(test_path_within),
        cmocka_unit_test(test_order_keeps_file_order),
        cmocka_unit_test(test_order_independent_stage_not_overtaken),
        cmocka_unit_test(test_cycle_message),
        cmocka_unit_test(test_overlapping_outs),
        cmocka_unit_test(test_escaping_paths),
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_empty_pipeline),
        cmocka_unit_test(test_dag_oom),
    };
    return mr_test_run(tests, setup, NULL);
}
