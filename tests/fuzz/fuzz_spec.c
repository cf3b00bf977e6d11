/* libFuzzer target for millrace.yaml: what `millrace run`, `status`, `dag`
 * and `params` do with the file before anything runs — mr_spec_parse (the
 * body of mr_spec_load, which the CLI calls: YAML reading, -S overrides,
 * ${params.X} interpolation, ${stages.X} references, every op's schema and
 * validate hook, the did-you-mean hints), then mr_dag_build and both
 * renderings of the DAG. Leading lines "#S a.b=value" (YAML comments, so
 * the file stays valid) are passed as -S overrides, up to 8. Aborts when a
 * property the spec promises breaks:
 *   - a failure without a message, or with a status spec.h does not list;
 *     a YAML syntax error that does not name the file;
 *   - a loaded spec with a stage without an op or a mapping definition, a
 *     ${stages.X} reference to a stage it does not have, unsorted or
 *     repeated param paths;
 *   - a DAG whose order is not a permutation that puts every upstream
 *     before its stage, or that does not render;
 *   - YAML that reads, written back with mr_yaml_emit (as millrace.lock and
 *     `millrace params` are), that does not read back to an equal tree —
 *     the document itself and the effective params.
 * Also built with any compiler for the corpus replay (replay.c), which
 * ctest runs on tests/fuzz/corpus/spec. */
#include "millrace/pipeline.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_OVERRIDES 8
#define PATH "millrace.yaml"

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_spec: property broken: %s\n", what);
    abort();
}

/* emit(v) reads back as a tree equal to v. */
static void check_emit(const mr_value *v, const char *what)
{
    mr_buf y;
    mr_buf_init(&y);
    check(mr_yaml_emit(v, &y) == MR_OK, what);
    mr_value *back = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc = mr_yaml_parse(y.data ? y.data : "", y.len, "emitted.yaml", &back, &err);
    if (rc != MR_OK || !mr_value_equal(v, back))
        fprintf(stderr, "fuzz_spec: %s: emitted YAML (%s):\n%.*s\n", what, rc == MR_OK ? "reads as another tree" : err.msg,
                (int)y.len, y.data ? y.data : "");
    check(rc == MR_OK && mr_value_equal(v, back), what);
    mr_value_free(back);
    mr_buf_free(&y);
}

static void check_dag(const mr_spec *spec)
{
    mr_dag *dag = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc = mr_dag_build(spec, &dag, &err);
    if (rc != MR_OK) {
        check(rc == MR_E_SCHEMA || rc == MR_E_NOT_FOUND, "dag: a status pipeline.h does not list");
        check(err.code == rc && err.msg[0], "dag: a failure without a message");
        check(dag == NULL, "dag: a failed build returned a DAG");
        return;
    }
    size_t n = mr_dag_n(dag);
    check(n == spec->n_stages, "dag: not one node per stage");
    const size_t *order = mr_dag_order(dag);
    size_t *pos = mr_calloc(n ? n : 1, sizeof(*pos));
    check(pos != NULL, "dag: out of memory");
    for (size_t k = 0; k < n; k++) pos[k] = n;
    for (size_t k = 0; k < n; k++) {
        check(order[k] < n && pos[order[k]] == n, "dag: the order is not a permutation");
        pos[order[k]] = k;
    }
    for (size_t i = 0; i < n; i++) {
        size_t n_up = 0;
        const size_t *up = mr_dag_upstream(dag, i, &n_up);
        for (size_t u = 0; u < n_up; u++) check(up[u] < n && pos[up[u]] < pos[i], "dag: an upstream comes after its stage");
    }
    mr_free(pos);
    mr_buf text;
    mr_buf_init(&text);
    check(mr_dag_render(dag, 0, &text) == MR_OK && mr_dag_render(dag, 1, &text) == MR_OK, "dag: does not render");
    mr_buf_free(&text);
    mr_dag_free(dag);
}

static void check_spec(const mr_spec *spec)
{
    check(spec->params && spec->params->kind == MR_V_MAP, "spec: params is not a mapping");
    for (size_t i = 0; i < spec->n_stages; i++) {
        const mr_stage_spec *s = &spec->stages[i];
        check(s->name && s->name[0] && s->op && s->def && s->def->kind == MR_V_MAP, "spec: a stage without name, op or definition");
        check(mr_spec_stage(spec, s->name) == s, "spec: a stage name does not find its stage");
        for (size_t k = 0; k < s->n_refs; k++) check(mr_spec_stage(spec, s->refs[k].stage) != NULL, "spec: a reference to no stage");
        for (size_t k = 1; k < s->n_param_paths; k++)
            check(strcmp(s->param_paths[k - 1], s->param_paths[k]) < 0, "spec: param paths not sorted and unique");
        check(s->cpus > 0, "spec: cpus not positive");
    }
    check_emit(spec->params, "spec: the effective params do not emit as YAML that reads back");
    check_dag(spec);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int registered;
    if (!registered) {
        mr_ops_register_builtin();
        registered = 1;
    }
    /* the -S overrides: leading "#S " lines */
    char *ov[MAX_OVERRIDES];
    size_t n_ov = 0, at = 0;
    while (n_ov < MAX_OVERRIDES && size - at >= 3 && !memcmp(data + at, "#S ", 3)) {
        const uint8_t *nl = memchr(data + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - data) : size;
        ov[n_ov] = mr_strndup((const char *)data + at + 3, end - at - 3);
        check(ov[n_ov] != NULL, "out of memory");
        n_ov++;
        at = nl ? end + 1 : size;
    }
    mr_error err;
    mr_error_init(&err);
    mr_spec *spec = NULL;
    mr_status rc = mr_spec_parse((const char *)data, size, PATH, (const char *const *)ov, n_ov, &spec, &err);
    if (rc != MR_OK) {
        check(rc == MR_E_PARSE || rc == MR_E_SCHEMA || rc == MR_E_NOT_FOUND || rc == MR_E_INVALID_ARG || rc == MR_E_LIMIT,
              "spec: a status spec.h does not list");
        check(err.code == rc && err.msg[0], "spec: a failure without a message");
        check(spec == NULL, "spec: a failed load returned a spec");
        if (rc == MR_E_PARSE) check(!strcmp(err.file, PATH), "spec: a syntax error that does not name the file");
    } else {
        check_spec(spec);
    }
    mr_spec_free(spec);
    /* the YAML writer on the document as read */
    mr_value *doc = NULL;
    mr_error_init(&err);
    if (mr_yaml_parse((const char *)data, size, PATH, &doc, &err) == MR_OK)
        check_emit(doc, "yaml: a document does not emit as YAML that reads back");
    mr_value_free(doc);
    for (size_t i = 0; i < n_ov; i++) mr_free(ov[i]);
    return 0;
}
