/* bulkhead-sentry: pid 1 of every sandbox. The front end executes it in the
 * host's user namespace with the sync socket on fd 3, and it forks itself
 * into the sandbox's fresh namespaces (fork_into_sandbox: its mm stays the
 * host namespace's), where the child becomes root of its user namespace. It reads the spec, opens
 * what it needs from the host, compiles the policies, builds the filesystem and network, confines
 * itself (its own uid, a few capabilities, non-dumpable, no_new_privs, sentry.policy), spawns the
 * first guest, says "ready", then serves: it reaps every process, forwards signals to the first
 * guest, answers the control channel, and when the first guest ends it kills what is left and exits
 * with the guest's status. See sentry/README.md. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aio-cap-internal.h"
#include "broker.h"
#include "cleanup.h"
#include "control.h"
#include "frame.h"
#include "mounts.h"
#include "netns.h"
#include "policy.h"
#include "caps-internal.h"
#include "guest-internal.h"
#include "msg-internal.h"
#include "sandbox.h"
#include "sentry-params-internal.h"
#include "spec-json-internal.h"
#include "spec-fds.h"
#include "startup-trace.h"

#define MAX_CONNS 64
#define MAX_EXITED 256
#define MAX_WAITERS 64

struct conn {
    int fd;
    bool is_sync;
};

struct exited {
    pid_t pid;
    int status;
};

struct waiter {
    int fd;
    pid_t pid;
};

/* An exec'd guest that waits for its client's start (the client reads the
 * host pid from the pidfd first, which it cannot once the guest is reaped). */
struct pending {
    int conn_fd;
    struct bh_guest g;
};
#define MAX_PENDING 16
/* one per guest still on its filter: the first and each exec'd one */
#define MAX_AIO_LISTENERS 1025

static struct {
    int sync_fd;
    bool detached;
    int listen_fd;
    int epfd;
    int sigfd;
    struct bh_sandbox_spec spec;
    struct bh_sentry_params params;
    struct sock_fprog prog, extra_prog, sentry_prog;
    bool have_extra;
    struct bh_guest_ctx ctx;
    struct bh_broker *broker;
    struct bh_guest first;
    bool first_started;
    bool start_at_once;   /* BH_CREATE_START: no "start" op will come */
    pid_t children[1024]; /* exec'd guests still alive */
    size_t n_children;
    struct exited exited[MAX_EXITED];
    size_t n_exited;
    struct waiter waiters[MAX_WAITERS];
    size_t n_waiters;
    struct conn conns[MAX_CONNS];
    size_t n_conns;
    struct pending pending[MAX_PENDING];
    size_t n_pending;
    int console_fd; /* connected by the front end to the OCI console socket */
    int dev_tree;   /* the front end's tmpfs of device nodes (mounts.h) */
    bool notify;    /* the guest's program notifies (kernel tier; io_setup below it) */
    /* Below the kernel tier: the guests' listeners, served by aio-cap.c. */
    struct bh_aio_cap aio;
    int aio_listeners[MAX_AIO_LISTENERS];
    size_t n_aio_listeners;
} S = {.sync_fd = -1,
       .listen_fd = -1,
       .epfd = -1,
       .sigfd = -1,
       .console_fd = -1,
       .dev_tree = -1,
       .aio = {.proc_fd = -1}};

static __attribute__((noreturn)) void die(const struct bh_error *err)
{
    if (S.sync_fd >= 0) {
        json_t *m = bh_msg_error(err, "error");
        bh_msg_send(S.sync_fd, m, NULL, 0, NULL);
        json_decref(m);
    }
    /* pid 1: its exit kills every guest of the namespace. */
    _exit(BH_EXIT_REFUSED);
}

static void reply(int fd, json_t *msg, const int *fds, size_t n)
{
    bh_msg_send(fd, msg, fds, n, NULL);
    json_decref(msg);
}

static void reply_error(int fd, const struct bh_error *err)
{
    reply(fd, bh_msg_error(err, "re"), NULL, 0);
}

/* ---- setup, as root of the user namespace ------------------------------- */

static int read_spec(struct bh_error *err)
{
    json_t *msg = NULL;
    int fds[BH_SPEC_FDS_MAX];
    size_t n = 0;
    int r = bh_msg_recv(S.sync_fd, bh_now_ms() + 30000, &msg, fds, BH_ARRAY_SIZE(fds), &n, err);
    if (r <= 0)
        return r == 0 ? bh_error_set(err, EPIPE, "the front end left before sending the spec") : -1;
    const char *op = json_string_value(json_object_get(msg, "op"));
    json_decref(msg);
    if (op == NULL || n < 1)
        return bh_error_set(err, EPROTO, "expected the spec, got something else");
    struct stat st;
    if (fstat(fds[0], &st) < 0 || st.st_size <= 0 || st.st_size > BH_SPEC_MAX)
        return bh_error_set(err, EPROTO, "the spec is empty or above %d bytes", BH_SPEC_MAX);
    cleanup_free char *text = malloc((size_t)st.st_size);
    if (text == NULL || pread(fds[0], text, (size_t)st.st_size, 0) != st.st_size)
        return bh_error_errno(err, errno, "read the spec");
    close(fds[0]);
    json_error_t jerr;
    json_t *o = json_loadb(text, (size_t)st.st_size, JSON_REJECT_DUPLICATES, &jerr);
    if (o == NULL)
        return bh_error_set(err, EPROTO, "the spec is not JSON: %s", jerr.text);
    if (bh_spec_from_json(o, &S.spec, err) < 0) {
        json_decref(o);
        return -1;
    }
    json_t *p = json_object_get(o, "params");
    const char *state_dir = NULL;
    json_int_t su = 0, sg = 0;
    int det = 0, mn = 0, mu = 0, extra = 0, console = 0, jp = 0, trace = 0, start = 0, pm = 0;
    if (json_unpack(p, "{s?b,s?b,s:b,s?s,s:b,s:b,s:I,s:I,s:b,s:b,s?b,s?b}", "trace", &trace,
                    "start", &start, "detached", &det, "state_dir", &state_dir, "extra_policy",
                    &extra, "console", &console, "sentry_uid", &su, "sentry_gid", &sg, "made_netns",
                    &mn, "made_utsns", &mu, "joined_pidns", &jp, "pause_mounted", &pm) < 0) {
        json_decref(o);
        return bh_error_set(err, EPROTO, "the spec's sentry parameters are malformed");
    }
    /* A detached sandbox's control socket, bound by the front end, comes
     * with it (spec-fds.h). */
    struct bh_spec_fds sf;
    if (bh_spec_fds_unpack(fds, n, extra, det, console, &sf, err) < 0) {
        json_decref(o);
        return -1;
    }
    bool notify = false, sentry_notify = false, extra_notify = false;
    if (bh_bpf_blob_read(sf.slot[BH_SPEC_FD_GUEST_BPF], &notify, &S.prog, err) < 0 ||
        bh_bpf_blob_read(sf.slot[BH_SPEC_FD_SENTRY_BPF], &sentry_notify, &S.sentry_prog, err) < 0 ||
        (extra &&
         bh_bpf_blob_read(sf.slot[BH_SPEC_FD_EXTRA_BPF], &extra_notify, &S.extra_prog, err) < 0)) {
        json_decref(o);
        return -1;
    }
    close(sf.slot[BH_SPEC_FD_GUEST_BPF]);
    close(sf.slot[BH_SPEC_FD_SENTRY_BPF]);
    if (extra)
        close(sf.slot[BH_SPEC_FD_EXTRA_BPF]);
    if (det) {
        S.listen_fd = sf.slot[BH_SPEC_FD_LISTEN];
        fcntl(S.listen_fd, F_SETFL, O_NONBLOCK);
        /* listen() here, not in the front end: clients' SO_PEERCRED then
         * names the sentry, whose host pid they need. */
        if (listen(S.listen_fd, 16) < 0) {
            json_decref(o);
            return bh_error_errno(err, errno, "listen on the control socket");
        }
    }
    if (console)
        S.console_fd = sf.slot[BH_SPEC_FD_CONSOLE];
    S.have_extra = extra;
    /* The kernel tier's program brokers; the container tier's notifies only
     * io_setup, counted by aio-cap.c; none below. */
    S.notify = notify;
    if ((notify != (S.spec.tier == BH_TIER_KERNEL) && S.spec.tier != BH_TIER_CONTAINER) ||
        sentry_notify ||
        (extra_notify && (!S.spec.extra_policy_listener || S.spec.tier >= BH_TIER_KERNEL))) {
        json_decref(o);
        return bh_error_set(err, EPROTO, "the seccomp programs do not fit the %s tier",
                            bh_tier_name(S.spec.tier));
    }
    json_t *mounts = json_object_get(o, "mounts");
    for (size_t i = 0; i < S.spec.n_mounts; i++) {
        json_t *idx = json_object_get(json_array_get(mounts, i), "tree_fd_index");
        S.spec.mounts[i].tree_fd = -1;
        if (idx == NULL)
            continue;
        S.spec.mounts[i].tree_fd = bh_spec_fds_tree(&sf, json_integer_value(idx));
        if (S.spec.mounts[i].tree_fd < 0) {
            json_decref(o);
            return bh_error_set(err, EPROTO, "mount %zu names a prepared tree that was not sent",
                                i);
        }
        S.spec.mounts[i].has_tree_fd = true;
    }
    json_t *ridx = json_object_get(o, "rootfs_tree_fd_index");
    if (ridx != NULL) {
        int fd = json_is_integer(ridx) ? bh_spec_fds_tree(&sf, json_integer_value(ridx)) : -1;
        if (fd < 0) {
            json_decref(o);
            return bh_error_set(err, EPROTO, "the rootfs names a prepared tree that was not sent");
        }
        S.spec.has_rootfs_tree_fd = true;
        S.spec.rootfs_tree_fd = fd;
    }
    json_t *didx = json_object_get(o, "dev_tree_fd_index");
    if (didx != NULL) {
        int fd = json_is_integer(didx) ? bh_spec_fds_tree(&sf, json_integer_value(didx)) : -1;
        if (fd < 0) {
            json_decref(o);
            return bh_error_set(err, EPROTO, "the device nodes name a tree that was not sent");
        }
        S.dev_tree = fd;
    }
    json_t *sidx = json_object_get(o, "sysfs_tree_fd_index");
    if (sidx != NULL) {
        int fd = json_is_integer(sidx) ? bh_spec_fds_tree(&sf, json_integer_value(sidx)) : -1;
        if (fd < 0) {
            json_decref(o);
            return bh_error_set(err, EPROTO, "/sys names a prepared tree that was not sent");
        }
        S.spec.has_sysfs_tree_fd = true;
        S.spec.sysfs_tree_fd = fd;
    }
    bh_startup_trace_on = trace;
    S.start_at_once = start;
    S.params.detached = det;
    S.params.state_dir = state_dir ? strdup(state_dir) : NULL;
    S.params.sentry_uid = (uint32_t)su;
    S.params.sentry_gid = (uint32_t)sg;
    S.params.made_netns = mn;
    S.params.made_utsns = mu;
    S.params.joined_pidns = jp;
    S.params.pause_mounted = pm;
    json_decref(o);
    S.detached = det;
    return 0;
}

/* The pause before pivot_root (mounts.h): "mounted" with the root's path
 * to the front end, which runs its hooks and answers "resume". Anything
 * else, or the front end gone, ends the setup. */
static int pause_mounted(void *arg, const char *root, struct bh_error *err)
{
    (void)arg;
    json_t *ev = json_pack("{s:s,s:s}", "ev", "mounted", "root", root);
    int r = bh_msg_send(S.sync_fd, ev, NULL, 0, err);
    json_decref(ev);
    if (r < 0)
        return bh_error_prefix(err, "tell the front end the mounts are in place");
    bh_startup_mark("sentry: paused for hooks");
    json_t *msg = NULL;
    r = bh_msg_recv(S.sync_fd, -1, &msg, NULL, 0, NULL, err);
    if (r <= 0)
        return r == 0 ? bh_error_set(err, EPIPE, "the front end left while its hooks ran") : -1;
    const char *op = json_string_value(json_object_get(msg, "op"));
    bool resume = op != NULL && strcmp(op, "resume") == 0;
    json_decref(msg);
    if (!resume)
        return bh_error_set(err, EPROTO, "expected \"resume\" after the hooks, got `%s`",
                            op ? op : "?");
    /* A createContainer hook forks into this pid namespace: nothing of it
     * may stay, unconfined (no filter, every capability, outside the
     * cgroup) among the guests, nor mount under the root once the broker
     * has read the mounts. pid 1 alone: in a pod's namespace -1 would reach
     * other containers (sentry/README.md, "OCI hooks"). */
    if (getpid() != 1)
        return 0;
    if (kill(-1, SIGKILL) < 0 && errno != ESRCH)
        return bh_error_errno(err, errno, "end what the hooks left in the sandbox");
    /* Orphans are ours: reaped now, so no zombie meets the live checks. */
    while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
        ;
    return 0;
}

/* Caps on what the kernel counts per user inside the sandbox's own user
 * namespace, and on its own ipc namespace's pools (sentry/README.md, "Shared
 * kernel state"). The namespaces start at INT_MAX or the kernel's large
 * defaults; the host-level caps charge the slot's uid, these bound each
 * guest uid below them whatever the host's sysctls say. Written as root of
 * the user namespace, before the sentry drops CAP_SYS_RESOURCE; the spec's
 * own sysctls come after and win. */
static int write_default_caps(struct bh_error *err)
{
    long long shm = S.spec.limits.memory_bytes > 0 ? S.spec.limits.memory_bytes : 512LL << 20;
    char shmmax[32], shmall[32];
    snprintf(shmmax, sizeof(shmmax), "%lld", shm);
    snprintf(shmall, sizeof(shmall), "%lld", shm / 4096);
    static const char *const user_caps[][2] = {
        {"user/max_inotify_instances", "128"}, {"user/max_inotify_watches", "8192"},
        {"user/max_fanotify_groups", "16"},    {"user/max_fanotify_marks", "8192"},
        {"user/max_user_namespaces", "64"},    {"user/max_mnt_namespaces", "64"},
        {"user/max_pid_namespaces", "64"},     {"user/max_net_namespaces", "64"},
        {"user/max_ipc_namespaces", "64"},     {"user/max_uts_namespaces", "64"},
        {"user/max_cgroup_namespaces", "64"},  {"user/max_time_namespaces", "64"},
    };
    const char *const ipc_caps[][2] = {
        {"kernel/msgmni", "64"},           {"kernel/msgmnb", "65536"},
        {"kernel/shmmni", "64"},           {"kernel/shmmax", shmmax},
        {"kernel/shmall", shmall},         {"kernel/sem", "250 8192 32 64"},
        {"fs/mqueue/queues_max", "16"},    {"fs/mqueue/msg_max", "10"},
        {"fs/mqueue/msgsize_max", "8192"},
    };
    bool own_ipc = S.spec.ns_paths[BH_NS_IPC] == NULL;
    size_t n_user = BH_ARRAY_SIZE(user_caps), n = n_user + (own_ipc ? BH_ARRAY_SIZE(ipc_caps) : 0);
    for (size_t i = 0; i < n; i++) {
        const char *key = i < n_user ? user_caps[i][0] : ipc_caps[i - n_user][0];
        const char *v = i < n_user ? user_caps[i][1] : ipc_caps[i - n_user][1];
        char path[128];
        snprintf(path, sizeof(path), "/proc/sys/%s", key);
        cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0 && errno == ENOENT && strncmp(key, "user/max_fanotify", 17) == 0)
            continue; /* a kernel without fanotify has no such counter to cap */
        if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t)strlen(v))
            return bh_error_errno(err, errno,
                                  "cap the sandbox's share of a shared kernel pool: write %s to "
                                  "%s",
                                  v, path);
    }
    return 0;
}

static int write_sysctls(struct bh_error *err)
{
    for (size_t i = 0; i < S.spec.n_sysctls; i++) {
        char path[512];
        snprintf(path, sizeof(path), "/proc/sys/%s", S.spec.sysctls[i].key);
        for (char *p = path + 10; *p; p++)
            if (*p == '.')
                *p = '/';
        /* Net and ipc sysctls resolve to the opener's namespaces, which are
         * the sandbox's: the host's /proc is still mounted here. */
        cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        const char *v = S.spec.sysctls[i].value;
        if (fd < 0 || write(fd, v, strlen(v)) != (ssize_t)strlen(v))
            return bh_error_errno(err, errno, "sysctl %s=%s (only namespaced sysctls can be set)",
                                  S.spec.sysctls[i].key, v);
    }
    return 0;
}

static int confine_self(struct bh_error *err)
{
    if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "make the sentry non-dumpable");
    if (bh_caps_sentry_drop(&S.spec.process, S.params.sentry_uid, S.params.sentry_gid, err) < 0)
        return bh_error_prefix(err, "confine the sentry");
    /* New credentials cleared the death signal. */
    if (!S.detached && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "set the sentry's death signal");
    /* no_new_privs is inherited: for a guest whose noNewPrivileges is false
     * (container tier, bh_process.allow_new_privs) the sentry confines itself
     * holding CAP_SYS_ADMIN of the sandbox's user namespace instead, and
     * lowers it after; it never execs, so no_new_privs would add nothing. */
    bool new_privs = S.spec.process.allow_new_privs && S.spec.tier < BH_TIER_KERNEL;
    if (new_privs && bh_caps_effective(CAP_SYS_ADMIN, true, err) < 0)
        return bh_error_prefix(err, "confine the sentry");
    if (!new_privs && prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "set no_new_privs on the sentry");
    /* The broker acts for guests outside their own Landlock domain: taking
     * the same rules here makes its writes obey them. Guests nest below this
     * domain, so the sentry may still read their memory and signal them,
     * and they may not signal it. Below the kernel tier there is no broker,
     * and a domain here would bar every guest from the files of fds its
     * caller passed (exec --preserve-fds), which runc's guests reopen through
     * /proc/self/fd: each guest takes its own domain, allowing them. */
    if (S.spec.tier >= BH_TIER_KERNEL && bh_guest_landlock(&S.spec, err) < 0)
        return bh_error_prefix(err, "confine the sentry");
    if ((new_privs ? bh_policy_install_privileged : bh_policy_install)(&S.sentry_prog, false, err) <
        0)
        return bh_error_prefix(err, "the sentry's own seccomp policy");
    bh_policy_prog_free(&S.sentry_prog);
    if (new_privs && bh_caps_effective(CAP_SYS_ADMIN, false, err) < 0)
        return bh_error_prefix(err, "confine the sentry");
    return 0;
}

static void add_conn(int fd, bool is_sync)
{
    if (S.n_conns >= MAX_CONNS) {
        close(fd);
        return;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (epoll_ctl(S.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        return;
    }
    S.conns[S.n_conns++] = (struct conn){fd, is_sync};
}

/* A container-tier guest's listener: its io_setup calls come to aio-cap.c.
 * Without it they would fail with ENOSYS, so a failure here is the exec's. */
static int aio_listener_add(int fd, struct bh_error *err)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
    if (S.n_aio_listeners >= MAX_AIO_LISTENERS) {
        close(fd);
        return bh_error_set(err, EAGAIN, "too many guests in this sandbox to count AIO for");
    }
    if (epoll_ctl(S.epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
        int e = errno;
        close(fd);
        return bh_error_errno(err, e, "watch a guest's seccomp listener");
    }
    S.aio_listeners[S.n_aio_listeners++] = fd;
    return 0;
}

/* false: fd is not a guest's listener. A listener whose guests are all gone
 * hangs up and is dropped. */
static bool on_aio_listener(int fd, uint32_t events)
{
    size_t i = 0;
    while (i < S.n_aio_listeners && S.aio_listeners[i] != fd)
        i++;
    if (i == S.n_aio_listeners)
        return false;
    bool gone = (events & (EPOLLHUP | EPOLLERR)) && !(events & EPOLLIN);
    if (gone || bh_aio_cap_serve(&S.aio, fd) < 0) {
        epoll_ctl(S.epfd, EPOLL_CTL_DEL, fd, NULL);
        close(fd);
        S.aio_listeners[i] = S.aio_listeners[--S.n_aio_listeners];
    }
    return true;
}

static void drop_conn(int fd)
{
    epoll_ctl(S.epfd, EPOLL_CTL_DEL, fd, NULL);
    for (size_t i = 0; i < S.n_waiters;) {
        if (S.waiters[i].fd == fd)
            S.waiters[i] = S.waiters[--S.n_waiters];
        else
            i++;
    }
    for (size_t i = 0; i < S.n_pending;) {
        if (S.pending[i].conn_fd == fd) {
            /* Its client left before starting it: it never runs. */
            kill(S.pending[i].g.pid, SIGKILL);
            close(S.pending[i].g.setup_fd);
            S.pending[i] = S.pending[--S.n_pending];
        } else {
            i++;
        }
    }
    for (size_t i = 0; i < S.n_conns; i++) {
        if (S.conns[i].fd == fd) {
            S.conns[i] = S.conns[--S.n_conns];
            break;
        }
    }
    if (fd == S.sync_fd)
        S.sync_fd = -1;
    close(fd);
}

/* ---- the end ------------------------------------------------------------- */

/* Not pid 1 (a pod's pid namespace): kill(-1) would reach the pod's other
 * containers, so kill our children only. Their orphans re-parent to us (we
 * are their subreaper) and are killed on the next round, until none is left. */
static void kill_descendants(void)
{
    for (;;) {
        DIR *d = opendir("/proc/self/task");
        struct dirent *t;
        while (d != NULL && (t = readdir(d)) != NULL) {
            if (t->d_name[0] == '.')
                continue;
            char path[300];
            snprintf(path, sizeof(path), "/proc/self/task/%s/children", t->d_name);
            cleanup_fclose FILE *f = fopen(path, "re");
            int pid;
            while (f != NULL && fscanf(f, "%d", &pid) == 1)
                kill(pid, SIGKILL);
        }
        if (d != NULL)
            closedir(d);
        pid_t r;
        while ((r = waitpid(-1, NULL, 0)) < 0 && errno == EINTR)
            ;
        if (r < 0)
            return; /* ECHILD: none left */
    }
}

static __attribute__((noreturn)) void finish(int status)
{
    bh_startup_mark("sentry: first guest reaped");
    if (S.params.joined_pidns) {
        kill_descendants();
    } else {
        /* pid 1 signalling -1 reaches every other process of the namespace. */
        kill(-1, SIGKILL);
        while (waitpid(-1, NULL, 0) > 0 || errno == EINTR)
            ;
    }
    bh_startup_mark("sentry: the rest killed and reaped");
    if (S.sync_fd >= 0) {
        json_t *m = json_pack("{s:s,s:i}", "ev", "exit", "status", status);
        bh_msg_send(S.sync_fd, m, NULL, 0, NULL);
        json_decref(m);
    }
    _exit(bh_status_to_exit_code(status)); /* broker threads may run: no atexit */
}

static void record_exit(pid_t pid, int status)
{
    for (size_t i = 0; i < S.n_children; i++) {
        if (S.children[i] != pid)
            continue;
        S.children[i] = S.children[--S.n_children];
        bool answered = false;
        for (size_t w = 0; w < S.n_waiters;) {
            if (S.waiters[w].pid == pid) {
                reply(S.waiters[w].fd, json_pack("{s:s,s:i}", "re", "status", "status", status),
                      NULL, 0);
                S.waiters[w] = S.waiters[--S.n_waiters];
                answered = true;
            } else {
                w++;
            }
        }
        if (!answered) {
            if (S.n_exited == MAX_EXITED)
                memmove(S.exited, S.exited + 1, sizeof(S.exited[0]) * --S.n_exited);
            S.exited[S.n_exited++] = (struct exited){pid, status};
        }
        return;
    }
}

static void reap(void)
{
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid <= 0)
            return;
        if (pid == S.first.pid)
            finish(status);
        record_exit(pid, status);
    }
}

static void on_signal(void)
{
    struct signalfd_siginfo si;
    while (read(S.sigfd, &si, sizeof(si)) == sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            reap();
            continue;
        }
        switch (sig) {
        case SIGTERM:
        case SIGINT:
        case SIGHUP:
        case SIGQUIT:
        case SIGUSR1:
        case SIGUSR2:
        case SIGWINCH:
        case SIGCONT:
            if (S.first.pid > 0)
                kill(S.first.pid, sig);
            break;
        default:
            break;
        }
    }
}

/* ---- requests ------------------------------------------------------------ */

static void op_exec(int fd, json_t *msg, int *fds, size_t n_fds)
{
    struct bh_error err = {0};
    struct bh_process proc;
    if (n_fds < 3) {
        bh_error_set(&err, EPROTO, "exec needs three stdio fds");
        reply_error(fd, &err);
        return;
    }
    if (bh_process_from_json(json_object_get(msg, "process"), &proc, &err) < 0) {
        reply_error(fd, &err);
        return;
    }
    if (proc.argv == NULL || proc.argv[0] == NULL) {
        bh_error_set(&err, EINVAL, "exec needs a command");
        bh_process_free(&proc);
        reply_error(fd, &err);
        return;
    }
    if (S.n_children >= BH_ARRAY_SIZE(S.children)) {
        bh_error_set(&err, EAGAIN, "too many exec'd processes in this sandbox");
        bh_process_free(&proc);
        reply_error(fd, &err);
        return;
    }
    /* Layout: stdio, the console connection if any, then extra fds. */
    json_int_t n_extra = json_integer_value(json_object_get(msg, "extra_fds"));
    bool has_console = json_is_true(json_object_get(msg, "console"));
    if (json_object_get(msg, "console") == NULL)
        has_console = n_fds > 3; /* a client from before extra fds */
    if (n_extra < 0 || n_extra > BH_EXEC_MAX_EXTRA_FDS ||
        n_fds != 3 + (has_console ? 1u : 0u) + (size_t)n_extra) {
        bh_error_set(&err, EPROTO, "exec: %zu fds do not match the request", n_fds);
        bh_process_free(&proc);
        reply_error(fd, &err);
        return;
    }
    if (bh_guest_extra_fds_check(&S.spec, fds + 3 + (has_console ? 1 : 0), (size_t)n_extra, &err) <
        0) {
        bh_process_free(&proc);
        reply_error(fd, &err);
        return;
    }
    struct bh_guest g;
    int r = bh_guest_spawn_fds(&S.ctx, &proc, fds, has_console ? fds[3] : -1,
                               fds + 3 + (has_console ? 1 : 0), (size_t)n_extra, &g, &err);
    bh_process_free(&proc);
    if (r < 0) {
        reply_error(fd, &err);
        return;
    }
    S.children[S.n_children++] = g.pid;
    /* An exec'd process has a listener of its own: it goes back with the
     * pid to a caller that asks for it (for the caller's seccomp agent,
     * before the process starts, as runc hands each one over); else it is
     * closed here and the process's notified syscalls fail with ENOSYS. */
    int user_listener = -1;
    if (json_is_true(json_object_get(msg, "agent")))
        user_listener = g.user_listener;
    else if (g.user_listener >= 0)
        close(g.user_listener);
    g.user_listener = -1;
    if (g.listener >= 0) {
        if ((S.broker ? bh_broker_add_listener(S.broker, g.listener, &err)
                      : aio_listener_add(g.listener, &err)) < 0) {
            kill(g.pid, SIGKILL);
            close(g.pidfd);
            close(g.setup_fd);
            if (user_listener >= 0)
                close(user_listener);
            reply_error(fd, &err);
            return;
        }
        g.listener = -1;
    }
    if (S.n_pending >= MAX_PENDING) {
        bh_error_set(&err, EAGAIN, "too many exec'd processes waiting to start");
        kill(g.pid, SIGKILL);
        close(g.pidfd);
        close(g.setup_fd);
        if (user_listener >= 0)
            close(user_listener);
        reply_error(fd, &err);
        return;
    }
    S.pending[S.n_pending++] = (struct pending){fd, g};
    const int out_fds[2] = {g.pidfd, user_listener};
    reply(fd, json_pack("{s:s,s:i,s:b}", "re", "pid", "pid", g.pid, "listener", user_listener >= 0),
          out_fds, user_listener >= 0 ? 2 : 1);
    close(g.pidfd);
    if (user_listener >= 0)
        close(user_listener);
    S.pending[S.n_pending - 1].g.pidfd = -1;
}

static void op_start(int fd, json_t *msg)
{
    struct bh_error err = {0};
    json_t *jp = json_object_get(msg, "pid");
    if (jp == NULL) {
        if (S.first_started) {
            bh_error_set(&err, EALREADY, "the sandbox was already started");
            reply_error(fd, &err);
            return;
        }
        S.first_started = true;
        if (bh_guest_start(&S.first, &err) < 0)
            reply_error(fd, &err);
        else
            reply(fd, json_pack("{s:s}", "re", "ok"), NULL, 0);
        return;
    }
    pid_t pid = (pid_t)json_integer_value(jp);
    for (size_t i = 0; i < S.n_pending; i++) {
        if (S.pending[i].g.pid != pid || S.pending[i].conn_fd != fd)
            continue;
        struct bh_guest g = S.pending[i].g;
        S.pending[i] = S.pending[--S.n_pending];
        if (bh_guest_start(&g, &err) < 0)
            reply_error(fd, &err);
        else
            reply(fd, json_pack("{s:s}", "re", "ok"), NULL, 0);
        return;
    }
    bh_error_set(&err, ESRCH, "process %d is not waiting to start", pid);
    reply_error(fd, &err);
}

static void op_wait(int fd, json_t *msg)
{
    struct bh_error err = {0};
    pid_t pid = (pid_t)json_integer_value(json_object_get(msg, "pid"));
    for (size_t i = 0; i < S.n_exited; i++) {
        if (S.exited[i].pid == pid) {
            int st = S.exited[i].status;
            S.exited[i] = S.exited[--S.n_exited];
            reply(fd, json_pack("{s:s,s:i}", "re", "status", "status", st), NULL, 0);
            return;
        }
    }
    for (size_t i = 0; i < S.n_children; i++) {
        if (S.children[i] == pid && S.n_waiters < MAX_WAITERS) {
            S.waiters[S.n_waiters++] = (struct waiter){fd, pid};
            return;
        }
    }
    bh_error_set(&err, ESRCH,
                 "process %d was not started by exec in this sandbox (or was "
                 "already waited for)",
                 pid);
    reply_error(fd, &err);
}

static void op_signal(int fd, json_t *msg)
{
    struct bh_error err = {0};
    pid_t pid = (pid_t)json_integer_value(json_object_get(msg, "pid"));
    int sig = (int)json_integer_value(json_object_get(msg, "sig"));
    if (pid == 0)
        pid = S.first.pid;
    if (pid <= 1 || sig <= 0 || sig >= 65) {
        bh_error_set(&err, EINVAL, "signal %d to process %d refused", sig, pid);
        reply_error(fd, &err);
        return;
    }
    if (kill(pid, sig) < 0) {
        bh_error_errno(&err, errno, "signal %d to process %d", sig, pid);
        reply_error(fd, &err);
        return;
    }
    reply(fd, json_pack("{s:s}", "re", "ok"), NULL, 0);
}

/* The first guest's listener of the caller's filter, handed out once: the
 * sentry keeps no copy, so when the agent closes it (or dies) the notified
 * syscalls fail with ENOSYS instead of waiting for no one. */
static void op_seccomp_listener(int fd)
{
    struct bh_error err = {0};
    if (S.first.user_listener < 0) {
        bh_error_set(&err, ENOENT,
                     "no seccomp agent listener to hand out (none asked for, or already "
                     "handed out)");
        reply_error(fd, &err);
        return;
    }
    reply(fd, json_pack("{s:s}", "re", "listener"), &S.first.user_listener, 1);
    close(S.first.user_listener);
    S.first.user_listener = -1;
}

static void op_conn(int fd)
{
    struct bh_error err = {0};
    int sv[2];
    if (S.n_conns + 1 >= MAX_CONNS ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        bh_error_set(&err, EMFILE, "no more channels to this sentry");
        reply_error(fd, &err);
        return;
    }
    add_conn(sv[0], false);
    reply(fd, json_pack("{s:s}", "re", "conn"), &sv[1], 1);
    close(sv[1]);
}

static void on_request(int fd)
{
    struct bh_error err = {0};
    json_t *msg = NULL;
    int fds[4 + BH_EXEC_MAX_EXTRA_FDS];
    size_t n = 0;
    int r = bh_msg_recv(fd, -1, &msg, fds, BH_ARRAY_SIZE(fds), &n, &err);
    if (r <= 0) {
        bool was_sync = fd == S.sync_fd;
        drop_conn(fd);
        /* An owned sandbox lives no longer than its creator. */
        if (was_sync && !S.detached)
            finish(W_EXITCODE(0, SIGKILL));
        return;
    }
    const char *op = json_string_value(json_object_get(msg, "op"));
    if (op == NULL) {
        bh_error_set(&err, EPROTO, "request without an op");
        reply_error(fd, &err);
    } else if (strcmp(op, "start") == 0) {
        op_start(fd, msg);
    } else if (strcmp(op, "exec") == 0) {
        op_exec(fd, msg, fds, n);
    } else if (strcmp(op, "wait") == 0) {
        op_wait(fd, msg);
    } else if (strcmp(op, "signal") == 0) {
        op_signal(fd, msg);
    } else if (strcmp(op, "conn") == 0) {
        op_conn(fd);
    } else if (strcmp(op, "seccomp_listener") == 0) {
        op_seccomp_listener(fd);
    } else {
        bh_error_set(&err, EPROTO, "unknown request `%s`", op);
        reply_error(fd, &err);
    }
    for (size_t i = 0; i < n; i++)
        close(fds[i]);
    json_decref(msg);
}

static void on_accept(void)
{
    for (;;) {
        int fd = accept4(S.listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return;
        /* Only the host side: a process of this sandbox has a pid here. The
         * socket itself is mode 0600 in the runtime's root-only state dir. */
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || cred.pid != 0) {
            close(fd);
            continue;
        }
        add_conn(fd, false);
    }
}

static __attribute__((noreturn)) void serve(void)
{
    for (;;) {
        struct epoll_event evs[8];
        int n = epoll_wait(S.epfd, evs, 8, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == S.sigfd)
                on_signal();
            else if (fd == S.listen_fd)
                on_accept();
            else if (!on_aio_listener(fd, evs[i].events))
                on_request(fd);
        }
    }
}

/* The second wall (sentry/README.md): this process was exec'd in the
 * host's user namespace, as the slot's unprivileged owner, so its mm
 * belongs to that namespace; a fork keeps it, even into a new user
 * namespace. So it forks itself into the sandbox's namespaces (the
 * creator's child still: CLONE_PARENT), hands the front end a pidfd on
 * that child and exits. The child, pid 1, waits for its id maps, becomes
 * root of its namespace and goes on as the sentry; non-dumpable later, it
 * is then out of reach of any guest, root of the namespace or not, with or
 * without CAP_SYS_PTRACE there. */
static void fork_into_sandbox(const char *arg)
{
    unsigned long flags = 0;
    int owned = 0, new_time = 0, pod_userns = -1;
    struct bh_error err = {0};
    if (sscanf(arg, "%lu,%d,%d,%d", &flags, &owned, &new_time, &pod_userns) != 4 ||
        !(flags & CLONE_NEWUSER) == (pod_userns < 0)) {
        bh_error_set(&err, EINVAL, "bad --fork argument `%s`", arg);
        die(&err);
    }
    /* A pod's sandboxes share its user namespace: joined by this process
     * (exec'd as host root for that), which leaves its mm the host's. */
    if (pod_userns >= 0) {
        if (setns(pod_userns, CLONE_NEWUSER) < 0) {
            bh_error_errno(&err, errno, "join the pod's user namespace");
            die(&err);
        }
        close(pod_userns);
    }
    /* Its own name, so ps and tests tell this short-lived first stage from
     * the sentry it forks. */
    prctl(PR_SET_NAME, "bulkhead-stage1", 0, 0, 0);
    int pidfd = -1;
    struct clone_args ca = {.flags = flags | CLONE_PARENT | CLONE_PIDFD,
                            .pidfd = (uint64_t)(uintptr_t)&pidfd};
    long pid = syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid < 0) {
        bh_error_errno(&err, errno, "clone the sandbox's namespaces");
        die(&err);
    }
    if (pid > 0) {
        bh_startup_mark("sentry: forked into the namespaces");
        json_t *m = json_pack("{s:s}", "ev", "cloned");
        int r = bh_msg_send(S.sync_fd, m, &pidfd, 1, &err);
        json_decref(m);
        _exit(r < 0 ? BH_EXIT_REFUSED : 0);
    }
    prctl(PR_SET_NAME, "bulkhead-sentry", 0, 0, 0);
    json_t *go = NULL;
    int r = bh_msg_recv(S.sync_fd, -1, &go, NULL, 0, NULL, &err);
    const char *op = r > 0 ? json_string_value(json_object_get(go, "op")) : NULL;
    bool is_go = op != NULL && strcmp(op, "go") == 0;
    bool is_abort = op != NULL && strcmp(op, "abort") == 0;
    json_decref(go);
    if (is_abort) {
        /* The front end gave up before it had this process's pidfd (the
         * first stage died, or its message went unread): it gets one now,
         * so it can reap this process, its child. */
        int self = (int)syscall(SYS_pidfd_open, getpid(), 0);
        json_t *m = json_pack("{s:s}", "ev", "aborted");
        if (self >= 0)
            bh_msg_send(S.sync_fd, m, &self, 1, &err);
        json_decref(m);
    }
    if (!is_go)
        _exit(BH_EXIT_REFUSED); /* the front end gave up: nothing more to say to it */
    bh_startup_mark("sentry: go");
    if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
        bh_error_errno(&err, errno, "become root of the sandbox's user namespace");
        die(&err);
    }
    /* Its own session: a terminal's ^C reaches the front end, which
     * forwards it once, not the sentry as well. */
    if (setsid() < 0) {
        bh_error_errno(&err, errno, "new session for the sentry");
        die(&err);
    }
    /* A fork has no death signal; the exec'd parent's was for it alone. */
    if (owned && prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) < 0) {
        bh_error_errno(&err, errno, "set the sentry's death signal");
        die(&err);
    }
    if (new_time && unshare(CLONE_NEWTIME) < 0) {
        bh_error_errno(&err, errno, "new time namespace for the guests");
        die(&err);
    }
}

int main(int argc, char **argv)
{
    long long entered = bh_startup_now();
    struct bh_error err = {0};
    int slot_fd = -1;
    const char *fork_arg = NULL;
    for (int i = 1; i < argc; i++) {
        if (strncmp(argv[i], "--sync-fd=", 10) == 0)
            S.sync_fd = atoi(argv[i] + 10);
        else if (strncmp(argv[i], "--slot-fd=", 10) == 0)
            slot_fd = atoi(argv[i] + 10);
        else if (strncmp(argv[i], "--fork=", 7) == 0)
            fork_arg = argv[i] + 7;
    }
    if (S.sync_fd < 3) {
        fprintf(stderr, "bulkhead-sentry: started by the sandbox core only (bulkhead do, "
                        "bulkheadd, bulkhead create)\n");
        return BH_EXIT_REFUSED;
    }
    fcntl(S.sync_fd, F_SETFD, FD_CLOEXEC);
    if (slot_fd >= 0)
        fcntl(slot_fd, F_SETFD, FD_CLOEXEC); /* held for the sandbox's life */
    if (fork_arg != NULL)
        fork_into_sandbox(fork_arg);

    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    S.sigfd = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
    if (S.sigfd < 0) {
        bh_error_errno(&err, errno, "signalfd");
        die(&err);
    }
    if (read_spec(&err) < 0)
        die(&err);
    bh_startup_mark_at("sentry: exec'd, in main", entered);
    bh_startup_mark("sentry: spec read");
    /* The front end sends the spec once this process is in the sandbox's
     * cgroup: the namespace made now shows that cgroup as "/". A failure
     * ends the sandbox before any guest exists. */
    if (S.spec.ns_paths[BH_NS_CGROUP] == NULL && !S.spec.inherit_cgroup_ns &&
        unshare(CLONE_NEWCGROUP) < 0) {
        bh_error_errno(&err, errno, "new cgroup namespace");
        die(&err);
    }
    /* pid 1, whose death kills every guest; or, in a pod's pid namespace,
     * the subreaper of its guests, which die with it by PDEATHSIG. */
    if (getpid() != 1 && !S.params.joined_pidns) {
        bh_error_set(&err, EPERM, "the sentry is not pid 1 of its pid namespace: refused");
        die(&err);
    }
    if (S.params.joined_pidns && prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
        bh_error_errno(&err, errno, "become the subreaper of the guests");
        die(&err);
    }
    int console_fd = S.console_fd;
    if (write_default_caps(&err) < 0 || write_sysctls(&err) < 0)
        die(&err);
    bh_startup_mark("sentry: per-userns caps, sysctls");
    struct bh_mounts_pause pause = {.fn = pause_mounted};
    struct bh_mounts_made made = {0};
    if (bh_mounts_setup_paused(&S.spec, S.dev_tree, S.params.pause_mounted ? &pause : NULL, &made,
                               &err) < 0) {
        bh_error_prefix(&err, "filesystem");
        die(&err);
    }
    bh_closep(&S.dev_tree);
    /* Opened before any guest runs; aio-cap.c checks it is the sandbox's. */
    if (S.spec.tier == BH_TIER_CONTAINER && S.notify)
        bh_aio_cap_init(&S.aio, open("/proc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC),
                        BH_AIO_CAP_EVENTS, BH_AIO_CAP_CONTEXTS);
    bh_startup_mark("sentry: mounts, pivot_root");
    if (S.params.made_netns && bh_netns_loopback_up(&err) < 0) {
        bh_error_prefix(&err, "network namespace");
        die(&err);
    }
    const char *host = S.spec.hostname ? S.spec.hostname : "bulkhead";
    if (S.params.made_utsns && sethostname(host, strlen(host)) < 0) {
        bh_error_errno(&err, errno, "set hostname `%s`", host);
        die(&err);
    }
    bh_startup_mark("sentry: lo, hostname");
    if (confine_self(&err) < 0)
        die(&err);
    bh_startup_mark("sentry: confined");

    S.ctx = (struct bh_guest_ctx){
        .spec = &S.spec,
        .prog = &S.prog,
        .extra_prog = S.have_extra ? &S.extra_prog : NULL,
        /* A caller's agent takes the one listener a
         * process may have: io_setup then fails with
         * ENOSYS (container tier, aio-cap.c). */
        .want_listener = S.notify && (S.spec.tier == BH_TIER_KERNEL ||
                                      !(S.have_extra && S.spec.extra_policy_listener)),
        .want_user_listener = S.have_extra && S.spec.extra_policy_listener,
        .notify_unserved = S.notify && S.spec.tier < BH_TIER_KERNEL && S.have_extra &&
                           S.spec.extra_policy_listener,
        .death_parent = S.params.joined_pidns ? getpid() : 0};
    /* The guest sets itself up while the broker's threads are made; it
     * execs only once the broker holds its listener (below). */
    int stdio[3] = {0, 1, 2};
    if (bh_guest_fork(&S.ctx, &S.spec.process, stdio, console_fd, NULL, 0, &S.first, &err) < 0)
        die(&err);
    /* The broker caches lookups only on the tmpfs it is told of: a list
     * cut short here would make calls slower, never wrong, but keep the
     * two bounds together. */
    _Static_assert(BH_BROKER_OWN_TMPFS_MAX >= BH_MOUNTS_OWN_TMPFS_MAX,
                   "the broker must take every tmpfs the mounts report");
    if (S.spec.tier == BH_TIER_KERNEL) {
        struct bh_broker_config cfg = {.guest_uid = S.spec.process.uid,
                                       .guest_gid = S.spec.process.gid,
                                       .sentry_pid = getpid(),
                                       .root_fd = -1,
                                       /* kernel.policy notifies the whole
                                        * set*id family (test_policy checks
                                        * it against the handler table). */
                                       .ids_notified = true,
                                       /* and umask (likewise) */
                                       .umask_notified = true,
                                       .own_tmpfs = made.own_tmpfs,
                                       .n_own_tmpfs = made.n_own_tmpfs};
        if (bh_broker_new(&cfg, &S.broker, &err) < 0 || bh_broker_start(S.broker, &err) < 0) {
            bh_error_prefix(&err, "the kernel tier's syscall broker");
            die(&err);
        }
    }
    bh_startup_mark("sentry: broker started");
    if (bh_guest_await_ready(&S.ctx, &S.first, &err) < 0)
        die(&err);
    bh_startup_mark("sentry: guest ready");
    if (console_fd >= 0)
        close(console_fd);
    /* Container tools read the container's umask from pid 1's status, and
     * pid 1 is the sentry: it wears its first guest's. It creates no file
     * from here on, and the broker's workers set each caller's own. */
    umask(S.spec.process.umask >= 0 ? (mode_t)S.spec.process.umask : 022);
    if (S.first.listener >= 0 && S.broker) {
        if (bh_broker_add_listener(S.broker, S.first.listener, &err) < 0)
            die(&err);
        S.first.listener = -1;
    }
    if (S.start_at_once) {
        /* The front end has nothing to check between create and start: the
         * guest execs now, past its filter and with its listener held, and
         * "ready" then means started (or the exec's error ends the setup). */
        S.first_started = true;
        if (bh_guest_start(&S.first, &err) < 0)
            die(&err);
        bh_startup_mark("sentry: guest started");
    }
    /* Tracing keeps a copy of the front end's stderr for the marks of the
     * tear-down; never without BULKHEAD_STARTUP_TRACE=1. */
    if (bh_startup_trace_on)
        bh_startup_trace_fd = fcntl(2, F_DUPFD_CLOEXEC, 3);
    /* The guest has its own copies: the sentry holds no one's stdio. */
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3; i++) {
        if (null >= 0)
            dup3(null, i, O_CLOEXEC);
        else
            close(i);
    }
    if (null > 2)
        close(null);

    S.epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = S.sigfd};
    if (S.epfd < 0 || epoll_ctl(S.epfd, EPOLL_CTL_ADD, S.sigfd, &ev) < 0) {
        bh_error_errno(&err, errno, "epoll");
        die(&err);
    }
    if (S.listen_fd >= 0) {
        ev.data.fd = S.listen_fd;
        epoll_ctl(S.epfd, EPOLL_CTL_ADD, S.listen_fd, &ev);
    }
    if (S.first.listener >= 0) {
        if (aio_listener_add(S.first.listener, &err) < 0)
            die(&err);
        S.first.listener = -1;
    }
    add_conn(S.sync_fd, true);
    json_t *ready = json_pack("{s:s}", "ev", "ready");
    bh_msg_send(S.sync_fd, ready, NULL, 0, NULL);
    json_decref(ready);
    serve();
}
