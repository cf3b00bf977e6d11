/* Small helpers the built-in ops share: optional settings from a stage
 * definition with type checks, string lists, locating a model or a file
 * inside a stage output directory, and reading / writing whole tables. */
#include "millrace/dataset.h"
#include "millrace/features.h"
#include "millrace/io.h"
#include "millrace/value.h"
#include "ops_int.h"

#include <ctype.h>
#include <math.h>
#include <errno.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *mr__opt_str(const mr_value *map, const char *key, const char *dflt)
{
    const mr_value *v = mr_value_get(map, key);
    return v && v->kind == MR_V_STR ? v->str : dflt;
}

mr_status mr__opt_num(const mr_value *map, const char *what, const char *key, double dflt, double *out, mr_error *err)
{
    const mr_value *v = mr_value_get(map, key);
    *out = dflt;
    if (!v || v->kind == MR_V_NULL) return MR_OK;
    if (v->kind == MR_V_INT) *out = (double)v->u.i;
    else if (v->kind == MR_V_FLOAT) *out = v->u.f;
    else {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: '%s' must be a number, got %s", what, key, mr_vkind_name(v->kind));
        mr_error_at(err, NULL, v->line, v->col);
        mr_error_key(err, key);
        return rc;
    }
    if (!isfinite(*out)) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: '%s' must be finite", what, key);
        mr_error_key(err, key);
        return rc;
    }
    return MR_OK;
}

mr_status mr__check_keys(const mr_value *map, const char *what, const char *const *allowed, size_t n_allowed,
                         mr_error *err)
{
    if (!map) return MR_OK;
    if (map->kind != MR_V_MAP) return MR_ERR(err, MR_E_INVALID_ARG, "%s must be a mapping", what);
    for (size_t k = 0; k < map->n; k++) {
        int ok = 0;
        for (size_t a = 0; a < n_allowed && !ok; a++) ok = !strcmp(map->keys[k], allowed[a]);
        if (ok) continue;
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: unknown key '%s'", what, map->keys[k]);
        mr_error_at(err, NULL, map->key_lines ? map->key_lines[k] : 0, map->key_cols ? map->key_cols[k] : 0);
        const char *best = mr_closest(map->keys[k], allowed, n_allowed);
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
        else mr_error_hint(err, "valid keys: see `millrace ops`");
        return rc;
    }
    return MR_OK;
}

const char **mr__strings_of(const mr_value *def, const char *key, size_t *n)
{
    const mr_value *v = mr_value_get(def, key);
    *n = 0;
    size_t cap = v && v->kind == MR_V_SEQ ? v->n : 1;
    const char **arr = mr_calloc(cap ? cap : 1, sizeof(*arr));
    if (!arr || !v) return arr;
    if (v->kind == MR_V_STR) arr[(*n)++] = v->str;
    for (size_t k = 0; v->kind == MR_V_SEQ && k < v->n; k++)
        if (v->items[k]->kind == MR_V_STR) arr[(*n)++] = v->items[k]->str;
    return arr;
}

char *mr__file_in(const char *path, const char *name)
{
    return mr_fs_is_dir(path) ? mr_path_join(path, name) : mr_strdup(path);
}

int mr__value_has_deferred(const mr_value *v)
{
    if (!v) return 0;
    if (mr_op_value_deferred(v)) return 1;
    for (size_t k = 0; (v->kind == MR_V_MAP || v->kind == MR_V_SEQ) && k < v->n; k++)
        if (mr__value_has_deferred(v->items[k])) return 1;
    return 0;
}

void mr__hint_choices(mr_error *err, const char *word, const char *const *choices, size_t n)
{
    const char *best = word ? mr_closest(word, choices, n) : NULL;
    if (best) {
        mr_error_hint(err, "did you mean '%s'?", best);
        return;
    }
    char list[MR_ERR_MSG_MAX];
    size_t off = 0;
    list[0] = '\0';
    for (size_t k = 0; k < n && off < sizeof(list); k++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s", k ? ", " : "", choices[k]);
        if (w > 0) off += (size_t)w;
    }
    mr_error_hint(err, "expected one of: %s", list);
}

/* A POSIX shell variable name: letters, digits and '_', not starting with a digit. */
static int env_name_ok(const char *s)
{
    int ok = (*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_';
    for (const char *p = s + 1; ok && *p; p++)
        ok = (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_';
    return ok;
}

mr_status mr__check_env(const mr_value *env, const char *what, mr_error *err)
{
    if (!env) return MR_OK;
    if (env->kind != MR_V_MAP)
        return mr_error_set_at(err, NULL, env->line, env->col, MR_E_SCHEMA,
                           "'%s' must map variable names to values, got %s", what, mr_vkind_name(env->kind));
    for (size_t k = 0; k < env->n; k++) {
        const mr_value *v = env->items[k];
        if (!env_name_ok(env->keys[k])) {
            mr_status rc = mr_error_set_at(err, NULL, env->key_lines ? env->key_lines[k] : 0, env->key_cols ? env->key_cols[k] : 0,
                                       MR_E_SCHEMA, "%s: '%s' is not a valid environment variable name", what,
                                       env->keys[k]);
            mr_error_hint(err, "names are letters, digits and '_', not starting with a digit");
            return rc;
        }
        if (v->kind == MR_V_MAP || v->kind == MR_V_SEQ) {
            mr_status rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA,
                                       "%s.%s: expected a string, number or bool, got a %s", what, env->keys[k],
                                       mr_vkind_name(v->kind));
            mr_error_hint(err, "an environment variable holds one value: write it as one string");
            return rc;
        }
    }
    return MR_OK;
}

mr_status mr__check_text(const mr_value *v, const char *key, const char *want, int one_line, mr_error *err)
{
    if (!v || v->kind != MR_V_STR || mr_op_value_deferred(v)) return MR_OK;
    const unsigned char *bad = NULL;
    for (const unsigned char *p = (const unsigned char *)v->str; one_line && *p && !bad; p++)
        if (*p < 0x20 || *p == 0x7f) bad = p;
    if (v->str[0] && !bad) return MR_OK;
    mr_status rc = !v->str[0]
                       ? mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s: expected %s, got an empty string", key, want)
                       : mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA,
                                     "%s: expected %s, got a control character (0x%02x) at byte %zu", key, want, *bad,
                                     (size_t)(bad - (const unsigned char *)v->str) + 1);
    mr_error_key(err, key);
    return rc;
}

mr_status mr__write_dataset(const char *dir, const mr_table *t, mr_error *err)
{
    mr_dataset_write_opts o;
    mr_dataset_write_opts_init(&o);
    return mr_dataset_write_table(dir, t, &o, NULL, err);
}

const mr_op_io *mr__output_named(const mr_op_ctx *ctx, const char *name)
{
    for (size_t k = 0; k < ctx->n_outputs; k++)
        if (!strcmp(ctx->outputs[k].name, name)) return &ctx->outputs[k];
    return NULL;
}

mr_status mr__read_input(const mr_op_ctx *ctx, const char *path, mr_table **out, mr_error *err)
{
    mr_status rc = mr_table_read_file(path, out, err);
    if (rc == MR_OK && ctx->smoke && (*out)->n_rows > MR__SMOKE_ROWS) {
        mr_table *head = NULL;
        rc = mr_table_slice(*out, 0, MR__SMOKE_ROWS, &head, err);
        mr_table_free(*out);
        *out = rc == MR_OK ? head : NULL;
    }
    return rc;
}

/* "train.learning-rate" -> "MILLRACE_PARAM_TRAIN_LEARNING_RATE" */
static char *param_env_name(const char *path)
{
    char *name = mr_asprintf("MILLRACE_PARAM_%s", path);
    if (!name) return NULL;
    for (char *p = name + 15; *p; p++) *p = isalnum((unsigned char)*p) ? (char)toupper((unsigned char)*p) : '_';
    return name;
}

static void set_param_env(const mr_value *v, const char *prefix)
{
    if (v->kind == MR_V_MAP) {
        for (size_t k = 0; k < v->n; k++) {
            char *p = prefix[0] ? mr_asprintf("%s.%s", prefix, v->keys[k]) : mr_strdup(v->keys[k]);
            if (p) set_param_env(v->items[k], p);
            mr_free(p);
        }
        return;
    }
    mr_buf b;
    mr_buf_init(&b);
    if (v->kind == MR_V_SEQ) mr_value_to_json(v, 0, &b);
    else mr_value_scalar_text(v, &b);
    char *name = param_env_name(prefix);
    if (name) setenv(name, b.data ? b.data : "", 1);
    mr_free(name);
    mr_buf_free(&b);
}

void mr__command_env(const mr_op_ctx *ctx, int threads, const char *params_file, const mr_value *params,
                     const mr_value *env)
{
    char buf[32];
    setenv("MILLRACE_STAGE", ctx->stage, 1);
    setenv("MILLRACE_SMOKE", ctx->smoke ? "1" : "0", 1);
    snprintf(buf, sizeof(buf), "%d", threads);
    setenv("MILLRACE_THREADS", buf, 1);
    setenv("OMP_NUM_THREADS", buf, 0);
    setenv("MILLRACE_PARAMS_FILE", params_file, 1);
    if (params) set_param_env(params, "");
    for (size_t k = 0; env && env->kind == MR_V_MAP && k < env->n; k++) {
        mr_buf b;
        mr_buf_init(&b);
        mr_value_scalar_text(env->items[k], &b);
        setenv(env->keys[k], b.data ? b.data : "", 1);
        mr_buf_free(&b);
    }
}

/* A directory's MRFT file: features.mrft if present, else the first file
 * (by name) that starts with the MRFT magic. */
mr_status mr__find_features(const char *dir, char **out, mr_error *err)
{
    *out = NULL;
    char *pref = mr_path_join(dir, "features.mrft");
    if (pref && mr_fs_exists(pref)) {
        *out = pref;
        return MR_OK;
    }
    mr_free(pref);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot list directory", dir);
    for (int i = 0; i < n; i++) {
        if (!*out && names[i]->d_name[0] != '.') {
            char *p = mr_path_join(dir, names[i]->d_name);
            char magic[4] = {0};
            FILE *f = p && !mr_fs_is_dir(p) ? fopen(p, "rb") : NULL;
            int hit = f && fread(magic, 1, 4, f) == 4 && !memcmp(magic, MR_FEATURES_MAGIC, 4);
            if (f) fclose(f);
            if (hit) *out = p;
            else mr_free(p);
        }
        free(names[i]);
    }
    free(names);
    if (!*out) return MR_ERR(err, MR_E_NOT_FOUND, "%s: no fitted features transform (MRFT file) in this directory", dir);
    return MR_OK;
}

mr_status mr__features_file_in(const char *path, char **out, mr_error *err)
{
    if (mr_fs_is_dir(path)) return mr__find_features(path, out, err);
    *out = mr_strdup(path);
    return *out ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
}
