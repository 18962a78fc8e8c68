/* Owns the broker's machinery: its threads, the listeners, the per-thread
 * guest cache (pidfd, ids), guest memory access, fs-id switching, and the
 * table of the syscalls it answers. The answers themselves live in
 * broker-fs.c (files) and broker-net.c (sockets).
 *
 * Syscalls the broker answers when the guest policy notifies them (the
 * contract with seccomp-policies/kernel.policy; any other notified syscall,
 * or one from a foreign arch, gets ENOSYS, never CONTINUE). The table is
 * made from broker-internal.h's lists; tests/unit/test_policy.c checks this
 * list against it (lines indented four spaces are the names):
 *
 *   files, emulated with the guest's fs ids, paths confined to the root:
 *     open openat openat2 creat                    (fd installed by ADDFD+SEND)
 *     stat lstat newfstatat statx statfs access faccessat faccessat2
 *     readlink readlinkat
 *     mkdir mkdirat mknod mknodat rmdir unlink unlinkat
 *     rename renameat renameat2 symlink symlinkat link linkat
 *     chmod fchmod fchmodat fchmodat2 chown fchown lchown fchownat truncate
 *     utimensat utimes utime futimesat
 *     inotify_add_watch                            (on a copy of the inotify fd)
 *   sockets, performed on a dup of the guest's socket (pidfd_getfd):
 *     connect bind sendto sendmsg   (AF_UNIX paths confined to the root,
 *                                    AF_INET/AF_INET6 to loopback only)
 *     (kernel.policy runs bind directly, so the kernel keeps a unix socket's
 *     name as the guest wrote it; the handler serves policies that notify it)
 *   ids, answered CONTINUE (values only: nothing read from guest memory
 *   decides anything; the broker only forgets the thread's cached ids):
 *     setuid setgid setreuid setregid setresuid setresgid setfsuid setfsgid
 *     setgroups
 *   the file creation mask, answered CONTINUE (the broker only marks the
 *   umasks it caches stale):
 *     umask
 *
 * Not answerable, so the policy must keep them direct: chdir and fchdir (the
 * broker cannot change another process's cwd; the kernel resolves the path
 * in the guest's own mount namespace and root, where Landlock confines it,
 * and every later relative path is re-confined by the broker anyway), and
 * execve/execveat (Landlock's execute right decides what may run).
 *
 * Threads: one receiver per listener, blocked in SECCOMP_IOCTL_NOTIF_RECV
 * (so that SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, on unless
 * config.plain_wake_up, hands the guest thread's CPU straight to the
 * receiver; the workers run SCHED_BATCH, so their own wake-ups never
 * preempt a guest),
 * answers each call inline. A call that may block indefinitely (an open that meets a FIFO or
 * a device, connect, send) is bracketed by bh_blocking_begin/end; a
 * watchdog thread looks at those once a tick (50 ms, 5 ms while a detached
 * call blocks; asleep while none is): a receiver inside one for a whole tick
 * hands its listener to a parked worker and finishes the call detached, so
 * the guest's other calls keep being answered. A receiver never waits for
 * the watchdog (the brackets are atomics, the guest cache has its own lock)
 * and the watchdog never makes a thread holding the lock: in a sandbox whose
 * cgroup a fork bomb starves (pids full, CPU quota spent) every wait for
 * another sentry thread costs a scheduling period. BH_RESERVE parked workers
 * are made at start; the watchdog replaces spent ones outside the lock.
 * Shares: one guest thread holds at most one detached call (an older one,
 * left behind by a signal that restarted the call, is interrupted), one
 * guest process at most max_workers/4, the broker at most max_workers; a
 * call beyond them is interrupted (EINTR, as a signal would: the kernel
 * restarts nothing, the guest may retry), and a detached call whose guest
 * stopped waiting (NOTIF_ID_VALID) too. Interrupting is a thread-directed
 * signal (BH_INTR_SIG, a no-op handler without SA_RESTART) that only the
 * workers unblock.
 *
 * Syscalls the broker itself makes (for sentry.policy): poll, eventfd2,
 * rt_sigaction, rt_sigprocmask, tgkill, ioctl (SECCOMP_IOCTL_NOTIF_*), seccomp
 * (SECCOMP_GET_NOTIF_SIZES), clone3/clone (threads), unshare(CLONE_FS),
 * futex, mmap/munmap/mprotect, poll, pidfd_open (PIDFD_THREAD), pidfd_getfd,
 * pidfd_send_signal (SIGPIPE), process_vm_readv, process_vm_writev, openat,
 * openat2, read, pread64, close, fstat, newfstatat, statx, fstatfs,
 * readlinkat, faccessat2, mkdirat, mknodat, unlinkat, renameat2, symlinkat,
 * linkat, fchmodat2, fchownat, utimensat, inotify_add_watch, ftruncate,
 * umask, fchdir, statmount and fcntl (F_DUPFD_CLOEXEC; the parent-directory
 * cache),
 * setfsuid, setfsgid, setgroups, capget, capset (file capabilities per
 * thread), connect, bind, sendto, sendmsg, getpid,
 * write (debug log), madvise, exit, clock_gettime (vDSO; the alive window),
 * and at start sched_getaffinity (sysconf of the CPU count).
 *
 * Guest ids: each request runs with the fs ids of the thread that made it,
 * read from /proc/TID/status (kept open and re-read with pread, which also
 * proves the thread alive). They are cached when the thread cannot change
 * them (no capabilities, real = effective = saved = fs ids, no_new_privs:
 * every kernel-tier guest) or when the policy notifies the set*id family
 * (config.ids_notified); a cached entry is proven to be the caller's by a
 * poll of the thread's pidfd, unless its task was seen alive within the
 * alive window (alive_window_ns, guest_get). Syscalls per call and where
 * the time goes: sentry/README.md, "Where a brokered call's time goes". */
#include "broker-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/magic.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "mountinfo.h"
#include "proc-status.h"

#if defined(__x86_64__)
#define BH_NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define BH_NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "unsupported architecture"
#endif

static long sys_set_ids(struct bh_req *r);
static long sys_umask(struct bh_req *r);

struct handler {
    bh_handler_fn fn;
    const char *name;
    enum bh_broker_group group;
    enum bh_names_effect names;
};
#define FILE_H(name, names)                                                                        \
    [SYS_##name] = {bh_sys_##name, #name, BH_BROKER_FILES, BH_NAMES_##names},
/* bind makes only a socket's name; the others touch no name. */
#define NET_H(name) [SYS_##name] = {bh_sys_##name, #name, BH_BROKER_SOCKETS, BH_NAMES_FILES},
#define ID_H(name) [SYS_##name] = {sys_set_ids, #name, BH_BROKER_IDS, BH_NAMES_KEPT},
#define UMASK_H(name) [SYS_##name] = {sys_umask, #name, BH_BROKER_UMASK, BH_NAMES_KEPT},
/* clang-format off */
static const struct handler handlers[512] = {
#ifdef SYS_open
    BH_BROKER_FILE_SYSCALLS_LEGACY(FILE_H)
#endif
    BH_BROKER_FILE_SYSCALLS(FILE_H)
    BH_BROKER_NET_SYSCALLS(NET_H)
    BH_BROKER_ID_SYSCALLS(ID_H)
    BH_BROKER_UMASK_SYSCALLS(UMASK_H)
};
/* clang-format on */
#undef FILE_H
#undef NET_H
#undef ID_H
#undef UMASK_H

bool bh_broker_handles(long nr)
{
    return nr >= 0 && (size_t)nr < BH_ARRAY_SIZE(handlers) && handlers[nr].fn != NULL;
}

enum bh_broker_group bh_broker_group_of(long nr)
{
    return bh_broker_handles(nr) ? handlers[nr].group : BH_BROKER_NONE;
}

const char *bh_broker_syscall_name(long nr)
{
    return bh_broker_handles(nr) ? handlers[nr].name : NULL;
}

enum bh_names_effect bh_broker_names_effect(long nr)
{
    return bh_broker_handles(nr) ? handlers[nr].names : 0;
}

/* Whether this call may change which directory a path names or who may
 * search it. An entry without a stated effect counts as one that may. */
static bool changes_dirs(const struct handler *h, const struct seccomp_notif *n)
{
    switch (h->names) {
    case BH_NAMES_KEPT:
    case BH_NAMES_FILES:
        return false;
    case BH_NAMES_DIRS_IF_AT_REMOVEDIR:
        return (n->data.args[2] & AT_REMOVEDIR) != 0;
    case BH_NAMES_DIRS:
    default:
        return true;
    }
}

/* ---- guest memory ------------------------------------------------------ */

int bh_mem_read(struct bh_req *r, uint64_t addr, void *buf, size_t len)
{
    if (len == 0)
        return 0;
    struct iovec local = {buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(r->n->pid, &local, 1, &remote, 1, 0);
    if (n < 0)
        return errno == ESRCH ? -ESRCH : -EFAULT;
    return (size_t)n == len ? 0 : -EFAULT;
}

long bh_mem_read_str(struct bh_req *r, uint64_t addr, char *buf, size_t cap)
{
    size_t got = 0;
    if (addr == 0)
        return -EFAULT;
    while (got < cap) {
        /* Page by page: a string ending just before an unmapped page is valid. */
        size_t chunk = 4096 - ((addr + got) & 4095);
        if (chunk > cap - got)
            chunk = cap - got;
        struct iovec local = {buf + got, chunk};
        struct iovec remote = {(void *)(uintptr_t)(addr + got), chunk};
        ssize_t n = process_vm_readv(r->n->pid, &local, 1, &remote, 1, 0);
        if (n <= 0)
            return -EFAULT;
        char *nul = memchr(buf + got, '\0', (size_t)n);
        if (nul != NULL)
            return nul - buf;
        got += (size_t)n;
    }
    return -ENAMETOOLONG;
}

int bh_mem_write(struct bh_req *r, uint64_t addr, const void *buf, size_t len)
{
    if (len == 0)
        return 0;
    /* The write goes to whoever holds the caller's tid now. The call's own
     * NOTIF_ID_VALID proved the caller alive at valid_ns; for its tid to
     * belong to another task, the caller must have died and the guests gone
     * once round the pid space since, which takes longer than the alive
     * window. A call that took longer (it blocked) is checked again. */
    if (r->valid_ns == 0 || bh_now_ns() - r->valid_ns >= r->b->alive_window_ns) {
        atomic_fetch_add(&r->b->n_rechecked, 1);
        if (bh_req_valid(r) < 0)
            return -ESRCH;
    }
    struct iovec local = {(void *)buf, len};
    struct iovec remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_writev(r->n->pid, &local, 1, &remote, 1, 0);
    return n >= 0 && (size_t)n == len ? 0 : -EFAULT;
}

uint64_t bh_now_ns(void)
{
    struct timespec ts;
    /* 0 on failure: taken as "never seen alive", so everything is checked. */
    if (clock_gettime(CLOCK_MONOTONIC, &ts) < 0)
        return 0;
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The notifying task was alive at some instant after t (taken before the
 * ioctl that proved it): the request's, and its guest entry's, freshest
 * proof. */
static void note_alive(struct bh_req *r, uint64_t t)
{
    if (r->valid_ns == 0)
        r->valid_ns = t;
    if (r->g != NULL)
        atomic_store_explicit(&r->g->alive_ns, t, memory_order_relaxed);
}

int bh_req_valid(struct bh_req *r)
{
    /* NOTIF_RECV handed out this call while its task still waited (a task
     * that dies unlinks its notification first), so the caller was alive at
     * an instant after recv_ns. Within the alive window of that, its tid
     * cannot have passed to another task, and everything read through the
     * tid so far came from the caller: the same proof a NOTIF_ID_VALID now
     * would give, without the syscall. Later (the receiver waited long for
     * this call, or the call was slow) the ioctl proves it. */
    uint64_t t = bh_now_ns();
    if (r->recv_ns != 0 && t - r->recv_ns < r->b->alive_window_ns) {
        atomic_fetch_add(&r->b->n_recv_proofs, 1);
        note_alive(r, r->recv_ns);
        return 0;
    }
    uint64_t id = r->n->id;
    atomic_fetch_add(&r->b->n_id_checks, 1);
    if (ioctl(r->l->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0)
        return -ESRCH;
    note_alive(r, t);
    return 0;
}

void bh_debug(struct bh_req *r, const char *fmt, ...)
{
    if (!r->b->debug)
        return;
    char line[512];
    int at = snprintf(line, sizeof(line), "bulkhead-sentry: broker: pid %d %s: ", r->n->pid,
                      r->name ? r->name : "?");
    va_list ap;
    va_start(ap, fmt);
    if (at > 0 && (size_t)at < sizeof(line))
        vsnprintf(line + at, sizeof(line) - (size_t)at, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s\n", line);
}

/* ---- guest threads: pidfd, tgid, ids ----------------------------------- */

static void guest_put(struct bh_guest *g)
{
    if (g != NULL && atomic_fetch_sub(&g->refs, 1) == 1) {
        if (g->pidfd >= 0)
            close(g->pidfd);
        if (g->status_fd >= 0)
            close(g->status_fd);
        free(g);
    }
}

static int parse_ids(const char *line, uint32_t out[4])
{
    return sscanf(line, "%u %u %u %u", &out[0], &out[1], &out[2], &out[3]) == 4 ? 0 : -1;
}

/* Reads Tgid, Uid, Gid, Groups (and Umask when asked) of a thread from its
 * /proc/TID/status, opened once: a read starts over at offset 0, and fails
 * once the task is gone, even when its tid has been reused since. */
static int read_status(int fd, struct bh_guest *g, mode_t *umask_out)
{
    char buf[8192];
    if (bh_status_read(fd, buf, sizeof(buf)) < 0)
        return -ESRCH;
    bool have_uid = false, have_gid = false, have_tgid = false, have_caps = false, nnp = false;
    bool have_eff = false, uids_same = false, gids_same = false;
    unsigned long long cap_prm = ~0ULL;
    g->cap_eff = 0;
    g->cap_prm = 0;
    g->ngroups = 0;
    for (char *line = buf; line != NULL && *line != '\0';) {
        char *next = strchr(line, '\n');
        if (next != NULL)
            *next++ = '\0';
        uint32_t ids[4];
        if (strncmp(line, "Tgid:", 5) == 0) {
            g->tgid = (pid_t)strtol(line + 5, NULL, 10);
            have_tgid = true;
        } else if (strncmp(line, "Uid:", 4) == 0 && parse_ids(line + 4, ids) == 0) {
            g->ruid = ids[0], g->euid = ids[1], g->fsuid = ids[3];
            uids_same = ids[0] == ids[1] && ids[1] == ids[2] && ids[2] == ids[3];
            have_uid = true;
        } else if (strncmp(line, "Gid:", 4) == 0 && parse_ids(line + 4, ids) == 0) {
            g->rgid = ids[0], g->egid = ids[1], g->fsgid = ids[3];
            gids_same = ids[0] == ids[1] && ids[1] == ids[2] && ids[2] == ids[3];
            have_gid = true;
        } else if (strncmp(line, "Groups:", 7) == 0) {
            char *p = line + 7, *end;
            for (;;) {
                unsigned long v = strtoul(p, &end, 10);
                if (end == p)
                    break;
                /* More groups than we carry: fail closed rather than drop some
                 * (a dropped group could be one that denies access). */
                if (g->ngroups == BH_BROKER_MAX_GROUPS)
                    return -E2BIG;
                g->groups[g->ngroups++] = (uint32_t)v;
                p = end;
            }
        } else if (strncmp(line, "CapPrm:", 7) == 0) {
            cap_prm = strtoull(line + 7, NULL, 16);
            g->cap_prm = cap_prm;
            have_caps = true;
        } else if (strncmp(line, "CapEff:", 7) == 0) {
            g->cap_eff = strtoull(line + 7, NULL, 16);
            have_eff = true;
        } else if (strncmp(line, "NoNewPrivs:", 11) == 0) {
            nnp = strtol(line + 11, NULL, 10) == 1;
        } else if (umask_out != NULL && strncmp(line, "Umask:", 6) == 0) {
            *umask_out = (mode_t)strtoul(line + 6, NULL, 8) & 0777;
        }
        line = next;
    }
    /* No capability, all ids equal, no_new_privs: no call can change this
     * task's ids any more (set*id may only pick among its own ids, setgroups
     * needs CAP_SETGID, exec grants nothing), so they hold until it dies. */
    g->ids_frozen = have_caps && cap_prm == 0 && nnp && uids_same && gids_same;
    /* A thread that may hold a file capability has its status read on
     * every call: an exec can take capabilities away without any call the
     * broker sees (a non-root uid's non-ambient sets), and a cached set
     * would then act with more than the thread holds. */
    g->fs_caps_possible = !have_caps || !have_eff || (cap_prm & BH_BROKER_FS_CAPS) != 0 ||
                          (g->cap_eff & BH_BROKER_FS_CAPS) != 0;
    return have_uid && have_gid && have_tgid ? 0 : -ESRCH;
}

static bool pidfd_alive(int pidfd)
{
    struct pollfd p = {.fd = pidfd, .events = POLLIN};
    return poll(&p, 1, 0) == 0;
}

static void guest_forget(struct bh_broker *b, unsigned slot, struct bh_guest *g)
{
    pthread_mutex_lock(&b->cache_lock);
    if (b->cache[slot] == g) {
        b->cache[slot] = NULL;
        guest_put(g);
    }
    pthread_mutex_unlock(&b->cache_lock);
}

/* A thread runs one syscall at a time: a call of a thread whose umask call
 * was answered CONTINUE comes after the kernel applied it, and a thread
 * that exited applies nothing any more. */
static void settle_umask(struct bh_broker *b, struct bh_guest *g)
{
    if (g == NULL || !atomic_exchange(&g->umask_pending, false))
        return;
    atomic_fetch_add(&b->umask_gen, 1);
    atomic_fetch_sub(&b->umask_unsettled, 1);
}

/* The entry of the notifying thread, its ids current. NULL: thread gone.
 * Cost when cached: one pread of its status (fresh ids and proof of life),
 * or, when its ids cannot change (ids_frozen) or every change is notified
 * (config.ids_notified), one poll of its pidfd. */
static struct bh_guest *guest_get(struct bh_broker *b, pid_t tid)
{
    unsigned slot = (unsigned)tid % BH_ARRAY_SIZE(b->cache);
    struct bh_guest *g = NULL;
    pthread_mutex_lock(&b->cache_lock);
    struct bh_guest *c = b->cache[slot];
    if (c != NULL && c->tid == tid) {
        atomic_fetch_add(&c->refs, 1);
        g = c;
    }
    pthread_mutex_unlock(&b->cache_lock);

    if (g != NULL) {
        bool alive;
        if (g->ids_valid && (g->ids_frozen || (b->cfg.ids_notified && !g->fs_caps_possible))) {
            /* The entry is this caller's if its task was seen alive within
             * the alive window: for the tid to have passed to the caller
             * meanwhile, the task must have died and the guests gone once
             * round the pid space. The entry is acted on only after the
             * call's own NOTIF_ID_VALID (the caller still waits), so a
             * caller that died since cannot be confused with it either. */
            uint64_t now = bh_now_ns();
            uint64_t seen = atomic_load_explicit(&g->alive_ns, memory_order_relaxed);
            alive = seen != 0 && now - seen < b->alive_window_ns;
            if (!alive) {
                atomic_fetch_add(&b->n_rechecked, 1);
                if ((alive = pidfd_alive(g->pidfd)))
                    atomic_store_explicit(&g->alive_ns, now, memory_order_relaxed);
            }
        } else {
            /* Only this thread's own requests use the entry, and the thread
             * waits for this one: no one else writes it meanwhile. */
            alive = read_status(g->status_fd, g, NULL) == 0;
            g->ids_valid = alive;
        }
        if (alive)
            return g;
        /* A dead task's entry; the tid may belong to a new one now. */
        settle_umask(b, g);
        guest_forget(b, slot, g);
        guest_put(g);
    }

    g = calloc(1, sizeof(*g));
    if (g == NULL)
        return NULL;
    atomic_init(&g->refs, 1);
    atomic_init(&g->umask_pending, false);
    g->tid = tid;
    g->status_fd = -1;
    g->pidfd = (int)syscall(SYS_pidfd_open, tid, PIDFD_THREAD);
    g->status_fd = bh_status_open(AT_FDCWD, tid);
    if (g->pidfd < 0 || g->status_fd < 0 || read_status(g->status_fd, g, NULL) < 0) {
        guest_put(g);
        return NULL;
    }
    g->ids_valid = true;
    atomic_fetch_add(&g->refs, 1);
    pthread_mutex_lock(&b->cache_lock);
    struct bh_guest *old = b->cache[slot];
    b->cache[slot] = g;
    pthread_mutex_unlock(&b->cache_lock);
    /* Another thread's entry, dropped for this one: its unsettled umask
     * call is settled only if it exited (see bh_req_umask). */
    if (old != NULL && atomic_load(&old->umask_pending) && !pidfd_alive(old->pidfd))
        settle_umask(b, old);
    guest_put(old);
    return g;
}

/* The set*id family: the kernel applies them with the guest's own rights;
 * the broker only forgets the cached ids of the calling thread. */
static long sys_set_ids(struct bh_req *r)
{
    struct bh_broker *b = r->b;
    pthread_mutex_lock(&b->cache_lock);
    struct bh_guest *c = b->cache[(unsigned)r->n->pid % BH_ARRAY_SIZE(b->cache)];
    if (c != NULL && c->tid == (pid_t)r->n->pid)
        c->ids_valid = false;
    pthread_mutex_unlock(&b->cache_lock);
    return BH_CONTINUE;
}

/* Per worker thread: the fs ids and file capabilities it currently carries. */
static __thread struct {
    bool set;
    uint32_t fsuid, fsgid;
    uint64_t fs_caps;
    int ngroups;
    uint32_t groups[BH_BROKER_MAX_GROUPS];
} worker_ids;

static __thread uint64_t ids_epoch;

uint64_t bh_worker_ids_epoch(void)
{
    return ids_epoch;
}

/* Sets this thread's effective file capabilities to exactly `want` (of
 * BH_BROKER_FS_CAPS, bounded by its permitted set), keeping the others as
 * they are. Raw capget/capset act on the calling thread only. The kernel's
 * own rule (the setfsuid fix-up: a uid-0 fsuid raises every permitted file
 * capability, any other clears them) would follow the ids alone; this
 * follows the guest thread's effective set, so the broker acts with no
 * right the thread itself lacks, and with the ones it holds (a root guest
 * with CAP_DAC_OVERRIDE dropped is refused as by the kernel, a non-root one
 * holding it is let through as by the kernel). */
static int worker_fs_caps(uint64_t want)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return -EPERM;
    uint64_t perm = d[0].permitted | (uint64_t)d[1].permitted << 32;
    uint64_t eff = d[0].effective | (uint64_t)d[1].effective << 32;
    eff = (eff & ~BH_BROKER_FS_CAPS) | (want & perm & BH_BROKER_FS_CAPS);
    d[0].effective = (uint32_t)eff;
    d[1].effective = (uint32_t)(eff >> 32);
    if (syscall(SYS_capset, &h, d) < 0)
        return -EPERM;
    return 0;
}

int bh_req_become_guest(struct bh_req *r, bool real_ids)
{
    const struct bh_guest *g = r->g;
    uint32_t uid = real_ids ? g->ruid : g->fsuid;
    uint32_t gid = real_ids ? g->rgid : g->fsgid;
    /* access(2) and faccessat without AT_EACCESS: the kernel checks them
     * with the real ids and, by its fix-up for them, a real root's whole
     * permitted set or nothing for any other uid. */
    uint64_t caps = (real_ids ? (g->ruid == 0 ? g->cap_prm : 0) : g->cap_eff) & BH_BROKER_FS_CAPS;
    if (worker_ids.set && worker_ids.fsuid == uid && worker_ids.fsgid == gid &&
        worker_ids.fs_caps == caps && worker_ids.ngroups == g->ngroups &&
        memcmp(worker_ids.groups, g->groups, sizeof(uint32_t) * (size_t)g->ngroups) == 0)
        return 0;
    worker_ids.set = false;
    ids_epoch++;
    /* Raw syscalls: glibc's wrappers would change every thread of the sentry. */
    if (syscall(SYS_setgroups, (size_t)g->ngroups, g->groups) < 0)
        return -EPERM;
    syscall(SYS_setfsgid, gid);
    syscall(SYS_setfsuid, uid);
    if ((uint32_t)syscall(SYS_setfsgid, -1) != gid || (uint32_t)syscall(SYS_setfsuid, -1) != uid)
        return -EPERM;
    /* After setfsuid, whose fix-up may have raised or cleared them. */
    if (worker_fs_caps(caps) < 0)
        return -EPERM;
    worker_ids.set = true;
    worker_ids.fsuid = uid;
    worker_ids.fsgid = gid;
    worker_ids.fs_caps = caps;
    worker_ids.ngroups = g->ngroups;
    memcpy(worker_ids.groups, g->groups, sizeof(uint32_t) * (size_t)g->ngroups);
    return 0;
}

/* umask(2): the kernel applies it; the broker marks every cached umask
 * stale first (unsettled before the generation, so that a creating call
 * that sees the new generation also sees the call unsettled and caches
 * nothing), and keeps them uncacheable until this thread's next call
 * proves the change made (settle_umask). */
static long sys_umask(struct bh_req *r)
{
    struct bh_broker *b = r->b;
    if (!atomic_exchange(&r->g->umask_pending, true))
        atomic_fetch_add(&b->umask_unsettled, 1);
    atomic_fetch_add(&b->umask_gen, 1);
    return BH_CONTINUE;
}

/* The guest's umask: cached per thread when every umask call reaches the
 * broker (config.umask_notified) and none is unsettled, read from
 * /proc/TID/status otherwise. A thread whose entry is dropped while its
 * umask call is unsettled (its slot taken by another thread) leaves it
 * unsettled for good: every later creating call then reads the umask, as
 * without the cache. */
int bh_req_umask(struct bh_req *r, mode_t *mask)
{
    struct bh_broker *b = r->b;
    struct bh_guest *g = r->g;
    uint64_t gen = atomic_load(&b->umask_gen);
    bool cacheable = b->cfg.umask_notified && atomic_load(&b->umask_unsettled) == 0;
    if (cacheable && g->umask_valid && g->umask_gen == gen) {
        *mask = g->umask;
        return 0;
    }
    struct bh_guest tmp = {0};
    *mask = 022;
    atomic_fetch_add(&b->n_umask_reads, 1);
    if (read_status(g->status_fd, &tmp, mask) < 0)
        return -ESRCH;
    g->umask_valid = cacheable;
    g->umask = *mask;
    g->umask_gen = gen;
    return 0;
}

int bh_req_getfd(struct bh_req *r, int guest_fd)
{
    if (guest_fd < 0)
        return -EBADF;
    int fd = (int)syscall(SYS_pidfd_getfd, r->g->pidfd, guest_fd, 0);
    if (fd < 0)
        return errno == EBADF ? -EBADF : -errno;
    return fd;
}

long bh_req_addfd(struct bh_req *r, int fd, bool cloexec)
{
    struct seccomp_notif_addfd a = {
        .id = r->n->id,
        .flags = SECCOMP_ADDFD_FLAG_SEND,
        .srcfd = (uint32_t)fd,
        .newfd = 0,
        .newfd_flags = cloexec ? O_CLOEXEC : 0,
    };
    uint64_t t = bh_now_ns();
    int ret = ioctl(r->l->fd, SECCOMP_IOCTL_NOTIF_ADDFD, &a);
    if (ret >= 0) {
        note_alive(r, t);
        bh_debug(r, "fd %d installed", ret);
        atomic_fetch_add(&r->b->n_handled, 1);
        return BH_REPLIED;
    }
    if (errno == ENOENT) {
        atomic_fetch_add(&r->b->n_dead, 1);
        return BH_REPLIED;
    }
    return -errno; /* EMFILE and friends: the guest sees them */
}

/* fds of the call being answered on this thread that wait for the answer
 * to be sent (bh_close_after_answer). A handler holds at most two or three
 * at once; beyond the room they are closed at once. */
static __thread struct {
    bool in_call;
    unsigned n;
    int fds[8];
} after_answer;

void bh_close_after_answer(int *fd)
{
    if (*fd < 0)
        return;
    if (after_answer.in_call && after_answer.n < BH_ARRAY_SIZE(after_answer.fds)) {
        after_answer.fds[after_answer.n++] = *fd;
    } else {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
    *fd = -1;
}

static void close_after_answer(struct bh_broker *b)
{
    for (unsigned i = 0; i < after_answer.n; i++)
        close(after_answer.fds[i]);
    atomic_fetch_add(&b->n_closed_after, after_answer.n);
    after_answer.n = 0;
    after_answer.in_call = false;
}

struct bh_worker;
static __thread struct bh_worker *self_worker;
static void set_req_tgid(struct bh_worker *w, pid_t tgid);

/* ---- answering --------------------------------------------------------- */

static void reply(struct bh_req *r, long ret)
{
    struct bh_broker *b = r->b;
    if (ret == BH_REPLIED)
        return;
    struct seccomp_notif_resp resp = {.id = r->n->id};
    if (ret == BH_CONTINUE) {
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        atomic_fetch_add(&b->n_continued, 1);
    } else if (ret < 0) {
        resp.error = (int32_t)ret;
        atomic_fetch_add(&b->n_refused, 1);
        bh_debug(r, "refused: %s", strerror((int)-ret));
    } else {
        resp.val = ret;
    }
    /* EINTR: the notify lock was contended while a signal was pending;
     * nothing was sent, and a lost answer would leave the guest waiting for
     * ever. */
    int rc;
    uint64_t t = bh_now_ns();
    do
        rc = ioctl(r->l->fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    while (rc < 0 && errno == EINTR);
    if (rc < 0) {
        atomic_fetch_add(&b->n_dead, 1);
    } else {
        note_alive(r, t);
        atomic_fetch_add(&b->n_handled, 1);
    }
}

static void handle(struct bh_broker *b, struct bh_listener *l, struct seccomp_notif *n,
                   uint64_t recv_ns)
{
    struct bh_req r = {.b = b, .l = l, .n = n, .recv_ns = recv_ns};
    int nr = n->data.nr;
    if (n->data.arch != BH_NATIVE_ARCH || nr < 0 || (size_t)nr >= BH_ARRAY_SIZE(handlers) ||
        handlers[nr].fn == NULL) {
        atomic_fetch_add(&b->n_unknown, 1);
        if (b->debug)
            fprintf(stderr, "bulkhead-sentry: broker: pid %d: syscall %d (arch %#x) not brokered\n",
                    n->pid, nr, n->data.arch);
        reply(&r, -ENOSYS);
        return;
    }
    r.name = handlers[nr].name;
    r.g = guest_get(b, n->pid);
    if (r.g == NULL) {
        /* Gone (or reused) between the notification and now. */
        atomic_fetch_add(&b->n_dead, 1);
        reply(&r, -ESRCH);
        return;
    }
    settle_umask(b, r.g);
    if (self_worker != NULL)
        set_req_tgid(self_worker, r.g->tgid);
    after_answer.in_call = true;
    /* Before the call, so that no lookup from then on trusts an entry; after
     * it, so that an entry filled while it ran is not trusted either. */
    bool dirs = changes_dirs(&handlers[nr], n);
    if (dirs) {
        atomic_fetch_add(&b->names_gen, 1);
        atomic_fetch_add(&b->n_names_changes, 1);
    }
    long ret = handlers[nr].fn(&r);
    if (dirs)
        atomic_fetch_add(&b->names_gen, 1);
    reply(&r, ret);
    close_after_answer(b);
    guest_put(r.g);
}

/* ---- threads ----------------------------------------------------------- */

/* Sent (thread-directed) to interrupt a worker: its handler does nothing and
 * has no SA_RESTART, so the blocked call returns EINTR. */
#define BH_INTR_SIG (SIGRTMIN + 3)
#define BH_TICK_IDLE_MS 50
#define BH_TICK_BUSY_MS 5
/* Parked workers kept ready, made at start: under a full pids limit (a fork
 * bomb) no thread can be made, and a blocked call must still be handed off. */
#define BH_RESERVE 2
/* After a failed thread creation, the watchdog tries again this much later. */
#define BH_SPAWN_RETRY_MS 50

enum worker_role { W_RECEIVER, W_PARKED, W_DETACHED };

struct bh_worker {
    struct bh_broker *b;
    pthread_t thread;
    struct bh_worker *next; /* b->workers */
    /* Under b->lock from here on. */
    enum worker_role role;
    struct bh_listener *l; /* W_RECEIVER: the listener it receives on */
    bool exited;
    /* Inside bh_blocking_begin/end: the call the watchdog looks at. Written
     * by the worker without the lock (a receiver never waits for the
     * watchdog, which a starved cgroup may have descheduled holding it). */
    atomic_bool blocking;
    atomic_uint seq;
    unsigned seen_seq;
    /* Set by the watchdog before it signals the worker (see interrupt_locked
     * and bh_blocking_end). */
    atomic_bool interrupted;
    struct bh_listener *req_l;
    uint64_t req_id;
    pid_t req_tid, req_tgid;
};

/* Read by the watchdog only while the worker blocks, which it enters later
 * under the lock. */
static void set_req_tgid(struct bh_worker *w, pid_t tgid)
{
    w->req_tgid = tgid;
}

static void watchdog_wake(struct bh_broker *b);

static void intr_handler(int sig)
{
    (void)sig;
}

void bh_blocking_begin(void)
{
    struct bh_worker *w = self_worker;
    if (w == NULL)
        return;
    struct bh_broker *b = w->b;
    atomic_fetch_add(&w->seq, 1);
    atomic_store(&w->blocking, true);
    if (atomic_load(&b->watchdog_asleep) && atomic_exchange(&b->watchdog_asleep, false))
        watchdog_wake(b);
}

void bh_blocking_end(void)
{
    struct bh_worker *w = self_worker;
    if (w == NULL)
        return;
    atomic_store(&w->blocking, false);
    /* The watchdog sets interrupted, then reads blocking (both seq_cst): if
     * it saw us blocking, we see interrupted here. Its signal must not reach
     * a later call of ours (a SEND or ADDFD ioctl would fail with EINTR), so
     * wait until it has been sent (under the lock), and let a syscall's
     * return to user mode run its no-op handler. */
    if (atomic_load(&w->interrupted)) {
        pthread_mutex_lock(&w->b->lock);
        pthread_mutex_unlock(&w->b->lock);
        (void)syscall(SYS_getpid);
        atomic_store(&w->interrupted, false);
    }
}

static void listener_put(struct bh_listener *l)
{
    if (atomic_fetch_sub(&l->refs, 1) == 1) {
        close(l->fd);
        free(l);
    }
}

/* Called with b->lock held; drops the reference the watched list holds. */
static void listener_unlink_locked(struct bh_broker *b, struct bh_listener *l)
{
    if (l->prev != NULL)
        l->prev->next = l->next;
    else
        b->listeners = l->next;
    if (l->next != NULL)
        l->next->prev = l->prev;
    l->prev = l->next = NULL;
    if (l->receiver != NULL && l->receiver->l == l)
        l->receiver->l = NULL;
    l->receiver = NULL;
    listener_put(l);
}

static bool listener_gone(struct bh_listener *l)
{
    struct pollfd p = {.fd = l->fd, .events = POLLIN};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

/* Called with b->lock held. Only while blocking: the signal then either ends
 * the blocked call or reaches the thread before its next call. */
static void interrupt_locked(struct bh_broker *b, struct bh_worker *w, const char *why)
{
    atomic_store(&w->interrupted, true);
    if (!atomic_load(&w->blocking))
        return; /* done meanwhile; bh_blocking_end clears the flag next time */
    if (b->debug)
        fprintf(stderr,
                "bulkhead-sentry: broker: pid %d (process %d): blocked call interrupted (EINTR): "
                "%s\n",
                w->req_tid, w->req_tgid, why);
    atomic_fetch_add(&b->n_interrupted, 1);
    pthread_kill(w->thread, BH_INTR_SIG);
}

static void *worker_main(void *arg);

/* A new worker of that role and listener (NULL: none yet), its thread
 * started on a small stack; NULL with *rc (an errno) when it could not be.
 * The caller lists it. */
static struct bh_worker *worker_start(struct bh_broker *b, enum worker_role role,
                                      struct bh_listener *l, int *rc)
{
    struct bh_worker *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        *rc = ENOMEM;
        return NULL;
    }
    w->b = b;
    w->role = role;
    w->l = l;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    *rc = pthread_create(&w->thread, &attr, worker_main, w);
    pthread_attr_destroy(&attr);
    if (*rc != 0) {
        free(w);
        return NULL;
    }
    return w;
}

/* Called with b->lock held: l gets a receiver, a parked worker or (only when
 * may_create) a new one. The watchdog never makes a thread holding the lock:
 * a receiver may need it, and under a fork bomb the creation fails anyway. */
static int assign_receiver_locked(struct bh_broker *b, struct bh_listener *l, bool may_create)
{
    for (struct bh_worker *w = b->workers; w != NULL; w = w->next) {
        if (w->role == W_PARKED && !w->exited) {
            w->role = W_RECEIVER;
            w->l = l;
            l->receiver = w;
            pthread_cond_broadcast(&b->park);
            return 0;
        }
    }
    if (!may_create)
        return -EAGAIN;
    int rc;
    struct bh_worker *w = worker_start(b, W_RECEIVER, l, &rc);
    if (w == NULL)
        return -rc;
    w->next = b->workers;
    b->workers = w;
    l->receiver = w;
    return 0;
}

/* Called with b->lock held: the receiver w has sat in one blocking call for a
 * tick. Its listener goes to another worker, so that the guest's other
 * calls are answered meanwhile, unless the call is beyond its share. */
static void detach_locked(struct bh_broker *b, struct bh_worker *w, bool *need_thread)
{
    unsigned mine = 0, all = 0;
    for (struct bh_worker *x = b->workers; x != NULL; x = x->next) {
        if (x == w || x->role != W_DETACHED || !atomic_load(&x->blocking))
            continue;
        if (x->req_tid == w->req_tid) {
            /* One guest thread waits for one call: an older one was left
             * behind by a signal that restarted the call. */
            interrupt_locked(b, x, "the guest thread has made another call since");
            continue;
        }
        all++;
        if (x->req_tgid == w->req_tgid)
            mine++;
    }
    if (mine >= b->share) {
        interrupt_locked(b, w, "its process already holds its share of blocked calls");
        return;
    }
    if (all >= b->max_blocking) {
        interrupt_locked(b, w, "the broker holds its maximum of blocked calls");
        return;
    }
    struct bh_listener *l = w->l;
    if (l == NULL)
        return;
    w->role = W_DETACHED;
    w->l = NULL;
    l->receiver = NULL;
    if (assign_receiver_locked(b, l, false) < 0) {
        /* No parked worker (the reserve is spent): the call may merely be
         * slow on a starved machine, so it is not refused; the receiver
         * keeps its listener, the watchdog makes a thread outside the lock
         * (when the sandbox's pids limit lets it) and the next tick tries
         * again. */
        w->role = W_RECEIVER;
        w->l = l;
        l->receiver = w;
        *need_thread = true;
    }
}

/* Called with b->lock held: anything for the watchdog to look at. */
static bool watchdog_work_locked(struct bh_broker *b)
{
    for (struct bh_listener *l = b->listeners; l != NULL; l = l->next)
        if (l->receiver == NULL)
            return true;
    for (struct bh_worker *w = b->workers; w != NULL; w = w->next)
        if (atomic_load(&w->blocking))
            return true;
    return false;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A new parked worker, made without the lock held. */
static int spawn_parked(struct bh_broker *b)
{
    /* The thread parks at once (w->l is NULL) and gets a listener only once
     * listed. Only the watchdog and bh_broker_start call this, and
     * bh_broker_free joins the watchdog before it walks the list. */
    int rc;
    struct bh_worker *w = worker_start(b, W_PARKED, NULL, &rc);
    if (w == NULL)
        return -rc;
    pthread_mutex_lock(&b->lock);
    w->next = b->workers;
    b->workers = w;
    pthread_mutex_unlock(&b->lock);
    return 0;
}

/* Called with b->lock held. */
static unsigned parked_locked(struct bh_broker *b)
{
    unsigned n = 0;
    for (struct bh_worker *w = b->workers; w != NULL; w = w->next)
        if (w->role == W_PARKED && !w->exited)
            n++;
    return n;
}

static void watchdog_wake(struct bh_broker *b)
{
    uint64_t one = 1;
    ssize_t n = write(b->stop_fd, &one, sizeof(one));
    (void)n;
}

/* Looks at every blocked call once a tick: a receiver stuck in one call
 * hands its listener on, a detached call whose guest went away is
 * interrupted, a listener without a receiver gets one. With nothing to look
 * at for two idle ticks it sleeps until bh_blocking_begin (or a listener
 * left without a receiver) wakes it, so an idle sandbox costs no wake-ups. */
static void *watchdog_main(void *arg)
{
    struct bh_broker *b = arg;
    bool busy = false, fast = false;
    int idle_ticks = 0;
    int64_t spawn_after = 0;
    while (!atomic_load(&b->stopping)) {
        int timeout = fast ? BH_TICK_BUSY_MS : BH_TICK_IDLE_MS;
        if (!busy && idle_ticks >= 2) {
            /* Announce the sleep before the last look: a worker that starts
             * blocking after that look sees the flag and wakes us. */
            atomic_store(&b->watchdog_asleep, true);
            pthread_mutex_lock(&b->lock);
            bool work = watchdog_work_locked(b);
            pthread_mutex_unlock(&b->lock);
            if (work)
                atomic_store(&b->watchdog_asleep, false);
            else
                timeout = -1;
        }
        struct pollfd p = {.fd = b->stop_fd, .events = POLLIN};
        if (poll(&p, 1, timeout) > 0) {
            uint64_t v;
            ssize_t n = read(b->stop_fd, &v, sizeof(v));
            (void)n;
            idle_ticks = 0;
        }
        atomic_store(&b->watchdog_asleep, false);
        if (atomic_load(&b->stopping))
            break;
        busy = fast = false;
        bool need_thread = false;
        pthread_mutex_lock(&b->lock);
        for (struct bh_listener *l = b->listeners; l != NULL; l = l->next)
            if (l->receiver == NULL && assign_receiver_locked(b, l, false) < 0)
                need_thread = busy = true; /* try again next tick */
        for (struct bh_worker *w = b->workers; w != NULL; w = w->next) {
            if (!atomic_load(&w->blocking))
                continue;
            busy = true;
            if (w->role == W_RECEIVER) {
                unsigned seq = atomic_load(&w->seq);
                if (w->seen_seq != seq)
                    w->seen_seq = seq;
                else
                    detach_locked(b, w, &need_thread);
                fast |= w->role == W_DETACHED;
            } else if (w->role == W_DETACHED) {
                fast = true;
                uint64_t id = w->req_id;
                if (ioctl(w->req_l->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0)
                    interrupt_locked(b, w, "the guest no longer waits for it");
            }
        }
        if (parked_locked(b) < BH_RESERVE)
            need_thread = true;
        pthread_mutex_unlock(&b->lock);
        /* Threads are made here, with the lock released, one per tick, and
         * not again for a while after a failure (the sandbox's pids limit
         * is full): nothing waits for them but the hand-off of a call that
         * already blocks. */
        if (need_thread && !atomic_load(&b->stopping) && now_ms() >= spawn_after) {
            if (spawn_parked(b) < 0)
                spawn_after = now_ms() + BH_SPAWN_RETRY_MS;
            else
                busy = true; /* give it out at the next tick */
        }
        idle_ticks = busy ? 0 : idle_ticks + 1;
    }
    return NULL;
}

/* A worker: receives on its listener (blocked in NOTIF_RECV, so that the
 * kernel's synchronous wake-up hands it the guest's CPU) and answers inline;
 * parked while it has no listener. */
static void *worker_main(void *arg)
{
    struct bh_worker *w = arg;
    struct bh_broker *b = w->b;
    self_worker = w;
    sigset_t intr;
    sigemptyset(&intr);
    sigaddset(&intr, BH_INTR_SIG);
    pthread_sigmask(SIG_UNBLOCK, &intr, NULL);
    /* A private cwd and umask per worker: creating calls set the guest's umask. */
    cleanup_free struct seccomp_notif *n = NULL;
    if (unshare(CLONE_FS) == 0)
        n = calloc(1, b->notif_size);
    /* SCHED_BATCH: a woken worker does not preempt the running task. The
     * guest thread that calls blocks itself at once, so the receiver still
     * runs straight away; but an ADDFD (every open) waits until the guest
     * has installed the fd, and the guest's completion wakes the receiver
     * only to close its copy and block in RECV again: preempting the guest
     * for that cost two context switches per open. Deferred, the close runs
     * when the guest next blocks, typically in its next brokered call,
     * whose notification RECV then finds queued. The guest's scheduling is
     * untouched (workers make no processes); under plain_wake_up, where a
     * receiver is woken on whichever CPU the scheduler picks, it may have to
     * preempt, so the workers stay SCHED_OTHER. */
    if (!b->cfg.plain_wake_up &&
        sched_setscheduler(0, SCHED_BATCH, &(struct sched_param){.sched_priority = 0}) == 0)
        atomic_fetch_add(&b->n_batch_workers, 1);
    pthread_mutex_lock(&b->lock);
    if (n == NULL) {
        /* The watchdog gives the listener to another worker. */
        if (w->l != NULL)
            w->l->receiver = NULL;
        w->l = NULL;
        w->role = W_PARKED;
        w->exited = true;
        pthread_mutex_unlock(&b->lock);
        watchdog_wake(b);
        return NULL;
    }
    for (;;) {
        if (w->l == NULL) {
            w->role = W_PARKED;
            while (!atomic_load(&b->stopping) && w->l == NULL)
                pthread_cond_wait(&b->park, &b->lock);
        }
        if (atomic_load(&b->stopping))
            break;
        struct bh_listener *l = w->l;
        /* The receiver's own reference; the list's stays while it receives. */
        atomic_fetch_add(&l->refs, 1);
        pthread_mutex_unlock(&b->lock);

        memset(n, 0, b->notif_size);
        uint64_t recv_ns = bh_now_ns();
        if (ioctl(l->fd, SECCOMP_IOCTL_NOTIF_RECV, n) == 0) {
            w->req_l = l;
            w->req_id = n->id;
            w->req_tid = (pid_t)n->pid;
            w->req_tgid = (pid_t)n->pid;
            handle(b, l, n, recv_ns);
        } else if ((errno != EINTR && errno != ENOENT) || listener_gone(l)) {
            /* No task uses this filter any more: it never fires again. */
            pthread_mutex_lock(&b->lock);
            if (w->l == l && l->receiver == w)
                listener_unlink_locked(b, l);
            pthread_mutex_unlock(&b->lock);
        }
        listener_put(l);
        pthread_mutex_lock(&b->lock);
    }
    w->exited = true;
    pthread_mutex_unlock(&b->lock);
    bh_dir_cache_drop();
    return NULL;
}

/* ---- lifecycle --------------------------------------------------------- */

/* How long a tid proven alive stays its task's for sure. A tid passes to
 * another task only after that task died and the pid allocator (cyclic)
 * went once round the pid space: with at most half of it in use (a
 * sandbox's pids cgroup allows 1024 by default), pid_max/2 allocations,
 * each a clone() of far more than a microsecond of one CPU (a thread's is
 * ~10 us; clone3's set_tid, the one way to pick a pid, needs CAP_SYS_ADMIN
 * and clone3 is refused to guests). A margin of two on top, and never more
 * than 1 ms: pid_max 32768 on 2 CPUs gives 1 ms, on 64 CPUs 128 us.
 * Unknown (no /proc): 0, every call checks. */
static uint64_t alive_window_ns(void)
{
    char buf[32] = "";
    cleanup_close int fd = open("/proc/sys/kernel/pid_max", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
    long pid_max = n > 0 ? strtol(buf, NULL, 10) : 0;
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    if (online > cpus)
        cpus = online;
    if (pid_max <= 0 || cpus <= 0)
        return 0;
    uint64_t w = (uint64_t)pid_max * 1000u / (4u * (uint64_t)cpus);
    return w < 1000000u ? w : 1000000u;
}

/* Whether every procfs, sysfs and cgroupfs mounted in the guest's root sits
 * under its /proc or /sys, and no mount in or above the root takes part in
 * propagation (shared or slave: something could be mounted there later).
 * Mounts are fixed once the broker starts (the sentry and the guests are
 * refused mount), so one look suffices. Anything unreadable: false. */
static bool special_mounts_only_at_proc_and_sys(const struct bh_broker *b)
{
    struct bh_mountinfo mi;
    struct bh_error err = {0};
    if (bh_mountinfo_open(&mi, &err) < 0)
        return false;
    struct bh_mount_entry e;
    int rc = -1;
    bool ok = true;
    while (ok && (rc = bh_mountinfo_next(&mi, &e, &err)) == 1) {
        const char *mp = e.point;
        size_t ml = strlen(mp);
        const char *view; /* the mount point as the guest sees it; NULL: outside */
        if (b->root_len == 0)
            view = mp;
        else if (strncmp(mp, b->root_path, b->root_len) == 0 &&
                 (mp[b->root_len] == '/' || mp[b->root_len] == '\0'))
            view = mp[b->root_len] ? mp + b->root_len : "/";
        else
            view = NULL;
        /* Above the root: its propagation reaches into the root too. */
        bool above = view == NULL && (strcmp(mp, "/") == 0 || (strncmp(b->root_path, mp, ml) == 0 &&
                                                               b->root_path[ml] == '/'));
        if ((e.shared != 0 || e.master != 0) && (view != NULL || above))
            ok = false;
        else if (view != NULL &&
                 (strcmp(e.fstype, "proc") == 0 || strcmp(e.fstype, "sysfs") == 0 ||
                  strcmp(e.fstype, "cgroup") == 0 || strcmp(e.fstype, "cgroup2") == 0))
            ok = strcmp(view, "/proc") == 0 || strncmp(view, "/proc/", 6) == 0 ||
                 strcmp(view, "/sys") == 0 || strncmp(view, "/sys/", 5) == 0;
    }
    bh_mountinfo_close(&mi);
    return ok && rc == 0;
}

int bh_broker_new(const struct bh_broker_config *cfg, struct bh_broker **out, struct bh_error *err)
{
    struct seccomp_notif_sizes sizes = {0};
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
        return bh_error_errno(err, errno,
                              "broker: the kernel lacks seccomp user notification "
                              "(SECCOMP_GET_NOTIF_SIZES); the kernel tier needs Linux 5.14+");
    struct bh_broker *b = calloc(1, sizeof(*b));
    if (b == NULL)
        return bh_error_errno(err, ENOMEM, "broker: allocate");
    b->cfg = *cfg;
    b->cfg.own_tmpfs = NULL; /* the caller's array need not outlive this call */
    b->cfg.n_own_tmpfs = 0;
    for (size_t i = 0; i < cfg->n_own_tmpfs && b->n_own_tmpfs < BH_BROKER_OWN_TMPFS_MAX; i++)
        b->own_tmpfs[b->n_own_tmpfs++] = cfg->own_tmpfs[i];
    b->root_fd = b->stop_fd = -1;
    pthread_mutex_init(&b->lock, NULL);
    pthread_cond_init(&b->park, NULL);
    pthread_mutex_init(&b->cache_lock, NULL);
    b->notif_size = sizes.seccomp_notif > sizeof(struct seccomp_notif)
                        ? sizes.seccomp_notif
                        : sizeof(struct seccomp_notif);
    b->resp_size = sizes.seccomp_notif_resp;
    b->max_blocking = cfg->max_workers ? cfg->max_workers : 64;
    b->share = b->max_blocking / 4 ? b->max_blocking / 4 : 1;
    b->self_pid = getpid();
    b->alive_window_ns = alive_window_ns();
    const char *dbg = getenv("BULKHEAD_SENTRY_DEBUG");
    b->debug = dbg != NULL && *dbg != '\0' && strcmp(dbg, "0") != 0;

    int src = cfg->root_fd >= 0 ? cfg->root_fd : AT_FDCWD;
    b->root_fd = openat(src, cfg->root_fd >= 0 ? "." : "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (b->root_fd < 0) {
        int e = errno;
        bh_broker_free(b);
        return bh_error_errno(err, e, "broker: open the guest's root (fd %d) as a directory",
                              cfg->root_fd);
    }
    if (cfg->root_fd >= 0) {
        /* The root as the broker's own "/" sees it, to turn /proc links and
         * cwd paths (which the kernel prints in the broker's view) into the
         * guest's view. */
        char link[64];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", b->root_fd);
        ssize_t len = readlink(link, b->root_path, sizeof(b->root_path) - 1);
        if (len <= 0 || b->root_path[0] != '/') {
            int e = len < 0 ? errno : EINVAL;
            bh_broker_free(b);
            return bh_error_errno(err, e, "broker: find the path of the guest's root");
        }
        b->root_path[len] = '\0';
        if (strcmp(b->root_path, "/") == 0)
            b->root_path[0] = '\0';
        b->root_len = strlen(b->root_path);
    }
    struct stat pst;
    struct statfs psf;
    cleanup_close int pfd =
        openat(b->root_fd, "proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd >= 0 && fstatfs(pfd, &psf) == 0 && psf.f_type == PROC_SUPER_MAGIC &&
        fstat(pfd, &pst) == 0)
        b->proc_dev = pst.st_dev;
    b->plain_paths = special_mounts_only_at_proc_and_sys(b);
    b->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (b->stop_fd < 0) {
        int e = errno;
        bh_broker_free(b);
        return bh_error_errno(err, e, "broker: create its stop event");
    }
    /* Process-wide, but only the broker's workers unblock it. */
    struct sigaction sa = {.sa_handler = intr_handler};
    sigemptyset(&sa.sa_mask);
    if (sigaction(BH_INTR_SIG, &sa, NULL) < 0) {
        int e = errno;
        bh_broker_free(b);
        return bh_error_errno(err, e, "broker: install the handler of signal %d", BH_INTR_SIG);
    }
    *out = b;
    return 0;
}

int bh_broker_start(struct bh_broker *b, struct bh_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = -pthread_create(&b->watchdog, NULL, watchdog_main, b);
    b->watchdog_running = rc == 0;
    for (struct bh_listener *l = b->listeners; l != NULL && rc == 0; l = l->next)
        if (l->receiver == NULL)
            rc = assign_receiver_locked(b, l, true);
    b->started = rc == 0;
    pthread_mutex_unlock(&b->lock);
    if (rc < 0)
        return bh_error_errno(err, -rc, "broker: start its threads");
    /* The reserve, while threads can still be made: a new listener or a
     * blocked call's hand-off then needs no thread creation. Best effort (a
     * sandbox's pids limit may be tiny): the watchdog makes up for it. */
    for (int i = 0; i < BH_RESERVE; i++)
        if (spawn_parked(b) < 0)
            break;
    return 0;
}

int bh_broker_add_listener(struct bh_broker *b, int listener_fd, struct bh_error *err)
{
    cleanup_close int fd = listener_fd;
    if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
        return bh_error_errno(err, errno, "broker: listener fd %d", listener_fd);
    /* Synchronous wake-ups: the notifying guest thread wakes the receiver
     * on its own CPU, and SEND wakes the guest on the receiver's, so the
     * pair shares one CPU. The scheduler's own choice sometimes puts them
     * on two, where every hand-over wakes the other CPU (an IPI; from idle
     * a host-side wake-up on this PVM guest): 150-360 us a round trip
     * against 13 us on one CPU (bench/syscalls --placement). Older
     * kernels lack the flag, which only costs speed. */
    if (!b->cfg.plain_wake_up) {
        unsigned long flags = SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP; /* by value */
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_SET_FLAGS, flags) == 0)
            atomic_fetch_add(&b->n_sync_listeners, 1);
        else if (errno != EINVAL && errno != ENOTTY)
            return bh_error_errno(err, errno, "broker: set SYNC_WAKE_UP on listener fd %d",
                                  listener_fd);
    }
    struct bh_listener *l = calloc(1, sizeof(*l));
    if (l == NULL)
        return bh_error_errno(err, ENOMEM, "broker: allocate a listener");
    atomic_init(&l->refs, 1);
    l->fd = steal_fd(&fd);
    pthread_mutex_lock(&b->lock);
    l->next = b->listeners;
    if (l->next != NULL)
        l->next->prev = l;
    b->listeners = l;
    /* No thread now (the sandbox's pids limit, a fork bomb): the watchdog
     * tries again every tick, and the guest's brokered calls wait meanwhile
     * (never unchecked). */
    bool later = b->started && assign_receiver_locked(b, l, true) < 0;
    pthread_mutex_unlock(&b->lock);
    if (later)
        watchdog_wake(b);
    return 0;
}

void bh_broker_get_stats(struct bh_broker *b, struct bh_broker_stats *out)
{
    out->handled = atomic_load(&b->n_handled);
    out->refused = atomic_load(&b->n_refused);
    out->continued = atomic_load(&b->n_continued);
    out->unknown = atomic_load(&b->n_unknown);
    out->dead = atomic_load(&b->n_dead);
    out->interrupted = atomic_load(&b->n_interrupted);
    out->rechecked = atomic_load(&b->n_rechecked);
    out->id_checks = atomic_load(&b->n_id_checks);
    out->recv_proofs = atomic_load(&b->n_recv_proofs);
    out->umask_reads = atomic_load(&b->n_umask_reads);
    out->closed_after_answer = atomic_load(&b->n_closed_after);
    out->sync_listeners = atomic_load(&b->n_sync_listeners);
    out->batch_workers = atomic_load(&b->n_batch_workers);
    out->dir_cache_hits = atomic_load(&b->n_dir_cache_hits);
    out->names_changes = atomic_load(&b->n_names_changes);
}

void bh_broker_free(struct bh_broker *b)
{
    if (b == NULL)
        return;
    atomic_store(&b->stopping, true);
    if (b->stop_fd >= 0) {
        uint64_t one = 1;
        ssize_t w = write(b->stop_fd, &one, sizeof(one));
        (void)w;
    }
    if (b->watchdog_running)
        pthread_join(b->watchdog, NULL);
    /* Workers in NOTIF_RECV or in a guest's blocking call return EINTR; one
     * between its check of stopping and its next call needs another go. */
    bool stuck = false;
    for (int round = 0; round < 100; round++) {
        stuck = false;
        pthread_mutex_lock(&b->lock);
        pthread_cond_broadcast(&b->park);
        for (struct bh_worker *w = b->workers; w != NULL; w = w->next) {
            if (!w->exited) {
                pthread_kill(w->thread, BH_INTR_SIG);
                stuck = true;
            }
        }
        pthread_mutex_unlock(&b->lock);
        if (!stuck)
            break;
        usleep(10 * 1000);
    }
    /* Listeners still watched: closing them fails the guests' pending and
     * future notified calls (ENOSYS), never lets them through. */
    pthread_mutex_lock(&b->lock);
    while (b->listeners != NULL)
        listener_unlink_locked(b, b->listeners);
    pthread_mutex_unlock(&b->lock);
    if (stuck) {
        /* A worker the kernel does not let go still uses the broker: keep its
         * memory (the sentry is ending anyway when it frees its broker). */
        for (struct bh_worker *w = b->workers; w != NULL; w = w->next)
            if (w->exited)
                pthread_join(w->thread, NULL);
        if (b->debug)
            fprintf(stderr, "bulkhead-sentry: broker: a worker is stuck in a guest's call; "
                            "its memory is left allocated\n");
        return;
    }
    for (struct bh_worker *w = b->workers, *next; w != NULL; w = next) {
        next = w->next;
        pthread_join(w->thread, NULL);
        free(w);
    }
    for (size_t i = 0; i < BH_ARRAY_SIZE(b->cache); i++)
        guest_put(b->cache[i]);
    if (b->stop_fd >= 0)
        close(b->stop_fd);
    if (b->root_fd >= 0)
        close(b->root_fd);
    pthread_cond_destroy(&b->park);
    pthread_mutex_destroy(&b->lock);
    pthread_mutex_destroy(&b->cache_lock);
    free(b);
}
