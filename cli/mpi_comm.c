/* The MPI transport of training across ranks (millrace train --ranks N):
 * mpirun or srun starts the ranks, Open MPI moves the bytes. The library
 * builds its collectives on one call, exchange(), and every exchange here
 * waits with a deadline by polling the requests, so a rank that stops
 * answering is named instead of hanging the others. Only the millrace
 * executable links MPI (the library and the Python package do not). */
#include "cli.h"

#include <mpi.h>

#include <sched.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CHUNK ((size_t)1 << 30) /* MPI counts are ints: large buffers travel in chunks */

/* Sanitizer builds (make asan): Open MPI, PMIx, hwloc and libevent keep
 * what they allocate while starting for the process's life. A rank unwinds
 * allocations in full (its frames lack frame pointers), so the leak checker
 * sees those frames and these suppressions match them; millrace's own
 * leaks are still reported. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MR_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(MR_ASAN)
#define MR_ASAN 1
#endif
#ifdef MR_ASAN
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:MPI_Init_thread\nleak:MPI_Finalize\nleak:ompi_mpi_init\nleak:ompi_mpi_finalize\nleak:orte_init\n"
           "leak:libopen-pal.so\nleak:libopen-rte.so\nleak:libpmix.so\nleak:event_base_loop\nleak:libevent\n";
}
#endif

const char *cli_log_flag(void)
{
    mr_log_level l = mr_log_get_level();
    return l == MR_LOG_DEBUG ? "-v" : l >= MR_LOG_WARN ? "-q" : NULL;
}

void cli_mpi_sanitizer_setup(int argc, char **argv)
{
#ifdef MR_ASAN
    const char *o = getenv("ASAN_OPTIONS");
    if (o && strstr(o, "fast_unwind_on_malloc=0")) return;
    char *opts = mr_asprintf("%s%sfast_unwind_on_malloc=0", o ? o : "", o && *o ? ":" : "");
    char **av = calloc((size_t)argc + 4, sizeof(char *));
    if (!opts || !av || setenv("ASAN_OPTIONS", opts, 1) != 0) return; /* then leaks of MPI may be reported */
    size_t k = 0;
    av[k++] = (char *)cli_self_exe;
    if (cli_log_flag()) av[k++] = (char *)cli_log_flag(); /* the flag before the verb */
    av[k++] = "train";
    for (int i = 1; i < argc; i++) av[k++] = argv[i];
    execv("/proc/self/exe", av); /* the same rank, before MPI starts */
#else
    (void)argc;
    (void)argv;
#endif
}

typedef struct mpi_state {
    MPI_Request *req;
    int *req_xfer;          /* request -> transfer index */
    size_t cap;
    uint64_t bytes_sent;
    uint64_t exchanges;
    double seconds;         /* inside exchanges: moving bytes and waiting for the others */
} mpi_state;

static mpi_state g_mpi;

static void nap(long ns)
{
    struct timespec ts = {0, ns};
    nanosleep(&ts, NULL);
}

static mr_status exchange(mpi_state *m, mr_gbdt_xfer *x, size_t n, double timeout_s, int *peer_out);
static mr_status mpi_exchange(void *ctx, mr_gbdt_xfer *x, size_t n, double timeout_s, int *peer_out)
{
    mpi_state *m = ctx;
    double t0 = mr_now();
    mr_status st = exchange(m, x, n, timeout_s, peer_out);
    m->seconds += mr_now() - t0;
    return st;
}

static mr_status exchange(mpi_state *m, mr_gbdt_xfer *x, size_t n, double timeout_s, int *peer_out)
{
    size_t need = 0;
    for (size_t i = 0; i < n; i++) need += x[i].len / CHUNK + 1;
    if (need > m->cap) {
        MPI_Request *r = realloc(m->req, need * sizeof(*r));
        int *rx = r ? realloc(m->req_xfer, need * sizeof(*rx)) : NULL;
        if (r) m->req = r;
        if (!r || !rx) return MR_E_NOMEM;
        m->req_xfer = rx;
        m->cap = need;
    }
    int nr = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t off = 0; off < x[i].len || (off == 0 && x[i].len == 0); off += CHUNK) {
            size_t len = x[i].len - off < CHUNK ? x[i].len - off : CHUNK;
            char *p = (char *)x[i].buf + off;
            int rc = x[i].send ? MPI_Isend(p, (int)len, MPI_BYTE, x[i].peer, 0, MPI_COMM_WORLD, &m->req[nr])
                               : MPI_Irecv(p, (int)len, MPI_BYTE, x[i].peer, 0, MPI_COMM_WORLD, &m->req[nr]);
            if (rc != MPI_SUCCESS) {
                *peer_out = x[i].peer;
                return MR_E_IO;
            }
            m->req_xfer[nr++] = (int)i;
            if (x[i].send) m->bytes_sent += len;
            if (x[i].len == 0) break;
        }
    }
    m->exchanges++;
    /* Spin briefly (a peer that is ready answers within microseconds), then
     * yield the core (ranks may share cores with each other's threads),
     * then nap: a long wait is a rank far behind, or gone. */
    double start = mr_now(), deadline = start + timeout_s;
    for (;;) {
        int done = 0;
        if (MPI_Testall(nr, m->req, &done, MPI_STATUSES_IGNORE) != MPI_SUCCESS) {
            *peer_out = -1;
            for (int k = 0; k < nr; k++) {
                int one = 0;
                if (m->req[k] != MPI_REQUEST_NULL && MPI_Test(&m->req[k], &one, MPI_STATUS_IGNORE) != MPI_SUCCESS) {
                    *peer_out = x[m->req_xfer[k]].peer;
                    break;
                }
            }
            return MR_E_IO;
        }
        if (done) return MR_OK;
        double now = mr_now();
        if (now > deadline) { /* (a process stopped past the deadline and resumed finds its transfers done) */
            if (MPI_Testall(nr, m->req, &done, MPI_STATUSES_IGNORE) == MPI_SUCCESS && done) return MR_OK;
            *peer_out = -1;
            for (int k = 0; k < nr; k++) {
                int one = 0;
                MPI_Test(&m->req[k], &one, MPI_STATUS_IGNORE);
                if (!one) {
                    *peer_out = x[m->req_xfer[k]].peer;
                    break;
                }
            }
            return MR_E_TIMEOUT;
        }
        if (now - start > 0.02)
            nap(200000);
        else if (now - start > 1e-4)
            sched_yield();
    }
}

int cli_mpi_init(int *argc, char ***argv, mr_gbdt_comm *comm)
{
    int provided = 0;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) return -1;
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    memset(comm, 0, sizeof(*comm));
    MPI_Comm_rank(MPI_COMM_WORLD, &comm->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &comm->size);
    comm->ctx = &g_mpi;
    comm->exchange = mpi_exchange;
    return 0;
}

uint64_t cli_mpi_bytes_sent(void) { return g_mpi.bytes_sent; }
uint64_t cli_mpi_exchanges(void) { return g_mpi.exchanges; }
double cli_mpi_exchange_seconds(void) { return g_mpi.seconds; }

void cli_mpi_finalize(void)
{
    MPI_Finalize();
    free(g_mpi.req);
    free(g_mpi.req_xfer);
    memset(&g_mpi, 0, sizeof(g_mpi));
}

/* A rank that failed leaves at once: MPI_Finalize would wait for the
 * others, and mpirun (or srun --kill-on-bad-exit) ends them on this
 * non-zero exit. */
void cli_mpi_fail_exit(int code)
{
    fflush(stdout);
    fflush(stderr);
    _exit(code);
}

