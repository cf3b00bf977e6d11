/* The job boundary: what the runner hands a stage worker (`millrace stage
 * run NAME --job FILE`) and what the worker hands back. One typed struct
 * each way, one encoder and one decoder for each; the executor (local
 * processes today, Slurm jobs later) and the worker never build or parse
 * these files any other way.
 *
 * Both files are JSON, versioned ("format" + "version"), and specified byte
 * by byte in docs/formats.md ("Job files"). Every value of the stage
 * definition and of its params keeps its origin: the line and column in
 * `spec_path` (millrace.yaml) it came from, so an op's error about a value
 * points into millrace.yaml, never into the job file.
 *
 * Example (given const char *path):
 *
 *   mr_job job;
 *   mr_job_init(&job);
 *   if (mr_job_read(path, &job, &err) == MR_OK) {
 *       const mr_value *lr = mr_value_get_path(job.params, "train.learning_rate");
 *       if (lr && lr->kind == MR_V_FLOAT)   // lr->line, lr->col: where millrace.yaml set it
 *           printf("%s: learning_rate %g (%s:%ld)\n", job.stage, lr->u.f, job.spec_path, lr->line);
 *   } else {
 *       mr_log_error(&err);
 *   }
 *   mr_job_deinit(&job);
 *
 * Ownership: an mr_job / mr_job_result lives in caller storage and owns
 * every string and tree it points to; _deinit frees them (and is safe on a
 * zeroed or half-decoded struct). The encoders only read; the decoders
 * (and _read) init the struct first and copy everything out of the text.
 * Borrowed results (mr_job_result_output) live until _deinit.
 * Status codes: MR_E_PARSE (malformed JSON, a missing or mistyped field,
 * naming it and the file), MR_E_STATE (another format or version),
 * MR_E_INVALID_ARG (a non-finite metric), MR_E_NOT_FOUND / MR_E_IO /
 * MR_E_LIMIT (reading, writing), MR_E_NOMEM.
 * Thread safety: none needed (plain data). */
#ifndef MILLRACE_JOB_H
#define MILLRACE_JOB_H

#include "millrace/core.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_JOB_FORMAT "millrace-job"
#define MR_JOB_RESULT_FORMAT "millrace-job-result"
#define MR_JOB_VERSION 2 /* version 1: untyped JSON, no origins (before 2026-12) */

/* One input or output of the stage. */
typedef struct mr_job_io {
    char *name;  /* inputs: "stages.X.OUT" or a workspace path; outputs: the output's name */
    char *path;  /* workspace-relative path */
    char *id;    /* inputs: the artifact id the stage's key was computed from; outputs: "" */
    int metrics; /* outputs: 1 for a metrics file (exec), 0 otherwise */
} mr_job_io;

/* A workspace path the worker locks while it works there: exclusive for
 * what the stage writes, shared for what it only reads. */
typedef struct mr_job_lock {
    char *path;
    int exclusive;
} mr_job_lock;

/* The remote a run uses as a cache (docs/remote.md): before computing, the
 * worker fetches the result of the stage's key from it (pull); after
 * computing, it uploads it (push). url NULL: none. */
typedef struct mr_job_remote {
    char *url, *endpoint, *region;
    int pull, push;
} mr_job_remote;

typedef struct mr_job {
    char *stage;          /* stage name */
    char *op;             /* op name */
    int op_version;       /* the op version the key was computed with */
    char *key;            /* the stage's cache key (32 hex digits) */
    char *key_doc;        /* the canonical JSON the key hashes */
    int64_t run_id;
    int smoke;            /* 1: shrink the work */
    int force;            /* 1: run even when the key is cached */
    int threads;          /* cores granted */
    uint64_t mem_bytes;   /* resources.mem, 0 = not declared */
    char *workspace;      /* absolute workspace root */
    char *spec_path;      /* the file the origins of def and params refer to */
    char *result_path;    /* where the worker writes its mr_job_result */
    mr_value *def;        /* the stage definition, interpolated; ${stages.X} are resolved by the worker */
    mr_value *params;     /* MAP: the params the stage depends on, nested ("train": {"lr": ...}) */
    mr_job_io *inputs;
    size_t n_inputs;
    mr_job_io *outputs;
    size_t n_outputs;
    mr_job_lock *locks;   /* workspace paths the worker locks while it works there (sorted by path) */
    size_t n_locks;
    char *git_commit;     /* ops with MR_OP_GIT_COMMIT: the commit their key holds ("<sha>[-dirty]"), else "" */
    mr_job_remote remote; /* optional ("remote" in the file) */
    char *cache_dir;      /* optional: a cluster job (run --executor slurm) never opens runs.db; it reads and
                           * writes the stage cache as entry files in this directory, and reports what it
                           * wrote in its result (cache_entries, trials) for the runner to record */
} mr_job;

void mr_job_init(mr_job *job);   /* zeroes */
void mr_job_deinit(mr_job *job); /* frees what job owns and zeroes it */
/* Appends the job's JSON text to out. MR_E_NOMEM, MR_E_LIMIT. */
mr_status mr_job_encode(const mr_job *job, mr_buf *out, mr_error *err);
/* Parses a job file's text. path names the file in errors. MR_E_PARSE for
 * malformed JSON or a missing/mistyped field (the error names it),
 * MR_E_STATE for another format or version, MR_E_NOMEM. On failure job is
 * left deinit-able. */
mr_status mr_job_decode(const char *text, size_t len, const char *path, mr_job *job, mr_error *err);
/* Encodes and publishes atomically (mr_fs_write_atomic): MR_E_IO, MR_E_NOMEM. */
mr_status mr_job_write(const mr_job *job, const char *path, mr_error *err);
/* Reads and decodes (a file over 256 MB is refused: MR_E_LIMIT). */
mr_status mr_job_read(const char *path, mr_job *job, mr_error *err);

/* ---- result file ------------------------------------------------------------ */
typedef enum mr_job_status {
    MR_JOB_EXECUTED = 1, /* the op ran; outputs published and cached */
    MR_JOB_CACHED = 2,   /* another runner had computed it; outputs checked out */
    MR_JOB_FAILED = 3,   /* error says why; outputs are set when the results were published anyway */
} mr_job_status;

typedef struct mr_job_output {
    char *name; /* output name */
    char *id;   /* artifact id */
} mr_job_output;

typedef struct mr_job_metric {
    char *name; /* dotted ("valid.auc") */
    int64_t step;
    double value; /* finite */
} mr_job_metric;

/* A tune trial a cluster job recorded (the run store's tune_trials row). */
typedef struct mr_job_trial {
    int trial;
    char *key, *status;
    double value;
    char *record_json;
} mr_job_trial;

typedef struct mr_job_result {
    mr_job_status status;
    mr_error error;            /* MR_JOB_FAILED: the stage's error with its context and hint */
    mr_job_output *outputs;    /* every output (EXECUTED, CACHED), or those published on failure */
    size_t n_outputs;
    mr_job_metric *metrics;
    size_t n_metrics;
    char **warnings;           /* what the stage logged at warning level, in order */
    size_t n_warnings;
    int64_t bytes_read, bytes_written; /* the worker's I/O (/proc/self/io) */
    int64_t max_rss_kb;        /* the peak RSS of the worker or the largest child it waited for (getrusage), 0 = unknown */
    char **cache_entries;      /* cluster jobs: the keys of the stage-cache entry files the job wrote */
    size_t n_cache_entries;
    mr_job_trial *trials;      /* cluster jobs: the tune trials it recorded */
    size_t n_trials;
} mr_job_result;

void mr_job_result_init(mr_job_result *res);   /* zeroes, error initialised */
void mr_job_result_deinit(mr_job_result *res); /* frees what res owns and zeroes it */
/* Appends an output / a metric / a warning (copies the strings). MR_E_NOMEM;
 * a non-finite metric value is MR_E_INVALID_ARG. */
mr_status mr_job_result_add_output(mr_job_result *res, const char *name, const char *id);
mr_status mr_job_result_add_metric(mr_job_result *res, const char *name, int64_t step, double value);
mr_status mr_job_result_add_warning(mr_job_result *res, const char *text);
mr_status mr_job_result_add_cache_entry(mr_job_result *res, const char *key);
mr_status mr_job_result_add_trial(mr_job_result *res, int trial, const char *key, const char *status, double value,
                                  const char *record_json);
/* The id of output name, or NULL (borrowed). */
const char *mr_job_result_output(const mr_job_result *res, const char *name);
/* The result file, as the job file above: encode appends, decode parses
 * (MR_E_PARSE, MR_E_STATE; res left deinit-able), write publishes
 * atomically, read refuses files over 256 MB (MR_E_LIMIT). */
mr_status mr_job_result_encode(const mr_job_result *res, mr_buf *out, mr_error *err);
mr_status mr_job_result_decode(const char *text, size_t len, const char *path, mr_job_result *res, mr_error *err);
mr_status mr_job_result_write(const mr_job_result *res, const char *path, mr_error *err);
mr_status mr_job_result_read(const char *path, mr_job_result *res, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
