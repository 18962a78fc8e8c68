/* The runc-compatible runtime end to end: the real `bulkhead` binary on
 * bundles made in temp dirs, driven the way containerd's shim drives it
 * (--root, --log FILE --log-format json, the bundle as working directory,
 * this process as the child subreaper that reaps the container's pid).
 * Bad config.json cases must give a clear error in the log, a non-zero exit
 * and leave nothing behind; a good container goes created → running →
 * stopped → deleted with no state, cgroup or process left. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "harness.h"

static char tmp[128];   /* the test's temp dir: bundle, root, log */
static char bh[512];    /* the binary */
static char ids[8][64]; /* containers to delete --force at the end */
static int n_ids;
static char netns[64];      /* a network namespace a test made, removed at the end */
static bool rootfs_mounted; /* an overlay a test mounted on bundle/rootfs */

/* Runs bulkhead with the shim's global flags; stdout into out (may be NULL).
 * child_stdout: fd to give as the child's stdout (-1: a capture pipe). */
static int run_bh_fd(char *out, size_t outlen, int child_stdout, const char *const *args)
{
    char root[256], log[256];
    snprintf(root, sizeof(root), "%s/root", tmp);
    snprintf(log, sizeof(log), "%s/log.json", tmp);
    const char *argv[32] = {bh, "--root", root, "--log", log, "--log-format", "json"};
    int n = 7;
    for (int i = 0; args[i] && n < 31; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char bundle[256];
        snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
        if (chdir(bundle) < 0 && chdir(tmp) < 0)
            _exit(127);
        dup2(child_stdout >= 0 ? child_stdout : p[1], 1);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        execv(bh, (char **)argv);
        _exit(127);
    }
    close(p[1]);
    size_t got = 0;
    char buf[4096];
    for (;;) {
        ssize_t r = read(p[0], buf, sizeof(buf));
        if (r <= 0)
            break;
        if (out && got + (size_t)r < outlen) {
            memcpy(out + got, buf, (size_t)r);
            got += (size_t)r;
        }
    }
    if (out)
        out[got] = '\0';
    close(p[0]);
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

#define RUN(out, ...) run_bh_fd(out, sizeof(out), -1, (const char *const[]){__VA_ARGS__, NULL})
#define RUN0(...) run_bh_fd(NULL, 0, -1, (const char *const[]){__VA_ARGS__, NULL})

/* The last error line of the log, which the shim would show. */
static char *last_error(void)
{
    static char msg[2048];
    char log[256];
    snprintf(log, sizeof(log), "%s/log.json", tmp);
    FILE *f = fopen(log, "r");
    msg[0] = '\0';
    if (f == NULL)
        return msg;
    char line[4096];
    while (fgets(line, sizeof(line), f)) {
        json_t *j = json_loads(line, 0, NULL);
        cr_assert_not_null(j,
                           "log line is not JSON (the shim would say \"unable to retrieve "
                           "OCI runtime error\"): %s",
                           line);
        const char *lvl = json_string_value(json_object_get(j, "level"));
        const char *m = json_string_value(json_object_get(j, "msg"));
        cr_assert_not_null(json_object_get(j, "time"));
        if (lvl && m && strcmp(lvl, "error") == 0)
            snprintf(msg, sizeof(msg), "%s", m);
        json_decref(j);
    }
    fclose(f);
    return msg;
}

static void write_file(const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "write %s", p);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    const char *b = getenv("BULKHEAD_BUILD");
    snprintf(bh, sizeof(bh), "%s/bulkhead", b ? b : "build");
    snprintf(tmp, sizeof(tmp), "/tmp/bh-oci-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    /* Traversable, as docker's bundle and state parents are, so the sandbox's
     * own uid can reach what it is handed there. */
    chmod(tmp, 0711);
    char p[256];
    snprintf(p, sizeof(p), "%s/bundle", tmp);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/bundle/rootfs", tmp);
    mkdir(p, 0755);
    n_ids = 0;
    if (access(bh, X_OK) < 0)
        cr_skip_test("%s is not built", bh);
}

/* Whatever delete could not end (a create that reported failure, e.g.
 * through a sanitizer's exit code, after its sentry started): every
 * process in the container's cgroups is killed by pid, the cgroups
 * removed. */
static void add_hier(const char *dir, void *arg)
{
    char(*hiers)[512] = arg;
    for (int i = 0; i < 24; i++)
        if (hiers[i][0] == '\0') {
            snprintf(hiers[i], 512, "%s", dir);
            return;
        }
}

static void kill_by_cgroup(const char *id)
{
    char hier[24][512] = {{0}};
    bh_cgroup_each_hierarchy(add_hier, hier, NULL);
    for (int round = 0; round < 3; round++) {
        for (size_t h = 0; h < 24 && hier[h][0]; h++) {
            char p[1024];
            snprintf(p, sizeof(p), "%.511s/bulkhead/%.400s/cgroup.procs", hier[h], id);
            FILE *f = fopen(p, "re");
            int pid;
            while (f && fscanf(f, "%d", &pid) == 1)
                if (pid > 0)
                    kill(pid, SIGKILL);
            if (f)
                fclose(f);
        }
        usleep(50000);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
    }
    for (size_t h = 0; h < 24 && hier[h][0]; h++) {
        char p[1024];
        snprintf(p, sizeof(p), "%.511s/bulkhead/%.400s", hier[h], id);
        rmdir(p);
    }
}

static void teardown(void)
{
    for (int i = 0; i < n_ids; i++) {
        RUN0("delete", "--force", ids[i]);
        kill_by_cgroup(ids[i]);
    }
    if (rootfs_mounted) {
        char p[256];
        snprintf(p, sizeof(p), "%s/bundle/rootfs", tmp);
        if (umount2(p, MNT_DETACH) < 0)
            fprintf(stderr, "%s was not unmounted: %s\n", p, strerror(errno));
        rootfs_mounted = false;
    }
    if (netns[0]) {
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "ip netns delete %s 2>/dev/null", netns);
        if (system(cmd) != 0)
            fprintf(stderr, "network namespace %s was not removed\n", netns);
        netns[0] = '\0';
    }
    /* Reap whatever was re-parented to us. */
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    if (tmp[0])
        h_remove_tree(tmp);
    tmp[0] = '\0';
}

/* A minimal valid config around the given pieces of JSON. */
static void write_config(const char *version, const char *root, const char *process,
                         const char *extra)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "{\"ociVersion\": \"%s\", \"root\": %s, \"process\": %s, \"hostname\": \"t\"%s%s}",
             version, root, process, extra ? ", " : "", extra ? extra : "");
    write_file("bundle/config.json", text);
}

#define GOOD_PROC                                                                                  \
    "{\"args\": [\"/bin/sh\", \"-c\", \"exit 0\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, "        \
    "\"gid\": 0}, \"env\": [\"PATH=/usr/bin:/bin\"]}"
#define GOOD_ROOT "{\"path\": \"rootfs\"}"

/* Creating with this config must fail with msg in the log and leave nothing. */
static void expect_refused(const char *id, const char *needle)
{
    char out[1024];
    int rc = RUN(out, "create", "--bundle", ".", id);
    cr_expect_neq(rc, 0, "create of a bad config exited 0");
    const char *msg = last_error();
    cr_expect(strstr(msg, needle) != NULL, "error `%s` does not mention `%s`", msg, needle);
    char p[512];
    snprintf(p, sizeof(p), "%s/root/%s", tmp, id);
    cr_expect_neq(access(p, F_OK), 0, "state directory %s left behind", p);
    char cg[600];
    snprintf(p, sizeof(p), "bulkhead/%s", id);
    h_cgroup_dir("pids", p, cg, sizeof(cg));
    cr_expect_neq(access(cg, F_OK), 0, "cgroup %s left behind", cg);
}

TestSuite(oci_config, .init = setup, .fini = teardown);

Test(oci_config, not_json)
{
    write_file("bundle/config.json", "{\"ociVersion\": \"1.0.2\",\n  \"root\": }");
    expect_refused("c1", "line 2");
}

Test(oci_config, missing_version)
{
    write_file("bundle/config.json", "{\"root\": {\"path\": \"rootfs\"}}");
    expect_refused("c1", "ociVersion");
}

Test(oci_config, unsupported_version)
{
    write_config("2.0.0", GOOD_ROOT, GOOD_PROC, NULL);
    expect_refused("c1", "1.0.x to 1.3.0");
}

Test(oci_config, accepted_versions_reach_later_checks)
{
    /* Versions in range pass the version check and fail on the bad root instead. */
    const char *ok[] = {"1.0.0", "1.0.2-dev", "1.1.0", "1.2.1", "1.3.0"};
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        write_config(ok[i], "{\"path\": \"nope\"}", GOOD_PROC, NULL);
        expect_refused("c1", "root.path");
    }
}

Test(oci_config, missing_root)
{
    write_file("bundle/config.json", "{\"ociVersion\": \"1.0.2\", \"process\": " GOOD_PROC "}");
    expect_refused("c1", "`root` is required");
}

Test(oci_config, wrong_type)
{
    write_config("1.0.2", "{\"path\": 42}", GOOD_PROC, NULL);
    expect_refused("c1", "`root.path` must be a string");
}

Test(oci_config, args_not_array)
{
    write_config("1.0.2", GOOD_ROOT,
                 "{\"args\": \"sh\", \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}}", NULL);
    expect_refused("c1", "`process.args` must be an array");
}

Test(oci_config, missing_process)
{
    write_file("bundle/config.json",
               "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\"}}");
    expect_refused("c1", "`process` is required");
}

Test(oci_config, relative_cwd)
{
    write_config("1.0.2", GOOD_ROOT,
                 "{\"args\": [\"sh\"], \"cwd\": \"tmp\", \"user\": {\"uid\": 0, \"gid\": 0}}",
                 NULL);
    expect_refused("c1", "must be an absolute path");
}

Test(oci_config, unknown_namespace)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"bogus\"}]}");
    expect_refused("c1", "`bogus` is not a namespace");
}

Test(oci_config, root_escapes_bundle)
{
    write_config("1.0.2", "{\"path\": \"../..\"}", GOOD_PROC, NULL);
    expect_refused("c1", "escapes the bundle");
}

Test(oci_config, root_is_host_root)
{
    write_config("1.0.2", "{\"path\": \"/\"}", GOOD_PROC, NULL);
    expect_refused("c1", "host's `/`");
}

Test(oci_config, bind_source_escapes_bundle)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"mounts\": [{\"destination\": \"/x\", \"type\": \"bind\", \"source\": "
                 "\"../../../../../../../../etc\", \"options\": [\"rbind\"]}]");
    expect_refused("c1", "escapes the bundle");
}

Test(oci_config, relative_mount_destination)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"mounts\": [{\"destination\": \"x\", \"type\": \"tmpfs\", \"source\": "
                 "\"tmpfs\"}]");
    expect_refused("c1", "mounts[0].destination");
}

Test(oci_config, dotdot_mount_destination)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"mounts\": [{\"destination\": \"/a/../../etc\", \"type\": \"tmpfs\"}]");
    expect_refused("c1", "`..`");
}

Test(oci_config, maps_to_host_root)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"linux\": {\"uidMappings\": [{\"containerID\": 0, \"hostID\": 0, \"size\": "
                 "1}]}");
    expect_refused("c1", "host root");
}

Test(oci_config, bad_tier_annotation)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC, "\"annotations\": {\"dev.bulkhead.tier\": \"vm\"}");
    expect_refused("c1", "dev.bulkhead.tier");
}

Test(oci_config, relative_hook)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"hooks\": {\"prestart\": [{\"path\": \"hook.sh\"}]}");
    expect_refused("c1", "hooks.prestart[0].path");
}

Test(oci_config, duplicate_key)
{
    write_file("bundle/config.json", "{\"ociVersion\": \"1.0.2\", \"ociVersion\": \"1.0.2\"}");
    expect_refused("c1", "duplicate");
}

Test(oci_config, bad_rlimit)
{
    write_config("1.0.2", GOOD_ROOT,
                 "{\"args\": [\"sh\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, "
                 "\"rlimits\": [{\"type\": \"RLIMIT_BOGUS\", \"soft\": 1, \"hard\": 1}]}",
                 NULL);
    expect_refused("c1", "RLIMIT_BOGUS");
}

Test(oci_config, bad_capability)
{
    write_config("1.0.2", GOOD_ROOT,
                 "{\"args\": [\"sh\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, "
                 "\"capabilities\": {\"bounding\": [\"CAP_FLY\"]}}",
                 NULL);
    expect_refused("c1", "CAP_FLY");
}

Test(oci_config, terminal_without_console_socket)
{
    write_config("1.0.2", GOOD_ROOT,
                 "{\"args\": [\"sh\"], \"cwd\": \"/\", \"terminal\": true, \"user\": {\"uid\": "
                 "0, \"gid\": 0}}",
                 NULL);
    expect_refused("c1", "--console-socket");
}

Test(oci_config, bad_id)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC, NULL);
    expect_refused("../evil", "not valid");
}

/* A seccomp agent is served at the container tier (test_oci_compat.c); a
 * listenerPath that is not an absolute socket path is refused. */
Test(oci_config, seccomp_agent_refused)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"linux\": {\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ALLOW\", "
                 "\"listenerPath\": \"@abstract\", \"syscalls\": [{\"names\": [\"mkdir\"], "
                 "\"action\": \"SCMP_ACT_NOTIFY\"}]}}");
    expect_refused("c1", "listenerPath");
}

Test(oci_config, seccomp_unknown_operator)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"linux\": {\"seccomp\": {\"defaultAction\": \"SCMP_ACT_ERRNO\", "
                 "\"syscalls\": [{\"names\": [\"read\"], \"action\": \"SCMP_ACT_ALLOW\", "
                 "\"args\": [{\"index\": 0, \"value\": 1, \"op\": \"SCMP_CMP_SOMETIMES\"}]}]}}");
    expect_refused("c1", "SCMP_CMP_SOMETIMES");
}

Test(oci_config, preserve_fds_refused)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC, NULL);
    char out[256];
    cr_expect_neq(RUN(out, "create", "--preserve-fds", "2", "c1"), 0);
    cr_expect(strstr(last_error(), "--preserve-fds") != NULL, "%s", last_error());
}

Test(oci_config, unsupported_device)
{
    write_config("1.0.2", GOOD_ROOT, GOOD_PROC,
                 "\"linux\": {\"devices\": [{\"path\": \"/dev/fuse\", \"type\": \"c\", "
                 "\"major\": 10, \"minor\": 229}]}");
    expect_refused("c1", "/dev/fuse");
}

TestSuite(oci_cli, .init = setup, .fini = teardown);

Test(oci_cli, spec_then_features)
{
    cr_assert_eq(RUN0("spec"), 0);
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_error_t e;
    json_t *j = json_load_file(p, 0, &e);
    cr_assert_not_null(j, "spec wrote bad JSON: %s", e.text);
    cr_expect_str_eq(json_string_value(json_object_get(json_object_get(j, "root"), "path")),
                     "rootfs");
    json_decref(j);
    cr_expect_neq(RUN0("spec"), 0, "spec overwrote an existing config.json");
    char out[16384];
    cr_assert_eq(RUN(out, "features"), 0);
    j = json_loads(out, 0, &e);
    cr_assert_not_null(j, "features is not JSON: %s", e.text);
    cr_expect_str_eq(json_string_value(json_object_get(j, "ociVersionMax")), "1.3.0");
    cr_expect_eq(json_array_size(json_object_get(j, "hooks")), 6);
    json_decref(j);
}

Test(oci_cli, missing_container)
{
    char out[1024];
    cr_expect_neq(RUN(out, "state", "nope"), 0);
    cr_expect(strstr(last_error(), "does not exist") != NULL, "%s", last_error());
    cr_expect_neq(RUN(out, "kill", "nope", "9"), 0);
    cr_expect(strstr(last_error(), "does not exist") != NULL, "%s", last_error());
    cr_expect_eq(RUN(out, "delete", "--force", "nope"), 0,
                 "delete --force of a missing "
                 "container must exit 0");
    cr_expect_neq(RUN(out, "delete", "nope"), 0);
    cr_expect_eq(RUN(out, "list", "--format", "json"), 0);
    cr_expect_str_eq(out, "null\n");
}

Test(oci_cli, unknown_flag)
{
    cr_expect_neq(RUN0("create", "--frobnicate", "x"), 0);
    cr_expect(strstr(last_error(), "--frobnicate") != NULL, "%s", last_error());
}

/* ---- a live container --------------------------------------------------- */

/* A rootfs of the host's /usr (read-only binds) with merged-/usr symlinks,
 * in tmp/rel. */
static void make_rootfs_in(const char *rel)
{
    const char *dirs[] = {"usr", "etc", "proc", "dev", "tmp", "sys", "root"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s/%s", tmp, rel, dirs[i]);
        mkdir(p, 0755);
    }
    const char *links[] = {"bin", "sbin", "lib", "lib64"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        char p[512], t[64];
        snprintf(p, sizeof(p), "%s/%s/%s", tmp, rel, links[i]);
        snprintf(t, sizeof(t), "usr/%s", links[i]);
        if (symlink(t, p) < 0)
            cr_skip_test("symlink: %s", strerror(errno));
    }
    struct stat st;
    if (lstat("/bin", &st) < 0 || !S_ISLNK(st.st_mode))
        cr_skip_test("the host has no merged /usr; the bind rootfs needs it");
}

static void make_rootfs(void)
{
    make_rootfs_in("bundle/rootfs");
}

static void live_config(const char *args_json, const char *extra)
{
    char proc[2048];
    snprintf(proc, sizeof(proc),
             "{\"args\": %s, \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": "
             "[\"PATH=/usr/bin:/bin\"]}",
             args_json);
    char ex[4096];
    snprintf(ex, sizeof(ex),
             "\"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\", "
             "\"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": "
             "\"proc\", \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", "
             "\"source\": \"tmpfs\"}], \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, "
             "{\"type\": \"mount\"}, {\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": "
             "\"uts\"}], \"resources\": {\"pids\": {\"limit\": 64}}}%s%s",
             extra ? ", " : "", extra ? extra : "");
    write_config("1.0.2", "{\"path\": \"rootfs\", \"readonly\": true}", proc, ex);
}

/* live_config at a tier, named by the config's annotation (which wins over
 * --default-tier). */
static void live_config_tier(const char *args_json, const char *tier)
{
    char *extra = NULL;
    cr_assert_geq(asprintf(&extra, "\"annotations\": {\"dev.bulkhead.tier\": \"%s\"}", tier), 0);
    live_config(args_json, extra);
    free(extra);
}

static const char *status_of(const char *id, int *pid)
{
    static char st[32];
    char out[16384];
    if (RUN(out, "state", id) != 0)
        return "error";
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j, "state is not JSON: %s", out);
    snprintf(st, sizeof(st), "%s", json_string_value(json_object_get(j, "status")));
    if (pid)
        *pid = (int)json_integer_value(json_object_get(j, "pid"));
    json_decref(j);
    return st;
}

static int read_pid_file(const char *rel)
{
    char p[512], buf[32] = "";
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    int fd = open(p, O_RDONLY);
    cr_assert_geq(fd, 0, "pid file %s missing", p);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    cr_assert_gt(n, 0);
    buf[n] = '\0';
    cr_expect_null(strchr(buf, '\n'), "pid file has a newline");
    return atoi(buf);
}

/* Waits (bounded) for our re-parented child pid; returns its wait status. */
static int reap(pid_t pid, int seconds)
{
    for (int i = 0; i < seconds * 100; i++) {
        int status;
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return status;
        usleep(10000);
    }
    cr_assert_fail("pid %d did not end within %d s", pid, seconds);
    return -1;
}

/* Creates the bundle's container (a failure fails the test: a machine where
 * bulkhead cannot create one must not pass by skipping); returns its id. */
static const char *create_container(const char *base, int child_stdout)
{
    /* Unique per run, so parallel runs and leftovers of a crashed one never collide. */
    snprintf(ids[n_ids], sizeof(ids[0]), "%s-%d", base, (int)getpid());
    const char *id = ids[n_ids++];
    char pidfile[512];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", tmp);
    /* The container keeps create's stdout: never our capture pipe. */
    int null = -1;
    if (child_stdout < 0)
        child_stdout = null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int rc = run_bh_fd(
        NULL, 0, child_stdout,
        (const char *const[]){"create", "--bundle", ".", "--pid-file", pidfile, id, NULL});
    if (null >= 0)
        close(null);
    if (rc != 0)
        cr_assert_fail("create failed (exit %d): %s", rc, last_error());
    return id;
}

/* A created (not started) container of the bundle's rootfs running args_json,
 * its id; *pid is its process's (we are its subreaper, to reap it). */
static const char *create_with(const char *args_json, const char *base, int *pid)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    live_config(args_json, NULL);
    const char *id = create_container(base, -1);
    *pid = read_pid_file("pid");
    return id;
}

static void assert_gone(const char *id, pid_t pid)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/root/%s", tmp, id);
    cr_expect_neq(access(p, F_OK), 0, "state %s left", p);
    char cg[600];
    snprintf(p, sizeof(p), "bulkhead/%s", id);
    h_cgroup_dir("pids", p, cg, sizeof(cg));
    cr_expect_neq(access(cg, F_OK), 0, "cgroup %s left", cg);
    cr_expect(kill(pid, 0) < 0 && errno == ESRCH, "pid %d still exists", pid);
}

TestSuite(oci_lifecycle, .init = setup, .fini = teardown, .timeout = 60);

Test(oci_lifecycle, create_start_kill_delete)
{
    int pid;
    const char *id = create_with("[\"/bin/sleep\", \"1000\"]", "life", &pid);
    int spid = 0;
    cr_assert_str_eq(status_of(id, &spid), "created");
    cr_expect_eq(spid, pid, "state pid %d != pid file %d", spid, pid);
    char cg[128];
    snprintf(cg, sizeof(cg), "/proc/%d/cgroup", pid);
    FILE *f = fopen(cg, "r");
    cr_assert_not_null(f);
    char line[512];
    bool in = false;
    while (fgets(line, sizeof(line), f))
        in = in || strstr(line, id) != NULL;
    fclose(f);
    cr_expect(in, "the container's pid is not in its cgroup when create returns");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    cr_assert_str_eq(status_of(id, NULL), "running");
    cr_expect_neq(RUN0("start", id), 0, "a second start succeeded");
    cr_expect_neq(RUN0("delete", id), 0, "delete of a running container without --force");
    char out[4096];
    cr_assert_eq(RUN(out, "ps", "--format", "json", id), 0);
    cr_expect(strstr(out, "[") == out, "ps json: %s", out);
    cr_assert_eq(RUN0("kill", id, "KILL"), 0, "kill: %s", last_error());
    int st = reap(pid, 10);
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
    cr_assert_str_eq(status_of(id, NULL), "stopped");
    cr_expect_neq(RUN0("kill", id, "9"), 0);
    cr_expect(strstr(last_error(), "not running") != NULL, "%s", last_error());
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

Test(oci_lifecycle, exit_code_and_stdio)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    live_config("[\"/bin/sh\", \"-c\", \"echo hello-from-guest; exit 3\"]", NULL);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    const char *id = create_container("life", p[1]);
    close(p[1]);
    int pid = read_pid_file("pid");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    /* The guest's stdout is the pipe given to create; EOF comes once it is
     * gone, so nothing else (the sentry, a helper) may hold it. */
    char buf[256] = "";
    size_t got = 0;
    for (;;) {
        struct pollfd pfd = {p[0], POLLIN, 0};
        cr_assert_gt(poll(&pfd, 1, 10000), 0, "no EOF on the guest's stdout: something holds it");
        ssize_t r = read(p[0], buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(p[0]);
    cr_expect(strstr(buf, "hello-from-guest") != NULL, "stdout: %s", buf);
    int st = reap(pid, 10);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x", st);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

/* Every bind mount of a config travels to the sentry as a prepared tree,
 * one fd of the spec message: a container with 40 volumes (docker -v, a
 * pod's hostPath and projected volumes) was refused at 12 ("at most 12
 * prepared mounts"), and 11 or 12 with every optional slot failed in the
 * send itself (16 fds a message). Each bind shows its own file. */
static void forty_binds_reach_the_guest(const char *tier)
{
    enum { N_BINDS = 40 };
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    live_config_tier("[\"/bin/sh\", \"-c\", \"cat /mnt/b0/f /mnt/b39/f; ls /mnt | wc -l\"]", tier);
    char path[512];
    snprintf(path, sizeof(path), "%s/bundle/config.json", tmp);
    json_t *c = json_load_file(path, 0, NULL);
    cr_assert_not_null(c);
    json_t *mounts = json_object_get(c, "mounts");
    json_array_append_new(mounts, json_pack("{s:s,s:s,s:s}", "destination", "/mnt", "type", "tmpfs",
                                            "source", "tmpfs"));
    for (int i = 0; i < N_BINDS; i++) {
        char src[600], dest[32], file[640], text[16];
        snprintf(src, sizeof(src), "%s/src-%d", tmp, i);
        cr_assert_eq(mkdir(src, 0755), 0, "%s: %s", src, strerror(errno));
        snprintf(file, sizeof(file), "%s/f", src);
        snprintf(text, sizeof(text), "bind-%d\n", i);
        FILE *f = fopen(file, "w");
        cr_assert_not_null(f);
        fputs(text, f);
        fclose(f);
        cr_assert_eq(chmod(file, 0644), 0);
        snprintf(dest, sizeof(dest), "/mnt/b%d", i);
        json_array_append_new(mounts, json_pack("{s:s,s:s,s:s,s:[ss]}", "destination", dest, "type",
                                                "bind", "source", src, "options", "bind", "ro"));
    }
    cr_assert_eq(json_dump_file(c, path, 0), 0);
    json_decref(c);
    int out = memfd_create("guest-out", MFD_CLOEXEC);
    cr_assert_geq(out, 0);
    const char *id = create_container("binds", out);
    int pid = read_pid_file("pid");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    int st = reap(pid, 60);
    char *text = h_read_fd(out);
    close(out);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, output %s", st, text);
    cr_expect(strstr(text, "bind-0\nbind-39\n40\n") != NULL, "the guest saw: %s", text);
    free(text);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

Test(oci_lifecycle, forty_bind_mounts_reach_the_guest_container_tier)
{
    forty_binds_reach_the_guest("container");
}

Test(oci_lifecycle, forty_bind_mounts_reach_the_guest_kernel_tier)
{
    forty_binds_reach_the_guest("kernel");
}

Test(oci_lifecycle, delete_created_kills_it)
{
    int pid;
    const char *id = create_with("[\"/bin/sleep\", \"1000\"]", "life", &pid);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    reap(pid, 10);
    assert_gone(id, pid);
}

Test(oci_lifecycle, exec_detached_proxy)
{
    int pid;
    const char *id = create_with("[\"/bin/sleep\", \"1000\"]", "life", &pid);
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    write_file("proc.json", "{\"args\": [\"/bin/sh\", \"-c\", \"exit 5\"], \"cwd\": \"/\", "
                            "\"user\": {\"uid\": 0, \"gid\": 0}, \"env\": [\"PATH=/bin\"]}");
    char procfile[512], pidfile[512];
    snprintf(procfile, sizeof(procfile), "%s/proc.json", tmp);
    snprintf(pidfile, sizeof(pidfile), "%s/exec.pid", tmp);
    cr_assert_eq(RUN0("exec", "--process", procfile, "--detach", "--pid-file", pidfile, id), 0,
                 "exec: %s", last_error());
    int proxy = read_pid_file("exec.pid");
    int st = reap(proxy, 10);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 5, "exec'd status %#x", st);
    cr_assert_eq(RUN0("kill", id, "9"), 0);
    reap(pid, 10);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

/* ---- hooks, the tier annotation, the report socket ------------------------ */

#include <sys/socket.h>
#include <sys/un.h>

#include "control.pb-c.h"
#include "frame.h"

Test(oci_lifecycle, hooks_get_state_on_stdin)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    char hooks[2048];
    snprintf(hooks, sizeof(hooks),
             "\"hooks\": {\"prestart\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\", "
             "\"cat > %s/prestart.json\"]}], \"poststop\": [{\"path\": \"/bin/sh\", \"args\": "
             "[\"sh\", \"-c\", \"cat > %s/poststop.json\"], \"timeout\": 5}]}",
             tmp, tmp);
    live_config("[\"/bin/sh\", \"-c\", \"exit 0\"]", hooks);
    const char *id = create_container("hook", -1);
    int pid = read_pid_file("pid");
    char p[512];
    snprintf(p, sizeof(p), "%s/prestart.json", tmp);
    json_t *j = json_load_file(p, 0, NULL);
    cr_assert_not_null(j, "the prestart hook did not get the state JSON");
    cr_expect_str_eq(json_string_value(json_object_get(j, "id")), id);
    cr_expect_eq(json_integer_value(json_object_get(j, "pid")), pid);
    json_decref(j);
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    reap(pid, 10);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    snprintf(p, sizeof(p), "%s/poststop.json", tmp);
    j = json_load_file(p, 0, NULL);
    cr_assert_not_null(j, "the poststop hook did not run at delete");
    cr_expect_str_eq(json_string_value(json_object_get(j, "status")), "stopped");
    json_decref(j);
    assert_gone(id, pid);
}

Test(oci_lifecycle, failing_prestart_hook_leaves_nothing)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    live_config("[\"/bin/sh\", \"-c\", \"exit 0\"]",
                "\"hooks\": {\"prestart\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\", "
                "\"echo hook-says-no; exit 9\"]}]}");
    snprintf(ids[n_ids], sizeof(ids[0]), "hookfail-%d", (int)getpid());
    const char *id = ids[n_ids++];
    char pidfile[512];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", tmp);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int rc = run_bh_fd(
        NULL, 0, null,
        (const char *const[]){"create", "--bundle", ".", "--pid-file", pidfile, id, NULL});
    close(null);
    if (rc != 0 && strstr(last_error(), "hook") == NULL)
        cr_skip_test("create does not work on this machine yet: %s", last_error());
    cr_expect_neq(rc, 0, "create succeeded although its prestart hook failed");
    cr_expect(strstr(last_error(), "hook-says-no") != NULL, "error: %s", last_error());
    char p[512];
    snprintf(p, sizeof(p), "%s/root/%s", tmp, id);
    cr_expect_neq(access(p, F_OK), 0, "state left after a failed create");
    char cg[600];
    snprintf(p, sizeof(p), "bulkhead/%s", id);
    h_cgroup_dir("pids", p, cg, sizeof(cg));
    cr_expect_neq(access(cg, F_OK), 0, "cgroup %s left after a failed create", cg);
}

/* A listener for dev.bulkhead.report-socket; returns the listening fd. */
static int report_listener(char *path, size_t len)
{
    snprintf(path, len, "%s/report.sock", tmp);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(path), sizeof(sa.sun_path));
    memcpy(sa.sun_path, path, strlen(path) + 1);
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(fd, 4), 0);
    return fd;
}

Test(oci_lifecycle, report_socket_gets_the_tier_before_start)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    char sock[256];
    int lfd = report_listener(sock, sizeof(sock));
    char ann[512];
    snprintf(ann, sizeof(ann),
             "\"annotations\": {\"dev.bulkhead.tier\": \"container\", "
             "\"dev.bulkhead.report-socket\": \"%s\"}",
             sock);
    live_config("[\"/bin/sh\", \"-c\", \"exit 0\"]", ann);
    const char *id = create_container("report", -1);
    int pid = read_pid_file("pid");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    cr_assert_geq(c, 0, "start did not connect to the report socket");
    void *buf = NULL;
    size_t len = 0;
    struct bh_error err = {0};
    cr_assert_eq(bh_frame_read(c, 1 << 20, bh_now_ms() + 5000, &buf, &len, &err), 1, "%s", err.msg);
    Bulkhead__Control__TierReport *r =
        bulkhead__control__tier_report__unpack(NULL, len, (const uint8_t *)buf);
    cr_assert_not_null(r, "the frame is not a TierReport");
    cr_expect_str_eq(r->container_id, id);
    cr_expect_str_eq(r->tier, "container");
    cr_expect_gt(r->n_checks, 3);
    bulkhead__control__tier_report__free_unpacked(r, NULL);
    free(buf);
    close(c);
    close(lfd);
    reap(pid, 10);
    char out[16384];
    cr_assert_eq(RUN(out, "delete", id), 0);
    assert_gone(id, pid);
}

Test(oci_lifecycle, undeliverable_report_means_no_start)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    char ann[512];
    snprintf(ann, sizeof(ann),
             "\"annotations\": {\"dev.bulkhead.report-socket\": \"%s/none.sock\"}", tmp);
    live_config("[\"/bin/sh\", \"-c\", \"echo ran > /proc/self/fd/1\"]", ann);
    const char *id = create_container("noreport", -1);
    int pid = read_pid_file("pid");
    cr_expect_neq(RUN0("start", id), 0, "start succeeded without delivering the report");
    cr_expect(strstr(last_error(), "does not start") != NULL, "%s", last_error());
    cr_expect_str_eq(status_of(id, NULL), "created");
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    reap(pid, 10);
    assert_gone(id, pid);
}

Test(oci_lifecycle, console_socket_gets_the_pty_master)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    char proc[512];
    snprintf(proc, sizeof(proc),
             "[\"/bin/sh\", \"-c\", \"test -t 0 && test -t 1 && echo tty-ok\"]");
    live_config(proc, NULL);
    /* process.terminal: true */
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_t *cfg = json_load_file(p, 0, NULL);
    cr_assert_not_null(cfg);
    json_object_set_new(json_object_get(cfg, "process"), "terminal", json_true());
    cr_assert_eq(json_dump_file(cfg, p, 0), 0);
    json_decref(cfg);
    char sock[256];
    snprintf(sock, sizeof(sock), "%s/console.sock", tmp);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(sock), sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock, strlen(sock) + 1);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    cr_assert_eq(listen(lfd, 4), 0);
    snprintf(ids[n_ids], sizeof(ids[0]), "tty-%d", (int)getpid());
    const char *id = ids[n_ids++];
    char pidfile[512];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", tmp);
    /* The sentry's connect and send complete in the backlog, so create may
     * return before we accept. */
    int rc = RUN0("create", "--bundle", ".", "--pid-file", pidfile, "--console-socket", sock, id);
    cr_assert(rc == 0 || strstr(last_error(), "console") == NULL, "create: %s", last_error());
    if (rc != 0)
        cr_skip_test("create does not work on this machine yet: %s", last_error());
    int pid = read_pid_file("pid");
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    cr_assert_geq(c, 0, "nothing connected to the console socket");
    char name[256] = "";
    int fds[2] = {-1, -1};
    size_t n_fds = 0;
    struct bh_error err = {0};
    ssize_t got = bh_recv_fds(c, name, sizeof(name) - 1, fds, 2, &n_fds, &err);
    cr_assert_gt(got, 0, "%s", err.msg);
    cr_expect_eq(n_fds, 1, "the console message must carry exactly the pty master");
    cr_assert_geq(fds[0], 0);
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    char out[256] = "";
    size_t len = 0;
    for (int i = 0; i < 100 && strstr(out, "tty-ok") == NULL; i++) {
        struct pollfd pfd = {fds[0], POLLIN, 0};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        ssize_t r = read(fds[0], out + len, sizeof(out) - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        out[len] = '\0';
    }
    cr_expect(strstr(out, "tty-ok") != NULL, "on the pty: %s", out);
    reap(pid, 10);
    close(fds[0]);
    close(c);
    close(lfd);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

/* ---- docker's seccomp profile --------------------------------------------- */

#include <seccomp.h>

/* An allowlist profile as docker sends one: every x86_64 syscall allowed
 * except mkdir/mkdirat, which fail with errnoRet (EMLINK, so it cannot be
 * mistaken for a refusal of the tier's own policy). */
static void profile_config(const char *tier, const char *args_json)
{
    json_t *names = json_array();
    for (int nr = 0; nr < 512; nr++) {
        char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        if (n == NULL)
            continue;
        if (strcmp(n, "mkdir") != 0 && strcmp(n, "mkdirat") != 0)
            json_array_append_new(names, json_string(n));
        free(n);
    }
    json_t *sc = json_pack("{s:s, s:[s], s:[{s:o, s:s}, {s:[s,s], s:s, s:i}]}", "defaultAction",
                           "SCMP_ACT_ERRNO", "architectures", "SCMP_ARCH_X86_64", "syscalls",
                           "names", names, "action", "SCMP_ACT_ALLOW", "names", "mkdir", "mkdirat",
                           "action", "SCMP_ACT_ERRNO", "errnoRet", EMLINK);
    cr_assert_not_null(sc);
    char *sct = json_dumps(sc, JSON_COMPACT);
    json_decref(sc);
    live_config_tier(args_json, tier);
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_t *cfg = json_load_file(p, 0, NULL);
    cr_assert_not_null(cfg);
    json_object_set_new(json_object_get(cfg, "linux"), "seccomp", json_loads(sct, 0, NULL));
    free(sct);
    cr_assert_eq(json_dump_file(cfg, p, 0), 0);
    json_decref(cfg);
}

static void profile_is_honoured(const char *tier)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    profile_config(tier,
                   "[\"/bin/sh\", \"-c\", \"mkdir /tmp/d 2>&1; test -d /tmp/d && echo made\"]");
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    const char *id = create_container("seccomp", p[1]);
    close(p[1]);
    int pid = read_pid_file("pid");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    char buf[512] = "";
    size_t got = 0;
    for (;;) {
        struct pollfd pfd = {p[0], POLLIN, 0};
        if (poll(&pfd, 1, 10000) <= 0)
            break;
        ssize_t r = read(p[0], buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(p[0]);
    reap(pid, 10);
    cr_expect(strstr(buf, "Too many links") != NULL,
              "mkdir did not fail with the profile's errnoRet: %s", buf);
    cr_expect(strstr(buf, "made") == NULL, "the directory was made despite the profile");
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

Test(oci_lifecycle, seccomp_profile_container_tier)
{
    profile_is_honoured("container");
}

Test(oci_lifecycle, seccomp_profile_kernel_tier)
{
    profile_is_honoured("kernel");
}

/* runc's -ENOSYS rule: a syscall number above every one the profile's
 * architecture knows fails with ENOSYS, not the profile's default errno, so
 * libc and language runtimes fall back from a syscall newer than the
 * profile; without a profile the tier's own filter answers the same. A
 * known syscall the profile refuses keeps its errno (mkdir: EMLINK). */
#define ENOSYS_PROBE                                                                               \
    "[\"/usr/bin/python3\", \"-c\", \"import ctypes, os\\n"                                        \
    "l = ctypes.CDLL(None, use_errno=True)\\n"                                                     \
    "for nr in (1000, 4095, 0x3fffffff, 83):\\n"                                                   \
    "    r = l.syscall(nr, 0, 0, 0)\\n"                                                            \
    "    print(nr, r, ctypes.get_errno())\\n\"]"

static char *run_to_end(const char *base, int *status);

static void unknown_syscalls_fail_with_enosys(const char *tier, bool profile)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    if (profile) {
        profile_config(tier, ENOSYS_PROBE);
    } else {
        live_config_tier(ENOSYS_PROBE, tier);
    }
    int status = 0;
    char *out = run_to_end(profile ? "enosys-p" : "enosys", &status);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "[%s] status %#x: %s", tier, status,
              out);
    char want[128];
    snprintf(want, sizeof(want), "1000 -1 %d\n4095 -1 %d\n1073741823 -1 %d\n", ENOSYS, ENOSYS,
             ENOSYS);
    cr_assert(strncmp(out, want, strlen(want)) == 0,
              "[%s, %s] numbers no kernel knows did not fail with ENOSYS:\n%s", tier,
              profile ? "profile" : "no profile", out);
    /* mkdir(NULL): the profile's EMLINK; without one, the call runs (EFAULT). */
    snprintf(want, sizeof(want), "83 -1 %d\n", profile ? EMLINK : EFAULT);
    cr_assert(strstr(out, want) != NULL, "[%s] mkdir: %s", tier, out);
}

Test(oci_lifecycle, unknown_syscalls_fail_with_enosys_under_a_profile_container_tier)
{
    unknown_syscalls_fail_with_enosys("container", true);
}

Test(oci_lifecycle, unknown_syscalls_fail_with_enosys_without_a_profile_container_tier)
{
    unknown_syscalls_fail_with_enosys("container", false);
}

Test(oci_lifecycle, unknown_syscalls_fail_with_enosys_under_a_profile_kernel_tier)
{
    unknown_syscalls_fail_with_enosys("kernel", true);
}

/* ---- the tasks cap when config.json sets no pids limit --------------------- */

/* Four guest uids, each raising its own RLIMIT_NPROC to the hard limit (so
 * what stops them is not the per-process limit), fork and then start
 * threads, 300 tasks each at most, and print the total they made. They
 * start together, on a pipe closing, and keep their tasks until killed. */
#define TASKS_BOMB                                                                                 \
    "import os, sys, signal, threading, resource\n"                                                \
    "go_r, go_w = os.pipe()\n"                                                                     \
    "r, w = os.pipe()\n"                                                                           \
    "for uid in (0, 1000, 1001, 1002):\n"                                                          \
    "    if os.fork() == 0:\n"                                                                     \
    "        os.close(go_w); os.close(r)\n"                                                        \
    "        if uid:\n"                                                                            \
    "            os.setgroups([]); os.setgid(uid); os.setuid(uid)\n"                               \
    "        hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]\n"                                \
    "        resource.setrlimit(resource.RLIMIT_NPROC, (hard, hard))\n"                            \
    "        os.read(go_r, 1)\n"                                                                   \
    "        n = 0\n"                                                                              \
    "        for i in range(150):\n"                                                               \
    "            try:\n"                                                                           \
    "                if os.fork() == 0:\n"                                                         \
    "                    os.close(1); os.close(2); signal.pause()\n"                               \
    "                n += 1\n"                                                                     \
    "            except OSError:\n"                                                                \
    "                break\n"                                                                      \
    "        ev = threading.Event()\n"                                                             \
    "        for i in range(150):\n"                                                               \
    "            try:\n"                                                                           \
    "                threading.Thread(target=ev.wait, daemon=True).start(); n += 1\n"              \
    "            except RuntimeError:\n"                                                           \
    "                break\n"                                                                      \
    "        os.write(w, b'%d\\n' % n)\n"                                                          \
    "        signal.pause()\n"                                                                     \
    "os.close(w); os.close(go_r); os.close(go_w)\n"                                                \
    "f = os.fdopen(r)\n"                                                                           \
    "print(sum(int(f.readline()) for _ in range(4)), flush=True)\n"                                \
    "signal.pause()\n"

/* The pids cgroup file of process pid, into out. */
static void pids_max_of(pid_t pid, char *out, size_t size)
{
    char path[64], buf[4096], root[512];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    cr_assert_eq(bh_cgroup_hierarchy("pids", root, sizeof(root), NULL), 0,
                 "this host has no pids hierarchy");
    bool v2 = access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0;
    const char *rel = NULL;
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        if ((v2 && c2 == c1 + 1) || (!v2 && strstr(c1 + 1, "pids") != NULL))
            rel = c2 + 1;
    }
    cr_assert_not_null(rel, "process %d is in no pids cgroup", (int)pid);
    char file[1024];
    snprintf(file, sizeof(file), "%s%s/pids.max", root, rel);
    f = fopen(file, "re");
    cr_assert_not_null(f, "%s: %s", file, strerror(errno));
    cr_assert_not_null(fgets(out, (int)size, f));
    fclose(f);
    out[strcspn(out, "\n")] = '\0';
}

/* runc leaves pids.max at "max" when config.json sets no pids limit (runc's
 * `run --keep (check cgroup exists)` reads it); bulkhead's floor (invariant
 * 5) is then the user namespace's RLIMIT_NPROC ceiling, which caps every
 * task of the sandbox, threads and every guest uid together, whatever the
 * config's own RLIMIT_NPROC. Without that ceiling the bomb makes its 1200
 * tasks. */
static void tasks_capped(const char *tier)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    json_t *args = json_pack("[sss]", "/usr/bin/python3", "-c", TASKS_BOMB);
    char *aj = json_dumps(args, JSON_COMPACT);
    json_decref(args);
    live_config_tier(aj, tier);
    free(aj);
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_t *cfg = json_load_file(p, 0, NULL);
    cr_assert_not_null(cfg);
    json_object_del(json_object_get(cfg, "linux"), "resources");
    json_object_set_new(json_object_get(cfg, "process"), "capabilities",
                        json_pack("{s:[ss], s:[ss], s:[ss]}", "bounding", "CAP_SETUID",
                                  "CAP_SETGID", "effective", "CAP_SETUID", "CAP_SETGID",
                                  "permitted", "CAP_SETUID", "CAP_SETGID"));
    /* docker --ulimit nproc: the guests' own limit, above the cap, which it
     * must not lift. */
    json_object_set_new(
        json_object_get(cfg, "process"), "rlimits",
        json_pack("[{s:s, s:i, s:i}]", "type", "RLIMIT_NPROC", "hard", 4000, "soft", 4000));
    cr_assert_eq(json_dump_file(cfg, p, 0), 0);
    json_decref(cfg);

    int out[2];
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    snprintf(ids[n_ids], sizeof(ids[0]), "tasks-%d", (int)getpid());
    const char *id = ids[n_ids++];
    char pidfile[512];
    snprintf(pidfile, sizeof(pidfile), "%s/pid", tmp);
    int rc = run_bh_fd(NULL, 0, out[1],
                       (const char *const[]){"--default-pids", "200", "create", "--bundle", ".",
                                             "--pid-file", pidfile, id, NULL});
    close(out[1]);
    cr_assert_eq(rc, 0, "create failed (exit %d): %s", rc, last_error());
    pid_t pid = read_pid_file("pid");
    char max[64];
    pids_max_of(pid, max, sizeof(max));
    cr_assert_str_eq(max, "max", "pids.max is not left at max as runc leaves it");
    char st[16384];
    cr_assert_eq(RUN(st, "state", id), 0);
    cr_assert(strstr(st, "tasks=200") != NULL, "the cap is not in the state's annotations: %s", st);
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());

    char buf[256] = "";
    size_t got = 0;
    while (strchr(buf, '\n') == NULL && got < sizeof(buf) - 1) {
        struct pollfd pfd = {out[0], POLLIN, 0};
        /* A bound on a hang only: the bomb's ~200 forks of Python took over
         * 60 s at load 33-70. Its tasks live until the delete, not for a
         * time, so a slow bomb is never undercounted. */
        cr_assert_gt(poll(&pfd, 1, 300000), 0, "[%s] the bomb printed nothing in 300 s", tier);
        ssize_t r = read(out[0], buf + got, sizeof(buf) - 1 - got);
        cr_assert_gt(r, 0, "[%s] the bomb ended without a count: %s", tier, buf);
        got += (size_t)r;
        buf[got] = '\0';
    }
    close(out[0]);
    long made = atol(buf);
    cr_assert_gt(made, 20, "[%s] the guests made almost no task (%ld): the cap is too tight", tier,
                 made);
    cr_assert_lt(made, 200, "[%s] four guest uids made %ld tasks with a cap of 200", tier, made);

    /* The host still forks while the sandbox holds its cap. */
    pid_t child = fork();
    cr_assert_geq(child, 0, "the host cannot fork: %s", strerror(errno));
    if (child == 0)
        _exit(7);
    int status = 0;
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 7);
    pids_max_of(pid, max, sizeof(max));
    cr_assert_str_eq(max, "max");

    cr_assert_eq(RUN0("delete", "--force", id), 0, "delete: %s", last_error());
    reap(pid, 20);
    assert_gone(id, pid);
}

Test(oci_lifecycle, tasks_capped_without_a_pids_limit_container_tier, .timeout = 420)
{
    tasks_capped("container");
}

Test(oci_lifecycle, tasks_capped_without_a_pids_limit_kernel_tier, .timeout = 420)
{
    tasks_capped("kernel");
}

/* ---- pause, update, events, ps, list, kill --all ---------------------------- */

static long read_long(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    long v = -1;
    if (fscanf(f, "%ld", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

Test(oci_lifecycle, pause_update_events_ps_list)
{
    int pid;
    const char *id = create_with("[\"/bin/sleep\", \"1000\"]", "ops", &pid);
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    char out[16384];

    cr_assert_eq(RUN0("pause", id), 0, "pause: %s", last_error());
    cr_expect_str_eq(status_of(id, NULL), "paused");
    cr_expect_neq(RUN0("pause", id), 0, "a second pause succeeded");
    cr_assert_eq(RUN0("resume", id), 0, "resume: %s", last_error());
    cr_expect_str_eq(status_of(id, NULL), "running");

    /* update --resources - reads LinuxResources on stdin: run through sh for the pipe. */
    char cmd[1024], p[600], rel[256];
    snprintf(rel, sizeof(rel), "bulkhead/%s/pids.max", id);
    h_cgroup_dir("pids", rel, p, sizeof(p));
    snprintf(cmd, sizeof(cmd),
             "echo '{\"pids\": {\"limit\": 42}}' | %s --root %s/root update --resources - %s", bh,
             tmp, id);
    cr_expect_eq(system(cmd), 0, "update --resources -");
    cr_expect_eq(read_long(p), 42, "pids.max after update");
    cr_expect_eq(RUN0("update", "--pids-limit", "40", id), 0, "update --pids-limit");
    cr_expect_eq(read_long(p), 40, "pids.max after update --pids-limit");

    cr_assert_eq(RUN(out, "events", "--stats", id), 0, "events: %s", last_error());
    json_t *ev = json_loads(out, 0, NULL);
    cr_assert_not_null(ev, "events --stats is not JSON: %s", out);
    cr_expect_str_eq(json_string_value(json_object_get(ev, "type")), "stats");
    cr_expect_gt(json_integer_value(json_object_get(
                     json_object_get(json_object_get(ev, "data"), "pids"), "current")),
                 0);
    json_decref(ev);

    cr_assert_eq(RUN(out, "ps", "--format", "json", id), 0);
    json_t *pids = json_loads(out, 0, NULL);
    cr_assert(json_is_array(pids), "ps json: %s", out);
    bool has_sentry = false;
    size_t i;
    json_t *v;
    json_array_foreach(pids, i, v) has_sentry = has_sentry || json_integer_value(v) == pid;
    /* The container's processes only: the sentry is bulkhead's (issue 14). */
    cr_expect(!has_sentry && json_array_size(pids) > 0,
              "ps must list the guests but not the sentry %d: %s", pid, out);
    json_decref(pids);

    cr_assert_eq(RUN(out, "list", "--format", "json"), 0);
    cr_expect(strstr(out, id) != NULL, "list: %s", out);

    cr_assert_eq(RUN0("kill", "--all", id, "KILL"), 0, "kill --all: %s", last_error());
    int st = reap(pid, 10);
    cr_expect(WIFSIGNALED(st), "status %#x", st);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

/* A guest in the middle of a brokered call waits for the sentry's answer in
 * a killable sleep, which the freezer cannot freeze while the broker thread
 * that was answering is frozen itself: pause must still freeze the whole
 * container (by thawing and freezing again), however often it lands there. */
Test(oci_lifecycle, pause_lands_while_the_guest_makes_brokered_calls)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    /* test -e is the shell's own: one brokered stat per round, nothing else */
    make_rootfs();
    live_config("[\"/bin/sh\", \"-c\", \"while :; do test -e /etc/hostname; done\"]", NULL);
    const char *id = create_container("busy", -1);
    int pid = read_pid_file("pid");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    for (int i = 0; i < 20; i++) {
        cr_assert_eq(RUN0("pause", id), 0, "pause %d: %s", i, last_error());
        cr_assert_str_eq(status_of(id, NULL), "paused", "after pause %d", i);
        cr_assert_eq(RUN0("resume", id), 0, "resume %d: %s", i, last_error());
    }
    cr_assert_eq(RUN0("kill", "--all", id, "KILL"), 0, "kill --all: %s", last_error());
    reap(pid, 10);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
}

/* ---- idmapped rootfs and binds; joining host-owned namespaces ------------- */

/* A writable rootfs and a writable bind, both owned by host root (this test
 * runs as root), with one root-only file in each; tier "kernel" or
 * "container"; extra namespaces JSON appended to the usual ones. */
static void rw_config(const char *script, const char *tier, const char *ns_extra)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/data", tmp);
    mkdir(p, 0755);
    write_file("data/secret", "bind-secret\n");
    write_file("bundle/rootfs/etc/secret", "root-secret\n");
    snprintf(p, sizeof(p), "%s/data/secret", tmp);
    chmod(p, 0600);
    snprintf(p, sizeof(p), "%s/bundle/rootfs/etc/secret", tmp);
    chmod(p, 0600);
    char proc[2048];
    json_t *args = json_pack("[sss]", "/bin/sh", "-c", script);
    char *aj = json_dumps(args, JSON_COMPACT);
    snprintf(proc, sizeof(proc),
             "{\"args\": %s, \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": "
             "[\"PATH=/usr/bin:/bin\"]}",
             aj);
    free(aj);
    json_decref(args);
    char ex[4096];
    snprintf(ex, sizeof(ex),
             "\"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\", "
             "\"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": "
             "\"proc\", \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", "
             "\"source\": \"tmpfs\"}, {\"destination\": \"/data\", \"type\": \"bind\", "
             "\"source\": \"%s/data\", \"options\": [\"rbind\", \"rw\"]}], \"linux\": "
             "{\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"}, {\"type\": \"ipc\"}, "
             "{\"type\": \"uts\"}%s], \"resources\": {\"pids\": {\"limit\": 64}}}, "
             "\"annotations\": {\"dev.bulkhead.tier\": \"%s\"}",
             tmp, ns_extra ? ns_extra : ", {\"type\": \"network\"}", tier);
    write_config("1.0.2", "{\"path\": \"rootfs\"}", proc, ex);
}

/* Creates, starts and waits for the container; returns its stdout. */
static char *run_to_end(const char *base, int *status)
{
    static char buf[4096];
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    const char *id = create_container(base, p[1]);
    close(p[1]);
    int pid = read_pid_file("pid");
    cr_assert_eq(RUN0("start", id), 0, "start: %s", last_error());
    size_t got = 0;
    for (;;) {
        struct pollfd pfd = {p[0], POLLIN, 0};
        cr_assert_gt(poll(&pfd, 1, 20000), 0, "no EOF on the guest's stdout");
        ssize_t r = read(p[0], buf + got, sizeof(buf) - 1 - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    buf[got] = '\0';
    close(p[0]);
    *status = reap(pid, 20);
    cr_assert_eq(RUN0("delete", id), 0, "delete: %s", last_error());
    assert_gone(id, pid);
    return buf;
}

static void expect_host_root_file(const char *rel)
{
    char p[512];
    struct stat st;
    snprintf(p, sizeof(p), "%s/%s", tmp, rel);
    cr_expect_eq(lstat(p, &st), 0, "%s was not written through to the host", p);
    cr_expect(st.st_uid == 0 && st.st_gid == 0,
              "%s: host owner %u:%u, want 0:0 (the idmap maps the container's root)", p,
              (unsigned)st.st_uid, (unsigned)st.st_gid);
}

static void idmapped_rootfs_and_binds(const char *tier)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    rw_config("touch /etc/x && echo y > /root/y && echo z > /data/z && "
              "stat -c '%u:%g' /etc /etc/x /data /data/z && cat /etc/secret /data/secret && "
              "id -u",
              tier, NULL);
    int st = 0;
    const char *out = run_to_end("idmap", &st);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, output: %s", st, out);
    cr_expect_str_eq(out, "0:0\n0:0\n0:0\n0:0\nroot-secret\nbind-secret\n0\n",
                     "the image's and the bind's host-root files are not the container root's");
    expect_host_root_file("bundle/rootfs/etc/x");
    expect_host_root_file("bundle/rootfs/root/y");
    expect_host_root_file("data/z");
}

Test(oci_lifecycle, idmapped_rootfs_and_binds_kernel_tier)
{
    idmapped_rootfs_and_binds("kernel");
}

Test(oci_lifecycle, idmapped_rootfs_and_binds_container_tier)
{
    idmapped_rootfs_and_binds("container");
}

/* docker's rootfs is an overlay mount, which the kernel refuses to idmap:
 * the core mounts it again from idmapped layers. Same checks on an overlay
 * of host-root layers made here; writes land in the upper dir as host root. */
Test(oci_lifecycle, idmapped_overlay_rootfs)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    char lower[256], upper[256], work[256], root[256], opts[1024];
    snprintf(lower, sizeof(lower), "%s/lower", tmp);
    snprintf(upper, sizeof(upper), "%s/upper", tmp);
    snprintf(work, sizeof(work), "%s/work", tmp);
    snprintf(root, sizeof(root), "%s/bundle/rootfs", tmp);
    mkdir(lower, 0755);
    mkdir(upper, 0755);
    mkdir(work, 0755);
    make_rootfs_in("lower"); /* the image */
    snprintf(opts, sizeof(opts), "lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work);
    if (mount("overlay", root, "overlay", 0, opts) < 0)
        cr_skip_test("overlay mount: %s", strerror(errno));
    rootfs_mounted = true;
    write_file("lower/etc/img", "image\n");
    char p[512];
    snprintf(p, sizeof(p), "%s/lower/etc/img", tmp);
    chmod(p, 0600);
    rw_config("echo more >> /etc/img && cat /etc/img && touch /etc/x && mkdir /root/d && "
              "stat -c '%u:%g' /etc/img /etc/x /root/d",
              "kernel", NULL);
    int st = 0;
    const char *out = run_to_end("ovl", &st);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x, output: %s", st, out);
    cr_expect_str_eq(out, "image\nmore\n0:0\n0:0\n0:0\n");
    expect_host_root_file("upper/etc/img");
    expect_host_root_file("upper/etc/x");
    expect_host_root_file("upper/root/d");
    snprintf(p, sizeof(p), "%s/lower/etc/x", tmp);
    cr_expect_neq(access(p, F_OK), 0, "a write reached the lower layer");
}

/* A network namespace made by host root (as a CRI makes a pod's), with a
 * bridge interface; name unique per run; teardown removes it. */
static bool make_netns(void)
{
    snprintf(netns, sizeof(netns), "bh-core2-%d", (int)getpid());
    char cmd[512];
    snprintf(cmd, sizeof(cmd),
             "ip netns add %s && ip -n %s link add bhdummy0 type bridge && "
             "ip -n %s link set bhdummy0 up",
             netns, netns, netns);
    return system(cmd) == 0;
}

Test(oci_lifecycle, joins_a_host_owned_netns)
{
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    make_rootfs();
    char extra[256];
    if (!make_netns())
        cr_skip_test("`ip netns add` does not work here");
    snprintf(extra, sizeof(extra), ", {\"type\": \"network\", \"path\": \"/run/netns/%s\"}", netns);
    rw_config("cat /proc/net/dev", "container", extra);
    int st = 0;
    const char *out = run_to_end("netns", &st);
    /* The container sees the namespace's own dummy interface: it was joined. */
    bool seen = strstr(out, "bhdummy0") != NULL;
    /* The kernel tier verifies net_lo_only: with another interface it must refuse. */
    rw_config("true", "kernel", extra);
    snprintf(ids[n_ids], sizeof(ids[0]), "netnsk-%d", (int)getpid());
    const char *idk = ids[n_ids++];
    /* Create's stdout goes to the container: never a pipe we wait on. */
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    int rc = run_bh_fd(NULL, 0, null, (const char *const[]){"create", "--bundle", ".", idk, NULL});
    close(null);
    char err[2048];
    snprintf(err, sizeof(err), "%s", last_error());
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
    cr_expect(seen, "the joined netns's interface is not visible: %s", out);
    cr_expect_neq(rc, 0, "the kernel tier verified with a joined netns that has a dummy link");
    cr_expect(strstr(err, "net_lo_only") != NULL && strstr(err, "bhdummy0") != NULL,
              "refusal does not name net_lo_only and the interface: %s", err);
}

/* Only a pod's pid namespace (one a bulkhead sandbox's user namespace owns)
 * can be joined: bulkhead's own, the host's, is not one. */
Test(oci_config, pid_namespace_join_refused)
{
    write_config(
        "1.0.2", GOOD_ROOT, GOOD_PROC,
        "\"linux\": {\"namespaces\": [{\"type\": \"pid\", \"path\": \"/proc/self/ns/pid\"}]}");
    expect_refused("c1", "only a pod's pid namespace");
}
