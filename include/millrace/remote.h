/* Remotes: a shared store of stage results on S3 (or a compatible service)
 * or on a shared filesystem, declared in millrace.yaml under `remotes:`
 * (docs/remote.md). `millrace push` uploads what millrace.lock references
 * (the outputs' objects, directory manifests, and one entry per stage
 * mapping its key to its outputs); `millrace pull` brings them back,
 * verified against their ids before they enter the local store, records
 * the entries in the run store's stage cache, and checks the outputs out.
 *
 * Example (given mr_workspace *ws, const mr_spec *spec):
 *
 *   mr_transfer_opts o;
 *   mr_transfer_opts_init(&o);
 *   o.remote = "shared";                      // NULL: the default remote
 *   mr_buf out;
 *   mr_buf_init(&out);
 *   if (mr_pipeline_push(ws, spec, &o, NULL, &out, &err) != MR_OK) mr_log_error(&err);
 *   else fputs(out.data ? out.data : "", stdout); // "push: 12 objects (3.2 MB) uploaded, 40 already there, ..."
 *   mr_buf_free(&out);
 *
 * The remote's layout: PREFIX/objects/ID (every file object and directory
 * manifest by its artifact id) and PREFIX/stages/KEY.json (a stage result).
 * An object appears there only whole (an S3 PUT or multipart completion,
 * or a rename on a filesystem), a manifest only after every file it lists,
 * a stage entry only after every output it names: a push killed at any
 * point leaves nothing a pull would take for a result that is not all
 * there, and the next push completes it.
 *
 * Status codes: MR_E_NOT_FOUND (no such remote, no stage result on the
 * remote, a stage without a result in millrace.lock), MR_E_CORRUPT (an
 * object whose content does not match its id: refused, named), MR_E_SCHEMA
 * (a malformed remotes: section, at its line), the S3 client's errors
 * (include/millrace/s3.h), MR_E_IO, MR_E_NOMEM.
 * Thread safety: as mr_pipeline_run's: one call at a time per workspace
 * handle; transfers run on their own threads. */
#ifndef MILLRACE_REMOTE_H
#define MILLRACE_REMOTE_H

#include "millrace/core.h"
#include "millrace/pipeline.h"
#include "millrace/spec.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks a document's remotes: section (a mapping of name to {url,
 * endpoint, region, default}; url s3://BUCKET[/PREFIX] or file:///PATH; at
 * most one default). MR_E_SCHEMA at the offending key, with a hint. */
mr_status mr_remotes_check(const mr_value *root, const char *path, mr_error *err);

/* Adds remote name to the millrace.yaml at spec_path (a remotes: section
 * appended when there is none), keeping the rest of the file as it is;
 * written atomically. MR_E_STATE (the name exists), MR_E_INVALID_ARG (a
 * bad url or name), MR_E_IO. */
mr_status mr_remote_add(const char *spec_path, const char *name, const char *url, const char *endpoint,
                        const char *region, int make_default, mr_error *err);
/* Removes remote name (MR_E_NOT_FOUND when there is none). */
mr_status mr_remote_remove(const char *spec_path, const char *name, mr_error *err);
/* Appends one line per remote (name, url, endpoint, "default"), or JSON. */
mr_status mr_remote_list(const mr_spec *spec, int json, mr_buf *out, mr_error *err);

typedef struct mr_transfer_opts {
    const char *remote;          /* NULL: the default (or the only) remote */
    const char *const *stages;   /* NULL: every stage millrace.lock has a result for */
    size_t n_stages;
    int jobs;                    /* parallel transfers (default 8) */
} mr_transfer_opts;
void mr_transfer_opts_init(mr_transfer_opts *o);

typedef struct mr_transfer_stats {
    uint64_t objects, bytes;     /* transferred */
    uint64_t present;            /* already there (skipped) */
    uint64_t stages;             /* stage results written (push) or taken (pull) */
    uint64_t missing;            /* pull: stages the remote has no result for */
    uint64_t stages_written;     /* push: entries written (the others were there already) */
} mr_transfer_stats;

mr_status mr_pipeline_push(mr_workspace *ws, const mr_spec *spec, const mr_transfer_opts *o,
                           mr_transfer_stats *stats, mr_buf *out, mr_error *err);
mr_status mr_pipeline_pull(mr_workspace *ws, const mr_spec *spec, const mr_transfer_opts *o,
                           mr_transfer_stats *stats, mr_buf *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
