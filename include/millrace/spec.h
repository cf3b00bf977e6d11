/* millrace.yaml -> a validated pipeline spec.
 *
 *   params:            # nested mapping, any YAML scalars
 *     train: {rounds: 100}
 *   stages:            # mapping: stage name -> definition
 *     prepare:
 *       op: exec
 *       cmd: python3 prep.py --rounds ${params.train.rounds}
 *       deps: [prep.py, data/raw.csv]
 *       outs: [data/clean.csv]
 *
 * Example:
 *
 *   mr_spec *spec;
 *   const char *ov[] = {"train.rounds=300"};
 *   if (mr_spec_load("millrace.yaml", ov, 1, &spec, &err) != MR_OK) {
 *       mr_log_error(&err);   // "millrace.yaml:7:5: stage 'prepare': unknown key 'dep' for op 'exec'" + hint
 *       return;
 *   }
 *   for (size_t i = 0; i < spec->n_stages; i++) printf("%s: %s\n", spec->stages[i].name, spec->stages[i].op->name);
 *   mr_spec_free(spec);
 *
 * Loading interpolates ${params.a.b} (a string that is exactly one reference
 * takes the param's type; embedded references are replaced by the scalar's
 * text), applies -S overrides, checks every stage's keys against its op's
 * schema and every ${stages.NAME[.OUTPUT]} reference against the stage list,
 * and runs each op's validate hook (op.h). Errors carry file:line:col, what
 * was expected and a "did you mean" hint. Cycles are found later, by the
 * DAG (mr_dag_build).
 *
 * Ownership: a spec is the caller's (mr_spec_free, NULL is a no-op) and
 * owns every string, value tree and array it points to; stage specs and
 * their values are borrowed from it until mr_spec_free. Ops are the
 * registry's (static). mr_yaml_parse's tree is the caller's
 * (mr_value_free).
 * Status codes: MR_E_PARSE (YAML syntax, duplicate keys), MR_E_SCHEMA (an
 * unknown op or key, a missing key, a type or value the op does not take,
 * from the schema or the op's validate hook; an output a referenced stage
 * does not have), MR_E_NOT_FOUND (a reference to an unknown stage or
 * param, an override of a param that does not exist; a missing file),
 * MR_E_INVALID_ARG (a malformed -S override),
 * MR_E_LIMIT (nesting, size), MR_E_IO, MR_E_NOMEM. Each error names
 * file:line:col and carries a hint where one helps.
 * Thread safety: a loaded spec is read-only: any thread may read it. Ops
 * must be registered before loading. */
#ifndef MILLRACE_SPEC_H
#define MILLRACE_SPEC_H

#include "millrace/core.h"
#include "millrace/op.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_stage_ref {
    char *stage;   /* referenced stage name */
    char *output;  /* output name, or NULL for the default/all outputs */
    long line, col;
} mr_stage_ref;

typedef struct mr_stage_spec {
    char *name;
    long line, col;        /* position of the stage's key in the file */
    const mr_op *op;       /* resolved op (never NULL after a successful load) */
    mr_value *def;         /* the stage mapping, interpolated (owned) */
    char **param_paths;    /* params this stage depends on (referenced + declared), sorted, unique */
    size_t n_param_paths;
    mr_stage_ref *refs;    /* ${stages.X} references found in def, in order */
    size_t n_refs;
    double cpus;           /* resources.cpus, default 1 */
    uint64_t mem_bytes;    /* resources.mem ("512M", "2G" or bytes), 0 = unspecified */
    char time[24];         /* resources.time, Slurm's --time ("90", "1:30:00", "2-00:00:00"); "" = none */
    int gpus;              /* resources.gpus (Slurm --gpus), 0 = none */
    char partition[64];    /* resources.partition, "" = the run's (--partition) or the cluster's default */
    int oom_retries;       /* resources.oom_retries: times an OUT_OF_MEMORY job is resubmitted with twice the memory */
} mr_stage_spec;

typedef struct mr_spec {
    char *path;            /* the file it was loaded from */
    mr_value *root;        /* whole document as parsed (owned) */
    mr_value *params;      /* effective params after overrides (owned, a MAP; empty if none) */
    mr_stage_spec *stages; /* in file order */
    size_t n_stages;
    char **overrides;      /* the -S strings applied, as given */
    size_t n_overrides;
} mr_spec;

/* Parses and validates. overrides: "a.b=value" (typed as a YAML scalar; the
 * path must exist in params, unless written "+a.b=value" to add one).
 * Returns MR_E_PARSE / MR_E_SCHEMA / MR_E_NOT_FOUND / MR_E_IO (and the
 * others above) with err filled. */
mr_status mr_spec_load(const char *path, const char *const *overrides, size_t n_overrides,
                       mr_spec **out, mr_error *err);
/* Same from memory; path is used in messages only. */
mr_status mr_spec_parse(const char *text, size_t len, const char *path,
                        const char *const *overrides, size_t n_overrides, mr_spec **out,
                        mr_error *err);
void mr_spec_free(mr_spec *spec);
/* The stage called name (borrowed from spec), or NULL. */
const mr_stage_spec *mr_spec_stage(const mr_spec *spec, const char *name);

/* Parses a YAML document into a value tree (no validation), positions
 * kept; path names the file in errors. MR_E_PARSE (line:col), MR_E_LIMIT
 * (nesting), MR_E_NOMEM. */
mr_status mr_yaml_parse(const char *text, size_t len, const char *path, mr_value **out,
                        mr_error *err);
/* Writes a value tree as block-style YAML (used for millrace.lock and
 * `millrace params`). Strings are quoted when they would not read back as
 * the same string. Appends to out (MR_E_NOMEM, MR_E_LIMIT; no mr_error). */
mr_status mr_yaml_emit(const mr_value *v, mr_buf *out);

#ifdef __cplusplus
}
#endif
#endif
