/* millrace features: an online feature store's schema, and lookups by
 * entity key as of a moment (docs/featurestore.md). */
#include "cli.h"
#include "millrace/csv.h"
#include "millrace/io.h"
#include "millrace/online.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char features_help[] =
    "usage: millrace features list [--json]\n"
    "       millrace features show STORE [--json]\n"
    "       millrace features get STORE KEY... [--as-of TIME]\n"
    "       millrace features get STORE --batch FILE -o OUT.csv [--as-of-column COL]\n"
    "\n"
    "  list           the feature views of millrace.yaml's pit_join and materialize_online\n"
    "                 stages (source, event time, ttl, features) and each store: where, entities\n"
    "STORE is an online store written by a materialize_online stage: the stage's name, its output\n"
    "directory (out/STAGE), the online.mrfs file in it, or a Redis store's location,\n"
    "redis://HOST:PORT/NAMESPACE (a stage with store: redis://...; its directory names it).\n"
    "  show           keys, views (with their ttl) and features, and the entity count\n"
    "  get            one entity's features as JSON, as of TIME (default: now): a value\n"
    "                 past its view's ttl, or stamped after TIME, is null; one KEY per key\n"
    "                 column, in order\n"
    "  --batch FILE   one lookup per row of FILE (CSV, JSON lines or Parquet: the key\n"
    "                 columns by name, and with --as-of-column a timestamp per row),\n"
    "                 written as CSV to OUT (published whole): FILE's columns, then the features\n";

static int open_store(const char *arg, mr_online **s)
{
    /* a stage's name: its output directory */
    char *dir = !strchr(arg, '/') && strncmp(arg, "redis:", 6) && !mr_fs_exists(arg) ? mr_asprintf("out/%s", arg) : NULL;
    char *path = mr_online_locate(dir && mr_fs_is_dir(dir) ? dir : arg);
    mr_free(dir);
    mr_error err;
    mr_error_init(&err);
    mr_status st = path ? mr_online_open(path, s, &err) : MR_E_NOMEM;
    mr_free(path);
    if (st != MR_OK) {
        if (!mr_error_is_set(&err)) MR_ERR(&err, st, "out of memory");
        mr_log_error(&err);
        return cli_status_exit(st);
    }
    return EXIT_OK;
}

/* Appends value r of c as JSON (null, a number, a bool or a string). */
static void json_value(mr_buf *b, const mr_column *c, size_t r)
{
    if (mr_column_is_null(c, r)) {
        mr_buf_puts(b, "null");
        return;
    }
    mr_buf text;
    mr_buf_init(&text);
    mr_column_format(c, r, &text);
    if (c->type == MR_T_INT64 || c->type == MR_T_FLOAT64 || c->type == MR_T_FLOAT32 || c->type == MR_T_BOOL)
        mr_buf_append(b, text.data ? text.data : "null", text.len);
    else
        mr_buf_json_text(b, text.data ? text.data : "", text.len);
    mr_buf_free(&text);
}

static int show(const mr_online *s, int json)
{
    mr_buf b;
    mr_buf_init(&b);
    if (json) {
        mr_buf_printf(&b, "{\"entities\": %llu, \"keys\": [", (unsigned long long)mr_online_n_entities(s));
        for (size_t k = 0; k < mr_online_n_keys(s); k++) {
            mr_buf_printf(&b, "%s{\"name\": ", k ? ", " : "");
            mr_buf_json_str(&b, mr_online_key_name(s, k));
            mr_buf_printf(&b, ", \"type\": \"%s\"}", mr_dtype_name(mr_online_key_type(s, k)));
        }
        mr_buf_puts(&b, "], \"views\": [");
        for (size_t v = 0; v < mr_online_n_views(s); v++) {
            mr_buf_printf(&b, "%s{\"name\": ", v ? ", " : "");
            mr_buf_json_str(&b, mr_online_view_name(s, v));
            mr_buf_printf(&b, ", \"ttl_seconds\": %lld, \"features\": [", (long long)(mr_online_view_ttl(s, v) / MR_PIT_SECOND_US));
            int first = 1;
            for (size_t f = 0; f < mr_online_n_features(s); f++) {
                if (mr_online_feature_view(s, f) != v) continue;
                mr_buf_printf(&b, "%s{\"name\": ", first ? "" : ", ");
                mr_buf_json_str(&b, mr_online_feature_name(s, f));
                mr_buf_printf(&b, ", \"type\": \"%s\"}", mr_dtype_name(mr_online_feature_type(s, f)));
                first = 0;
            }
            mr_buf_puts(&b, "]}");
        }
        mr_buf_puts(&b, "]}\n");
        cli_print_json(&b);
    } else {
        mr_buf_printf(&b, "online store: %llu entities\nkeys:", (unsigned long long)mr_online_n_entities(s));
        for (size_t k = 0; k < mr_online_n_keys(s); k++)
            mr_buf_printf(&b, " %s (%s)", cli_safe(mr_online_key_name(s, k)), mr_dtype_name(mr_online_key_type(s, k)));
        mr_buf_puts(&b, "\n");
        for (size_t v = 0; v < mr_online_n_views(s); v++) {
            int64_t ttl = mr_online_view_ttl(s, v) / MR_PIT_SECOND_US;
            mr_buf_printf(&b, "view %s", cli_safe(mr_online_view_name(s, v)));
            if (ttl) mr_buf_printf(&b, " (ttl %llds)", (long long)ttl);
            mr_buf_puts(&b, ":");
            for (size_t f = 0; f < mr_online_n_features(s); f++)
                if (mr_online_feature_view(s, f) == v)
                    mr_buf_printf(&b, " %s (%s)", cli_safe(mr_online_feature_name(s, f)),
                                  mr_dtype_name(mr_online_feature_type(s, f)));
            mr_buf_puts(&b, "\n");
        }
        cli_print(&b);
    }
    mr_buf_free(&b);
    return EXIT_OK;
}

static int get_one(const mr_online *s, const char *const *key, int64_t now)
{
    mr_table *row = NULL;
    int found = 0;
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_online_get(s, key, now, &row, &found, &err);
    if (st != MR_OK) {
        mr_log_error(&err);
        return cli_status_exit(st);
    }
    mr_buf b;
    mr_buf_init(&b);
    mr_buf_printf(&b, "{\"found\": %s, \"features\": {", found ? "true" : "false");
    for (size_t c = 0; c < row->n_cols; c++) {
        if (c) mr_buf_puts(&b, ", ");
        mr_buf_json_str(&b, row->cols[c]->name);
        mr_buf_puts(&b, ": ");
        json_value(&b, row->cols[c], 0);
    }
    mr_buf_puts(&b, "}}\n");
    cli_print_json(&b);
    mr_buf_free(&b);
    mr_table_free(row);
    return found ? EXIT_OK : EXIT_FAILED;
}

static int get_batch(const mr_online *s, const char *file, const char *as_of_col, int64_t now, const char *out_path)
{
    mr_error err;
    mr_error_init(&err);
    mr_table *in = NULL, *out = NULL;
    mr_column **fcols = NULL;
    size_t nk = mr_online_n_keys(s);
    const mr_column **kc = mr_calloc(nk, sizeof(*kc));
    char **text = mr_calloc(nk, sizeof(*text));
    mr_buf cell;
    mr_buf_init(&cell);
    mr_status st = kc && text ? mr_table_read_file(file, &in, &err) : MR_ERR(&err, MR_E_NOMEM, "out of memory");
    const mr_column *asof = NULL;
    for (size_t k = 0; st == MR_OK && k < nk; k++) {
        kc[k] = mr_table_column(in, mr_online_key_name(s, k));
        if (!kc[k]) st = MR_ERR(&err, MR_E_NOT_FOUND, "%s has no key column '%s'", file, mr_online_key_name(s, k));
    }
    if (st == MR_OK && as_of_col) {
        asof = mr_table_column(in, as_of_col);
        if (!asof) st = MR_ERR(&err, MR_E_NOT_FOUND, "%s has no column '%s' (--as-of-column)", file, as_of_col);
        else if (asof->type != MR_T_TIMESTAMP && asof->type != MR_T_DATE)
            st = MR_ERR(&err, MR_E_SCHEMA, "%s: column '%s' is %s; a timestamp or a date is expected", file, as_of_col,
                        mr_dtype_name(asof->type));
    }
    for (size_t r = 0; st == MR_OK && r < in->n_rows; r++) {
        int null_key = 0;
        for (size_t k = 0; st == MR_OK && k < nk; k++) {
            null_key |= mr_column_is_null(kc[k], r);
            cell.len = 0;
            mr_column_format(kc[k], r, &cell);
            mr_free(text[k]);
            text[k] = mr_malloc(cell.len + 1);
            if (!text[k]) st = MR_ERR(&err, MR_E_NOMEM, "out of memory");
            else {
                memcpy(text[k], cell.data ? cell.data : "", cell.len);
                text[k][cell.len] = '\0';
            }
        }
        int64_t t = now;
        int no_time = 0;
        if (asof) {
            no_time = mr_column_is_null(asof, r);
            if (!no_time)
                t = asof->type == MR_T_DATE ? mr_pit_date_us(((const int32_t *)asof->data)[r]) : ((const int64_t *)asof->data)[r];
        }
        mr_table *row = NULL;
        if (st == MR_OK) st = mr_online_get(s, (const char *const *)text, no_time || null_key ? INT64_MIN : t, &row,
                                            NULL, &err);
        size_t nf = mr_online_n_features(s);
        if (st == MR_OK && !fcols) {
            fcols = mr_calloc(nf ? nf : 1, sizeof(*fcols));
            if (!fcols) st = MR_ERR(&err, MR_E_NOMEM, "out of memory");
            for (size_t c = 0; st == MR_OK && c < nf; c++) st = mr_column_new_like(row->cols[c], NULL, in->n_rows, &fcols[c], &err);
        }
        for (size_t c = 0; st == MR_OK && c < nf; c++) st = mr_column_append_column(fcols[c], row->cols[c], &err);
        mr_table_free(row);
    }
    if (st == MR_OK && !fcols) { /* no rows: the features' columns, empty */
        fcols = mr_calloc(mr_online_n_features(s) + 1, sizeof(*fcols));
        if (!fcols) st = MR_ERR(&err, MR_E_NOMEM, "out of memory");
        for (size_t c = 0; st == MR_OK && c < mr_online_n_features(s); c++)
            st = mr_column_new(mr_online_feature_name(s, c), mr_online_feature_type(s, c), 0, &fcols[c], &err);
    }
    /* the input's columns, then the features */
    if (st == MR_OK) st = mr_table_new(&out, &err);
    for (size_t c = 0; st == MR_OK && c < in->n_cols; c++) {
        mr_column *col = NULL;
        st = mr_column_slice(in->cols[c], 0, in->n_rows, &col, &err);
        if (st == MR_OK) st = mr_table_add_column(out, col, &err);
    }
    for (size_t c = 0; st == MR_OK && fcols && c < mr_online_n_features(s); c++) {
        st = mr_table_add_column(out, fcols[c], &err);
        fcols[c] = NULL;
    }
    if (st == MR_OK) st = mr_csv_write_table(out_path, out, ',', &err);
    for (size_t c = 0; fcols && c < mr_online_n_features(s); c++) mr_column_free(fcols[c]);
    mr_free(fcols);
    for (size_t k = 0; text && k < nk; k++) mr_free(text[k]);
    mr_free(text);
    mr_free(kc);
    mr_buf_free(&cell);
    mr_table_free(in);
    mr_table_free(out);
    if (st != MR_OK) {
        mr_log_error(&err);
        return cli_status_exit(st);
    }
    return EXIT_OK;
}

/* One view of a stage's views: list's line or JSON object. */
static void list_view(mr_buf *b, const mr_value *v, size_t i, int json)
{
    const mr_value *name = mr_value_get(v, "name"), *src = mr_value_get(v, "source"), *ts = mr_value_get(v, "timestamp");
    const mr_value *ttl = mr_value_get(v, "ttl"), *created = mr_value_get(v, "created"), *feats = mr_value_get(v, "features");
    const mr_value *prefix = mr_value_get(v, "prefix");
    char fallback[32];
    snprintf(fallback, sizeof(fallback), "view %zu", i + 1);
    const char *nm = name && name->kind == MR_V_STR ? name->str : fallback;
    int64_t ttl_us = 0;
    if (ttl && ttl->kind == MR_V_STR) (void)mr_pit_parse_duration(ttl->str, &ttl_us);
    else if (ttl && ttl->kind == MR_V_INT) ttl_us = ttl->u.i * MR_PIT_SECOND_US;
#define STR_OF(x) ((x) && (x)->kind == MR_V_STR ? (x)->str : NULL)
    if (json) {
        mr_buf_puts(b, "{\"name\": ");
        mr_buf_json_str(b, nm);
        mr_buf_puts(b, ", \"source\": ");
        if (STR_OF(src)) mr_buf_json_str(b, src->str);
        else mr_buf_puts(b, "null");
        mr_buf_puts(b, ", \"timestamp\": ");
        if (STR_OF(ts)) mr_buf_json_str(b, ts->str);
        else mr_buf_puts(b, "null");
        mr_buf_puts(b, ", \"created\": ");
        if (STR_OF(created)) mr_buf_json_str(b, created->str);
        else mr_buf_puts(b, "null");
        mr_buf_printf(b, ", \"ttl_seconds\": %lld, \"prefix\": ", (long long)(ttl_us / MR_PIT_SECOND_US));
        if (STR_OF(prefix)) mr_buf_json_str(b, prefix->str);
        else mr_buf_puts(b, "null");
        mr_buf_puts(b, ", \"features\": [");
        for (size_t k = 0; feats && feats->kind == MR_V_SEQ && k < feats->n; k++) {
            if (k) mr_buf_puts(b, ", ");
            mr_buf_json_str(b, STR_OF(feats->items[k]) ? feats->items[k]->str : "");
        }
        if (feats && feats->kind == MR_V_STR) mr_buf_json_str(b, feats->str);
        mr_buf_puts(b, "]}");
        return;
    }
    mr_buf_printf(b, "  view %s: %s, event time %s", cli_safe(nm), STR_OF(src) ? cli_safe(src->str) : "-",
                  STR_OF(ts) ? cli_safe(ts->str) : "-");
    if (STR_OF(created)) mr_buf_printf(b, ", created %s", cli_safe(created->str));
    if (ttl_us) mr_buf_printf(b, ", ttl %llds", (long long)(ttl_us / MR_PIT_SECOND_US));
    mr_buf_puts(b, "; features");
    for (size_t k = 0; feats && feats->kind == MR_V_SEQ && k < feats->n; k++)
        mr_buf_printf(b, " %s%s", STR_OF(prefix) ? cli_safe(prefix->str) : "",
                      STR_OF(feats->items[k]) ? cli_safe(feats->items[k]->str) : "?");
    if (feats && feats->kind == MR_V_STR)
        mr_buf_printf(b, " %s%s", STR_OF(prefix) ? cli_safe(prefix->str) : "", cli_safe(feats->str));
    mr_buf_puts(b, "\n");
#undef STR_OF
}

/* millrace features list: the views each pit_join and materialize_online stage declares, and their stores. */
static int list_views(int json)
{
    cli_common c = {0};
    mr_workspace *ws = NULL;
    mr_spec *spec = NULL;
    int rc = cli_load(&c, &ws, &spec);
    if (rc != EXIT_OK) return rc;
    mr_buf b;
    mr_buf_init(&b);
    if (json) mr_buf_puts(&b, "{\"stages\": [");
    size_t shown = 0;
    for (size_t i = 0; i < spec->n_stages; i++) {
        const mr_stage_spec *st = &spec->stages[i];
        int online = !strcmp(st->op->name, "materialize_online");
        if (!online && strcmp(st->op->name, "pit_join")) continue;
        const mr_value *views = mr_value_get(st->def, "views"), *keys = mr_value_get(st->def, "keys");
        if (json) {
            mr_buf_puts(&b, shown ? ", {\"name\": " : "{\"name\": ");
            mr_buf_json_str(&b, st->name);
            mr_buf_printf(&b, ", \"op\": \"%s\", \"keys\": [", st->op->name);
            for (size_t k = 0; keys && keys->kind == MR_V_SEQ && k < keys->n; k++) {
                if (k) mr_buf_puts(&b, ", ");
                mr_buf_json_str(&b, keys->items[k]->kind == MR_V_STR ? keys->items[k]->str : "");
            }
            if (keys && keys->kind == MR_V_STR) mr_buf_json_str(&b, keys->str);
            mr_buf_puts(&b, "], \"views\": [");
        } else {
            mr_buf_printf(&b, "%s (%s, by", cli_safe(st->name), st->op->name);
            for (size_t k = 0; keys && keys->kind == MR_V_SEQ && k < keys->n; k++)
                mr_buf_printf(&b, " %s", keys->items[k]->kind == MR_V_STR ? cli_safe(keys->items[k]->str) : "?");
            if (keys && keys->kind == MR_V_STR) mr_buf_printf(&b, " %s", cli_safe(keys->str));
            mr_buf_puts(&b, ")\n");
        }
        for (size_t v = 0; views && views->kind == MR_V_SEQ && v < views->n; v++) {
            if (json && v) mr_buf_puts(&b, ", ");
            list_view(&b, views->items[v], v, json);
        }
        /* the store it materialised, if it has */
        char *dir = online ? mr_asprintf("out/%s", st->name) : NULL;
        char *loc = dir && mr_fs_is_dir(dir) ? mr_online_locate(dir) : NULL;
        mr_online *s = NULL;
        mr_error err;
        mr_error_init(&err);
        int open = loc && mr_online_open(loc, &s, &err) == MR_OK;
        if (json) {
            mr_buf_puts(&b, "], \"store\": ");
            if (!online) mr_buf_puts(&b, "null");
            else {
                mr_buf_puts(&b, "{\"location\": ");
                mr_buf_json_str(&b, loc ? loc : dir ? dir : "");
                if (open) mr_buf_printf(&b, ", \"entities\": %llu}", (unsigned long long)mr_online_n_entities(s));
                else mr_buf_puts(&b, ", \"entities\": null}");
            }
            mr_buf_puts(&b, "}");
        } else if (online) {
            if (open)
                mr_buf_printf(&b, "  store %s: %llu entities\n", cli_safe(loc), (unsigned long long)mr_online_n_entities(s));
            else if (loc)
                mr_buf_printf(&b, "  store %s: cannot be read (%s)\n", cli_safe(loc), cli_safe(err.msg));
            else mr_buf_printf(&b, "  store: not materialised yet (millrace run %s)\n", cli_safe(st->name));
        }
        mr_online_close(s);
        mr_free(loc);
        mr_free(dir);
        shown++;
    }
    if (json) {
        mr_buf_puts(&b, "]}\n");
        cli_print_json(&b);
    } else {
        if (!shown) mr_buf_puts(&b, "no pit_join or materialize_online stage in millrace.yaml\n");
        cli_print(&b);
    }
    mr_buf_free(&b);
    mr_spec_free(spec);
    mr_workspace_close(ws);
    cli_common_free(&c);
    return EXIT_OK;
}

int cmd_features(int argc, char **argv)
{
    if (!cli_wants_help(argc, argv) && argc >= 2 && !strcmp(argv[1], "list")) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--json")))
            return cli_usage_error("features", "list takes only --json");
        return list_views(argc == 3);
    }
    if (cli_wants_help(argc, argv) || argc < 3) {
        fputs(features_help, argc < 3 && !cli_wants_help(argc, argv) ? stderr : stdout);
        return argc < 3 && !cli_wants_help(argc, argv) ? EXIT_USAGE : EXIT_OK;
    }
    const char *sub = argv[1], *store = argv[2], *batch = NULL, *as_of_col = NULL, *out = NULL;
    int json = 0;
    int64_t now = (int64_t)(mr_wall_time() * 1e6);
    const char **keys = mr_calloc((size_t)argc, sizeof(*keys));
    size_t nk = 0;
    int rc = keys ? EXIT_OK : EXIT_FAILED;
    if (strcmp(sub, "show") && strcmp(sub, "get")) rc = cli_usage_error("features", "unknown subcommand '%s' (list, show, get)", sub);
    for (int i = 3; i < argc && rc == EXIT_OK; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--as-of") && v) {
            if (mr_pit_parse_moment(v, strlen(v), &now) != 0)
                rc = cli_usage_error("features", "--as-of: expected YYYY-MM-DD[ HH:MM:SS[.ffffff]][Z|+HH:MM], got '%s'", v);
            i++;
        } else if (!strcmp(argv[i], "--batch") && v) batch = argv[++i];
        else if (!strcmp(argv[i], "--as-of-column") && v) as_of_col = argv[++i];
        else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && v) out = argv[++i];
        else if (argv[i][0] == '-' && argv[i][1] == '-') rc = cli_usage_error("features", "unknown option '%s'", argv[i]);
        else keys[nk++] = argv[i];
    }
    mr_online *s = NULL;
    if (rc == EXIT_OK) rc = open_store(store, &s);
    if (rc == EXIT_OK && !strcmp(sub, "show")) rc = show(s, json);
    else if (rc == EXIT_OK && batch)
        rc = nk ? cli_usage_error("features", "--batch takes no keys")
             : !out ? cli_usage_error("features", "--batch needs -o OUT.csv")
                    : get_batch(s, batch, as_of_col, now, out);
    else if (rc == EXIT_OK && nk != mr_online_n_keys(s)) {
        char names[256] = "";
        for (size_t k = 0; k < mr_online_n_keys(s); k++)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", k ? " " : "", mr_online_key_name(s, k));
        rc = cli_usage_error("features", "get takes %zu key(s) (%s); got %zu", mr_online_n_keys(s), names, nk);
    } else if (rc == EXIT_OK) rc = get_one(s, keys, now);
    mr_online_close(s);
    mr_free(keys);
    return rc;
}
