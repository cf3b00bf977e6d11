/* The model registry: named models with numbered versions and movable
 * aliases, kept in the workspace's run store (tables model_versions and
 * model_aliases, docs/formats.md) with each version's bundle in the
 * artifact store, so gc keeps it and verify checks it.
 *
 * A version is a bundle's bytes: registering the same bytes under a name
 * again returns the version that holds them. Versions count up from 1 per
 * name and are never reused. An alias (`production`, `staging`, ...) names
 * one version of its model and moves when it is set again.
 *
 * A model reference is `NAME`, `NAME/VERSION`, `NAME/latest` or
 * `NAME@ALIAS`, optionally written as a URI, `models:/NAME@ALIAS`, which
 * predict, serve, bundle and the Python package accept wherever they take
 * a bundle path.
 *
 * Example (given mr_workspace *ws):
 *
 *   int64_t v;
 *   int created;
 *   if (mr_registry_register(ws, "churn", "out/package/model.mrb", 0, NULL, &v, &created, &err) == MR_OK &&
 *       mr_registry_set_alias(ws, "churn", "production", v, &err) == MR_OK) {
 *       char *path = NULL;
 *       if (mr_registry_resolve_uri("models:/churn@production", ".", &path, NULL, &err) == MR_OK)
 *           printf("%s\n", path);   // .../.millrace/objects/ab/cdef...: the bundle file
 *       mr_free(path);
 *   }
 *
 * Ownership: views (mr_model_version, mr_model_summary arrays) are the
 * caller's, freed with their _free functions; strings returned through
 * char ** are the caller's (mr_free).
 * Status codes: MR_E_INVALID_ARG (a malformed name, alias or reference),
 * MR_E_NOT_FOUND (no such model, version or alias; the error names what
 * exists), the bundle loader's errors for a file that is no bundle, the
 * store's and the run store's (MR_E_IO), MR_E_NOMEM.
 * Concurrency: registrations from several processes serialise on the run
 * store's write lock, so each gets its own version number; a registration
 * holds the workspace's gc lock shared, so gc never deletes a bundle
 * between its publication and its record. */
#ifndef MILLRACE_REGISTRY_H
#define MILLRACE_REGISTRY_H

#include "millrace/core.h"
#include "millrace/pipeline.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_MODEL_URI_PREFIX "models:/"

typedef struct mr_model_version {
    char *name;
    int64_t version;
    char *artifact;       /* the bundle file's artifact id in the store */
    char *bundle_version; /* the bundle's version id (what /v1/model reports) */
    char *bundle_name;    /* the name the bundle records (its manifest) */
    char *path;           /* the bundle file in the store */
    double created;       /* seconds since the epoch */
    int64_t run_id;       /* the run that produced it; 0 = unknown */
    char *stage;          /* that run's stage; NULL = unknown */
    char *source;         /* the path it was registered from */
    char **aliases;       /* the aliases naming it, sorted */
    size_t n_aliases;
} mr_model_version;

typedef struct mr_model_summary {
    char *name;
    int64_t n_versions, latest; /* latest: the highest version */
    double updated;             /* when its latest version was registered */
    char **aliases;             /* "ALIAS=VERSION", sorted by alias */
    size_t n_aliases;
} mr_model_summary;

/* A model name: 1..100 bytes of [A-Za-z0-9_.-] starting with a letter or
 * digit. An alias: the same, not all digits and not "latest" (those read
 * as versions). MR_E_INVALID_ARG says what is wrong. */
mr_status mr_model_name_check(const char *name, mr_error *err);
mr_status mr_model_alias_check(const char *alias, mr_error *err);
int mr_registry_is_uri(const char *s); /* 1 if s starts with "models:/" */

/* Registers the bundle file at path (checked by loading it) as the next
 * version of name, copying it into the store (path is left as it was).
 * run_id/stage: the run and stage that made it (the package stage's
 * register:); 0/NULL: found from the bundle's stage key when a run
 * recorded it. *version_out gets the version; *created_out (may be NULL)
 * 0 when an existing version already held these bytes. */
mr_status mr_registry_register(mr_workspace *ws, const char *name, const char *path, int64_t run_id,
                               const char *stage, int64_t *version_out, int *created_out, mr_error *err);
/* Points alias of name at version (moving it if set); version 0 deletes it.
 * MR_E_NOT_FOUND for an unknown model, version or (deleting) alias. */
mr_status mr_registry_set_alias(mr_workspace *ws, const char *name, const char *alias, int64_t version,
                                mr_error *err);
/* One version by reference (with or without "models:/"). */
mr_status mr_registry_get(mr_workspace *ws, const char *ref, mr_model_version **out, mr_error *err);
/* Every version of name, in version order. MR_E_NOT_FOUND: no such model. */
mr_status mr_registry_versions(mr_workspace *ws, const char *name, mr_model_version **out, size_t *n_out,
                               mr_error *err);
/* Every model, by name. */
mr_status mr_registry_list(mr_workspace *ws, mr_model_summary **out, size_t *n_out, mr_error *err);
/* Opens the workspace at or above dir (NULL: the current directory) and
 * resolves uri to its bundle file; v_out (may be NULL) gets the version. */
mr_status mr_registry_resolve_uri(const char *uri, const char *dir, char **path_out, mr_model_version **v_out,
                                  mr_error *err);
/* What differs between two versions of name (references as for get,
 * without the name: "3", "latest", "@production" or "production"): their
 * metrics, the params of the runs that made them, the model (kind,
 * objective, trees, features) and the input schema (columns added,
 * removed or changed). Text, or the JSON document of docs/registry.md. */
mr_status mr_registry_diff(mr_workspace *ws, const char *name, const char *a, const char *b, int json, mr_buf *out,
                           mr_error *err);

void mr_model_version_free(mr_model_version *v);                 /* one from get; NULL is a no-op */
void mr_model_versions_free(mr_model_version *v, size_t n);      /* an array from versions */
void mr_model_summaries_free(mr_model_summary *s, size_t n);
/* The JSON documents of `model show` and `model list --json`. */
mr_status mr_model_version_json(const mr_model_version *v, mr_buf *out);
mr_status mr_model_summary_json(const mr_model_summary *s, mr_buf *out);

#ifdef __cplusplus
}
#endif
#endif
