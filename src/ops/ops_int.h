/* Internals shared by the built-in ops. */
#ifndef MILLRACE_OPS_INT_H
#define MILLRACE_OPS_INT_H
#include "millrace/op.h"
#include "millrace/table.h"
#include "millrace/value.h"

extern const mr_op mr_op_exec;
extern const mr_op mr_op_train;
extern const mr_op mr_op_tune;
extern const mr_op mr_op_transform;
extern const mr_op mr_op_split;
extern const mr_op mr_op_features;
extern const mr_op mr_op_ingest;
extern const mr_op mr_op_package;
extern const mr_op mr_op_pit_join;
extern const mr_op mr_op_materialize_online;
extern const mr_op mr_op_feature_view;

/* ---- feature views (op_pit_join.c), shared with materialize_online -------- */
#include "millrace/pit.h"
typedef struct mr__views {
    size_t n;
    mr_pit_view *pv;     /* n views, pointing into the fields below */
    const char ***keys;  /* each view's key names, or NULL: the entity keys */
    const char ***feats;
    char (*names)[128];
    const char **sources; /* the views' source paths (borrowed from def) */
    mr_table **tables;   /* the views' data (read: their columns the join reads), or NULLs */
    uint64_t *missing;   /* for mr_pit_join */
    uint64_t *rows;      /* for mr_pit_join_write: the views' rows */
} mr__views;
/* The `views:` of def checked (names, required keys, ttl) as at load. */
mr_status mr__views_check(const mr_value *def, mr_error *err);
/* Checks def's `views:` and, with read, reads each view's source (keys:
 * the entity keys a view without `keys:` uses; borrowed, must outlive vw).
 * Free with mr__views_free. */
mr_status mr__views_load(const mr_value *def, const char *const *keys, size_t n_keys, int read, mr__views *vw,
                         mr_error *err);
/* Reads the source src of view pv: every row, only the columns the join
 * reads (all of them when one is missing, for the join to name). */
mr_status mr__view_read(const char *src, const mr_pit_view *pv, size_t n_keys, mr_table **out, mr_error *err);
void mr__views_free(mr__views *vw);
/* The views' sources, as an op's inputs_of. */
size_t mr__views_inputs(const mr_value *def, const mr_value **paths, size_t max);


/* ---- helpers (ops_common.c) --------------------------------------------- */
/* map[key] if it is a string, else dflt (borrowed). */
const char *mr__opt_str(const mr_value *map, const char *key, const char *dflt);
/* map[key] as a finite number (int or float), dflt when absent. what names
 * the stage/setting in the error. */
mr_status mr__opt_num(const mr_value *map, const char *what, const char *key, double dflt, double *out, mr_error *err);
/* MR_E_INVALID_ARG naming the first key of map not in allowed (did-you-mean). */
mr_status mr__check_keys(const mr_value *map, const char *what, const char *const *allowed, size_t n_allowed,
                         mr_error *err);
/* def[key] as a list of borrowed strings (a single string counts); the
 * array is caller-freed (NULL only on OOM). */
const char **mr__strings_of(const mr_value *def, const char *key, size_t *n);
/* A fitted features transform: path itself when it is a file, else in the
 * directory (a features stage's transform output) features.mrft, or the
 * first file by name that starts with the MRFT magic. *out is caller-freed;
 * MR_E_NOT_FOUND names the directory when it holds none. */
mr_status mr__find_features(const char *dir, char **out, mr_error *err);
mr_status mr__features_file_in(const char *path, char **out, mr_error *err);
/* path/name when path is a directory (a stage output), else a copy of path. */
char *mr__file_in(const char *path, const char *name);

/* ---- definition checks shared by the ops' validate hooks ----------------- */
/* 1 if v, or any value inside it, holds a ${stages.X...} reference: it is
 * known only when the stage runs (mr_op_value_deferred, recursively). */
int mr__value_has_deferred(const mr_value *v);
/* Hint for a word that is none of choices: "did you mean 'X'?" when one is
 * close, else "expected one of: a, b, c". */
void mr__hint_choices(mr_error *err, const char *word, const char *const *choices, size_t n);
/* An `env:` mapping: every name a valid environment variable name, every
 * value a scalar (what becomes its text). what names the key in messages
 * ("env", "exec.env"). MR_E_SCHEMA at the offending key or value. */
mr_status mr__check_env(const mr_value *env, const char *what, mr_error *err);
/* A string setting that must hold text: not empty and, with one_line, no
 * control character (a name or title shown on one line). NULL, non-string
 * (the engine checks types) and ${stages.X...} values pass. MR_E_SCHEMA at
 * the value, key = key: "KEY: expected WANT, got an empty string" or "got a
 * control character (0x0a) at byte N". */
mr_status mr__check_text(const mr_value *v, const char *key, const char *want, int one_line, mr_error *err);

/* Rows an op reads of an input in smoke mode. */
#define MR__SMOKE_ROWS 10000
/* Writes t as a dataset (one shard set with a manifest) into dir. */
mr_status mr__write_dataset(const char *dir, const mr_table *t, mr_error *err);
/* The output of ctx named name, or NULL. */
const mr_op_io *mr__output_named(const mr_op_ctx *ctx, const char *name);
/* Reads a whole input (file or dataset); in smoke mode its first
 * MR__SMOKE_ROWS rows only. */
mr_status mr__read_input(const mr_op_ctx *ctx, const char *path, mr_table **out, mr_error *err);

extern const mr_op mr_op_evaluate;
extern const mr_op mr_op_check;
extern const mr_op mr_op_report;

/* In a forked child about to run a command for the stage of ctx: the
 * variables every command millrace starts sees — MILLRACE_STAGE,
 * MILLRACE_SMOKE, MILLRACE_THREADS (and OMP_NUM_THREADS unless set),
 * MILLRACE_PARAMS_FILE, one MILLRACE_PARAM_<PATH> per leaf of params
 * (upper-cased, non-alphanumerics as '_'; lists as JSON) — then the
 * stage's env mapping. */
void mr__command_env(const mr_op_ctx *ctx, int threads, const char *params_file, const mr_value *params,
                     const mr_value *env);

#endif
