/* Lease locks: mr_flock on filesystems where flock may not work (NFS, SMB),
 * or wherever MILLRACE_LOCKS=lease asks for them (docs/cluster.md, "A store
 * many nodes share").
 *
 * A lock file P becomes a directory P.d/ of holder entries, one file per
 * holder, named <host>-<pid>-<n>.x (exclusive) or .s (shared), holding the
 * host, the holder's pid and the pids it handed the lock to. Entries are
 * added and removed only under P.d/.meta, a file created with O_EXCL (atomic
 * on NFSv3 and later) and removed a few milliseconds later. A holder renews
 * its entry's mtime every lease/3 seconds (one thread per process; a child
 * that inherited the lock, an exec stage's command, gets a keeper process
 * that renews while it lives). An entry is stale, and removed by the next
 * taker, when its host is this host and none of its pids is alive, or when
 * its mtime is older than the lease against the filesystem's clock (the
 * mtime of .meta just created: no two hosts' clocks are compared). A .meta
 * older than two leases is a taker that died inside the protocol: it is
 * renamed aside, and removed only if what was renamed is the stale file.
 *
 * MILLRACE_LEASE_S sets the lease (default 120 s: above NFS's attribute
 * cache of up to 60 s), MILLRACE_HOSTNAME the host name (default
 * gethostname). */
#define _GNU_SOURCE
#include "millrace/core.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define LEASE_DEFAULT_S 120.0
#define ENTRY_MAX 4096
#define MAX_PIDS 64

static void spawned(pid_t child);

struct mr__lease {
    char *dir;   /* P.d */
    char *entry; /* P.d/<host>-<pid>-<n>.x|s */
    int fd;      /* the entry, open: renewed with futimens */
    int inherit;
    pid_t pids[MAX_PIDS]; /* the holder, then the children it handed the lock to */
    int n_pids;
    struct mr__lease *next;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static struct mr__lease *g_held; /* this process's leases */
static pid_t g_thread_pid;       /* the process whose renewal thread runs */
static unsigned g_seq;

double mr__lease_seconds(void)
{
    const char *v = getenv("MILLRACE_LEASE_S");
    char *end;
    double d = v && *v ? strtod(v, &end) : LEASE_DEFAULT_S;
    return v && *v && (*end || !(d >= 0.5) || d > 86400) ? LEASE_DEFAULT_S : d;
}

static void host_name(char *out, size_t n)
{
    const char *h = getenv("MILLRACE_HOSTNAME");
    char buf[256];
    if (!h || !*h) {
        if (gethostname(buf, sizeof(buf)) != 0) snprintf(buf, sizeof(buf), "unknown");
        buf[sizeof(buf) - 1] = '\0';
        h = buf;
    }
    size_t k = 0;
    for (; *h && k + 1 < n && k < 64; h++) /* a file name's part: letters, digits, '.', '_', '-' */
        out[k++] = ((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9') || *h == '.' || *h == '_' || *h == '-') ? *h : '_';
    out[k] = '\0';
}

int mr__lease_wanted(const char *path)
{
    const char *m = getenv("MILLRACE_LOCKS");
    if (m && !strcmp(m, "lease")) return 1;
    if (m && !strcmp(m, "flock")) return 0;
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) *slash = '\0';
    else snprintf(dir, sizeof(dir), "%s", slash ? "/" : ".");
    struct statfs sf;
    if (statfs(dir, &sf) != 0) return 0;
    switch ((unsigned long)sf.f_type) {
    case 0x6969UL:     /* NFS */
    case 0x517BUL:     /* SMB */
    case 0xFF534D42UL: /* CIFS */
    case 0xFE534D42UL: /* SMB2 */
        return 1;
    default: return 0;
    }
}

static double mtime_of(const struct stat *st) { return (double)st->st_mtim.tv_sec + st->st_mtim.tv_nsec * 1e-9; }

static int pid_alive(pid_t p) { return p > 0 && (kill(p, 0) == 0 || errno == EPERM); }

/* An entry's text: "millrace-lease 1\nhost H\npids P ...\n". */
static void entry_text(const struct mr__lease *l, const char *host, char *out, size_t n)
{
    int off = snprintf(out, n, "millrace-lease 1\nhost %s\npids", host);
    for (int k = 0; k < l->n_pids && off > 0 && (size_t)off < n; k++) off += snprintf(out + off, n - (size_t)off, " %d", (int)l->pids[k]);
    if (off > 0 && (size_t)off < n) snprintf(out + off, n - (size_t)off, "\n");
}

/* 1 when the entry at path is stale: its host is ours and its pids are all gone,
 * or its mtime is older than the lease by the filesystem's clock (now_fs). */
static int entry_stale(const char *path, const char *host, double now_fs, double lease)
{
    struct stat st;
    if (stat(path, &st) != 0) return 0; /* gone already */
    if (now_fs - mtime_of(&st) > lease) return 1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char buf[ENTRY_MAX];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *h = strstr(buf, "\nhost "), *p = strstr(buf, "\npids");
    if (!h || !p) return 0;
    h += 6;
    char *he = strchr(h, '\n');
    if (!he || (size_t)(he - h) != strlen(host) || strncmp(h, host, strlen(host))) return 0; /* another host: by its lease */
    p += 5;
    int any = 0, alive = 0;
    while (*p == ' ') {
        long v = strtol(p + 1, &p, 10);
        any = 1;
        alive |= pid_alive((pid_t)v);
    }
    return any && !alive;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Creates DIR/.meta with O_EXCL; *now_fs its mtime. Breaks a .meta older
 * than two leases (a taker that died in the protocol). 0 taken, 1 busy, -1 error. */
static int meta_take(const char *dir, const char *host, double lease, double *now_fs, int *err_no)
{
    char meta[4200];
    snprintf(meta, sizeof(meta), "%s/.meta", dir);
    int fd = open(meta, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char txt[128];
        int n = snprintf(txt, sizeof(txt), "%s %d\n", host, (int)getpid());
        if (write(fd, txt, (size_t)n) < 0) { /* the name is what matters */
        }
        struct stat st;
        *now_fs = fstat(fd, &st) == 0 ? mtime_of(&st) : mr_wall_time();
        close(fd);
        return 0;
    }
    if (errno != EEXIST) {
        *err_no = errno;
        return -1;
    }
    struct stat old;
    if (stat(meta, &old) != 0) return 1; /* just released: try again */
    /* the filesystem's now: a probe file's mtime */
    char probe[4300];
    snprintf(probe, sizeof(probe), "%s/.probe-%s-%d", dir, host, (int)getpid());
    int pf = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    struct stat ps;
    double now = pf >= 0 && fstat(pf, &ps) == 0 ? mtime_of(&ps) : mr_wall_time();
    if (pf >= 0) close(pf);
    unlink(probe);
    if (now - mtime_of(&old) > 2 * lease) {
        char aside[4400];
        snprintf(aside, sizeof(aside), "%s/.meta-broken-%s-%d", dir, host, (int)getpid());
        if (rename(meta, aside) == 0) {
            struct stat got;
            /* what was renamed must be the stale file; a fresh one goes back (link: never over another) */
            if (stat(aside, &got) == 0 && (got.st_ino != old.st_ino || mtime_of(&got) != mtime_of(&old))) {
                if (link(aside, meta) != 0) { /* a third taker holds .meta now: its own */
                }
            } else {
                mr_log(MR_LOG_WARN, "%s: broke a lock left %.0f s ago by a process that died taking it", dir, now - mtime_of(&old));
            }
            unlink(aside);
        }
    }
    return 1;
}

static void meta_drop(const char *dir)
{
    char meta[4200];
    snprintf(meta, sizeof(meta), "%s/.meta", dir);
    unlink(meta);
}

/* Under .meta: removes stale entries; 1 when a lock of `mode` fits beside the rest. */
static int entries_allow(const char *dir, int mode, const char *host, double now_fs, double lease)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int ok = 1;
    struct dirent *e;
    char path[4600];
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 3 || e->d_name[n - 2] != '.' || (e->d_name[n - 1] != 'x' && e->d_name[n - 1] != 's')) continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        if (entry_stale(path, host, now_fs, lease)) {
            if (unlink(path) == 0) mr_log(MR_LOG_WARN, "%s: broke the lock of %s (its holder is gone)", dir, e->d_name);
            continue;
        }
        if (mode == MR_LOCK_EXCLUSIVE || e->d_name[n - 1] == 'x') ok = 0;
    }
    closedir(d);
    return ok;
}

static void *renew_thread(void *arg)
{
    (void)arg;
    double every = mr__lease_seconds() / 3;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = (double)ts.tv_sec + ts.tv_nsec * 1e-9 + every;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&g_cv, &g_mu, &ts);
        for (struct mr__lease *l = g_held; l; l = l->next) futimens(l->fd, NULL);
    }
    return NULL;
}

/* Registers l as held and makes sure this process renews its leases. */
static void hold(struct mr__lease *l)
{
    pthread_mutex_lock(&g_mu);
    if (g_thread_pid != getpid()) { /* a forked child inherits no thread, and holds nothing of its parent's */
        g_held = NULL;
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, renew_thread, NULL) == 0) g_thread_pid = getpid();
        pthread_attr_destroy(&a);
    }
    l->next = g_held;
    g_held = l;
    pthread_mutex_unlock(&g_mu);
}

static void lease_free(struct mr__lease *l)
{
    if (!l) return;
    if (l->fd >= 0) close(l->fd);
    mr_free(l->dir);
    mr_free(l->entry);
    mr_free(l);
}

mr_status mr__lease_acquire(mr_flock *lk, const char *path, int mode, int blocking, int inherit, mr_error *err)
{
    double lease = mr__lease_seconds();
    char host[80];
    host_name(host, sizeof(host));
    struct mr__lease *l = mr_calloc(1, sizeof(*l));
    if (!l) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    l->fd = -1;
    l->inherit = inherit;
    l->pids[l->n_pids++] = getpid();
    l->dir = mr_asprintf("%s.d", path);
    pthread_mutex_lock(&g_mu);
    unsigned seq = g_seq++;
    pthread_mutex_unlock(&g_mu);
    l->entry = l->dir ? mr_asprintf("%s/%s-%d-%u.%c", l->dir, host, (int)getpid(), seq, mode == MR_LOCK_EXCLUSIVE ? 'x' : 's') : NULL;
    if (!l->dir || !l->entry) {
        lease_free(l);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (mkdir(l->dir, 0755) != 0 && errno != EEXIST) {
        int e = errno;
        lease_free(l);
        return MR_ERR_SYS(err, MR_E_IO, e, "%s: cannot create the lock directory", path);
    }
    double wait = 0.005;
    for (;;) {
        double now_fs = 0;
        int e = 0;
        int m = meta_take(l->dir, host, lease, &now_fs, &e);
        if (m < 0) {
            lease_free(l);
            return MR_ERR_SYS(err, MR_E_IO, e, "%s: cannot take the lock's meta file", path);
        }
        if (m == 0) {
            int ok = entries_allow(l->dir, mode, host, now_fs, lease);
            if (ok) {
                l->fd = open(l->entry, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (l->fd < 0) {
                    int ee = errno;
                    meta_drop(l->dir);
                    lease_free(l);
                    return MR_ERR_SYS(err, MR_E_IO, ee, "%s: cannot create the lock's entry", path);
                }
                char txt[ENTRY_MAX];
                entry_text(l, host, txt, sizeof(txt));
                if (write(l->fd, txt, strlen(txt)) < 0 || fsync(l->fd) != 0) { /* the name holds the lock */
                }
            }
            meta_drop(l->dir);
            if (ok) break;
        }
        if (!blocking) {
            lease_free(l);
            return MR_E_STATE;
        }
        sleep_s(wait);
        if (wait < 0.25) wait *= 2;
    }
    hold(l);
    lk->fd = -1;
    lk->lease = l;
    return MR_OK;
}

void mr__lease_release(mr_flock *lk)
{
    struct mr__lease *l = lk->lease;
    if (!l) return;
    pthread_mutex_lock(&g_mu);
    for (struct mr__lease **p = &g_held; *p; p = &(*p)->next)
        if (*p == l) {
            *p = l->next;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    unlink(l->entry);
    lease_free(l);
    lk->lease = NULL;
}

/* The parent side of mr_proc_spawn: every inheritable lease this process
 * holds is also the child's now. Its pid joins the entries, and a keeper
 * process renews them while the child lives, should this process die
 * first (the runner killing a stage worker leaves its command running). */
void mr__lease_spawned(int child_pid)
{
    pid_t child = (pid_t)child_pid;
    spawned(child);
}

static void spawned(pid_t child)
{
    char host[80];
    host_name(host, sizeof(host));
    pthread_mutex_lock(&g_mu);
    int any = 0;
    for (struct mr__lease *l = g_held; l; l = l->next) {
        if (!l->inherit || g_thread_pid != getpid()) continue;
        if (l->n_pids < MAX_PIDS) l->pids[l->n_pids++] = child;
        char txt[ENTRY_MAX];
        entry_text(l, host, txt, sizeof(txt));
        if (pwrite(l->fd, txt, strlen(txt), 0) < 0 || ftruncate(l->fd, (off_t)strlen(txt)) != 0) { /* best effort */
        }
        any = 1;
    }
    if (!any) {
        pthread_mutex_unlock(&g_mu);
        return;
    }
    /* the keeper: forked with the list in its memory, async-signal-safe calls only */
    char paths[16][4600];
    int n = 0;
    for (struct mr__lease *l = g_held; l && n < 16; l = l->next)
        if (l->inherit) snprintf(paths[n++], sizeof(paths[0]), "%s", l->entry);
    pthread_mutex_unlock(&g_mu);
    double every = mr__lease_seconds() / 3;
    pid_t k = fork();
    if (k != 0) {
        if (k > 0) waitpid(k, NULL, 0); /* the middle process exits at once */
        return;
    }
    if (fork() != 0) _exit(0); /* reparented: no zombie of ours, no tie to the holder's group */
    setsid();
    for (int fd = 3; fd < 1024; fd++) close(fd); /* hold nothing open: an fd would keep flock locks */
    for (;;) {
        struct timespec ts = {(time_t)every, (long)((every - (double)(time_t)every) * 1e9)};
        nanosleep(&ts, NULL);
        if (!pid_alive(child)) _exit(0);
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (!paths[i][0]) continue;
            if (utimensat(AT_FDCWD, paths[i], NULL, 0) != 0) paths[i][0] = '\0'; /* released */
            else left++;
        }
        if (!left) _exit(0);
    }
}
