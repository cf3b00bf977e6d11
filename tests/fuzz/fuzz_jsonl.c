/* libFuzzer target for the JSON-lines reader (src/data/jsonl.c): each input
 * is a mode byte and the file: the file (the input after its first byte)
 * is written once to a private file in /dev/shm and read twice — from the
 * file on 1 thread in one chunk, and from memory (mr_jsonl_read_mem, as the
 * trainer reads windows) on 2 threads in chunks of 7 + size/64 bytes — with the options the mode byte picks (bits 0-1: on_error
 * fail / skip / quarantine; bits 2-4: a declared type for key "a", 0 none;
 * bit 5: max_line_len 64). The mode byte is not part of the file, so a
 * seed's lines are read as they are whatever they start with (the corpus
 * files begin with one: 0x00 for the defaults). Aborts when a property the reader promises
 * breaks:
 *   - the two reads differ in status, message, stats, quarantined bytes,
 *     column names, types or any value (the chunking, the thread count and
 *     reading from memory must not show);
 *   - a failure without a message, or with a status jsonl.h does not list;
 *   - a table whose columns disagree on the row count, or whose names
 *     repeat, or whose declared column is not of the declared type.
 * Also built with any compiler for the corpus replay (replay.c), which
 * ctest runs on tests/fuzz/corpus/jsonl. */
#include "millrace/jsonl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[128], qpath[2][128];

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_jsonl: property broken: %s\n", what);
    abort();
}

typedef struct outcome {
    mr_status rc;
    char msg[1024];
    mr_csv_stats stats;
    mr_table *t;
    char *quarantine; /* the quarantine file's bytes (QUARANTINE only) */
    size_t quarantine_len;
} outcome;

/* which 0 reads the file; which 1 reads the same bytes from memory
 * (mr_jsonl_read_mem, as the trainer's windows do): the two must agree. */
static void read_once(const mr_jsonl_options *o, int which, const uint8_t *data, size_t size, outcome *out)
{
    mr_error err;
    mr_error_init(&err);
    memset(out, 0, sizeof(*out));
    mr_jsonl_options oo = *o;
    oo.quarantine_path = qpath[which];
    out->rc = which == 0 ? mr_jsonl_read(path, &oo, &out->t, &out->stats, &err)
                         : mr_jsonl_read_mem((const char *)data, size, path, 1, &oo, &out->t, &out->stats, &err);
    mr_error_format(&err, out->msg, sizeof(out->msg));
    if (out->rc != MR_OK) {
        check(out->t == NULL, "a failed read returned a table");
        check(err.code == out->rc && err.msg[0], "a failure without a message");
        check(out->rc == MR_E_PARSE || out->rc == MR_E_LIMIT || out->rc == MR_E_SCHEMA, "a status jsonl.h does not list");
    }
    if (o->on_error == MR_ON_ERROR_QUARANTINE && out->rc == MR_OK) {
        mr_error_init(&err);
        check(mr_fs_read_file(qpath[which], (size_t)1 << 24, &out->quarantine, &out->quarantine_len, &err) == MR_OK,
              "the quarantine file cannot be read back");
    }
    unlink(qpath[which]);
}

static void check_table(const mr_table *t, const mr_jsonl_options *o)
{
    for (size_t j = 0; j < t->n_cols; j++) {
        check(t->cols[j]->n == t->n_rows, "a column's length is not the row count");
        for (size_t k = 0; k < j; k++) check(strcmp(t->cols[j]->name, t->cols[k]->name) != 0, "a column name repeats");
    }
    if (o->n_schema) {
        const mr_column *a = mr_table_column(t, o->schema_names[0]);
        check(a != NULL, "the declared column is missing from a table that read");
        check(a->type == o->schema_types[0], "the declared column changed type");
    }
}

static void same(const outcome *x, const outcome *y)
{
    check(x->rc == y->rc, "status depends on chunking/threads");
    check(!strcmp(x->msg, y->msg), "message depends on chunking/threads");
    check(!memcmp(&x->stats, &y->stats, sizeof(x->stats)), "stats depend on chunking/threads");
    check(x->quarantine_len == y->quarantine_len &&
              (!x->quarantine_len || !memcmp(x->quarantine, y->quarantine, x->quarantine_len)),
          "quarantined bytes depend on chunking/threads");
    if (x->rc != MR_OK) return;
    const mr_table *a = x->t, *b = y->t;
    check(a->n_rows == b->n_rows && a->n_cols == b->n_cols, "table shape depends on chunking/threads");
    mr_buf va, vb;
    mr_buf_init(&va);
    mr_buf_init(&vb);
    for (size_t j = 0; j < a->n_cols; j++) {
        check(!strcmp(a->cols[j]->name, b->cols[j]->name), "column names depend on chunking/threads");
        check(a->cols[j]->type == b->cols[j]->type, "column types depend on chunking/threads");
        for (size_t i = 0; i < a->n_rows; i++) {
            check(mr_column_is_null(a->cols[j], i) == mr_column_is_null(b->cols[j], i), "nulls depend on chunking/threads");
            va.len = vb.len = 0;
            check(mr_column_format(a->cols[j], i, &va) == MR_OK && mr_column_format(b->cols[j], i, &vb) == MR_OK,
                  "a value cannot be formatted");
            check(va.len == vb.len && (!va.len || !memcmp(va.data, vb.data, va.len)), "values depend on chunking/threads");
        }
    }
    mr_buf_free(&va);
    mr_buf_free(&vb);
}

static void outcome_free(outcome *x)
{
    mr_table_free(x->t);
    mr_free(x->quarantine);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        mr_pool_init(2, NULL);
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof(path), "%s/mr_fuzz_jsonl_%ld.jsonl", dir, (long)getpid());
        snprintf(qpath[0], sizeof(qpath[0]), "%s/mr_fuzz_jsonl_%ld.q0", dir, (long)getpid());
        snprintf(qpath[1], sizeof(qpath[1]), "%s/mr_fuzz_jsonl_%ld.q1", dir, (long)getpid());
    }
    uint8_t mode = size ? data[0] : 0;
    if (size) {
        data++;
        size--;
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    static const mr_dtype declared[8] = {MR_T_NULL, MR_T_BOOL, MR_T_INT64, MR_T_FLOAT64,
                                         MR_T_STRING, MR_T_DATE, MR_T_TIMESTAMP, MR_T_FLOAT32};
    static const char *const names[1] = {"a"};
    mr_dtype type = declared[(mode >> 2) & 7];
    mr_jsonl_options o;
    mr_jsonl_options_init(&o);
    o.on_error = (mode & 3) == 1 ? MR_ON_ERROR_SKIP : (mode & 3) == 2 ? MR_ON_ERROR_QUARANTINE : MR_ON_ERROR_FAIL;
    if (type != MR_T_NULL) {
        o.schema_names = names;
        o.schema_types = &type;
        o.n_schema = 1;
    }
    if (mode & 32) o.max_line_len = 64;
    outcome one, two;
    o.threads = 1;
    read_once(&o, 0, data, size, &one);
    o.threads = 2;
    o.chunk_size = 7 + size / 64; /* at least 64 chunk edges, not one per 7 bytes of a 4 KB input */
    read_once(&o, 1, data, size, &two);
    same(&one, &two);
    if (one.rc == MR_OK) check_table(one.t, &o);
    outcome_free(&one);
    outcome_free(&two);
    unlink(path);
    return 0;
}
