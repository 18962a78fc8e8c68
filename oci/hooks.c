/* Owns running OCI hooks: each hook gets the container's state JSON on its
 * stdin, its own args and env, and is killed at its timeout. Hooks of the
 * container namespace kind (createContainer, startContainer) join the
 * container's cgroup, then the sandbox's network, ipc, uts, user, cgroup,
 * time, mount and pid namespaces, as its root: runc 1.1 runs them from its
 * init, which its parent put in the cgroup before the init unshared the
 * cgroup namespace (process_linux.go, nsexec.c). Whatever a createContainer
 * hook leaves running is ended before the sentry goes on. Output is captured
 * so a failed hook's error names what it said.
 *
 * When (runc's order, sentry/README.md "OCI hooks"): prestart, createRuntime
 * and createContainer while the sentry waits between its mounts and
 * pivot_root (bh_create_opts.mounted), createContainer with the root's
 * pre-pivot path as its cwd; startContainer at start, before the process
 * execs; poststart after start; poststop at delete. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "control.h"
#include "kernel-compat.h"
#include "oci-internal.h"

static const char *const kind_names[OCI_HOOK_COUNT] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

static char **strv_from_json(json_t *arr, const char *fallback)
{
    size_t n = json_is_array(arr) ? json_array_size(arr) : 0;
    char **v = calloc(n + 2, sizeof(char *));
    if (v == NULL)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *s = json_string_value(json_array_get(arr, i));
        if (s)
            v[k++] = (char *)s;
    }
    if (k == 0 && fallback)
        v[k++] = (char *)fallback;
    return v;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* "bad system call" for SIGSYS: the signal's name as runc's hooks report it. */
static void signal_text(int sig, char *buf, size_t len)
{
    const char *s = strsignal(sig);
    snprintf(buf, len, "%s", s ? s : "unknown signal");
    if (buf[0] >= 'A' && buf[0] <= 'Z')
        buf[0] = (char)(buf[0] - 'A' + 'a');
}

/* Namespaces a container-kind hook joins, in order: those host root must
 * join (a pod's host-owned netns) before the container's user namespace,
 * then user, cgroup and time (owned by it), mount (its cwd and root reset)
 * and pid (the hook forks into it). One it is in already is skipped (its
 * own user namespace cannot be joined again). */
static const struct {
    const char *name;
    int type;
} hook_ns[] = {
    {"net", CLONE_NEWNET},   {"ipc", CLONE_NEWIPC},       {"uts", CLONE_NEWUTS},
    {"user", CLONE_NEWUSER}, {"cgroup", CLONE_NEWCGROUP}, {"time", CLONE_NEWTIME},
    {"mnt", CLONE_NEWNS},    {"pid", CLONE_NEWPID},
};
#define HOOK_NS_N (sizeof(hook_ns) / sizeof(hook_ns[0]))

static void close_fds(int *fds, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bh_closep(&fds[i]);
}

/* Whether fd is the namespace this process is in (its own name). */
static bool same_ns(int fd, const char *name)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/self/ns/%s", name);
    struct stat a, b;
    return fstat(fd, &a) == 0 && stat(p, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/* Where a container-kind hook runs: the sentry's namespaces, the container's
 * cgroup (one directory per hierarchy) and the cwd; ns_pid 0: the runtime's. */
struct hook_place {
    pid_t ns_pid;
    struct bh_cgroup *cgroup; /* every hierarchy the container has */
    const char *cwd;
    const char *sentry_dir, *bundle; /* startContainer: where its sentry listens */
};

/* A hook's process as its waiter sees it: a child of ours (createContainer
 * and the runtime's kinds) or a guest the sentry spawned (startContainer),
 * whose end a thread waiting on the sentry writes to done_pipe. */
struct hook_proc {
    pid_t pid;
    struct bh_sentry_conn *conn;
    int done_pipe; /* read end */
    int status;
    int rc;
    struct bh_error err;
};

struct hook_ops {
    /* 1 with *status once it ended, 0 while it runs, -1 on an error */
    int (*ended)(struct hook_proc *hp, int *status, struct bh_error *err);
    void (*kill)(struct hook_proc *hp);
};

static int local_ended(struct hook_proc *hp, int *status, struct bh_error *err)
{
    (void)err;
    return waitpid(hp->pid, status, WNOHANG) == hp->pid;
}

static void local_kill(struct hook_proc *hp)
{
    kill(hp->pid, SIGKILL);
    waitpid(hp->pid, &hp->status, 0);
}

static const struct hook_ops local_ops = {local_ended, local_kill};

/* Feeds the state, takes the output (2 KiB kept), enforces the timeout and
 * turns how the hook ended into the error runc gives. Closes in and out. */
static int hook_finish(struct hook_proc *hp, const struct hook_ops *ops, const char *what,
                       const char *path, json_int_t timeout, const char *state_json, int in,
                       int out, struct bh_error *err)
{
    /* The state is small (a few KiB): the pipe buffer holds it, so a hook that
     * never reads stdin cannot block us. */
    signal(SIGPIPE, SIG_IGN);
    ssize_t w = write(in, state_json, strlen(state_json));
    (void)w;
    close(in);
    char output[2048];
    size_t olen = 0;
    double deadline = timeout > 0 ? now_s() + (double)timeout : 0;
    int status = 0;
    bool timed_out = false, out_open = true;
    for (;;) {
        int e = ops->ended(hp, &status, err);
        if (e < 0) {
            close(out);
            return bh_error_prefix(err, "%s hook `%s`", what, path);
        }
        if (e > 0)
            break;
        if (deadline > 0 && now_s() > deadline) {
            ops->kill(hp);
            status = hp->status;
            timed_out = true;
            break;
        }
        if (out_open) {
            struct pollfd pfd = {out, POLLIN, 0};
            if (poll(&pfd, 1, 50) > 0) {
                char tmp[512];
                ssize_t n = read(out, tmp, sizeof(tmp));
                if (n <= 0) {
                    out_open = false;
                } else {
                    size_t take = (size_t)n;
                    if (take > sizeof(output) - 1 - olen)
                        take = sizeof(output) - 1 - olen;
                    memcpy(output + olen, tmp, take);
                    olen += take;
                }
            }
        } else {
            usleep(10000);
        }
    }
    /* The hook may have exited before its output was read: take what is left
     * (without blocking on a grandchild that still holds the pipe). */
    if (out_open && fcntl(out, F_SETFL, O_NONBLOCK) == 0) {
        char tmp[512];
        ssize_t n;
        while (olen < sizeof(output) - 1 && (n = read(out, tmp, sizeof(tmp))) > 0) {
            size_t take = (size_t)n;
            if (take > sizeof(output) - 1 - olen)
                take = sizeof(output) - 1 - olen;
            memcpy(output + olen, tmp, take);
            olen += take;
        }
    }
    close(out);
    output[olen] = '\0';
    while (olen > 0 && (output[olen - 1] == '\n' || output[olen - 1] == ' '))
        output[--olen] = '\0';
    if (timed_out)
        return bh_error_set(err, ETIMEDOUT,
                            "%s hook `%s` did not finish within its timeout of %llds", what, path,
                            (long long)timeout);
    if (WIFSIGNALED(status)) {
        char sig[64];
        signal_text(WTERMSIG(status), sig, sizeof(sig));
        return bh_error_set(err, ECHILD,
                            "%s hook `%s`: error running hook: killed by signal %d (%s)%s%s", what,
                            path, WTERMSIG(status), sig, olen ? ": " : "", output);
    }
    if (WEXITSTATUS(status) != 0)
        return bh_error_set(err, ECHILD,
                            "%s hook `%s`: error running hook: exited with status %d%s%s", what,
                            path, WEXITSTATUS(status), olen ? ": " : "", output);
    return 0;
}

static int run_one(json_t *hook, const char *what, const char *state_json,
                   const struct hook_place *at, struct bh_error *err)
{
    pid_t ns_pid = at->ns_pid;
    const char *cwd = at->cwd;
    const char *path = json_string_value(json_object_get(hook, "path"));
    json_int_t timeout = json_integer_value(json_object_get(hook, "timeout"));
    cleanup_free char **args = strv_from_json(json_object_get(hook, "args"), path);
    cleanup_free char **env = strv_from_json(json_object_get(hook, "env"), NULL);
    if (path == NULL || args == NULL || env == NULL)
        return bh_error_set(err, EINVAL, "%s hook has no path", what);
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) < 0)
        return bh_error_errno(err, errno, "%s hook `%s`: pipe", what, path);
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return bh_error_errno(err, errno, "%s hook `%s`: pipe", what, path);
    }
    int nsfds[HOOK_NS_N];
    for (size_t i = 0; i < HOOK_NS_N; i++) {
        nsfds[i] = -1;
        if (ns_pid <= 0)
            continue;
        char p[64];
        snprintf(p, sizeof(p), "/proc/%d/ns/%s", ns_pid, hook_ns[i].name);
        nsfds[i] = open(p, O_RDONLY | O_CLOEXEC);
        if (nsfds[i] < 0) {
            int e = errno;
            close_fds(nsfds, HOOK_NS_N);
            close(in[0]), close(in[1]), close(out[0]), close(out[1]);
            return bh_error_errno(err, e, "%s hook `%s`: open the container's %s namespace", what,
                                  path, hook_ns[i].name);
        }
    }
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(in[0]), close(in[1]), close(out[0]), close(out[1]);
        return bh_error_errno(err, e, "%s hook `%s`: fork", what, path);
    }
    if (pid == 0) {
        struct bh_error herr = {0};
        dup2(in[0], 0);
        dup2(out[1], 1);
        dup2(out[1], 2);
        /* Not only at exec: the copy that waits in the container's pid
         * namespace must not hold the state's pipe open (a hook reading
         * its stdin to the end would wait forever). */
        close(in[1]);
        close(out[0]);
        if (ns_pid > 0) {
            /* As host root, before the user namespace: the cgroup files
             * are host root's. */
            if (at->cgroup != NULL && bh_cgroup_attach(at->cgroup, getpid(), &herr) < 0) {
                dprintf(2, "join the container's cgroup: %s", herr.msg);
                _exit(BH_EXIT_REFUSED);
            }
            for (size_t i = 0; i < HOOK_NS_N; i++)
                if (!same_ns(nsfds[i], hook_ns[i].name) && setns(nsfds[i], hook_ns[i].type) < 0) {
                    dprintf(2, "join the container's %s namespace: %s", hook_ns[i].name,
                            strerror(errno));
                    _exit(BH_EXIT_REFUSED);
                }
            /* This copy waits while the hook runs: it holds nothing of ours
             * (the sentry's sync socket would outlive a killed create) and
             * dies with us, taking the hook with it (its death signal). */
            syscall(SYS_close_range, 3U, ~0U, 0U);
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
            /* The container's root, not host root (unmapped in the container's
             * user namespace, so every file it made failed with EOVERFLOW).
             * A config that maps no root keeps the ids it had. */
            if (syscall(SYS_setresgid, 0, 0, 0) < 0 && errno != EINVAL) {
                dprintf(2, "become the container's root group: %s", strerror(errno));
                _exit(BH_EXIT_REFUSED);
            }
            if (syscall(SYS_setresuid, 0, 0, 0) < 0 && errno != EINVAL) {
                dprintf(2, "become the container's root: %s", strerror(errno));
                _exit(BH_EXIT_REFUSED);
            }
            /* createContainer: the root before pivot_root, as runc's init
             * chdirs into config.Rootfs before it runs them. */
            if (chdir(cwd ? cwd : "/") < 0) {
                dprintf(2, "enter `%s` in the container's mount namespace: %s", cwd ? cwd : "/",
                        strerror(errno));
                _exit(BH_EXIT_REFUSED);
            }
            /* The pid namespace is a child's: the hook runs in the container's,
             * where its /proc (the container's) shows it, as under runc. */
            pid_t h = fork();
            if (h < 0) {
                dprintf(2, "fork into the container's pid namespace: %s", strerror(errno));
                _exit(BH_EXIT_REFUSED);
            }
            if (h > 0) {
                int st = 0;
                while (waitpid(h, &st, 0) < 0 && errno == EINTR)
                    ;
                if (WIFSIGNALED(st)) {
                    /* Die of the same signal, so the runtime can name it;
                     * non-dumpable, so no core of this copy of bulkhead. */
                    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
                    signal(WTERMSIG(st), SIG_DFL);
                    sigset_t one;
                    sigemptyset(&one);
                    sigaddset(&one, WTERMSIG(st));
                    sigprocmask(SIG_UNBLOCK, &one, NULL);
                    raise(WTERMSIG(st));
                }
                _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
            }
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        /* Only the state and the output pipes: nothing bulkhead's caller left
         * open reaches a hook (runc's hooks see 0, 1 and 2 alone). */
        syscall(SYS_close_range, 3U, ~0U, 0U);
        execve(path, args, env);
        dprintf(2, "exec: %s", strerror(errno));
        _exit(BH_EXIT_NOT_FOUND);
    }
    close_fds(nsfds, HOOK_NS_N);
    close(in[0]);
    close(out[1]);
    struct hook_proc hp = {.pid = pid};
    return hook_finish(&hp, &local_ops, what, path, timeout, state_json, in[1], out[0], err);
}

/* ---- startContainer: a guest process of the container --------------------
 *
 * runc runs these from its init after the process's ids, capabilities,
 * no_new_privs and seccomp filter are in place (standard_init_linux.go), so a
 * startContainer hook holds exactly what the container's process holds. Its
 * path is resolved in the container's mount namespace: the image's file, and
 * by `start` a guest exec'd into the created container may have replaced it.
 * So the sentry spawns it as one more guest (the tier's filter, the broker at
 * the kernel tier, Landlock, the process's ids and capabilities), the way
 * `bulkhead exec` runs a process; run here as a joiner of the namespaces with
 * every capability and no filter, it gave whoever wrote that file an
 * unconfined process that stayed among the guests (tests/README.md, branch
 * redteam8). The sentry execs argv[0], so the hook's args[0] is its path. */

static void *sentry_wait_thread(void *arg)
{
    struct hook_proc *hp = arg;
    hp->rc = bh_sentry_wait(hp->conn, hp->pid, &hp->status, &hp->err);
    char c = 1;
    ssize_t r = write(hp->done_pipe, &c, 1);
    (void)r;
    return NULL;
}

struct sentry_hook {
    struct hook_proc hp;
    const char *sentry_dir;
    int done_read;
    pthread_t thread;
    bool joined;
};

static int sentry_ended(struct hook_proc *hp, int *status, struct bh_error *err)
{
    struct sentry_hook *sh = (struct sentry_hook *)hp;
    char c;
    if (read(sh->done_read, &c, 1) != 1)
        return 0;
    pthread_join(sh->thread, NULL);
    sh->joined = true;
    if (hp->rc < 0) {
        *err = hp->err;
        return -1;
    }
    *status = hp->status;
    return 1;
}

static void sentry_kill(struct hook_proc *hp)
{
    struct sentry_hook *sh = (struct sentry_hook *)hp;
    struct bh_sentry_conn *sc = NULL;
    struct bh_error e = {0};
    if (bh_sentry_connect(sh->sentry_dir, &sc, &e) == 0) {
        bh_sentry_signal(sc, hp->pid, SIGKILL, &e);
        bh_sentry_disconnect(sc);
    }
    pthread_join(sh->thread, NULL);
    sh->joined = true;
}

static const struct hook_ops sentry_ops = {sentry_ended, sentry_kill};

/* The container's process (from the bundle, as `exec` takes it) with the
 * hook's args and env, in /, without a terminal. */
static int hook_process(json_t *hook, const char *path, const char *bundle, struct bh_process *proc,
                        struct bh_error *err)
{
    json_t *pj = oci_bundle_process(bundle, err);
    if (pj == NULL)
        return -1;
    json_t *args = json_array();
    json_array_append_new(args, json_string(path));
    json_t *hargs = json_object_get(hook, "args");
    for (size_t i = 1; i < json_array_size(hargs); i++)
        if (json_is_string(json_array_get(hargs, i)))
            json_array_append(args, json_array_get(hargs, i));
    json_object_set_new(pj, "args", args);
    json_t *env = json_object_get(hook, "env");
    json_object_set_new(pj, "env", json_is_array(env) ? json_incref(env) : json_array());
    json_object_set_new(pj, "cwd", json_string("/"));
    json_object_set_new(pj, "terminal", json_false());
    bool nnp = false;
    int rc = oci_process_parse(pj, "process", proc, &nnp, err);
    json_decref(pj);
    return rc;
}

static int run_in_sentry(json_t *hook, const char *what, const char *state_json,
                         const struct hook_place *at, struct bh_error *err)
{
    const char *path = json_string_value(json_object_get(hook, "path"));
    json_int_t timeout = json_integer_value(json_object_get(hook, "timeout"));
    if (path == NULL)
        return bh_error_set(err, EINVAL, "%s hook has no path", what);
    struct bh_process proc = {0};
    if (hook_process(hook, path, at->bundle, &proc, err) < 0)
        return bh_error_prefix(err, "%s hook `%s`", what, path);
    int in[2] = {-1, -1}, out[2] = {-1, -1}, done[2] = {-1, -1};
    struct sentry_hook sh = {.sentry_dir = at->sentry_dir, .done_read = -1};
    struct bh_sentry_conn *conn = NULL;
    int rc = -1;
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 ||
        pipe2(done, O_CLOEXEC | O_NONBLOCK) < 0) {
        bh_error_errno(err, errno, "%s hook `%s`: pipe", what, path);
        goto out;
    }
    if (bh_sentry_connect(at->sentry_dir, &conn, err) < 0)
        goto out;
    const int stdio[3] = {in[0], out[1], out[1]};
    if (bh_sentry_exec(conn, &proc, stdio, NULL, &sh.hp.pid, err) < 0)
        goto out;
    bh_closep(&in[0]);
    bh_closep(&out[1]);
    sh.hp.conn = conn;
    sh.hp.done_pipe = done[1];
    sh.done_read = done[0];
    if (pthread_create(&sh.thread, NULL, sentry_wait_thread, &sh.hp) != 0) {
        bh_sentry_signal(conn, sh.hp.pid, SIGKILL, err);
        bh_error_set(err, EAGAIN, "%s hook `%s`: start the waiting thread", what, path);
        goto out;
    }
    rc = hook_finish(&sh.hp, &sentry_ops, what, path, timeout, state_json, steal_fd(&in[1]),
                     steal_fd(&out[0]), err);
    if (!sh.joined)
        pthread_join(sh.thread, NULL);
out:
    if (conn != NULL)
        bh_sentry_disconnect(conn);
    for (int i = 0; i < 2; i++) {
        bh_closep(&in[i]);
        bh_closep(&out[i]);
        bh_closep(&done[i]);
    }
    oci_process_free(&proc);
    return rc;
}

static int run_kind(const struct cli_globals *g, json_t *hooks, enum oci_hook_kind kind,
                    const char *state_json, const struct hook_place *at, struct bh_error *err)
{
    if (hooks == NULL)
        return 0;
    json_t *list = json_object_get(hooks, kind_names[kind]);
    if (!json_is_array(list))
        return 0;
    bool fatal = kind != OCI_HOOK_POSTSTART && kind != OCI_HOOK_POSTSTOP;
    size_t i;
    json_t *h;
    json_array_foreach(list, i, h)
    {
        struct bh_error herr = {0};
        char what[64];
        snprintf(what, sizeof(what), "%s[%zu]", kind_names[kind], i);
        int rc = kind == OCI_HOOK_START_CONTAINER ? run_in_sentry(h, what, state_json, at, &herr)
                                                  : run_one(h, what, state_json, at, &herr);
        if (rc < 0) {
            if (fatal) {
                *err = herr;
                return -1;
            }
            cli_log(g, "warning", "%s", herr.msg);
        }
    }
    return 0;
}

/* Where a container-kind hook runs; no cgroup without a cgroup path or a
 * namespace to run in (at->cgroup, if set, is the caller's to free). */
static int place_in(pid_t ns_pid, const char *cgroup_path, const char *cwd, struct hook_place *at,
                    struct bh_error *err)
{
    *at = (struct hook_place){.ns_pid = ns_pid, .cwd = cwd};
    if (ns_pid <= 0 || cgroup_path == NULL)
        return 0;
    if (bh_cgroup_open(cgroup_path, &at->cgroup, err) < 0)
        return bh_error_prefix(err, "the container's cgroup for its hooks");
    return 0;
}

int oci_hooks_run(const struct cli_globals *g, json_t *hooks, enum oci_hook_kind kind,
                  const char *state_json, pid_t ns_pid, const char *cgroup_path,
                  struct bh_error *err)
{
    if (hooks == NULL || json_array_size(json_object_get(hooks, kind_names[kind])) == 0)
        return 0;
    struct hook_place at;
    if (place_in(ns_pid, cgroup_path, NULL, &at, err) < 0)
        return -1;
    int rc = run_kind(g, hooks, kind, state_json, &at, err);
    bh_cgroup_free(at.cgroup);
    return rc;
}

bool oci_hooks_at_create(json_t *hooks)
{
    static const enum oci_hook_kind kinds[] = {OCI_HOOK_PRESTART, OCI_HOOK_CREATE_RUNTIME,
                                               OCI_HOOK_CREATE_CONTAINER};
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (json_array_size(json_object_get(hooks, kind_names[kinds[i]])) > 0)
            return true;
    return false;
}

/* Whether pid is listed among pids. */
static bool listed(const pid_t *pids, size_t n, pid_t pid)
{
    for (size_t i = 0; i < n; i++)
        if (pids[i] == pid)
            return true;
    return false;
}

/* Ends what createContainer hooks left running: every live process of the
 * container's cgroup but the sentry, which waits for "resume" (no guest
 * exists yet). The sentry also ends them when it is pid 1, but in a pod's
 * shared pid namespace it is not (and kill(-1) there would reach the pod's
 * other containers); the hooks joined the cgroup (runc's place for them),
 * and a hook's process cannot leave it (the cgroup files are host root's).
 * A pid is signalled through a pidfd opened while it was listed and checked
 * listed again after, so a reused pid is never hit. A hook that forks
 * faster than this ends it fails the create. */
static int end_leftovers(struct bh_cgroup *cg, const char *cgroup_path, pid_t sentry,
                         struct bh_error *err)
{
    int rc = bh_error_set(err, EAGAIN,
                          "what the createContainer hooks left running in cgroup `%s` kept "
                          "forking faster than it could be ended; refused",
                          cgroup_path);
    for (int round = 0; round < 200; round++) {
        cleanup_free pid_t *pids = NULL, *again = NULL;
        size_t n = 0, n_again = 0, live = 0;
        int fds[64];
        pid_t fd_pid[64];
        size_t n_fds = 0;
        if (bh_cgroup_pids(cg, &pids, &n, err) < 0) {
            rc = -1;
            break;
        }
        for (size_t i = 0; i < n && n_fds < BH_ARRAY_SIZE(fds); i++) {
            if (pids[i] == sentry)
                continue;
            int fd = (int)syscall(SYS_pidfd_open, pids[i], 0);
            struct pollfd p = {fd, POLLIN, 0};
            if (fd >= 0 && poll(&p, 1, 0) == 0) { /* POLLIN: it has exited */
                fd_pid[n_fds] = pids[i];
                fds[n_fds++] = fd;
            } else if (fd >= 0) {
                close(fd);
            }
        }
        if (bh_cgroup_pids(cg, &again, &n_again, err) < 0) {
            close_fds(fds, n_fds);
            rc = -1;
            break;
        }
        for (size_t i = 0; i < n_fds; i++)
            if (listed(again, n_again, fd_pid[i]) &&
                syscall(SYS_pidfd_send_signal, fds[i], SIGKILL, NULL, 0) == 0)
                live++;
        for (size_t i = 0; i < n_fds; i++) {
            struct pollfd p = {fds[i], POLLIN, 0};
            (void)poll(&p, 1, 1000); /* dead once it has exited */
        }
        close_fds(fds, n_fds);
        if (live == 0 && n_fds == 0) {
            rc = 0;
            break;
        }
    }
    return rc;
}

int oci_hooks_run_at_create(const struct cli_globals *g, json_t *hooks, const char *state_json,
                            pid_t ns_pid, const char *root, const char *cgroup_path,
                            struct bh_error *err)
{
    struct hook_place runtime = {0};
    if (run_kind(g, hooks, OCI_HOOK_PRESTART, state_json, &runtime, err) < 0 ||
        run_kind(g, hooks, OCI_HOOK_CREATE_RUNTIME, state_json, &runtime, err) < 0)
        return -1;
    if (json_array_size(json_object_get(hooks, kind_names[OCI_HOOK_CREATE_CONTAINER])) == 0)
        return 0;
    struct hook_place at;
    if (place_in(ns_pid, cgroup_path, root, &at, err) < 0)
        return -1;
    int rc = run_kind(g, hooks, OCI_HOOK_CREATE_CONTAINER, state_json, &at, err);
    if (at.cgroup != NULL &&
        end_leftovers(at.cgroup, cgroup_path, ns_pid, rc < 0 ? NULL : err) < 0 && rc == 0)
        rc = -1;
    bh_cgroup_free(at.cgroup);
    return rc;
}

int oci_hooks_run_start(const struct cli_globals *g, json_t *hooks, const char *state_json,
                        const char *sentry_dir, const char *bundle, struct bh_error *err)
{
    struct hook_place at = {.sentry_dir = sentry_dir, .bundle = bundle};
    return run_kind(g, hooks, OCI_HOOK_START_CONTAINER, state_json, &at, err);
}
