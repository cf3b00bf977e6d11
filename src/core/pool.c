/* The process-wide thread pool. mr_parallel_for hands out fixed-size blocks
 * through an atomic counter; workers and the caller all take blocks, so the
 * caller never idles. Block boundaries depend only on (n, block). Several
 * threads may call mr_parallel_for at once: one job gets the workers, the
 * others run on their callers' threads. mr_parallel_for_capped runs a job on
 * at most T threads: T "lanes" each pull the job's blocks from one counter. */
#define _GNU_SOURCE /* sched_getaffinity */
#include "millrace/core.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

typedef struct job {
    mr_range_fn fn;
    void *ctx;
    size_t n, block, n_blocks;
    atomic_size_t next;
    atomic_size_t done;
} job;

/* Handing a job to the workers. Training publishes thousands of jobs a
 * second of a few tens of microseconds each (a leaf's histogram, partition,
 * split search), so a worker that finishes one spins a little (SPIN_NS)
 * watching for the next before it sleeps on the condition variable: a
 * futex wake-up costs about as much as such a job. The caller publishes
 * the job pointer and bumps the generation, runs blocks itself, waits for
 * every block, then withdraws the pointer and waits until no worker is
 * inside. A worker counts itself active before it reads the pointer, so
 * (both sequentially consistent) the caller either sees it active or the
 * worker sees the pointer withdrawn: none touches a job that has returned. */
#define SPIN_NS 100000L

static struct {
    pthread_t *threads;
    int n_threads; /* workers + caller */
    pthread_mutex_t mu;
    pthread_cond_t cv_work;
    _Atomic(job *) cur;
    atomic_ulong generation;
    atomic_int stop;
    atomic_int active;   /* workers between counting themselves in and out */
    atomic_int sleeping; /* workers asleep (or about to be) on cv_work */
    atomic_int busy;     /* a job is running: other callers run theirs inline */
} pool = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv_work = PTHREAD_COND_INITIALIZER};

/* The CPUs this process may run on (its affinity mask, as nproc counts:
 * taskset, cgroup cpusets, a Slurm allocation), else the online ones. */
int mr_cpu_count(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0) return n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static void run_blocks(job *j, int tid)
{
    for (;;) {
        size_t b = atomic_fetch_add(&j->next, 1);
        if (b >= j->n_blocks) break;
        size_t begin = b * j->block;
        size_t end = begin + j->block < j->n ? begin + j->block : j->n;
        j->fn(j->ctx, begin, end, tid);
        atomic_fetch_add(&j->done, 1);
    }
}

/* Waits for a generation other than seen: spins SPIN_NS, then sleeps.
 * Returns 0 when the pool stops. */
static int wait_work(unsigned long seen)
{
    long t0 = now_ns();
    for (int i = 0;; i++) {
        if (atomic_load(&pool.generation) != seen) return 1;
        if (atomic_load(&pool.stop)) return 0;
        cpu_relax();
        if ((i & 255) == 255) {
            if (now_ns() - t0 > SPIN_NS) break;
            sched_yield(); /* a contended core: let the thread with work run */
        }
    }
    pthread_mutex_lock(&pool.mu);
    atomic_fetch_add(&pool.sleeping, 1);
    while (!atomic_load(&pool.stop) && atomic_load(&pool.generation) == seen) pthread_cond_wait(&pool.cv_work, &pool.mu);
    atomic_fetch_sub(&pool.sleeping, 1);
    pthread_mutex_unlock(&pool.mu);
    return !atomic_load(&pool.stop);
}

static void *worker(void *arg)
{
    int tid = (int)(intptr_t)arg;
    unsigned long seen = 0;
    while (wait_work(seen)) {
        seen = atomic_load(&pool.generation);
        atomic_fetch_add(&pool.active, 1);
        job *j = atomic_load(&pool.cur);
        if (j) run_blocks(j, tid);
        atomic_fetch_sub(&pool.active, 1);
    }
    return NULL;
}

mr_status mr_pool_init(int n_threads, mr_error *err)
{
    if (pool.threads) return MR_OK;
    if (n_threads <= 0) n_threads = mr_cpu_count();
    pool.n_threads = n_threads;
    if (n_threads == 1) return MR_OK;
    pool.threads = mr_calloc((size_t)n_threads - 1, sizeof(pthread_t));
    if (!pool.threads) return MR_ERR(err, MR_E_NOMEM, "out of memory creating thread pool");
    atomic_store(&pool.stop, 0);
    for (int i = 0; i < n_threads - 1; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker, (void *)(intptr_t)(i + 1)) != 0) {
            pool.n_threads = i + 1;
            return MR_ERR(err, MR_E_INTERNAL, "cannot start worker thread %d", i + 1);
        }
    }
    return MR_OK;
}

int mr_pool_threads(void) { return pool.n_threads > 0 ? pool.n_threads : 1; }

void mr_pool_shutdown(void)
{
    if (!pool.threads) {
        pool.n_threads = 0;
        return;
    }
    pthread_mutex_lock(&pool.mu);
    atomic_store(&pool.stop, 1);
    pthread_cond_broadcast(&pool.cv_work);
    pthread_mutex_unlock(&pool.mu);
    for (int i = 0; i < pool.n_threads - 1; i++) pthread_join(pool.threads[i], NULL);
    mr_free(pool.threads);
    pool.threads = NULL;
    pool.n_threads = 0;
    atomic_store(&pool.cur, NULL);
}

void mr_parallel_for(size_t n, size_t block, mr_range_fn fn, void *ctx)
{
    if (n == 0) return;
    if (block == 0) block = 1;
    job j = {.fn = fn, .ctx = ctx, .n = n, .block = block, .n_blocks = (n + block - 1) / block};
    atomic_init(&j.next, 0);
    atomic_init(&j.done, 0);
    /* One job at a time. A caller that finds the pool busy (another thread's
     * job, or a nested call from inside a job) runs its blocks itself, as
     * thread 0 of its own job: results only depend on the blocks. */
    if (!pool.threads || j.n_blocks == 1 || atomic_exchange(&pool.busy, 1)) {
        run_blocks(&j, 0);
        return;
    }
    atomic_store(&pool.cur, &j);
    atomic_fetch_add(&pool.generation, 1);
    if (atomic_load(&pool.sleeping) > 0) {
        pthread_mutex_lock(&pool.mu);
        pthread_cond_broadcast(&pool.cv_work);
        pthread_mutex_unlock(&pool.mu);
    }
    run_blocks(&j, 0);
    /* the last blocks are running on workers: wait for them, yielding the
     * core now and then in case one of them waits for it */
    for (int i = 0; atomic_load(&j.done) < j.n_blocks; i++) {
        cpu_relax();
        if ((i & 63) == 63) sched_yield();
    }
    atomic_store(&pool.cur, NULL);
    for (int i = 0; atomic_load(&pool.active) > 0; i++) {
        cpu_relax();
        if ((i & 63) == 63) sched_yield();
    }
    atomic_store(&pool.busy, 0);
}

/* ---- capped jobs --------------------------------------------------------------
 * The pool runs every job on all its threads. To honour a thread cap we hand
 * it exactly T jobs ("lanes"); each lane pulls blocks from a shared counter,
 * and its lane number is the thread id callers index scratch with. */
typedef struct lanes {
    mr_range_fn fn;
    void *ctx;
    size_t n, block, n_blocks;
    atomic_size_t next;
} lanes;

static void lane_run(void *vctx, size_t begin, size_t end, int tid)
{
    (void)end;
    (void)tid;
    lanes *L = vctx;
    for (;;) {
        size_t b = atomic_fetch_add(&L->next, 1);
        if (b >= L->n_blocks) break;
        size_t lo = b * L->block, hi = lo + L->block < L->n ? lo + L->block : L->n;
        L->fn(L->ctx, lo, hi, (int)begin);
    }
}

int mr_pool_threads_capped(int max_threads)
{
    int t = mr_pool_threads();
    if (max_threads > 0 && max_threads < t) t = max_threads;
    return t < 1 ? 1 : t;
}

void mr_parallel_for_capped(size_t n, size_t block, int max_threads, mr_range_fn fn, void *ctx)
{
    if (n == 0) return;
    if (block == 0) block = 1;
    size_t nb = (n + block - 1) / block;
    int T = mr_pool_threads_capped(max_threads);
    if (T <= 1 || nb == 1) {
        for (size_t b = 0; b < nb; b++) fn(ctx, b * block, b * block + block < n ? b * block + block : n, 0);
        return;
    }
    if ((size_t)T > nb) T = (int)nb;
    lanes L = {.fn = fn, .ctx = ctx, .n = n, .block = block, .n_blocks = nb};
    atomic_init(&L.next, 0);
    mr_parallel_for((size_t)T, 1, lane_run, &L);
}
