/* Internals shared by the broker's files (broker.c: threads, guest memory,
 * replies; broker-fs.c: confined path resolution and the file syscalls;
 * broker-net.c: the socket syscalls). Nothing here is for front ends. */
#ifndef BH_BROKER_INTERNAL_H
#define BH_BROKER_INTERNAL_H

#include <limits.h>
#include <linux/capability.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "broker.h"
#include "kernel-compat.h"

/* Handlers answer through their return value: >= 0 is the syscall's result,
 * -errno a refusal; these two mean the handler already answered (ADDFD with
 * SEND) or wants the kernel to run the syscall itself. */
#define BH_REPLIED (-100000L)
#define BH_CONTINUE (-100001L)

#define BH_BROKER_MAX_GROUPS 256
/* The capabilities that decide file permission checks: the kernel's
 * CAP_FS_MASK (the set its setfsuid fix-up raises and clears). A broker
 * thread holds, of these, exactly what the guest thread it serves holds in
 * its effective set and the sentry may hold (bh_req_become_guest). */
#define BH_BROKER_FS_CAPS                                                                          \
    ((1ULL << CAP_CHOWN) | (1ULL << CAP_DAC_OVERRIDE) | (1ULL << CAP_DAC_READ_SEARCH) |            \
     (1ULL << CAP_FOWNER) | (1ULL << CAP_FSETID) | (1ULL << CAP_LINUX_IMMUTABLE) |                 \
     (1ULL << CAP_MAC_OVERRIDE))

/* A listener (one guest filter). Referenced by the watched list and by each
 * request being answered on it. */
struct bh_listener {
    int fd;
    atomic_int refs;
    struct bh_worker *receiver;      /* under bh_broker.lock; NULL: none yet */
    struct bh_listener *prev, *next; /* in bh_broker.listeners while watched */
};

struct bh_worker;

/* What the broker knows of one guest thread, keyed by tid. A pidfd on the
 * thread (PIDFD_THREAD) proves the entry still describes the same task: a
 * tid reused after an exit is a different, live task while the old pidfd
 * reads as exited. */
struct bh_guest {
    atomic_int refs;
    pid_t tid;
    pid_t tgid;
    int pidfd;     /* PIDFD_THREAD: pidfd_getfd, SIGPIPE, liveness */
    int status_fd; /* /proc/TID/status, re-read with pread */
    /* CLOCK_MONOTONIC ns before a NOTIF_ID_VALID or SEND of one of its own
     * calls succeeded: the task was alive at some instant after it. Within
     * bh_broker.alive_window_ns of it, its tid cannot have passed to
     * another task (broker.c, guest_get), so no pidfd poll is needed. */
    _Atomic uint64_t alive_ns;
    bool ids_valid;  /* fs ids below may be reused (see config.ids_notified) */
    bool ids_frozen; /* no capability, equal ids, no_new_privs: ids never change */
    /* Set when the thread's permitted or effective set holds a capability
     * of BH_BROKER_FS_CAPS: its status is then read on every call. */
    bool fs_caps_possible;
    uint32_t ruid, euid, fsuid, rgid, egid, fsgid;
    /* CapEff: the file capabilities among them are the ones the broker acts
     * with for this thread (bh_req_become_guest), no more; CapPrm's for
     * access(2) by a real root, as the kernel's own fix-up for it. */
    uint64_t cap_eff, cap_prm;
    int ngroups;
    uint32_t groups[BH_BROKER_MAX_GROUPS];
    /* The umask read from status_fd, valid while bh_broker.umask_gen is
     * still umask_gen (broker.c, bh_req_umask). */
    bool umask_valid;
    mode_t umask;
    uint64_t umask_gen;
    /* This thread's umask call was answered CONTINUE and may not have
     * taken effect yet: its next call settles it. */
    atomic_bool umask_pending;
};

struct bh_broker {
    struct bh_broker_config cfg;
    int root_fd;              /* O_PATH, the guest's "/" */
    char root_path[PATH_MAX]; /* the root as the broker's own root sees it; "" for "/" */
    size_t root_len;
    pid_t self_pid; /* the sentry's own tgid, never a target */
    dev_t proc_dev; /* st_dev of the root's /proc, 0 when none */
    /* No procfs, sysfs or cgroupfs is mounted in the root but under /proc
     * and /sys, and no mount there receives propagation (the table is
     * fixed): a path that follows no symlink and has no ".." then lands on
     * one only if it starts with /proc or /sys (broker-fs.c, resolve). */
    bool plain_paths;
    /* config.own_tmpfs, copied (cfg's pointer is cleared) */
    dev_t own_tmpfs[BH_BROKER_OWN_TMPFS_MAX];
    size_t n_own_tmpfs;
    int stop_fd; /* eventfd: wakes the watchdog (to stop, or to look at a blocked call) */
    size_t notif_size, resp_size;
    /* How long a task known alive keeps its tid for sure: less than the
     * guests could spend going once round the pid space (broker.c). */
    uint64_t alive_window_ns;
    bool debug;
    atomic_bool stopping;
    bool started;

    pthread_mutex_t lock; /* workers, listeners, roles (the watchdog's) */
    /* The guest cache only: a receiver answering a call never takes b->lock,
     * so it never waits for a watchdog that a starved cgroup descheduled
     * while holding it. */
    pthread_mutex_t cache_lock;
    pthread_cond_t park; /* parked workers wait here for a listener */
    struct bh_listener *listeners;
    struct bh_worker *workers;
    pthread_t watchdog;
    bool watchdog_running;
    atomic_bool watchdog_asleep; /* until bh_blocking_begin writes stop_fd */
    unsigned max_blocking;       /* calls blocked at once, all guests together */
    unsigned share;              /* calls blocked at once, per guest process */

    struct bh_guest *cache[256];

    atomic_ulong n_handled, n_refused, n_continued, n_unknown, n_dead, n_interrupted, n_rechecked;
    atomic_ulong n_id_checks, n_recv_proofs, n_umask_reads, n_closed_after, n_sync_listeners,
        n_batch_workers;
    /* Bumped by every umask call of any guest (a umask is shared by every
     * task that shares its fs_struct, across threads and CLONE_FS
     * children) and again when it has taken effect; unsettled counts the
     * calls answered CONTINUE whose thread has not made a call since. */
    atomic_uint_fast64_t umask_gen;
    atomic_long umask_unsettled;
    /* Bumped by the dispatch before and after every brokered call whose
     * table entry says it may change which directory a path names, or who
     * may search it (BH_NAMES_DIRS): a worker's parent-directory cache
     * (broker-fs.c) is valid only while it is unchanged. */
    atomic_uint_fast64_t names_gen;
    atomic_ulong n_dir_cache_hits, n_names_changes;
};

/* One notification being answered. */
struct bh_req {
    struct bh_broker *b;
    struct bh_listener *l;
    struct seccomp_notif *n;
    struct bh_guest *g;
    const char *name; /* syscall name for the debug log */
    /* CLOCK_MONOTONIC ns before the NOTIF_RECV that returned this call
     * (0: unknown): the caller was alive at an instant after it. */
    uint64_t recv_ns;
    /* CLOCK_MONOTONIC ns of this call's first proof of life (0: none yet):
     * a write to the guest's memory within the alive window of it needs no
     * second check. */
    uint64_t valid_ns;
};

typedef long (*bh_handler_fn)(struct bh_req *r);

/* Guest memory (process_vm_readv/writev on the notifying thread). */
int bh_mem_read(struct bh_req *r, uint64_t addr, void *buf, size_t len);
/* Reads a NUL-terminated string of at most cap-1 bytes: its length, -EFAULT
 * or -ENAMETOOLONG. */
long bh_mem_read_str(struct bh_req *r, uint64_t addr, char *buf, size_t cap);
int bh_mem_write(struct bh_req *r, uint64_t addr, const void *buf, size_t len);
/* After every read and before acting: the notifying task still waits. */
int bh_req_valid(struct bh_req *r);
/* CLOCK_MONOTONIC in ns (vDSO: no syscall). */
uint64_t bh_now_ns(void);
/* Switches the calling worker's fs ids to the guest's (real ids instead of
 * the effective ones when real_ids, for access(2)). */
int bh_req_become_guest(struct bh_req *r, bool real_ids);
/* Counts the calling worker's switches of fs ids: the parent-directory
 * cache was filled under the ids current at that count (broker.c). */
uint64_t bh_worker_ids_epoch(void);
/* Closes the calling worker's parent-directory cache (at thread exit). */
void bh_dir_cache_drop(void);
/* The guest's umask (read fresh: umask(2) is not brokered). */
int bh_req_umask(struct bh_req *r, mode_t *mask);
/* Closes *fd once the call is answered (the answer never depends on a
 * close): the guest woken by SEND runs while this worker closes. For fds
 * of the broker only (an O_PATH lookup, a parent directory); a cleanup
 * attribute, like cleanup_close. Outside a call (no handler running on
 * this thread) it closes at once. */
void bh_close_after_answer(int *fd);
#define cleanup_close_after_answer __attribute__((cleanup(bh_close_after_answer)))
/* A copy of the guest's fd in the broker (pidfd_getfd), or -errno. */
int bh_req_getfd(struct bh_req *r, int guest_fd);
/* Installs fd in the guest and answers with its number (ADDFD + SEND). */
long bh_req_addfd(struct bh_req *r, int fd, bool cloexec);
void bh_debug(struct bh_req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Bracket a call that may block indefinitely (an open that may meet a FIFO
 * or a device, connect, send). The watchdog hands the listener of a worker
 * that stays inside longer than a tick to another worker, and interrupts
 * (EINTR) a call whose guest went away or that exceeds its guest's share. */
void bh_blocking_begin(void);
void bh_blocking_end(void);

/* The syscalls the broker answers, by group: the one list that the handler
 * table (broker.c), the handlers' declarations below and the tests are made
 * from. kernel.policy's notify lines and the prose lists (broker.c's opening
 * comment, seccomp-policies/README.md) are checked against the table by
 * tests/unit/test_policy.c. Adding a brokered syscall: a line here, its
 * handler, a notify line in kernel.policy, its name in the two prose lists.
 * X(name, names) per file syscall, names saying what it may do to the tree
 * (enum bh_names_effect below; the dispatch, not the handler, tells the
 * parent-directory cache); the LEGACY lists exist only where the
 * architecture has those syscalls (x86-64: SYS_open; arm64 has the *at forms
 * only). */
/* clang-format off */
#define BH_BROKER_FILE_SYSCALLS_LEGACY(X) \
    X(open, FILES) X(creat, FILES) X(stat, KEPT) X(lstat, KEPT) X(access, KEPT) \
    X(readlink, KEPT) X(mkdir, DIRS) X(mknod, FILES) X(rmdir, DIRS) X(unlink, FILES) \
    X(rename, DIRS) X(symlink, FILES) X(link, FILES) X(chmod, DIRS) X(chown, DIRS) \
    X(lchown, DIRS) X(utime, KEPT) X(utimes, KEPT) X(futimesat, KEPT)
#define BH_BROKER_FILE_SYSCALLS(X) \
    X(openat, FILES) X(openat2, FILES) \
    X(newfstatat, KEPT) X(statx, KEPT) X(statfs, KEPT) X(faccessat, KEPT) \
    X(faccessat2, KEPT) X(readlinkat, KEPT) \
    X(mkdirat, DIRS) X(mknodat, FILES) X(unlinkat, DIRS_IF_AT_REMOVEDIR) \
    X(renameat, DIRS) X(renameat2, DIRS) X(symlinkat, FILES) X(linkat, FILES) \
    X(fchmod, DIRS) X(fchmodat, DIRS) X(fchmodat2, DIRS) X(fchown, DIRS) X(fchownat, DIRS) \
    X(utimensat, KEPT) X(truncate, KEPT) X(inotify_add_watch, KEPT)
#define BH_BROKER_NET_SYSCALLS(X) \
    X(connect) X(bind) X(sendto) X(sendmsg)
/* Answered CONTINUE after forgetting the thread's cached ids. */
#define BH_BROKER_ID_SYSCALLS(X) \
    X(setuid) X(setgid) X(setreuid) X(setregid) X(setresuid) X(setresgid) \
    X(setfsuid) X(setfsgid) X(setgroups)
/* Answered CONTINUE after marking every cached umask stale. */
#define BH_BROKER_UMASK_SYSCALLS(X) X(umask)
/* clang-format on */

/* What a brokered call may do to the names of the tree, for the
 * parent-directory cache (broker-fs.c), whose entries are directories
 * reached through no symlink: the dispatch bumps names_gen before and after
 * every call that may change which directory a path names or who may search
 * it. Every file syscall of the table states one (tests/unit/test_broker.c,
 * names_effects_of_the_table, holds the list against one of its own). */
enum bh_names_effect {
    BH_NAMES_KEPT = 1, /* no name made or removed, no mode or owner changed */
    /* Makes or removes names of non-directories only (a create, unlink,
     * mknod, link, symlink): no directory a path walks through changes. Not
     * bumped, so that a create-and-unlink loop keeps its entry. */
    BH_NAMES_FILES,
    /* May make, remove or replace a directory's name (rename replaces
     * anything), or change a mode or owner (search rights): bumped. */
    BH_NAMES_DIRS,
    BH_NAMES_DIRS_IF_AT_REMOVEDIR, /* unlinkat: BH_NAMES_DIRS with AT_REMOVEDIR in args[2] */
};

enum bh_broker_group {
    BH_BROKER_NONE = 0, /* not answered: ENOSYS */
    BH_BROKER_FILES,
    BH_BROKER_SOCKETS,
    BH_BROKER_IDS,
    BH_BROKER_UMASK,
};

/* Which group of the table answers native syscall nr (BH_BROKER_NONE: the
 * broker does not handle it), and its name in the table (NULL: none). */
enum bh_broker_group bh_broker_group_of(long nr);
const char *bh_broker_syscall_name(long nr);
/* What native syscall nr may do to the tree's names (0: not brokered). */
enum bh_names_effect bh_broker_names_effect(long nr);
/* Whether the handler table answers native syscall nr. */
bool bh_broker_handles(long nr);

#define BH_BROKER_DECLARE(name) long bh_sys_##name(struct bh_req *r);
#define BH_BROKER_DECLARE_FILE(name, names) BH_BROKER_DECLARE(name)
BH_BROKER_FILE_SYSCALLS_LEGACY(BH_BROKER_DECLARE_FILE)
BH_BROKER_FILE_SYSCALLS(BH_BROKER_DECLARE_FILE)
BH_BROKER_NET_SYSCALLS(BH_BROKER_DECLARE)
#undef BH_BROKER_DECLARE_FILE
#undef BH_BROKER_DECLARE

/* broker-fs.c, for broker-net.c: resolves a guest path (dirfd AT_FDCWD
 * for relative ones) to an fd opened with flags, confined to the root. */
int bh_resolve_open(struct bh_req *r, int dirfd, const char *path, uint64_t flags, uint64_t mode);
/* Resolves everything but the last component: an O_PATH fd on the parent
 * directory and the last name copied to last (NAME_MAX+1). */
int bh_resolve_parent(struct bh_req *r, int dirfd, const char *path, char *last);

#endif
