/* DAG resolution: edges from exec deps that are (or lie under, or contain)
 * another stage's outs and from ${stages.X} references; cycle detection that
 * names the cycle; topological order that keeps file order among peers. */
#include "pipeline_int.h"

#include <string.h>
#include <sys/types.h>

struct mr_dag {
    const mr_spec *spec;
    size_t n;
    mr__stage_paths *paths;
    size_t **up;   /* upstream stage indices per stage, ascending */
    size_t *n_up;
    size_t *order;
};

int mr__path_within(const char *a, const char *b)
{
    if (b[0] == '.' && b[1] == '\0') return 1; /* the workspace root contains everything */
    size_t lb = strlen(b);
    if (strncmp(a, b, lb) != 0) return 0;
    return a[lb] == '\0' || a[lb] == '/';
}

mr_status mr__def_strings(const mr_value *def, const char *key, const char ***out, size_t *n_out)
{
    return mr_value_strings(def, key, out, n_out);
}

static void paths_free(mr__stage_paths *p)
{
    for (size_t i = 0; i < p->n_deps; i++) mr_free(p->deps[i]);
    for (size_t i = 0; i < p->n_outs; i++) mr_free(p->outs[i]);
    mr_free(p->deps);
    mr_free(p->outs);
}

void mr_dag_free(mr_dag *dag)
{
    if (!dag) return;
    for (size_t i = 0; i < dag->n; i++) {
        if (dag->paths) paths_free(&dag->paths[i]);
        if (dag->up) mr_free(dag->up[i]);
    }
    mr_free(dag->paths);
    mr_free(dag->up);
    mr_free(dag->n_up);
    mr_free(dag->order);
    mr_free(dag);
}

size_t mr_dag_n(const mr_dag *dag) { return dag->n; }
const size_t *mr_dag_order(const mr_dag *dag) { return dag->order; }
const mr__stage_paths *mr__dag_paths(const mr_dag *dag, size_t i) { return &dag->paths[i]; }
const mr_spec *mr__dag_spec(const mr_dag *dag) { return dag->spec; }

const size_t *mr_dag_upstream(const mr_dag *dag, size_t i, size_t *n_out)
{
    *n_out = dag->n_up[i];
    return dag->up[i];
}

ssize_t mr__dag_index(const mr_dag *dag, const char *name)
{
    for (size_t i = 0; i < dag->n; i++)
        if (!strcmp(dag->spec->stages[i].name, name)) return (ssize_t)i;
    return -1;
}

/* 1 if p is absolute, empty, or climbs above its root ("a/../../b"). */
static int path_escapes(const char *p)
{
    if (!*p || *p == '/') return 1;
    long depth = 0;
    while (*p) {
        const char *e = strchr(p, '/');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.') {
            if (--depth < 0) return 1;
        } else if (len && !(len == 1 && p[0] == '.')) {
            depth++;
        }
        p += len;
        while (*p == '/') p++;
    }
    return 0;
}

/* Normalises a list of declared paths; errors name the stage and the key. */
static mr_status norm_list(const mr_stage_spec *s, const char *key, char ***out, size_t *n_out, size_t extra,
                           mr_error *err)
{
    const char **raw = NULL;
    size_t n = 0;
    if (mr__def_strings(s->def, key, &raw, &n) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char **arr = mr_realloc(*out, (*n_out + n + extra + 1) * sizeof(*arr));
    mr_status rc = MR_OK;
    if (!arr) {
        mr_free(raw);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    *out = arr;
    for (size_t i = 0; i < n; i++) {
        if (strstr(raw[i], "${stages.")) continue; /* a reference, resolved by the executor */
        if (!strncmp(raw[i], "s3://", 5)) { /* an object store input: keyed by its listed version (plan.c) */
            if (!(arr[*n_out] = mr_strdup(raw[i]))) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                break;
            }
            (*n_out)++;
            continue;
        }
        char *p = mr_path_normalize(raw[i], 0);
        if (!p && !path_escapes(raw[i])) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        if (!p) {
            const mr_value *v = mr_value_get(s->def, key);
            const mr_value *item = (v->kind == MR_V_SEQ || v->kind == MR_V_MAP) && i < v->n ? v->items[i] : v;
            rc = MR_ERR(err, MR_E_SCHEMA, "stage '%s': %s path '%s' must be relative and stay inside the workspace",
                        s->name, key, raw[i]);
            mr_error_at(err, NULL, item->line, item->col);
            break;
        }
        arr[(*n_out)++] = p;
    }
    mr_free(raw);
    return rc;
}

/* The workspace files an op's inputs_of names, normalised into p->deps. */
static mr_status op_inputs(const mr_stage_spec *s, mr__stage_paths *p, mr_error *err)
{
    enum { MAX_OP_INPUTS = 256 };
    const mr_value *vals[MAX_OP_INPUTS];
    size_t n = s->op->inputs_of(s->def, vals, MAX_OP_INPUTS);
    if (n > MAX_OP_INPUTS)
        return MR_ERR(err, MR_E_LIMIT, "stage '%s' reads %zu files besides its inputs, at most %d", s->name, n,
                      (int)MAX_OP_INPUTS);
    char **arr = mr_realloc(p->deps, (p->n_deps + n + 1) * sizeof(*arr));
    if (!arr) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    p->deps = arr;
    for (size_t i = 0; i < n; i++) {
        const char *raw = vals[i]->str;
        if (strstr(raw, "${stages.")) continue; /* a reference, resolved by the executor */
        char *norm = mr_path_normalize(raw, 0);
        if (!norm && !path_escapes(raw)) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (!norm) {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "stage '%s': path '%s' must be relative and stay inside the workspace",
                                  s->name, raw);
            mr_error_at(err, NULL, vals[i]->line, vals[i]->col);
            return rc;
        }
        arr[p->n_deps++] = norm;
    }
    return MR_OK;
}

static mr_status collect_paths(const mr_spec *spec, mr__stage_paths *paths, mr_error *err)
{
    for (size_t i = 0; i < spec->n_stages; i++) {
        const mr_stage_spec *s = &spec->stages[i];
        if (!(s->op->flags & MR_OP_WORKSPACE_OUTPUTS)) {
            /* Built-in ops: params flagged MR_PT_PATH are workspace inputs,
             * and so are the paths the op's inputs_of names. */
            for (const mr_param_def *pd = s->op->params; pd && pd->name; pd++) {
                if (!(pd->types & MR_PT_PATH)) continue;
                mr_status rc = norm_list(s, pd->name, &paths[i].deps, &paths[i].n_deps, 0, err);
                if (rc != MR_OK) {
                    mr_error_at(err, spec->path, 0, 0);
                    return rc;
                }
            }
            mr_status rc = s->op->inputs_of ? op_inputs(s, &paths[i], err) : MR_OK;
            if (rc != MR_OK) {
                mr_error_at(err, spec->path, 0, 0);
                return rc;
            }
            continue;
        }
        mr__stage_paths *p = &paths[i];
        mr_status rc = norm_list(s, "deps", &p->deps, &p->n_deps, 0, err);
        if (rc == MR_OK) rc = norm_list(s, "outs", &p->outs, &p->n_outs, 0, err);
        size_t before = p->n_outs;
        if (rc == MR_OK) rc = norm_list(s, "metrics", &p->outs, &p->n_outs, 0, err);
        p->n_metrics = p->n_outs - before;
        if (rc != MR_OK) {
            mr_error_at(err, spec->path, 0, 0);
            return rc;
        }
    }
    /* An output may be declared by one stage only, and may not nest in another's. */
    for (size_t i = 0; i < spec->n_stages; i++)
        for (size_t a = 0; a < paths[i].n_outs; a++)
            for (size_t j = i; j < spec->n_stages; j++)
                for (size_t b = (j == i ? a + 1 : 0); b < paths[j].n_outs; b++) {
                    const char *x = paths[i].outs[a], *y = paths[j].outs[b];
                    if (mr__path_within(x, y) || mr__path_within(y, x)) {
                        const mr_stage_spec *sj = &spec->stages[j];
                        mr_status rc = i == j ? MR_ERR(err, MR_E_SCHEMA, "stage '%s' declares output '%s' twice (or nested in '%s')",
                                                       sj->name, y, x)
                                              : MR_ERR(err, MR_E_SCHEMA, "output '%s' of stage '%s' overlaps output '%s' of stage '%s'",
                                                       y, sj->name, x, spec->stages[i].name);
                        mr_error_at(err, spec->path, sj->line, sj->col);
                        mr_error_hint(err, "each file or directory is produced by exactly one stage");
                        return rc;
                    }
                }
    return MR_OK;
}

static int add_edge(mr_dag *dag, size_t to, size_t from)
{
    for (size_t k = 0; k < dag->n_up[to]; k++)
        if (dag->up[to][k] == from) return 0;
    size_t *nu = mr_realloc(dag->up[to], (dag->n_up[to] + 1) * sizeof(*nu));
    if (!nu) return -1;
    size_t k = dag->n_up[to]++;
    while (k > 0 && nu[k - 1] > from) {
        nu[k] = nu[k - 1];
        k--;
    }
    nu[k] = from;
    dag->up[to] = nu;
    return 0;
}

enum { WHITE = 0, GREY = 1, BLACK = 2 };

static mr_status visit(mr_dag *dag, size_t i, int *color, size_t *stack, size_t depth, size_t *n_order,
                       mr_error *err)
{
    color[i] = GREY;
    stack[depth] = i;
    for (size_t k = 0; k < dag->n_up[i]; k++) {
        size_t u = dag->up[i][k];
        if (color[u] == GREY) {
            /* Cycle: u ... i -> u, printed in data-flow order. */
            mr_buf b;
            mr_buf_init(&b);
            size_t start = depth;
            while (stack[start] != u) start--;
            mr_status rc = MR_OK;
            for (size_t d = start; d <= depth && rc == MR_OK; d++)
                rc = mr_buf_printf(&b, "%s <- ", dag->spec->stages[stack[d]].name);
            if (rc == MR_OK) rc = mr_buf_puts(&b, dag->spec->stages[u].name);
            if (rc != MR_OK) { /* a cycle named by half is a wrong message */
                mr_buf_free(&b);
                return MR_ERR(err, MR_E_NOMEM, "out of memory describing a cycle");
            }
            rc = MR_ERR(err, MR_E_SCHEMA, "the pipeline has a cycle: %s", b.data);
            mr_error_at(err, dag->spec->path, dag->spec->stages[u].line, dag->spec->stages[u].col);
            mr_error_hint(err, "a stage cannot depend, directly or not, on its own outputs");
            mr_buf_free(&b);
            return rc;
        }
        if (color[u] == WHITE) {
            mr_status rc = visit(dag, u, color, stack, depth + 1, n_order, err);
            if (rc != MR_OK) return rc;
        }
    }
    color[i] = BLACK;
    dag->order[(*n_order)++] = i;
    return MR_OK;
}

mr_status mr_dag_build(const mr_spec *spec, mr_dag **out, mr_error *err)
{
    mr_status rc = MR_OK;
    int *color = NULL;
    size_t *stack = NULL;
    mr_dag *dag = mr_calloc(1, sizeof(*dag));
    if (!dag) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    size_t n = spec->n_stages;
    dag->spec = spec;
    dag->n = n;
    dag->paths = mr_calloc(n ? n : 1, sizeof(*dag->paths));
    dag->up = mr_calloc(n ? n : 1, sizeof(*dag->up));
    dag->n_up = mr_calloc(n ? n : 1, sizeof(*dag->n_up));
    dag->order = mr_calloc(n ? n : 1, sizeof(*dag->order));
    color = mr_calloc(n ? n : 1, sizeof(*color));
    stack = mr_calloc(n ? n : 1, sizeof(*stack));
    if (!dag->paths || !dag->up || !dag->n_up || !dag->order || !color || !stack) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    rc = collect_paths(spec, dag->paths, err);
    if (rc != MR_OK) goto done;
    for (size_t i = 0; i < n && rc == MR_OK; i++) {
        const mr_stage_spec *s = &spec->stages[i];
        for (size_t r = 0; r < s->n_refs; r++) {
            ssize_t j = mr__dag_index(dag, s->refs[r].stage);
            if (j < 0) {
                rc = MR_ERR(err, MR_E_NOT_FOUND, "stage '%s' refers to unknown stage '%s'", s->name, s->refs[r].stage);
                mr_error_at(err, spec->path, s->refs[r].line, s->refs[r].col);
                break;
            }
            if (add_edge(dag, i, (size_t)j) != 0) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        for (size_t d = 0; d < dag->paths[i].n_deps && rc == MR_OK; d++) {
            const char *dep = dag->paths[i].deps[d];
            for (size_t j = 0; j < n; j++) {
                if (j == i) continue;
                for (size_t o = 0; o < dag->paths[j].n_outs; o++) {
                    const char *outp = dag->paths[j].outs[o];
                    if (mr__path_within(dep, outp) || mr__path_within(outp, dep)) {
                        if (add_edge(dag, i, j) != 0) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                        break;
                    }
                }
            }
        }
    }
    if (rc != MR_OK) goto done;
    size_t n_order = 0;
    for (size_t i = 0; i < n && rc == MR_OK; i++)
        if (color[i] == WHITE) rc = visit(dag, i, color, stack, 0, &n_order, err);
    if (rc != MR_OK) goto done;
    /* No cycle: the order is Kahn's, always taking the ready stage that comes
     * first in the file, so independent stages start in file order. color[]
     * is reused as "placed". */
    for (size_t i = 0; i < n; i++) color[i] = 0;
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < n; i++) {
            if (color[i]) continue;
            int ready = 1;
            for (size_t u = 0; u < dag->n_up[i] && ready; u++) ready = color[dag->up[i][u]];
            if (ready) {
                color[i] = 1;
                dag->order[k] = i;
                break;
            }
        }
    }
done:
    mr_free(color);
    mr_free(stack);
    if (rc != MR_OK) {
        mr_dag_free(dag);
        return rc;
    }
    *out = dag;
    return MR_OK;
}

mr_status mr_dag_render(const mr_dag *dag, int dot, mr_buf *out)
{
    mr_status rc = MR_OK;
    if (dot) {
        rc = mr_buf_puts(out, "digraph millrace {\n  rankdir=LR;\n  node [shape=box, style=rounded];\n");
        for (size_t k = 0; k < dag->n && rc == MR_OK; k++) {
            size_t i = dag->order[k];
            const mr_stage_spec *s = &dag->spec->stages[i];
            rc = mr_buf_printf(out, "  \"%s\" [label=\"%s\\n(%s)\"];\n", s->name, s->name, s->op->name);
            for (size_t u = 0; u < dag->n_up[i] && rc == MR_OK; u++)
                rc = mr_buf_printf(out, "  \"%s\" -> \"%s\";\n", dag->spec->stages[dag->up[i][u]].name, s->name);
        }
        if (rc == MR_OK) rc = mr_buf_puts(out, "}\n");
        return rc;
    }
    for (size_t k = 0; k < dag->n && rc == MR_OK; k++) {
        size_t i = dag->order[k];
        const mr_stage_spec *s = &dag->spec->stages[i];
        rc = mr_buf_printf(out, "%s (%s)", s->name, s->op->name);
        if (dag->n_up[i]) {
            rc = mr_buf_puts(out, " <- ");
            for (size_t u = 0; u < dag->n_up[i] && rc == MR_OK; u++)
                rc = mr_buf_printf(out, "%s%s", u ? ", " : "", dag->spec->stages[dag->up[i][u]].name);
        }
        if (rc == MR_OK) rc = mr_buf_puts(out, "\n");
    }
    return rc;
}
