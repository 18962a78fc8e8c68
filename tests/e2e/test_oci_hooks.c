/* OCI hooks at the moment runc runs them (issue 14; runc's bats
 * `runc run (hooks library tests)`): prestart, createRuntime and
 * createContainer while the sentry waits between its mounts and pivot_root,
 * with the rootfs at its host path in the container's mount namespace;
 * createContainer in the container's namespaces with the root as its cwd;
 * startContainer at start; poststart after it; poststop at delete. A
 * failing hook leaves nothing behind, and at the kernel tier a hook's mount
 * that breaks the broker's rules fails the create. The real binary runs on
 * bundles over the host's /usr (read-only), at both tiers; nothing skips. */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char tmp[128];    /* the test's temp dir: bundle, root, log */
static char rootfs[256]; /* TMP/bundle/rootfs */
static char ids[4][64];  /* containers to delete --force at the end */
static int n_ids;

static void setup(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/bh-hooks-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    /* The container's root (an unprivileged host uid) reaches the bundle,
     * as bats' bundles allow (chmod a+x). */
    chmod(tmp, 0711);
    h_bundle_skeleton(tmp);
    snprintf(rootfs, sizeof(rootfs), "%s/bundle/rootfs", tmp);
    n_ids = 0;
}

static void run_in(const char *const *args, int timeout_s, struct run_result *r)
{
    h_bulkhead_in(tmp, args, timeout_s, r);
}

static void teardown(void)
{
    for (int i = 0; i < n_ids; i++) {
        struct run_result r;
        run_in((const char *const[]){"delete", "--force", ids[i], NULL}, 30, &r);
        h_free(&r);
    }
    if (tmp[0])
        h_remove_tree(tmp);
    tmp[0] = '\0';
}

TestSuite(oci_hooks, .init = setup, .fini = teardown, .timeout = 120);

static const char *new_id(const char *base)
{
    snprintf(ids[n_ids], sizeof(ids[0]), "%s-%d", base, (int)getpid());
    return ids[n_ids++];
}

/* {"path": "/bin/sh", "args": ["sh", "-c", script]} */
static json_t *sh_hook(const char *script)
{
    return json_pack("{s:s,s:[s,s,s]}", "path", "/bin/sh", "args", "sh", "-c", script);
}

/* config.json at tier with the process args, hooks and (if not NULL) one
 * more mount after the others (all stolen). */
static void write_config_with(const char *tier, json_t *args, json_t *hooks, json_t *extra_mount)
{
    json_t *cfg = json_pack(
        "{s:s,s:{s:s,s:b},s:s,s:{s:b,s:o,s:s,s:{s:i,s:i},s:[s]},s:[{s:s,s:s,s:s,s:[s,s]},"
        "{s:s,s:s,s:s},{s:s,s:s,s:s}],s:{s:[{s:s},{s:s},{s:s},{s:s},{s:s}]},s:{s:s},s:o}",
        "ociVersion", "1.0.2", "root", "path", "rootfs", "readonly", 0, "hostname", "hooks",
        "process", "terminal", 0, "args", args, "cwd", "/", "user", "uid", 0, "gid", 0, "env",
        "PATH=/usr/bin:/bin", "mounts", "destination", "/usr", "type", "bind", "source", "/usr",
        "options", "rbind", "ro", "destination", "/proc", "type", "proc", "source", "proc",
        "destination", "/tmp", "type", "tmpfs", "source", "tmpfs", "linux", "namespaces", "type",
        "pid", "type", "mount", "type", "network", "type", "ipc", "type", "uts", "annotations",
        "dev.bulkhead.tier", tier, "hooks", hooks);
    cr_assert_not_null(cfg);
    if (extra_mount != NULL)
        cr_assert_eq(json_array_append_new(json_object_get(cfg, "mounts"), extra_mount), 0);
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    cr_assert_eq(json_dump_file(cfg, p, 0), 0);
    json_decref(cfg);
}

static void write_config(const char *tier, json_t *args, json_t *hooks)
{
    write_config_with(tier, args, hooks, NULL);
}

static void need_tier(const char *tier)
{
    if (strcmp(tier, "kernel") == 0)
        h_require_kernel_tier();
}

/* The host's own mount table mentions nothing of the test's directory:
 * the hooks' mounts lived in the container's mount namespace only. */
static void expect_no_host_mount_under_tmp(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    cr_assert_not_null(f);
    char line[4096];
    while (fgets(line, sizeof(line), f) != NULL)
        cr_expect(strstr(line, tmp) == NULL, "a mount of the test is left on the host: %s", line);
    fclose(f);
}

/* No state, no cgroup, no sentry: what a failed create must leave. */
static void expect_nothing_left(const char *id, pid_t sentry)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/root/%s", tmp, id);
    cr_expect(access(p, F_OK) < 0, "the failed create left its state directory %s", p);
    char rel[128], cg[4096];
    snprintf(rel, sizeof(rel), "bulkhead/%s", id);
    h_cgroup_dir("pids", rel, cg, sizeof(cg));
    cr_expect(access(cg, F_OK) < 0, "the failed create left its cgroup %s", cg);
    if (sentry > 0) {
        /* Killed before create returned; a detached sentry's reaper (the
         * host's init here) may take a moment to reap it. */
        bool gone = false;
        for (int i = 0; i < 100 && !gone; i++) {
            gone = kill(sentry, 0) < 0 && errno == ESRCH;
            if (!gone)
                usleep(50000);
        }
        cr_expect(gone, "the sentry %d still exists", sentry);
    }
    expect_no_host_mount_under_tmp();
}

/* A pid a hook wrote into REL of the rootfs, or -1. */
static pid_t pid_from(const char *rel)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", rootfs, rel);
    FILE *f = fopen(p, "re");
    if (f == NULL)
        return -1;
    int pid = -1;
    if (fscanf(f, "%d", &pid) != 1)
        pid = -1;
    fclose(f);
    return pid;
}

/* bulkhead VERB --bundle TMP/bundle BASE-PID: the container's id is kept
 * for deletion at the end. */
static void run_bundle(const char *verb, const char *base, struct run_result *r)
{
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    run_in((const char *const[]){verb, "--bundle", bundle, new_id(base), NULL}, 60, r);
}

/* sh: the state's pid (a number in the JSON on stdin) into $pid. */
#define READ_PID "pid=$(sed -n 's/.*\"pid\": *\\([0-9]*\\).*/\\1/p'); "

/* ---- runc's hooks library test, re-done ------------------------------------ */

/* A createRuntime hook (runtime namespaces) binds a file onto a path of the
 * rootfs by its host path inside the container's mount namespace (nsenter
 * by the state's pid); a createContainer hook binds another onto a path
 * relative to its cwd, the root before pivot_root. The container sees both,
 * and the host none. */
static void mounts_by_host_path_and_from_cwd(const char *tier)
{
    need_tier(tier);
    h_write_file(tmp, "bundle/cr-source", "from-create-runtime\n");
    h_write_file(tmp, "bundle/cc-source", "from-create-container\n");
    char *cr = NULL, *cc = NULL;
    cr_assert_geq(asprintf(&cr,
                           READ_PID "touch %s/etc/cr-target && nsenter -m -t \"$pid\" mount "
                                    "--bind %s/bundle/cr-source %s/etc/cr-target",
                           rootfs, tmp, rootfs),
                  0);
    cr_assert_geq(asprintf(&cc,
                           "touch ./etc/cc-target && mount --bind %s/bundle/cc-source "
                           "./etc/cc-target",
                           tmp),
                  0);
    write_config(
        tier, json_pack("[s,s,s]", "sh", "-c", "cat /etc/cr-target /etc/cc-target"),
        json_pack("{s:[o],s:[o]}", "createRuntime", sh_hook(cr), "createContainer", sh_hook(cc)));
    free(cr);
    free(cc);
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    run_in((const char *const[]){"run", "--bundle", bundle, new_id("hooklib"), NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "run: %s", r.err);
    cr_expect(r.out && strstr(r.out, "from-create-runtime\n") != NULL,
              "the createRuntime hook's bind is not in the container: %s / %s", r.out, r.err);
    cr_expect(r.out && strstr(r.out, "from-create-container\n") != NULL,
              "the createContainer hook's bind is not in the container: %s / %s", r.out, r.err);
    h_free(&r);
    /* The targets on the host are the empty files the hooks touched. */
    struct stat st;
    char p[512];
    snprintf(p, sizeof(p), "%s/etc/cc-target", rootfs);
    cr_expect(stat(p, &st) == 0 && st.st_size == 0, "%s on the host: not the empty target", p);
    expect_no_host_mount_under_tmp();
}

Test(oci_hooks, mounts_by_host_path_and_from_cwd_container_tier)
{
    mounts_by_host_path_and_from_cwd("container");
}

Test(oci_hooks, mounts_by_host_path_and_from_cwd_kernel_tier)
{
    mounts_by_host_path_and_from_cwd("kernel");
}

/* ---- the order -------------------------------------------------------------- */

static char *read_rootfs_file(const char *rel)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", rootfs, rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return strdup("");
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return strdup(buf);
}

/* runc's order: prestart, createRuntime, createContainer before create
 * returns (createContainer from the root as its cwd, in the container's
 * pid namespace); startContainer in the container (its own view of the
 * root) before the process runs; poststart after; poststop at delete. */
static void hooks_in_runcs_order(const char *tier)
{
    need_tier(tier);
    char log[300];
    snprintf(log, sizeof(log), "%s/order.log", rootfs);
    h_write_file(rootfs, "order.log", "");
    cr_assert_eq(chmod(log, 0666), 0);
    char *host[4];
    const char *names[4] = {"prestart", "createRuntime", "poststart", "poststop"};
    for (int i = 0; i < 4; i++)
        cr_assert_geq(asprintf(&host[i], "echo %s >> %s", names[i], log), 0);
    json_t *hooks = json_pack("{s:[o],s:[o],s:[o],s:[o],s:[o],s:[o]}", "prestart", sh_hook(host[0]),
                              "createRuntime", sh_hook(host[1]), "createContainer",
                              sh_hook("echo createContainer pid=$$ >> ./order.log"),
                              "startContainer", sh_hook("echo startContainer >> /order.log"),
                              "poststart", sh_hook(host[2]), "poststop", sh_hook(host[3]));
    for (int i = 0; i < 4; i++)
        free(host[i]);
    write_config(tier, json_pack("[s]", "true"), hooks);
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    const char *id = new_id("hookorder");
    struct run_result r;
    run_in((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    h_free(&r);
    char *text = read_rootfs_file("order.log");
    int cc_pid = -1, end = -1;
    sscanf(text, "prestart createRuntime createContainer pid=%d%n", &cc_pid, &end);
    cr_expect(end > 0 && strcmp(text + end, "\n") == 0, "after create: %s", text);
    cr_expect(cc_pid > 1 && cc_pid < 100,
              "the createContainer hook is not in the container's pid namespace: pid %d", cc_pid);
    free(text);
    run_in((const char *const[]){"start", id, NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "start: %s", r.err);
    h_free(&r);
    for (double end = h_now() + 60; h_now() < end;) { /* a bound on a hang only */
        run_in((const char *const[]){"state", id, NULL}, 30, &r);
        bool stopped = r.out && strstr(r.out, "\"stopped\"") != NULL;
        h_free(&r);
        if (stopped)
            break;
        usleep(50000);
    }
    run_in((const char *const[]){"delete", id, NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "delete: %s", r.err);
    h_free(&r);
    text = read_rootfs_file("order.log");
    const char *after =
        strchr(strstr(text, "createContainer") ? strstr(text, "createContainer") : text, '\n');
    cr_expect_str_eq(after ? after + 1 : text, "startContainer\npoststart\npoststop\n",
                     "the whole order: %s", text);
    free(text);
}

Test(oci_hooks, run_in_runcs_order_container_tier)
{
    hooks_in_runcs_order("container");
}

Test(oci_hooks, run_in_runcs_order_kernel_tier)
{
    hooks_in_runcs_order("kernel");
}

/* ---- failures ------------------------------------------------------------------- */

/* The second hook of a kind fails: the create fails naming the kind, the
 * index, the exit status and what the hook said, and nothing is left (the
 * first hook recorded the sentry's pid; the createContainer one also
 * mounted something in the container first). */
static void failing_hook_leaves_nothing(const char *tier, const char *kind)
{
    need_tier(tier);
    bool in_container = strcmp(kind, "createContainer") == 0;
    h_write_file(tmp, "bundle/src", "x\n");
    char *first = NULL;
    if (in_container)
        cr_assert_geq(asprintf(&first,
                               READ_PID "echo \"$pid\" > ./sentry.pid && touch ./etc/t && mount "
                                        "--bind %s/bundle/src ./etc/t",
                               tmp),
                      0);
    else
        cr_assert_geq(asprintf(&first, READ_PID "echo \"$pid\" > %s/sentry.pid", rootfs), 0);
    json_t *hooks =
        json_pack("{s:[o,o]}", kind, sh_hook(first), sh_hook("echo hook-says-no >&2; exit 7"));
    free(first);
    write_config(tier, json_pack("[s]", "true"), hooks);
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    const char *id = new_id("hookfail");
    struct run_result r;
    run_in((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_expect_neq(r.status, 0, "create succeeded although its %s hook failed", kind);
    char want[64];
    snprintf(want, sizeof(want), "%s[1] hook `/bin/sh`", kind);
    cr_expect(r.err && strstr(r.err, want) != NULL && strstr(r.err, "exited with status 7") &&
                  strstr(r.err, "hook-says-no"),
              "the error does not name the hook, its index, its status and its words: %s", r.err);
    h_free(&r);
    pid_t sentry = pid_from("sentry.pid");
    cr_expect_gt(sentry, 1, "the first %s hook did not run", kind);
    expect_nothing_left(id, sentry);
}

Test(oci_hooks, failing_create_runtime_hook_leaves_nothing_container_tier)
{
    failing_hook_leaves_nothing("container", "createRuntime");
}

Test(oci_hooks, failing_create_runtime_hook_leaves_nothing_kernel_tier)
{
    failing_hook_leaves_nothing("kernel", "createRuntime");
}

Test(oci_hooks, failing_create_container_hook_leaves_nothing_container_tier)
{
    failing_hook_leaves_nothing("container", "createContainer");
}

Test(oci_hooks, failing_create_container_hook_leaves_nothing_kernel_tier)
{
    failing_hook_leaves_nothing("kernel", "createContainer");
}

/* ---- the kernel tier's rules on the hooks' mounts ----------------------------------- */

/* A createRuntime hook binds a procfs (the host's, as the container's mount
 * namespace has it before pivot_root) into the rootfs: not the sandbox's
 * own, so the kernel tier refuses the create with the reason and leaves
 * nothing. The container tier lets the hook do it, as runc does. */
Test(oci_hooks, kernel_tier_refuses_the_hosts_procfs_from_a_hook)
{
    h_require_kernel_tier();
    char p[512];
    snprintf(p, sizeof(p), "%s/mnt", rootfs);
    cr_assert_eq(mkdir(p, 0755), 0);
    char *cr = NULL;
    cr_assert_geq(asprintf(&cr,
                           READ_PID "echo \"$pid\" > %s/sentry.pid; nsenter -m -t \"$pid\" "
                                    "mount --rbind /proc %s/mnt",
                           rootfs, rootfs),
                  0);
    write_config("kernel", json_pack("[s]", "true"),
                 json_pack("{s:[o]}", "createRuntime", sh_hook(cr)));
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    const char *id = new_id("hookproc");
    struct run_result r;
    run_in((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_expect_neq(r.status, 0, "the kernel tier took a hook's procfs on /mnt");
    cr_expect(r.err && strstr(r.err, "a hook's proc on `/mnt` is not one bulkhead made") != NULL &&
                  strstr(r.err, "must be the sandbox's own") != NULL,
              "the refusal does not say what and why: %s", r.err);
    h_free(&r);
    expect_nothing_left(id, pid_from("sentry.pid"));

    /* The same at the container tier: created, as under runc. */
    write_config("container", json_pack("[s]", "true"),
                 json_pack("{s:[o]}", "createRuntime", sh_hook(cr)));
    id = new_id("hookprocc");
    run_in((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "container tier: %s", r.err);
    h_free(&r);
    free(cr);
}

/* A rootfs the sandbox's ids cannot reach by its host path (a 0700 parent,
 * as docker's /var/lib/docker) is handed over as a prepared tree; before
 * pivot_root it then sits at the staging place, not at its host path: the
 * create still works, createContainer hooks still get the root as their
 * cwd, and the log says why a hook mounting by the host path would miss. */
Test(oci_hooks, unreachable_rootfs_path_keeps_the_hooks_cwd_and_says_so)
{
    cr_assert_eq(chmod(tmp, 0700), 0);
    write_config("container", json_pack("[s]", "true"),
                 json_pack("{s:[o]}", "createContainer", sh_hook("touch ./cc-was-here")));
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    run_in((const char *const[]){"create", "--bundle", bundle, new_id("hookfar"), NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "create: %s", r.err);
    h_free(&r);
    char p[512];
    snprintf(p, sizeof(p), "%s/cc-was-here", rootfs);
    cr_expect_eq(access(p, F_OK), 0, "the createContainer hook's cwd was not the root");
    char *log = NULL;
    snprintf(p, sizeof(p), "%s/log.json", tmp);
    FILE *f = fopen(p, "re");
    cr_assert_not_null(f, "no log");
    size_t cap = 0;
    cr_assert_gt(getdelim(&log, &cap, '\0', f), 0);
    fclose(f);
    cr_expect(strstr(log, "cannot reach the rootfs") != NULL, "the log does not say so: %s", log);
    free(log);
}

/* What a createContainer hook leaves running in the container's pid
 * namespace is ended before the sentry goes on, at both tiers: it would be
 * an unconfined process among the guests (the live tier check refuses the
 * container then), and at the kernel tier could mount under the root after
 * the check of the hooks' mounts. */
static void hooks_daemon_is_ended(const char *tier)
{
    need_tier(tier);
    write_config(
        tier,
        json_pack("[s,s,s]", "sh", "-c", "test -d /proc/$(cat /bg.pid) && echo alive || echo gone"),
        json_pack("{s:[o]}", "createContainer",
                  sh_hook("sleep 60 </dev/null >/dev/null 2>&1 & echo $! > ./bg.pid")));
    struct run_result r;
    run_bundle("run", "hookbg", &r);
    cr_expect_eq(r.status, 0, "run: %s", r.err);
    cr_expect(r.out && strcmp(r.out, "gone\n") == 0, "the hook's daemon: %s %s", r.out, r.err);
    h_free(&r);
}

Test(oci_hooks, what_the_hooks_left_running_is_ended_container_tier)
{
    hooks_daemon_is_ended("container");
}

Test(oci_hooks, what_the_hooks_left_running_is_ended_kernel_tier)
{
    hooks_daemon_is_ended("kernel");
}

/* A hook's mount point with a space, a tab and a backslash in its name: the
 * kernel writes them as \ooo in mountinfo, and the kernel tier's check of
 * the hooks' mounts reads them back exactly (one parser, sentry/mountinfo.c)
 * instead of refusing the path as unreadable. */
Test(oci_hooks, a_hooks_mount_point_with_odd_characters_is_read_exactly_kernel_tier)
{
    h_require_kernel_tier();
    char p[512];
    snprintf(p, sizeof(p), "%s/odd dir\t\\x", rootfs);
    cr_assert_eq(mkdir(p, 0755), 0);
    write_config("kernel",
                 json_pack("[s,s,s]", "sh", "-c",
                           "grep -c 'odd\\\\040dir\\\\011\\\\134x' /proc/self/mountinfo"),
                 json_pack("{s:[o]}", "createContainer",
                           sh_hook("mount -t tmpfs -o size=64k tmpfs \"./odd dir\t\\x\"")));
    struct run_result r;
    run_bundle("run", "hookodd", &r);
    cr_expect_eq(r.status, 0, "run: %s", r.err);
    cr_expect(r.out && strcmp(r.out, "1\n") == 0, "the hook's mount is not in the container: %s %s",
              r.out, r.err);
    h_free(&r);
}

/* ---- one rule for every mount in the root (kernel tier) -------------------- */

/* One kind of mount, made once by the config's own mounts and once by a
 * createRuntime hook (by the root's host path in the container's mount
 * namespace): the kernel tier gives both the same answer
 * (sentry/README.md, "One rule for every mount in the root"). */
struct mount_kind {
    const char *name;
    json_t *(*config_mount)(void); /* the config's way */
    const char *hook_cmd;          /* the hook's way; R is the rootfs's host path */
    const char *refusal;           /* NULL: accepted; else what the error says */
    const char *guest_cmd;         /* run when accepted */
    const char *guest_out;         /* what it prints */
};

static json_t *bind_of(const char *source)
{
    return json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/mnt", "type", "bind", "source", source,
                     "options", "bind");
}

static json_t *host_proc(void)
{
    return bind_of("/proc");
}

static json_t *host_sys(void)
{
    return bind_of("/sys");
}

/* A cgroupfs of the host's (v1: the pids hierarchy; v2: the one). Not
 * /sys/fs/cgroup on v1 and hybrid hosts: a tmpfs there, whose cgroup mounts
 * an idmapped bind of it leaves behind. */
static const char *host_cgroup_dir(void)
{
    static char dir[4096];
    h_cgroup_dir("pids", ".", dir, sizeof(dir));
    return dir;
}

static json_t *host_cgroup(void)
{
    return bind_of(host_cgroup_dir());
}

static json_t *own_proc(void)
{
    return json_pack("{s:s,s:s,s:s}", "destination", "/mnt", "type", "proc", "source", "proc");
}

static json_t *own_sys(void)
{
    return json_pack("{s:s,s:s,s:s}", "destination", "/mnt", "type", "sysfs", "source", "sysfs");
}

static json_t *shared_tmpfs_at_mnt(void)
{
    return json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/mnt", "type", "tmpfs", "source",
                     "tmpfs", "options", "shared");
}

static json_t *shared_tmpfs_under_sys(void)
{
    return json_pack("{s:s,s:s,s:s,s:[s]}", "destination", "/sys/kernel/mm", "type", "tmpfs",
                     "source", "tmpfs", "options", "shared");
}

static const struct mount_kind mount_kinds[] = {
    {"host procfs", host_proc, "mount --rbind /proc R/mnt",
     "proc on `/mnt` is not one bulkhead made", NULL, NULL},
    {"host sysfs", host_sys, "mount --rbind /sys R/mnt", "sysfs on `/mnt` is not one bulkhead made",
     NULL, NULL},
    {"host cgroupfs", host_cgroup, "mount --rbind C R/mnt", "on `/mnt` is not one bulkhead made",
     NULL, NULL},
    /* The broker is the wall: a path through a procfs outside /proc is
     * refused whole (its per-process checks read /proc/N from the path). */
    {"own procfs outside /proc", own_proc, "mount --bind R/proc R/mnt", NULL,
     "cat /mnt/meminfo >/dev/null 2>&1 && echo read || echo refused", "refused\n"},
    {"own sysfs outside /sys", own_sys, "mount --bind R/sys R/mnt", NULL,
     "test -d /mnt/kernel && echo there", "there\n"},
    /* The broker sees the propagation and checks every path call by call. */
    {"shared mount outside /proc and /sys", shared_tmpfs_at_mnt,
     "mount -t tmpfs -o size=64k tmpfs R/mnt && mount --make-shared R/mnt", NULL,
     "grep -c ' /mnt .*shared:' /proc/self/mountinfo", "1\n"},
    {"shared mount under /sys", shared_tmpfs_under_sys,
     "mount -t tmpfs -o size=64k tmpfs R/sys/kernel/mm && mount --make-shared R/sys/kernel/mm",
     "mount on `/sys/kernel/mm` takes part in mount propagation", NULL, NULL},
};

/* The hook's command with R replaced by the rootfs's host path, C by a
 * host cgroupfs. */
static char *hook_script(const char *cmd)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    cr_assert_not_null(f);
    fputs(READ_PID "nsenter -m -t \"$pid\" sh -c '", f);
    for (const char *c = cmd; *c; c++)
        if (*c == 'R')
            fputs(rootfs, f);
        else if (*c == 'C')
            fputs(host_cgroup_dir(), f);
        else
            fputc(*c, f);
    fputs("'", f);
    fclose(f);
    return out;
}

static void one_rule(const struct mount_kind *k)
{
    h_require_kernel_tier();
    char p[512];
    snprintf(p, sizeof(p), "%s/mnt", rootfs);
    cr_assert_eq(mkdir(p, 0755), 0);
    const char *cmd = k->guest_cmd ? k->guest_cmd : "true";
    for (int by_hook = 0; by_hook < 2; by_hook++) {
        const char *who = by_hook ? "a hook's" : "the config's";
        char *script = by_hook ? hook_script(k->hook_cmd) : NULL;
        write_config_with("kernel", json_pack("[s,s,s]", "sh", "-c", cmd),
                          by_hook ? json_pack("{s:[o]}", "createRuntime", sh_hook(script))
                                  : json_object(),
                          by_hook ? NULL : k->config_mount());
        free(script);
        struct run_result r;
        run_bundle("run", by_hook ? "rulehook" : "rulecfg", &r);
        if (k->refusal != NULL) {
            cr_expect_neq(r.status, 0, "%s by %s: taken: %s", k->name, who, r.out);
            cr_expect(r.err && strstr(r.err, who) != NULL && strstr(r.err, k->refusal) != NULL,
                      "%s by %s: the refusal does not say what and why: %s", k->name, who, r.err);
        } else {
            cr_expect_eq(r.status, 0, "%s by %s: %s", k->name, who, r.err);
            cr_expect(r.out && strcmp(r.out, k->guest_out) == 0, "%s by %s: the guest saw %s %s",
                      k->name, who, r.out, r.err);
        }
        h_free(&r);
    }
}

/* Indices, not the kinds: a test runs in a process of its own, where
 * the kinds' pointers would not hold. */
static size_t kind_index[sizeof(mount_kinds) / sizeof(mount_kinds[0])] = {0, 1, 2, 3, 4, 5, 6};

ParameterizedTestParameters(oci_hooks, one_rule_same_answer_from_config_and_hook)
{
    return cr_make_param_array(size_t, kind_index, sizeof(kind_index) / sizeof(kind_index[0]));
}

/* Each kind of mount_kinds: the name in every message says which. */
ParameterizedTest(size_t *i, oci_hooks, one_rule_same_answer_from_config_and_hook)
{
    one_rule(&mount_kinds[*i]);
}

/* ---- where container hooks run: cgroup, namespaces, leftovers ---------------- */

/* The container's state's pid (its sentry's host pid), after create. */
static pid_t state_pid(const char *id)
{
    struct run_result r;
    run_in((const char *const[]){"state", id, NULL}, 30, &r);
    cr_assert_eq(r.status, 0, "state: %s", r.err);
    const char *p = r.out ? strstr(r.out, "\"pid\":") : NULL;
    cr_assert_not_null(p, "%s", r.out);
    pid_t pid = (pid_t)atoi(p + 6 + strspn(p + 6, " "));
    h_free(&r);
    return pid;
}

static char *rootfs_text(const char *rel)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", rootfs, rel);
    FILE *f = fopen(p, "re");
    cr_assert_not_null(f, "the hook wrote no %s", rel);
    char *text = NULL;
    size_t cap = 0;
    if (getdelim(&text, &cap, '\0', f) < 0) {
        free(text);
        text = strdup("");
    }
    fclose(f);
    return text;
}

/* runc 1.1 runs createContainer hooks from its init, which its parent put in
 * the container's cgroup before the init unshared the cgroup namespace
 * (process_linux.go, nsexec.c): the hook is in the sentry's cgroups (read
 * by the hook, from the same cgroup namespace, in the container's own
 * procfs) and in its cgroup and time namespaces. */
static void hooks_join_cgroup_and_namespaces(const char *tier)
{
    need_tier(tier);
    write_config(tier, json_pack("[s]", "true"),
                 json_pack("{s:[o]}", "createContainer",
                           sh_hook("cat ./proc/self/cgroup > ./hook.cg; cat ./proc/1/cgroup > "
                                   "./sentry.cg; readlink ./proc/self/ns/cgroup "
                                   "./proc/self/ns/time > ./hook.ns")));
    struct run_result r;
    run_bundle("create", "hookcg", &r);
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    h_free(&r);
    pid_t sentry = state_pid(ids[n_ids - 1]);
    char *hook = rootfs_text("hook.cg"), *own = rootfs_text("sentry.cg"),
         *ns = rootfs_text("hook.ns");
    cr_expect(hook[0] != '\0' && strcmp(hook, own) == 0,
              "the hook's cgroups:\n%s\nare not the sentry's:\n%s", hook, own);
    char want[256] = "", link[64], target[64];
    for (int i = 0; i < 2; i++) {
        snprintf(link, sizeof(link), "/proc/%d/ns/%s", (int)sentry, i ? "time" : "cgroup");
        ssize_t n = readlink(link, target, sizeof(target) - 1);
        cr_assert_gt(n, 0, "readlink %s", link);
        target[n] = '\0';
        strcat(want, target);
        strcat(want, "\n");
    }
    cr_expect_str_eq(ns, want, "the hook's cgroup and time namespaces are not the sentry's");
    free(hook);
    free(own);
    free(ns);
}

Test(oci_hooks, create_container_hooks_join_the_cgroup_and_its_namespaces_container_tier)
{
    hooks_join_cgroup_and_namespaces("container");
}

Test(oci_hooks, create_container_hooks_join_the_cgroup_and_its_namespaces_kernel_tier)
{
    hooks_join_cgroup_and_namespaces("kernel");
}

/* How many children pid has (zombies included), and the first one. */
static int children_of(pid_t pid, pid_t *first)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(p, "re");
    cr_assert_not_null(f, "%s", p);
    int n = 0, c;
    while (fscanf(f, "%d", &c) == 1)
        if (n++ == 0 && first != NULL)
            *first = c;
    fclose(f);
    return n;
}

/* In a pod's shared pid namespace the joiner's sentry is not pid 1, so it
 * cannot end a createContainer hook's daemon by killing its namespace: the
 * front end ends it through the container's cgroup, which the hook joined.
 * The daemon, orphaned, would be a child of the pod's pid 1 (the pause
 * container's sentry) beside its guest; the guest lives on. */
Test(oci_hooks, a_hooks_daemon_in_a_pods_shared_pid_namespace_is_ended)
{
    h_require_kernel_tier();
    write_config("kernel", json_pack("[s,s]", "/usr/bin/sleep", "1000"), json_object());
    struct run_result r;
    run_bundle("create", "hookpause", &r);
    cr_assert_eq(r.status, 0, "create the pause container: %s", r.err);
    h_free(&r);
    pid_t pause = state_pid(ids[n_ids - 1]);

    pid_t guest = 0;
    for (double end = h_now() + 30; children_of(pause, &guest) == 0 && h_now() < end;)
        usleep(10000);
    cr_assert_gt(guest, 0, "the pause container has no guest");
    const char *daemon = "sleep 600 </dev/null >/dev/null 2>&1 &";
    write_config("kernel", json_pack("[s]", "true"),
                 json_pack("{s:[o]}", "createContainer", sh_hook(daemon)));
    /* Join the pause container's pid, ipc, uts and network namespaces. */
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_t *cfg = json_load_file(p, 0, NULL);
    cr_assert_not_null(cfg);
    json_t *ns = json_array();
    const char *kinds[][2] = {{"pid", "pid"}, {"ipc", "ipc"}, {"uts", "uts"}, {"network", "net"}};
    for (size_t i = 0; i < 4; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pause, kinds[i][1]);
        json_array_append_new(ns, json_pack("{s:s,s:s}", "type", kinds[i][0], "path", path));
    }
    json_array_append_new(ns, json_pack("{s:s}", "type", "mount"));
    json_object_set_new(json_object_get(cfg, "linux"), "namespaces", ns);
    cr_assert_eq(json_dump_file(cfg, p, 0), 0);
    json_decref(cfg);

    run_bundle("create", "hookjoiner", &r);
    cr_assert_eq(r.status, 0, "create the joiner: %s", r.err);
    h_free(&r);
    /* A killed daemon may stay a zombie until the pause sentry reaps it; a
     * live one never goes (600 s). */
    int n = 2;
    for (double end = h_now() + 30; (n = children_of(pause, NULL)) > 1 && h_now() < end;)
        usleep(10000);
    cr_expect_eq(n, 1, "the createContainer hook's daemon lives on in the pod's pid namespace");
    char alive[64];
    snprintf(alive, sizeof(alive), "/proc/%d", (int)guest);
    cr_expect_eq(access(alive, F_OK), 0, "the pause container's guest died");
}
