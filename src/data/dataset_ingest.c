/* Ingest: any source (mr_source) -> filter -> projection -> dataset writer,
 * one batch at a time, so memory stays bounded by the reader's window and the
 * writer's open row groups. Shared by the `ingest` op and `millrace data
 * ingest`. It does not publish anything: callers write into a private
 * directory and rename it.
 *
 * Pipelining. With more than one pool thread, the dataset writer runs on a
 * thread of its own, fed through a queue of at most QUEUE_BATCHES batches:
 * while the reader parses the next window on the pool, the writer encodes and
 * compresses the previous batches (its column chunks go to the pool whenever
 * the reader leaves it idle, else run on the writer's thread). The writer
 * takes batches in order and is the only thread touching the dataset writer,
 * so the dataset is byte-identical to a serial run. The first error wins: a
 * writer error stops the reader at its next hand-off, a reader error stops
 * the writer after the batch it is on. */
#include "data/dataset_int.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DEFAULT_BATCH_ROWS 131072u
#define QUEUE_BATCHES 1 /* batches waiting for the writer: enough to cover a window's parse, bounded memory */

void mr_ingest_opts_init(mr_ingest_opts *o)
{
    memset(o, 0, sizeof *o);
    mr_csv_options_init(&o->csv);
    mr_dataset_write_opts_init(&o->write);
}

/* Bytes of the source files, for readers that do not count what they read
 * (Parquet files, datasets). */
static uint64_t source_bytes(const mr_source *src)
{
    uint64_t total = 0;
    for (size_t i = 0; i < mr_source_n_files(src); i++) {
        const char *f = mr_source_file(src, i);
        struct stat st;
        if (!strncmp(f, "s3://", 5)) {
            total += mr_source_object_bytes(src, i);
        } else if (mr_fs_is_dir(f)) {
            mr_dataset *ds = NULL;
            if (mr_dataset_open(f, &ds, NULL) != MR_OK) continue;
            for (size_t k = 0; k < mr_dataset_n_shards(ds); k++) {
                mr_dataset_shard_info si;
                mr_dataset_shard(ds, k, &si);
                total += si.bytes;
            }
            mr_dataset_close(ds);
        } else if (stat(f, &st) == 0) {
            total += (uint64_t)st.st_size;
        }
    }
    return total;
}

/* Keeps the rows of *t where the filter is TRUE (*t may be replaced). */
static mr_status apply_filter(const mr_expr *e, mr_table **t, uint64_t *n_filtered, mr_error *err)
{
    mr_table *in = *t;
    size_t n = in->n_rows;
    uint8_t *mask = mr_malloc(n ? n : 1);
    uint32_t *idx = mr_malloc((n ? n : 1) * sizeof *idx);
    mr_status rc = MR_OK;
    if (!mask || !idx) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    rc = mr_expr_eval_filter(e, in, mask, err);
    if (rc != MR_OK) goto done;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        idx[m] = (uint32_t)i;
        m += mask[i] != 0;
    }
    *n_filtered += n - m;
    if (m == n) goto done;
    mr_table *out = NULL;
    rc = mr_table_take(in, idx, m, &out, err);
    if (rc != MR_OK) goto done;
    mr_table_free(in);
    *t = out;
done:
    mr_free(mask);
    mr_free(idx);
    return rc;
}

/* ---- the writer thread ---------------------------------------------------- */

typedef struct wqueue {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    mr_table *q[QUEUE_BATCHES]; /* ring of batches, owned */
    size_t head, n;
    int closed;                 /* the reader has no more batches (or failed) */
    int failed;                 /* the writer failed: rc, err */
    mr_dataset_writer *w;
    mr_status rc;
    mr_error err;
} wqueue;

static void *writer_main(void *arg)
{
    wqueue *wq = arg;
    for (;;) {
        pthread_mutex_lock(&wq->mu);
        while (wq->n == 0 && !wq->closed) pthread_cond_wait(&wq->cv, &wq->mu);
        if (wq->n == 0) {
            pthread_mutex_unlock(&wq->mu);
            break;
        }
        mr_table *t = wq->q[wq->head];
        wq->q[wq->head] = NULL;
        wq->head = (wq->head + 1) % QUEUE_BATCHES;
        wq->n--;
        pthread_cond_broadcast(&wq->cv);
        pthread_mutex_unlock(&wq->mu);
        mr_status rc = mr_dataset_writer_write(wq->w, t, &wq->err);
        mr_table_free(t);
        if (rc != MR_OK) {
            pthread_mutex_lock(&wq->mu);
            wq->rc = rc;
            wq->failed = 1;
            pthread_cond_broadcast(&wq->cv);
            pthread_mutex_unlock(&wq->mu);
            break;
        }
    }
    return NULL;
}

/* Hands t (owned) to the writer thread; waits while the queue is full.
 * Returns the writer's status if it has failed (t is freed). */
static mr_status wq_push(wqueue *wq, mr_table *t)
{
    pthread_mutex_lock(&wq->mu);
    while (wq->n == QUEUE_BATCHES && !wq->failed) pthread_cond_wait(&wq->cv, &wq->mu);
    mr_status rc = wq->failed ? wq->rc : MR_OK;
    if (rc == MR_OK) {
        wq->q[(wq->head + wq->n) % QUEUE_BATCHES] = t;
        wq->n++;
        pthread_cond_broadcast(&wq->cv);
    }
    pthread_mutex_unlock(&wq->mu);
    if (rc != MR_OK) mr_table_free(t);
    return rc;
}

/* Tells the writer there is nothing more and waits for it to finish the
 * queued batches (all of them, unless stop: then they are dropped). */
static mr_status wq_finish(wqueue *wq, pthread_t th, int stop)
{
    pthread_mutex_lock(&wq->mu);
    wq->closed = 1;
    if (stop)
        for (; wq->n; wq->n--, wq->head = (wq->head + 1) % QUEUE_BATCHES) {
            mr_table_free(wq->q[wq->head]);
            wq->q[wq->head] = NULL;
        }
    pthread_cond_broadcast(&wq->cv);
    pthread_mutex_unlock(&wq->mu);
    pthread_join(th, NULL);
    return wq->failed ? wq->rc : MR_OK;
}

mr_status mr_dataset_ingest(const char *source, const char *dir, const mr_ingest_opts *o, mr_ingest_stats *stats,
                            mr_error *err)
{
    mr_ingest_opts defaults;
    if (!o) {
        mr_ingest_opts_init(&defaults);
        o = &defaults;
    }
    mr_ingest_stats st;
    memset(&st, 0, sizeof st);
    mr_source *src = NULL;
    mr_dataset_writer *w = NULL;
    mr_expr *filter = NULL;
    mr_table *t = NULL;
    uint64_t good = 0; /* good source rows taken */
    size_t batch_rows = o->batch_rows ? o->batch_rows : DEFAULT_BATCH_ROWS;
    int first = 1;
    mr_status rc = mr_source_open(source, o->format, &o->csv, &src, err);
    if (rc != MR_OK) goto done;
    if (o->s3_version && strcmp(o->s3_version, mr_source_version(src))) {
        rc = MR_ERR(err, MR_E_STATE, "%s changed after the run planned the stage (version %s, planned %s)", source,
                    mr_source_version(src), o->s3_version);
        mr_error_hint(err, "run again: the stage is planned with the new version");
        goto done;
    }
    st.files = mr_source_n_files(src);
    if (o->filter && o->filter[0]) {
        rc = mr_expr_parse(o->filter, strlen(o->filter), "filter", &filter, err);
        if (rc != MR_OK) goto done;
    }
    rc = mr_dataset_writer_open(dir, &o->write, &w, err);
    if (rc != MR_OK) goto done;
    wqueue wq;
    pthread_t writer_th;
    int threaded = 0;
    if (mr_pool_threads() > 1) {
        memset(&wq, 0, sizeof wq);
        wq.w = w;
        mr_error_init(&wq.err);
        if (pthread_mutex_init(&wq.mu, NULL) == 0) {
            if (pthread_cond_init(&wq.cv, NULL) == 0) {
                threaded = pthread_create(&writer_th, NULL, writer_main, &wq) == 0;
                if (!threaded) pthread_cond_destroy(&wq.cv);
            }
            if (!threaded) pthread_mutex_destroy(&wq.mu);
        } /* else: write on this thread */
    }
    for (;;) {
        size_t want = batch_rows;
        if (o->max_rows) {
            if (good >= o->max_rows) break;
            if (o->max_rows - good < want) want = (size_t)(o->max_rows - good);
        }
        rc = mr_source_next(src, want, &t, err);
        if (rc != MR_OK || !t) break;
        if (o->max_rows && t->n_rows > o->max_rows - good) { /* a reader may return more than asked */
            mr_table *head = NULL;
            rc = mr_table_slice(t, 0, (size_t)(o->max_rows - good), &head, err);
            if (rc != MR_OK) break;
            mr_table_free(t);
            t = head;
        }
        good += t->n_rows;
        if (first && filter) {
            rc = mr_expr_bind_table(filter, t, MR_EXPR_FILTER, err);
            if (rc != MR_OK) break;
        }
        first = 0;
        if (filter) {
            rc = apply_filter(filter, &t, &st.rows_filtered, err);
            if (rc != MR_OK) break;
        }
        if (o->columns) {
            rc = mr_table_project(t, o->columns, o->n_columns, err);
            if (rc != MR_OK) {
                mr_error_hint(err, "the source has no such column");
                break;
            }
        }
        size_t n = t->n_rows;
        if (threaded) {
            rc = wq_push(&wq, t); /* t is the writer's now */
            t = NULL;
            if (rc != MR_OK) break;
        } else {
            rc = mr_dataset_writer_write(w, t, err);
            if (rc != MR_OK) break;
            mr_table_free(t);
            t = NULL;
        }
        st.rows_written += n;
        st.rows_read = good;
        if (o->progress) o->progress(o->progress_ctx, &st);
    }
    if (threaded) {
        mr_status wrc = wq_finish(&wq, writer_th, rc != MR_OK);
        if (wrc != MR_OK && err && !mr_error_is_set(err)) *err = wq.err; /* the writer's error came first */
        if (rc == MR_OK) rc = wrc;
        pthread_cond_destroy(&wq.cv);
        pthread_mutex_destroy(&wq.mu);
    }
    if (rc != MR_OK) goto done;
    rc = mr_dataset_writer_close(w, &st.dataset, err);
    w = NULL;
done:
    mr_table_free(t);
    mr_dataset_writer_free(w);
    mr_expr_free(filter);
    if (src) {
        mr_csv_stats cs;
        uint64_t whole = source_bytes(src);
        mr_source_close(src, &cs);
        st.rows_skipped = cs.rows_skipped;
        st.rows_quarantined = cs.rows_quarantined;
        st.bytes_read = cs.bytes ? cs.bytes : whole;
    }
    st.rows_read = good + st.rows_skipped;
    if (stats) *stats = st;
    return rc;
}

/* ---- staging left by killed ingests ---------------------------------------------- */

/* The PID of a staging name "<base>.tmp.<PID>" / "<base>.old.<PID>", or 0. */
static long staging_pid(const char *name, const char *base, size_t base_len)
{
    if (strncmp(name, base, base_len) || (strncmp(name + base_len, ".tmp.", 5) && strncmp(name + base_len, ".old.", 5)))
        return 0;
    const char *d = name + base_len + 5;
    if (*d < '1' || *d > '9') return 0;
    char *end = NULL;
    errno = 0;
    long pid = strtol(d, &end, 10);
    return errno || *end || pid <= 0 ? 0 : pid;
}

mr_status mr_dataset_remove_stale_staging(const char *dir, size_t *n_removed, mr_error *err)
{
    if (n_removed) *n_removed = 0;
    size_t len = strlen(dir);
    while (len > 1 && dir[len - 1] == '/') len--;
    char *path = mr_strndup(dir, len);
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *slash = strrchr(path, '/');
    const char *parent = slash ? (slash == path ? "/" : path) : ".";
    const char *base = slash ? slash + 1 : path;
    if (slash && slash != path) *slash = '\0';
    mr_status rc = MR_OK;
    DIR *d = opendir(parent);
    if (!d) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot list the directory", parent);
        goto done;
    }
    size_t base_len = strlen(base);
    while (rc == MR_OK) {
        const struct dirent *e = readdir(d);
        if (!e) break;
        long pid = staging_pid(e->d_name, base, base_len);
        if (!pid || pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue; /* running (or not ours to signal): live */
        char *p = slash ? mr_path_join(parent, e->d_name) : mr_strdup(e->d_name);
        if (!p) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            break;
        }
        rc = mr_fs_rmtree(p, err);
        if (rc == MR_OK) {
            mr_log(MR_LOG_INFO, "removed %s, left by ingest process %ld, which no longer runs", p, pid);
            if (n_removed) (*n_removed)++;
        }
        mr_free(p);
    }
    closedir(d);
done:
    mr_free(path);
    return rc;
}
