/* The sentry's syscall broker: it receives seccomp user notifications from
 * guest processes, reads their pointer arguments once, decides by policy,
 * performs the operation itself and answers (or refuses with an errno).
 *
 * What the broker needs from the sentry process:
 *  - capabilities in the sandbox's user namespace: CAP_SYS_PTRACE (guest
 *    memory with process_vm_readv/writev, pidfd_getfd, /proc/PID/{cwd,exe}),
 *    CAP_SETUID and CAP_SETGID (per-thread setfsuid/setfsgid/setgroups so
 *    that every permission check is the guest's own), CAP_KILL (only to
 *    deliver SIGPIPE to a guest thread whose brokered send hit a broken
 *    pipe: the guest runs as another uid).
 *    Capabilities that override file permissions (DAC_*, FOWNER, ...) may
 *    be permitted (what guests get, CAP_DAC_READ_SEARCH for a guest's
 *    working directory), never effective but as the served guest thread
 *    holds them: each worker sets its effective file capabilities to that
 *    thread's CapEff after taking its fs ids (broker.c, worker_fs_caps).
 *  - a /proc of the guests' pid namespace at /proc in its root;
 *  - the syscalls listed at the top of sentry/broker.c (for sentry.policy).
 * Which syscalls it answers (and how) is listed there too. */
#ifndef BH_BROKER_H
#define BH_BROKER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct bh_broker_config {
    /* Unused: every request runs with the fs ids of the guest thread that
     * made it, read from /proc/PID/status. Kept for compatibility. */
    uint32_t guest_uid;
    uint32_t guest_gid;
    pid_t sentry_pid; /* the sentry's pid as the guest sees it (1): never a target */
    /* The guest's "/" as a directory fd (the broker dups it), or -1 for the
     * broker's own "/" (the sentry after pivot_root). Tests use a temp dir. */
    int root_fd;
    /* The guest policy notifies the whole set*id/setgroups family: the
     * broker then caches each thread's ids (invalidated by those calls and
     * by the thread's exit) instead of reading /proc/PID/status per call.
     * Without it, ids are cached anyway for a thread that cannot change
     * them (no capabilities, real = effective = saved = fs ids,
     * no_new_privs), which is every guest of the kernel tier. */
    bool ids_notified;
    /* The guest policy notifies umask: the broker then caches each
     * thread's umask (read from /proc/TID/status for creating calls)
     * until any guest calls umask. Without it, every creating call reads
     * it afresh. */
    bool umask_notified;
    /* Upper bound of guest calls blocked in the broker at once, e.g. FIFO
     * opens waiting for a partner (0: 64). Each guest process may hold a
     * quarter of them (at least one); a call beyond its share is interrupted
     * (EINTR), as a signal would. Receiving is never blocked by them. */
    unsigned max_workers;
    /* Leaves SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP off. By default every
     * listener has it: each hand-over then wakes the other side on the CPU
     * that hands over, so a guest and its receiver never end up on two
     * CPUs, where a round trip costs 10-25 times as much on this VM
     * (sentry/README.md, "CPU placement"). Also leaves the workers
     * SCHED_OTHER (see batch_workers). */
    bool plain_wake_up;
    /* Superblocks (st_dev) of the tmpfs mounts the sandbox made itself
     * (mounts.c reports them, struct bh_mounts_made): the parent-directory
     * cache serves only directories of such a tmpfs. A tmpfs the host
     * shares into the sandbox (a bind of its /dev/shm) may be renamed in by
     * the host, which the broker never hears of (sentry/README.md, "The
     * parent-directory cache"). The broker copies them; past
     * BH_BROKER_OWN_TMPFS_MAX the rest is not cached (slower, never wrong). */
    const dev_t *own_tmpfs;
    size_t n_own_tmpfs;
};

/* Counters since bh_broker_new, for tests and the sentry's debug output. */
struct bh_broker_stats {
    unsigned long handled;     /* every notification answered */
    unsigned long refused;     /* answered with an errno */
    unsigned long continued;   /* answered with SECCOMP_USER_NOTIF_FLAG_CONTINUE */
    unsigned long unknown;     /* notified syscalls the broker does not handle (ENOSYS) */
    unsigned long dead;        /* the caller was gone before the answer */
    unsigned long interrupted; /* blocked calls interrupted: guest gone or beyond its share */
    /* Proofs that a caller's tid is still its own beyond the call's first
     * (its NOTIF_RECV, or a NOTIF_ID_VALID): pidfd polls of a cached guest
     * thread and repeated checks before a write, made once the last proof
     * is older than the alive window (broker.c). */
    unsigned long rechecked;
    /* SECCOMP_IOCTL_NOTIF_ID_VALID made before acting: only for calls
     * received longer than the alive window ago (within it, NOTIF_RECV
     * itself proved the caller alive; broker.c, bh_req_valid). */
    unsigned long id_checks;
    /* Calls whose own NOTIF_RECV was recent enough to prove the caller
     * alive (no NOTIF_ID_VALID needed): with id_checks, every call that
     * acted on a guest's memory or cached ids proved its caller one way. */
    unsigned long recv_proofs;
    /* Reads of a guest thread's umask from /proc/TID/status (creating
     * calls whose thread has no valid cached umask). */
    unsigned long umask_reads;
    /* fds the broker closed after answering instead of before (an O_PATH
     * lookup of a stat, the parent directory of an unlink, ...): work the
     * woken guest no longer waits for. */
    unsigned long closed_after_answer;
    /* Listeners given SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (all unless
     * config.plain_wake_up, or the kernel lacks the flag). */
    unsigned long sync_listeners;
    /* Worker threads started under SCHED_BATCH (all unless
     * config.plain_wake_up): a wake-up of the broker never preempts a guest
     * (broker.c, worker_main). */
    unsigned long batch_workers;
    /* Opens, stats and removals answered from a worker's cached fd of the
     * parent directory instead of a walk from the root (broker-fs.c). */
    unsigned long dir_cache_hits;
    /* Calls the dispatch bracketed as changing which directory a path names
     * or who may search it (the call table's BH_NAMES_DIRS): each one
     * invalidates every worker's parent-directory cache. */
    unsigned long names_changes;
};

struct bh_broker;

#define BH_BROKER_OWN_TMPFS_MAX 64

int bh_broker_new(const struct bh_broker_config *cfg, struct bh_broker **out, struct bh_error *err);
/* Starts the broker's threads. Signals must already be blocked in the caller
 * so that they stay with the thread that reads its signalfd. */
int bh_broker_start(struct bh_broker *broker, struct bh_error *err);
/* Hands a listener fd (from a guest's filter) to the broker, which owns it
 * from then on. Safe to call from any thread, before or after start. */
int bh_broker_add_listener(struct bh_broker *broker, int listener_fd, struct bh_error *err);
void bh_broker_get_stats(struct bh_broker *broker, struct bh_broker_stats *out);
/* Stops the threads and closes every listener. A worker blocked in a guest's
 * slow call (a FIFO open, a connect) is interrupted; one the kernel does not
 * let go within ~1 s is left behind with the broker's memory. */
void bh_broker_free(struct bh_broker *broker);

#endif
