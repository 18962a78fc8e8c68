/* Owns a guest's birth, in the sentry: fork, then the guest's own setup in
 * the order the kernel needs (session, console, stdio, fds, rlimits,
 * securebits, ids, capabilities, working directory, no_new_privs, Landlock,
 * seccomp last), a report to the sentry, a wait for start, and exec.
 *
 * The guest talks to the sentry over a SOCK_SEQPACKET pair (its end is
 * close-on-exec, so the sentry sees the end of the stream when exec
 * succeeds). Its filters' listeners (the tier's, a caller's agent's) go to
 * the sentry over that socket from a courier thread made before the first
 * filter, which no filter of the guest's binds (filters are per thread
 * without TSYNC), so the guest stays non-dumpable from its fork to its exec
 * at both tiers, and never makes a brokered syscall before the broker holds
 * its listener (sentry/README.md, start-up). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <linux/capability.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "cleanup.h"
#include "control.h"
#include "frame.h"
#include "kernel-compat.h"
#include "landlock.h"
#include "mounts.h"
#include "policy.h"
#include "caps-internal.h"
#include "guest-internal.h"
#include "msg-internal.h"
#include "startup-trace.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define GUEST_SETUP_TIMEOUT_MS 30000

static const char *env_get(char **env, const char *name)
{
    size_t n = strlen(name);
    for (char **e = env; e != NULL && *e != NULL; e++)
        if (strncmp(*e, name, n) == 0 && (*e)[n] == '=')
            return *e + n + 1;
    return NULL;
}

/* PATH lookup inside the sandbox, as runc does, so create can say "not found". */
static int resolve_program(const struct bh_process *proc, char *out, size_t size,
                           struct bh_error *err)
{
    const char *prog = proc->argv[0];
    if (strchr(prog, '/') != NULL) {
        if (snprintf(out, size, "%s", prog) >= (int)size)
            return bh_error_set(err, ENAMETOOLONG, "program path `%s` is too long", prog);
        struct stat st;
        if (stat(out, &st) < 0) {
            bh_error_errno(err, errno, "exec `%s`", prog);
            return bh_error_mark(err, BH_ERROR_EXEC);
        }
        return 0;
    }
    const char *path = env_get(proc->env, "PATH");
    if (path == NULL)
        path = DEFAULT_PATH;
    int last = ENOENT;
    while (*path != '\0') {
        const char *colon = strchrnul(path, ':');
        int len = (int)(colon - path);
        snprintf(out, size, "%.*s/%s", len ? len : 1, len ? path : ".", prog);
        struct stat st;
        if (stat(out, &st) == 0 && S_ISREG(st.st_mode)) {
            if (access(out, X_OK) == 0)
                return 0;
            last = EACCES;
        }
        path = *colon ? colon + 1 : colon;
    }
    if (last == EACCES)
        bh_error_set(err, EACCES, "exec `%s`: found in $PATH but not executable", prog);
    else
        bh_error_set(err, ENOENT, "exec `%s`: executable file not found in $PATH", prog);
    return bh_error_mark(err, BH_ERROR_EXEC);
}

static int set_rlimits(const struct bh_process *proc, struct bh_error *err)
{
    /* The defaults only where the process asks for nothing: lowering a hard
     * limit first would make the one asked for (raised) impossible.
     * memlock: mlock of a shared host file (/usr, an OCI rootfs) pins page
     * cache that stays charged to whoever read it first, outside the
     * sandbox's memory limit, so each process may lock only the kernel's old
     * 64 KiB (the user namespace's 8 MiB SHM_LOCK ceiling is set apart).
     * rtprio and nice 0: a hard limit inherited from the front end would let
     * a guest into SCHED_FIFO (95% of a CPU) on a host without RT cgroups. */
    static const struct {
        int resource;
        struct rlimit value;
    } defaults[] = {
        {RLIMIT_NOFILE, {1024, 4096}}, {RLIMIT_CORE, {0, 0}}, {RLIMIT_MEMLOCK, {65536, 65536}},
        {RLIMIT_RTPRIO, {0, 0}},       {RLIMIT_NICE, {0, 0}},
    };
    for (size_t d = 0; d < BH_ARRAY_SIZE(defaults); d++) {
        bool asked = false;
        for (size_t i = 0; i < proc->n_rlimits; i++)
            asked = asked || proc->rlimits[i].resource == defaults[d].resource;
        if (!asked && setrlimit(defaults[d].resource, &defaults[d].value) < 0)
            return bh_error_errno(err, errno,
                                  "set default rlimit %d to %llu/%llu (nofile 1024/4096, core 0, "
                                  "memlock 64 KiB, rtprio 0, nice 0)",
                                  defaults[d].resource,
                                  (unsigned long long)defaults[d].value.rlim_cur,
                                  (unsigned long long)defaults[d].value.rlim_max);
    }
    for (size_t i = 0; i < proc->n_rlimits; i++) {
        const struct bh_rlimit *r = &proc->rlimits[i];
        struct rlimit rl = {r->soft, r->hard};
        /* Room for the courier beside the guest until its exec; lowered to
         * the config's own after the courier is made (nproc_exact). */
        if (r->resource == RLIMIT_NPROC) {
            rl.rlim_cur = rl.rlim_cur < 2 ? 2 : rl.rlim_cur;
            rl.rlim_max = rl.rlim_max < 2 ? 2 : rl.rlim_max;
        }
        if (setrlimit(r->resource, &rl) < 0)
            return bh_error_errno(err, errno, "set rlimit %d to %llu/%llu", r->resource,
                                  (unsigned long long)r->soft, (unsigned long long)r->hard);
    }
    return 0;
}

/* The config's RLIMIT_NPROC below 2, once the courier is made: a lowering,
 * which needs no capability. */
static int nproc_exact(const struct bh_process *proc, struct bh_error *err)
{
    for (size_t i = 0; i < proc->n_rlimits; i++) {
        const struct bh_rlimit *r = &proc->rlimits[i];
        struct rlimit rl = {r->soft, r->hard};
        if (r->resource == RLIMIT_NPROC && (r->soft < 2 || r->hard < 2) &&
            setrlimit(RLIMIT_NPROC, &rl) < 0)
            return bh_error_errno(err, errno, "set RLIMIT_NPROC to %llu/%llu",
                                  (unsigned long long)r->soft, (unsigned long long)r->hard);
    }
    return 0;
}

/* Moves fds onto 0, 1, 2 without clobbering one another. */
static int place_stdio(const int in[3], struct bh_error *err)
{
    int tmp[3];
    for (int i = 0; i < 3; i++) {
        tmp[i] = fcntl(in[i], F_DUPFD_CLOEXEC, 10);
        if (tmp[i] < 0)
            return bh_error_errno(err, errno, "duplicate stdio fd %d", in[i]);
    }
    for (int i = 0; i < 3; i++) {
        if (dup2(tmp[i], i) < 0)
            return bh_error_errno(err, errno, "install stdio fd %d", i);
        close(tmp[i]);
    }
    return 0;
}

/* Opens a pty pair with the process's fs ids: devpts makes a pty its
 * opener's, and runc's owner is the process itself; devpts' gid= (tty in
 * runc's config) takes precedence for the group. */
static int open_pty_as_guest(const struct bh_process *proc, int *master, int *slave, char *name,
                             size_t len, struct bh_error *err)
{
    uid_t old_uid = (uid_t)setfsuid(proc->uid);
    gid_t old_gid = (gid_t)setfsgid(proc->gid);
    int unlock = 0, rc = 0;
    /* setfsuid answers with the previous id, never an error: ask again. */
    if ((uid_t)setfsuid(proc->uid) != proc->uid || (gid_t)setfsgid(proc->gid) != proc->gid)
        rc = bh_error_set(err, EPERM, "take uid/gid %u/%u to open the guest's terminal", proc->uid,
                          proc->gid);
    else if ((*master = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
        rc = bh_error_errno(err, errno, "open /dev/ptmx for the guest's terminal");
    else if (ioctl(*master, TIOCSPTLCK, &unlock) < 0 || ptsname_r(*master, name, len) != 0)
        rc = bh_error_errno(err, errno, "unlock the guest's pty");
    else if ((*slave = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC)) < 0)
        rc = bh_error_errno(err, errno, "open the guest's pty `%s`", name);
    setfsuid(old_uid);
    setfsgid(old_gid);
    return rc;
}

static int open_console(const struct bh_process *proc, int console_fd, int stdio[3],
                        struct bh_error *err)
{
    cleanup_close int master = -1;
    int slave = -1;
    char name[64];
    if (open_pty_as_guest(proc, &master, &slave, name, sizeof(name), err) < 0)
        return -1;
    if (proc->console_rows && proc->console_cols) {
        struct winsize ws = {.ws_row = proc->console_rows, .ws_col = proc->console_cols};
        ioctl(master, TIOCSWINSZ, &ws);
    }
    if (ioctl(slave, TIOCSCTTY, 0) < 0) {
        close(slave);
        return bh_error_errno(err, errno, "make `%s` the guest's controlling terminal", name);
    }
    if (bh_send_fds(console_fd, name, strlen(name), &master, 1, err) < 0) {
        close(slave);
        return bh_error_prefix(err, "send the pty master to the console socket");
    }
    stdio[0] = stdio[1] = stdio[2] = slave;
    return 0;
}

/* The files of fds a caller passed (runc's --preserve-fds; refused at the
 * kernel tier), allowed as they were opened: runc's guests reopen them
 * through /proc/self/fd, which Landlock would refuse as a path outside the
 * container. A file opened for reading may be reopened for reading only,
 * a directory read; pipes and sockets need no rule. */
static unsigned extra_fd_access(int fd)
{
    struct stat st;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fstat(fd, &st) < 0 || (fl & O_PATH))
        return 0;
    if (S_ISDIR(st.st_mode))
        return BH_LL_READ;
    if (!S_ISREG(st.st_mode))
        return 0;
    int mode = fl & O_ACCMODE;
    return (mode == O_RDONLY || mode == O_RDWR ? BH_LL_READ : 0) |
           (mode == O_WRONLY || mode == O_RDWR ? BH_LL_WRITE : 0);
}

/* Why the kernel tier refuses the fd passed as guest fd `num`, or NULL.
 * The guest reaches such a file with direct read/write, never through the
 * broker: a regular file of an ordinary filesystem or a pipe is data and
 * nothing more. A directory or O_PATH fd would be a root for *at calls the
 * broker does not confine, a socket a line to a host service, a device or
 * anonymous inode (pidfd, eventfd, bpf, ...) host kernel state, and a file
 * of procfs, sysfs or cgroupfs host state by another name. */
static const char *extra_fd_refusal(int fd)
{
    struct stat st;
    struct statfs sfs;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fstat(fd, &st) < 0 || fstatfs(fd, &sfs) < 0)
        return "it cannot be inspected";
    if (fl & O_PATH)
        return "it is an O_PATH fd (a root for *at calls around the broker's path checks)";
    if (S_ISDIR(st.st_mode))
        return "it is a directory (a root for *at calls around the broker's path checks)";
    if (S_ISSOCK(st.st_mode))
        return "it is a socket (a line to whatever the host side holds open)";
    /* Pipes, and the stateless character devices every sandbox has
     * (mounts.c's table). */
    const struct bh_dev_node *node = S_ISCHR(st.st_mode) ? bh_dev_node_by_rdev(st.st_rdev) : NULL;
    if (S_ISFIFO(st.st_mode) || (node != NULL && node->stateless))
        return NULL;
    if (!S_ISREG(st.st_mode))
        return "it is a device or an anonymous inode (host kernel state)";
    static const long pseudo[] = {PROC_SUPER_MAGIC,    SYSFS_MAGIC,   CGROUP_SUPER_MAGIC,
                                  CGROUP2_SUPER_MAGIC, DEBUGFS_MAGIC, TRACEFS_MAGIC,
                                  SECURITYFS_MAGIC,    BPF_FS_MAGIC,  NSFS_MAGIC,
                                  EFIVARFS_MAGIC};
    for (size_t i = 0; i < BH_ARRAY_SIZE(pseudo); i++)
        if ((long)sfs.f_type == pseudo[i])
            return "it is a file of procfs, sysfs, cgroupfs or another kernel filesystem (host "
                   "state)";
    return NULL;
}

int bh_guest_extra_fds_check(const struct bh_sandbox_spec *spec, const int *extra, size_t n_extra,
                             struct bh_error *err)
{
    if (spec->tier < BH_TIER_KERNEL)
        return 0;
    for (size_t i = 0; i < n_extra; i++) {
        const char *why = extra_fd_refusal(extra[i]);
        if (why != NULL)
            return bh_error_set(err, EPERM,
                                "exec: extra fd %zu (--preserve-fds) is refused at the kernel "
                                "tier: %s; pass regular files and pipes only",
                                3 + i, why);
    }
    return 0;
}

int bh_guest_landlock(const struct bh_sandbox_spec *spec, struct bh_error *err)
{
    return bh_guest_landlock_fds(spec, 0, err);
}

int bh_guest_landlock_fds(const struct bh_sandbox_spec *spec, size_t n_extra, struct bh_error *err)
{
    struct bh_landlock_rule rules[64 + BH_EXEC_MAX_EXTRA_FDS];
    size_t n = 0;
    int fds[64 + BH_EXEC_MAX_EXTRA_FDS];
    const char *writable[48];
    size_t nw = 0;
    static const char *const dev_nodes[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/tty",
                                            "/dev/pts",  "/dev/ptmx", "/dev/shm",  "/dev/mqueue"};
    for (size_t i = 0; i < BH_ARRAY_SIZE(dev_nodes); i++)
        writable[nw++] = dev_nodes[i];
    bool whole_root = spec->rootfs != NULL && (!spec->rootfs_readonly || spec->rootfs_overlay);
    if (spec->rootfs == NULL) {
        writable[nw++] = "/tmp";
        writable[nw++] = spec->workdir ? spec->workdir : "/work";
    } else if (!whole_root) {
        for (size_t i = 0; i < spec->n_mounts && nw < BH_ARRAY_SIZE(writable); i++) {
            const struct bh_mount *m = &spec->mounts[i];
            if (m->destination == NULL || (m->flags & MS_RDONLY) || m->type == NULL)
                continue;
            if (strcmp(m->type, "tmpfs") == 0 || strcmp(m->type, "bind") == 0 ||
                (m->flags & MS_BIND))
                writable[nw++] = m->destination;
        }
    }
    fds[n] = open("/", O_PATH | O_CLOEXEC);
    if (fds[n] < 0)
        return bh_error_errno(err, errno, "open / for Landlock");
    rules[n] = (struct bh_landlock_rule){
        "/", fds[n], BH_LL_READ | BH_LL_EXECUTE | (whole_root ? BH_LL_WRITE : 0)};
    n++;
    for (size_t i = 0; i < nw; i++) {
        int fd = open(writable[i], O_PATH | O_CLOEXEC);
        if (fd < 0)
            continue; /* not in this sandbox: nothing to allow */
        fds[n] = fd;
        rules[n] =
            (struct bh_landlock_rule){writable[i], fd, BH_LL_READ | BH_LL_WRITE | BH_LL_EXECUTE};
        n++;
    }
    for (size_t i = 0; i < n_extra && i < BH_EXEC_MAX_EXTRA_FDS && spec->tier < BH_TIER_KERNEL;
         i++) {
        unsigned access = extra_fd_access(3 + (int)i);
        if (access == 0)
            continue;
        fds[n] = fcntl(3 + (int)i, F_DUPFD_CLOEXEC, 0);
        if (fds[n] < 0)
            continue;
        rules[n] = (struct bh_landlock_rule){NULL, fds[n], access};
        n++;
    }
    /* noNewPrivileges false (container tier): the caller holds CAP_SYS_ADMIN
     * instead of no_new_privs (see bh_process.allow_new_privs). */
    bool privileged = spec->process.allow_new_privs && spec->tier < BH_TIER_KERNEL &&
                      prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1;
    int r = privileged ? bh_landlock_restrict_privileged(rules, n, err)
                       : bh_landlock_restrict(rules, n, err);
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    if (r < 0)
        return bh_error_prefix(err, "Landlock (needed by the %s tier)", bh_tier_name(spec->tier));
    return 0;
}

/* The listeners that leave the guest: the tier's (the broker's or the
 * container tier's AIO and socket caps) and a caller's agent's. */
static size_t listeners_wanted(const struct bh_guest_ctx *ctx)
{
    return (ctx->want_listener ? 1u : 0u) + (ctx->want_user_listener ? 1u : 0u);
}

/* The guest's listeners cannot leave through its own thread: the kernel
 * tier's filter brokers sendmsg to the very listener being sent, and a
 * caller's profile may refuse or notify sendmsg to an agent that has no
 * listener yet. pidfd_getfd would need the guest dumpable, and so open to
 * every guest of the sandbox (Landlock alone) from fork to exec. So a
 * thread made after the ids, capabilities, no_new_privs and Landlock, and
 * before the first filter, waits on a futex word; the main thread installs
 * the filters, puts the fds (shared table) in its slots and sets the word;
 * the courier sends them with {"re":"listener"} and answers in a second
 * word. The main thread's part makes no call a caller's profile is likely
 * to notify to an agent that has no listener yet (runc's bats notify read
 * and close): futex alone, and where the profile refuses even that, a spin
 * on the word. The fds are close-on-exec (seccomp makes listeners so), so
 * nothing closes them before the exec. The courier runs only this code and
 * is over before the ready report; the exec ends it in any case (de_thread)
 * before the new program runs. */
struct courier {
    int sock;
    uint32_t kick; /* 1 once fds[] and n are final */
    uint32_t done; /* 0 until the courier answers: 1 sent, 2 not */
    int fds[2];
    size_t n;
};

static long futex_op(uint32_t *word, int op, uint32_t val, const struct timespec *timeout)
{
    return syscall(SYS_futex, word, op, val, timeout, NULL, 0);
}

static void *courier_main(void *arg)
{
    struct courier *c = arg;
    /* A wake the caller's profile refused costs one timeout, no more. */
    const struct timespec tick = {.tv_sec = 0, .tv_nsec = 10 * 1000 * 1000};
    while (__atomic_load_n(&c->kick, __ATOMIC_ACQUIRE) == 0)
        futex_op(&c->kick, FUTEX_WAIT_PRIVATE, 0, &tick);
    json_t *m = json_pack("{s:s,s:I}", "re", "listener", "n", (json_int_t)c->n);
    bool ok = m != NULL && bh_msg_send(c->sock, m, c->fds, c->n, NULL) >= 0;
    json_decref(m);
    __atomic_store_n(&c->done, ok ? 1u : 2u, __ATOMIC_RELEASE);
    futex_op(&c->done, FUTEX_WAKE_PRIVATE, 1, NULL);
    return NULL;
}

static int courier_start(struct courier *c, int sock, struct bh_error *err)
{
    *c = (struct courier){.sock = sock, .fds = {-1, -1}};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_t t;
    int e = pthread_create(&t, &attr, courier_main, c);
    pthread_attr_destroy(&attr);
    if (e != 0)
        return bh_error_errno(err, e,
                              "make the thread that sends the seccomp listeners to the sentry "
                              "(a second task of the guest's uid until its exec)");
    return 0;
}

/* Only futex here (or nothing): at the kernel tier the broker does not hold
 * the listener yet, and a caller's profile is in place. */
static int courier_deliver(struct courier *c)
{
    __atomic_store_n(&c->kick, 1u, __ATOMIC_RELEASE);
    futex_op(&c->kick, FUTEX_WAKE_PRIVATE, 1, NULL);
    uint32_t d;
    bool spin = false;
    while ((d = __atomic_load_n(&c->done, __ATOMIC_ACQUIRE)) == 0)
        if (!spin && futex_op(&c->done, FUTEX_WAIT_PRIVATE, 0, NULL) < 0 && errno != EAGAIN &&
            errno != EINTR)
            spin = true;
    return d == 1 ? 0 : -1;
}

static void guest_report(int sock, json_t *msg)
{
    bh_msg_send(sock, msg, NULL, 0, NULL);
    json_decref(msg);
}

static void guest_fail(int sock, const struct bh_error *err, int code)
{
    guest_report(sock, bh_msg_error(err, "error"));
    _exit(code);
}

/* Runs in the forked guest; never returns. */
static void guest_main(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                       const int stdio_in[3], int console_fd, const int *extra, size_t n_extra,
                       int sock)
{
    bh_startup_mark("guest: forked");
    struct bh_error err = {0};
    int stdio[3] = {stdio_in[0], stdio_in[1], stdio_in[2]};
    sigset_t all;
    sigemptyset(&all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    for (int s = 1; s < NSIG; s++)
        signal(s, SIG_DFL);
    if (setsid() < 0) {
        bh_error_errno(&err, errno, "setsid");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    if (proc->terminal) {
        if (console_fd < 0) {
            bh_error_set(&err, EINVAL, "a terminal was asked for but there is no console socket");
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
        if (open_console(proc, console_fd, stdio, &err) < 0)
            guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    bh_startup_mark("guest: signals reset, setsid");
    if (place_stdio(stdio, &err) < 0)
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    /* Extra fds become 3, 4, ... (inherited across exec); first every one
     * goes above the targets, so no source is overwritten before it moves. */
    int high[BH_EXEC_MAX_EXTRA_FDS];
    int sock_at = 3 + (int)n_extra;
    for (size_t i = 0; i < n_extra; i++) {
        high[i] = fcntl(extra[i], F_DUPFD_CLOEXEC, sock_at + 1);
        if (high[i] < 0) {
            bh_error_errno(&err, errno, "keep extra fd %zu", i);
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
    }
    if (n_extra > 0) {
        int s2 = fcntl(sock, F_DUPFD_CLOEXEC, sock_at + 1);
        if (s2 < 0) {
            bh_error_errno(&err, errno, "move the setup socket");
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
        sock = s2;
    }
    for (size_t i = 0; i < n_extra; i++) {
        if (dup2(high[i], 3 + (int)i) < 0) {
            bh_error_errno(&err, errno, "place extra fd %zu at %zu", i, 3 + i);
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
    }
    if (sock != sock_at) {
        if (dup3(sock, sock_at, O_CLOEXEC) < 0) {
            bh_error_errno(&err, errno, "move the setup socket");
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
        sock = sock_at;
    }
    /* Only 0, 1, 2, the extra fds (and the close-on-exec setup socket) from here on. */
    if (syscall(SYS_close_range, (unsigned)sock_at + 1, ~0U, 0) < 0) {
        bh_error_errno(&err, errno, "close inherited fds");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    if (set_rlimits(proc, &err) < 0)
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    umask(proc->umask >= 0 ? (mode_t)proc->umask : 022);
    if (proc->has_oom_score_adj) {
        int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        char buf[16];
        int len = snprintf(buf, sizeof(buf), "%d", proc->oom_score_adj);
        if (fd < 0 || write(fd, buf, (size_t)len) != len) {
            bh_error_errno(&err, errno, "set oom_score_adj to %d", proc->oom_score_adj);
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
        close(fd);
    }
    if (bh_caps_guest_securebits(proc, &err) < 0)
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    /* The working directory is entered first with the setup's rights
     * (CAP_DAC_READ_SEARCH, permitted to the sentry for this alone), as
     * runc's init enters it with its own: a process may start in a directory
     * its user cannot enter (exec --user 0 into another user's 0700 home),
     * and being there grants nothing, as every lookup from it is checked
     * again: by the kernel, and at the kernel tier by the broker with the
     * thread's own ids and file capabilities (broker.c, worker_fs_caps).
     * Refused, it is retried as the process's user below. */
    const char *cwd = proc->cwd ? proc->cwd : "/";
    bool cwd_entered = false;
    if (bh_caps_effective(CAP_DAC_READ_SEARCH, true, &err) == 0) {
        cwd_entered = chdir(cwd) == 0;
        int e = errno;
        if (bh_caps_effective(CAP_DAC_READ_SEARCH, false, &err) < 0)
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        if (!cwd_entered && e != EACCES && e != EPERM) {
            bh_error_errno(&err, e, "enter the working directory `%s`", cwd);
            guest_fail(sock, &err, BH_EXIT_REFUSED);
        }
    }
    err = (struct bh_error){0};
    gid_t gids[256];
    size_t ng = proc->n_additional_gids < 256 ? proc->n_additional_gids : 256;
    for (size_t i = 0; i < ng; i++)
        gids[i] = proc->additional_gids[i];
    if (syscall(SYS_setgroups, ng, gids) < 0 ||
        syscall(SYS_setresgid, proc->gid, proc->gid, proc->gid) < 0 ||
        syscall(SYS_setresuid, proc->uid, proc->uid, proc->uid) < 0) {
        bh_error_errno(&err, errno, "switch to the guest's uid/gid %u/%u (is it mapped?)",
                       proc->uid, proc->gid);
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    /* noNewPrivileges false (container tier): Landlock and seccomp without
     * no_new_privs need CAP_SYS_ADMIN of the sandbox's user namespace, held
     * until they are in place. Without it in the sentry's permitted set (an
     * exec'd process asking for more than the container), no_new_privs. */
    bool new_privs = proc->allow_new_privs && ctx->spec->tier < BH_TIER_KERNEL &&
                     bh_caps_have(CAP_SYS_ADMIN, false);
    if (bh_caps_guest_apply(proc, new_privs ? 1ull << CAP_SYS_ADMIN : 0, &err) < 0)
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    if (!cwd_entered && chdir(cwd) < 0) {
        if (errno == EACCES)
            bh_error_errno(&err, errno,
                           "enter the working directory `%s` as uid %u: its permissions do not "
                           "let that user in, nor the sandbox's setup",
                           cwd, proc->uid);
        else
            bh_error_errno(&err, errno, "enter the working directory `%s`", cwd);
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    if (!new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
        bh_error_errno(&err, errno, "set no_new_privs");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    /* Set after the last id change (which clears it); a sentry already gone
     * shows as another parent. */
    if (ctx->death_parent > 0 &&
        (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0 || getppid() != ctx->death_parent)) {
        bh_error_errno(&err, errno ? errno : ESRCH, "die with the sentry (PR_SET_PDEATHSIG)");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    bh_startup_mark("guest: stdio, rlimits, ids, caps, no_new_privs");
    if (bh_guest_landlock_fds(ctx->spec, n_extra, &err) < 0)
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    bh_startup_mark("guest: landlock");
    char program[4096];
    if (resolve_program(proc, program, sizeof(program), &err) < 0)
        guest_fail(sock, &err, bh_error_exit_code(&err));
    /* Still the sentry's copy, whose mm belongs to the host's user namespace
     * (sentry/README.md, "A second wall"): non-dumpable, so no other guest,
     * root with CAP_SYS_PTRACE or not, reaches it before its exec; its
     * listeners leave by the courier, made here, before any filter of ours. */
    struct courier courier = {.fds = {-1, -1}};
    if ((listeners_wanted(ctx) > 0 && courier_start(&courier, sock, &err) < 0) ||
        nproc_exact(proc, &err) < 0)
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    /* At the kernel tier the caller's filter goes first: the tier's refuses
     * seccomp(2) itself. At the container tier it goes last, so that where
     * both refuse a syscall the caller's errno is the one seen (of equal
     * actions the kernel takes the newest filter's), as under runc, where
     * the profile is the only filter. */
    int (*install)(const struct sock_fprog *, bool, struct bh_error *) =
        new_privs ? bh_policy_install_privileged : bh_policy_install;
    int user_listener = -1;
    if (ctx->extra_prog != NULL && ctx->spec->tier >= BH_TIER_KERNEL &&
        install(ctx->extra_prog, false, &err) < 0) {
        bh_error_prefix(&err, "caller's extra seccomp filter");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    int listener = ctx->notify_unserved ? bh_policy_install_unserved(ctx->prog, new_privs, &err)
                                        : install(ctx->prog, ctx->want_listener, &err);
    if (listener < 0) {
        bh_error_prefix(&err, "seccomp filter of the %s tier", bh_tier_name(ctx->spec->tier));
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    if (ctx->want_listener)
        courier.fds[courier.n++] = listener;
    bh_startup_mark("guest: program found, seccomp");
    if (ctx->extra_prog != NULL && ctx->spec->tier < BH_TIER_KERNEL &&
        (user_listener = install(ctx->extra_prog, ctx->want_user_listener, &err)) < 0) {
        bh_error_prefix(&err, "caller's extra seccomp filter");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    if (new_privs && bh_caps_guest_apply(proc, 0, &err) < 0) {
        bh_error_prefix(&err, "drop CAP_SYS_ADMIN once the filters are in place");
        guest_fail(sock, &err, BH_EXIT_REFUSED);
    }
    if (ctx->want_user_listener)
        courier.fds[courier.n++] = user_listener;
    if (listeners_wanted(ctx) > 0 && courier_deliver(&courier) < 0)
        _exit(BH_EXIT_REFUSED);
    /* From here only direct syscalls (send without an address is one): the
     * broker does not hold our listener yet, nor the caller's agent its own
     * (its profile may not notify sendto). */
    static const char ready[] = "{\"re\":\"ready\"}";
    if (send(sock, ready, sizeof(ready) - 1, MSG_NOSIGNAL) != (ssize_t)sizeof(ready) - 1)
        _exit(BH_EXIT_REFUSED);
    char go;
    if (read(sock, &go, 1) != 1)
        _exit(BH_EXIT_REFUSED);
#ifdef BH_TEST_HOOKS
    /* Test build only (tests/e2e/test_escape.c, "pre-exec window"): asked
     * by its own environment, the guest says "held" on stdout and waits for
     * a byte on stdin, so a test can look at it in the window between its
     * filters and its exec. */
    if (env_get(proc->env, "BULKHEAD_TEST_HOLD_BEFORE_EXEC") != NULL) {
        char b;
        if (write(1, "held\n", 5) != 5 || read(0, &b, 1) != 1)
            _exit(BH_EXIT_REFUSED);
    }
#endif
    bh_startup_mark("guest: go, execve");
    execve(program, proc->argv, proc->env ? proc->env : (char *[]){NULL});
    int e = errno;
    bh_msg_send_raw_error(sock, BH_ERROR_EXEC, e, "exec `%s`: %s", program, strerror(e));
    _exit(e == ENOENT ? BH_EXIT_NOT_FOUND : BH_EXIT_CANNOT_EXEC);
}

int bh_guest_spawn(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                   const int stdio[3], int console_fd, struct bh_guest *out, struct bh_error *err)
{
    return bh_guest_spawn_fds(ctx, proc, stdio, console_fd, NULL, 0, out, err);
}

static void guest_discard(struct bh_guest *out)
{
    kill(out->pid, SIGKILL);
    waitpid(out->pid, NULL, 0);
    if (out->pidfd >= 0)
        close(out->pidfd);
    if (out->setup_fd >= 0)
        close(out->setup_fd);
    if (out->listener >= 0)
        close(out->listener);
    if (out->user_listener >= 0)
        close(out->user_listener);
    out->pid = -1;
    out->pidfd = out->setup_fd = out->listener = out->user_listener = -1;
}

int bh_guest_fork(const struct bh_guest_ctx *ctx, const struct bh_process *proc, const int stdio[3],
                  int console_fd, const int *extra, size_t n_extra, struct bh_guest *out,
                  struct bh_error *err)
{
    if (n_extra > BH_EXEC_MAX_EXTRA_FDS)
        return bh_error_set(err, E2BIG, "at most %d extra fds", BH_EXEC_MAX_EXTRA_FDS);
    out->pid = -1;
    out->pidfd = out->setup_fd = out->listener = out->user_listener = -1;
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
        return bh_error_errno(err, errno, "guest setup socket");
    pid_t pid = fork();
    if (pid < 0) {
        close(sv[0]);
        close(sv[1]);
        return bh_error_errno(err, errno, "fork a guest");
    }
    if (pid == 0) {
        close(sv[0]);
        guest_main(ctx, proc, stdio, console_fd, extra, n_extra, sv[1]);
    }
    close(sv[1]);
    out->pid = pid;
    out->setup_fd = sv[0];
    out->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (out->pidfd < 0) {
        bh_error_errno(err, errno, "pidfd of guest %d", pid);
        guest_discard(out);
        return -1;
    }
    return 0;
}

int bh_guest_await_ready(const struct bh_guest_ctx *ctx, struct bh_guest *out, struct bh_error *err)
{
    pid_t pid = out->pid;
    json_t *msg = NULL;
    int64_t deadline = bh_now_ms() + GUEST_SETUP_TIMEOUT_MS;
    /* {"re":"listener"} with the listeners attached (the tier's, then the
     * caller's agent's), then "ready"; nothing else, in no other order. */
    size_t want = listeners_wanted(ctx);
    for (bool awaiting = want > 0;;) {
        int fds[2] = {-1, -1};
        size_t n_fd = 0;
        int r = bh_msg_recv(out->setup_fd, deadline, &msg, fds, 2, &n_fd, err);
        if (r <= 0) {
            if (r == 0 || err->code == ECONNRESET || err->code == EPIPE)
                bh_error_set(err, EPROTO, "guest %d died during its setup", pid);
            goto fail;
        }
        if (json_object_get(msg, "ev") != NULL) {
            for (size_t i = 0; i < n_fd; i++)
                close(fds[i]);
            bh_msg_to_error(msg, err);
            json_decref(msg);
            goto fail;
        }
        const char *re = json_string_value(json_object_get(msg, "re"));
        bool is_listener = re != NULL && strcmp(re, "listener") == 0;
        bool is_ready = re != NULL && strcmp(re, "ready") == 0;
        char what[32];
        snprintf(what, sizeof(what), "%s", re != NULL ? re : "a message without \"re\"");
        json_int_t n = json_integer_value(json_object_get(msg, "n"));
        json_decref(msg);
        if (awaiting && is_listener && n_fd == want && n == (json_int_t)want) {
            size_t i = 0;
            if (ctx->want_listener)
                out->listener = fds[i++];
            if (ctx->want_user_listener)
                out->user_listener = fds[i++];
            awaiting = false;
            continue;
        }
        for (size_t i = 0; i < n_fd; i++)
            close(fds[i]);
        if (awaiting || !is_ready || n_fd > 0) {
            bh_error_set(err, EPROTO,
                         "guest %d sent %s where its %zu seccomp listener(s) and then its ready "
                         "report were due",
                         pid, what, want);
            goto fail;
        }
        break;
    }
    return 0;
fail:
    guest_discard(out);
    return -1;
}

int bh_guest_spawn_fds(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                       const int stdio[3], int console_fd, const int *extra, size_t n_extra,
                       struct bh_guest *out, struct bh_error *err)
{
    if (bh_guest_fork(ctx, proc, stdio, console_fd, extra, n_extra, out, err) < 0)
        return -1;
    return bh_guest_await_ready(ctx, out, err);
}

int bh_guest_start(struct bh_guest *g, struct bh_error *err)
{
    if (g->setup_fd < 0)
        return 0;
    cleanup_close int fd = steal_fd(&g->setup_fd);
    if (send(fd, "g", 1, MSG_NOSIGNAL) != 1) {
        if (errno == EPIPE || errno == ECONNRESET)
            return bh_error_set(err, ESRCH, "guest %d died before its exec", g->pid);
        return bh_error_errno(err, errno, "start guest %d", g->pid);
    }
    json_t *msg = NULL;
    int r = bh_msg_recv(fd, bh_now_ms() + GUEST_SETUP_TIMEOUT_MS, &msg, NULL, 0, NULL, err);
    if (r < 0 && (err->code == ECONNRESET || err->code == EPIPE))
        /* it closed its end with our "go" unread: killed before the exec */
        return bh_error_set(err, ESRCH, "guest %d died before its exec", g->pid);
    if (r < 0)
        return -1;
    if (r == 0)
        return 0; /* the close-on-exec end closed: the exec happened */
    bh_msg_to_error(msg, err);
    json_decref(msg);
    return -1;
}
