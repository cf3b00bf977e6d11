/* The process supervisor: spawn (fork + a child setup), signals to a child or
 * its process group, termination with a grace period, and reaping with
 * resource usage. Every child millrace starts goes through here.
 *
 * A child that leads its own process group (new_group) takes everything it
 * starts down with it when signalled: the group is created in the child
 * (setpgid(0, 0)) and again in the parent (setpgid(pid, pid)), so neither
 * side can signal it before it exists, whichever runs first. */
#define _GNU_SOURCE
#include "millrace/core.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void mr_proc_opts_init(mr_proc_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->stdout_fd = -1;
    o->stderr_fd = -1;
}

static void child_setup(const mr_proc_opts *o)
{
    if (o->new_group) setpgid(0, 0);
    if (o->parent_death_sig) prctl(PR_SET_PDEATHSIG, o->parent_death_sig);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    if (o->stdin_null) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd >= 0 && fd != 0) {
            dup2(fd, 0);
            close(fd);
        }
    }
    if (o->stdout_fd >= 0 && o->stdout_fd != 1) dup2(o->stdout_fd, 1);
    if (o->stderr_fd >= 0 && o->stderr_fd != 2) dup2(o->stderr_fd, 2);
}

mr_status mr_proc_spawn(mr_proc *p, const mr_proc_opts *o, int (*child)(void *arg), void *arg, mr_error *err)
{
    mr_proc_opts dflt;
    if (!o) {
        mr_proc_opts_init(&dflt);
        o = &dflt;
    }
    memset(p, 0, sizeof(*p));
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "cannot start a child process");
    if (pid == 0) {
        child_setup(o);
        _exit(child(arg));
    }
    if (o->new_group) setpgid(pid, pid); /* EACCES once it has exec'ed: it did it itself */
    mr__lease_spawned((int)pid);         /* lease locks it inherits stay alive while it lives */
    p->pid = (int)pid;
    p->group = o->new_group != 0;
    return MR_OK;
}

typedef struct exec_args {
    const char *path;
    char *const *argv;
} exec_args;

static int run_exec(void *arg)
{
    const exec_args *a = arg;
    execv(a->path, a->argv);
    int e = errno;
    const char *msg = strerror(e);
    /* async-signal-safe writes only: we are a forked child */
    if (write(2, "millrace: cannot run ", 21) < 0 || write(2, a->path, strlen(a->path)) < 0 || write(2, ": ", 2) < 0 ||
        write(2, msg, strlen(msg)) < 0 || write(2, "\n", 1) < 0)
        return 127;
    return 127;
}

mr_status mr_proc_spawn_exec(mr_proc *p, const mr_proc_opts *o, const char *path, char *const argv[],
                             mr_error *err)
{
    exec_args a = {path, argv};
    return mr_proc_spawn(p, o, run_exec, &a, err);
}

static void set_usage(mr_proc *p, int status, const struct rusage *ru)
{
    p->exited = 1;
    p->status = status;
    p->usage.user_s = (double)ru->ru_utime.tv_sec + ru->ru_utime.tv_usec * 1e-6;
    p->usage.sys_s = (double)ru->ru_stime.tv_sec + ru->ru_stime.tv_usec * 1e-6;
    p->usage.max_rss_kb = ru->ru_maxrss;
}

int mr_proc_wait(mr_proc *p, int block)
{
    if (p->exited) return 1;
    if (p->pid <= 0) return -1;
    for (;;) {
        int st = 0;
        struct rusage ru;
        memset(&ru, 0, sizeof(ru));
        pid_t r = wait4(p->pid, &st, block ? 0 : WNOHANG, &ru);
        if (r == p->pid) {
            set_usage(p, st, &ru);
            return 1;
        }
        if (r == 0) return 0;
        if (errno == ECHILD) { /* reaped elsewhere: its status is lost */
            memset(&ru, 0, sizeof(ru));
            set_usage(p, 255 << 8, &ru);
            return 1;
        }
        if (errno == EINTR) {
            if (block) continue;
            return 0;
        }
        return -1;
    }
}

mr_proc *mr_proc_wait_any(mr_proc *const *procs, size_t n, int block)
{
    for (;;) {
        int running = 0;
        for (size_t k = 0; k < n; k++) {
            if (!procs[k] || procs[k]->exited || procs[k]->pid <= 0) continue;
            running = 1;
            if (mr_proc_wait(procs[k], 0) == 1) return procs[k];
        }
        if (!running || !block) return NULL;
        /* Sleep until some child changes state, without reaping it. */
        siginfo_t si;
        memset(&si, 0, sizeof(si));
        if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) != 0) {
            if (errno == EINTR) return NULL; /* a signal: the caller checks its flags */
            struct timespec ts = {0, 20 * 1000 * 1000}; /* ECHILD races: poll */
            nanosleep(&ts, NULL);
            continue;
        }
        int ours = 0;
        for (size_t k = 0; k < n && !ours; k++) ours = procs[k] && !procs[k]->exited && procs[k]->pid == si.si_pid;
        if (!ours && si.si_pid > 0) {
            /* a child we do not supervise here: reap it, it is nobody's */
            int st;
            waitpid(si.si_pid, &st, WNOHANG);
        }
    }
}

void mr_proc_signal(const mr_proc *p, int sig)
{
    if (!p || p->exited || p->pid <= 0) return;
    kill(p->group ? -p->pid : p->pid, sig);
}

void mr_proc_kill_group(const mr_proc *p)
{
    if (p && p->group && p->pid > 0) kill(-p->pid, SIGKILL);
}

void mr_proc_terminate(mr_proc *const *procs, size_t n, double grace_s)
{
    for (size_t k = 0; k < n; k++) mr_proc_signal(procs[k], SIGTERM);
    double deadline = mr_now() + (grace_s > 0 ? grace_s : 0);
    int killed = 0;
    for (;;) {
        int running = 0;
        for (size_t k = 0; k < n; k++)
            if (procs[k] && procs[k]->pid > 0 && mr_proc_wait(procs[k], 0) == 0) running = 1;
        if (!running) break;
        if (!killed && mr_now() >= deadline) {
            for (size_t k = 0; k < n; k++) mr_proc_signal(procs[k], SIGKILL);
            killed = 1;
        }
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int mr_proc_ok(const mr_proc *p) { return p->exited && WIFEXITED(p->status) && WEXITSTATUS(p->status) == 0; }

void mr_proc_describe(const mr_proc *p, char *buf, size_t buf_len)
{
    if (!p->exited)
        snprintf(buf, buf_len, "running");
    else if (WIFSIGNALED(p->status))
        snprintf(buf, buf_len, "killed by signal %d (%s)", WTERMSIG(p->status), strsignal(WTERMSIG(p->status)));
    else
        snprintf(buf, buf_len, "exited with status %d", WEXITSTATUS(p->status));
}

/* ---- running a command for its output ---------------------------------------- */

static int run_execvp(void *arg)
{
    char *const *argv = arg;
    execvp(argv[0], argv);
    int e = errno;
    const char *msg = strerror(e);
    if (write(2, "millrace: cannot run ", 21) < 0 || write(2, argv[0], strlen(argv[0])) < 0 || write(2, ": ", 2) < 0 ||
        write(2, msg, strlen(msg)) < 0 || write(2, "\n", 1) < 0)
        return 127;
    return 127;
}

mr_status mr_proc_capture(char *const argv[], double timeout_s, mr_buf *out, mr_buf *errout, int *exit_code,
                          mr_error *err)
{
    int po[2] = {-1, -1}, pe[2] = {-1, -1};
    *exit_code = -1;
    if (pipe2(po, O_CLOEXEC) != 0 || pipe2(pe, O_CLOEXEC) != 0) {
        int e = errno;
        for (int k = 0; k < 2; k++) {
            if (po[k] >= 0) close(po[k]);
            if (pe[k] >= 0) close(pe[k]);
        }
        return MR_ERR_SYS(err, MR_E_IO, e, "%s: cannot make a pipe", argv[0]);
    }
    mr_proc p;
    mr_proc_opts o;
    mr_proc_opts_init(&o);
    o.stdin_null = 1;
    o.stdout_fd = po[1];
    o.stderr_fd = pe[1];
    o.new_group = 1;
    mr_status rc = mr_proc_spawn(&p, &o, run_execvp, (void *)argv, err);
    close(po[1]);
    close(pe[1]);
    if (rc != MR_OK) {
        close(po[0]);
        close(pe[0]);
        return rc;
    }
    double deadline = mr_now() + timeout_s;
    int open_fds = 2, timed_out = 0;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    mr_buf *bufs[2] = {out, errout};
    char chunk[4096];
    while (open_fds > 0 && rc == MR_OK) {
        double left = deadline - mr_now();
        if (left <= 0) {
            timed_out = 1;
            break;
        }
        int n = poll(fds, 2, (int)(left * 1000) + 1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        for (int k = 0; k < 2; k++) {
            if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            ssize_t r = read(fds[k].fd, chunk, sizeof(chunk));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                close(fds[k].fd);
                fds[k].fd = -1;
                open_fds--;
            } else if (bufs[k] && mr_buf_append(bufs[k], chunk, (size_t)r) != MR_OK) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
        }
    }
    for (int k = 0; k < 2; k++)
        if (fds[k].fd >= 0) close(fds[k].fd);
    if (timed_out || rc != MR_OK) mr_proc_kill_group(&p);
    mr_proc_wait(&p, 1);
    if (rc != MR_OK) return rc;
    if (timed_out) return MR_ERR(err, MR_E_IO, "%s did not answer within %.0f s", argv[0], timeout_s);
    if (WIFEXITED(p.status)) *exit_code = WEXITSTATUS(p.status);
    else *exit_code = 128 + (WIFSIGNALED(p.status) ? WTERMSIG(p.status) : 0);
    return MR_OK;
}
