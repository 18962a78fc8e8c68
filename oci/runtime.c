/* Owns the lifecycle commands of the runc-compatible runtime, as
 * containerd's shim (through go-runc) and docker drive them: create, start,
 * run, state, kill, delete, pause, resume, ps, list. exec lives in exec.c,
 * update/events in resources.c, spec/features in spec-features.c.
 *
 * Every command takes the per-container lock (state.c) for its whole run,
 * so concurrent calls on one container are serialised. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "control.h"
#include "oci-internal.h"
#include "oci-report.h"
#include "probe.h"

/* The cgroup path a create records first in its state directory. */
#define CREATING_CGROUP_FILE "cgroup_path"

#define PARSE_OR_FAIL(opts, help_text)                                                             \
    bool help_ = false;                                                                            \
    struct bh_error perr_ = {0};                                                                   \
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help_, &perr_);               \
    if (pos < 0) {                                                                                 \
        cli_report_error(g, "%s: %s", argv[0], perr_.msg);                                         \
        return CLI_EXIT_REFUSED;                                                                   \
    }                                                                                              \
    if (help_) {                                                                                   \
        (void)(help_text);                                                                         \
        oci_help_print(stdout, argv[0]);                                                           \
        return 0;                                                                                  \
    }

char *oci_state_text(const struct oci_state *st, const char *status)
{
    json_t *j = oci_state_json(st, status);
    /* Hooks get the config's annotations as they are (runtime-tools checks
     * them): the tier a container got is in `state`, not in hooks' input. */
    json_t *ann = json_deep_copy(st->annotations ? st->annotations : json_object());
    /* kept with the config's for `state` and the live tier check, but ours */
    json_object_del(ann, OCI_ANNOTATION_DEFAULT_LIMITS);
    json_object_set_new(j, "annotations", ann);
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    return s;
}

static void log_warnings(const struct cli_globals *g, const struct oci_config *cfg)
{
    for (size_t i = 0; i < cfg->n_warnings; i++)
        cli_log(g, "warning", "%s", cfg->warnings[i]);
}

/* ---- create ------------------------------------------------------------- */

/* What the core degraded without refusing (a tree it could not idmap). */
static void create_warning(void *arg, const char *msg)
{
    cli_log((const struct cli_globals *)arg, "warning", "create: %s", msg);
}

static int set_oom_score_adj(const char *cgroup_path, int value, struct bh_error *err)
{
    struct bh_cgroup *cg = NULL;
    pid_t *pids = NULL;
    size_t n = 0;
    if (bh_cgroup_open(cgroup_path, &cg, err) < 0 || bh_cgroup_pids(cg, &pids, &n, err) < 0) {
        if (cg)
            bh_cgroup_free(cg);
        return bh_error_prefix(err, "set oom_score_adj");
    }
    bh_cgroup_free(cg);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[64], buf[16];
        snprintf(path, sizeof(path), "/proc/%d/oom_score_adj", pids[i]);
        int len = snprintf(buf, sizeof(buf), "%d", value);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT)
            continue;
        if (fd < 0 || write(fd, buf, (size_t)len) != len)
            rc = bh_error_errno(err, errno, "set oom_score_adj of pid %d to %d", pids[i], value);
        if (fd >= 0)
            close(fd);
    }
    free(pids);
    return rc;
}

/* "name (detail); ..." of every failed check, for an error message. */
static const char *failed_checks(json_t *report)
{
    static char buf[1024];
    buf[0] = '\0';
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(report, "checks"), i, c)
    {
        const char *res = json_string_value(json_object_get(c, "result"));
        if (res != NULL && strcmp(res, "pass") == 0)
            continue;
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof(buf) - l, "%s%s (%s)", l ? "; " : "",
                 json_string_value(json_object_get(c, "name")),
                 json_string_value(json_object_get(c, "detail")));
    }
    return buf;
}

/* Nothing runs at a tier this host cannot prove (verified once per boot
 * through the probe's cache). Asked for explicitly, kernel is refused;
 * as the default it falls back to container, as `bulkhead do` does. */
static int create_settle_tier(const struct cli_globals *g, const char *id, struct oci_config *cfg,
                              struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    if (spec->tier != BH_TIER_KERNEL || bh_probe_require(BH_TIER_KERNEL, NULL, err) == 0)
        return 0;
    if (json_object_get(cfg->annotations, OCI_ANNOTATION_TIER) != NULL &&
        getenv("BULKHEAD_DEFAULT_TIER") == NULL) {
        cli_report_error(g,
                         "create: annotation %s=kernel refused: %s; use "
                         "dev.bulkhead.tier=container for namespaces, dropped capabilities "
                         "and a seccomp allowlist without the sentry's broker",
                         OCI_ANNOTATION_TIER, err->msg);
        return -1;
    }
    cli_log(g, "warning",
            "kernel tier not verified on this host, container %s runs at the "
            "container tier: %s",
            id, err->msg);
    spec->tier = BH_TIER_CONTAINER;
    return 0;
}

/* runc's rules and words (scripts match them): a console socket only
 * when detached with a terminal; a terminal detached needs one. */
static int create_settle_console(const struct cli_globals *g, const struct oci_create_args *a,
                                 struct bh_sandbox_spec *spec, struct bh_error *err)
{
    if (a->console_socket != NULL && (a->tty != NULL || !spec->process.terminal)) {
        cli_report_error(g,
                         "cannot use console socket if runc will not detach or allocate tty "
                         "(%s)",
                         a->tty ? "in the foreground the pty is relayed to our own stdio"
                                : "process.terminal is false");
        return -1;
    }
    if (spec->process.terminal && a->console_socket == NULL && a->tty == NULL) {
        cli_report_error(g, "cannot allocate tty if runc will detach without setting console "
                            "socket (process.terminal is true: give --console-socket to "
                            "receive the pty, or run in the foreground)");
        return -1;
    }
    if (spec->process.terminal) {
        if (a->tty != NULL && oci_tty_listen(a->tty, err) < 0) {
            cli_report_error(g, "create: %s", err->msg);
            return -1;
        }
        spec->console_socket = strdup(a->tty ? a->tty->path : a->console_socket);
    }
    return 0;
}

/* The container's state directory, and in it the cgroup it will use,
 * written before anything is made: a delete after this create was killed
 * (no state.json yet) finds the cgroup to empty and remove there. */
static int create_state_dir(const struct cli_globals *g, const char *id, const char *cgroup_path,
                            int *dirfd, struct bh_error *err)
{
    if (oci_state_dir_create(g->root, id, dirfd, err) < 0) {
        cli_report_error(g, "create: %s", err->msg);
        return -1;
    }
    if (oci_write_file_atomic(*dirfd, CREATING_CGROUP_FILE, cgroup_path, strlen(cgroup_path), err) <
        0) {
        cli_report_error(g, "create: %s", err->msg);
        oci_state_remove(g->root, id, err);
        return -1;
    }
    return 0;
}

/* What state.json records of the config, before the sandbox exists. */
static void create_state_init(struct oci_state *st, const char *id, const struct oci_config *cfg,
                              const char *cgroup_path)
{
    st->id = strdup(id);
    st->bundle = strdup(cfg->bundle);
    st->rootfs = strdup(cfg->spec.rootfs);
    char now[64];
    oci_rfc3339_now(now, sizeof(now));
    st->created = strdup(now);
    st->owner = strdup("");
    st->annotations = json_incref(cfg->annotations);
    st->hooks = json_incref(cfg->hooks);
    st->cgroup_path = strdup(cgroup_path);
    st->tier = cfg->spec.tier;
    st->nnp_forced = !cfg->no_new_privileges && !cfg->spec.process.allow_new_privs;
}

/* A namespace the config leaves out would be the runtime's own, shared
 * (OCI: inherited; docker's --network host, --ipc host, --uts host). Both
 * tiers are defined by namespaces of the sandbox's own (the live check
 * proves net and uts differ from the host's), so the sandbox makes its own
 * and says so instead of failing that check. */
static void create_settle_namespaces(const struct cli_globals *g, struct oci_config *cfg)
{
    static const struct {
        int ns;
        const char *name;
    } shared[] = {
        {BH_NS_NET, "network"}, {BH_NS_IPC, "ipc"},     {BH_NS_UTS, "uts"},
        {BH_NS_PID, "pid"},     {BH_NS_MOUNT, "mount"},
    };
    struct bh_sandbox_spec *spec = &cfg->spec;
    for (size_t i = 0; i < BH_ARRAY_SIZE(shared); i++)
        if (!cfg->ns_listed[shared[i].ns] && spec->ns_paths[shared[i].ns] == NULL)
            cli_log(g, "warning",
                    "create: linux.namespaces leaves out %s, which would share the host's: the "
                    "%s tier gives every sandbox its own, so the container gets one",
                    shared[i].name, bh_tier_name(spec->tier));
}

/* A profile's SCMP_ACT_NOTIFY rules need the one notification listener a
 * process may have; at the kernel tier it is the sentry's broker's, and an
 * agent must never decide what the sentry checks. */
static int create_check_seccomp_agent(const struct cli_globals *g, const struct oci_config *cfg)
{
    if (!cfg->spec.extra_policy_listener || cfg->spec.tier < BH_TIER_KERNEL)
        return 0;
    cli_report_error(g,
                     "create: `linux.seccomp`: SCMP_ACT_NOTIFY rules (a seccomp agent at `%s`) "
                     "are refused at the kernel tier: the kernel gives a process one "
                     "notification listener, and at this tier it is the sentry's broker, which "
                     "checks the syscalls the agent would answer; run the container at the "
                     "container tier (annotation %s=container)",
                     json_string_value(json_object_get(cfg->seccomp, "listenerPath")),
                     OCI_ANNOTATION_TIER);
    return -1;
}

/* Before the startContainer hooks: the agent holds the listener before the
 * process can make a notified syscall (it waits for start), as under runc,
 * where it comes after the createContainer hooks too. */
static int create_seccomp_agent(const struct cli_globals *g, const struct oci_config *cfg,
                                struct bh_sandbox *sb, const struct oci_state *st,
                                struct bh_error *err)
{
    if (!cfg->spec.extra_policy_listener)
        return 0;
    cleanup_close int fd = -1;
    cleanup_free char *state = oci_state_text(st, "creating");
    if (bh_sentry_seccomp_listener(bh_sandbox_conn(sb), &fd, err) < 0 ||
        oci_seccomp_agent_send(cfg->seccomp, state, st->pid, fd, err) < 0) {
        cli_report_error(g, "create: %s", err->msg);
        return -1;
    }
    return 0;
}

/* The live sandbox must prove the tier it was made for, or it never runs. */
static int create_verify_tier(const struct cli_globals *g, const char *id, struct oci_state *st,
                              const struct bh_sandbox_spec *spec)
{
    /* Every set the config grants: for a non-root user docker leaves the
     * bounding set and clears the others. */
    st->caps = spec->process.cap_bounding | spec->process.cap_effective |
               spec->process.cap_permitted | spec->process.cap_inheritable |
               spec->process.cap_ambient;
    st->tier_report = oci_report_build(id, st->pid, st->tier, st->caps, &spec->limits);
    enum bh_tier proven = BH_TIER_NONE;
    bh_tier_parse(json_string_value(json_object_get(st->tier_report, "tier")), &proven, NULL);
    if (proven < st->tier) {
        cli_report_error(g,
                         "create: the container does not verify at the %s tier (live checks "
                         "prove %s): %s",
                         bh_tier_name(st->tier), bh_tier_name(proven),
                         failed_checks(st->tier_report));
        return -1;
    }
    return 0;
}

static int create_write_pid_file(const struct cli_globals *g, const char *pid_file, pid_t pid,
                                 struct bh_error *err)
{
    if (oci_write_pid_file(pid_file, pid, err) < 0) {
        cli_report_error(g, "create: pid file: %s", err->msg);
        return -1;
    }
    return 0;
}

/* What a create's hooks need: the state they get (its rootfs: the host path). */
struct create_hooks {
    const struct cli_globals *g;
    struct oci_state *st;
};

/* The sentry waits between its mounts and pivot_root: runc's procHooks
 * point (sentry/README.md, "OCI hooks"). */
static int create_run_hooks(void *arg, pid_t sentry_pid, const char *root, struct bh_error *err)
{
    struct create_hooks *h = arg;
    h->st->pid = sentry_pid;
    /* The sentry names its root as the kernel prints it: no symlinks. */
    cleanup_free char *host = h->st->rootfs ? realpath(h->st->rootfs, NULL) : NULL;
    if (host != NULL && strcmp(root, host) != 0)
        cli_log(h->g, "warning",
                "create: the sandbox's ids cannot reach the rootfs `%s`, so before pivot_root it "
                "is at `%s` in the container's mount namespace: hooks that mount by the "
                "rootfs's host path will not find it",
                h->st->rootfs, root);
    cleanup_free char *state = oci_state_text(h->st, "created");
    if (state == NULL)
        return bh_error_set(err, ENOMEM, "the state for the hooks");
    return oci_hooks_run_at_create(h->g, h->st->hooks, state, sentry_pid, root, h->st->cgroup_path,
                                   err);
}

/* Makes the sandbox of a config: its mount points and bind trees first, the
 * oom_score_adj the shim asked for after (see below). With hooks (not
 * NULL) the sentry pauses for them before pivot_root. */
static int create_sandbox(const struct cli_globals *g, const char *id, struct bh_sandbox_spec *spec,
                          const char *state_dir, const char *cgroup_path,
                          struct create_hooks *hooks, struct bh_sandbox **sb, struct bh_error *err)
{
    struct bh_create_opts opts = {.flags = BH_CREATE_DETACHED,
                                  .state_dir = state_dir,
                                  .warn = create_warning,
                                  .warn_arg = (void *)g,
                                  .mounted = hooks ? create_run_hooks : NULL,
                                  .mounted_arg = hooks};
    /* The sandbox's ids may not lower oom_score_adj below what the shim set for
     * itself (-999 under containerd), so host root writes it after create. */
    bool set_oom = spec->process.has_oom_score_adj;
    int oom = spec->process.oom_score_adj;
    spec->process.has_oom_score_adj = false;
    /* Best effort: where it cannot (a read-only image), the sandbox's own
     * mount step says precisely what is missing. */
    if (oci_make_mount_points(spec, err) < 0)
        cli_log(g, "debug", "mount points: %s", err->msg);
    cli_log(g, "debug", "create %s: making the sandbox at the %s tier (cgroup %s)", id,
            bh_tier_name(spec->tier), cgroup_path);
    int created = oci_prepare_bind_trees(spec, err);
    if (created == 0)
        created = oci_seccomp_agent_tmpfs(spec, err);
    if (created == 0)
        created = bh_sandbox_create(spec, &opts, sb, err);
    oci_close_bind_trees(spec);
    if (created < 0) {
        cli_report_error(g, "create: %s", err->msg);
        return -1;
    }
    if (set_oom && set_oom_score_adj(cgroup_path, oom, err) < 0) {
        cli_report_error(g, "create: %s", err->msg);
        return 1;
    }
    return 0;
}

int oci_do_create(const struct cli_globals *g, const char *id, const struct oci_create_args *a,
                  pid_t *pid_out)
{
    struct bh_error err = {0};
    struct oci_config cfg;
    const char *bundle = a->bundle ? a->bundle : ".";
    if (a->preserve_fds && strcmp(a->preserve_fds, "0") != 0) {
        cli_report_error(g,
                         "create: --preserve-fds %s is not supported: a bulkhead container "
                         "gets only its stdio",
                         a->preserve_fds);
        return CLI_EXIT_REFUSED;
    }
    if (oci_config_load(bundle, &cfg, &err) < 0) {
        cli_report_error(g, "create: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    log_warnings(g, &cfg);
    cli_log(g, "debug", "create %s: config.json of bundle %s read and validated", id, cfg.bundle);
    struct bh_sandbox_spec *spec = &cfg.spec;
    spec->id = strdup(id);
    if (create_settle_tier(g, id, &cfg, &err) < 0 || create_check_seccomp_agent(g, &cfg) < 0) {
        oci_config_free(&cfg);
        return CLI_EXIT_REFUSED;
    }
    create_settle_namespaces(g, &cfg);
    spec->no_pivot = a->no_pivot;
    if (oci_mount_points_check(spec, &err) < 0) {
        cli_report_error(g, "create: %s", err.msg);
        oci_config_free(&cfg);
        return 1; /* runc's status for it */
    }
    /* noNewPrivileges false is honoured at the container tier; at the kernel
     * tier no_new_privs is part of the tier (the state's annotations say so). */
    spec->process.allow_new_privs = !cfg.no_new_privileges && spec->tier < BH_TIER_KERNEL;
    if (oci_devices_apply(&cfg, &err) < 0) {
        cli_report_error(g, "create: %s", err.msg);
        oci_config_free(&cfg);
        return CLI_EXIT_REFUSED;
    }
    if (create_settle_console(g, a, spec, &err) < 0) {
        oci_config_free(&cfg);
        return CLI_EXIT_REFUSED;
    }
    char cgbuf[1200];
    cleanup_free char *cgroup_path =
        strdup(spec->cgroup_path ? spec->cgroup_path
                                 : (snprintf(cgbuf, sizeof(cgbuf), "bulkhead/%s", id), cgbuf));
    if (spec->cgroup_path == NULL)
        spec->cgroup_path = strdup(cgroup_path);

    cleanup_close int dirfd = -1;
    if (create_state_dir(g, id, cgroup_path, &dirfd, &err) < 0) {
        oci_config_free(&cfg);
        return CLI_EXIT_REFUSED;
    }
    char state_dir[4096];
    oci_sentry_dir(g->root, id, dirfd, state_dir, sizeof(state_dir));

    struct oci_state st = {0};
    create_state_init(&st, id, &cfg, cgroup_path);
    struct bh_sandbox *sb = NULL;
    int rc = CLI_EXIT_REFUSED;
    if (oci_cgroup_precheck(g, cgroup_path, &err) < 0) {
        cli_report_error(g, "create: %s", err.msg);
        rc = 1; /* runc's status for it */
        goto fail_nosb;
    }
    struct create_hooks hooks = {.g = g, .st = &st};
    int made = create_sandbox(g, id, spec, state_dir, cgroup_path,
                              oci_hooks_at_create(st.hooks) ? &hooks : NULL, &sb, &err);
    if (made < 0) {
        if (err.kind == BH_ERROR_LIMIT)
            rc = 1; /* the kernel refused a value of the config: runc's status */
        goto fail_nosb;
    }
    st.pid = bh_sandbox_pid(sb);
    st.pid_start = oci_pid_start_time(st.pid);
    if (made > 0 || create_verify_tier(g, id, &st, spec) < 0)
        goto fail;
    if (oci_state_write(dirfd, &st, &err) < 0) {
        cli_report_error(g, "create: %s", err.msg);
        goto fail;
    }
    if (create_seccomp_agent(g, &cfg, sb, &st, &err) < 0)
        goto fail;
    if (a->pid_file && create_write_pid_file(g, a->pid_file, st.pid, &err) < 0)
        goto fail;
    if (pid_out)
        *pid_out = st.pid;
    cli_log(g, "debug", "created container %s: sentry pid %d, tier %s", id, st.pid,
            bh_tier_name(st.tier));
    /* The sandbox outlives us: drop the handle without destroying it. */
    bh_sandbox_release(sb);
    oci_state_free(&st);
    oci_config_free(&cfg);
    return 0;

fail:
    bh_sandbox_destroy(sb);
fail_nosb:
    /* A failed bh_sandbox_create removed what it made; the cgroup is never
     * touched here, since it may be another container's (same cgroupsPath). */
    oci_state_free(&st);
    oci_config_free(&cfg);
    oci_state_remove(g->root, id, &err);
    return rc;
}

/* runc's --debug names its set-up stages (nsexec, init) and tools and
 * runc's own tests follow those names: bulkhead's lines for the same steps
 * carry them. */
static int create_logged(const struct cli_globals *g, const char *cmd, const char *id,
                         const struct oci_create_args *a, pid_t *pid)
{
    cli_log(g, "debug",
            "nsexec container setup: %s %s: bulkhead-sentry makes the sandbox (namespaces, id "
            "maps, mounts, cgroup)",
            cmd, id);
    int rc = oci_do_create(g, id, a, pid);
    if (rc == 0) {
        cli_log(g, "debug",
                "child process in init(): %s %s: the container's process is set up in the "
                "sandbox and waits for start",
                cmd, id);
        cli_log(g, "debug", "init: closing the pipe to signal completion (%s %s)", cmd, id);
    }
    return rc;
}

static const char create_help[] =
    "usage: bulkhead create [--bundle DIR] [--pid-file FILE] [--console-socket SOCK] ID\n"
    "Creates a container from the OCI bundle DIR (default: the current directory); its\n"
    "process waits until `bulkhead start ID`.\n";

int cmd_create(const struct cli_globals *g, int argc, char **argv)
{
    struct oci_create_args a = {0};
    bool no_keyring = false;
    const char *notify = NULL;
    const struct oci_opt opts[] = {
        {"bundle", 'b', OCI_OPT_STRING, &a.bundle},
        {"pid-file", 0, OCI_OPT_STRING, &a.pid_file},
        {"console-socket", 0, OCI_OPT_STRING, &a.console_socket},
        {"preserve-fds", 0, OCI_OPT_STRING, &a.preserve_fds},
        {"no-pivot", 0, OCI_OPT_BOOL, &a.no_pivot},
        {"no-new-keyring", 0, OCI_OPT_BOOL, &no_keyring},
        {"notify-socket", 0, OCI_OPT_STRING, &notify},
    };
    PARSE_OR_FAIL(opts, create_help);
    const char *id;
    if (oci_need_id(g, "create", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    return create_logged(g, "create", id, &a, NULL);
}

/* ---- start -------------------------------------------------------------- */

int oci_do_start(const struct cli_globals *g, const char *id)
{
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, "start", id, &dirfd, &st) < 0)
        return 1;
    int rc = 1;
    struct bh_error err = {0};
    cleanup_free char *state_json = NULL;
    const char *status = oci_state_status(&st);
    if (strcmp(status, "created") != 0) {
        cli_report_error(g, "start: container `%s` is %s: only a created container can start", id,
                         status);
        goto out;
    }
    /* The report goes out before the container's process runs, or it does not run. */
    const char *rs =
        json_string_value(json_object_get(st.annotations, OCI_ANNOTATION_REPORT_SOCKET));
    if (rs != NULL) {
        struct bh_limits created = {0};
        oci_limits_as_created(st.annotations, &created);
        json_t *report = oci_report_build(id, st.pid, st.tier, st.caps, &created);
        if (st.tier_report)
            json_decref(st.tier_report);
        st.tier_report = report;
        if (oci_report_send(rs, report, &err) < 0) {
            cli_report_error(g, "start: %s", err.msg);
            goto out;
        }
    }
    state_json = oci_state_text(&st, "created");
    char state_dir[4096];
    oci_sentry_dir(g->root, id, dirfd, state_dir, sizeof(state_dir));
    if (oci_hooks_run_start(g, st.hooks, state_json, state_dir, st.bundle, &err) < 0) {
        cli_report_error(g, "start: %s", err.msg);
        goto out;
    }
    struct bh_sentry_conn *conn = NULL;
    cli_log(g, "debug", "start %s: letting the container's process exec", id);
    if (bh_sentry_connect(state_dir, &conn, &err) < 0 || bh_sentry_start(conn, &err) < 0) {
        if (conn)
            bh_sentry_disconnect(conn);
        cli_report_error(g, "start: %s", err.msg);
        goto out;
    }
    bh_sentry_disconnect(conn);
    st.started = true;
    if (oci_state_write(dirfd, &st, &err) < 0) {
        cli_report_error(g, "start: %s", err.msg);
        goto out;
    }
    free(state_json);
    state_json = oci_state_text(&st, "running");
    oci_hooks_run(g, st.hooks, OCI_HOOK_POSTSTART, state_json, 0, NULL, &err);
    rc = 0;
out:
    oci_state_free(&st);
    return rc;
}

int cmd_start(const struct cli_globals *g, int argc, char **argv)
{
    const struct oci_opt opts[] = {};
    PARSE_OR_FAIL(opts, "usage: bulkhead start ID\nStarts the process of a created container.\n");
    const char *id;
    if (oci_need_id(g, "start", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    return oci_do_start(g, id);
}

/* ---- state / list ------------------------------------------------------- */

int cmd_state(const struct cli_globals *g, int argc, char **argv)
{
    const struct oci_opt opts[] = {};
    PARSE_OR_FAIL(opts, "usage: bulkhead state ID\nPrints the container's state as JSON.\n");
    const char *id;
    if (oci_need_id(g, "state", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, "state", id, &dirfd, &st) < 0)
        return 1;
    json_t *j = oci_state_json(&st, oci_state_status(&st));
    char *s = json_dumps(j, JSON_INDENT(2));
    printf("%s\n", s);
    free(s);
    json_decref(j);
    oci_state_free(&st);
    return 0;
}

/* Creation time (RFC 3339, nanoseconds, UTC: text order is time order), then id. */
static int by_created(const void *a, const void *b)
{
    json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const char *cx = json_string_value(json_object_get(x, "created"));
    const char *cy = json_string_value(json_object_get(y, "created"));
    int c = strcmp(cx ? cx : "", cy ? cy : "");
    if (c != 0)
        return c;
    return strcmp(json_string_value(json_object_get(x, "id")),
                  json_string_value(json_object_get(y, "id")));
}

int cmd_list(const struct cli_globals *g, int argc, char **argv)
{
    const char *format = "table";
    bool quiet = false;
    const struct oci_opt opts[] = {
        {"format", 'f', OCI_OPT_STRING, &format},
        {"quiet", 'q', OCI_OPT_BOOL, &quiet},
    };
    PARSE_OR_FAIL(opts, "usage: bulkhead list [--format table|json] [--quiet]\n");
    (void)pos;
    bool json = strcmp(format, "json") == 0;
    if (!json && strcmp(format, "table") != 0) {
        cli_report_error(g, "list: --format `%s` is not known: use table or json", format);
        return CLI_EXIT_REFUSED;
    }
    json_t *arr = json_array();
    DIR *d = opendir(g->root);
    if (d != NULL) {
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.' || oci_id_validate(de->d_name, NULL) < 0)
                continue;
            struct oci_state st;
            int dirfd = -1;
            if (oci_state_open(g->root, de->d_name, &dirfd, &st, NULL) < 0)
                continue;
            close(dirfd);
            json_t *o = json_object();
            json_object_set_new(o, "ociVersion", json_string(OCI_VERSION));
            json_object_set_new(o, "id", json_string(st.id));
            const char *status = oci_state_status(&st);
            json_object_set_new(o, "pid", json_integer(strcmp(status, "stopped") ? st.pid : 0));
            json_object_set_new(o, "status", json_string(status));
            json_object_set_new(o, "bundle", json_string(st.bundle));
            json_object_set_new(o, "rootfs", json_string(st.rootfs ? st.rootfs : ""));
            json_object_set_new(o, "created", json_string(st.created ? st.created : ""));
            json_object_set_new(o, "annotations", json_incref(st.annotations));
            json_object_set_new(o, "owner", json_string(st.owner ? st.owner : ""));
            json_array_append_new(arr, o);
            oci_state_free(&st);
        }
        closedir(d);
    }
    /* Oldest first, as runc lists (readdir's order is the filesystem's). */
    size_t n_items = json_array_size(arr);
    json_t **items = calloc(n_items ? n_items : 1, sizeof(json_t *));
    for (size_t i = 0; items && i < n_items; i++)
        items[i] = json_incref(json_array_get(arr, i));
    if (items) {
        qsort(items, n_items, sizeof(json_t *), by_created);
        json_array_clear(arr);
        for (size_t i = 0; i < n_items; i++)
            json_array_append_new(arr, items[i]);
        free(items);
    }
    if (json) {
        char *s = json_dumps(arr, JSON_COMPACT);
        printf("%s\n", json_array_size(arr) ? s : "null");
        free(s);
    } else if (quiet) {
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o)
        {
            printf("%s\n", json_string_value(json_object_get(o, "id")));
        }
    } else {
        printf("%-24s %-8s %-10s %-40s %-31s %s\n", "ID", "PID", "STATUS", "BUNDLE", "CREATED",
               "OWNER");
        size_t i;
        json_t *o;
        json_array_foreach(arr, i, o)
        {
            printf("%-24s %-8lld %-10s %-40s %-31s %s\n",
                   json_string_value(json_object_get(o, "id")),
                   (long long)json_integer_value(json_object_get(o, "pid")),
                   json_string_value(json_object_get(o, "status")),
                   json_string_value(json_object_get(o, "bundle")),
                   json_string_value(json_object_get(o, "created")),
                   json_string_value(json_object_get(o, "owner")));
        }
    }
    json_decref(arr);
    return 0;
}

/* ---- kill --------------------------------------------------------------- */

static const struct {
    const char *name;
    int sig;
} signals[] = {
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},     {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"IOT", SIGIOT},       {"BUS", SIGBUS},
    {"FPE", SIGFPE},       {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},
    {"USR2", SIGUSR2},     {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM},
    {"STKFLT", SIGSTKFLT}, {"CHLD", SIGCHLD}, {"CONT", SIGCONT},     {"STOP", SIGSTOP},
    {"TSTP", SIGTSTP},     {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU},     {"URG", SIGURG},
    {"XCPU", SIGXCPU},     {"XFSZ", SIGXFSZ}, {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF},
    {"WINCH", SIGWINCH},   {"IO", SIGIO},     {"POLL", SIGPOLL},     {"PWR", SIGPWR},
    {"SYS", SIGSYS},
};

int oci_parse_signal(const char *s, int *sig)
{
    char *end;
    long n = strtol(s, &end, 10);
    if (*s && *end == '\0') {
        /* 0 checks that the process exists, as kill(2) does. */
        if (n < 0 || n >= NSIG)
            return -1;
        *sig = (int)n;
        return 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < BH_ARRAY_SIZE(signals); i++) {
        if (strcasecmp(s, signals[i].name) == 0) {
            *sig = signals[i].sig;
            return 0;
        }
    }
    if (strncasecmp(s, "RTMIN", 5) == 0 || strncasecmp(s, "RTMAX", 5) == 0) {
        bool min = strncasecmp(s, "RTMIN", 5) == 0;
        long off = 0;
        if (s[5] == '+' || s[5] == '-')
            off = strtol(s + 5, &end, 10);
        else if (s[5] == '\0')
            end = (char *)s + 5;
        else
            return -1;
        if (*end != '\0')
            return -1;
        int v = (int)((min ? SIGRTMIN : SIGRTMAX) + off);
        if (v < SIGRTMIN || v > SIGRTMAX)
            return -1;
        *sig = v;
        return 0;
    }
    return -1;
}

static int kill_all(const struct cli_globals *g, const struct oci_state *st, int sig)
{
    char cgbuf[1200];
    struct bh_cgroup *cg = NULL;
    struct bh_error err = {0};
    if (bh_cgroup_open(oci_cgroup_of(st, cgbuf, sizeof(cgbuf)), &cg, &err) < 0) {
        if (err.code == ENOENT)
            return 0; /* the cgroup went with its last process: nobody to signal */
        cli_report_error(g, "kill: %s", err.msg);
        return -1;
    }
    pid_t *pids = NULL;
    size_t n = 0;
    if (bh_cgroup_pids(cg, &pids, &n, &err) < 0) {
        bh_cgroup_free(cg);
        cli_report_error(g, "kill: %s", err.msg);
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        kill(pids[i], sig);
    free(pids);
    if (st->paused && sig == SIGKILL)
        bh_cgroup_freeze(cg, false, &err);
    bh_cgroup_free(cg);
    return 0;
}

int cmd_kill(const struct cli_globals *g, int argc, char **argv)
{
    bool all = false;
    const struct oci_opt opts[] = {{"all", 'a', OCI_OPT_BOOL, &all}};
    PARSE_OR_FAIL(opts, "usage: bulkhead kill [--all] ID [SIGNAL]\nSIGNAL: a number or a name "
                        "(TERM, SIGTERM); default TERM.\n");
    const char *id;
    if (oci_need_id(g, "kill", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    int sig = SIGTERM;
    if (pos + 1 < argc && oci_parse_signal(argv[pos + 1], &sig) < 0) {
        cli_report_error(g, "kill: `%s` is not a signal", argv[pos + 1]);
        return CLI_EXIT_REFUSED;
    }
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, "kill", id, &dirfd, &st) < 0)
        return 1;
    int rc = 0;
    const char *status = oci_state_status(&st);
    /* --all still reaches a stopped container's cgroup, as runc's does: the
     * shim sends it when the first process of a container sharing a pid
     * namespace exits, to end what that process left behind. */
    if (strcmp(status, "stopped") == 0 && !all) {
        cli_report_error(g, "kill: container not running");
        rc = 1;
    } else if (all) {
        rc = kill_all(g, &st, sig) < 0 ? 1 : 0;
    } else if (kill(st.pid, sig) < 0) {
        cli_report_error(g, "kill: %s", errno == ESRCH ? "no such process" : strerror(errno));
        rc = 1;
    } else if (st.paused && sig == SIGKILL) {
        kill_all(g, &st, SIGKILL);
    }
    oci_state_free(&st);
    return rc;
}

/* ---- delete ------------------------------------------------------------- */

static void wait_gone(pid_t pid, unsigned long long start, int ms)
{
    for (int i = 0; i < ms / 10 && oci_pid_alive(pid, start); i++)
        usleep(10000);
}

/* What a create killed before it wrote state.json made: its cgroup (with
 * the sentry and guest, if it got that far) at the path it recorded first,
 * or the default one. Called once the state directory's lock was had and
 * state.json missing (so no create of this id runs). */
static void remove_half_created(const struct cli_globals *g, const char *id)
{
    char dir[4096], path[4200], cgp[1200] = "";
    struct bh_error err = {0};
    if (oci_state_path(g->root, id, dir, sizeof(dir), &err) < 0)
        return;
    snprintf(path, sizeof(path), "%s/%s", dir, CREATING_CGROUP_FILE);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        if (errno != ENOENT || access(dir, F_OK) < 0)
            return; /* no such container at all */
        snprintf(cgp, sizeof(cgp), "bulkhead/%s", id);
    } else {
        ssize_t n = read(fd, cgp, sizeof(cgp) - 1);
        cgp[n > 0 ? n : 0] = '\0';
        if (n <= 0 || strchr(cgp, '\n') != NULL)
            return;
    }
    struct bh_cgroup *cg = NULL;
    if (bh_cgroup_open(cgp, &cg, &err) < 0)
        return;
    if (bh_cgroup_destroy(cg, &err) < 0)
        cli_log(g, "warn", "delete: cgroup of a create that did not finish: %s", err.msg);
}

int oci_do_delete(const struct cli_globals *g, const char *id, bool force)
{
    cleanup_close int dirfd = -1;
    struct oci_state st;
    struct bh_error err = {0};
    if (oci_state_open(g->root, id, &dirfd, &st, &err) < 0) {
        /* A directory without state.json (seen under its lock) is what a
         * create that crashed left: end and remove what it made, so nothing
         * of it runs on and the id can be used again. */
        struct bh_error rerr = {0};
        if (err.code == ENOENT)
            remove_half_created(g, id);
        if (err.code == ENOENT)
            oci_state_remove(g->root, id, &rerr);
        if (err.code == ENOENT && force)
            return 0;
        cli_report_error(g, "delete: %s", err.msg);
        return 1;
    }
    const char *status = oci_state_status(&st);
    if ((strcmp(status, "running") == 0 || strcmp(status, "paused") == 0) && !force) {
        cli_report_error(g, "delete: container `%s` is %s: stop it first or use --force", id,
                         status);
        oci_state_free(&st);
        return 1;
    }
    char cgbuf[1200];
    const char *cgp = oci_cgroup_of(&st, cgbuf, sizeof(cgbuf));
    struct bh_cgroup *cg = NULL;
    bool have_cg = bh_cgroup_open(cgp, &cg, &err) == 0;
    if (strcmp(status, "stopped") != 0) {
        kill(st.pid, SIGKILL);
        if (have_cg) {
            if (st.paused)
                bh_cgroup_freeze(cg, false, &err);
            bh_cgroup_kill(cg, &err);
        }
        wait_gone(st.pid, st.pid_start, 5000);
    }
    int rc = 0;
    if (have_cg && bh_cgroup_destroy(cg, &err) < 0) {
        cli_report_error(g, "delete: %s", err.msg);
        rc = 1;
    }
    cleanup_free char *state_json = oci_state_text(&st, "stopped");
    oci_hooks_run(g, st.hooks, OCI_HOOK_POSTSTOP, state_json, 0, NULL, &err);
    if (oci_state_remove(g->root, id, &err) < 0) {
        cli_report_error(g, "delete: %s", err.msg);
        rc = 1;
    }
    oci_state_free(&st);
    return rc;
}

int cmd_delete(const struct cli_globals *g, int argc, char **argv)
{
    bool force = false;
    const struct oci_opt opts[] = {{"force", 'f', OCI_OPT_BOOL, &force}};
    PARSE_OR_FAIL(opts, "usage: bulkhead delete [--force] ID\nRemoves a stopped (or, with "
                        "--force, any) container and all it holds.\n");
    const char *id;
    if (oci_need_id(g, "delete", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    return oci_do_delete(g, id, force);
}

/* ---- pause / resume / ps ------------------------------------------------ */

static int set_frozen(const struct cli_globals *g, const char *cmd, int argc, char **argv,
                      bool frozen)
{
    const struct oci_opt opts[] = {};
    PARSE_OR_FAIL(opts, frozen ? "usage: bulkhead pause ID\n" : "usage: bulkhead resume ID\n");
    const char *id;
    if (oci_need_id(g, cmd, argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, cmd, id, &dirfd, &st) < 0)
        return 1;
    int rc = 1;
    struct bh_error err = {0};
    const char *status = oci_state_status(&st);
    if (strcmp(status, frozen ? "running" : "paused") != 0) {
        cli_report_error(g, "%s: container `%s` is %s, not %s", cmd, id, status,
                         frozen ? "running" : "paused");
        goto out;
    }
    char cgbuf[1200];
    struct bh_cgroup *cg = NULL;
    if (bh_cgroup_open(oci_cgroup_of(&st, cgbuf, sizeof(cgbuf)), &cg, &err) < 0 ||
        bh_cgroup_freeze(cg, frozen, &err) < 0) {
        if (cg)
            bh_cgroup_free(cg);
        cli_report_error(g, "%s: %s", cmd, err.msg);
        goto out;
    }
    bh_cgroup_free(cg);
    st.paused = frozen;
    if (oci_state_write(dirfd, &st, &err) < 0) {
        cli_report_error(g, "%s: %s", cmd, err.msg);
        goto out;
    }
    rc = 0;
out:
    oci_state_free(&st);
    return rc;
}

int cmd_pause(const struct cli_globals *g, int argc, char **argv)
{
    return set_frozen(g, "pause", argc, argv, true);
}

int cmd_resume(const struct cli_globals *g, int argc, char **argv)
{
    return set_frozen(g, "resume", argc, argv, false);
}

/* In ps(1)'s child: become the container's root in its user namespace, so
 * ps names the container's users (uid 0 is `root`, not a mapped host id)
 * and its BSD `x` ("my processes") selects the container's root's, as
 * under runc where they are host root's. Reports on stderr: exec is next. */
static void ps_enter_userns(int userns_pidfd)
{
    gid_t none[1];
    if (setns(userns_pidfd, CLONE_NEWUSER) < 0) {
        fprintf(stderr, "bulkhead: ps: enter the container's user namespace: %s\n",
                strerror(errno));
        _exit(BH_EXIT_REFUSED);
    }
    /* A namespace whose setgroups is denied keeps no group of ours mapped anyway. */
    if (setgroups(0, none) < 0 && errno != EPERM) {
        fprintf(stderr, "bulkhead: ps: drop supplementary groups: %s\n", strerror(errno));
        _exit(BH_EXIT_REFUSED);
    }
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0) {
        fprintf(stderr, "bulkhead: ps: become the container's root: %s\n", strerror(errno));
        _exit(BH_EXIT_REFUSED);
    }
}

/* ps(1)'s output (run with args) into a malloc'd string, or NULL; with
 * userns_pidfd >= 0, run as the container's root (ps_enter_userns). */
static char *run_ps(char **args, size_t n_args, int userns_pidfd, struct bh_error *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        bh_error_errno(err, errno, "pipe for ps");
        return NULL;
    }
    const char **argv = calloc(n_args + 2, sizeof(char *));
    if (argv == NULL) {
        close(p[0]);
        close(p[1]);
        bh_error_set(err, ENOMEM, "ps arguments");
        return NULL;
    }
    argv[0] = "ps";
    for (size_t i = 0; i < n_args; i++)
        argv[i + 1] = args[i];
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        if (userns_pidfd >= 0)
            ps_enter_userns(userns_pidfd);
        execvp("ps", (char **)argv);
        _exit(BH_EXIT_NOT_FOUND);
    }
    free(argv);
    close(p[1]);
    if (pid < 0) {
        close(p[0]);
        bh_error_errno(err, errno, "fork ps");
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&buf, &len);
    char chunk[4096];
    ssize_t r;
    while ((r = read(p[0], chunk, sizeof(chunk))) > 0 || (r < 0 && errno == EINTR))
        if (r > 0 && mem)
            fwrite(chunk, 1, (size_t)r, mem);
    close(p[0]);
    if (mem)
        fclose(mem);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        bh_error_set(err, EINVAL, "ps(1) with the given options failed (exit status %d)",
                     WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
        free(buf);
        return NULL;
    }
    return buf;
}

/* Prints ps's header and the lines whose PID column names one of pids. */
static int print_ps_lines(char *text, const pid_t *pids, size_t n, struct bh_error *err)
{
    char *save = NULL;
    char *header = strtok_r(text, "\n", &save);
    if (header == NULL)
        return 0;
    int col = -1, k = 0;
    cleanup_free char *hcopy = strdup(header);
    char *fsave = NULL;
    for (char *f = strtok_r(hcopy, " \t", &fsave); f; f = strtok_r(NULL, " \t", &fsave), k++)
        if (strcmp(f, "PID") == 0)
            col = k;
    if (col < 0)
        return bh_error_set(err, EINVAL,
                            "ps(1)'s output has no PID column to select the "
                            "container's processes by; add -o pid or use -ef");
    printf("%s\n", header);
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cleanup_free char *lcopy = strdup(line);
        char *lsave = NULL;
        char *f = strtok_r(lcopy, " \t", &lsave);
        for (int c = 0; f && c < col; c++)
            f = strtok_r(NULL, " \t", &lsave);
        if (f == NULL)
            continue;
        long v = strtol(f, NULL, 10);
        for (size_t i = 0; i < n; i++) {
            if (pids[i] == v) {
                printf("%s\n", line);
                break;
            }
        }
    }
    return 0;
}

int cmd_ps(const struct cli_globals *g, int argc, char **argv)
{
    const char *format = "table";
    const struct oci_opt opts[] = {{"format", 'f', OCI_OPT_STRING, &format}};
    PARSE_OR_FAIL(opts, "");
    const char *id;
    if (oci_need_id(g, "ps", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    bool json = strcmp(format, "json") == 0;
    if (!json && strcmp(format, "table") != 0) {
        cli_report_error(g, "ps: --format `%s` is not known: use table or json", format);
        return CLI_EXIT_REFUSED;
    }
    if (json && pos + 1 < argc) {
        cli_report_error(g, "ps: ps options cannot be used with --format json");
        return CLI_EXIT_REFUSED;
    }
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, "ps", id, &dirfd, &st) < 0)
        return 1;
    char cgbuf[1200];
    struct bh_cgroup *cg = NULL;
    struct bh_error err = {0};
    pid_t *pids = NULL;
    size_t n = 0;
    /* Opened before the cgroup is listed: the sentry found in it below
     * proves the pidfd is the container's, not a reused pid's. */
    cleanup_close int sentry_pidfd = st.pid > 0 ? (int)syscall(SYS_pidfd_open, st.pid, 0) : -1;
    if (bh_cgroup_open(oci_cgroup_of(&st, cgbuf, sizeof(cgbuf)), &cg, &err) < 0 ||
        bh_cgroup_pids(cg, &pids, &n, &err) < 0) {
        if (cg)
            bh_cgroup_free(cg);
        oci_state_free(&st);
        /* A stopped container whose cgroup went with it has no processes. */
        if (err.code == ENOENT) {
            if (json)
                printf("[]\n");
            return 0;
        }
        cli_report_error(g, "ps: %s", err.msg);
        return 1;
    }
    bh_cgroup_free(cg);
    /* The sentry is bulkhead's, not the container's: only its guests are listed. */
    size_t m = 0;
    bool sentry_seen = false;
    for (size_t i = 0; i < n; i++) {
        if (pids[i] != st.pid)
            pids[m++] = pids[i];
        else
            sentry_seen = true;
    }
    n = m;
    /* No sentry, no guests: ps runs only for its header. */
    int userns_pidfd = sentry_seen ? sentry_pidfd : -1;
    int rc = 0;
    if (json) {
        printf("[");
        for (size_t i = 0; i < n; i++)
            printf("%s%d", i ? "," : "", pids[i]);
        printf("]\n");
    } else {
        char *def[] = {"-ef"};
        bool own = pos + 1 < argc;
        char *text = run_ps(own ? argv + pos + 1 : def, own ? (size_t)(argc - pos - 1) : 1,
                            userns_pidfd, &err);
        if (text == NULL || print_ps_lines(text, pids, n, &err) < 0) {
            cli_report_error(g, "ps: %s", err.msg);
            rc = 1;
        }
        free(text);
    }
    free(pids);
    oci_state_free(&st);
    return rc;
}

/* ---- run ---------------------------------------------------------------- */

int cmd_run(const struct cli_globals *g, int argc, char **argv)
{
    struct oci_create_args a = {0};
    bool detach = false, no_keyring = false, keep = false;
    const struct oci_opt opts[] = {
        {"bundle", 'b', OCI_OPT_STRING, &a.bundle},
        {"pid-file", 0, OCI_OPT_STRING, &a.pid_file},
        {"console-socket", 0, OCI_OPT_STRING, &a.console_socket},
        {"preserve-fds", 0, OCI_OPT_STRING, &a.preserve_fds},
        {"detach", 'd', OCI_OPT_BOOL, &detach},
        {"keep", 0, OCI_OPT_BOOL, &keep},
        {"no-pivot", 0, OCI_OPT_BOOL, &a.no_pivot},
        {"no-new-keyring", 0, OCI_OPT_BOOL, &no_keyring},
    };
    PARSE_OR_FAIL(opts, "usage: bulkhead run [--bundle DIR] [--detach] [--pid-file FILE] ID\n"
                        "Creates and starts a container; without --detach waits for it, exits "
                        "with its status and deletes it.\n");
    const char *id;
    if (oci_need_id(g, "run", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    /* Without --detach the sentry must be our child to be waited for: become
     * the subreaper it is re-parented to. */
    if (!detach)
        prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    pid_t pid = 0;
    struct oci_tty tty;
    oci_tty_init(&tty);
    if (!detach)
        a.tty = &tty;
    int rc = create_logged(g, "run", id, &a, &pid);
    if (rc != 0) {
        oci_tty_finish(&tty);
        return rc;
    }
    struct bh_error err = {0};
    if (tty.listen_fd >= 0 && oci_tty_attach(&tty, &err) < 0) {
        cli_report_error(g, "run: %s", err.msg);
        oci_tty_finish(&tty);
        oci_do_delete(g, id, true);
        return 1;
    }
    /* Signals to us go to the container, as with runc run; blocked before
     * start so none sent meanwhile is lost. */
    sigset_t set, old;
    sigfillset(&set);
    sigdelset(&set, SIGCHLD);
    if (!detach)
        sigprocmask(SIG_BLOCK, &set, &old);
    if (oci_do_start(g, id) != 0) {
        oci_tty_finish(&tty);
        oci_do_delete(g, id, true);
        return 1;
    }
    if (detach)
        return 0;
    int status = 0;
    for (;;) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        siginfo_t si;
        int s = sigtimedwait(&set, &si, &ts);
        /* With a terminal a resize is ours to copy, as runc does. */
        if (s == SIGWINCH && tty.master >= 0)
            oci_tty_resize(&tty);
        else if (s > 0 && s != SIGCHLD)
            kill(pid, s);
        pid_t r = waitpid(-1, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 && errno == ECHILD)
            break;
    }
    oci_tty_finish(&tty);
    sigprocmask(SIG_SETMASK, &old, NULL);
    cli_log(g, "debug", "run %s: the container's process ended with status %#x", id, status);
    if (!keep)
        oci_do_delete(g, id, true);
    return bh_status_to_exit_code(status);
}
