/* Internals shared by the engine's files (dag, keys, executor, worker). */
#ifndef MILLRACE_PIPELINE_INT_H
#define MILLRACE_PIPELINE_INT_H

#include "millrace/job.h"
#include "millrace/pipeline.h"

/* A list of strings from def[key] (a string or a list of strings); the
 * strings are borrowed from the value tree; the array is caller-freed. */
mr_status mr__def_strings(const mr_value *def, const char *key, const char ***out, size_t *n_out);

/* Per-stage declared workspace paths (normalised). */
typedef struct mr__stage_paths {
    char **deps;
    size_t n_deps;
    char **outs;      /* outs followed by metrics files */
    size_t n_outs;
    size_t n_metrics; /* the last n_metrics of outs are metrics files */
} mr__stage_paths;

const mr__stage_paths *mr__dag_paths(const mr_dag *dag, size_t i);
const mr_spec *mr__dag_spec(const mr_dag *dag);
ssize_t mr__dag_index(const mr_dag *dag, const char *name);
/* 1 if a built-in op reading path reads CSV (mr_table_read_file's rules). */
int mr__reads_csv(const char *path);
/* 1 if path a equals b or lies under directory b. */
int mr__path_within(const char *a, const char *b);

/* spec_features.c: checks millrace.yaml's entities:, feature_views: and
 * feature_services:, and writes the views each pit_join and
 * materialize_online stage names (views: [NAME, ...] or service: NAME) into
 * its definition inline (and its keys, when it names none), in place.
 * MR_E_SCHEMA with path:line:col, or MR_E_NOMEM. */
mr_status mr__spec_expand_features(mr_value *root, const char *path, mr_error *err);


/* Slurm's --time value in minutes (rounded up), -1 when it is none of
 * Slurm's forms. */
long mr__slurm_time_minutes(const char *s);

/* ---- the stage cache as entry files (stagecache.c) ------------------------------- */
/* A cluster job's workspace handle: no run store, the stage cache in cache_dir. */
mr_status mr__workspace_open_cluster(const char *dir, const char *cache_dir, mr_workspace **out, mr_error *err);
/* The stage cache of ws: runs.db, or, for a cluster job's handle, the entry
 * files. get: MR_E_NOT_FOUND on a miss (a file that does not hold the key
 * asked for is a miss); out params NULL-able, caller-freed. */
mr_status mr__cache_get(mr_workspace *ws, const char *key, char **outputs_json, char **metrics_json, char **key_doc,
                        mr_error *err);
mr_status mr__cache_put(mr_workspace *ws, const char *key, const char *stage, const char *op, const char *key_doc,
                        const char *outputs_json, const char *metrics_json, int64_t run_id, mr_error *err);
mr_status mr__cache_file_get(const char *dir, const char *key, char **outputs_json, char **metrics_json, char **key_doc,
                             char **stage, char **op, int64_t *run_id, mr_error *err);
mr_status mr__cache_file_put(const char *dir, const char *key, const char *stage, const char *op, const char *key_doc,
                             const char *outputs_json, const char *metrics_json, int64_t run_id, mr_error *err);
/* The runner: every runs.db entry not yet a file in dir, written there
 * (*n_written of them); one entry file recorded into runs.db. */
mr_status mr__cache_export(mr_workspace *ws, const char *dir, size_t *n_written, mr_error *err);
mr_status mr__cache_import(mr_workspace *ws, const char *dir, const char *key, int64_t run_id, mr_error *err);

/* ---- remotes (remote.c) --------------------------------------------------------- */
/* The remote a run uses (name NULL: the remote whose `cache:` is set, if any;
 * *found 0 when none): its url, endpoint, region (borrowed from spec) and
 * mode. MR_E_NOT_FOUND for an unknown name. */
mr_status mr__remote_for_run(const mr_spec *spec, const char *name, mr_job_remote *out, int *found, mr_error *err);
/* The worker's side: fetches the result of key into the local store and
 * stage cache (*hit 0 when the remote has none), or uploads one. */
mr_status mr__remote_fetch(mr_workspace *ws, const mr_job_remote *r, const char *stage, const char *key, int *hit,
                           mr_error *err);
/* status --remote: one connection to a remote, asked for stage entries
 * (*outputs_json NULL when it has none for key; caller frees). */
typedef struct mr__remote_probe mr__remote_probe;
mr_status mr__remote_probe_open(const mr_spec *spec, const char *name, mr__remote_probe **out, mr_error *err);
const char *mr__remote_probe_name(const mr__remote_probe *p);
mr_status mr__remote_probe_entry(mr__remote_probe *p, const char *key, char **outputs_json, mr_error *err);
void mr__remote_probe_close(mr__remote_probe *p);
/* gc --remote: deletes what the remote holds beyond the kept artifacts
 * (ids; directories keep their files): the stage entries naming anything
 * else first, then the manifests, then the files. */
mr_status mr__remote_gc(mr_workspace *ws, const mr_spec *spec, const char *name, const char *const *keep, size_t n_keep,
                        int dry_run, int json, mr_buf *out, mr_error *err);
mr_status mr__remote_store(mr_workspace *ws, const mr_job_remote *r, const char *stage, const char *op, int op_version,
                           const char *key, const char *outputs_json, const char *metrics_json, const char *key_doc,
                           mr_error *err);


/* ---- planning (plan.c): a stage's outputs, inputs and cache key ---------- */
typedef struct mr__io {
    char *name;                    /* exec: workspace path; refs: "stages.X.OUT"; built-in outputs: name */
    char *path;                    /* workspace-relative path */
    char id[MR_ARTIFACT_ID_LEN];   /* artifact id once known, "" before */
    int from_stage;                /* input: index of the producing stage, -1 for a workspace file */
} mr__io;

typedef struct mr__plan {
    mr__io *outs;
    size_t n_outs;
    size_t n_metrics;  /* the last n_metrics outs are metrics files */
    mr__io *ins;
    size_t n_ins;
    char key[MR_HASH_HEX_LEN + 1];
    char *key_doc;     /* canonical JSON the key hashes */
    mr_value *params;  /* the stage's params, nested ({"train": {"lr": 0.1}}), positions kept */
    mr_job_lock *locks; /* workspace paths the stage's worker locks (sorted, unique): see mr__plan_locks */
    size_t n_locks;
} mr__plan;

void mr__plan_free(mr__plan *p);
/* Declared outputs (names and paths; ids empty). */
mr_status mr__plan_outputs(const mr_dag *dag, size_t i, mr__plan *p, mr_error *err);
/* Inputs: upstream outputs by reference (ids copied from plans[j]) and
 * workspace files (id empty, from_stage -1: hash them with
 * mr__plan_hash_inputs). Upstream outputs must be known. */
mr_status mr__plan_inputs(const mr_dag *dag, size_t i, mr__plan *plans, mr_error *err);
/* Hashes the workspace inputs of the given stages in one parallel batch. */
mr_status mr__plan_hash_inputs(mr_workspace *ws, mr__plan *plans, const size_t *stages, size_t n,
                               uint64_t *bytes_hashed, mr_error *err);
/* Computes key_doc and key (all inputs must have ids). */
mr_status mr__plan_key(const mr_spec *spec, size_t i, int smoke, const char *git_commit, mr__plan *p, mr_error *err);
/* The workspace paths stage i writes there (its output paths: an exec
 * stage's outs, where a built-in op's results are checked out), locked
 * exclusive, and the ones an exec stage reads there (its deps), shared;
 * plus, in the same mode, every output path of any stage that contains or
 * lies within one of them. Two stages that touch the same workspace file
 * share a path, so their workers exclude each other (worker.c,
 * "Isolation"). Sorted by path, each path once in its strongest mode. */
mr_status mr__plan_locks(const mr_dag *dag, size_t i, const mr__plan *plans, mr__plan *p, mr_error *err);
/* Outputs JSON {"name": "id"} of a plan whose outputs are known. */
mr_status mr__plan_outputs_json(const mr__plan *p, mr_buf *out);
/* Looks the key up; on a hit whose objects are all in the store, fills the
 * output ids and returns 1 (metrics_json then owned by the caller). */
int mr__plan_cache_lookup(mr_workspace *ws, mr__plan *p, char **metrics_json);
/* 1 if every output exists in the workspace with the planned content. */
int mr__plan_outputs_in_place(mr_workspace *ws, mr__plan *p);
/* Resolves, in place, every ${stages.X[.O]} in def to the path(s) that the
 * stage's inputs named "stages.X.O" give, and every ${stages.X.FILE.PATH}
 * to that value of FILE.json in one of those paths (a whole-string
 * reference takes the value's type). The worker calls it once it knows
 * where the inputs are (private checkouts, or workspace paths). */
mr_status mr__resolve_refs(mr_value *def, const mr_job_io *ins, size_t n_ins, mr_error *err);

/* ---- millrace.lock (lockfile.c) ----------------------------------------- */
/* Reads the lock (missing file -> empty map). */
mr_status mr__lock_read(const mr_workspace *ws, mr_value **out, mr_error *err);
/* The recorded key of a stage, or NULL. Borrowed from lock. */
const char *mr__lock_stage_key(const mr_value *lock, const char *stage);
/* Rewrites the lock: stages with done[i] get their plan, other stages of the
 * spec keep their old entry, stages no longer in the spec are dropped. */
mr_status mr__lock_update(mr_workspace *ws, const mr_spec *spec, const mr__plan *plans, const int *done,
                          mr_error *err);

/* .millrace/locks/gc.lock: runs and stage workers hold it shared while they
 * may publish or read artifacts, gc exclusive (status.c). Blocks; a gc that
 * has to wait logs why once. inherit-able: a worker's command keeps it. */
mr_status mr__workspace_gc_lock(mr_workspace *ws, int mode, mr_flock *lk, mr_error *err);

/* git commit and dirty flag of the workspace ("" outside git). */
/* The commit as ops that record it see it and their keys hold it: the
 * HEAD commit, with "-dirty" when tracked files differ ("" outside git). */
void mr__git_describe(const char *root, char *out, size_t out_len);
void mr__git_info(const char *root, char *commit, size_t commit_len, int *dirty);

#endif
