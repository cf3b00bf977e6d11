/* A typed value tree with source positions: what millrace.yaml parses into,
 * what params and op settings are, and what canonical JSON is printed from.
 * Part of core (src/core/value.c): every module may use it; it knows
 * nothing of YAML (the pipeline's reader builds it) or of any op.
 *
 * Example (given const mr_value *params):
 *
 *   const mr_value *v = mr_value_get_path(params, "train.rounds");
 *   if (v && v->kind == MR_V_INT) printf("%lld\n", (long long)v->u.i);
 *   mr_value *m = mr_value_new(MR_V_MAP);
 *   if (mr_value_set_path(m, "train.rounds", mr_value_new_int(300)) == MR_OK) {   // {"train": {"rounds": 300}}
 *       mr_buf json;
 *       mr_buf_init(&json);
 *       if (mr_value_to_json(m, 1, &json) == MR_OK) puts(json.data);
 *       mr_buf_free(&json);
 *   }
 *   mr_value_free(m);
 *
 * Ownership: a tree owns all its nodes and strings; mr_value_free frees the
 * whole tree. Lookups return nodes borrowed from the tree (valid until the
 * node is replaced or the tree freed). The setters take ownership of the
 * value they are given, also when they fail (they free it), and a NULL
 * value (a failed constructor) is MR_E_NOMEM, so a constructor can be
 * passed straight in.
 * Status codes: MR_E_NOMEM; MR_E_INVALID_ARG (a container of the wrong
 * kind, an empty path segment, a path through a non-map); the text and JSON
 * writers return mr_buf's MR_E_LIMIT. Only mr_value_from_json sets an mr_error.
 * Thread safety: not thread-safe for mutation; concurrent readers are fine. */
#ifndef MILLRACE_VALUE_H
#define MILLRACE_VALUE_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_vkind {
    MR_V_NULL = 0,
    MR_V_BOOL = 1,
    MR_V_INT = 2,
    MR_V_FLOAT = 3,
    MR_V_STR = 4,
    MR_V_MAP = 5,
    MR_V_SEQ = 6,
} mr_vkind;

typedef struct mr_value mr_value;
struct mr_value {
    mr_vkind kind;
    long line, col;     /* 1-based position in the source file; 0 if synthetic */
    union {
        int b;          /* MR_V_BOOL */
        int64_t i;      /* MR_V_INT */
        double f;       /* MR_V_FLOAT */
    } u;
    char *str;          /* MR_V_STR: the text; other scalars: original text or NULL */
    size_t n;           /* MR_V_MAP / MR_V_SEQ: number of entries */
    size_t cap;         /* allocated entries */
    char **keys;        /* MR_V_MAP: keys, in source order */
    long *key_lines;    /* MR_V_MAP: position of each key */
    long *key_cols;
    mr_value **items;   /* MR_V_MAP values / MR_V_SEQ items */
};

const char *mr_vkind_name(mr_vkind k); /* "int", "string", "mapping", ... (static) */

/* Constructors: a new node (caller owns it), NULL on OOM. */
mr_value *mr_value_new(mr_vkind kind); /* zero value: empty map/seq, 0, false */
mr_value *mr_value_new_str(const char *s); /* copies s (NULL = "") */
mr_value *mr_value_new_int(int64_t i);
mr_value *mr_value_new_float(double f);
mr_value *mr_value_new_bool(int b);
void mr_value_free(mr_value *v); /* the whole tree; NULL is a no-op */
mr_value *mr_value_clone(const mr_value *v); /* deep copy, positions kept */

/* Resolves a plain (unquoted) YAML scalar the way YAML 1.2 core schema does:
 * null/~/empty -> NULL, true/false -> BOOL, decimal/0x ints -> INT,
 * floats (incl. .inf/.nan) -> FLOAT, anything else -> STR; quoted: always
 * STR. The node keeps text (str); NULL on OOM. */
mr_value *mr_value_from_scalar(const char *text, int quoted);

/* MAP: lookup by key (NULL if absent or map is not a map). Borrowed. */
mr_value *mr_value_get(const mr_value *map, const char *key);
/* Dotted path lookup: "a.b.c" through nested maps; NULL if absent. Borrowed. */
mr_value *mr_value_get_path(const mr_value *root, const char *path);
/* MAP: sets key (copied) to val, replacing (and freeing) an existing
 * entry. Takes ownership of val. MR_E_INVALID_ARG (map is not a map),
 * MR_E_NOMEM. */
mr_status mr_value_map_set(mr_value *map, const char *key, mr_value *val);
/* SEQ: appends (takes ownership). MR_E_INVALID_ARG (not a seq), MR_E_NOMEM. */
mr_status mr_value_seq_push(mr_value *seq, mr_value *val);
/* Sets a dotted path, creating intermediate maps (takes ownership of val).
 * MR_E_INVALID_ARG (root not a map, an empty segment, a segment that is
 * not a map), MR_E_NOMEM. */
mr_status mr_value_set_path(mr_value *root, const char *path, mr_value *val);

/* The strings of map[key] when it is a string or a list (strings only; a
 * map: its string values), borrowed from the tree, in a new array (caller
 * frees it with mr_free; NULL with *n_out = 0 when the key is absent).
 * MR_E_NOMEM on allocation failure. */
mr_status mr_value_strings(const mr_value *map, const char *key, const char ***out, size_t *n_out);

/* Writes JSON. canonical != 0: map keys sorted bytewise, no whitespace,
 * ints as decimal, floats as the shortest text that round-trips ("%.17g"
 * trimmed), so equal values always print equal bytes. NaN and infinities
 * print as the strings "nan", "inf", "-inf"; v NULL prints null. Appends
 * to out: MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_value_to_json(const mr_value *v, int canonical, mr_buf *out);
/* Reads JSON text into a tree (objects as maps in their order, arrays as
 * seqs, integers as ints, other numbers as floats; no positions). Sets err:
 * MR_E_PARSE naming `what` with jansson's line, column and message,
 * MR_E_NOMEM. *out is NULL unless MR_OK. */
mr_status mr_value_from_json(const char *text, size_t len, const char *what, mr_value **out, mr_error *err);
/* The same from a parsed jansson value (the depth jansson bounds: 2048); NULL: out of memory. */
struct json_t;
mr_value *mr_value_from_jansson(const struct json_t *j);
/* Scalar as text for interpolation into strings ("300", "0.1", "true",
 * "null"); MR_E_INVALID_ARG for a map, a seq or NULL. */
mr_status mr_value_scalar_text(const mr_value *v, mr_buf *out);
/* 1 when a and b hold the same values: same kinds, maps with the same keys
 * (in any order), NaN equal to NaN, -0.0 not equal to 0.0; positions and
 * source text are ignored. */
int mr_value_equal(const mr_value *a, const mr_value *b);
/* Reorders the entries of every map in the tree by key, bytewise (the order
 * of canonical JSON), keeping each entry's value and positions: the form a
 * stage's definition has when its op runs, so that no op can depend on an
 * order the cache key does not see. */
void mr_value_sort_keys(mr_value *v);

/* Appends every leaf path of a map tree ("a.b", "a.c") as candidates for
 * "did you mean" (names only; caller frees each string and the array with
 * mr_free). root not a map: none. MR_E_NOMEM (then nothing is returned). */
mr_status mr_value_leaf_paths(const mr_value *root, char ***paths_out, size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
