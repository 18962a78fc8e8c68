/* Owns the front end's half of a sandbox's life (sandbox.h): create (the
 * cgroup, an id range, clone of the sentry's process into fresh namespaces,
 * the id maps and cgroup join written by the parent while the child waits,
 * the spec handed over, then waiting for "ready" or the child's error),
 * start, signal, wait and destroy, which leaves nothing behind.
 *
 * The child runs only raw syscalls between clone and execveat of
 * bulkhead-sentry: the caller may be multi-threaded (bulkheadd), and glibc's
 * state is not to be trusted in a child made by a raw clone3. */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <pthread.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <linux/futex.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "control.h"
#include "file-table.h"
#include "pid-space.h"
#include "aio-pool.h"
#include "frame.h"
#include "kernel-compat.h"
#include "mounts.h"
#include "paths.h"
#include "policy.h"
#include "conn-internal.h"
#include "ids-internal.h"
#include "idmap-internal.h"
#include "msg-internal.h"
#include "sandbox.h"
#include "sentry-params-internal.h"
#include "spec-json-internal.h"
#include "sha256.h"
#include "spec-fds.h"
#include "startup-trace.h"

#define CREATE_TIMEOUT_MS 60000
#define BH_FLOOR_MEMORY_BYTES (1LL << 30)
#define BH_FLOOR_PIDS 512
#define SENTRY_SYNC_FD 3
#define SENTRY_SLOT_FD 4
#define SENTRY_EXE_FD 5
#define SENTRY_POD_USERNS_FD 6 /* exec'd in the host's namespace: the pod's to join */

struct bh_sandbox {
    pid_t pid; /* host pid of the sentry */
    int pidfd;
    bool detached;
    bool started; /* BH_CREATE_START: the sentry started the first guest */
    bool reaped;
    bool waited;
    int status;
    struct bh_sentry_conn conn;
    struct bh_cgroup *cg;
    struct bh_id_slot slot;
    char *state_dir;
    /* The stack of a child cloned with CLONE_VM, until the sentry has
     * exec'd or the child is dead. */
    void *child_stack;
};

static const int ns_clone_flag[BH_NS_COUNT] = {
    [BH_NS_USER] = CLONE_NEWUSER,     [BH_NS_PID] = CLONE_NEWPID,   [BH_NS_MOUNT] = CLONE_NEWNS,
    [BH_NS_NET] = CLONE_NEWNET,       [BH_NS_IPC] = CLONE_NEWIPC,   [BH_NS_UTS] = CLONE_NEWUTS,
    [BH_NS_CGROUP] = CLONE_NEWCGROUP, [BH_NS_TIME] = CLONE_NEWTIME,
};

int bh_status_to_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return BH_EXIT_SIGNAL_BASE + WTERMSIG(status);
    return BH_EXIT_FAILED;
}

pid_t bh_sandbox_pid(const struct bh_sandbox *sb)
{
    return sb->pid;
}

struct bh_sentry_conn *bh_sandbox_conn(struct bh_sandbox *sb)
{
    return &sb->conn;
}

/* ---- the child, between clone and exec of the sentry -------------------- */

struct child_args {
    const struct bh_sandbox_spec *spec;
    int sync_fd, slot_fd, exe_fd;
    int ns_fds[BH_NS_COUNT];
    /* Joined by the helper that cloned the child, before the sandbox's user
     * namespace existed (host-owned namespaces need host root to join). */
    bool pre_joined[BH_NS_COUNT];
    /* The config names the host's network namespace (the front end's own,
     * or pid 1's where we may look), or we could not tell: see
     * grant_low_ports. */
    bool joins_host_netns;
    /* A pod's user namespace, joined by the helper after the others (host
     * root can join host-owned namespaces only from the host's), or -1. */
    int pod_userns_fd;
    bool owned;
    /* The helper becomes this host uid/gid (and takes these rlimits) before
     * it clones, so the sandbox's user namespace is owned by the slot's
     * unprivileged id and its ucounts are charged there, not to host root. */
    bool as_owner;
    uint32_t owner_uid, owner_gid;
    char comm[16]; /* the front end's name, which the helper gives up */
    struct bh_userns_rlimit rlimits[BH_USERNS_N_RLIMITS];
    /* Cloned in place (clone_as_owner): the front end lent only the soft
     * limits, so the child lowers its hard limits to the ceilings itself. */
    bool child_sets_rlimits;
    /* The second wall: the child execs the sentry with no new namespace
     * (its mm then belongs to the host's user namespace), and the sentry
     * forks itself into these (sentry-main.c, fork_into_sandbox). 0: the
     * child makes the namespaces and execs inside them. */
    unsigned long sentry_clone_flags;
    /* Traced, the in-place child waits for this (its own copy, in the
     * memory it shares) before it execs, so the front end can see that it
     * shares that memory: the exec no longer waits for "go". */
    int trace_gate;
};

/* A pod's network namespace belongs to the host's user namespace, so no
 * capability of the sandbox's own reaches it: a guest whose config grants
 * CAP_NET_BIND_SERVICE (containerd's default set: nginx as root binds 80)
 * could not bind a port below 1024 at either tier. Host root, in that
 * namespace before the sandbox's user namespace exists, lets every port be
 * bound there instead: the sysctl is the namespace's own, so nothing of the
 * host's changes. Best effort: unwritten, the guest is only refused low ports
 * as before (less than it asked for, never more). */
static bool same_ns(const struct stat *a, const char *path)
{
    struct stat b;
    return stat(path, &b) == 0 && a->st_dev == b.st_dev && a->st_ino == b.st_ino;
}

/* Whether fd is the host's network namespace: the front end's own (it runs
 * in the host's), or pid 1's where the front end may look (it may not once
 * its capabilities are dropped). Unknown counts as the host's. */
static bool is_host_netns(int fd)
{
    struct stat joined;
    return fstat(fd, &joined) < 0 || same_ns(&joined, "/proc/self/ns/net") ||
           same_ns(&joined, "/proc/1/ns/net");
}

static void grant_low_ports(const struct child_args *a)
{
    if (!a->pre_joined[BH_NS_NET] ||
        !(a->spec->process.cap_effective & (1ULL << CAP_NET_BIND_SERVICE)))
        return;
    /* Never the host's own namespace (a config may name it by a bound
     * path): its sysctl would open low ports to every host user. */
    if (a->joins_host_netns)
        return;
    cleanup_close int fd =
        open("/proc/sys/net/ipv4/ip_unprivileged_port_start", O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0)
        (void)!write(fd, "0", 1);
}

#define CHILD_FAIL(...)                                                                            \
    do {                                                                                           \
        bh_msg_send_raw_error(a->sync_fd, BH_ERROR_SETUP, errno, __VA_ARGS__);                     \
        syscall(SYS_exit_group, 125);                                                              \
        __builtin_unreachable();                                                                   \
    } while (0)

static int raw_move_fd(int from, int to, bool cloexec)
{
    if (from == to)
        return (int)syscall(SYS_fcntl, to, F_SETFD, cloexec ? FD_CLOEXEC : 0);
    return (int)syscall(SYS_dup3, from, to, cloexec ? O_CLOEXEC : 0);
}

/* Closes every fd but those in keep (unsorted, -1s ignored): raw syscalls,
 * as between clone and exec. */
static void close_all_but(int *keep, size_t n)
{
    for (size_t i = 1; i < n; i++)
        for (size_t j = i; j > 0 && keep[j - 1] > keep[j]; j--) {
            int t = keep[j];
            keep[j] = keep[j - 1];
            keep[j - 1] = t;
        }
    unsigned lo = 0;
    for (size_t i = 0; i < n; i++) {
        if (keep[i] < 0 || (unsigned)keep[i] < lo)
            continue;
        if ((unsigned)keep[i] > lo)
            syscall(SYS_close_range, lo, (unsigned)keep[i] - 1, 0);
        lo = (unsigned)keep[i] + 1;
    }
    syscall(SYS_close_range, lo, ~0U, 0);
}

/* The child may share the front end's memory (clone_sentry_vm): it
 * allocates nothing, and names errors without strerror's locale lookup. */
#define CHILD_STACK_SIZE (256 * 1024)
static const char *child_strerror(int e)
{
    const char *d = strerrordesc_np(e);
    return d != NULL ? d : "unknown error";
}

static __attribute__((noreturn)) void child_main(struct child_args *a)
{
    /* Named as its creator, not as the helper that cloned it: whoever
     * watches the process tree sees the front end's child as before. */
    if (a->comm[0] != '\0')
        syscall(SYS_prctl, PR_SET_NAME, a->comm, 0, 0, 0);
    /* Hold nothing of the creator's while waiting for it: its end of the
     * sync socket (so its death reads as EOF here and this child exits),
     * its lock on an OCI state directory, the id-slot lock of another
     * sandbox, fds it did not mean to pass on. */
    int keep[10 + BH_NS_COUNT] = {
        0,          1,          2,         a->spec->stdio[0], a->spec->stdio[1], a->spec->stdio[2],
        a->sync_fd, a->slot_fd, a->exe_fd, a->pod_userns_fd};
    for (int i = 0; i < BH_NS_COUNT; i++)
        keep[10 + i] = a->ns_fds[i];
    close_all_but(keep, BH_ARRAY_SIZE(keep));
    bool in_host = a->sentry_clone_flags != 0;
    if (!in_host) {
        char go[64];
        ssize_t n;
        do {
            n = recv(a->sync_fd, go, sizeof(go), 0);
        } while (n < 0 && errno == EINTR);
        if (n <= 0) {
            syscall(SYS_exit_group, 125);
            __builtin_unreachable();
        }
        bh_startup_mark("child: go");
    }
    for (int i = 0; a->child_sets_rlimits && i < BH_USERNS_N_RLIMITS; i++) {
        struct rlimit rl = {a->rlimits[i].soft, a->rlimits[i].hard};
        if (syscall(SYS_prlimit64, 0, a->rlimits[i].resource, &rl, NULL) < 0)
            CHILD_FAIL("lower rlimit %d to the sandbox's ceiling: %s", a->rlimits[i].resource,
                       child_strerror(errno));
    }
    if (in_host && a->child_sets_rlimits) {
        /* In place only the effective ids were the owner's: take them all,
         * so the sentry is not exec'd with a real uid of host root (which
         * would give it a full permitted set). Each id is one we hold. */
        if (syscall(SYS_setresgid, a->owner_gid, a->owner_gid, a->owner_gid) < 0 ||
            syscall(SYS_setresuid, a->owner_uid, a->owner_uid, a->owner_uid) < 0)
            CHILD_FAIL("become host id %u before the sentry's exec: %s", a->owner_uid,
                       child_strerror(errno));
    }
    while (in_host && bh_startup_trace_on && a->child_sets_rlimits &&
           __atomic_load_n(&a->trace_gate, __ATOMIC_ACQUIRE) == 0)
        syscall(SYS_futex, &a->trace_gate, FUTEX_WAIT, 0, NULL, NULL, 0);
    if (in_host) {
        /* The sentry is exec'd here, in the host's user namespace, and
         * makes the sandbox's namespaces itself: root's ids, the session
         * and the time namespace are then its forked child's steps. */
        if (a->owned && syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
            CHILD_FAIL("set the sentry's death signal: %s", child_strerror(errno));
        goto place_fds;
    }
    for (int i = 0; i < BH_NS_COUNT; i++) {
        if (a->ns_fds[i] >= 0 && !a->pre_joined[i] &&
            syscall(SYS_setns, a->ns_fds[i], ns_clone_flag[i]) < 0)
            CHILD_FAIL("join namespace `%s` (namespaces owned by another user namespace can "
                       "not be joined from the sandbox's own)",
                       a->spec->ns_paths[i]);
    }
    gid_t none[1];
    if (syscall(SYS_setgroups, 0, none) < 0 || syscall(SYS_setresgid, 0, 0, 0) < 0 ||
        syscall(SYS_setresuid, 0, 0, 0) < 0)
        CHILD_FAIL("become root of the sandbox's user namespace: %s", child_strerror(errno));
    /* Its own session: a terminal's ^C reaches the front end, which forwards
     * it once, not the sentry as well. */
    if (syscall(SYS_setsid) < 0)
        CHILD_FAIL("new session for the sentry: %s", child_strerror(errno));
    /* Credentials changed, which clears the death signal: set it now. */
    if (a->owned && syscall(SYS_prctl, PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        CHILD_FAIL("set the sentry's death signal: %s", child_strerror(errno));
    /* The cgroup namespace is the sentry's to unshare: the parent joins the
     * cgroup while this child execs it, and sends the spec only after. */
    if (a->ns_fds[BH_NS_TIME] < 0 && syscall(SYS_unshare, CLONE_NEWTIME) < 0)
        CHILD_FAIL("new time namespace for the guests: %s", child_strerror(errno));
place_fds:;
    /* Guest stdio on 0..2 (moved high first so no dup clobbers another),
     * then the sync socket, the id slot lock, the sentry binary and the
     * pod's user namespace (when the sentry joins it). */
    int hi[7];
    int src[7] = {a->spec->stdio[0] >= 0 ? a->spec->stdio[0] : 0,
                  a->spec->stdio[1] >= 0 ? a->spec->stdio[1] : 1,
                  a->spec->stdio[2] >= 0 ? a->spec->stdio[2] : 2,
                  a->sync_fd,
                  a->slot_fd,
                  a->exe_fd,
                  in_host ? a->pod_userns_fd : -1};
    for (int i = 0; i < 7; i++) {
        if (src[i] < 0) {
            hi[i] = -1;
            continue;
        }
        hi[i] = (int)syscall(SYS_fcntl, src[i], F_DUPFD_CLOEXEC, 64);
        if (hi[i] < 0)
            CHILD_FAIL("duplicate fd %d for the sentry: %s", src[i], child_strerror(errno));
    }
    for (int i = 0; i < 7; i++) {
        if (hi[i] < 0) {
            if (i < 3)
                CHILD_FAIL("stdio fd %d is not open", i);
            continue;
        }
        if (raw_move_fd(hi[i], i, i == SENTRY_EXE_FD) < 0)
            CHILD_FAIL("place fd %d for the sentry: %s", i, child_strerror(errno));
    }
    a->sync_fd = SENTRY_SYNC_FD;
    if (syscall(SYS_close_range, SENTRY_POD_USERNS_FD + 1, ~0U, 0) < 0)
        CHILD_FAIL("close the front end's fds: %s", child_strerror(errno));
    char sync_arg[32], slot_arg[32], fork_arg[64];
    snprintf(sync_arg, sizeof(sync_arg), "--sync-fd=%d", SENTRY_SYNC_FD);
    snprintf(slot_arg, sizeof(slot_arg), "--slot-fd=%d", hi[4] >= 0 ? SENTRY_SLOT_FD : -1);
    snprintf(fork_arg, sizeof(fork_arg), "--fork=%lu,%d,%d,%d", a->sentry_clone_flags, a->owned,
             a->ns_fds[BH_NS_TIME] < 0, hi[6] >= 0 ? SENTRY_POD_USERNS_FD : -1);
    char *argv[] = {"bulkhead-sentry", sync_arg, slot_arg, in_host ? fork_arg : NULL, NULL};
    char *envp[] = {NULL};
    bh_startup_mark("child: execveat the sentry");
    syscall(SYS_execveat, SENTRY_EXE_FD, "", argv, envp, AT_EMPTY_PATH);
    CHILD_FAIL("execute bulkhead-sentry: %s", child_strerror(errno));
    __builtin_unreachable();
}

static int child_entry(void *arg)
{
    child_main(arg);
}

/* The in-place clone shares the front end's memory (CLONE_VM, as
 * posix_spawn does) instead of copying its page tables, which the sentry's
 * exec throws away again: about 50 page faults fewer, most of them the
 * front end's own copy-on-write after the clone. The child runs on a stack
 * of its own with its own copy of the arguments, allocates nothing and
 * writes no memory but those. From "go" to its exec it runs beside the
 * front end, which only makes the cgroup then; glibc's errno is the one
 * thing they share, so a call failing in one may lend its errno to the
 * other's error message, never to a success check. The stack is released
 * once the sentry's first message proves the exec (or the child is dead).
 * Only on the in-place path: no namespace is joined (joining a time
 * namespace refuses a shared address space), and the helper is a fork. */
static pid_t clone_sentry_vm(unsigned long flags, struct child_args *a, int *pidfd, void **stack)
{
    size_t size = CHILD_STACK_SIZE;
    char *base =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (base == MAP_FAILED)
        return -1;
    struct child_args *copy = (struct child_args *)(base + size - sizeof(*copy));
    *copy = *a;
    char *top = (char *)((uintptr_t)copy & ~(uintptr_t)63);
    pid_t pid =
        clone(child_entry, top, (int)(flags | CLONE_VM | CLONE_PIDFD) | SIGCHLD, copy, pidfd);
    if (pid < 0) {
        int e = errno;
        munmap(base, size);
        errno = e;
        return -1;
    }
    *stack = base;
    return pid;
}

/* clone3 with a pidfd; fork-like (no new stack), the child never returns. */
static pid_t clone_sentry(unsigned long flags, struct child_args *a, int *pidfd)
{
    struct clone_args ca = {0};
    ca.flags = flags | CLONE_PIDFD;
    ca.pidfd = (uint64_t)(uintptr_t)pidfd;
    /* clone3 wants no exit signal with CLONE_PARENT: the child takes the
     * cloner's (SIGCHLD, the helper was forked). */
    ca.exit_signal = (flags & CLONE_PARENT) ? 0 : SIGCHLD;
    long pid = syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid == 0)
        child_main(a);
    return (pid_t)pid;
}

/* ---- compiled policies ------------------------------------------------------
 * Compiling a policy with libseccomp costs milliseconds, more than the rest of
 * a sandbox's creation, so the front end compiles once and keeps the BPF: in
 * memory for this process (bulkheadd), and on disk in BH_BPF_CACHE_DIR (root
 * only) for short-lived front ends (bulkhead do). The key is a SHA-256 over
 * the libseccomp version, the policy's path and the name and contents of
 * every policy in its directory (so an @include'd file changing misses too).
 * The sentry gets the programs as sealed memfds: it never parses policy text. */
#define BH_BPF_CACHE_DIR "/run/bulkhead/bpf-cache"
#define BPF_MAGIC "BHBPF1\n"

struct bpf_blob {
    bool has_notify;
    struct sock_fprog prog;
};

/* The directory of a policy path ("." without a slash). */
static void policy_dir(const char *path, char *dir, size_t size)
{
    snprintf(dir, size, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash != NULL)
        *slash = '\0';
    else
        snprintf(dir, size, ".");
}

/* SHA-256 of the name and contents of every *.policy in dir, so an
 * @include'd file changing changes every key. The guest's and the sentry's
 * policies share a directory: policy_fds reads it once for both. */
static int policy_dir_digest(const char *dir, uint8_t out[BH_SHA256_LEN], struct bh_error *err)
{
    struct bh_sha256 h;
    bh_sha256_init(&h);
    struct dirent **names = NULL;
    int n = scandir(dir, &names, NULL, alphasort);
    if (n < 0)
        return bh_error_errno(err, errno, "list policies in `%s`", dir);
    int rc = 0;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]->d_name);
        if (rc == 0 && len > 7 && strcmp(names[i]->d_name + len - 7, ".policy") == 0) {
            char file[4400];
            snprintf(file, sizeof(file), "%s/%s", dir, names[i]->d_name);
            cleanup_close int fd = open(file, O_RDONLY | O_CLOEXEC);
            char buf[16384];
            ssize_t r;
            bh_sha256_update(&h, names[i]->d_name, len + 1);
            while (fd >= 0 && (r = read(fd, buf, sizeof(buf))) > 0)
                bh_sha256_update(&h, buf, (size_t)r);
            if (fd < 0)
                rc = bh_error_errno(err, errno, "read `%s`", file);
        }
        free(names[i]);
    }
    free(names);
    bh_sha256_final(&h, out);
    return rc;
}

/* The cache key of the policy at path: the libseccomp version, the path and
 * its directory's digest. */
static void policy_key(const char *path, const uint8_t dir_digest[BH_SHA256_LEN],
                       char key[BH_SHA256_HEX])
{
    struct bh_sha256 h;
    bh_sha256_init(&h);
    const struct scmp_version *v = seccomp_version();
    char head[64];
    snprintf(head, sizeof(head), "%s%u.%u.%u\n", BPF_MAGIC, v ? v->major : 0, v ? v->minor : 0,
             v ? v->micro : 0);
    bh_sha256_update(&h, head, strlen(head));
    bh_sha256_update(&h, path, strlen(path) + 1);
    bh_sha256_update(&h, dir_digest, BH_SHA256_LEN);
    uint8_t sum[BH_SHA256_LEN];
    bh_sha256_final(&h, sum);
    bh_hex(sum, sizeof(sum), key);
}

/* A blob as it is stored and sent: magic, notify flag, then the program. */
static int blob_fd(const struct bpf_blob *b, struct bh_error *err)
{
    int fd = memfd_create("bulkhead-bpf", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return bh_error_errno(err, errno, "memfd for a seccomp program");
    char head[16] = BPF_MAGIC;
    head[8] = b->has_notify ? 1 : 0;
    if (bh_write_full(fd, head, sizeof(head), err) < 0 ||
        bh_write_full(fd, b->prog.filter, b->prog.len * sizeof(struct sock_filter), err) < 0) {
        close(fd);
        return -1;
    }
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return fd;
}

int bh_bpf_blob_read(int fd, bool *has_notify, struct sock_fprog *prog, struct bh_error *err)
{
    struct stat st;
    char head[16];
    if (fstat(fd, &st) < 0 || st.st_size < 16 ||
        (st.st_size - 16) % (off_t)sizeof(struct sock_filter) != 0 ||
        (st.st_size - 16) / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS ||
        pread(fd, head, sizeof(head), 0) != sizeof(head) || memcmp(head, BPF_MAGIC, 7) != 0 ||
        (head[8] != 0 && head[8] != 1))
        return bh_error_set(err, EPROTO, "a compiled seccomp program is malformed");
    size_t n = (size_t)(st.st_size - 16) / sizeof(struct sock_filter);
    struct sock_filter *f = malloc(n * sizeof(*f));
    if (f == NULL || pread(fd, f, n * sizeof(*f), 16) != (ssize_t)(n * sizeof(*f))) {
        free(f);
        return bh_error_errno(err, errno ? errno : EIO, "read a compiled seccomp program");
    }
    *has_notify = head[8] == 1;
    prog->len = (unsigned short)n;
    prog->filter = f;
    return 0;
}

static pthread_mutex_t bpf_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[BH_SHA256_HEX];
    struct bpf_blob blob;
} bpf_mem[8];
static size_t bpf_mem_n;

static int blob_copy(const struct bpf_blob *in, struct bpf_blob *out)
{
    out->has_notify = in->has_notify;
    out->prog.len = in->prog.len;
    out->prog.filter = malloc(in->prog.len * sizeof(struct sock_filter));
    if (out->prog.filter == NULL)
        return -1;
    memcpy(out->prog.filter, in->prog.filter, in->prog.len * sizeof(struct sock_filter));
    return 0;
}

static void disk_store(const char *key, const struct bpf_blob *b)
{
    if (mkdir("/run/bulkhead", 0700) < 0 && errno != EEXIST)
        return;
    if (mkdir(BH_BPF_CACHE_DIR, 0700) < 0 && errno != EEXIST)
        return;
    struct bh_error e = {0};
    cleanup_close int mfd = blob_fd(b, &e);
    if (mfd < 0)
        return;
    char tmp[300], final[256];
    snprintf(final, sizeof(final), BH_BPF_CACHE_DIR "/%s.bpf", key);
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", final, getpid());
    cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    char buf[65536];
    ssize_t r;
    off_t off = 0;
    bool ok = true;
    while ((r = pread(mfd, buf, sizeof(buf), off)) > 0) {
        ok = ok && write(fd, buf, (size_t)r) == r;
        off += r;
    }
    if (!ok || rename(tmp, final) < 0)
        unlink(tmp);
}

static int disk_load(const char *key, struct bpf_blob *b)
{
    char path[256];
    snprintf(path, sizeof(path), BH_BPF_CACHE_DIR "/%s.bpf", key);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    /* Only a root-owned file no one else may write is trusted. */
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != 0 || (st.st_mode & 022) != 0)
        return -1;
    struct bh_error e = {0};
    return bh_bpf_blob_read(fd, &b->has_notify, &b->prog, &e);
}

/* The compiled program of the policy at path; out->prog.filter is malloc'd. */
static int policy_program(const char *path, const uint8_t dir_digest[BH_SHA256_LEN],
                          struct bpf_blob *out, struct bh_error *err)
{
    char key[BH_SHA256_HEX];
    policy_key(path, dir_digest, key);
    pthread_mutex_lock(&bpf_lock);
    for (size_t i = 0; i < bpf_mem_n; i++) {
        if (strcmp(bpf_mem[i].key, key) == 0) {
            int r = blob_copy(&bpf_mem[i].blob, out);
            pthread_mutex_unlock(&bpf_lock);
            return r < 0 ? bh_error_errno(err, ENOMEM, "seccomp program") : 0;
        }
    }
    pthread_mutex_unlock(&bpf_lock);
    if (disk_load(key, out) < 0) {
        struct bh_policy *pol = NULL;
        if (bh_policy_load(path, &pol, err) < 0)
            return -1;
        out->has_notify = bh_policy_has_notify(pol);
        int r = bh_policy_compile(pol, &out->prog, err);
        bh_policy_free(pol);
        if (r < 0)
            return -1;
        if (geteuid() == 0)
            disk_store(key, out);
    }
    pthread_mutex_lock(&bpf_lock);
    if (bpf_mem_n < BH_ARRAY_SIZE(bpf_mem)) {
        snprintf(bpf_mem[bpf_mem_n].key, BH_SHA256_HEX, "%s", key);
        if (blob_copy(out, &bpf_mem[bpf_mem_n].blob) == 0)
            bpf_mem_n++;
    }
    pthread_mutex_unlock(&bpf_lock);
    return 0;
}

/* Guest, sentry and (optional) caller programs as memfds, checked against the
 * tier: the kernel tier must broker something, the container tier nothing. */
static int policy_fds(const struct bh_sandbox_spec *spec, const char *guest_path,
                      const char *sentry_path, int fds[3], struct bh_error *err)
{
    fds[0] = fds[1] = fds[2] = -1;
    char gdir[4096], sdir[4096];
    uint8_t gsum[BH_SHA256_LEN], ssum[BH_SHA256_LEN];
    policy_dir(guest_path, gdir, sizeof(gdir));
    policy_dir(sentry_path, sdir, sizeof(sdir));
    if (policy_dir_digest(gdir, gsum, err) < 0)
        return bh_error_prefix(err, "seccomp policy of the %s tier", bh_tier_name(spec->tier));
    if (strcmp(gdir, sdir) == 0)
        memcpy(ssum, gsum, sizeof(ssum));
    else if (policy_dir_digest(sdir, ssum, err) < 0)
        return bh_error_prefix(err, "the sentry's own seccomp policy");
    struct bpf_blob g = {0}, s = {0};
    if (policy_program(guest_path, gsum, &g, err) < 0)
        return bh_error_prefix(err, "seccomp policy of the %s tier", bh_tier_name(spec->tier));
    int rc = -1;
    if (spec->tier == BH_TIER_KERNEL && !g.has_notify) {
        bh_error_set(err, EINVAL,
                     "the kernel tier's policy `%s` brokers no syscall: refused, the kernel "
                     "tier needs the sentry to check arguments",
                     guest_path);
        goto out;
    }
    /* The container tier's notifies io_setup alone (aio-cap.c counts it). */
    if (spec->tier < BH_TIER_CONTAINER && g.has_notify) {
        bh_error_set(err, EINVAL,
                     "policy `%s` sends syscalls to the sentry, which only the container "
                     "(io_setup) and kernel tiers serve",
                     guest_path);
        goto out;
    }
    if (policy_program(sentry_path, ssum, &s, err) < 0) {
        bh_error_prefix(err, "the sentry's own seccomp policy");
        goto out;
    }
    if (s.has_notify) {
        bh_error_set(err, EINVAL, "the sentry's policy `%s` may not notify", sentry_path);
        goto out;
    }
    if ((fds[0] = blob_fd(&g, err)) < 0 || (fds[1] = blob_fd(&s, err)) < 0)
        goto out;
    if (spec->extra_policy_text != NULL) {
        struct bh_policy *pol = NULL;
        struct bpf_blob x = {0};
        if (bh_policy_parse_stacked(spec->extra_policy_text, "caller's seccomp profile", &pol,
                                    err) < 0)
            goto out;
        x.has_notify = bh_policy_has_notify(pol);
        int r = 0;
        if (x.has_notify && !spec->extra_policy_listener)
            r = bh_error_set(err, EINVAL, "the caller's seccomp profile may only take away");
        else if (x.has_notify && spec->tier >= BH_TIER_KERNEL)
            r = bh_error_set(err, ENOTSUP,
                             "the caller's seccomp profile sends syscalls to its own agent: "
                             "refused at the kernel tier, whose one notification listener is "
                             "the sentry's broker");
        else
            r = bh_policy_compile(pol, &x.prog, err);
        bh_policy_free(pol);
        if (r < 0)
            goto out;
        fds[2] = blob_fd(&x, err);
        bh_policy_prog_free(&x.prog);
        if (fds[2] < 0)
            goto out;
    }
    rc = 0;
out:
    bh_policy_prog_free(&g.prog);
    bh_policy_prog_free(&s.prog);
    if (rc < 0)
        for (int i = 0; i < 3; i++)
            if (fds[i] >= 0)
                close(fds[i]);
    return rc;
}

/* ---- create ------------------------------------------------------------- */

static void unlink_control_socket(const char *state_dir)
{
    char path[4200];
    snprintf(path, sizeof(path), "%s/sentry.sock", state_dir);
    unlink(path);
}

static int connect_console_socket(const char *path, struct bh_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", path) >= (int)sizeof(addr.sun_path))
        return bh_error_set(err, ENAMETOOLONG, "console socket path `%s` is too long", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return bh_error_errno(err, e, "connect to the console socket `%s`", path);
    }
    return fd;
}

static int bind_control_socket(const char *state_dir, struct bh_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/sentry.sock", state_dir) >=
        (int)sizeof(addr.sun_path))
        return bh_error_set(err, ENAMETOOLONG, "state directory `%s` is too long for a socket",
                            state_dir);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "control socket");
    unlink(addr.sun_path);
    mode_t old = umask(0077);
    int r = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    umask(old);
    /* The sentry calls listen(): SO_PEERCRED then names it to clients. */
    if (r < 0) {
        int e = errno;
        close(fd);
        return bh_error_errno(err, e, "bind the control socket `%s`", addr.sun_path);
    }
    return fd;
}

/* The spec's JSON as a sealed memfd, in fds' spec slot; the prepared trees
 * (the spec's, the device nodes, a joined netns's sysfs, the rootfs last) go
 * into fds' tree slots, which the JSON names by index. *rootfs_tree is the
 * rootfs's index, or -1. */
static int make_spec_memfd(const struct bh_sandbox_spec *spec, const struct bh_sentry_params *p,
                           bool start, int sysfs_fd, int dev_tree, struct bh_spec_fds *fds,
                           int *rootfs_tree, struct bh_error *err)
{
    json_t *o = bh_spec_to_json(spec);
    json_t *mounts = json_object_get(o, "mounts");
    *rootfs_tree = -1;
    for (size_t i = 0; i < spec->n_mounts; i++) {
        if (!spec->mounts[i].has_tree_fd)
            continue;
        int k = bh_spec_fds_add_tree(fds, spec->mounts[i].tree_fd, err);
        if (k < 0) {
            json_decref(o);
            return -1;
        }
        json_object_set_new(json_array_get(mounts, i), "tree_fd_index", json_integer(k));
    }
    /* The sandbox's own device nodes (mounts.h), before the rootfs. */
    int k = bh_spec_fds_add_tree(fds, dev_tree, err);
    if (k < 0) {
        json_decref(o);
        return -1;
    }
    json_object_set_new(o, "dev_tree_fd_index", json_integer(k));
    if (sysfs_fd >= 0) {
        if ((k = bh_spec_fds_add_tree(fds, sysfs_fd, err)) < 0) {
            json_decref(o);
            return -1;
        }
        json_object_set_new(o, "sysfs_tree_fd_index", json_integer(k));
    }
    if (spec->has_rootfs_tree_fd) {
        if ((k = bh_spec_fds_add_tree(fds, spec->rootfs_tree_fd, err)) < 0) {
            json_decref(o);
            return -1;
        }
        json_object_set_new(o, "rootfs_tree_fd_index", json_integer(k));
        *rootfs_tree = k;
    }
    json_object_set_new(
        o, "params",
        json_pack("{s:b,s:b,s:b,s:s*,s:b,s:b,s:I,s:I,s:b,s:b,s:b}", "trace", bh_startup_trace_on,
                  "start", start, "detached", p->detached, "state_dir", p->state_dir,
                  "extra_policy", p->has_extra_policy, "console", p->has_console, "sentry_uid",
                  (json_int_t)p->sentry_uid, "sentry_gid", (json_int_t)p->sentry_gid, "made_netns",
                  p->made_netns, "made_utsns", p->made_utsns, "joined_pidns", p->joined_pidns));
    if (p->pause_mounted)
        json_object_set_new(json_object_get(o, "params"), "pause_mounted", json_true());
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (text == NULL)
        return bh_error_set(err, ENOMEM, "encode the spec");
    size_t len = strlen(text);
    int fd = memfd_create("bulkhead-spec", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) {
        free(text);
        return bh_error_errno(err, errno, "memfd for the spec");
    }
    if (bh_write_full(fd, text, len, err) < 0) {
        free(text);
        close(fd);
        return -1;
    }
    free(text);
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    fds->slot[BH_SPEC_FD_SPEC] = fd;
    return fd;
}

static void kill_and_reap(struct bh_sandbox *sb)
{
    if (sb->pidfd >= 0)
        syscall(SYS_pidfd_send_signal, sb->pidfd, SIGKILL, NULL, 0);
    if (!sb->detached && !sb->reaped && sb->pid > 0) {
        int st;
        while (waitpid(sb->pid, &st, 0) < 0 && errno == EINTR)
            ;
        sb->reaped = true;
    } else if (sb->pidfd >= 0) {
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        poll(&p, 1, 5000);
    }
}

static void release_child_stack(struct bh_sandbox *sb)
{
    if (sb->child_stack != NULL)
        munmap(sb->child_stack, CHILD_STACK_SIZE);
    sb->child_stack = NULL;
}

static void sandbox_free(struct bh_sandbox *sb)
{
    release_child_stack(sb);
    if (sb->conn.fd >= 0)
        close(sb->conn.fd);
    if (sb->pidfd >= 0)
        close(sb->pidfd);
    bh_id_slot_release(&sb->slot);
    free(sb->state_dir);
    free(sb);
}

static void cleanup_cgroup(struct bh_sandbox *sb)
{
    if (sb->cg == NULL)
        return;
    struct bh_error e = {0};
    bh_cgroup_destroy(sb->cg, &e);
    sb->cg = NULL;
}

/* The helper's last steps before it clones (raw syscalls: it is the fork of
 * a possibly multi-threaded caller). The rlimits first, while it is still
 * host root and may raise a hard limit; then the owner's ids. Returns 0 or
 * an errno. */
static int become_owner(const struct child_args *a)
{
    for (int i = 0; i < BH_USERNS_N_RLIMITS; i++) {
        struct rlimit rl = {a->rlimits[i].soft, a->rlimits[i].hard};
        if (syscall(SYS_prlimit64, 0, a->rlimits[i].resource, &rl, NULL) < 0)
            return errno;
    }
    if (!a->as_owner)
        return 0;
    gid_t none[1];
    if (syscall(SYS_setgroups, 0, none) < 0 ||
        syscall(SYS_setresgid, a->owner_gid, a->owner_gid, a->owner_gid) < 0 ||
        syscall(SYS_setresuid, a->owner_uid, a->owner_uid, a->owner_uid) < 0)
        return errno;
    return 0;
}

/* Every sandbox with a user namespace of its own, and sandboxes that join
 * host-owned namespaces: an intermediate process joins those namespaces as
 * host root (so the sandbox's user namespace is made inside them), becomes
 * the slot's unprivileged host id (become_owner), then clones the sentry.
 * Detached, it exits and the sentry is re-parented to the caller's
 * subreaper, so no process of the runtime stays its parent; otherwise it
 * clones with CLONE_PARENT, so the sentry is the caller's child as with a
 * direct clone. The pidfd comes back over a socketpair. */
static pid_t clone_via_helper(unsigned long flags, struct child_args *a, bool detached, int *pidfd,
                              struct bh_error *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return bh_error_errno(err, errno, "socketpair");
    /* The helper is born with a name of its own (this thread's, changed
     * around the fork): a process-tree watcher (a test, a supervisor) must
     * never mistake the short-lived helper for the sentry. */
    prctl(PR_GET_NAME, a->comm, 0, 0, 0);
    prctl(PR_SET_NAME, "bulkhead-userns", 0, 0, 0);
    pid_t mid = fork();
    if (mid != 0)
        prctl(PR_SET_NAME, a->comm, 0, 0, 0);
    if (mid < 0) {
        close(sv[0]);
        close(sv[1]);
        return bh_error_errno(err, errno, "fork");
    }
    if (mid == 0) {
        bh_startup_mark("helper: forked");
        close(sv[0]);
        int fd = -1;
        int reply[2] = {0, -1}; /* errno, namespace that failed */
        for (int i = 0; i < BH_NS_COUNT && reply[0] == 0; i++) {
            if (a->pre_joined[i] && syscall(SYS_setns, a->ns_fds[i], ns_clone_flag[i]) < 0) {
                reply[0] = errno;
                reply[1] = i;
            }
        }
        if (reply[0] == 0)
            grant_low_ports(a);
        if (reply[0] == 0 && (reply[0] = become_owner(a)) != 0)
            reply[1] = -2;
        if (reply[0] == 0 && a->pod_userns_fd >= 0 && a->sentry_clone_flags == 0 &&
            syscall(SYS_setns, a->pod_userns_fd, CLONE_NEWUSER) < 0) {
            reply[0] = errno;
            reply[1] = BH_NS_COUNT;
        }
        pid_t pid = -1;
        if (reply[0] == 0) {
            bh_startup_mark("helper: owner's ids");
            pid = clone_sentry(flags | (detached ? 0 : CLONE_PARENT), a, &fd);
            if (pid < 0)
                reply[0] = errno;
            bh_startup_mark("helper: cloned");
        }
        if (pid < 0)
            bh_send_fds(sv[1], reply, sizeof(reply), NULL, 0, NULL);
        else
            bh_send_fds(sv[1], &pid, sizeof(pid), &fd, 1, NULL);
        _exit(0);
    }
    close(sv[1]);
    union {
        pid_t pid;
        int reply[2];
    } u = {.reply = {0, -1}};
    int fd = -1;
    size_t n = 0;
    ssize_t r = bh_recv_fds(sv[0], &u, sizeof(u), &fd, 1, &n, err);
    close(sv[0]);
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (r == sizeof(pid_t) && n == 1) {
        *pidfd = fd;
        return u.pid;
    }
    if (n == 1)
        close(fd);
    if (r == sizeof(u.reply) && u.reply[1] >= 0 && u.reply[1] < BH_NS_COUNT)
        return bh_error_errno(err, u.reply[0], "join namespace `%s`",
                              a->spec->ns_paths[u.reply[1]]);
    if (r == sizeof(u.reply) && u.reply[1] == BH_NS_COUNT)
        return bh_error_errno(err, u.reply[0], "join the pod's user namespace");
    if (r == sizeof(u.reply) && u.reply[1] == -2)
        return bh_error_errno(err, u.reply[0],
                              "become host id %u (the owner of the sandbox's user namespace, "
                              "charged with its per-user kernel counters) with its rlimits",
                              a->owner_uid);
    return bh_error_errno(err, r == sizeof(u.reply) ? u.reply[0] : EPROTO,
                          "clone the sandbox's namespaces");
}

/* Whether this process has one thread: the only one could start another,
 * so the answer holds until this thread acts on it. */
static bool single_threaded(void)
{
    DIR *d = opendir("/proc/self/task");
    if (d == NULL)
        return false;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < 2)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n == 1;
}

/* The helper's job without the helper, for a single-threaded caller that
 * joins nothing and stays attached (bulkhead do): one fork and two process
 * hand-offs fewer on the start-up path (sentry/README.md, "Speed"). The
 * user namespace's owner is the creator's euid/egid, and credentials are
 * per thread under raw syscalls, so this thread takes the owner's as its
 * effective ids for the clone alone, keeping real and saved root to return
 * to; the rlimits the new namespace copies are the process's, set around
 * the clone and put back (no other thread shares them). The child is then
 * this process's own child, as with a plain clone; it leaves the host's ids
 * before "go" as in every sandbox (child_main). Returns the pid, or -1 with
 * err set and this thread's ids and limits as they were. */
static pid_t clone_as_owner(unsigned long flags, struct child_args *a, int *pidfd, void **stack,
                            struct bh_error *err)
{
    struct rlimit saved[BH_USERNS_N_RLIMITS];
    for (int i = 0; i < BH_USERNS_N_RLIMITS; i++)
        if (getrlimit(a->rlimits[i].resource, &saved[i]) < 0)
            return bh_error_errno(err, errno, "read rlimit %d", a->rlimits[i].resource);
    uid_t euid = geteuid();
    gid_t egid = getegid();
    int dumpable = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    int set = 0, e = 0;
    const char *what = NULL;
    for (; set < BH_USERNS_N_RLIMITS; set++) {
        /* The namespace copies the soft limits; the hard ones stay ours, so
         * putting the soft ones back needs no privilege (this host's root
         * may lack CAP_SYS_RESOURCE), and the child lowers its own. */
        struct rlimit rl = {a->rlimits[set].soft, saved[set].rlim_max};
        if (setrlimit(a->rlimits[set].resource, &rl) < 0) {
            e = errno;
            what = "set the sandbox's rlimit ceilings";
            break;
        }
    }
    pid_t pid = -1;
    if (e == 0 && syscall(SYS_setresgid, -1, a->owner_gid, -1) < 0) {
        e = errno;
        what = "take the owner's gid";
    } else if (e == 0 && syscall(SYS_setresuid, -1, a->owner_uid, -1) < 0) {
        e = errno;
        what = "take the owner's uid";
        syscall(SYS_setresgid, -1, egid, -1);
    } else if (e == 0) {
        pid = clone_sentry_vm(flags, a, pidfd, stack);
        if (pid < 0) {
            e = errno;
            what = "clone the sandbox's namespaces";
        }
        /* Back to root: real and saved ids stayed 0, so these cannot fail
         * short of a kernel bug, which must not leave us half-switched. */
        if (syscall(SYS_setresuid, -1, euid, -1) < 0 || syscall(SYS_setresgid, -1, egid, -1) < 0)
            abort();
    }
    for (int i = 0; i < set; i++)
        setrlimit(a->rlimits[i].resource, &saved[i]);
    /* A change of euid made the process non-dumpable; it was not before. */
    if (dumpable > 0)
        prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0);
    if (pid < 0)
        return bh_error_errno(err, e, "%s (host id %u, the owner of the sandbox's user namespace)",
                              what, a->owner_uid);
    return pid;
}

/* A joined network namespace the host owns (a CRI's pod netns) lets no
 * sandbox mount sysfs for it (the kernel wants CAP_SYS_ADMIN over the
 * namespace's owner), and the host's own /sys would show the host's
 * interfaces. So host root makes the sysfs here, inside that namespace, as
 * a detached read-only mount that the sentry attaches: the same view a
 * sandbox with its own netns has. -1 (and no error) when the sandbox can
 * mount sysfs itself: no joined netns, or one its user namespace owns. */
static int joined_netns_sysfs(const char *netns_path, struct bh_error *err)
{
    if (netns_path == NULL)
        return -1;
    cleanup_close int ns = open(netns_path, O_RDONLY | O_CLOEXEC);
    if (ns < 0)
        return bh_error_errno(err, errno, "open namespace `%s`", netns_path);
    cleanup_close int owner = ioctl(ns, NS_GET_USERNS);
    struct stat o, h;
    if (owner < 0 || fstat(owner, &o) < 0 || stat("/proc/self/ns/user", &h) < 0)
        return bh_error_errno(err, errno, "the user namespace that owns `%s`", netns_path);
    if (o.st_dev != h.st_dev || o.st_ino != h.st_ino)
        return -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return bh_error_errno(err, errno, "socketpair");
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return bh_error_errno(err, errno, "fork");
    }
    if (pid == 0) {
        /* sysfs takes its network view from the namespace of whoever opens it. */
        int e = 0, fs = -1, mnt = -1;
        if (syscall(SYS_setns, ns, CLONE_NEWNET) < 0 ||
            (fs = (int)syscall(SYS_fsopen, "sysfs", FSOPEN_CLOEXEC)) < 0 ||
            syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0 ||
            (mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC,
                                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                    MOUNT_ATTR_NOEXEC)) < 0)
            e = errno;
        if (e != 0)
            bh_send_fds(sv[1], &e, sizeof(e), NULL, 0, NULL);
        else
            bh_send_fds(sv[1], &e, sizeof(e), &mnt, 1, NULL);
        _exit(0);
    }
    close(sv[1]);
    int e = EPROTO, fd = -1;
    size_t n = 0;
    ssize_t r = bh_recv_fds(sv[0], &e, sizeof(e), &fd, 1, &n, err);
    close(sv[0]);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (r == sizeof(e) && e == 0 && n == 1)
        return fd;
    if (n == 1)
        close(fd);
    return bh_error_errno(err, r == sizeof(e) ? e : EPROTO,
                          "mount a sysfs for the joined network namespace `%s`", netns_path);
}

static bool want_idmap(const struct bh_sandbox_spec *spec)
{
    if (spec->idmap_rootfs && spec->has_rootfs_tree_fd)
        return true;
    for (size_t i = 0; i < spec->n_mounts; i++)
        if (spec->mounts[i].idmap && spec->mounts[i].has_tree_fd)
            return true;
    return false;
}

/* ---- create, step by step -------------------------------------------------
 * What bh_sandbox_create holds while it builds a sandbox. create_ctx_release
 * frees whatever is still held, whatever the outcome; a step that hands a
 * resource on steals it from here. */
struct create_ctx {
    const struct bh_sandbox_spec *spec;
    const struct bh_create_opts *opts;
    bool detached;
    bool own_userns; /* no user namespace path in the spec */
    bool in_pod;     /* joins a pod's user namespace (pod.userns_fd) */
    struct bh_sentry_params params;
    char sentry_path[4096], guest_policy[4096], sentry_policy[4096];
    int exe_fd;
    struct bh_sandbox *sb;
    struct bh_pod_userns pod;
    struct bh_idmap *uid_maps, *gid_maps;
    size_t n_uid, n_gid;
    int sysfs_fd;
    int child_sync;    /* the sentry's end of the sync socket, until the clone */
    bool sentry_forks; /* exec'd in the host's user namespace (second wall) */
    bool sentry_taken; /* its forked child's pidfd is sb->pidfd */
    /* Owned here: the programs, the listen and console sockets, the spec
     * memfd, the device tree and an idmapped rootfs. Borrowed: the spec's
     * own trees and sysfs_fd. */
    struct bh_spec_fds fds;
    int dev_tree, idmapped_rootfs;
    int rootfs_tree; /* index of the rootfs in fds.tree, or -1 */
};

static void create_ctx_release(struct create_ctx *c)
{
    static const int owned[] = {BH_SPEC_FD_SPEC,      BH_SPEC_FD_GUEST_BPF, BH_SPEC_FD_SENTRY_BPF,
                                BH_SPEC_FD_EXTRA_BPF, BH_SPEC_FD_LISTEN,    BH_SPEC_FD_CONSOLE};
    for (size_t i = 0; i < BH_ARRAY_SIZE(owned); i++)
        bh_closep(&c->fds.slot[owned[i]]);
    bh_closep(&c->dev_tree);
    bh_closep(&c->idmapped_rootfs);
    bh_closep(&c->child_sync);
    bh_closep(&c->sysfs_fd);
    bh_closep(&c->exe_fd);
    free(c->uid_maps);
    free(c->gid_maps);
    bh_pod_userns_free(&c->pod);
}

/* The sentry binary and the two policies (the tier's, the sentry's own). */
static int create_find_files(struct create_ctx *c, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = c->spec;
    if (bh_path_find("bulkhead-sentry", c->sentry_path, sizeof(c->sentry_path), err) < 0)
        return -1;
    if (spec->seccomp_policy != NULL)
        snprintf(c->guest_policy, sizeof(c->guest_policy), "%s", spec->seccomp_policy);
    else if (bh_path_policy(bh_tier_name(spec->tier), c->guest_policy, sizeof(c->guest_policy),
                            err) < 0)
        return bh_error_prefix(err, "seccomp policy of the %s tier", bh_tier_name(spec->tier));
    if (bh_path_policy("sentry", c->sentry_policy, sizeof(c->sentry_policy), err) < 0)
        return bh_error_prefix(err, "the sentry's own seccomp policy");
    c->exe_fd = open(c->sentry_path, O_PATH | O_CLOEXEC);
    if (c->exe_fd < 0)
        return bh_error_errno(err, errno, "open `%s`", c->sentry_path);
    return 0;
}

static struct bh_sandbox *sandbox_new(bool detached)
{
    struct bh_sandbox *sb = calloc(1, sizeof(*sb));
    if (sb == NULL)
        return NULL;
    sb->pid = -1;
    sb->pidfd = -1;
    sb->conn.fd = -1;
    sb->conn.owned = true;
    sb->slot.lock_fd = -1;
    sb->detached = detached;
    return sb;
}

/* The sandbox's ids: a pod's (its user namespace and maps, its slot's lock),
 * or a slot of its own and the maps it implies; and the sysfs a joined
 * host-owned netns needs. */
static int create_ids(struct create_ctx *c, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = c->spec;
    struct bh_sandbox *sb = c->sb;
    /* A pod's sandbox joins the user namespace owning its joined namespaces
     * (sentry/README.md, joined namespaces); its ids are the pod's. */
    if (c->own_userns && bh_pod_userns_find(spec, &c->pod, err) < 0)
        return -1;
    c->in_pod = c->pod.userns_fd >= 0;
    if (c->in_pod) {
        if (spec->n_uid_maps > 0 || spec->n_gid_maps > 0)
            return bh_error_set(err, EINVAL,
                                "id maps were given, but the joined namespaces belong to another "
                                "sandbox's user namespace, whose maps are fixed: refused");
        sb->slot = c->pod.slot;
        c->pod.slot.lock_fd = -1;
        c->uid_maps = steal_pointer(&c->pod.uid);
        c->gid_maps = steal_pointer(&c->pod.gid);
        c->n_uid = c->pod.n_uid;
        c->n_gid = c->pod.n_gid;
    } else {
        if (c->own_userns && spec->n_uid_maps == 0 && bh_id_slot_acquire(&sb->slot, err) < 0)
            return -1;
        if (c->own_userns && bh_idmaps_resolve(spec, &sb->slot, &c->uid_maps, &c->n_uid,
                                               &c->gid_maps, &c->n_gid, err) < 0)
            return -1;
    }
    struct bh_error sysfs_err = {0};
    c->sysfs_fd = joined_netns_sysfs(spec->ns_paths[BH_NS_NET], &sysfs_err);
    if (c->sysfs_fd < 0 && sysfs_err.code != 0) {
        *err = sysfs_err;
        return -1;
    }
    c->params.sentry_uid = c->own_userns ? bh_idmaps_sentry_id(c->uid_maps, c->n_uid) : 0;
    c->params.sentry_gid = c->own_userns ? bh_idmaps_sentry_id(c->gid_maps, c->n_gid) : 0;
    return 0;
}

static int create_cgroup(struct create_ctx *c, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = c->spec;
    char cg_default[300];
    const char *cg_path = spec->cgroup_path;
    if (cg_path == NULL) {
        if (spec->id == NULL)
            return bh_error_set(err, EINVAL, "the sandbox needs an id (it names its cgroup)");
        snprintf(cg_default, sizeof(cg_default), "bulkhead/%s", spec->id);
        cg_path = cg_default;
    }
    /* The core's own floor, whatever the front end: a caller that names no
     * memory or pids limit still cannot take the host's (invariant 5). */
    struct bh_limits limits = spec->limits;
    if (limits.memory_bytes == 0)
        limits.memory_bytes = BH_FLOOR_MEMORY_BYTES;
    if (limits.pids == 0)
        limits.pids = BH_FLOOR_PIDS;
    if (bh_cgroup_create(cg_path, &limits, &c->sb->cg, err) < 0)
        return bh_error_prefix(err, "cgroup `%s`", cg_path);
    return 0;
}

/* The host id of the sandbox's id 0, or -1 when its maps leave 0 out. */
static int64_t root_of(const struct bh_idmap *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].inside == 0 && m[i].count > 0)
            return m[i].outside;
    return -1;
}

/* The socket the child waits on for "go" and the sentry then talks over. */
static int create_sync_socket(struct create_ctx *c, struct bh_error *err)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return bh_error_errno(err, errno, "sync socket");
    c->sb->conn.fd = sv[0];
    c->child_sync = sv[1];
    return 0;
}

/* Everything else the sentry is handed with the spec: the compiled
 * programs, a detached sandbox's control socket and the caller's console
 * (both made here, as host root), the device nodes and the spec. Made after
 * "go", while the child execs the sentry: none of it is the child's. */
static int create_handover_fds(struct create_ctx *c, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = c->spec;
    int pol[3];
    if (policy_fds(spec, c->guest_policy, c->sentry_policy, pol, err) < 0)
        return -1;
    c->fds.slot[BH_SPEC_FD_GUEST_BPF] = pol[0];
    c->fds.slot[BH_SPEC_FD_SENTRY_BPF] = pol[1];
    c->fds.slot[BH_SPEC_FD_EXTRA_BPF] = pol[2];
    c->params.has_extra_policy = pol[2] >= 0;
    if (c->detached) {
        /* Bound here, as host root, so the socket belongs to root alone;
         * the sentry only accepts on it. */
        c->fds.slot[BH_SPEC_FD_LISTEN] = bind_control_socket(c->opts->state_dir, err);
        if (c->fds.slot[BH_SPEC_FD_LISTEN] < 0)
            return -1;
    }
    if (spec->process.terminal && spec->console_socket != NULL) {
        /* Connected here, as host root: the console socket is the caller's
         * and the sentry's ids may not reach it. */
        c->fds.slot[BH_SPEC_FD_CONSOLE] = connect_console_socket(spec->console_socket, err);
        if (c->fds.slot[BH_SPEC_FD_CONSOLE] < 0)
            return -1;
    }
    c->params.has_console = c->fds.slot[BH_SPEC_FD_CONSOLE] >= 0;
    /* The sandbox's own device nodes (mounts.h), made here as host root,
     * owned by the sandbox's root (runc's are root's inside); a joined user
     * namespace's ids are not ours to pick: the host's owners stay. */
    c->dev_tree = bh_mounts_dev_tree(c->own_userns ? root_of(c->uid_maps, c->n_uid) : -1,
                                     c->own_userns ? root_of(c->gid_maps, c->n_gid) : -1, err);
    if (c->dev_tree < 0)
        return -1;
    if (make_spec_memfd(spec, &c->params, c->sb->started, c->sysfs_fd, c->dev_tree, &c->fds,
                        &c->rootfs_tree, err) < 0)
        return -1;
    return 0;
}

static void child_args_close(struct child_args *a)
{
    for (int i = 0; i < BH_NS_COUNT; i++)
        if (a->ns_fds[i] >= 0)
            close(steal_fd(&a->ns_fds[i]));
}

/* What the child (and the helper, when there is one) needs: the namespaces
 * to join (opened here) or make (*flags), the rlimit ceilings and the owner
 * of the user namespace. *via_helper: the clone needs an intermediate
 * process (detached, joins as host root, or a change of owner). */
static int create_child_args(struct create_ctx *c, struct child_args *a, unsigned long *flags,
                             bool *via_helper, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = c->spec;
    *a = (struct child_args){.spec = spec,
                             .sync_fd = c->child_sync,
                             .slot_fd = c->sb->slot.lock_fd,
                             .exe_fd = c->exe_fd,
                             .pod_userns_fd = c->pod.userns_fd,
                             .owned = !c->detached};
    for (int i = 0; i < BH_NS_COUNT; i++)
        a->ns_fds[i] = -1;
    *flags = 0;
    bool any_pre = false;
    for (int i = 0; i < BH_NS_COUNT; i++) {
        if (spec->ns_paths[i] != NULL) {
            /* With a user namespace of its own (or a pod's), the sandbox can
             * only join what host root joins for it first: net, ipc, uts,
             * pid, cgroup, time. user and mount stay the child's. */
            a->pre_joined[i] = c->own_userns && i != BH_NS_USER && i != BH_NS_MOUNT;
            any_pre = any_pre || a->pre_joined[i];
            a->ns_fds[i] = open(spec->ns_paths[i], O_RDONLY | O_CLOEXEC);
            if (a->ns_fds[i] < 0) {
                bh_error_errno(err, errno, "open namespace `%s`", spec->ns_paths[i]);
                child_args_close(a);
                return -1;
            }
            if (i == BH_NS_NET)
                a->joins_host_netns = is_host_netns(a->ns_fds[i]);
        } else if (i != BH_NS_CGROUP && i != BH_NS_TIME && !(i == BH_NS_USER && c->in_pod)) {
            /* time is unshared by the child, cgroup by the sentry once the
             * spec (sent after the cgroup join) has come */
            *flags |= (unsigned long)ns_clone_flag[i];
        }
    }
    bh_userns_rlimits(spec, a->rlimits);
    for (int i = 0; i < BH_USERNS_N_RLIMITS && geteuid() != 0; i++) {
        /* Not root: no hard limit can rise, so the ceilings are at most ours. */
        struct rlimit cur;
        if (getrlimit(a->rlimits[i].resource, &cur) == 0 && cur.rlim_max < a->rlimits[i].hard) {
            a->rlimits[i].hard = cur.rlim_max;
            if (a->rlimits[i].soft > cur.rlim_max)
                a->rlimits[i].soft = cur.rlim_max;
        }
    }
    /* A pod's sandboxes live in the pause sandbox's user namespace: only a
     * namespace of the sandbox's own gets an owner. */
    if (c->own_userns && !c->in_pod && geteuid() == 0) {
        a->as_owner = true;
        a->owner_uid = bh_idmaps_owner(c->uid_maps, c->n_uid);
        a->owner_gid = bh_idmaps_owner(c->gid_maps, c->n_gid);
    }
    *via_helper = c->detached || any_pre || a->as_owner;
    return 0;
}

/* The owner's ids and limits can be taken in this thread (clone_as_owner)
 * when nothing else needed the helper and no other thread shares the
 * process's limits. */
static bool clone_in_place(const struct create_ctx *c, const struct child_args *a)
{
    if (!a->as_owner || c->detached || a->pod_userns_fd >= 0)
        return false;
    /* In place the real uid stays root, and the kernel copies no
     * RLIMIT_NPROC ceiling from a creator whose real uid is root. */
    if (c->spec->limits.tasks > 0)
        return false;
    /* Ceilings above our own hard limits would need a raise we could not
     * take back: the helper, which keeps them, sets those. */
    for (int i = 0; i < BH_USERNS_N_RLIMITS; i++) {
        struct rlimit cur;
        if (getrlimit(a->rlimits[i].resource, &cur) < 0 || a->rlimits[i].hard > cur.rlim_max ||
            a->rlimits[i].soft > a->rlimits[i].hard)
            return false;
    }
    for (int i = 0; i < BH_NS_COUNT; i++)
        if (a->pre_joined[i])
            return false;
    return single_threaded();
}

static int create_clone(struct create_ctx *c, struct bh_error *err)
{
    struct child_args a;
    unsigned long flags;
    bool via_helper;
    if (create_child_args(c, &a, &flags, &via_helper, err) < 0)
        return -1;
    struct bh_sandbox *sb = c->sb;
    /* The second wall (sentry/README.md): with a user namespace of its own
     * and nothing the child must join after the clone, the sentry is
     * exec'd before any new namespace and forks itself into them (after
     * joining a pod's user namespace), so its mm stays the host
     * namespace's. Joins of user or mount namespace paths keep the exec
     * inside (one wall: Landlock). */
    bool child_joins = false;
    for (int i = 0; i < BH_NS_COUNT; i++)
        child_joins = child_joins || (a.ns_fds[i] >= 0 && !a.pre_joined[i]);
    if (((flags & CLONE_NEWUSER) || a.pod_userns_fd >= 0) && !child_joins) {
        a.sentry_clone_flags = flags;
        flags = 0;
        c->sentry_forks = true;
    }
    if (via_helper && clone_in_place(c, &a)) {
        a.child_sets_rlimits = true;
        sb->pid = clone_as_owner(flags, &a, &sb->pidfd, &sb->child_stack, err);
    } else if (via_helper)
        sb->pid = clone_via_helper(flags, &a, c->detached, &sb->pidfd, err);
    else {
        sb->pid = clone_sentry(flags, &a, &sb->pidfd);
        if (sb->pid < 0)
            bh_error_errno(err, errno, "clone the sandbox's namespaces");
    }
    child_args_close(&a);
    if (sb->pid < 0) {
        sb->pid = -1;
        return -1;
    }
    close(steal_fd(&c->child_sync));
    sb->conn.sentry_pid = sb->pid;
    /* What the trace test holds: the in-place child copied no page table. */
    if (bh_startup_trace_on && sb->child_stack != NULL) {
        if (syscall(SYS_kcmp, getpid(), sb->pid, KCMP_VM, 0, 0) == 0)
            bh_startup_mark("fe: the child shares the front end's memory");
        struct child_args *copy =
            (struct child_args *)((char *)sb->child_stack + CHILD_STACK_SIZE - sizeof(*copy));
        __atomic_store_n(&copy->trace_gate, 1, __ATOMIC_RELEASE);
        syscall(SYS_futex, &copy->trace_gate, FUTEX_WAKE, 1, NULL, NULL, 0);
    }
    return 0;
}

/* Ends the exec'd sentry's forked child, named by pidfd, and reaps it when
 * it is ours (CLONE_PARENT: the creator's child unless detached, when the
 * helper or its subreaper reaps it). */
static void end_forked_child(int pidfd, bool detached)
{
    syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
    siginfo_t si;
    while (!detached && waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED | __WALL) < 0 &&
           errno == EINTR)
        ;
    close(pidfd);
}

/* A create that failed after the exec'd sentry forked, before its child's
 * pidfd was taken: that child is the creator's child and waits for "go";
 * unreaped it stays a zombie of a long-lived creator (bulkheadd). The
 * first stage is dead by now (kill_and_reap), so the sync socket's other
 * end is held by the forked child alone, if there is one: its pidfd is
 * either in the first stage's unread "cloned" message or, if the first
 * stage died before sending it, in the child's answer to "abort". End of
 * file: no child was forked. */
static void reap_unclaimed_child(struct create_ctx *c)
{
    struct bh_sandbox *sb = c->sb;
    if (!c->sentry_forks || c->sentry_taken || sb->conn.fd < 0)
        return;
    struct bh_error e = {0};
    json_t *abort_msg = json_pack("{s:s}", "op", "abort");
    /* EPIPE (no child) or a child already gone: the reads below say so */
    bh_msg_send(sb->conn.fd, abort_msg, NULL, 0, &e);
    json_decref(abort_msg);
    for (;;) {
        json_t *msg = NULL;
        int fd = -1;
        size_t n = 0;
        int r = bh_msg_recv(sb->conn.fd, bh_now_ms() + CREATE_TIMEOUT_MS, &msg, &fd, 1, &n, &e);
        json_decref(msg);
        if (r <= 0)
            return;
        if (n == 1) {
            end_forked_child(fd, c->detached);
            return;
        }
    }
}

/* The exec'd sentry forked itself into the sandbox's namespaces and names
 * that child, pid 1 to be, with a pidfd: from now on it is the sandbox's
 * process (maps, cgroup, signals, wait). The exec'd one exits at once; it
 * is our child unless detached (then the helper's, or its subreaper's). */
static int take_forked_sentry(struct create_ctx *c, struct bh_error *err)
{
    struct bh_sandbox *sb = c->sb;
    json_t *msg = NULL;
    int fd = -1;
    size_t n = 0;
    int r = bh_msg_recv(sb->conn.fd, bh_now_ms() + CREATE_TIMEOUT_MS, &msg, &fd, 1, &n, err);
    if (r <= 0) {
        if (r == 0)
            bh_error_set(err, EPROTO, "the sentry ended before it made the sandbox's namespaces");
        return bh_error_prefix(err, "wait for the sentry's namespaces");
    }
    const char *ev = json_string_value(json_object_get(msg, "ev"));
    /* The pid from the pidfd: the exec'd sentry may sit in a joined pid
     * namespace, where its numbers are not ours. */
    pid_t pid = n == 1 ? bh_pidfd_pid(fd) : -1;
    if (ev == NULL || strcmp(ev, "cloned") != 0 || pid <= 0) {
        if (ev != NULL && strcmp(ev, "error") == 0)
            bh_msg_to_error(msg, err);
        else
            bh_error_set(err, EPROTO, "the sentry sent `%s` instead of its forked child",
                         ev != NULL ? ev : "?");
        json_decref(msg);
        if (n == 1 && pid > 0)
            end_forked_child(fd, c->detached);
        else if (n == 1)
            close(fd);
        return -1;
    }
    json_decref(msg);
    c->sentry_taken = true;
    /* Its message proves the exec: the in-place child's stack is free. */
    release_child_stack(sb);
    if (!c->detached) {
        while (waitpid(sb->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    close(sb->pidfd);
    sb->pidfd = fd;
    sb->pid = pid;
    sb->conn.sentry_pid = sb->pid;
    bh_startup_mark("fe: the sentry forked into the namespaces");
    return 0;
}

/* The programs, the spec, the device tree and the cgroup: nothing of these
 * needs the sentry's pid. */
static int create_pid_free_work(struct create_ctx *c, struct bh_error *err)
{
    if (create_handover_fds(c, err) < 0)
        return -1;
    bh_startup_mark("fe: programs, spec, device tree");
    if (create_cgroup(c, err) < 0)
        return -1;
    bh_startup_mark("fe: cgroup made");
    return 0;
}

/* Parent half: the id maps before the child takes one step; then "go", and
 * while the child execs the sentry, the programs, the device nodes and the
 * spec are made, the cgroup is made and joined and the trees idmapped with
 * its user namespace. The sentry can run no guest
 * before the spec, sent only after all of these (create_handover): the
 * first guest starts in the cgroup, under its limits, as before. Only the
 * sentry's own exec is charged to the creator's cgroup. */
static int create_parent_half(struct create_ctx *c, struct bh_error *err)
{
    struct bh_sandbox *sb = c->sb;
    /* An exec'd sentry forks itself before the maps can be written: the
     * work that needs no pid runs meanwhile, as it runs beside the exec
     * after "go" when the child execs inside the namespaces. */
    bool early = c->sentry_forks;
    if (early && create_pid_free_work(c, err) < 0)
        return -1;
#ifdef BH_TEST_HOOKS
    /* Test build only (tests/e2e/test_faults_fork.c): fail once the first
     * stage has forked and sent its child's pidfd, leaving the message
     * unread ("after-sentry-fork") or losing it ("...-lost"), as when the
     * first stage dies before it sends. */
    const char *fault = getenv("BULKHEAD_TEST_FAULT");
    if (early && fault != NULL && strncmp(fault, "after-sentry-fork", 17) == 0) {
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        while (poll(&p, 1, CREATE_TIMEOUT_MS) < 0 && errno == EINTR)
            ;
        if (strcmp(fault, "after-sentry-fork-lost") == 0) {
            json_t *lost = NULL;
            int fd = -1;
            size_t n = 0;
            if (bh_msg_recv(sb->conn.fd, bh_now_ms() + CREATE_TIMEOUT_MS, &lost, &fd, 1, &n, err) >
                    0 &&
                n == 1)
                close(fd);
            json_decref(lost);
        }
        /* exited, not yet reaped: its name is still there to show */
        char path[64], comm[32] = "?";
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)sb->pid);
        int cfd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t got = cfd >= 0 ? read(cfd, comm, sizeof(comm) - 1) : -1;
        if (cfd >= 0)
            close(cfd);
        if (got > 0)
            comm[strcspn(comm, "\n")] = '\0';
        return bh_error_set(err, EIO,
                            "test fault after the sentry's fork (BULKHEAD_TEST_FAULT=%s; the "
                            "first stage, `%s`, has exited)",
                            fault, comm);
    }
#endif
    if (early && take_forked_sentry(c, err) < 0)
        return -1;
    if (c->own_userns && !c->in_pod &&
        bh_idmaps_write(sb->pid, c->uid_maps, c->n_uid, c->gid_maps, c->n_gid, err) < 0)
        return -1;
    bh_startup_mark("fe: id maps written");
    json_t *go = json_pack("{s:s}", "op", "go");
    int r = bh_msg_send(sb->conn.fd, go, NULL, 0, err);
    json_decref(go);
    if (r < 0)
        return bh_error_prefix(err, "wake the sandbox's first process");
    if (!early && create_pid_free_work(c, err) < 0)
        return -1;
    if (bh_cgroup_attach(sb->cg, sb->pid, err) < 0)
        return bh_error_prefix(err, "join the sandbox's cgroup");
    if (c->own_userns && want_idmap(c->spec)) {
        /* The trees are still detached and the child waits: idmap them with
         * its user namespace, now that its maps are written. */
        cleanup_close int userns = bh_idmap_userns_fd(sb->pidfd, sb->pid, err);
        if (userns < 0 || bh_idmap_trees(c->spec, c->opts, userns, c->uid_maps, c->n_uid,
                                         c->gid_maps, c->n_gid, &c->idmapped_rootfs, err) < 0)
            return -1;
        if (c->idmapped_rootfs >= 0 && c->rootfs_tree >= 0)
            c->fds.tree[c->rootfs_tree] = c->idmapped_rootfs;
    }
    return 0;
}

/* The sentry waits before pivot_root (params.pause_mounted): the caller's
 * hooks run now, with no deadline of ours (each hook has its own timeout),
 * then the sentry goes on. */
static int create_pause(struct create_ctx *c, json_t *ev, struct bh_error *err)
{
    struct bh_sandbox *sb = c->sb;
    const char *root = json_string_value(json_object_get(ev, "root"));
    if (root == NULL)
        return bh_error_set(err, EPROTO, "the sentry paused without naming its root");
    if (c->opts->mounted(c->opts->mounted_arg, sb->pid, root, err) < 0)
        return -1;
    bh_startup_mark("fe: hooks ran");
    json_t *resume = json_pack("{s:s}", "op", "resume");
    int r = bh_msg_send(sb->conn.fd, resume, NULL, 0, err);
    json_decref(resume);
    return r < 0 ? bh_error_prefix(err, "let the sentry go on after the hooks") : 0;
}

/* The spec and its fds, then the sentry's first event: "ready" (after
 * "mounted" when the caller pauses it), or the error that ended its setup. */
static int create_handover(struct create_ctx *c, struct bh_error *err)
{
    struct bh_sandbox *sb = c->sb;
    int msg_fds[BH_SPEC_FDS_MAX];
    size_t n = bh_spec_fds_pack(&c->fds, msg_fds);
    json_t *spec_msg = json_pack("{s:s}", "op", "spec");
    int r = bh_msg_send(sb->conn.fd, spec_msg, msg_fds, n, err);
    json_decref(spec_msg);
    if (r < 0)
        return bh_error_prefix(err, "hand the spec to the sentry");
    bool paused = !c->params.pause_mounted;
    for (;;) {
        json_t *ev = NULL;
        r = bh_conn_next_event(&sb->conn, bh_now_ms() + CREATE_TIMEOUT_MS, &ev, err);
        if (r <= 0)
            return r == 0 ? bh_error_set(err, EPROTO,
                                         "the sentry ended during setup without saying why")
                          : -1;
        const char *kind = json_string_value(json_object_get(ev, "ev"));
        if (!paused && kind != NULL && strcmp(kind, "mounted") == 0) {
            paused = true;
            r = create_pause(c, ev, err);
            json_decref(ev);
            if (r < 0)
                return -1;
            continue;
        }
        if (kind == NULL || strcmp(kind, "ready") != 0) {
            if (sb->conn.have_error)
                bh_error_copy(err, &sb->conn.error);
            else
                bh_error_set(err, EPROTO, "the sentry sent `%s` before it was ready",
                             kind ? kind : "?");
            json_decref(ev);
            return -1;
        }
        json_decref(ev);
        return 0;
    }
}

int bh_sandbox_create(const struct bh_sandbox_spec *spec, const struct bh_create_opts *opts,
                      struct bh_sandbox **out, struct bh_error *err)
{
    struct bh_create_opts none = {0};
    if (opts == NULL)
        opts = &none;
    if (bh_spec_validate(spec, err) < 0)
        return -1;
    /* Before anything is made: a host whose file table, pid space or AIO
     * pool sandboxes can drain before its memory runs out is no place for a
     * sandbox of either tier (invariant 5; the kernel tier refuses io_setup,
     * but the tier report checks every pool for both). */
    if (bh_file_table_ensure(err) < 0 || bh_pid_space_ensure(err) < 0 ||
        bh_aio_pool_ensure(err) < 0)
        return bh_error_prefix(err, "create sandbox");
    bool detached = (opts->flags & BH_CREATE_DETACHED) != 0;
    if (detached && (opts->state_dir == NULL || opts->state_dir[0] != '/'))
        return bh_error_set(err, EINVAL, "a detached sandbox needs an absolute state directory");

    __attribute__((cleanup(create_ctx_release))) struct create_ctx c = {
        .spec = spec,
        .opts = opts,
        .detached = detached,
        .own_userns = spec->ns_paths[BH_NS_USER] == NULL,
        .params = {.detached = detached,
                   .state_dir = (char *)opts->state_dir,
                   .made_netns = spec->ns_paths[BH_NS_NET] == NULL,
                   .made_utsns = spec->ns_paths[BH_NS_UTS] == NULL,
                   .joined_pidns = spec->ns_paths[BH_NS_PID] != NULL,
                   .pause_mounted = opts->mounted != NULL},
        .exe_fd = -1,
        .pod = {.userns_fd = -1, .slot = {.lock_fd = -1}},
        .sysfs_fd = -1,
        .child_sync = -1,
        .dev_tree = -1,
        .idmapped_rootfs = -1,
        .rootfs_tree = -1,
    };
    bh_spec_fds_init(&c.fds);
    bh_startup_mark("fe: create");
    if (create_find_files(&c, err) < 0)
        return -1;
    c.sb = sandbox_new(detached);
    if (c.sb == NULL)
        return bh_error_errno(err, ENOMEM, "sandbox");
    c.sb->started = (opts->flags & BH_CREATE_START) != 0;

    if (create_ids(&c, err) < 0)
        goto fail;
    bh_startup_mark("fe: ids");
    if (create_sync_socket(&c, err) < 0)
        goto fail;
    if (create_clone(&c, err) < 0)
        goto fail;
    bh_startup_mark("fe: cloned");
    if (create_parent_half(&c, err) < 0)
        goto fail_kill;
    bh_startup_mark("fe: cgroup joined, trees idmapped");
    if (create_handover(&c, err) < 0)
        goto fail_kill;
    /* "ready" came from the sentry: the child has exec'd. */
    release_child_stack(c.sb);
    bh_startup_mark("fe: ready");
    if (detached) {
        c.sb->state_dir = strdup(opts->state_dir);
        /* The sync socket is the creator's only: a detached sandbox is
         * reached again through its state directory. */
    }
    *out = steal_pointer(&c.sb);
    return 0;

fail_kill:
    kill_and_reap(c.sb);
    reap_unclaimed_child(&c);
fail:
    if (c.fds.slot[BH_SPEC_FD_LISTEN] >= 0)
        unlink_control_socket(opts->state_dir);
    cleanup_cgroup(c.sb);
    sandbox_free(c.sb);
    return bh_error_prefix(err, "create sandbox");
}

int bh_sandbox_start(struct bh_sandbox *sb, struct bh_error *err)
{
    if (sb->started)
        return 0;
    return bh_sentry_start(&sb->conn, err);
}

int bh_sandbox_signal(struct bh_sandbox *sb, int sig, struct bh_error *err)
{
    return bh_sentry_signal(&sb->conn, 0, sig, err);
}

int bh_sandbox_wait(struct bh_sandbox *sb, int *status, struct bh_error *err)
{
    if (sb->waited) {
        *status = sb->status;
        return 0;
    }
    /* The sentry reports the first guest's real wait status, then exits. */
    while (!sb->conn.have_exit && !sb->conn.have_error) {
        json_t *ev = NULL;
        struct bh_error e = {0};
        int r = bh_conn_next_event(&sb->conn, -1, &ev, &e);
        json_decref(ev);
        if (r <= 0)
            break;
    }
    bh_startup_mark("fe: exit event");
    int st = 0;
    if (!sb->detached) {
        while (waitpid(sb->pid, &st, 0) < 0) {
            if (errno != EINTR)
                return bh_error_errno(err, errno, "wait for the sentry %d", sb->pid);
        }
        sb->reaped = true;
    } else {
        struct pollfd p = {.fd = sb->pidfd, .events = POLLIN};
        while (poll(&p, 1, -1) < 0 && errno == EINTR)
            ;
    }
    if (sb->conn.have_exit)
        st = sb->conn.exit_status;
    else if (sb->conn.have_error) {
        sb->waited = true;
        sb->status = st;
        return bh_error_copy(err, &sb->conn.error);
    }
    sb->waited = true;
    sb->status = st;
    *status = st;
    if (!sb->conn.have_exit) {
        /* The sentry died without its exit event (killed, crashed): the
         * guest died with it, so what the command would have returned is
         * unknown; never pass the sentry's own status off as the guest's. */
        if (!sb->detached && WIFSIGNALED(st))
            return bh_error_set(err, ECHILD,
                                "the sandbox's sentry died (signal %d) before the command "
                                "finished; its result is unknown",
                                WTERMSIG(st));
        if (!sb->detached && WIFEXITED(st))
            return bh_error_set(err, ECHILD,
                                "the sandbox's sentry ended (exit %d) without reporting the "
                                "command's status; its result is unknown",
                                WEXITSTATUS(st));
        return bh_error_set(err, ECHILD,
                            "the sandbox's sentry ended without reporting the command's "
                            "status; its result is unknown");
    }
    return 0;
}

void bh_sandbox_release(struct bh_sandbox *sb)
{
    if (sb == NULL)
        return;
    bh_cgroup_free(sb->cg);
    sb->cg = NULL;
    sandbox_free(sb);
}

void bh_sandbox_destroy(struct bh_sandbox *sb)
{
    if (sb == NULL)
        return;
    if (!sb->waited || !sb->reaped)
        kill_and_reap(sb);
    if (sb->cg != NULL) {
        struct bh_error e = {0};
        bh_cgroup_kill(sb->cg, &e);
    }
    cleanup_cgroup(sb);
    if (sb->state_dir != NULL) {
        char path[4200];
        snprintf(path, sizeof(path), "%s/sentry.sock", sb->state_dir);
        unlink(path);
    }
    sandbox_free(sb);
}
