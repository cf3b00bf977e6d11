/* The op interface and registry. An op is a stage kind: a name, a version
 * (bumped whenever its logic changes, so cached results are invalidated),
 * a params schema, named outputs, and a run function.
 *
 * Ops are registered once at start-up (mr_ops_register_builtin) and looked
 * up by name; later modules add their ops the same way.
 *
 * Example:
 *
 *   mr_status my_run(mr_op_ctx *ctx, mr_error *err);   // defined elsewhere: reads ctx->inputs, writes ctx->outputs
 *   static const mr_param_def my_params[] = {
 *       {"source", MR_PT_STR | MR_PT_PATH, 1, "file or ${stages.X} to read"},
 *       {NULL, 0, 0, NULL}};
 *   static const mr_op my_op = {.name = "my_op", .version = 1, .params = my_params, .run = my_run};
 *   if (mr_op_register(&my_op) != MR_OK) mr_log(MR_LOG_ERROR, "too many ops");
 *   const mr_op *op = mr_op_find("my_op");          // &my_op
 *   printf("%s v%d\n", op->name, op->version);
 *
 * Ownership: the registry keeps the mr_op pointers it is given (an op is a
 * static const object that outlives the process's use of it) and owns
 * nothing. Everything an mr_op_ctx or mr_op_validate_ctx points to is the
 * engine's, borrowed for the duration of the call: an op copies what it
 * keeps.
 * Status codes: MR_E_LIMIT (more than 64 ops), MR_E_STATE (an engine hook
 * called outside a stage worker), MR_E_NOT_FOUND (a cache miss),
 * MR_E_INVALID_ARG (a bad metric), MR_E_IO (the run store), MR_E_NOMEM.
 * Thread safety: register at start-up, before threads; lookups are then
 * read-only and thread-safe. The engine hooks are called from the stage's
 * thread, one at a time. */
#ifndef MILLRACE_OP_H
#define MILLRACE_OP_H

#include "millrace/core.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Accepted YAML types of an op param (bit set). */
enum {
    MR_PT_STR = 1u << 0,
    MR_PT_INT = 1u << 1,
    MR_PT_FLOAT = 1u << 2, /* an int is accepted where a float is expected */
    MR_PT_BOOL = 1u << 3,
    MR_PT_SEQ = 1u << 4,  /* list (items are checked by the op) */
    MR_PT_MAP = 1u << 5,
    MR_PT_STRSEQ = 1u << 6, /* list of strings; a single string is accepted too */
    MR_PT_ANY = 0xffu,
    /* Flag, not a type: the value is a workspace path (or ${stages.X}) the
     * op reads. The engine hashes it as an input of the stage, and an exec
     * stage that writes it becomes an upstream. */
    MR_PT_PATH = 1u << 8,
};

typedef struct mr_param_def {
    const char *name;
    unsigned types;   /* MR_PT_* bits */
    int required;
    const char *doc;  /* one line, shown by `millrace ops` and in errors */
} mr_param_def;

/* Keys every stage may carry, whatever its op: op, desc, resources
 * (NULL-terminated). */
extern const mr_param_def mr_stage_common_keys[];

/* One input or output of a running stage. */
typedef struct mr_op_io {
    const char *name;  /* exec: the workspace path; built-ins: "stages.X.OUT" / output name */
    const char *path;  /* where to read (inputs) or write (outputs), relative to the workspace */
    const char *id;    /* inputs: the artifact id the stage's key used (NULL if unknown) */
} mr_op_io;

/* What an op's run function gets. Built-in ops write their outputs into the
 * given (empty, private) output directories; the engine then publishes them
 * atomically. exec writes its declared outs in the workspace. */
typedef struct mr_op_ctx {
    const char *stage;        /* stage name */
    const char *workspace;    /* absolute workspace root (the process cwd) */
    const mr_value *def;      /* the stage definition, interpolated */
    const mr_value *params;   /* MAP "a.b" -> value: the params this stage depends on */
    int smoke;                /* 1 in smoke mode: shrink the work */
    int threads;              /* cores granted (resources.cpus) */
    uint64_t mem_bytes;       /* resources.mem, 0 = not declared */
    int64_t run_id;
    const mr_op_io *inputs;
    size_t n_inputs;
    const mr_op_io *outputs;
    size_t n_outputs;
    int log_fd;               /* the stage log: write progress and diagnostics here */
    const char *tmp_dir;      /* private scratch directory, removed afterwards */
    void *engine;             /* the engine's private state (metrics sink) */
    const char *stage_key;    /* the stage's cache key (lineage), or NULL */
    const char *git_commit;   /* HEAD of the workspace's git repository, or NULL / "" */
    int is_task;              /* 1 in one task of a Slurm job array (an op with `fanout`,
                               * docs/cluster.md): do piece `task` of the work only, cache it with
                               * mr_op_cache_put and write no outputs (the stage's own job then
                               * finds every piece cached); 0 otherwise */
    int task;
} mr_op_ctx;

/* Records a metric of the running stage (a curve when step varies): it goes
 * to the run store with the stage's result, and is replayed from the cache
 * when the stage is a hit. Names are dotted paths ("valid.auc"). Returns
 * MR_E_INVALID_ARG (no mr_error) for an empty name, a non-finite value or
 * outside a stage worker; MR_E_NOMEM. */
mr_status mr_op_metric(mr_op_ctx *ctx, const char *name, int64_t step, double value);

/* A cache for results inside a stage (the trials of a tune stage), kept in
 * the run store's stage cache under the stage name "<stage>#<kind>". get
 * returns MR_E_NOT_FOUND on a miss, else the stored JSON text (caller frees
 * with mr_free). put stores key_doc (canonical JSON the key hashes) and the
 * result JSON. The entry outlives the stage run: a stage killed half-way
 * keeps what it put. Both: MR_E_STATE outside a stage worker, MR_E_IO (the
 * run store), MR_E_NOMEM. */
mr_status mr_op_cache_get(mr_op_ctx *ctx, const char *key, char **result_json, mr_error *err);
mr_status mr_op_cache_put(mr_op_ctx *ctx, const char *kind, const char *key, const char *key_doc,
                          const char *result_json, mr_error *err);
/* An incremental op's previous result: output `output` of the stage
 * result cached under key (a key of this stage's earlier run, which the op
 * kept, say with mr_op_cache_put), its objects re-hashed, then checked out
 * read-only in the stage's scratch directory; *path_out (caller frees) is
 * its path. MR_E_NOT_FOUND: no such entry or output, an object gc removed
 * or one that no longer matches its hash (the op computes from scratch);
 * MR_E_STATE outside a stage worker; MR_E_IO; MR_E_NOMEM. */
mr_status mr_op_previous_output(mr_op_ctx *ctx, const char *key, const char *output, char **path_out, mr_error *err);
/* Records one child run of the stage (a tune trial) in the run store:
 * trial number, key, status and the whole record as JSON (docs/tune.md).
 * MR_E_STATE outside a stage worker, MR_E_IO. */
mr_status mr_op_trial_record(mr_op_ctx *ctx, int trial, const char *key, const char *status, double value,
                             const char *record_json, mr_error *err);

/* What an op is, declared by the op so that the engine never names one. */
enum {
    /* Writes the paths its definition declares under `outs` and `metrics`
     * in the workspace itself, and reads those under `deps` (exec, as in
     * dvc.yaml); the engine publishes them from there. Other ops write
     * into private staging directories the engine publishes to out/<stage>. */
    MR_OP_WORKSPACE_OUTPUTS = 1u << 0,
    /* Its `params` key lists the param paths it reads besides those it
     * interpolates (exec): they join the stage's key. */
    MR_OP_DECLARED_PARAMS = 1u << 1,
    /* Records the workspace's git commit in its output (ctx->git_commit). */
    MR_OP_GIT_COMMIT = 1u << 2,
};

/* What a validate hook sees: the stage's definition after ${params.X}
 * interpolation, with ${stages.X} references still unresolved (their
 * targets exist and name real outputs: the engine checked). */
typedef struct mr_op_validate_ctx {
    const char *stage;        /* stage name */
    const mr_value *def;      /* the stage mapping (positions from millrace.yaml) */
} mr_op_validate_ctx;

typedef struct mr_op {
    const char *name;
    int version;
    const mr_param_def *params;   /* NULL-terminated */
    const char *const *outputs;   /* NULL-terminated output names; NULL = one output "out" */
    /* Runs the op. Built-in ops read ctx inputs and write into ctx staging
     * dirs; the engine publishes what they wrote. */
    mr_status (*run)(mr_op_ctx *ctx, mr_error *err);
    /* Optional: outputs that depend on the stage definition (a split's part
     * names). Writes up to max names (borrowed from def) and returns how
     * many there are; when set, it replaces `outputs`. */
    size_t (*outputs_of)(const mr_value *def, const char **names, size_t max);
    unsigned flags;               /* MR_OP_* */
    /* Optional: checks the definition when the spec is loaded (`run`,
     * `status`, `dag`, `params`), before anything runs: values' types and
     * ranges, names the op knows (a train op's LightGBM parameters). Only
     * what needs data (a label column's presence) waits for run time. Set
     * err with the offending value's line and column (mr_error_at with a
     * NULL file: the engine names millrace.yaml and the stage) and a hint;
     * return MR_E_SCHEMA (or MR_E_INVALID_ARG). Must not read files. */
    mr_status (*validate)(const mr_op_validate_ctx *vc, mr_error *err);
    /* Optional: workspace files the definition reads besides its
     * MR_PT_PATH params (a transform's join `with:` files). Writes up to
     * max string values (borrowed from def, positions kept) and returns how
     * many there are; ${stages.X} references among them are left alone. The
     * engine hashes each file as an input of the stage, as it does a
     * MR_PT_PATH param's, so changing one re-runs the stage. */
    size_t (*inputs_of)(const mr_value *def, const mr_value **paths, size_t max);
    /* Optional: the file, inside its first output, that a `register: NAME`
     * in its definition registers in the model registry (package:
     * "model.mrb"). The engine registers it after the stage is done,
     * executed or cached; `register` is not part of the stage's key. */
    const char *registers;
    /* Optional: the op's work splits into *n_tasks independent pieces, at
     * most *parallel at once (a tune stage's trials), which the Slurm
     * executor runs as one job array before the stage's own job. threads:
     * the stage's cores. 0 pieces or an error: not split. */
    mr_status (*fanout)(const mr_value *def, int smoke, int threads, int *n_tasks, int *parallel, mr_error *err);
} mr_op;

/* 1 if v is a string holding a ${stages.X...} reference: its value (a path,
 * or a value read from X's outputs) is known only when the stage runs, so a
 * validate hook leaves it alone. */
int mr_op_value_deferred(const mr_value *v);

/* Adds op (kept by pointer); a name already registered keeps the first op
 * and returns MR_OK. MR_E_LIMIT (no mr_error) past 64 ops. */
mr_status mr_op_register(const mr_op *op);
const mr_op *mr_op_find(const char *name); /* NULL if none (or name NULL) */
/* All registered op names, NULL-terminated, for "did you mean"; n_out may
 * be NULL. Borrowed; valid until the next register. */
const char *const *mr_op_names(size_t *n_out);
/* Registers every built-in op (`millrace ops` lists them). Idempotent. */
void mr_ops_register_builtin(void);
/* The definition of key for op: a common stage key or one of op's params;
 * NULL if neither. Borrowed from the static tables. */
const mr_param_def *mr_op_param_find(const mr_op *op, const char *key);

#ifdef __cplusplus
}
#endif
#endif
