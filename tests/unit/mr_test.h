/* The unit tests' runner and status assertions, with the allocation-failure
 * torture (docs/architecture.md, "Allocation-failure torture").
 *
 * Every tests/unit/test_*.c includes this after <cmocka.h> and ends with
 * mr_test_run(tests, setup, teardown) in place of cmocka_run_group_tests.
 * Without MR_TORTURE in the environment that is exactly
 * cmocka_run_group_tests. With MR_TORTURE=1 each test case (selected by
 * MR_TORTURE_FILTER, a substring of its name, if set) runs in a child
 * process, first counting its allocations (K), then once for each chosen N
 * in 1..K with the Nth allocation failing (once, as curl's torture does;
 * MR_TORTURE_PERSIST=1 fails every one from the Nth on, as SQLite's
 * persistent mode does). MR_TORTURE_MAX=M caps the iterations of a test at
 * M values of N spread evenly over 1..K (the bounded tier); unset or 0:
 * all K. An iteration passes when the test passes, or when a status
 * assertion below saw MR_E_NOMEM after an injected fault fired (or fail()
 * after the library recorded an MR_E_NOMEM error, see mr__fail); in an ASan
 * build LeakSanitizer then checks that nothing leaked. Any other outcome (a
 * failed assertion, a crash, a leak, a hang past MR_TORTURE_TIMEOUT
 * seconds, default 120) fails the torture, printed with N and the test's
 * output.
 *
 * The group setup and teardown run in each child outside the armed window
 * (their allocations are not failed); each child gets its own empty TMPDIR,
 * removed after it, so use mr_test_tmpdir() for scratch files. */
#ifndef MR_TEST_H
#define MR_TEST_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "millrace/core.h"

#if defined(__SANITIZE_ADDRESS__)
#define MR_TEST_LSAN 1
int __lsan_do_recoverable_leak_check(void);
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MR_TEST_LSAN 1
int __lsan_do_recoverable_leak_check(void);
#endif
#endif

enum { MR_TORTURE_PASSED = 1, MR_TORTURE_NOMEM = 2 };

/* What a torture child reports back to the runner (shared memory). */
struct mr_torture_shared {
    unsigned long long seen;     /* allocation calls while armed */
    unsigned long long failed;   /* of those, failed by the hook */
    int outcome;                 /* MR_TORTURE_* */
    int leaked;                  /* LeakSanitizer found a leak */
    char where[160];             /* the assertion that accepted MR_E_NOMEM */
};

static struct mr_torture_shared *mr__torture; /* non-NULL in a torture child */

/* True in a torture child (the hook is the runner's: a test of the hook
 * itself cannot nest in it). */
static inline int mr_test_torturing(void) { return mr__torture != NULL; }

/* True when the running iteration is a torture child in which an injected
 * allocation failure has fired: an MR_E_NOMEM is then the expected outcome. */
static inline int mr_test_fault_fired(void) { return mr__torture && mr_alloc_fault_failed() > 0; }

/* The scratch directory to create temporary files under: TMPDIR (a fresh
 * one per torture iteration) or /tmp. */
static inline const char *mr_test_tmpdir(void)
{
    const char *t = getenv("TMPDIR");
    return t && *t ? t : "/tmp";
}

/* End a torture iteration that ran out of memory as it should: check for
 * leaks (the test's own objects are still reachable from its stack) and
 * leave without running the rest of the test. */
__attribute__((noreturn, unused)) static void mr__torture_accept(const char *file, int line)
{
    mr_alloc_fault_disarm();
    snprintf(mr__torture->where, sizeof mr__torture->where, "%s:%d", file, line);
    mr__torture->outcome = MR_TORTURE_NOMEM;
#ifdef MR_TEST_LSAN
    if (__lsan_do_recoverable_leak_check()) mr__torture->leaked = 1;
#endif
    mr__torture->seen = mr_alloc_fault_seen();
    mr__torture->failed = mr_alloc_fault_failed();
    fflush(NULL);
    _exit(0);
}

__attribute__((unused)) static void mr__assert_status(long got, long want, const char *expr, const char *file, int line)
{
    if (got == want) return;
    if (got == MR_E_NOMEM && mr_test_fault_fired()) mr__torture_accept(file, line);
    print_error("%s is %s (%ld), expected %s (%ld)\n", expr, mr_status_name((mr_status)got), got,
                mr_status_name((mr_status)want), want);
    _fail(file, line);
}

__attribute__((unused)) static void mr__assert_alloc(const void *p, const char *expr, const char *file, int line)
{
    if (p) return;
    if (mr_test_fault_fired()) mr__torture_accept(file, line);
    print_error("%s is NULL\n", expr);
    _fail(file, line);
}

/* assert_status(expr, want): expr (an mr_status) equals want; printed by
 * name when not. assert_ok(expr): equals MR_OK. Under torture, once a fault
 * fired, MR_E_NOMEM ends the iteration as passed (after the leak check).
 * assert_alloc(p): p (from an allocating call without a status, such as
 * mr_strdup) is non-NULL; under torture NULL after a fault passes alike. */
#define assert_status(expr, want) mr__assert_status((long)(expr), (long)(want), #expr, __FILE__, __LINE__)
#define assert_ok(expr) assert_status(expr, MR_OK)
#define assert_alloc(p) mr__assert_alloc((p), #p, __FILE__, __LINE__)

/* fail() and fail_msg() (the tests' own "st != MR_OK" helpers): under
 * torture, once a fault fired and the library recorded an MR_E_NOMEM error
 * (mr_alloc_fault_nomem_errors), the failure is that error propagating and
 * ends the iteration as passed. Weaker than assert_status, which sees the
 * status itself: prefer that where the status is at hand. */
__attribute__((unused)) static void mr__fail(const char *file, int line)
{
    if (mr_test_fault_fired() && mr_alloc_fault_nomem_errors() > 0) mr__torture_accept(file, line);
    _fail(file, line);
}
#undef fail
#define fail() mr__fail(__FILE__, __LINE__)

/* For a test's own call into an allocating library without a status
 * (jansson): pass mr_alloc_failures_here() from before the call; if an
 * allocation failed in between under torture, the iteration ends as
 * passed. */
__attribute__((unused)) static void mr__accept_if_oom(uint64_t failures_before, const char *file, int line)
{
    if (mr_test_fault_fired() && mr_alloc_failures_here() != failures_before) mr__torture_accept(file, line);
}
#define mr_test_accept_if_oom(before) mr__accept_if_oom((before), __FILE__, __LINE__)

/* ---- the torture runner ---------------------------------------------------- */

static inline unsigned long mr__env_ulong(const char *name, unsigned long dflt)
{
    const char *s = getenv(name);
    if (!s || !*s) return dflt;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end) {
        fprintf(stderr, "torture: %s=%s: expected a non-negative integer\n", name, s);
        exit(2);
    }
    return v;
}

static inline double mr__now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Runs test t in a child with the Nth allocation failing (nth 0: count
 * only); the child's output goes to out_fd. Returns the child's wait
 * status; *sh holds what it reported. */
static inline int mr__torture_child(const char *group, const struct CMUnitTest *t, CMFixtureFunction setup,
                                    CMFixtureFunction teardown, unsigned long long nth, int persist, int out_fd,
                                    const char *scratch, unsigned timeout_s, int pool_threads,
                                    struct mr_torture_shared *sh)
{
    memset(sh, 0, sizeof *sh);
    if (mkdir(scratch, 0755) != 0) { /* 0755: tests drop privileges in children */
        fprintf(stderr, "torture: mkdir %s: %s\n", scratch, strerror(errno));
        exit(2);
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "torture: fork: %s\n", strerror(errno));
        exit(2);
    }
    if (pid == 0) {
        mr__torture = sh;
        setenv("TMPDIR", scratch, 1);
        dup2(out_fd, 1);
        dup2(out_fd, 2);
        alarm(timeout_s);
        if (pool_threads > 1) mr_pool_init(pool_threads, NULL); /* the one main started, not armed */
        void *group_state = NULL;
        if (setup && setup(&group_state) != 0) {
            fprintf(stderr, "torture: group setup failed\n");
            fflush(NULL);
            _exit(1);
        }
        struct CMUnitTest one = *t;
        if (!one.initial_state) one.initial_state = group_state;
        mr_alloc_fault_arm(nth, persist);
        int failures = _cmocka_run_group_tests(group, &one, 1, NULL, NULL);
        mr_alloc_fault_disarm();
        sh->seen = mr_alloc_fault_seen();
        sh->failed = mr_alloc_fault_failed();
        if (teardown) teardown(&group_state);
        sh->outcome = MR_TORTURE_PASSED;
#ifdef MR_TEST_LSAN
        if (!failures && __lsan_do_recoverable_leak_check()) sh->leaked = 1;
#endif
        fflush(NULL);
        _exit(failures ? 1 : 0);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
    }
    mr_fs_rmtree(scratch, NULL);
    return ws;
}

static inline void mr__torture_dump(int out_fd)
{
    off_t len = lseek(out_fd, 0, SEEK_END);
    off_t from = len > 6000 ? len - 6000 : 0;
    char buf[4096];
    ssize_t n;
    lseek(out_fd, from, SEEK_SET);
    fprintf(stderr, "----- its output%s -----\n", from ? " (tail)" : "");
    fflush(stderr);
    while ((n = read(out_fd, buf, sizeof buf)) > 0) fwrite(buf, 1, (size_t)n, stderr);
    fprintf(stderr, "-----\n");
}

/* Why an iteration failed, or NULL when it passed. */
static inline const char *mr__torture_verdict(int ws, const struct mr_torture_shared *sh, char *buf, size_t cap)
{
    if (WIFSIGNALED(ws)) {
        snprintf(buf, cap, "%s (signal %d)", WTERMSIG(ws) == SIGALRM ? "timed out" : "crashed", WTERMSIG(ws));
        return buf;
    }
    if (WEXITSTATUS(ws) != 0 || !sh->outcome) {
        snprintf(buf, cap, "the test failed (exit status %d)", WEXITSTATUS(ws));
        return buf;
    }
    if (sh->leaked) {
        snprintf(buf, cap, "memory leaked (%s)", sh->outcome == MR_TORTURE_NOMEM ? sh->where : "test passed");
        return buf;
    }
    return NULL;
}

__attribute__((unused)) static int mr__torture_run(const char *group, const struct CMUnitTest *tests, size_t n,
                                                   CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *filter = getenv("MR_TORTURE_FILTER");
    int persist = mr__env_ulong("MR_TORTURE_PERSIST", 0) != 0;
    unsigned long max_iter = mr__env_ulong("MR_TORTURE_MAX", 0);
    unsigned timeout_s = (unsigned)mr__env_ulong("MR_TORTURE_TIMEOUT", 120);
    char base[4096], scratch[4200], why[256];
    snprintf(base, sizeof base, "%s/mr-torture-XXXXXX", mr_test_tmpdir());
    if (!mkdtemp(base)) {
        fprintf(stderr, "torture: mkdtemp %s: %s\n", base, strerror(errno));
        return 2;
    }
    chmod(base, 0755);
    snprintf(scratch, sizeof scratch, "%s/tmp", base);
    char outpath[4200];
    snprintf(outpath, sizeof outpath, "%s/output", base);
    int out_fd = open(outpath, O_RDWR | O_CREAT | O_TRUNC, 0600);
    struct mr_torture_shared *sh =
        mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (out_fd < 0 || sh == MAP_FAILED) {
        fprintf(stderr, "torture: scratch setup failed: %s\n", strerror(errno));
        return 2;
    }
    /* Threads do not survive fork(): a pool main() started is stopped here
     * and started again, of the same size, in each child. */
    int pool_threads = mr_pool_threads();
    if (pool_threads > 1) mr_pool_shutdown();
    int failed_tests = 0;
    unsigned long long total_iter = 0;
    double t_all = mr__now();
    printf("[torture] %s: %zu test(s), failing allocation N %s%s\n", group, n,
           persist ? "and every one after it" : "only", max_iter ? " (bounded)" : "");
    for (size_t i = 0; i < n; i++) {
        const struct CMUnitTest *t = &tests[i];
        if (filter && *filter && !strstr(t->name, filter)) continue;
        double t0 = mr__now();
        if (ftruncate(out_fd, 0) != 0) return 2;
        lseek(out_fd, 0, SEEK_SET);
        int ws = mr__torture_child(group, t, setup, teardown, 0, 0, out_fd, scratch, timeout_s, pool_threads, sh);
        const char *bad = mr__torture_verdict(ws, sh, why, sizeof why);
        if (bad) {
            fprintf(stderr, "[torture] FAIL %s: without any failing allocation: %s\n", t->name, bad);
            mr__torture_dump(out_fd);
            failed_tests++;
            continue;
        }
        unsigned long long k = sh->seen;
        unsigned long long iters = max_iter && k > max_iter ? max_iter : k;
        unsigned long long n_nomem = 0, n_pass = 0, n_fail = 0, n_unreached = 0;
        for (unsigned long long j = 0; j < iters; j++) {
            /* all of 1..K, or max_iter values spread evenly over it
             * (the first and the last included) */
            unsigned long long nth = iters == k ? j + 1 : (iters == 1 ? 1 : 1 + j * (k - 1) / (iters - 1));
            if (ftruncate(out_fd, 0) != 0) return 2;
            lseek(out_fd, 0, SEEK_SET);
            ws = mr__torture_child(group, t, setup, teardown, nth, persist, out_fd, scratch, timeout_s, pool_threads, sh);
            bad = mr__torture_verdict(ws, sh, why, sizeof why);
            total_iter++;
            if (bad) {
                if (n_fail++ < 3) {
                    fprintf(stderr, "[torture] FAIL %s: allocation %llu of %llu failing: %s\n", t->name, nth, k, bad);
                    mr__torture_dump(out_fd);
                }
                continue;
            }
            if (sh->outcome == MR_TORTURE_NOMEM)
                n_nomem++;
            else if (sh->failed)
                n_pass++; /* the failure fired and the code recovered (a fallback, a retry) */
            else
                n_unreached++; /* this run made fewer than N allocations (threads vary the count) */
        }
        printf("[torture] %-40s K=%-6llu %llu run(s): %llu MR_E_NOMEM, %llu passed, %llu not reached, %llu FAILED "
               "(%.1f s)\n",
               t->name, k, iters, n_nomem, n_pass, n_unreached, n_fail, mr__now() - t0);
        fflush(stdout);
        failed_tests += n_fail != 0;
    }
    close(out_fd);
    unlink(outpath);
    rmdir(base);
    printf("[torture] %s: %llu iteration(s), %d test(s) failed (%.1f s)\n", group, total_iter, failed_tests,
           mr__now() - t_all);
    return failed_tests;
}

__attribute__((unused)) static int mr__test_run(const char *group, const struct CMUnitTest *tests, size_t n,
                                                CMFixtureFunction setup, CMFixtureFunction teardown)
{
    const char *t = getenv("MR_TORTURE");
    if (t && *t && strcmp(t, "0") != 0) return mr__torture_run(group, tests, n, setup, teardown);
    return _cmocka_run_group_tests(group, tests, n, setup, teardown);
}

#define mr_test_run(tests, setup, teardown)                                                               \
    mr__test_run(#tests, (tests), sizeof(tests) / sizeof((tests)[0]), (setup), (teardown))

#endif
