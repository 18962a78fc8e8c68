/* Owns `bulkhead exec`: one more process in a running container, spawned
 * inside the sandbox by its sentry (so it is confined like any guest), and
 * the small proxy that stands for it on the host. The shim must reap and
 * signal the pid it is given, but the guest is a child of the sentry; so the
 * proxy (re-parented to the shim once `bulkhead exec --detach` exits) waits
 * for the guest over the control channel, forwards every signal it gets, and
 * ends the way the guest ended. It holds none of the caller's stdio. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "control.h"
#include "oci-internal.h"

struct waiter {
    struct bh_sentry_conn *conn;
    pid_t pid;
    int status;
    int rc;
    struct bh_error err;
    int done_pipe;
};

static void *wait_thread(void *arg)
{
    struct waiter *w = arg;
    w->rc = bh_sentry_wait(w->conn, w->pid, &w->status, &w->err);
    char c = 1;
    ssize_t r = write(w->done_pipe, &c, 1);
    (void)r;
    return NULL;
}

/* Waits for pid while forwarding signals (all blocked by the caller) to it.
 * Returns 0 with *status, or -1. */
static int wait_forwarding(struct bh_sentry_conn *conn, const char *state_dir, pid_t pid,
                           struct oci_tty *tty, int *status, struct bh_error *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return bh_error_errno(err, errno, "pipe");
    struct waiter w = {.conn = conn, .pid = pid, .done_pipe = p[1]};
    pthread_t t;
    if (pthread_create(&t, NULL, wait_thread, &w) != 0) {
        close(p[0]);
        close(p[1]);
        return bh_error_set(err, EAGAIN, "start the waiting thread");
    }
    sigset_t all;
    sigfillset(&all);
    for (;;) {
        char c;
        struct timespec ts = {0, 50 * 1000 * 1000};
        siginfo_t si;
        int sig = sigtimedwait(&all, &si, &ts);
        if (sig == SIGWINCH && tty != NULL && tty->master >= 0) {
            oci_tty_resize(tty);
        } else if (sig > 0 && sig != SIGCHLD && sig != SIGPIPE) {
            struct bh_sentry_conn *sc = NULL;
            struct bh_error serr = {0};
            if (bh_sentry_connect(state_dir, &sc, &serr) == 0) {
                bh_sentry_signal(sc, pid, sig, &serr);
                bh_sentry_disconnect(sc);
            }
        }
        int fl = fcntl(p[0], F_GETFL);
        fcntl(p[0], F_SETFL, fl | O_NONBLOCK);
        if (read(p[0], &c, 1) == 1)
            break;
    }
    pthread_join(t, NULL);
    close(p[0]);
    close(p[1]);
    if (w.rc < 0) {
        *err = w.err;
        return -1;
    }
    *status = w.status;
    return 0;
}

/* The container's seccomp profile when it sends syscalls to an agent
 * (listenerPath), else NULL: an exec'd process gets a listener of its own,
 * handed to the same agent, as runc does. */
static json_t *load_bundle_agent_profile(const char *bundle)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", bundle);
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, NULL);
    json_t *sc = json_object_get(json_object_get(doc, "linux"), "seccomp");
    json_t *lp = json_object_get(sc, "listenerPath");
    json_t *out = json_is_string(lp) && json_string_length(lp) > 0 ? json_deep_copy(sc) : NULL;
    json_decref(doc);
    return out;
}

/* The command line of `exec`, as parsed. */
struct exec_opts {
    const char *process_file, *pid_file, *console_socket, *cwd, *user, *apparmor, *label, *preserve;
    bool detach, tty, nnp, ignore_paused;
    struct oci_list env, gids, caps, cgroups;
};

static void exec_opts_free(struct exec_opts *o)
{
    oci_list_free(&o->env);
    oci_list_free(&o->gids);
    oci_list_free(&o->caps);
    oci_list_free(&o->cgroups);
}

/* --preserve-fds N: our fds 3..3+N-1 become the process's, as with runc. */
static int exec_preserved_fds(const struct cli_globals *g, const char *preserve,
                              int extra[BH_EXEC_MAX_EXTRA_FDS], int *n_extra)
{
    *n_extra = 0;
    if (preserve == NULL)
        return 0;
    char *end;
    long v = strtol(preserve, &end, 10);
    if (*preserve == '\0' || *end != '\0' || v < 0 || v > BH_EXEC_MAX_EXTRA_FDS) {
        cli_report_error(g, "exec: --preserve-fds `%s` must be a number from 0 to %d", preserve,
                         BH_EXEC_MAX_EXTRA_FDS);
        return -1;
    }
    for (int i = 0; i < (int)v; i++) {
        extra[i] = 3 + i;
        if (fcntl(extra[i], F_GETFD) < 0) {
            cli_report_error(g, "exec: --preserve-fds %ld: fd %d is not open", v, extra[i]);
            return -1;
        }
    }
    *n_extra = (int)v;
    return 0;
}

static int exec_check_status(const struct cli_globals *g, const char *id,
                             const struct oci_state *st, bool ignore_paused)
{
    const char *status = oci_state_status(st);
    if (strcmp(status, "running") == 0 || strcmp(status, "created") == 0 ||
        (ignore_paused && strcmp(status, "paused") == 0))
        return 0;
    /* runc's words for the paused case, which scripts match. */
    if (strcmp(status, "paused") == 0)
        cli_report_error(g,
                         "exec: cannot exec in a paused container (`%s`; resume it or use "
                         "--ignore-paused)",
                         id);
    else
        cli_report_error(g, "exec: cannot exec in container `%s`: it is %s", id, status);
    return -1;
}

/* The process from --process FILE (or - for stdin). */
static json_t *exec_process_from_file(const struct cli_globals *g, const char *process_file)
{
    json_error_t jerr;
    json_t *pj = strcmp(process_file, "-") == 0
                     ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                     : json_load_file(process_file, JSON_REJECT_DUPLICATES, &jerr);
    if (pj == NULL) {
        cli_report_error(g, "exec: --process `%s` line %d column %d: %s", process_file, jerr.line,
                         jerr.column, jerr.text);
        return NULL;
    }
    /* config.json must name the user; an exec'd process without one
     * runs as the container's root, as under runc. */
    if (json_is_object(pj) && json_object_get(pj, "user") == NULL)
        json_object_set_new(pj, "user", json_pack("{s:i,s:i}", "uid", 0, "gid", 0));
    return pj;
}

/* The bundle's process with the command line's args and overrides; *rc is
 * set for a refusal of the command line itself. */
static json_t *exec_process_from_args(const struct cli_globals *g, const struct exec_opts *o,
                                      const char *bundle, int argc, char **argv, int pos, int *rc)
{
    struct bh_error err = {0};
    if (pos + 1 >= argc) {
        cli_report_error(g, "exec: a command to run is required (or --process FILE)");
        *rc = CLI_EXIT_REFUSED;
        return NULL;
    }
    json_t *pj = oci_bundle_process(bundle, &err);
    if (pj == NULL) {
        cli_report_error(g, "exec: %s", err.msg);
        return NULL;
    }
    json_t *args = json_array();
    for (int i = pos + 1; i < argc; i++)
        json_array_append_new(args, json_string(argv[i]));
    json_object_set_new(pj, "args", args);
    json_object_set_new(pj, "terminal", json_boolean(o->tty));
    if (o->cwd)
        json_object_set_new(pj, "cwd", json_string(o->cwd));
    json_t *e = json_object_get(pj, "env");
    if (!json_is_array(e)) {
        e = json_array();
        json_object_set_new(pj, "env", e);
    }
    for (size_t i = 0; i < o->env.n; i++)
        json_array_append_new(e, json_string(o->env.items[i]));
    if (o->user) {
        unsigned long uid = 0, gid = 0;
        char *end;
        uid = strtoul(o->user, &end, 10);
        if (*end == ':')
            gid = strtoul(end + 1, &end, 10);
        if (*end != '\0' || end == o->user) {
            cli_report_error(g, "exec: --user `%s` must be UID or UID:GID (numbers)", o->user);
            *rc = CLI_EXIT_REFUSED;
            json_decref(pj);
            return NULL;
        }
        json_t *u = json_object();
        json_object_set_new(u, "uid", json_integer((json_int_t)uid));
        json_object_set_new(u, "gid", json_integer((json_int_t)gid));
        json_object_set_new(pj, "user", u);
    }
    if (o->gids.n) {
        json_t *u = json_object_get(pj, "user");
        json_t *ag = json_array();
        for (size_t i = 0; i < o->gids.n; i++)
            json_array_append_new(ag, json_integer(strtoll(o->gids.items[i], NULL, 10)));
        json_object_set_new(u, "additionalGids", ag);
    }
    return pj;
}

/* runc's rules and words for the console socket, as at create. */
static int exec_check_terminal(const struct cli_globals *g, const char *console_socket, bool detach,
                               bool terminal)
{
    if (console_socket != NULL && (!detach || !terminal)) {
        cli_report_error(g,
                         "cannot use console socket if runc will not detach or allocate tty "
                         "(%s)",
                         detach ? "the process has no terminal"
                                : "in the foreground the pty is relayed to our own stdio");
        return -1;
    }
    if (terminal && console_socket == NULL && detach) {
        cli_report_error(g, "cannot allocate tty if runc will detach without setting console "
                            "socket (the process has a terminal: give --console-socket)");
        return -1;
    }
    return 0;
}

/* As at create: host root sets oom_score_adj, the sandbox's ids may not. */
/* Spawns the process; with --cgroup it is held before exec until it has
 * joined its sub-cgroups, and killed if it cannot. */
/* Lets a process made held by bh_sentry_exec_held run, once its seccomp
 * agent holds its listener and it is in the sub-cgroups `--cgroup` named;
 * when either fails it is killed and never runs. Closes listener. */
static int exec_start_held(struct bh_sentry_conn *conn, const struct oci_state *st,
                           const struct oci_exec_cgroups *cgs, pid_t pid, int listener,
                           struct bh_error *err)
{
    int rc = 0;
    if (listener >= 0) {
        json_t *profile = load_bundle_agent_profile(st->bundle);
        cleanup_free char *state_json = oci_state_text(st, "running");
        rc = profile != NULL && state_json != NULL
                 ? oci_seccomp_agent_send(profile, state_json, pid, listener, err)
                 : bh_error_set(err, ENOENT,
                                "the container's seccomp profile no longer names its "
                                "agent (listenerPath) in the bundle's config.json");
        json_decref(profile);
        close(listener);
    }
    if (rc == 0 && cgs->n > 0)
        rc = oci_exec_cgroups_join(cgs, pid, err);
    if (rc < 0) {
        struct bh_error ignored = {0};
        int status;
        if (bh_sentry_signal(conn, pid, SIGKILL, &ignored) == 0)
            bh_sentry_wait(conn, pid, &status, &ignored);
        return -1;
    }
    return bh_sentry_exec_release(conn, pid, err);
}

static void exec_set_oom_score_adj(pid_t pid, int adj)
{
    char path[64], buf[16];
    snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", pid);
    int len = snprintf(buf, sizeof(buf), "%d", adj);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t w = write(fd, buf, (size_t)len);
        (void)w; /* the process may already be gone: nothing to adjust */
        close(fd);
    }
}

/* The detached proxy's life: holds nothing of the caller's but the channel,
 * and ends the way the guest ended. Never returns. */
static void exec_proxy_main(const struct cli_globals *g, struct bh_sentry_conn *conn,
                            const char *state_dir, pid_t pid)
{
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        close(null);
    }
    prctl(PR_SET_NAME, "bulkhead-exec", 0, 0, 0);
    int wst = 0;
    struct bh_error werr = {0};
    if (wait_forwarding(conn, state_dir, pid, NULL, &wst, &werr) < 0) {
        /* Nobody reads our stderr any more: the log is the only witness. */
        cli_log(g, "error", "exec proxy: wait for process %d: %s", pid, werr.msg);
        _exit(BH_EXIT_FAILED);
    }
    if (WIFSIGNALED(wst)) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        signal(WTERMSIG(wst), SIG_DFL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, WTERMSIG(wst));
        sigprocmask(SIG_UNBLOCK, &one, NULL);
        kill(getpid(), WTERMSIG(wst));
        _exit(128 + WTERMSIG(wst));
    }
    _exit(WEXITSTATUS(wst));
}

/* Detached: forks the proxy that stands for the process and writes its pid.
 * Called with every signal blocked; restores *old. */
static int exec_detach(const struct cli_globals *g, struct bh_sentry_conn *conn,
                       const char *state_dir, pid_t pid, const char *pid_file, const sigset_t *old)
{
    struct bh_error err = {0};
    pid_t proxy = fork();
    if (proxy < 0) {
        int e = errno;
        struct bh_error kerr = {0};
        bh_sentry_signal(conn, pid, SIGKILL, &kerr);
        sigprocmask(SIG_SETMASK, old, NULL);
        cli_report_error(g, "exec: fork the proxy: %s", strerror(e));
        return -1;
    }
    if (proxy == 0)
        exec_proxy_main(g, conn, state_dir, pid);
    sigprocmask(SIG_SETMASK, old, NULL);
    if (pid_file && oci_write_pid_file(pid_file, proxy, &err) < 0) {
        kill(proxy, SIGKILL);
        cli_report_error(g, "exec: pid file: %s", err.msg);
        return -1;
    }
    return 0;
}

/* Attached: we are the proxy ourselves (the container's lock is not held
 * while waiting). Called with every signal blocked; restores *old. Returns
 * 0 with *wst, or -1. */
static int exec_attached(const struct cli_globals *g, struct bh_sentry_conn *conn,
                         const char *state_dir, pid_t pid, const char *pid_file,
                         struct oci_tty *relay, const sigset_t *old, int *wst)
{
    struct bh_error err = {0};
    /* The pid is the process's own host pid, as runc writes it. */
    if (pid_file && oci_write_pid_file(pid_file, pid, &err) < 0) {
        struct bh_error kerr = {0};
        bh_sentry_signal(conn, pid, SIGKILL, &kerr);
        sigprocmask(SIG_SETMASK, old, NULL);
        cli_report_error(g, "exec: pid file: %s", err.msg);
        return -1;
    }
    if (relay->listen_fd >= 0 && oci_tty_attach(relay, &err) < 0) {
        struct bh_error kerr = {0};
        bh_sentry_signal(conn, pid, SIGKILL, &kerr);
        sigprocmask(SIG_SETMASK, old, NULL);
        cli_report_error(g, "exec: %s", err.msg);
        return -1;
    }
    int r = wait_forwarding(conn, state_dir, pid, relay, wst, &err);
    sigprocmask(SIG_SETMASK, old, NULL);
    if (r < 0) {
        cli_report_error(g, "exec: %s", err.msg);
        return -1;
    }
    return 0;
}

int cmd_exec(const struct cli_globals *g, int argc, char **argv)
{
    struct exec_opts o = {0};
    const struct oci_opt opts[] = {
        {"process", 'p', OCI_OPT_STRING, &o.process_file},
        {"detach", 'd', OCI_OPT_BOOL, &o.detach},
        {"pid-file", 0, OCI_OPT_STRING, &o.pid_file},
        {"console-socket", 0, OCI_OPT_STRING, &o.console_socket},
        {"tty", 't', OCI_OPT_BOOL, &o.tty},
        {"cwd", 0, OCI_OPT_STRING, &o.cwd},
        {"env", 'e', OCI_OPT_LIST, &o.env},
        {"user", 'u', OCI_OPT_STRING, &o.user},
        {"additional-gids", 'g', OCI_OPT_LIST, &o.gids},
        {"cap", 'c', OCI_OPT_LIST, &o.caps},
        {"no-new-privs", 0, OCI_OPT_BOOL, &o.nnp},
        {"apparmor", 0, OCI_OPT_STRING, &o.apparmor},
        {"process-label", 0, OCI_OPT_STRING, &o.label},
        {"preserve-fds", 0, OCI_OPT_STRING, &o.preserve},
        {"ignore-paused", 0, OCI_OPT_BOOL, &o.ignore_paused},
        {"cgroup", 0, OCI_OPT_LIST, &o.cgroups},
    };
    bool help = false;
    struct bh_error err = {0};
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help, &err);
    int rc = 1;
    bool ran = false;
    json_t *pj = NULL;
    struct bh_sentry_conn *conn = NULL;
    struct bh_process proc = {0};
    struct oci_state st = {0};
    struct oci_exec_cgroups cgs = {0};
    struct oci_tty relay;
    oci_tty_init(&relay);
    cleanup_close int dirfd = -1;
    cleanup_close int pathfd = -1;
    if (pos < 0) {
        cli_report_error(g, "exec: %s", err.msg);
        rc = CLI_EXIT_REFUSED;
        goto out_args;
    }
    if (help) {
        oci_help_print(stdout, "exec");
        rc = 0;
        goto out_args;
    }
    const char *id;
    if (oci_need_id(g, "exec", argc, argv, pos, &id) < 0) {
        rc = CLI_EXIT_REFUSED;
        goto out_args;
    }
    int n_extra = 0;
    int extra[BH_EXEC_MAX_EXTRA_FDS];
    if (exec_preserved_fds(g, o.preserve, extra, &n_extra) < 0)
        goto out_args;
    if (oci_open(g, "exec", id, &dirfd, &st) < 0)
        goto out_args;
    if (exec_check_status(g, id, &st, o.ignore_paused) < 0)
        goto out;
    pj = o.process_file ? exec_process_from_file(g, o.process_file)
                        : exec_process_from_args(g, &o, st.bundle, argc, argv, pos, &rc);
    if (pj == NULL)
        goto out;
    if (oci_exec_cgroups_resolve(st.cgroup_path, &o.cgroups, &cgs, &err) < 0) {
        cli_report_error(g, "exec: %s", err.msg);
        rc = CLI_EXIT_REFUSED;
        goto out;
    }
    bool nnp_cfg = false;
    if (oci_process_parse(pj, "process", &proc, &nnp_cfg, &err) < 0) {
        cli_report_error(g, "exec: %s", err.msg);
        rc = CLI_EXIT_REFUSED;
        goto out;
    }
    if (exec_check_terminal(g, o.console_socket, o.detach, proc.terminal) < 0) {
        rc = CLI_EXIT_REFUSED;
        goto out;
    }
    const char *console_socket = o.console_socket;
    if (proc.terminal && !o.detach) {
        if (oci_tty_listen(&relay, &err) < 0) {
            cli_report_error(g, "exec: %s", err.msg);
            goto out;
        }
        console_socket = relay.path;
    }
    /* An O_PATH fd (it holds no lock) names the socket's directory for the
     * proxy too, which outlives the lock. */
    char dir_path[4096];
    snprintf(dir_path, sizeof(dir_path), "%s/%s", g->root, id);
    pathfd = open(dir_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    char state_dir[4096];
    oci_sentry_dir(g->root, id, pathfd, state_dir, sizeof(state_dir));
    /* The container's lock is not held from here on: a paused sentry
     * answers only once resumed, and resume needs the lock. */
    close(dirfd);
    dirfd = -1;
    if (bh_sentry_connect(state_dir, &conn, &err) < 0) {
        cli_report_error(g, "exec: %s", err.msg);
        goto out;
    }
    /* Blocked before the proxy exists, so no signal meant for the guest is lost. */
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old);
    const int stdio[3] = {0, 1, 2};
    pid_t pid = 0;
    bool set_oom = proc.has_oom_score_adj;
    proc.has_oom_score_adj = false;
    /* runc's stage names, as at create (runtime.c's create_logged). */
    cli_log(g, "debug",
            "nsexec container setup: exec %s: the sentry forks the process in the sandbox's "
            "namespaces",
            id);
    cli_log(g, "debug",
            "child process in init(): exec %s: the sentry sets its ids, capabilities, seccomp "
            "and Landlock",
            id);
    cli_log(g, "debug", "setns_init: about to exec `%s` in %s",
            proc.argv && proc.argv[0] ? proc.argv[0] : "", id);
    int listener = -1;
    if (bh_sentry_exec_held(conn, &proc, stdio, proc.terminal ? console_socket : NULL, extra,
                            (size_t)n_extra, &pid, &listener, &err) < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        cli_report_error(g, "exec: %s", err.msg);
        goto out;
    }
    if (exec_start_held(conn, &st, &cgs, pid, listener, &err) < 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        cli_report_error(g, "exec: %s", err.msg);
        goto out;
    }
    cli_log(g, "debug", "exec %s: process %d started in the sandbox", id, pid);
    if (set_oom)
        exec_set_oom_score_adj(pid, proc.oom_score_adj);
    if (o.detach) {
        if (exec_detach(g, conn, state_dir, pid, o.pid_file, &old) == 0)
            rc = 0;
        goto out;
    }
    int wst = 0;
    if (exec_attached(g, conn, state_dir, pid, o.pid_file, &relay, &old, &wst) < 0)
        goto out;
    rc = bh_status_to_exit_code(wst);
    ran = true;
    cli_log(g, "debug", "exec %s: process %d ended with status %#x", id, pid, wst);
out:
    oci_tty_finish(&relay);
    if (conn != NULL)
        bh_sentry_disconnect(conn);
    oci_process_free(&proc);
    oci_exec_cgroups_free(&cgs);
    if (pj)
        json_decref(pj);
    oci_state_free(&st);
out_args:
    exec_opts_free(&o);
    /* Any failure before the process's own status: runc's 255. */
    if (rc != 0 && !ran)
        rc = CLI_EXIT_EXEC_FAILED;
    return rc;
}
