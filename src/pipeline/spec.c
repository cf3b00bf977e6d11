/* millrace.yaml -> mr_spec: top-level checks, -S overrides on params,
 * ${params.X} interpolation and ${stages.X} reference recording, per-op key
 * and type validation, resources. YAML reading itself is in yaml.c; cycle
 * detection belongs to the DAG. */
#include "millrace/spec.h"
#include "pipeline_int.h"
#include "millrace/remote.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_MAX_BYTES ((size_t)16 << 20)

typedef struct str_list {
    char **items;
    size_t n, cap;
} str_list;

typedef struct ctx {
    const char *path;        /* file name for messages (may be NULL) */
    mr_spec *spec;
    const mr_value *stages;  /* the raw `stages` mapping (names for ${stages.X}) */
    mr_stage_spec *stage;    /* stage being loaded */
    str_list paths;          /* its param paths so far */
    size_t refs_cap;
    mr_error *err;
} ctx;

static mr_status strs_push(str_list *l, const char *s)
{
    mr_status st = MR_OK;
    char *d = mr_strdup(s);
    if (!d) {
        st = MR_E_NOMEM;
        goto done;
    }
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 8;
        char **ni = mr_realloc(l->items, ncap * sizeof(*ni));
        if (!ni) {
            mr_free(d);
            st = MR_E_NOMEM;
            goto done;
        }
        l->items = ni;
        l->cap = ncap;
    }
    l->items[l->n++] = d;
done:
    return st;
}

static void strs_free(char **items, size_t n)
{
    for (size_t i = 0; i < n; i++) mr_free(items[i]);
    mr_free(items);
}

static mr_status oom(mr_error *err) { return MR_ERR(err, MR_E_NOMEM, "out of memory loading spec"); }

/* "did you mean 'PREFIXc'?" for the closest candidate, else `otherwise`
 * (may be NULL). */
static void hint_closest(mr_error *err, const char *word, const char *const *cands, size_t n,
                         const char *prefix, const char *otherwise)
{
    const char *c = mr_closest(word, cands, n);
    if (c)
        mr_error_hint(err, "did you mean '%s%s'?", prefix, c);
    else if (otherwise)
        mr_error_hint(err, "%s", otherwise);
}

/* Hint among the leaf paths of params. */
static void hint_param(mr_error *err, const mr_value *params, const char *word, const char *prefix)
{
    char **leaves = NULL;
    size_t n = 0;
    if (mr_value_leaf_paths(params, &leaves, &n) == MR_OK)
        hint_closest(err, word, (const char *const *)leaves, n, prefix, NULL);
    strs_free(leaves, n);
}

/* ---- overrides --------------------------------------------------------- */

static mr_status ov_fail(mr_error *err, mr_status code, const char *text, const char *path,
                         const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static mr_status ov_fail(mr_error *err, mr_status code, const char *text, const char *path,
                         const char *fmt, ...)
{
    char msg[MR_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    MR_ERR(err, code, "-S %s: %s", text, msg);
    mr_error_key(err, path);
    return code;
}

static int valid_path(const char *p)
{
    size_t n = strlen(p);
    return n && p[0] != '.' && p[n - 1] != '.' && !strstr(p, "..");
}

/* Types `vtext` as the override value for `old` (NULL when adding). */
static mr_status override_value(const char *text, const char *path, const mr_value *old,
                                const char *vtext, mr_value **out, mr_error *err)
{
    mr_status st = MR_OK;
    mr_value *nv = NULL;
    int is_str = old && old->kind == MR_V_STR;
    if (!is_str && (vtext[0] == '[' || vtext[0] == '{')) {
        mr_error perr;
        mr_error_init(&perr);
        st = mr_yaml_parse(vtext, strlen(vtext), NULL, &nv, &perr);
        if (st == MR_E_NOMEM) {
            oom(err);
            goto done;
        }
        if (st != MR_OK) {
            st = ov_fail(err, MR_E_INVALID_ARG, text, path, "invalid YAML flow value: %s", perr.msg);
            goto done;
        }
    } else {
        nv = is_str ? mr_value_new_str(vtext) : mr_value_from_scalar(vtext, 0);
    }
    if (!nv) {
        st = oom(err);
        goto done;
    }
    if (!old || old->kind == MR_V_NULL || old->kind == MR_V_STR) goto done;
    int ok = nv->kind == old->kind;
    if (old->kind == MR_V_FLOAT && nv->kind == MR_V_INT) {
        nv->kind = MR_V_FLOAT;
        nv->u.f = (double)nv->u.i;
        ok = 1;
    }
    if (!ok && (old->kind == MR_V_MAP || old->kind == MR_V_SEQ)) {
        st = ov_fail(err, MR_E_INVALID_ARG, text, path,
                     "param '%s' is a %s; override its entries instead (or give a YAML flow %s)",
                     path, mr_vkind_name(old->kind), old->kind == MR_V_MAP ? "{...}" : "[...]");
        goto done;
    }
    if (!ok) {
        st = ov_fail(err, MR_E_INVALID_ARG, text, path, "expected %s, got %s",
                     mr_vkind_name(old->kind), mr_vkind_name(nv->kind));
        goto done;
    }
done:
    if (st == MR_OK) {
        *out = nv;
    } else {
        mr_value_free(nv);
    }
    return st;
}

static mr_status apply_override(mr_value *params, const char *text, mr_error *err)
{
    mr_status st = MR_OK;
    char *path = NULL;
    mr_value *nv = NULL;
    const char *p = text[0] == '+' ? text + 1 : text;
    int add = p != text;
    const char *eq = strchr(p, '=');
    if (!eq) {
        st = ov_fail(err, MR_E_INVALID_ARG, text, NULL, "expected PATH=VALUE (e.g. -S train.rounds=300)");
        goto done;
    }
    path = mr_strndup(p, (size_t)(eq - p));
    if (!path) {
        st = oom(err);
        goto done;
    }
    if (!valid_path(path)) {
        st = ov_fail(err, MR_E_INVALID_ARG, text, path, "invalid param path '%s'", path);
        goto done;
    }
    const mr_value *old = mr_value_get_path(params, path);
    if (!old && !add) {
        st = ov_fail(err, MR_E_NOT_FOUND, text, path, "no param '%s' in the spec", path);
        hint_param(err, params, path, "");
        mr_error_hint(err, "write -S +%s to add a new param", text);
        goto done;
    }
    st = override_value(text, path, old, eq + 1, &nv, err);
    if (st != MR_OK) goto done;
    st = mr_value_set_path(params, path, nv);
    nv = NULL;
    if (st == MR_E_INVALID_ARG)
        ov_fail(err, st, text, path, "cannot add '%s': a parent of it is not a mapping", path);
    else if (st != MR_OK)
        oom(err);
done:
    mr_value_free(nv);
    mr_free(path);
    return st;
}

/* ---- interpolation ----------------------------------------------------- */

static mr_status record_ref(ctx *c, const char *name, size_t name_len, const char *output,
                            const mr_value *at)
{
    mr_status st = MR_OK;
    mr_stage_spec *sg = c->stage;
    if (sg->n_refs == c->refs_cap) {
        size_t ncap = c->refs_cap ? c->refs_cap * 2 : 4;
        mr_stage_ref *nr = mr_realloc(sg->refs, ncap * sizeof(*nr));
        if (!nr) {
            st = oom(c->err);
            goto done;
        }
        sg->refs = nr;
        c->refs_cap = ncap;
    }
    mr_stage_ref *r = &sg->refs[sg->n_refs];
    memset(r, 0, sizeof(*r));
    r->stage = mr_strndup(name, name_len);
    r->output = output ? mr_strdup(output) : NULL;
    r->line = at->line;
    r->col = at->col;
    sg->n_refs++; /* counted even when partial, so mr_spec_free releases it */
    if (!r->stage || (output && !r->output)) st = oom(c->err);
done:
    return st;
}

/* ${stages.NAME[.OUTPUT]}: ref points past "stages." and has length len. */
static mr_status stage_ref(ctx *c, const char *ref, size_t len, const mr_value *at)
{
    mr_status st = MR_OK;
    char *whole = mr_strndup(ref, len);
    if (!whole) {
        st = oom(c->err);
        goto done;
    }
    char *dot = strchr(whole, '.');
    if (dot) *dot = '\0';
    const char *output = dot ? dot + 1 : NULL;
    const char *name = c->stage->name;
    if (!whole[0] || (output && !output[0])) {
        st = mr_error_set_at(c->err, c->path, at->line, at->col, MR_E_SCHEMA,
                     "stage '%s': malformed reference '${stages.%.*s}'", name, (int)len, ref);
        mr_error_hint(c->err, "write ${stages.NAME} or ${stages.NAME.OUTPUT}");
        goto done;
    }
    if (!strcmp(whole, name)) {
        st = mr_error_set_at(c->err, c->path, at->line, at->col, MR_E_SCHEMA, "stage '%s' refers to itself",
                     name);
        goto done;
    }
    if (!mr_value_get(c->stages, whole)) {
        st = mr_error_set_at(c->err, c->path, at->line, at->col, MR_E_NOT_FOUND,
                     "stage '%s': reference to unknown stage '%s'", name, whole);
        const char **cands = mr_calloc(c->stages->n ? c->stages->n : 1, sizeof(*cands));
        size_t n = 0;
        for (size_t i = 0; cands && i < c->stages->n; i++)
            if (strcmp(c->stages->keys[i], name)) cands[n++] = c->stages->keys[i];
        if (cands) hint_closest(c->err, whole, cands, n, "", NULL);
        mr_free(cands);
        goto done;
    }
    st = record_ref(c, whole, strlen(whole), output, at);
done:
    mr_free(whole);
    return st;
}

/* ${params.PATH}: appends its text to b, or sets *repl to a typed clone when
 * the reference is the whole string. */
static mr_status param_ref(ctx *c, const char *ref, size_t len, int whole, const mr_value *at,
                           mr_buf *b, mr_value **repl)
{
    mr_status st = MR_OK;
    const char *name = c->stage->name;
    char *path = mr_strndup(ref, len);
    if (!path) {
        st = oom(c->err);
        goto done;
    }
    const mr_value *pv = mr_value_get_path(c->spec->params, path);
    if (!pv) {
        st = mr_error_set_at(c->err, c->path, at->line, at->col, MR_E_NOT_FOUND,
                     "stage '%s': unknown param 'params.%s'", name, path);
        hint_param(c->err, c->spec->params, path, "params.");
        goto done;
    }
    st = strs_push(&c->paths, path);
    if (st != MR_OK) {
        oom(c->err);
        goto done;
    }
    if (whole) {
        *repl = mr_value_clone(pv);
        if (!*repl) {
            st = oom(c->err);
            goto done;
        }
        (*repl)->line = at->line;
        (*repl)->col = at->col;
        goto done;
    }
    if (pv->kind == MR_V_MAP || pv->kind == MR_V_SEQ) {
        st = mr_error_set_at(c->err, c->path, at->line, at->col, MR_E_SCHEMA,
                     "stage '%s': cannot embed %s param 'params.%s' in a string", name,
                     mr_vkind_name(pv->kind), path);
        mr_error_hint(c->err, "use '${params.%s}' as the whole value to pass the %s", path,
                      mr_vkind_name(pv->kind));
        goto done;
    }
    st = mr_value_scalar_text(pv, b);
    if (st != MR_OK) oom(c->err);
done:
    mr_free(path);
    return st;
}

/* Interpolates one string node; *repl gets a replacement node if anything
 * changed (NULL otherwise). */
static mr_status interp_str(ctx *c, const mr_value *s, mr_value **repl)
{
    mr_status st = MR_OK;
    mr_buf b;
    int changed = 0;
    const char *str = s->str;
    const char *name = c->stage->name;
    mr_buf_init(&b);
    *repl = NULL;
    if (!strstr(str, "${")) goto done;
    for (const char *p = str; st == MR_OK && *p;) {
        if (p[0] == '$' && p[1] == '$' && p[2] == '{') {
            st = mr_buf_puts(&b, "${");
            if (st != MR_OK) oom(c->err);
            changed = 1;
            p += 3;
            continue;
        }
        if (p[0] != '$' || p[1] != '{') {
            st = mr_buf_append(&b, p, 1);
            if (st != MR_OK) oom(c->err);
            p++;
            continue;
        }
        const char *ref = p + 2;
        const char *end = strchr(ref, '}');
        if (!end) {
            st = mr_error_set_at(c->err, c->path, s->line, s->col, MR_E_SCHEMA,
                         "stage '%s': unterminated '${' in \"%s\"", name, str);
            mr_error_hint(c->err, "close it with '}', or write '$${' for a literal '${'");
            break;
        }
        size_t len = (size_t)(end - ref);
        int whole = p == str && end[1] == '\0';
        if (len > 7 && !strncmp(ref, "params.", 7)) {
            st = param_ref(c, ref + 7, len - 7, whole, s, &b, repl);
            changed = 1;
            if (st == MR_OK && *repl) goto done;
        } else if (len > 7 && !strncmp(ref, "stages.", 7)) {
            st = stage_ref(c, ref + 7, len - 7, s);
            if (st == MR_OK) {
                st = mr_buf_append(&b, p, (size_t)(end + 1 - p));
                if (st == MR_E_NOMEM) oom(c->err);
            }
        } else {
            st = mr_error_set_at(c->err, c->path, s->line, s->col, MR_E_SCHEMA,
                         "stage '%s': unknown reference '${%.*s}', expected ${params.PATH} or "
                         "${stages.NAME}",
                         name, (int)len, ref);
            mr_error_hint(c->err, "write '$${' for a literal '${'");
        }
        p = end + 1;
    }
    if (st != MR_OK || !changed) goto done;
    *repl = mr_value_new_str(b.data ? b.data : "");
    if (!*repl) {
        st = oom(c->err);
        goto done;
    }
    (*repl)->line = s->line;
    (*repl)->col = s->col;
done:
    if (st == MR_E_LIMIT) MR_ERR(c->err, st, "stage '%s': interpolated string too long", name);
    mr_buf_free(&b);
    return st;
}

static mr_status interp(ctx *c, mr_value *node)
{
    mr_status st = MR_OK;
    for (size_t i = 0; st == MR_OK && i < node->n; i++) {
        mr_value *item = node->items[i];
        if (item->kind == MR_V_STR && item->str) {
            mr_value *repl = NULL;
            st = interp_str(c, item, &repl);
            if (repl) {
                mr_value_free(item);
                node->items[i] = repl;
            }
        } else if (item->kind == MR_V_MAP || item->kind == MR_V_SEQ) {
            st = interp(c, item);
        }
    }
    return st;
}

/* ---- per-stage validation ---------------------------------------------- */

static int valid_stage_name(const char *s)
{
    int ok = (s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z') || s[0] == '_';
    for (const char *p = s + 1; ok && *p; p++)
        ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
             *p == '_' || *p == '-';
    return ok;
}

/* "a string or a list of strings" from a MR_PT_* set. */
static void describe_types(unsigned types, char *buf, size_t buf_len)
{
    static const struct {
        unsigned bit;
        const char *text;
    } names[] = {{MR_PT_STR, "a string"}, {MR_PT_INT, "an int"},     {MR_PT_FLOAT, "a number"},
                 {MR_PT_BOOL, "a bool"},  {MR_PT_SEQ, "a list"},     {MR_PT_MAP, "a mapping"},
                 {MR_PT_STRSEQ, "a list of strings"}};
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (!(types & names[i].bit) || off >= buf_len) continue;
        if (names[i].bit == MR_PT_INT && (types & MR_PT_FLOAT)) continue;
        int k = snprintf(buf + off, buf_len - off, "%s%s", off ? " or " : "", names[i].text);
        if (k > 0) off += (size_t)k;
    }
}

static mr_status check_type(ctx *c, const char *key, const mr_value *v, unsigned types)
{
    mr_status st = MR_OK;
    char want[128];
    const mr_value *bad = NULL;
    int ok = (types & MR_PT_ANY) == MR_PT_ANY;
    ok = ok || ((types & (MR_PT_STR | MR_PT_STRSEQ)) && v->kind == MR_V_STR);
    ok = ok || ((types & MR_PT_INT) && v->kind == MR_V_INT);
    ok = ok || ((types & MR_PT_FLOAT) && (v->kind == MR_V_FLOAT || v->kind == MR_V_INT));
    ok = ok || ((types & MR_PT_BOOL) && v->kind == MR_V_BOOL);
    ok = ok || ((types & MR_PT_SEQ) && v->kind == MR_V_SEQ);
    ok = ok || ((types & MR_PT_MAP) && v->kind == MR_V_MAP);
    if (!ok && (types & MR_PT_STRSEQ) && v->kind == MR_V_SEQ) {
        ok = 1;
        for (size_t i = 0; ok && i < v->n; i++) {
            if (v->items[i]->kind != MR_V_STR) {
                ok = 0;
                bad = v->items[i];
            }
        }
    }
    if (ok) goto done;
    describe_types(types, want, sizeof(want));
    if (bad)
        st = mr_error_set_at(c->err, c->path, bad->line, bad->col, MR_E_SCHEMA,
                     "stage '%s': key '%s' expected %s, got a list containing %s", c->stage->name,
                     key, want, mr_vkind_name(bad->kind));
    else
        st = mr_error_set_at(c->err, c->path, v->line, v->col, MR_E_SCHEMA,
                     "stage '%s': key '%s' expected %s, got %s", c->stage->name, key, want,
                     mr_vkind_name(v->kind));
done:
    return st;
}

/* "512M", "2G", "1.5G", "100K", "4096" -> bytes (binary multiples). */
static int parse_mem(const char *s, uint64_t *out)
{
    int ok = 0;
    const char *p = s;
    size_t n_digits = 0;
    while (*p >= '0' && *p <= '9') {
        p++;
        n_digits++;
    }
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (!n_digits) goto done;
    double num = strtod(s, NULL);
    double mult = 1.0;
    switch (*p) {
    case 'k': case 'K': mult = 1024.0; p++; break;
    case 'm': case 'M': mult = 1048576.0; p++; break;
    case 'g': case 'G': mult = 1073741824.0; p++; break;
    case 't': case 'T': mult = 1099511627776.0; p++; break;
    default: break;
    }
    if (mult > 1.0 && *p == 'i') p++;
    if (*p == 'B' || *p == 'b') p++;
    double bytes = num * mult;
    if (*p || !(bytes >= 1.0) || bytes >= 9.2e18) goto done;
    *out = (uint64_t)bytes;
    ok = 1;
done:
    return ok;
}

static mr_status parse_resources(ctx *c, const mr_value *res)
{
    static const char *const keys[] = {"cpus", "mem", "time", "gpus", "partition", "oom_retries"};
    mr_status st = MR_OK;
    mr_stage_spec *sg = c->stage;
    /* A value that came from a ${params.x} reference is still checked here. */
#define RES_BAD(fmt, ...)                                                                                   \
    do {                                                                                                    \
        st = mr_error_set_at(c->err, c->path, v->line, v->col, MR_E_SCHEMA, "stage '%s': resources." fmt,   \
                             sg->name, __VA_ARGS__);                                                        \
    } while (0)
    for (size_t i = 0; st == MR_OK && i < res->n; i++) {
        const char *k = res->keys[i];
        const mr_value *v = res->items[i];
        if (!strcmp(k, "cpus")) {
            double d = v->kind == MR_V_INT ? (double)v->u.i : v->kind == MR_V_FLOAT ? v->u.f : -1.0;
            if (!(d > 0) || !isfinite(d)) {
                st = mr_error_set_at(c->err, c->path, v->line, v->col, MR_E_SCHEMA,
                             "stage '%s': resources.cpus must be a number > 0, got %s%s%s",
                             sg->name, v->kind == MR_V_STR ? "\"" : "",
                             v->str ? v->str : mr_vkind_name(v->kind), v->kind == MR_V_STR ? "\"" : "");
                break;
            }
            sg->cpus = d;
        } else if (!strcmp(k, "mem")) {
            uint64_t bytes = 0;
            int ok = (v->kind == MR_V_INT && v->u.i > 0) || (v->kind == MR_V_STR && parse_mem(v->str, &bytes));
            if (!ok) {
                st = mr_error_set_at(c->err, c->path, v->line, v->col, MR_E_SCHEMA,
                             "stage '%s': resources.mem must be a size like 512M, 2G or a byte "
                             "count > 0, got %s%s%s",
                             sg->name, v->kind == MR_V_STR ? "\"" : "",
                             v->str ? v->str : mr_vkind_name(v->kind), v->kind == MR_V_STR ? "\"" : "");
                break;
            }
            sg->mem_bytes = v->kind == MR_V_INT ? (uint64_t)v->u.i : bytes;
        } else if (!strcmp(k, "time")) {
            /* Slurm's forms: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS */
            long minutes = -1;
            if (v->kind == MR_V_INT && v->u.i > 0) minutes = (long)v->u.i;
            else if (v->kind == MR_V_STR) minutes = mr__slurm_time_minutes(v->str);
            if (minutes <= 0) {
                RES_BAD("time must be minutes or [D-]HH:MM:SS (Slurm's --time), got %s", v->str ? v->str : mr_vkind_name(v->kind));
                break;
            }
            snprintf(sg->time, sizeof(sg->time), "%s", v->kind == MR_V_STR ? v->str : "");
            if (v->kind == MR_V_INT) snprintf(sg->time, sizeof(sg->time), "%lld", (long long)v->u.i);
        } else if (!strcmp(k, "gpus")) {
            if (v->kind != MR_V_INT || v->u.i < 0 || v->u.i > 1024) {
                RES_BAD("gpus must be a whole number 0..1024, got %s", v->str ? v->str : mr_vkind_name(v->kind));
                break;
            }
            sg->gpus = (int)v->u.i;
        } else if (!strcmp(k, "oom_retries")) {
            if (v->kind != MR_V_INT || v->u.i < 0 || v->u.i > 10) {
                RES_BAD("oom_retries must be a whole number 0..10, got %s", v->str ? v->str : mr_vkind_name(v->kind));
                break;
            }
            sg->oom_retries = (int)v->u.i;
        } else if (!strcmp(k, "partition")) {
            int okp = v->kind == MR_V_STR && v->str[0] && strlen(v->str) < sizeof(sg->partition);
            for (const char *q = okp ? v->str : ""; okp && *q; q++)
                okp = (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') || *q == '_' || *q == '-' ||
                      *q == '.' || *q == ',';
            if (!okp) {
                RES_BAD("partition must be a Slurm partition name (letters, digits, '_', '-', '.'), got %s",
                        v->str ? v->str : mr_vkind_name(v->kind));
                break;
            }
            snprintf(sg->partition, sizeof(sg->partition), "%s", v->str);
        } else {
            long line = res->key_lines[i] ? res->key_lines[i] : res->line;
            long col = res->key_lines[i] ? res->key_cols[i] : res->col;
            st = mr_error_set_at(c->err, c->path, line, col, MR_E_SCHEMA,
                         "stage '%s': unknown key '%s' in resources", sg->name, k);
            hint_closest(c->err, k, keys, 6, "", "resources takes cpus, mem, time, gpus, partition and oom_retries");
        }
    }
#undef RES_BAD
    return st;
}

long mr__slurm_time_minutes(const char *s)
{
    long d = 0, f[3] = {0, 0, 0};
    int nf = 0;
    const char *p = s;
    const char *dash = strchr(s, '-');
    char *end;
    if (dash) {
        d = strtol(s, &end, 10);
        if (end != dash || d < 0 || d > 365) return -1;
        p = dash + 1;
    }
    while (*p) {
        if (*p < '0' || *p > '9' || nf == 3) return -1;
        f[nf++] = strtol(p, &end, 10);
        if (f[nf - 1] < 0 || f[nf - 1] > 100000) return -1;
        if (*end == ':') end++;
        else if (*end) return -1;
        p = end;
    }
    if (!nf) return -1;
    long m;
    if (dash) m = d * 1440 + f[0] * 60 + (nf > 1 ? f[1] : 0) + (nf > 2 && f[2] > 0); /* D-HH[:MM[:SS]] */
    else if (nf == 1) m = f[0];                                                     /* minutes */
    else if (nf == 2) m = f[0] + (f[1] > 0);                                        /* MM:SS */
    else m = f[0] * 60 + f[1] + (f[2] > 0);                                         /* HH:MM:SS */
    return m;
}

/* exec's `params:` list: declared param paths. */
static mr_status declared_params(ctx *c, const mr_value *v)
{
    mr_status st = MR_OK;
    size_t n = v->kind == MR_V_SEQ ? v->n : 1;
    for (size_t i = 0; st == MR_OK && i < n; i++) {
        const mr_value *item = v->kind == MR_V_SEQ ? v->items[i] : v;
        if (!mr_value_get_path(c->spec->params, item->str)) {
            st = mr_error_set_at(c->err, c->path, item->line, item->col, MR_E_NOT_FOUND,
                         "stage '%s': unknown param '%s' in 'params'", c->stage->name, item->str);
            hint_param(c->err, c->spec->params, item->str, "");
            break;
        }
        st = strs_push(&c->paths, item->str);
        if (st != MR_OK) oom(c->err);
    }
    return st;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Moves c->paths into the stage, sorted and unique. */
static void finish_paths(ctx *c)
{
    str_list *l = &c->paths;
    size_t n = 0;
    if (l->n) qsort(l->items, l->n, sizeof(*l->items), cmp_str);
    for (size_t i = 0; i < l->n; i++) {
        if (n && !strcmp(l->items[n - 1], l->items[i]))
            mr_free(l->items[i]);
        else
            l->items[n++] = l->items[i];
    }
    c->stage->param_paths = l->items;
    c->stage->n_param_paths = n;
    memset(l, 0, sizeof(*l));
}

static void hint_keys(ctx *c, const mr_op *op, const char *key)
{
    const char *cands[128] = {NULL};
    size_t n = 0;
    for (const mr_param_def *p = mr_stage_common_keys; p->name && n < 128; p++) cands[n++] = p->name;
    for (const mr_param_def *p = op->params; p && p->name && n < 128; p++) cands[n++] = p->name;
    const char *best = mr_closest(key, cands, n);
    char list[MR_ERR_MSG_MAX];
    size_t off = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n && off < sizeof(list); i++) {
        int k = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", cands[i]);
        if (k > 0) off += (size_t)k;
    }
    if (best)
        mr_error_hint(c->err, "did you mean '%s'?", best);
    else
        mr_error_hint(c->err, "op '%s' takes: %s", op->name, list);
}

static void hint_ops(mr_error *err, const char *word)
{
    size_t n = 0;
    const char *const *names = mr_op_names(&n);
    const char *best = mr_closest(word, names, n);
    char list[MR_ERR_MSG_MAX];
    size_t off = 0;
    list[0] = '\0';
    for (size_t i = 0; i < n && off < sizeof(list); i++) {
        int k = snprintf(list + off, sizeof(list) - off, "%s%s", i ? ", " : "", names[i]);
        if (k > 0) off += (size_t)k;
    }
    if (best)
        mr_error_hint(err, "did you mean '%s'?", best);
    else
        mr_error_hint(err, "known ops: %s", n ? list : "(none registered)");
}

/* Resolves the op and checks key names and required keys on the raw def. */
static mr_status check_keys(ctx *c, const mr_value *raw)
{
    mr_status st = MR_OK;
    mr_stage_spec *sg = c->stage;
    const mr_value *opv = mr_value_get(raw, "op");
    if (!opv) {
        st = mr_error_set_at(c->err, c->path, sg->line, sg->col, MR_E_SCHEMA,
                     "stage '%s': missing required key 'op'", sg->name);
        hint_ops(c->err, "");
        goto done;
    }
    if (opv->kind != MR_V_STR) {
        st = mr_error_set_at(c->err, c->path, opv->line, opv->col, MR_E_SCHEMA,
                     "stage '%s': key 'op' expected a string, got %s", sg->name,
                     mr_vkind_name(opv->kind));
        goto done;
    }
    sg->op = mr_op_find(opv->str);
    if (!sg->op) {
        st = mr_error_set_at(c->err, c->path, opv->line, opv->col, MR_E_SCHEMA,
                     "stage '%s': unknown op '%s'", sg->name, opv->str);
        hint_ops(c->err, opv->str);
        goto done;
    }
    for (size_t i = 0; i < raw->n; i++) {
        if (mr_op_param_find(sg->op, raw->keys[i])) continue;
        st = mr_error_set_at(c->err, c->path, raw->key_lines[i], raw->key_cols[i], MR_E_SCHEMA,
                     "stage '%s': unknown key '%s' for op '%s'", sg->name, raw->keys[i],
                     sg->op->name);
        hint_keys(c, sg->op, raw->keys[i]);
        goto done;
    }
    for (int pass = 0; pass < 2; pass++) {
        const mr_param_def *p = pass ? sg->op->params : mr_stage_common_keys;
        for (; p && p->name; p++) {
            if (!p->required || mr_value_get(raw, p->name)) continue;
            st = mr_error_set_at(c->err, c->path, sg->line, sg->col, MR_E_SCHEMA,
                         "stage '%s': missing required key '%s' for op '%s'", sg->name, p->name,
                         sg->op->name);
            mr_error_hint(c->err, "%s: %s", p->name, p->doc ? p->doc : "");
            goto done;
        }
    }
done:
    return st;
}

static mr_status load_stage(ctx *c, size_t idx)
{
    mr_status st = MR_OK;
    mr_stage_spec *sg = c->stage;
    const mr_value *raw = c->stages->items[idx];
    sg->cpus = 1.0;
    sg->line = c->stages->key_lines[idx];
    sg->col = c->stages->key_cols[idx];
    sg->name = mr_strdup(c->stages->keys[idx]);
    if (!sg->name) {
        st = oom(c->err);
        goto done;
    }
    if (!valid_stage_name(sg->name)) {
        st = mr_error_set_at(c->err, c->path, sg->line, sg->col, MR_E_SCHEMA, "invalid stage name '%s'",
                     sg->name);
        mr_error_hint(c->err, "stage names are letters, digits, '_' and '-', not starting with a "
                              "digit or '-'");
        goto done;
    }
    if (raw->kind != MR_V_MAP) {
        int at_key = !raw->line || raw->kind == MR_V_NULL;
        st = mr_error_set_at(c->err, c->path, at_key ? sg->line : raw->line, at_key ? sg->col : raw->col,
                     MR_E_SCHEMA,
                     "stage '%s': expected a mapping with an 'op' key, got %s", sg->name,
                     mr_vkind_name(raw->kind));
        goto done;
    }
    st = check_keys(c, raw);
    if (st != MR_OK) goto done;
    sg->def = mr_value_clone(raw);
    if (!sg->def) {
        st = oom(c->err);
        goto done;
    }
    st = interp(c, sg->def);
    for (size_t i = 0; st == MR_OK && i < sg->def->n; i++) {
        const mr_param_def *pd = mr_op_param_find(sg->op, sg->def->keys[i]);
        st = check_type(c, sg->def->keys[i], sg->def->items[i], pd->types);
    }
    if (st != MR_OK) goto done;
    const mr_value *res = mr_value_get(sg->def, "resources");
    if (res) st = parse_resources(c, res);
    const mr_value *declared = mr_value_get(sg->def, "params");
    if (st == MR_OK && declared && (sg->op->flags & MR_OP_DECLARED_PARAMS)) st = declared_params(c, declared);
    if (st == MR_OK && sg->op->validate) {
        /* The op checks its own definition now, before anything runs. */
        mr_op_validate_ctx vc = {sg->name, sg->def};
        st = sg->op->validate(&vc, c->err);
        if (st != MR_OK) {
            mr_error_stage(c->err, sg->name);
            mr_error_at(c->err, c->path, c->err->line ? c->err->line : sg->line, c->err->line ? c->err->col : sg->col);
            if (st != MR_E_NOMEM) st = MR_E_SCHEMA;
            c->err->code = st;
        }
    }
done:
    finish_paths(c);
    return st;
}

/* ---- ${stages.X.OUT}: X has an output OUT ------------------------------- */

/* The output names of stage s as the plan will have them (normalised paths
 * for ops that write the workspace). Up to max names, borrowed or, for
 * paths, copied into owned[] (caller frees); returns how many there are,
 * or (size_t)-1 when memory ran out (a list with a name missing would turn
 * into a wrong "has no output" error). */
static size_t stage_outputs(const mr_stage_spec *s, const char **names, char **owned, size_t max)
{
    size_t n = 0;
    if (s->op->flags & MR_OP_WORKSPACE_OUTPUTS) {
        static const char *const keys[] = {"outs", "metrics"};
        for (int q = 0; q < 2; q++) {
            const char **items = NULL;
            size_t ni = 0;
            mr_status st = mr_value_strings(s->def, keys[q], &items, &ni);
            if (st == MR_E_NOMEM) return (size_t)-1;
            if (st != MR_OK) continue; /* absent, or not strings: validate reports that */
            for (size_t k = 0; k < ni && n < max; k++) {
                if (strstr(items[k], "${")) continue;
                uint64_t oom0 = mr_alloc_failures_here();
                char *p = mr_path_normalize(items[k], 0);
                if (!p && mr_alloc_failures_here() != oom0) {
                    mr_free(items);
                    return (size_t)-1;
                }
                if (!p) continue; /* escapes the workspace, or absolute: validate reports it */
                owned[n] = p;
                names[n++] = p;
            }
            mr_free(items);
        }
        return n;
    }
    if (s->op->outputs_of) return s->op->outputs_of(s->def, names, max);
    if (!s->op->outputs) {
        names[0] = "out";
        return 1;
    }
    for (const char *const *o = s->op->outputs; *o; o++) {
        if (n < max) names[n] = *o;
        n++;
    }
    return n;
}

/* Every ${stages.X.OUT} names an output X has; ${stages.X.FILE.PATH}, a
 * value read from one of X's outputs, is checked when X has run. */
static mr_status check_ref_outputs(ctx *c, const mr_stage_spec *sg)
{
    mr_status st = MR_OK;
    for (size_t r = 0; st == MR_OK && r < sg->n_refs; r++) {
        const mr_stage_ref *ref = &sg->refs[r];
        const mr_stage_spec *target = mr_spec_stage(c->spec, ref->stage);
        if (!ref->output || !target) continue;
        enum { MAX_OUTS = 64 };
        const char *names[MAX_OUTS];
        char *owned[MAX_OUTS] = {NULL};
        size_t n = stage_outputs(target, names, owned, MAX_OUTS);
        if (n == (size_t)-1) {
            for (size_t k = 0; k < MAX_OUTS; k++) mr_free(owned[k]);
            return MR_ERR(c->err, MR_E_NOMEM, "out of memory checking ${stages.%s.%s}", ref->stage, ref->output);
        }
        if (n > MAX_OUTS) n = MAX_OUTS;
        int found = 0;
        for (size_t k = 0; k < n && !found; k++) found = !strcmp(names[k], ref->output);
        if (!found && !strchr(ref->output, '.')) {
            char list[MR_ERR_MSG_MAX];
            size_t off = 0;
            list[0] = '\0';
            for (size_t k = 0; k < n && off < sizeof(list); k++) {
                int w = snprintf(list + off, sizeof(list) - off, "%s%s", k ? ", " : "", names[k]);
                if (w > 0) off += (size_t)w;
            }
            st = mr_error_set_at(c->err, c->path, ref->line, ref->col, MR_E_SCHEMA,
                         "stage '%s': ${stages.%s.%s}: stage '%s' (op %s) has no output '%s'", sg->name, ref->stage,
                         ref->output, ref->stage, target->op->name, ref->output);
            const char *best = mr_closest(ref->output, names, n);
            if (best)
                mr_error_hint(c->err, "did you mean '${stages.%s.%s}'? its outputs: %s", ref->stage, best, list);
            else if (n)
                mr_error_hint(c->err, "its outputs: %s (or ${stages.%s} for all of them)", list, ref->stage);
            else
                mr_error_hint(c->err, "stage '%s' declares no outputs", ref->stage);
        }
        for (size_t k = 0; k < MAX_OUTS; k++) mr_free(owned[k]);
    }
    return st;
}

/* ---- top level --------------------------------------------------------- */

static mr_status check_top(ctx *c, const mr_value *root)
{
    static const char *const top_keys[] = {"params", "stages", "entities", "feature_views", "feature_services", "remotes"};
    mr_status st = MR_OK;
    if (root->kind != MR_V_MAP) {
        st = mr_error_set_at(c->err, c->path, root->line ? root->line : 1, root->line ? root->col : 1,
                     MR_E_SCHEMA, "expected a mapping with 'stages' (and optional 'params'), got %s",
                     root->kind == MR_V_NULL ? "an empty document" : mr_vkind_name(root->kind));
        goto done;
    }
    for (size_t i = 0; i < root->n; i++) {
        size_t k = 0;
        while (k < 6 && strcmp(root->keys[i], top_keys[k])) k++;
        if (k < 6) continue;
        st = mr_error_set_at(c->err, c->path, root->key_lines[i], root->key_cols[i], MR_E_SCHEMA,
                     "unknown top-level key '%s'", root->keys[i]);
        hint_closest(c->err, root->keys[i], top_keys, 6, "",
                     "top-level keys are 'params', 'stages', 'remotes', and the feature store's 'entities', "
                     "'feature_views' and 'feature_services'");
        goto done;
    }
    const mr_value *params = mr_value_get(root, "params");
    if (params && params->kind != MR_V_MAP && params->kind != MR_V_NULL) {
        st = mr_error_set_at(c->err, c->path, params->line, params->col, MR_E_SCHEMA,
                     "'params' must be a mapping, got %s", mr_vkind_name(params->kind));
        goto done;
    }
    const mr_value *stages = mr_value_get(root, "stages");
    if (!stages) {
        st = mr_error_set_at(c->err, c->path, 1, 1, MR_E_SCHEMA, "missing required top-level key 'stages'");
        goto done;
    }
    if (stages->kind != MR_V_MAP) {
        st = mr_error_set_at(c->err, c->path, stages->line, stages->col, MR_E_SCHEMA,
                     "'stages' must be a mapping of stage name to definition, got %s",
                     mr_vkind_name(stages->kind));
        goto done;
    }
done:
    return st;
}

mr_status mr_spec_parse(const char *text, size_t len, const char *path,
                        const char *const *overrides, size_t n_overrides, mr_spec **out,
                        mr_error *err)
{
    mr_status st = MR_OK;
    ctx c;
    memset(&c, 0, sizeof(c));
    c.path = path;
    c.err = err;
    *out = NULL;
    mr_spec *spec = mr_calloc(1, sizeof(*spec));
    if (!spec) {
        st = oom(err);
        goto done;
    }
    c.spec = spec;
    if (path) {
        spec->path = mr_strdup(path);
        if (!spec->path) {
            st = oom(err);
            goto done;
        }
    }
    if (n_overrides) {
        spec->overrides = mr_calloc(n_overrides, sizeof(*spec->overrides));
        if (!spec->overrides) {
            st = oom(err);
            goto done;
        }
        for (size_t i = 0; i < n_overrides; i++) {
            spec->overrides[i] = mr_strdup(overrides[i]);
            spec->n_overrides++;
            if (!spec->overrides[i]) {
                st = oom(err);
                goto done;
            }
        }
    }
    st = mr_yaml_parse(text, len, path, &spec->root, err);
    if (st == MR_OK) st = check_top(&c, spec->root);
    if (st == MR_OK) st = mr__spec_expand_features(spec->root, path, err); /* views named by stages, written inline */
    if (st == MR_OK) st = mr_remotes_check(spec->root, path, err);
    if (st != MR_OK) goto done;
    const mr_value *params = mr_value_get(spec->root, "params");
    spec->params = params && params->kind == MR_V_MAP ? mr_value_clone(params) : mr_value_new(MR_V_MAP);
    if (!spec->params) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; st == MR_OK && i < n_overrides; i++)
        st = apply_override(spec->params, overrides[i], err);
    if (st != MR_OK) goto done;
    c.stages = mr_value_get(spec->root, "stages");
    spec->stages = mr_calloc(c.stages->n ? c.stages->n : 1, sizeof(*spec->stages));
    if (!spec->stages) {
        st = oom(err);
        goto done;
    }
    for (size_t i = 0; st == MR_OK && i < c.stages->n; i++) {
        c.stage = &spec->stages[i];
        c.refs_cap = 0;
        spec->n_stages++;
        st = load_stage(&c, i);
    }
    for (size_t i = 0; st == MR_OK && i < spec->n_stages; i++) st = check_ref_outputs(&c, &spec->stages[i]);
done:
    if (st == MR_OK) {
        *out = spec;
    } else {
        mr_spec_free(spec);
    }
    return st;
}

mr_status mr_spec_load(const char *path, const char *const *overrides, size_t n_overrides,
                       mr_spec **out, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    *out = NULL;
    mr_status st = mr_fs_read_file(path, SPEC_MAX_BYTES, &text, &len, err);
    if (st == MR_OK) st = mr_spec_parse(text, len, path, overrides, n_overrides, out, err);
    mr_free(text);
    return st;
}

void mr_spec_free(mr_spec *spec)
{
    if (!spec) return;
    for (size_t i = 0; i < spec->n_stages; i++) {
        mr_stage_spec *sg = &spec->stages[i];
        mr_free(sg->name);
        mr_value_free(sg->def);
        strs_free(sg->param_paths, sg->n_param_paths);
        for (size_t j = 0; j < sg->n_refs; j++) {
            mr_free(sg->refs[j].stage);
            mr_free(sg->refs[j].output);
        }
        mr_free(sg->refs);
    }
    mr_free(spec->stages);
    strs_free(spec->overrides, spec->n_overrides);
    mr_value_free(spec->params);
    mr_value_free(spec->root);
    mr_free(spec->path);
    mr_free(spec);
}

const mr_stage_spec *mr_spec_stage(const mr_spec *spec, const char *name)
{
    const mr_stage_spec *found = NULL;
    for (size_t i = 0; spec && name && !found && i < spec->n_stages; i++)
        if (spec->stages[i].name && !strcmp(spec->stages[i].name, name)) found = &spec->stages[i];
    return found;
}
