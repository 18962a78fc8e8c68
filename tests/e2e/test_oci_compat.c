/* runc compatibility of the `bulkhead` command line, end to end: each test
 * is a behaviour runc's own integration suite (v1.1.5) or the OCI
 * runtime-tools validation expects and bulkhead once lacked (issue 14): the
 * foreground terminal, runc's help and version formats, exit codes, exec's
 * flags. The real binary runs on bundles in temp dirs over the host's /usr
 * (read-only), driven as runc's tests drive runc: no --log, messages on
 * stderr. Nothing here skips: a container that cannot be made fails. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <pty.h>
#include <seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <linux/magic.h>
#include <linux/seccomp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char tmp[128]; /* the test's temp dir: bundle, root, stderr */
static char bh[512];
static char ids[8][64]; /* containers to delete --force at the end */
static int n_ids;
static char err_text[8192]; /* stderr of the last run */

struct run_opts {
    const char *stdin_path; /* NULL: /dev/null */
    int child_stdout;       /* -1: captured */
    const char *tier;       /* NULL: bulkhead's default */
};

/* Reads fd to its end (bounded by 30 s without data) into out. */
static void read_all(int fd, char *out, size_t outlen)
{
    size_t got = 0;
    char buf[4096];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 30000) <= 0)
            break;
        ssize_t r = read(fd, buf, sizeof(buf));
        if (r <= 0)
            break;
        if (out && got + (size_t)r < outlen) {
            memcpy(out + got, buf, (size_t)r);
            got += (size_t)r;
        }
    }
    if (out)
        out[got] = '\0';
}

static void build_argv(const char **argv, const struct run_opts *o, const char *const *args)
{
    static char root[256], tier_flag[64];
    snprintf(root, sizeof(root), "%s/root", tmp);
    int n = 0;
    argv[n++] = bh;
    if (o && o->tier) {
        snprintf(tier_flag, sizeof(tier_flag), "--default-tier=%s", o->tier);
        argv[n++] = tier_flag;
    }
    argv[n++] = "--root";
    argv[n++] = root;
    for (int i = 0; args[i] && n < 63; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
}

static void child_exec(const char **argv, const char *stdin_path)
{
    char bundle[256], errp[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(errp, sizeof(errp), "%s/stderr", tmp);
    if (chdir(bundle) < 0)
        _exit(127);
    int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (e >= 0)
        dup2(e, 2);
    if (stdin_path) {
        int in = open(stdin_path, O_RDONLY);
        if (in >= 0)
            dup2(in, 0);
    }
    execv(bh, (char **)argv);
    _exit(127);
}

static void load_stderr(void)
{
    char errp[256];
    snprintf(errp, sizeof(errp), "%s/stderr", tmp);
    err_text[0] = '\0';
    int fd = open(errp, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, err_text, sizeof(err_text) - 1);
        err_text[n > 0 ? n : 0] = '\0';
        close(fd);
    }
}

static int wait_exit(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Runs bulkhead --root TMP/root ARGS in the bundle; stdout into out. */
static int run_bh(char *out, size_t outlen, const struct run_opts *o, const char *const *args)
{
    const char *argv[64];
    build_argv(argv, o, args);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(o && o->child_stdout >= 0 ? o->child_stdout : p[1], 1);
        if (!o || !o->stdin_path) {
            int null = open("/dev/null", O_RDONLY);
            dup2(null, 0);
        }
        child_exec(argv, o ? o->stdin_path : NULL);
    }
    close(p[1]);
    read_all(p[0], out, outlen);
    close(p[0]);
    int rc = wait_exit(pid);
    load_stderr();
    return rc;
}

#define RUN(out, ...) run_bh(out, sizeof(out), NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN0(...) run_bh(NULL, 0, NULL, (const char *const[]){__VA_ARGS__, NULL})

static void setup(void)
{
    const char *b = getenv("BULKHEAD_BUILD");
    snprintf(bh, sizeof(bh), "%s/bulkhead", b ? b : "build");
    snprintf(tmp, sizeof(tmp), "/tmp/bh-occ-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    chmod(tmp, 0711);
    h_bundle_skeleton(tmp);
    struct stat st;
    cr_assert(lstat("/bin", &st) == 0 && S_ISLNK(st.st_mode),
              "the host has no merged /usr; these bundles bind it");
    n_ids = 0;
    cr_assert_eq(access(bh, X_OK), 0, "%s is not built", bh);
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
}

static char host_mount[320]; /* a host mount a test made, undone at teardown */

static void teardown(void)
{
    for (int i = 0; i < n_ids; i++)
        RUN0("delete", "--force", ids[i]);
    if (host_mount[0])
        umount2(host_mount, MNT_DETACH);
    host_mount[0] = '\0';
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    if (tmp[0])
        h_remove_tree(tmp);
    tmp[0] = '\0';
}

/* A container id unique to this run, deleted at teardown. */
static const char *new_id(const char *base)
{
    snprintf(ids[n_ids], sizeof(ids[0]), "%s-%d", base, (int)getpid());
    return ids[n_ids++];
}

/* config.json: args (a JSON array), terminal or not, extra top-level JSON. */
static void config(const char *args_json, bool terminal, const char *extra)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true}, "
             "\"hostname\": \"occ\", \"process\": {\"terminal\": %s, \"args\": %s, \"cwd\": "
             "\"/\", \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": [\"PATH=/usr/bin:/bin\"]}, "
             "\"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\", "
             "\"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": "
             "\"proc\", \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", "
             "\"source\": \"tmpfs\"}, {\"destination\": \"/dev/pts\", \"type\": \"devpts\", "
             "\"source\": \"devpts\", \"options\": [\"newinstance\", \"ptmxmode=0666\"]}], "
             "\"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"}, "
             "{\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}], "
             "\"resources\": {\"pids\": {\"limit\": 64}}}%s%s}",
             terminal ? "true" : "false", args_json, extra ? ", " : "", extra ? extra : "");
    h_write_file(tmp, "bundle/config.json", text);
}

/* The written config.json, to patch; config_save writes it back and frees it. */
static json_t *config_load(void)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_t *doc = json_load_file(p, 0, NULL);
    cr_assert_not_null(doc, "%s is not JSON", p);
    return doc;
}

static void config_save(json_t *doc)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    cr_assert_eq(json_dump_file(doc, p, 0), 0);
    json_decref(doc);
}

/* Runs with stdout on /dev/null: for create and run -d, whose container
 * keeps the stdout it is given. */
static int run_quiet(const char *const *args)
{
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct run_opts o = {.child_stdout = null};
    int rc = run_bh(NULL, 0, &o, args);
    close(null);
    return rc;
}

/* run -d [flag] of the config as it is (flag may be NULL); the new id. */
static const char *start_detached(const char *tier, const char *base, const char *flag)
{
    const char *id = new_id(base);
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    o.child_stdout = null;
    int rc = run_bh(NULL, 0, &o,
                    flag ? (const char *const[]){"run", "-d", flag, id, NULL}
                         : (const char *const[]){"run", "-d", id, NULL});
    close(null);
    cr_assert_eq(rc, 0, "run -d %s: %s", flag ? flag : "", err_text);
    return id;
}

/* A running detached container (sleep) for exec tests. */
static const char *start_sleeper(const char *tier)
{
    config("[\"sleep\", \"1000\"]", false, NULL);
    return start_detached(tier, "sl", NULL);
}

static bool state_gone(const char *id)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/root/%s", tmp, id);
    return access(p, F_OK) != 0;
}

/* ---- cgroup namespaces and cgroup mounts ---------------------------------- */

TestSuite(oci_compat_ns, .init = setup, .fini = teardown, .timeout = 120);

/* config() plus, when given, a cgroup namespace and mounts appended in order
 * (a JSON array's items, "" for none). */
static void ns_config(const char *args_json, bool cgroupns, const char *more_mounts)
{
    config(args_json, false, NULL);
    json_t *doc = config_load();
    json_t *lx = json_object_get(doc, "linux");
    if (cgroupns)
        json_array_append_new(json_object_get(lx, "namespaces"),
                              json_pack("{s:s}", "type", "cgroup"));
    if (more_mounts != NULL && more_mounts[0] != '\0') {
        json_error_t je;
        json_t *add = json_loads(more_mounts, 0, &je);
        cr_assert_not_null(add, "bad test JSON: %s", je.text);
        json_array_extend(json_object_get(doc, "mounts"), add);
        json_decref(add);
    }
    config_save(doc);
}

static const char cgroup_mount_ro[] =
    "[{\"destination\": \"/sys/fs/cgroup\", \"type\": \"cgroup\", \"source\": \"cgroup\", "
    "\"options\": [\"nosuid\", \"noexec\", \"nodev\", \"relatime\", \"ro\"]}]";

static bool host_is_unified(void)
{
    struct statfs fs;
    return statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC;
}

/* Every line of /proc/self/cgroup as the container printed it ends in
 * ":/" (own namespace) or names the container's cgroup (the host's). */
static void expect_cgroup_lines(const char *out, const char *id, bool own_ns)
{
    char want[128];
    snprintf(want, sizeof(want), "/bulkhead/%s", id);
    int lines = 0;
    for (const char *l = out; *l != '\0';) {
        size_t len = strcspn(l, "\n");
        const char *path = memchr(l, ':', len);
        path = path ? memchr(path + 1, ':', len - (size_t)(path + 1 - l)) : NULL;
        cr_assert_not_null(path, "not a /proc/self/cgroup line: %.*s", (int)len, l);
        int plen = (int)(len - (size_t)(path + 1 - l));
        if (own_ns)
            cr_expect(plen == 1 && path[1] == '/', "own cgroup namespace, yet: %.*s", (int)len, l);
        else
            cr_expect(plen == (int)strlen(want) && strncmp(path + 1, want, strlen(want)) == 0,
                      "the host's cgroup namespace should show %s: %.*s", want, (int)len, l);
        lines++;
        l += len + (l[len] == '\n');
    }
    cr_expect_gt(lines, 0, "no /proc/self/cgroup lines");
}

/* runc's bats "runc exec (cgroup v1+hybrid joins correct cgroup)": without
 * `cgroup` in linux.namespaces the container tier keeps the host's cgroup
 * namespace, so the process and an exec'd one see the container's host
 * path, the same one the host sees for the container's pid. */
Test(oci_compat_ns, container_tier_cgroupns_only_when_listed)
{
    const char *cat[] = {"[\"cat\", \"/proc/self/cgroup\"]"};
    ns_config(cat[0], false, NULL);
    const char *id = new_id("cgn");
    char out[4096];
    struct run_opts o = {.child_stdout = -1, .tier = "container"};
    cr_assert_eq(run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL}), 0, "%s",
                 err_text);
    expect_cgroup_lines(out, id, false);

    ns_config(cat[0], true, NULL);
    id = new_id("cgy");
    cr_assert_eq(run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL}), 0, "%s",
                 err_text);
    expect_cgroup_lines(out, id, true);
}

static void exec_joins_cgroupns(const char *tier, bool listed, bool own_ns)
{
    ns_config("[\"sleep\", \"1000\"]", listed, NULL);
    const char *id = start_detached(tier, "cge", NULL);
    char out[4096];
    cr_assert_eq(RUN(out, "exec", id, "cat", "/proc/self/cgroup"), 0, "%s", err_text);
    expect_cgroup_lines(out, id, own_ns);
    /* The container's namespace is the host's exactly when it has none of its own. */
    char st_out[16384], ns_in[128], ns_sentry[128], ns_host[128], link[64];
    cr_assert_eq(RUN(st_out, "state", id), 0, "%s", err_text);
    json_t *st = json_loads(st_out, 0, NULL);
    cr_assert_not_null(st);
    int pid = (int)json_integer_value(json_object_get(st, "pid"));
    json_decref(st);
    snprintf(link, sizeof(link), "/proc/%d/ns/cgroup", pid);
    ssize_t n = readlink(link, ns_sentry, sizeof(ns_sentry) - 1);
    cr_assert_gt(n, 0, "readlink %s: %s", link, strerror(errno));
    ns_sentry[n] = '\0';
    ssize_t m = readlink("/proc/self/ns/cgroup", ns_host, sizeof(ns_host) - 1);
    cr_assert_gt(m, 0);
    ns_host[m] = '\0';
    cr_expect_eq(strcmp(ns_sentry, ns_host) == 0, !own_ns,
                 "container in %s, the host's is %s (own namespace expected: %d)", ns_sentry,
                 ns_host, own_ns);
    /* The exec'd process joins it, not a new one (the kernel tier's broker
     * does not show /proc/self/ns: its /proc/self/cgroup above says it). */
    if (strcmp(tier, "container") == 0) {
        cr_assert_eq(RUN(ns_in, "exec", id, "readlink", "/proc/self/ns/cgroup"), 0, "%s", err_text);
        cr_expect(strncmp(ns_in, ns_sentry, (size_t)n) == 0, "exec in %s, container in %s", ns_in,
                  ns_sentry);
    }
}

Test(oci_compat_ns, exec_joins_the_containers_cgroup_container_tier)
{
    exec_joins_cgroupns("container", false, false);
}

Test(oci_compat_ns, exec_joins_the_containers_cgroupns_container_tier)
{
    exec_joins_cgroupns("container", true, true);
}

/* The kernel tier always has a cgroup namespace of its own (part of the
 * tier: guests never see host cgroup paths), listed or not. */
Test(oci_compat_ns, kernel_tier_always_has_its_own_cgroupns)
{
    h_require_kernel_tier();
    exec_joins_cgroupns("kernel", false, true);
}

/* runc's bats "runc run [ro /sys/fs/cgroup mount]" and "userns with bind
 * mount before a cgroupfs mount": a `cgroup` mount after a bind gives the
 * container's own cgroups, per hierarchy on v1 and hybrid hosts (binds of
 * its host directories without a cgroup namespace, cgroupfs with one), all
 * read-only, and the limits read back. */
static void cgroup_mount_shows_own_cgroups(const char *tier, bool cgroupns)
{
    char mounts[1024];
    char src[300];
    snprintf(src, sizeof(src), "%s/bindsrc", tmp);
    cr_assert_eq(mkdir(src, 0755), 0);
    snprintf(mounts, sizeof(mounts),
             "[{\"destination\": \"/mnt\", \"type\": \"bind\", \"source\": \"%s\", "
             "\"options\": [\"bind\"]}, %s",
             src, cgroup_mount_ro + 1);
    /* Where the pids controller shows: its own hierarchy on v1 and hybrid hosts. */
    const char *dir = host_is_unified() ? "/sys/fs/cgroup" : "/sys/fs/cgroup/pids";
    char script[1024];
    snprintf(script, sizeof(script),
             "[\"sh\", \"-c\", \"cat %s/pids.max; grep -q . %s/cgroup.procs && echo procs; "
             "grep ' /sys/fs/cgroup' /proc/self/mounts; touch %s/x 2>&1\"]",
             dir, dir, dir);
    ns_config(script, cgroupns, mounts);
    const char *id = new_id("cgm");
    char out[8192];
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_assert(strncmp(out, "64\n", 3) == 0, "pids.max of the container (64) not read back: %s\n%s",
              out, err_text);
    cr_expect(strstr(out, "procs\n") != NULL, "the cgroup's processes are not listed: %s", out);
    int n = 0;
    for (const char *l = strstr(out, " /sys/fs/cgroup"); l != NULL;
         l = strstr(l + 1, " /sys/fs/cgroup")) {
        const char *opts = strchr(l + 1, ' ');
        opts = opts ? strchr(opts + 1, ' ') : NULL;
        cr_assert_not_null(opts, "%s", out);
        cr_expect(strncmp(opts + 1, "ro,", 3) == 0, "a cgroup mount is writable: %.80s", l);
        n++;
    }
    cr_expect_geq(n, host_is_unified() ? 1 : 2, "cgroup mounts: %s", out);
    cr_expect(strstr(out, "Read-only file system") != NULL, "%s", out);
}

Test(oci_compat_ns, cgroup_mount_binds_own_cgroups_without_cgroupns)
{
    cgroup_mount_shows_own_cgroups("container", false);
}

Test(oci_compat_ns, cgroup_mount_with_cgroupns_container_tier)
{
    cgroup_mount_shows_own_cgroups("container", true);
}

Test(oci_compat_ns, cgroup_mount_kernel_tier)
{
    h_require_kernel_tier();
    cgroup_mount_shows_own_cgroups("kernel", false);
}

static void parse_pids(const char *json_text, pid_t *pids, size_t *n);

/* runc's bats "runc exec --cgroup sub-cgroups": --cgroup [CONTROLLERS:]PATH
 * puts the exec'd process in a sub-cgroup of the container's (one the host
 * made here), refuses ".." and unknown controllers before anything runs,
 * and a missing sub-cgroup with runc's words; nothing is left running. */
static void exec_cgroup_sub(const char *tier)
{
    const char *id = start_sleeper(tier);
    char rel[128], dir[4096], sub[4200];
    snprintf(rel, sizeof(rel), "bulkhead/%s", id);
    h_cgroup_dir("pids", rel, dir, sizeof(dir));
    snprintf(sub, sizeof(sub), "%s/sub", dir);
    cr_assert_eq(mkdir(sub, 0755), 0, "mkdir %s: %s", sub, strerror(errno));
    char out[4096];
    int rc = RUN(out, "exec", "--cgroup", "pids:sub", id, "cat", "/proc/self/cgroup");
    rmdir(sub);
    cr_assert_eq(rc, 0, "exec --cgroup pids:sub: %s", err_text);
    cr_expect(strstr(out, "/sub\n") != NULL, "not in the sub-cgroup: %s", out);
    /* "/": the container's own cgroup, as without --cgroup. */
    rc = RUN(out, "exec", "--cgroup", "/", id, "cat", "/proc/self/cgroup");
    cr_assert_eq(rc, 0, "exec --cgroup /: %s", err_text);
    cr_expect(strstr(out, "/sub\n") == NULL, "%s", out);
    /* Refused, each with runc's words; "nonexistent" alone: every hierarchy. */
    static const char *const refused[][2] = {
        {"..", " .. is not a sub cgroup path"},
        {"pids:a/../../x", "is not a sub cgroup path"},
        {"whaaat:/", "unknown controller "},
        {"nonexistent", "/nonexistent/cgroup.procs: no such file "},
        {"pids:nonexistent", "/nonexistent/cgroup.procs: no such file "},
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        rc = RUN(out, "exec", "--cgroup", refused[i][0], id, "true");
        cr_expect_eq(rc, 255, "--cgroup %s: exit %d", refused[i][0], rc);
        cr_expect(strstr(err_text, refused[i][1]) != NULL, "--cgroup %s: %s", refused[i][0],
                  err_text);
    }
    /* The refused processes were never released: only the sleeper is left. */
    cr_assert_eq(RUN(out, "ps", "--format", "json", id), 0, "%s", err_text);
    pid_t pids[16];
    size_t n = 0;
    parse_pids(out, pids, &n);
    cr_expect_eq(n, 1, "processes left in the container: %s", out);
}

Test(oci_compat_ns, exec_cgroup_sub_container_tier)
{
    exec_cgroup_sub("container");
}

Test(oci_compat_ns, exec_cgroup_sub_kernel_tier)
{
    h_require_kernel_tier();
    exec_cgroup_sub("kernel");
}

/* From the host, as a guest that could make namespaces would: join the
 * container's user and mount namespaces and root, make a nested user, mount
 * and pid namespace and mount a bare proc. Returns that mount's errno (0:
 * it worked). The tier's filter keeps guests from trying at all; this checks
 * the layer beneath it. */
static int bare_proc_mount_errno(pid_t guest)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/user", (int)guest);
    int user = open(p, O_RDONLY | O_CLOEXEC);
    snprintf(p, sizeof(p), "/proc/%d/ns/mnt", (int)guest);
    int mnt = open(p, O_RDONLY | O_CLOEXEC);
    snprintf(p, sizeof(p), "/proc/%d/root", (int)guest);
    int root = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(user >= 0 && mnt >= 0 && root >= 0, "open the guest's namespaces: %s",
              strerror(errno));
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        if (setns(user, CLONE_NEWUSER) < 0 || setns(mnt, CLONE_NEWNS) < 0 || fchdir(root) < 0 ||
            chroot(".") < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0 ||
            unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID) < 0)
            _exit(200);
        pid_t inner = fork();
        if (inner < 0)
            _exit(201);
        if (inner == 0)
            _exit(mount("none", "/proc", "proc", 0, NULL) == 0 ? 0 : errno);
        int st;
        if (waitpid(inner, &st, 0) < 0 || !WIFEXITED(st))
            _exit(202);
        _exit(WEXITSTATUS(st));
    }
    close(user);
    close(mnt);
    close(root);
    return wait_exit(child);
}

/* runc's bats "runc run --no-pivot must not expose bare /proc": --no-pivot
 * moves the root over / and chroots (as runc), the host's tree stays below,
 * and its proc and sysfs are hidden, so a nested namespace cannot mount a
 * bare proc. The kernel tier refuses --no-pivot with the reason. */
Test(oci_compat_ns, no_pivot_runs_and_exposes_no_bare_proc)
{
    config("[\"sleep\", \"1000\"]", false, NULL);
    const char *id = start_detached("container", "np", "--no-pivot");
    char out[4096];
    cr_assert_eq(RUN(out, "exec", id, "sh", "-c", "ls /; cat /proc/self/mountinfo"), 0, "%s",
                 err_text);
    cr_expect(strstr(out, "usr\n") != NULL && strstr(out, " / ") != NULL, "%s", out);
    cr_assert_eq(RUN(out, "ps", "--format", "json", id), 0, "%s", err_text);
    pid_t pids[16];
    size_t n = 0;
    parse_pids(out, pids, &n);
    cr_assert_eq(n, 1, "%s", out);
    int e = bare_proc_mount_errno(pids[0]);
    cr_expect_eq(e, EPERM, "a nested namespace's bare proc mount: %d (%s)", e,
                 e > 0 && e < 200 ? strerror(e) : "set-up failed");

    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct run_opts k = {.child_stdout = null, .tier = "kernel"};
    int rc =
        run_bh(NULL, 0, &k, (const char *const[]){"run", "-d", "--no-pivot", new_id("npk"), NULL});
    close(null);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "--no-pivot is refused at the kernel tier") != NULL, "%s", err_text);
}

/* `spec` writes runc's default: a read-only cgroup mount, and a cgroup
 * namespace only on cgroup v2 hosts. */
Test(oci_compat_ns, spec_has_cgroup_mount_and_cgroupns_on_v2_only)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    cr_assert_eq(RUN0("spec"), 0, "%s", err_text);
    json_t *doc = json_load_file(p, 0, NULL);
    cr_assert_not_null(doc);
    bool mount = false, ns = false;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(doc, "mounts"), i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "destination")), "/sys/fs/cgroup") == 0)
            mount = strcmp(json_string_value(json_object_get(v, "type")), "cgroup") == 0;
    }
    json_array_foreach(json_object_get(json_object_get(doc, "linux"), "namespaces"), i, v)
    {
        if (strcmp(json_string_value(json_object_get(v, "type")), "cgroup") == 0)
            ns = true;
    }
    json_decref(doc);
    cr_expect(mount, "no cgroup mount on /sys/fs/cgroup");
    cr_expect_eq(ns, host_is_unified(), "cgroup namespace listed: %d, v2 host: %d", ns,
                 host_is_unified());
}

/* runc's bats "mask paths [prohibit symlink /proc]" and "[... /sys]": a
 * rootfs whose /proc or /sys is a symlink is refused, exit 1, at both tiers,
 * whether the config mounts it or the base layout does. */
static void symlink_mount_point_refused(const char *tier, const char *dir, bool listed)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/rootfs/%s", tmp, dir);
    struct stat st;
    if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode))
        cr_assert_eq(rmdir(p), 0, "%s: %s", p, strerror(errno));
    if (lstat(p, &st) != 0)
        cr_assert_eq(symlink("/symlink", p), 0);
    ns_config("[\"true\"]", false,
              listed && strcmp(dir, "sys") == 0
                  ? "[{\"destination\": \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\"}]"
                  : NULL);
    const char *id = new_id("sym");
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(NULL, 0, &o, (const char *const[]){"run", "-d", id, NULL});
    cr_expect_eq(rc, 1, "exit %d: %s", rc, err_text);
    cr_expect(strstr(err_text, "must be mounted on ordinary directory") != NULL, "%s", err_text);
    cr_expect(strstr(err_text, "is a symlink") != NULL, "%s", err_text);
    snprintf(p, sizeof(p), "%s/bundle/rootfs/symlink", tmp);
    cr_expect_neq(access(p, F_OK), 0, "the link's target was made in the rootfs");
}

Test(oci_compat_ns, symlink_proc_refused_container_tier)
{
    symlink_mount_point_refused("container", "proc", true);
}

Test(oci_compat_ns, symlink_sys_refused_container_tier)
{
    symlink_mount_point_refused("container", "sys", false);
    symlink_mount_point_refused("container", "sys", true);
}

Test(oci_compat_ns, symlink_proc_and_sys_refused_kernel_tier)
{
    h_require_kernel_tier();
    symlink_mount_point_refused("kernel", "proc", true);
    symlink_mount_point_refused("kernel", "sys", false);
}

/* ---- the foreground terminal -------------------------------------------- */

TestSuite(oci_compat_tty, .init = setup, .fini = teardown, .timeout = 90);

/* process.terminal without --console-socket in the foreground: bulkhead
 * takes the pty and relays it (stdio here is not a terminal, as in CI). */
static void run_foreground_tty(const char *tier)
{
    config("[\"sh\", \"-c\", \"tty; echo out-$((6*7)); exit 5\"]", true, NULL);
    const char *id = new_id("tty");
    char out[4096];
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_expect_eq(rc, 5, "exit %d, stderr: %s", rc, err_text);
    cr_expect(strstr(out, "/dev/pts/") != NULL, "the process had no pty: %s", out);
    cr_expect(strstr(out, "out-42\n") != NULL, "output not relayed: %s", out);
    /* As runc: ONLCR off on the relayed pty, so "\n" stays "\n". */
    cr_expect_null(strstr(out, "\r\n"), "relayed output has CRLF: %s", out);
    cr_expect(state_gone(id), "run left its state");
}

Test(oci_compat_tty, run_foreground_relays_kernel)
{
    h_require_kernel_tier();
    run_foreground_tty("kernel");
}

Test(oci_compat_tty, run_foreground_relays_container)
{
    run_foreground_tty("container");
}

/* Our own stdio a terminal: keys typed reach the container's pty (raw mode
 * on ours), its answer comes back, and ours is restored after. */
Test(oci_compat_tty, run_foreground_input_from_a_terminal)
{
    config("[\"sh\", \"-c\", \"read x; echo got-$x-$(stty size)\"]", true, NULL);
    const char *id = new_id("ttyin");
    const char *argv[64];
    build_argv(argv, NULL, (const char *const[]){"run", id, NULL});
    int master;
    struct winsize ws = {.ws_row = 33, .ws_col = 77};
    pid_t pid = forkpty(&master, NULL, NULL, &ws);
    cr_assert_geq(pid, 0);
    if (pid == 0)
        child_exec(argv, NULL);
    /* stderr goes to a file; the typed line is echoed by the container's pty. */
    usleep(100000);
    cr_assert_eq(write(master, "abc\r", 4), 4);
    char out[4096];
    read_all(master, out, sizeof(out));
    close(master);
    int rc = wait_exit(pid);
    load_stderr();
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err_text);
    cr_expect(strstr(out, "got-abc-33 77") != NULL, "typed line or terminal size not relayed: %s",
              out);
}

Test(oci_compat_tty, detached_needs_console_socket)
{
    config("[\"true\"]", true, NULL);
    const char *id = new_id("ttyd");
    cr_expect_neq(RUN0("run", "-d", id), 0);
    cr_expect(strstr(err_text, "cannot allocate tty if runc will detach without setting console "
                               "socket") != NULL,
              "%s", err_text);
    cr_expect_neq(RUN0("create", id), 0);
    cr_expect(strstr(err_text, "console socket") != NULL, "%s", err_text);
    cr_expect(state_gone(id));
    /* And a console socket where no pty is relayed is refused as by runc. */
    config("[\"true\"]", false, NULL);
    cr_expect_neq(RUN0("create", "--console-socket", "/tmp/none.sock", id), 0);
    cr_expect(strstr(err_text, "cannot use console socket if runc will not detach or allocate "
                               "tty") != NULL,
              "%s", err_text);
}

Test(oci_compat_tty, exec_foreground_tty)
{
    const char *id = start_sleeper(NULL);
    char out[4096];
    int rc = RUN(out, "exec", "-t", id, "sh", "-c", "tty; exit 4");
    cr_expect_eq(rc, 4, "exit %d: %s", rc, err_text);
    cr_expect(strstr(out, "/dev/pts/") != NULL, "no pty: %s", out);
    cr_expect_neq(RUN0("exec", "-t", "-d", id, "true"), 0);
    cr_expect(strstr(err_text, "without setting console socket") != NULL, "%s", err_text);
}

/* The pty belongs to the process, as if it had opened it itself (runc's
 * `tty owner` tests), its group devpts' gid= (tty, 5, in runc's config). */
static void pty_owner(const char *tier, unsigned uid, unsigned gid)
{
    config("[\"sh\", \"-c\", \"stat -c owner=%u:%g $(tty)\"]", true, NULL);
    char cfg[8192];
    snprintf(cfg, sizeof(cfg), "%s/bundle/config.json", tmp);
    json_t *j = json_load_file(cfg, 0, NULL);
    cr_assert_not_null(j);
    json_t *proc = json_object_get(j, "process");
    json_object_set_new(proc, "user", json_pack("{s:i,s:i}", "uid", uid, "gid", gid));
    json_t *m = json_array_get(json_object_get(j, "mounts"), 3);
    json_array_append_new(json_object_get(m, "options"), json_string("gid=5"));
    cr_assert_eq(json_dump_file(j, cfg, 0), 0);
    json_decref(j);
    const char *id = new_id("ttyown");
    char out[4096], want[64];
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_assert_eq(rc, 0, "exit %d: %s", rc, err_text);
    snprintf(want, sizeof(want), "owner=%u:5", uid);
    cr_expect(strstr(out, want) != NULL, "run's pty: want %s, got %s", want, out);
}

Test(oci_compat_tty, pty_owner_container_tier)
{
    pty_owner("container", 0, 0);
    pty_owner("container", 1000, 100);
}

Test(oci_compat_tty, pty_owner_kernel_tier)
{
    h_require_kernel_tier();
    pty_owner("kernel", 0, 0);
    pty_owner("kernel", 1000, 100);
}

Test(oci_compat_tty, exec_pty_owner)
{
    const char *id = start_sleeper(NULL);
    char out[4096];
    int rc = RUN(out, "exec", "-t", id, "sh", "-c", "stat -c owner=%u:%g $(tty)");
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err_text);
    /* The sleeper's devpts has no gid=: the group is the process's own. */
    cr_expect(strstr(out, "owner=0:0") != NULL, "exec's pty: %s", out);
    rc = RUN(out, "exec", "-t", "--user", "1000:100", id, "sh", "-c", "stat -c owner=%u:%g $(tty)");
    cr_expect_eq(rc, 0, "exit %d: %s", rc, err_text);
    cr_expect(strstr(out, "owner=1000:100") != NULL, "exec --user's pty: %s", out);
}

/* ---- the command line ----------------------------------------------------- */

TestSuite(oci_compat_cli, .init = setup, .fini = teardown, .timeout = 90);

/* runc's page layout: line 1 "NAME:", line 2 names the runc command. */
Test(oci_compat_cli, help_pages_in_runc_format)
{
    const char *cmds[] = {"create", "delete", "events", "exec", "kill",  "list",  "pause",
                          "ps",     "resume", "run",    "spec", "start", "state", "update"};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        char out[8192], want[64];
        cr_expect_eq(RUN(out, cmds[i], "-h"), 0, "%s -h: %s", cmds[i], err_text);
        snprintf(want, sizeof(want), "NAME:\n   bulkhead %s (runc %s) - ", cmds[i], cmds[i]);
        cr_expect(strncmp(out, want, strlen(want)) == 0, "%s -h: %s", cmds[i], out);
        cr_expect(strstr(out, "\nUSAGE:\n   bulkhead ") != NULL, "%s -h: %s", cmds[i], out);
        char out2[8192];
        cr_expect_eq(RUN(out2, "help", cmds[i]), 0);
        cr_expect_str_eq(out2, out, "`help %s` differs from `%s -h`", cmds[i], cmds[i]);
    }
    char out[8192];
    cr_expect_eq(RUN(out, "--help"), 0);
    cr_expect(strstr(out, "NAME:\n") == out && strstr(out, "runc - Open Container Initiative "
                                                           "runtime") != NULL,
              "%s", out);
    cr_expect_neq(RUN(out, "foo", "-h"), 0);
    cr_expect(strstr(err_text, "No help topic for 'foo'") != NULL, "%s", err_text);
}

Test(oci_compat_cli, version_in_runc_format)
{
    char out[1024];
    cr_assert_eq(RUN(out, "--version"), 0);
    char l0[256] = "", l1[256] = "", l2[256] = "";
    cr_assert_eq(sscanf(out, "%255[^\n]\n%255[^\n]\n%255[^\n]", l0, l1, l2), 3, "%s", out);
    cr_expect(strstr(l0, "bulkhead version ") == l0, "%s", l0);
    cr_expect(strstr(l0, "runc version 1.1.5") != NULL, "%s", l0);
    cr_expect(strncmp(l1, "commit: ", 8) == 0 && strlen(l1) > 8, "%s", l1);
    cr_expect(strncmp(l2, "spec: 1.", 8) == 0, "%s", l2);
}

static void parse_pids(const char *json_text, pid_t *pids, size_t *n)
{
    json_t *j = json_loads(json_text, 0, NULL);
    cr_assert(json_is_array(j), "ps json: %s", json_text);
    *n = 0;
    size_t i;
    json_t *v;
    json_array_foreach(j, i, v)
    {
        if (*n < 16)
            pids[(*n)++] = (pid_t)json_integer_value(v);
    }
    json_decref(j);
}

/* ps lists the container's processes, never the sentry (the state's pid),
 * and hands its arguments to ps(1). */
Test(oci_compat_cli, ps_lists_guests_only_and_passes_ps_options)
{
    const char *id = start_sleeper(NULL);
    char out[16384];
    cr_assert_eq(RUN(out, "state", id), 0);
    json_t *st = json_loads(out, 0, NULL);
    pid_t sentry = (pid_t)json_integer_value(json_object_get(st, "pid"));
    json_decref(st);
    cr_assert_eq(RUN(out, "ps", "--format", "json", id), 0, "%s", err_text);
    pid_t pids[16];
    size_t n = 0;
    parse_pids(out, pids, &n);
    cr_expect_eq(n, 1, "one guest expected: %s", out);
    for (size_t i = 0; i < n; i++)
        cr_expect_neq(pids[i], sentry, "ps lists the sentry %d", sentry);
    cr_assert_eq(RUN(out, "ps", id), 0, "%s", err_text);
    cr_expect(strstr(out, "UID") == out && strstr(out, "PPID") != NULL, "default -ef: %s", out);
    cr_expect(strstr(out, "sleep 1000") != NULL, "%s", out);
    cr_assert_eq(RUN(out, "ps", id, "-o", "pid,args", "-p", "1", "-p", "2"), 0, "%s", err_text);
    /* Only the header: ps(1) ran with our options and the filter held. */
    cr_expect(strstr(out, "PID COMMAND\n") != NULL && strchr(out, '\n')[1] == '\0', "%s", out);
    char want[64];
    snprintf(want, sizeof(want), "-p%d", pids[0]);
    cr_assert_eq(RUN(out, "ps", id, "-o", "pid,comm", want), 0, "%s", err_text);
    cr_expect(strstr(out, "sleep") != NULL, "ps options not passed: %s", out);
}

/* ps(1) sees the container's users, as under runc where the container's
 * root is host root: the UID column says root (not a mapped host id), and
 * BSD `x` ("my processes", runc's `ps -e -x`) selects the root's guests. */
static void ps_as_the_containers_root(const char *tier)
{
    const char *id = start_sleeper(tier);
    char out[16384];
    cr_assert_eq(RUN(out, "ps", id), 0, "%s", err_text);
    const char *line = strchr(out, '\n');
    cr_assert_not_null(line, "%s", out);
    cr_expect(strncmp(line + 1, "root ", 5) == 0, "the guest is not root's: %s", out);
    cr_assert_eq(RUN(out, "ps", id, "-e", "-x"), 0, "%s", err_text);
    cr_expect(strstr(out, "PID TTY") != NULL && strstr(out, "sleep 1000") != NULL,
              "ps -e -x left out the container's root's process: %s", out);
    cr_assert_eq(RUN(out, "ps", id, "-o", "pid,uid,user"), 0, "%s", err_text);
    cr_expect(strstr(out, " 0 root") != NULL, "uid and user in the container: %s", out);
}

Test(oci_compat_cli, ps_as_the_containers_root_container_tier)
{
    ps_as_the_containers_root("container");
}

Test(oci_compat_cli, ps_as_the_containers_root_kernel_tier)
{
    h_require_kernel_tier();
    ps_as_the_containers_root("kernel");
}

/* pid 1 is the sentry, yet tools read the container's umask and state from
 * its status: it shows the process's umask (runc's `umask` test), and the
 * rest of the sentry stays out of reach. */
static void pid1_status(const char *tier)
{
    config("[\"sleep\", \"1000\"]", false, NULL);
    char cfg[8192];
    snprintf(cfg, sizeof(cfg), "%s/bundle/config.json", tmp);
    json_t *j = json_load_file(cfg, 0, NULL);
    cr_assert_not_null(j);
    json_object_set_new(json_object_get(json_object_get(j, "process"), "user"), "umask",
                        json_integer(063));
    cr_assert_eq(json_dump_file(j, cfg, 0), 0);
    json_decref(j);
    const char *id = new_id("um");
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct run_opts o = {.child_stdout = null, .tier = tier};
    int rc = run_bh(NULL, 0, &o, (const char *const[]){"run", "-d", id, NULL});
    close(null);
    cr_assert_eq(rc, 0, "run -d: %s", err_text);
    char out[4096];
    cr_assert_eq(RUN(out, "exec", id, "grep", "^Umask:", "/proc/1/status"), 0, "%s", err_text);
    cr_expect(strstr(out, "Umask:\t0063\n") != NULL, "pid 1's umask: %s", out);
    cr_expect_neq(RUN(out, "exec", id, "cat", "/proc/1/environ"), 0, "the sentry's environ: %s",
                  out);
}

/* A working directory the exec'd user may not enter (runc's `exec --user 0`
 * into another uid's 0700 cwd): at the container tier entered with the
 * setup's rights, as runc's init enters it with its own, and being there
 * grants the process nothing (it still cannot list it); at the kernel tier,
 * whose broker resolves paths from the cwd with the process's ids, refused
 * with the reason. The owner gets in at both. */
static void cwd_entered_with_the_setups_rights(const char *tier)
{
    config("[\"sleep\", \"1000\"]", false, NULL);
    char cfg[8192], dir[300];
    snprintf(cfg, sizeof(cfg), "%s/bundle/config.json", tmp);
    snprintf(dir, sizeof(dir), "%s/bundle/rootfs/root", tmp);
    cr_assert_eq(chown(dir, 42, 0), 0);
    cr_assert_eq(chmod(dir, 0700), 0);
    h_write_file(tmp, "bundle/rootfs/root/f", "secret\n");
    snprintf(cfg, sizeof(cfg), "%s/bundle/rootfs/root/f", tmp);
    cr_assert_eq(chown(cfg, 42, 0), 0);
    cr_assert_eq(chmod(cfg, 0600), 0);
    snprintf(cfg, sizeof(cfg), "%s/bundle/config.json", tmp);
    json_t *j = json_load_file(cfg, 0, NULL);
    cr_assert_not_null(j);
    json_t *proc = json_object_get(j, "process");
    json_object_set_new(proc, "cwd", json_string("/root"));
    json_object_set_new(proc, "user", json_pack("{s:i,s:i}", "uid", 42, "gid", 0));
    cr_assert_eq(json_dump_file(j, cfg, 0), 0);
    json_decref(j);
    const char *id = new_id("cwd");
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct run_opts o = {.child_stdout = null, .tier = tier};
    int rc = run_bh(NULL, 0, &o, (const char *const[]){"run", "-d", id, NULL});
    close(null);
    cr_assert_eq(rc, 0, "run -d as the directory's owner: %s", err_text);
    char out[4096];
    cr_expect_eq(RUN(out, "exec", id, "sh", "-c", "pwd; ls . >/dev/null && echo listed"), 0,
                 "exec as the owner: %s", err_text);
    cr_expect(strstr(out, "/root\nlisted") != NULL, "%s", out);
    /* At the kernel tier `ls .` is brokered: the broker resolves it from the
     * cwd with the thread's ids and file capabilities (none here), so being
     * there lets uid 0 list nothing at either tier, as under runc. */
    rc = RUN(out, "exec", "--user", "0", id, "sh", "-c",
             "pwd; ls . 2>&1 >/dev/null; echo ls-$?; cat ./f 2>&1; echo cat-$?; ls / >/dev/null; "
             "echo root-$?");
    cr_expect_eq(rc, 0, "exec --user 0: %s", err_text);
    cr_expect(strstr(out, "/root\n") == out, "not started in /root: %s", out);
    cr_expect(strstr(out, "Permission denied") != NULL && strstr(out, "ls-0") == NULL,
              "being in the directory let uid 0 list it: %s", out);
    cr_expect(strstr(out, "cat-0") == NULL, "being in the directory let uid 0 read in it: %s", out);
    cr_expect(strstr(out, "root-0") != NULL, "absolute paths from there: %s", out);
    /* A uid the directory's mode shuts out entirely is started there too
     * (the setup's right), and still reads nothing in it. */
    rc = RUN(out, "exec", "--user", "1000:1000", id, "sh", "-c",
             "pwd; cat ./f 2>&1; echo cat-$?; cat /root/f 2>&1; echo abs-$?");
    cr_expect_eq(rc, 0, "exec --user 1000: %s", err_text);
    cr_expect(strstr(out, "/root\n") == out && strstr(out, "cat-0") == NULL &&
                  strstr(out, "abs-0") == NULL,
              "uid 1000 in another uid's 0700 directory: %s", out);
    /* Its owner reads the file: the refusals above are the mode's. */
    cr_expect_eq(RUN(out, "exec", id, "cat", "f"), 0, "%s", err_text);
    cr_expect_str_eq(out, "secret\n");
}

Test(oci_compat_cli, cwd_entered_with_the_setups_rights_container_tier)
{
    cwd_entered_with_the_setups_rights("container");
}

Test(oci_compat_cli, cwd_entered_with_the_setups_rights_kernel_tier)
{
    h_require_kernel_tier();
    cwd_entered_with_the_setups_rights("kernel");
}

/* Runs `cat /sec/f` (uid 42's, 0600, in a 0755 directory) as uid/gid with
 * the given capability lists (JSON arrays; "[]" for none) and gives its
 * output, the command's status appended. */
static const char *cat_with_caps(const char *tier, int uid, const char *bounding,
                                 const char *effective, const char *ambient)
{
    static char out[4096];
    char caps[1024];
    snprintf(caps, sizeof(caps),
             "{\"bounding\": %s, \"permitted\": %s, \"effective\": %s, \"inheritable\": %s, "
             "\"ambient\": %s}",
             bounding, effective, effective, ambient, ambient);
    /* os.access is access(2): the real ids, and the kernel's fix-up for
     * them (a real root's permitted set, nothing for any other uid). */
    config("[\"sh\", \"-c\", \"cat /sec/f 2>&1; echo cat-$?; grep CapEff /proc/self/status; "
           "python3 -c 'import os; print(\\\"access-\\\", os.access(\\\"/sec/f\\\", os.R_OK), "
           "sep=\\\"\\\")'\"]",
           false, NULL);
    json_t *doc = config_load();
    json_t *proc = json_object_get(doc, "process");
    json_object_set_new(proc, "user", json_pack("{s:i,s:i}", "uid", uid, "gid", uid));
    json_object_set_new(proc, "capabilities", json_loads(caps, 0, NULL));
    /* Else an exec as root takes the bounding set (the kernel's rule for
     * root without no_new_privs), at the container tier and under runc. */
    json_object_set_new(proc, "noNewPrivileges", json_true());
    config_save(doc);
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/rootfs/sec", tmp);
    mkdir(p, 0755);
    h_write_file(tmp, "bundle/rootfs/sec/f", "secret\n");
    snprintf(p, sizeof(p), "%s/bundle/rootfs/sec/f", tmp);
    cr_assert_eq(chown(p, 42, 42), 0);
    cr_assert_eq(chmod(p, 0600), 0);
    const char *id = new_id("caps");
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_assert_eq(rc, 0, "run as uid %d (effective %s): %s %s", uid, effective, out, err_text);
    RUN0("delete", "--force", id);
    return out;
}

/* The kernel tier's broker opens the file for the guest: it must act with
 * the file capabilities the guest thread holds, no more and no fewer, as the
 * kernel does for the container tier's direct open. On main (before branch
 * kexec10) the broker took them from the setfsuid fix-up instead: every
 * permitted file capability of the sentry (which holds the guests' bounding
 * set) for a uid-0 guest, none for any other uid. */
static void broker_acts_with_the_threads_file_caps(const char *tier)
{
    const char *dac = "[\"CAP_DAC_OVERRIDE\"]";
    /* root, CAP_DAC_OVERRIDE in its bounding set only: refused */
    const char *out = cat_with_caps(tier, 0, dac, "[]", "[]");
    cr_expect(strstr(out, "Permission denied") != NULL && strstr(out, "cat-0") == NULL,
              "root without CAP_DAC_OVERRIDE read another uid's 0600 file: %s", out);
    cr_expect(strstr(out, "CapEff:\t0000000000000000") != NULL, "%s", out);
    /* root holding it: read */
    cr_expect(strstr(out, "access-False") != NULL, "%s", out);
    /* root holding it: read */
    out = cat_with_caps(tier, 0, dac, dac, "[]");
    cr_expect(strstr(out, "secret\ncat-0") != NULL, "root with CAP_DAC_OVERRIDE: %s", out);
    cr_expect(strstr(out, "access-True") != NULL, "%s", out);
    /* a non-root uid holding it (ambient): read, as the kernel lets it, but
     * access(2) says no (the kernel's fix-up for the real ids) */
    out = cat_with_caps(tier, 1000, dac, dac, dac);
    cr_expect(strstr(out, "secret\ncat-0") != NULL, "uid 1000 with CAP_DAC_OVERRIDE: %s", out);
    cr_expect(strstr(out, "access-False") != NULL, "%s", out);
    /* a non-root uid without it: refused */
    out = cat_with_caps(tier, 1000, dac, "[]", "[]");
    cr_expect(strstr(out, "Permission denied") != NULL && strstr(out, "cat-0") == NULL,
              "uid 1000 without CAP_DAC_OVERRIDE: %s", out);
    cr_expect(strstr(out, "access-False") != NULL, "%s", out);
}

Test(oci_compat_cli, broker_acts_with_the_threads_file_caps_kernel_tier)
{
    h_require_kernel_tier();
    broker_acts_with_the_threads_file_caps("kernel");
}

Test(oci_compat_cli, file_caps_as_the_kernel_gives_them_container_tier)
{
    broker_acts_with_the_threads_file_caps("container");
}

Test(oci_compat_cli, pid1_status_container_tier)
{
    pid1_status("container");
}

Test(oci_compat_cli, pid1_status_kernel_tier)
{
    h_require_kernel_tier();
    pid1_status("kernel");
}

Test(oci_compat_cli, list_in_creation_order)
{
    /* Ids whose name order and directory order differ from creation order. */
    const char *names[] = {"zz", "aa", "mm"};
    const char *made[3];
    for (int i = 0; i < 3; i++) {
        config("[\"sleep\", \"1000\"]", false, NULL);
        made[i] = new_id(names[i]);
        cr_assert_eq(run_quiet((const char *const[]){"create", made[i], NULL}), 0, "%s", err_text);
    }
    char out[8192];
    cr_assert_eq(RUN(out, "list", "-q"), 0);
    char want[512];
    snprintf(want, sizeof(want), "%s\n%s\n%s\n", made[0], made[1], made[2]);
    cr_expect_str_eq(out, want);
    cr_assert_eq(RUN(out, "list", "--format", "json"), 0);
    const char *a = strstr(out, made[0]), *b = strstr(out, made[1]), *c = strstr(out, made[2]);
    cr_expect(a && b && c && a < b && b < c, "%s", out);
}

Test(oci_compat_cli, kill_signal_zero_and_all_after_stop)
{
    const char *id = start_sleeper(NULL);
    cr_expect_eq(RUN0("kill", id, "0"), 0, "kill 0 of a running container: %s", err_text);
    cr_assert_eq(RUN0("kill", id, "KILL"), 0);
    for (double end = h_now() + 60; h_now() < end;) { /* a bound on a hang only */
        char out[16384];
        RUN(out, "state", id);
        if (strstr(out, "\"stopped\""))
            break;
        usleep(50000);
    }
    cr_expect_eq(RUN0("kill", "-a", id, "0"), 0, "kill -a after stop: %s", err_text);
    cr_expect_neq(RUN0("kill", id, "0"), 0, "kill 0 of a stopped container succeeded");
    cr_expect(strstr(err_text, "not running") != NULL, "%s", err_text);
}

Test(oci_compat_cli, exec_failures_exit_255)
{
    const char *id = start_sleeper(NULL);
    cr_expect_eq(RUN0("exec", id, "sh", "-c", "exit 42"), 42);
    cr_expect_eq(RUN0("exec", id, "false"), 1);
    cr_expect_eq(RUN0("exec", "--pid-file", "/non-existent/dir", id, "true"), 255, "%s", err_text);
    cr_expect(strstr(err_text, "pid file") != NULL, "%s", err_text);
    cr_expect_eq(RUN0("exec", id, "no-such-binary"), 255, "%s", err_text);
    cr_expect_eq(RUN0("exec", "no_such_container", "true"), 255, "%s", err_text);
    cr_assert_eq(RUN0("pause", id), 0, "%s", err_text);
    cr_expect_eq(RUN0("exec", id, "true"), 255, "exec into a paused container");
    cr_expect(strstr(err_text, "cannot exec in a paused container") != NULL, "%s", err_text);
    cr_assert_eq(RUN0("resume", id), 0, "%s", err_text);
}

Test(oci_compat_cli, exec_pid_file_and_process_without_user)
{
    const char *id = start_sleeper(NULL);
    char out[4096], p[512];
    snprintf(p, sizeof(p), "%s/exec.pid", tmp);
    cr_assert_eq(RUN(out, "exec", "--pid-file", p, id, "sh", "-c", "echo $$"), 0, "%s", err_text);
    FILE *f = fopen(p, "r");
    cr_assert_not_null(f, "no pid file");
    int host = 0;
    cr_expect_eq(fscanf(f, "%d", &host), 1);
    fclose(f);
    char st[16384];
    cr_assert_eq(RUN(st, "state", id), 0);
    json_t *j = json_loads(st, 0, NULL);
    cr_expect_gt(host, 0);
    cr_expect_neq(host, json_integer_value(json_object_get(j, "pid")),
                  "the pid file names the container, not the process");
    json_decref(j);
    /* A process.json without "user": the container's root, as runc does. */
    h_write_file(tmp, "proc.json",
                 "{\"args\": [\"sh\", \"-c\", \"id -u; id -g\"], \"cwd\": \"/\", "
                 "\"env\": [\"PATH=/usr/bin:/bin\"]}");
    snprintf(p, sizeof(p), "%s/proc.json", tmp);
    cr_assert_eq(RUN(out, "exec", "-p", p, id), 0, "%s", err_text);
    cr_expect_str_eq(out, "0\n0\n");
}

/* exec --ignore-paused into a paused container while another caller
 * resumes it: exec must not hold the container's lock while the frozen
 * sentry cannot answer. */
Test(oci_compat_cli, exec_ignore_paused_with_concurrent_resume)
{
    const char *id = start_sleeper(NULL);
    cr_assert_eq(RUN0("pause", id), 0, "%s", err_text);
    const char *argv[64];
    build_argv(argv, NULL,
               (const char *const[]){"exec", "--ignore-paused", id, "echo", "thawed", NULL});
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t ex = fork();
    cr_assert_geq(ex, 0);
    if (ex == 0) {
        dup2(p[1], 1);
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        char errp[256], bundle[256];
        snprintf(errp, sizeof(errp), "%s/exec.err", tmp);
        snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(e, 2);
        if (chdir(bundle) < 0)
            _exit(127);
        execv(bh, (char **)argv);
        _exit(127);
    }
    close(p[1]);
    usleep(300000);
    /* The resume must get the lock while exec waits for the frozen sentry. */
    cr_expect_eq(RUN0("resume", id), 0, "resume while exec waits: %s", err_text);
    char out[256];
    read_all(p[0], out, sizeof(out));
    close(p[0]);
    cr_expect_eq(wait_exit(ex), 0);
    cr_expect_str_eq(out, "thawed\n");
}

/* ---- seccomp profiles ------------------------------------------------------ */

TestSuite(oci_compat_seccomp, .init = setup, .fini = teardown, .timeout = 120);

/* Runs sh -c script in the foreground with the given linux.seccomp at tier;
 * returns the exit status, stdout+stderr (2>&1) in out. */
static int run_with_profile(const char *tier, const char *profile, const char *script, char *out,
                            size_t outlen)
{
    char args[1024];
    snprintf(args, sizeof(args), "[\"sh\", \"-c\", \"exec 2>&1; %s\"]", script);
    char text[12288];
    snprintf(text, sizeof(text),
             "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true}, "
             "\"process\": {\"args\": %s, \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, "
             "\"env\": [\"PATH=/usr/bin:/bin\"]}, \"mounts\": [{\"destination\": \"/usr\", "
             "\"type\": \"bind\", \"source\": \"/usr\", \"options\": [\"rbind\", \"ro\"]}, "
             "{\"destination\": \"/proc\", \"type\": \"proc\", \"source\": \"proc\"}, "
             "{\"destination\": \"/tmp\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"}], "
             "\"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"}, "
             "{\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}], "
             "\"seccomp\": %s}}",
             args, profile);
    h_write_file(tmp, "bundle/config.json", text);
    const char *id = new_id("sc");
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    return run_bh(out, outlen, &o, (const char *const[]){"run", id, NULL});
}

/* defaultAction allows, a deny list refuses: runc's "SCMP_ACT_ERRNO default"
 * and "explicit errno" profiles, at both tiers (stacked on the tier's own). */
static void deny_list(const char *tier)
{
    char out[4096];
    int rc = run_with_profile(tier,
                              "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"architectures\": "
                              "[\"SCMP_ARCH_X86\", \"SCMP_ARCH_X32\"], \"syscalls\": [{\"names\": "
                              "[\"mkdir\", \"mkdirat\"], \"action\": \"SCMP_ACT_ERRNO\"}]}",
                              "mkdir /tmp/a; echo after-$?", out, sizeof(out));
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "Operation not permitted") != NULL && strstr(out, "after-1") != NULL,
              "mkdir was not refused with EPERM: %s", out);
    rc = run_with_profile(tier,
                          "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
                          "[\"mkdir\", \"mkdirat\"], \"action\": \"SCMP_ACT_ERRNO\", "
                          "\"errnoRet\": 100}]}",
                          "mkdir /tmp/a; touch /tmp/b && echo touched", out, sizeof(out));
    cr_expect(strstr(out, "Network is down") != NULL, "errnoRet 100 not returned: %s", out);
    cr_expect(strstr(out, "touched") != NULL, "the profile refused more than it lists: %s", out);
    rc = run_with_profile(tier,
                          "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
                          "[\"mkdir\", \"mkdirat\"], \"action\": \"SCMP_ACT_KILL\"}]}",
                          "mkdir /tmp/a", out, sizeof(out));
    cr_expect_neq(rc, 0, "SCMP_ACT_KILL did not kill: %s", out);
}

Test(oci_compat_seccomp, deny_list_container_tier)
{
    deny_list("container");
}

Test(oci_compat_seccomp, deny_list_kernel_tier)
{
    h_require_kernel_tier();
    deny_list("kernel");
}

/* Two comparisons of one argument: either may match (runc adds one rule
 * per comparison), and a rule that can never match is dropped, not refused. */
Test(oci_compat_seccomp, repeated_argument_means_any_and_dead_rules_pass)
{
    char out[4096];
    int rc = run_with_profile(
        "container",
        "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": [\"kill\"], "
        "\"action\": \"SCMP_ACT_ERRNO\", \"args\": [{\"index\": 1, \"value\": 10, \"op\": "
        "\"SCMP_CMP_EQ\"}, {\"index\": 1, \"value\": 12, \"op\": \"SCMP_CMP_EQ\"}]}, "
        "{\"names\": [\"mkdir\", \"mkdirat\"], \"action\": \"SCMP_ACT_ERRNO\"}, {\"names\": "
        "[\"mkdirat\"], \"action\": \"SCMP_ACT_ALLOW\", \"args\": [{\"index\": 0, \"value\": 1, "
        "\"op\": \"SCMP_CMP_EQ\"}]}]}",
        "trap '' USR1 USR2; kill -USR1 $$; echo usr1-$?; kill -USR2 $$; echo usr2-$?; kill -0 "
        "$$; echo zero-$?; mkdir /tmp/x; echo mkdir-$?",
        out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect(strstr(out, "usr1-1") && strstr(out, "usr2-1") && strstr(out, "zero-0"),
              "either comparison must refuse kill, signal 0 passes: %s", out);
    cr_expect(strstr(out, "mkdir-1") != NULL, "%s", out);
}

/* runc's `seccomp -ENOSYS handling` profile: an allowlist (default EPERM)
 * whose rules for process_vm_readv, process_vm_writev and kcmp carry argument
 * conditions, several comparisons of one argument meaning any of them and
 * comparisons of different arguments meaning all. The calls the profile
 * allows must reach the kernel (EINVAL for bad flags, ESRCH for no such pid)
 * at the container tier, as under runc; the kernel tier's own filter still
 * refuses them. */
#define VM_CALLS_PROBE                                                                             \
    "import ctypes\n"                                                                              \
    "l = ctypes.CDLL(None, use_errno=True)\n"                                                      \
    "calls = (('readv100', 310, 100, 0), ('readv9001', 310, 9001, 0), ('readv0', 310, 0, 0),\n"    \
    "         ('writev1337', 311, 1337, 0), ('writev2020', 311, 2020, 0), ('writev0', 311, 0, "    \
    "0),\n"                                                                                        \
    "         ('kcmp0_1337', 312, 0, 1337), ('kcmp0_0', 312, 0, 0), ('kcmp500_1337', 312, 500,\n"  \
    "         1337), ('kcmp500_500', 312, 500, 500))\n"                                            \
    "for name, nr, a0, a1 in calls:\n"                                                             \
    "    flags = 0 if nr == 312 else -1\n"                                                         \
    "    args = [a0, a1, 0, 0, 0] if nr == 312 else [a0, 0, 0, 0, 0, flags]\n"                     \
    "    ctypes.set_errno(0)\n"                                                                    \
    "    r = l.syscall(ctypes.c_long(nr), *[ctypes.c_long(x) for x in args])\n"                    \
    "    print(name, r, ctypes.get_errno())\n"

static json_t *arg_rule(const char *name, const char *action, int err, json_t *args)
{
    json_t *r = json_pack("{s:[s], s:s, s:o}", "names", name, "action", action, "args", args);
    if (err != 0)
        json_object_set_new(r, "errnoRet", json_integer(err));
    return r;
}

static json_t *cmp_eq(int index, long value)
{
    return json_pack("{s:i, s:I, s:s}", "index", index, "value", (json_int_t)value, "op",
                     "SCMP_CMP_EQ");
}

static void vm_calls_follow_the_profile(const char *tier)
{
    json_t *names = json_array();
    for (int nr = 0; nr < 512; nr++) {
        char *n = seccomp_syscall_resolve_num_arch(SCMP_ARCH_X86_64, nr);
        if (n == NULL)
            continue;
        if (strcmp(n, "kcmp") != 0 && strcmp(n, "process_vm_readv") != 0 &&
            strcmp(n, "process_vm_writev") != 0)
            json_array_append_new(names, json_string(n));
        free(n);
    }
    json_t *rules = json_array();
    json_array_append_new(rules,
                          json_pack("{s:o, s:s}", "names", names, "action", "SCMP_ACT_ALLOW"));
    json_array_append_new(rules, arg_rule("kcmp", "SCMP_ACT_ALLOW", 0,
                                          json_pack("[o, o]", cmp_eq(0, 0), cmp_eq(1, 1337))));
    json_array_append_new(rules, arg_rule("process_vm_readv", "SCMP_ACT_ALLOW", 0,
                                          json_pack("[o, o]", cmp_eq(0, 100), cmp_eq(0, 9001))));
    json_array_append_new(rules, arg_rule("process_vm_writev", "SCMP_ACT_ERRNO", ENOANO,
                                          json_pack("[o, o]", cmp_eq(0, 1337), cmp_eq(0, 2020))));
    json_t *sc = json_pack("{s:s, s:[s], s:o}", "defaultAction", "SCMP_ACT_ERRNO", "architectures",
                           "SCMP_ARCH_X86_64", "syscalls", rules);
    cr_assert_not_null(sc);
    char *profile = json_dumps(sc, JSON_COMPACT);
    json_decref(sc);
    cr_assert_lt(strlen(profile), 10000, "the profile outgrew run_with_profile's config");
    h_write_file(tmp, "bundle/rootfs/probe.py", VM_CALLS_PROBE);
    char out[4096];
    int rc = run_with_profile(tier, profile, "python3 /probe.py", out, sizeof(out));
    free(profile);
    cr_assert_eq(rc, 0, "[%s] %d %s %s", tier, rc, out, err_text);
    bool container = strcmp(tier, "container") == 0;
    struct {
        const char *name;
        int err;
    } want[] = {{"readv100", container ? EINVAL : EPERM},
                {"readv9001", container ? EINVAL : EPERM},
                {"readv0", EPERM},
                {"writev1337", container ? ENOANO : EPERM},
                {"writev2020", container ? ENOANO : EPERM},
                {"writev0", EPERM},
                {"kcmp0_1337", container ? ESRCH : EPERM},
                {"kcmp0_0", EPERM},
                {"kcmp500_1337", EPERM},
                {"kcmp500_500", EPERM}};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char line[64];
        snprintf(line, sizeof(line), "%s -1 %d\n", want[i].name, want[i].err);
        cr_expect(strstr(out, line) != NULL, "[%s] want `%.*s`:\n%s", tier, (int)strlen(line) - 1,
                  line, out);
    }
}

Test(oci_compat_seccomp, vm_calls_follow_the_profile_container_tier)
{
    vm_calls_follow_the_profile("container");
}

Test(oci_compat_seccomp, vm_calls_refused_by_the_kernel_tier)
{
    h_require_kernel_tier();
    vm_calls_follow_the_profile("kernel");
}

/* ---- devices ---------------------------------------------------------------- */

TestSuite(oci_compat_devices, .init = setup, .fini = teardown, .timeout = 120);

/* Runs script with linux.devices and, unless NULL, linux.resources.devices
 * (both JSON arrays) and the members of linux_more (a JSON object) patched
 * into the written config's linux. */
static int run_in_linux(const char *tier, const char *devices, const char *rules,
                        const char *linux_more, const char *script, char *out, size_t outlen)
{
    char args[1024], extra[2048];
    snprintf(args, sizeof(args), "[\"sh\", \"-c\", \"exec 2>&1; %s\"]", script);
    snprintf(extra, sizeof(extra), "\"annotations\": {\"dev.bulkhead.tier\": \"%s\"}", tier);
    config(args, false, extra);
    json_t *doc = config_load();
    json_t *lx = json_object_get(doc, "linux");
    json_t *devs = json_loads(devices, 0, NULL);
    cr_assert_not_null(devs, "%s", devices);
    json_object_set_new(lx, "devices", devs);
    if (rules != NULL) {
        json_t *r = json_loads(rules, 0, NULL);
        cr_assert_not_null(r, "%s", rules);
        json_object_set_new(json_object_get(lx, "resources"), "devices", r);
    }
    if (linux_more != NULL) {
        json_t *more = json_loads(linux_more, 0, NULL);
        cr_assert_not_null(more, "%s", linux_more);
        cr_assert_eq(json_object_update(lx, more), 0);
        json_decref(more);
    }
    config_save(doc);
    const char *id = new_id("dev");
    struct run_opts o = {.child_stdout = -1};
    return run_bh(out, outlen, &o, (const char *const[]){"run", id, NULL});
}

static int run_with_rules(const char *tier, const char *devices, const char *rules,
                          const char *script, char *out, size_t outlen)
{
    return run_in_linux(tier, devices, rules, NULL, script, out, outlen);
}

static int run_with_devices(const char *tier, const char *devices, const char *script, char *out,
                            size_t outlen)
{
    return run_in_linux(tier, devices, NULL, NULL, script, out, outlen);
}

#define KMSG "{\"path\": \"/dev/kmsg\", \"type\": \"c\", \"major\": 1, \"minor\": 11}"
#define DENY_ALL "{\"allow\": false, \"access\": \"rwm\"}"

/* A char device the config lists is a node of the container's own, with
 * the config's owner and mode (default 0:0 0666, as runc makes it); the
 * host's node is untouched. */
Test(oci_compat_devices, own_node_at_container_tier)
{
    struct stat before, after;
    cr_assert(stat("/dev/kmsg", &before) == 0 && S_ISCHR(before.st_mode),
              "the host has no /dev/kmsg");
    char out[4096];
    int rc = run_with_devices("container",
                              "[" KMSG ", {\"path\": \"/dev/ptmx\", \"type\": \"c\", "
                              "\"major\": 5, \"minor\": 2}, {\"path\": \"/dev/my/kmsg2\", "
                              "\"type\": \"c\", \"major\": 1, \"minor\": 11, \"fileMode\": 416, "
                              "\"uid\": 7, \"gid\": 8}, {\"path\": \"/dev/fifo\", \"type\": "
                              "\"p\", \"fileMode\": 384}, {\"path\": \"/dev/u\", \"type\": "
                              "\"u\", \"major\": 1, \"minor\": 3}]",
                              "stat -c %F-%t:%T-%a-%u:%g /dev/kmsg /dev/my/kmsg2 /dev/fifo "
                              "/dev/u",
                              out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect_str_eq(out, "character special file-1:b-666-0:0\n"
                          "character special file-1:b-640-7:8\n"
                          "fifo-0:0-600-0:0\n"
                          "character special file-1:3-666-0:0\n");
    cr_assert_eq(stat("/dev/kmsg", &after), 0);
    cr_expect(before.st_ino == after.st_ino && before.st_mode == after.st_mode &&
                  before.st_uid == after.st_uid && before.st_gid == after.st_gid,
              "the host's /dev/kmsg changed");
}

/* With the config's own id maps, a node's owner is its uid/gid through
 * them (not idmapped); an owner the maps leave out is refused by name. */
Test(oci_compat_devices, node_owner_through_the_configs_maps)
{
    char out[4096];
    const char *maps = "{\"uidMappings\": [{\"containerID\": 0, \"hostID\": 3000000, \"size\": "
                       "65536}], \"gidMappings\": [{\"containerID\": 0, \"hostID\": 3000000, "
                       "\"size\": 65536}]}";
    int rc = run_in_linux("container",
                          "[{\"path\": \"/dev/k\", \"type\": \"c\", \"major\": 1, \"minor\": "
                          "11, \"uid\": 7, \"gid\": 9}]",
                          NULL, maps, "stat -c %u:%g /dev/k", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect_str_eq(out, "7:9\n");
    rc = run_in_linux("container",
                      "[{\"path\": \"/dev/k\", \"type\": \"c\", \"major\": 1, \"minor\": 11, "
                      "\"uid\": 70000, \"gid\": 9}]",
                      NULL, maps, "true", out, sizeof(out));
    cr_expect_neq(rc, 0, "%s", out);
    cr_expect(strstr(err_text, "device `/dev/k` belongs to 70000:9, which the container's "
                               "uid/gid mappings leave out") != NULL,
              "%s", err_text);
}

/* The default nodes belong to the container's root, as under runc (dev.bats
 * `redundant default /dev/tty`), at both tiers. */
Test(oci_compat_devices, default_nodes_owned_by_the_containers_root)
{
    char out[4096];
    int rc = run_with_devices("container",
                              "[{\"path\": \"/dev/tty\", \"type\": \"c\", \"major\": 5, "
                              "\"minor\": 0}]",
                              "stat -L -c %a-%u:%g-%t:%T /dev/tty /dev/null /dev/ptmx", out,
                              sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect_str_eq(out, "666-0:0-5:0\n666-0:0-1:3\n666-0:0-5:2\n");
}

/* The device cgroup refuses with EPERM what its rules deny, also a node the
 * container owns (dev.bats `device cgroup deny`), and allows what a rule
 * allows (`allow rw char device`: the write half; reading /dev/kmsg also
 * needs CAP_SYSLOG of the host where kernel.dmesg_restrict is 1). */
Test(oci_compat_devices, device_cgroup_denies_with_eperm_and_allows_by_rule)
{
    char out[4096];
    int rc = run_with_rules("container", "[" KMSG "]", "[" DENY_ALL "]",
                            "echo bulkhead-dev-e2e > /dev/kmsg || echo refused", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect(strstr(out, "Operation not permitted") != NULL && strstr(out, "refused") != NULL,
              "%s", out);
    /* No rules at all: default deny too (runc's), and the standard nodes. */
    rc = run_with_rules("container", "[" KMSG "]", NULL,
                        "echo x > /dev/null && echo null-ok; echo bulkhead-dev-e2e > /dev/kmsg "
                        "|| echo refused",
                        out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect(strstr(out, "null-ok") != NULL && strstr(out, "Operation not permitted") != NULL,
              "%s", out);
    rc = run_with_rules("container", "[" KMSG "]",
                        "[" DENY_ALL ", {\"allow\": true, \"type\": \"c\", \"major\": 1, "
                        "\"minor\": 11, \"access\": \"rw\"}]",
                        "echo bulkhead-dev-e2e > /dev/kmsg && echo written", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect_str_eq(out, "written\n");
}

/* A block device allowed rwm is readable (dev.bats `allow rm block
 * device`, its read half); the same node without the rule is refused. */
Test(oci_compat_devices, block_device_read_only_when_a_rule_allows_it)
{
    /* Any block device the host's kernel has (as dev.bats takes lsblk's
     * first): the node is made by number, the host's need not exist. */
    unsigned maj = 0, min = 0;
    DIR *d = opendir("/sys/dev/block");
    cr_assert_not_null(d, "the host lists no block devices (/sys/dev/block)");
    struct dirent *de;
    bool found = false;
    while (!found && (de = readdir(d)) != NULL)
        found = sscanf(de->d_name, "%u:%u", &maj, &min) == 2;
    closedir(d);
    cr_assert(found, "the host has no block device");
    char devs[256], rules[256], out[4096];
    snprintf(devs, sizeof(devs),
             "[{\"path\": \"/dev/blk\", \"type\": \"b\", \"major\": %u, \"minor\": %u}]", maj, min);
    snprintf(rules, sizeof(rules),
             "[" DENY_ALL ", {\"allow\": true, \"type\": \"b\", \"major\": %u, \"minor\": %u, "
             "\"access\": \"rwm\"}]",
             maj, min);
    int rc = run_with_rules("container", devs, rules,
                            "test -b /dev/blk && head -c 512 /dev/blk > /dev/null && echo read",
                            out, sizeof(out));
    cr_expect_eq(rc, 0, "%u:%u: %s %s", maj, min, out, err_text);
    cr_expect_str_eq(out, "read\n");
    rc = run_with_rules("container", devs, "[" DENY_ALL "]",
                        "head -c 512 /dev/blk > /dev/null || echo refused", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect(strstr(out, "Operation not permitted") != NULL && strstr(out, "refused") != NULL,
              "%s", out);
}

/* The kernel tier refuses a host device by name and reason, and accepts
 * the nodes every sandbox has. */
Test(oci_compat_devices, kernel_tier_refuses_host_devices_by_name)
{
    h_require_kernel_tier();
    char out[4096];
    int rc = run_with_devices("kernel", "[" KMSG "]", "true", out, sizeof(out));
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "device `/dev/kmsg` (c 1:11) is refused at the kernel tier") != NULL,
              "%s", err_text);
    rc = run_with_devices("kernel", "[{\"path\": \"/dev/f\", \"type\": \"p\"}]", "true", out,
                          sizeof(out));
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "fifo `/dev/f` is refused at the kernel tier") != NULL, "%s",
              err_text);
    rc = run_with_devices("kernel",
                          "[{\"path\": \"/dev/tty\", \"type\": \"c\", \"major\": 5, \"minor\": "
                          "0}, {\"path\": \"/dev/ptmx\", \"type\": \"c\", \"major\": 5, "
                          "\"minor\": 2}, {\"path\": \"/dev/null\", \"type\": \"c\", \"major\": "
                          "1, \"minor\": 3}]",
                          "test -c /dev/null && test -e /dev/ptmx && stat -c %u:%g /dev/null", out,
                          sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect_str_eq(out, "0:0\n");
}

Test(oci_compat_devices, refusals_name_the_device)
{
    char out[4096];
    cr_expect_neq(run_with_devices("container",
                                   "[{\"path\": \"/dev/null\", \"type\": \"c\", \"major\": 1, "
                                   "\"minor\": 11}]",
                                   "true", out, sizeof(out)),
                  0);
    cr_expect(strstr(err_text, "`/dev/null` is listed as c 1:11") != NULL, "%s", err_text);
    cr_expect_neq(run_with_devices("container",
                                   "[{\"path\": \"/dev/k\", \"type\": \"c\", \"major\": 1, "
                                   "\"minor\": 11, \"uid\": -1}]",
                                   "true", out, sizeof(out)),
                  0);
    cr_expect(strstr(err_text, "device `/dev/k`: `fileMode`, `uid` and `gid`") != NULL, "%s",
              err_text);
}

/* ---- resources and hooks ------------------------------------------------------ */

TestSuite(oci_compat_config, .init = setup, .fini = teardown, .timeout = 120);

/* linux.resources.unified names cgroup v2 files: on a v1 or hybrid host it
 * is an invalid configuration (runc's words); on v2 bulkhead says it does
 * not apply them. Never silently ignored. */
Test(oci_compat_config, unified_resources_never_ignored)
{
    config("[\"true\"]", false, NULL);
    json_t *doc = config_load();
    json_object_set_new(json_object_get(json_object_get(doc, "linux"), "resources"), "unified",
                        json_pack("{s:s}", "memory.min", "131072"));
    config_save(doc);
    const char *id = new_id("uni");
    cr_expect_neq(run_quiet((const char *const[]){"run", "-d", id, NULL}), 0);
    struct statfs sf;
    cr_assert_eq(statfs("/sys/fs/cgroup", &sf), 0);
    if (sf.f_type == CGROUP2_SUPER_MAGIC)
        cr_expect(strstr(err_text, "`linux.resources.unified` is not applied") != NULL, "%s",
                  err_text);
    else
        cr_expect(strstr(err_text, "invalid configuration: `linux.resources.unified`") != NULL,
                  "%s", err_text);
    cr_expect(state_gone(id));
}

/* Hooks get the config's annotations as they are, also when the tier came
 * from --default-tier (no dev.bulkhead.* key added). */
Test(oci_compat_config, hook_state_has_the_configs_annotations)
{
    char extra[1024];
    snprintf(extra, sizeof(extra),
             "\"annotations\": {\"org.example.k\": \"v\"}, \"hooks\": {\"prestart\": [{\"path\": "
             "\"/bin/sh\", \"args\": [\"sh\", \"-c\", \"cat > %s/hook-state.json\"]}]}",
             tmp);
    config("[\"true\"]", false, extra);
    const char *id = new_id("hk");
    struct run_opts o = {.child_stdout = -1, .tier = "container"};
    char out[256];
    cr_assert_eq(run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL}), 0, "%s",
                 err_text);
    char p[512];
    snprintf(p, sizeof(p), "%s/hook-state.json", tmp);
    json_t *st = json_load_file(p, 0, NULL);
    cr_assert_not_null(st, "the hook got no state");
    json_t *ann = json_object_get(st, "annotations");
    cr_expect_eq(json_object_size(ann), 1, "annotations: %s", json_dumps(ann, 0));
    cr_expect_str_eq(json_string_value(json_object_get(ann, "org.example.k")), "v");
    cr_expect_str_eq(json_string_value(json_object_get(st, "id")), id);
    json_decref(st);
}

/* --debug: runc's line format on stderr, or only in --log when given. */
Test(oci_compat_cli, debug_lines_go_to_stderr_or_the_log)
{
    const char *id = start_sleeper(NULL);
    cr_assert_eq(RUN0("--debug", "exec", id, "true"), 0, "%s", err_text);
    cr_expect(strstr(err_text, "level=debug msg=\"exec ") != NULL, "%s", err_text);
    char log[512];
    snprintf(log, sizeof(log), "%s/debug.log", tmp);
    cr_assert_eq(RUN0("--debug", "--log", log, "--log-format", "json", "exec", id, "true"), 0);
    cr_expect_null(strstr(err_text, "level"), "debug lines on stderr with --log: %s", err_text);
    FILE *f = fopen(log, "r");
    cr_assert_not_null(f);
    char line[1024];
    bool seen = false;
    while (fgets(line, sizeof(line), f))
        seen = seen || strstr(line, "\"level\":\"debug\"") != NULL;
    fclose(f);
    cr_expect(seen, "no JSON debug line in the log");
}

/* runc's set-up stage names in --debug lines, which tools and runc's own
 * tests follow: for run (on stderr, or only in --log) and for exec. */
static const char *const run_stages[] = {"nsexec container setup", "child process in init()",
                                         "init: closing the pipe to signal completion", NULL};
static const char *const exec_stages[] = {"nsexec container setup", "child process in init()",
                                          "setns_init: about to exec", NULL};

static void expect_stages(const char *text, const char *const *stages)
{
    for (int i = 0; stages[i]; i++)
        cr_expect(strstr(text, stages[i]) != NULL, "no `%s` line: %s", stages[i], text);
}

Test(oci_compat_cli, debug_lines_name_runcs_stages)
{
    config("[\"true\"]", false, NULL);
    const char *id = new_id("dbg");
    cr_assert_eq(RUN0("--debug", "run", id), 0, "%s", err_text);
    expect_stages(err_text, run_stages);
    char log[512], text[16384];
    snprintf(log, sizeof(log), "%s/run.log", tmp);
    cr_assert_eq(RUN0("--debug", "--log", log, "--log-format", "json", "run", id), 0, "%s",
                 err_text);
    cr_expect_null(strstr(err_text, "nsexec"), "stage lines on stderr with --log: %s", err_text);
    int fd = open(log, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    read_all(fd, text, sizeof(text));
    close(fd);
    expect_stages(text, run_stages);
    cr_expect(strstr(text, "{\"level\":\"debug\",\"msg\":\"nsexec container setup") != NULL,
              "not a JSON line: %s", text);
    const char *sl = start_sleeper(NULL);
    cr_assert_eq(RUN0("--debug", "exec", sl, "true"), 0, "%s", err_text);
    expect_stages(err_text, exec_stages);
}

/* exec --preserve-fds N: our 3..3+N-1 are the process's 3..3+N-1 (nothing
 * else leaks in); fd 3 is /dev/null, or fd3 when it is not -1. */
static int exec_preserving_fd3(const char *id, int fd3, const char *script, char *out,
                               size_t outlen)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/preserved.txt", tmp);
    h_write_file(tmp, "preserved.txt", "hello-fd\n");
    cr_assert_eq(chmod(p, 0666), 0);
    const char *argv[64];
    build_argv(argv, NULL,
               (const char *const[]){"exec", "--preserve-fds=2", id, "sh", "-c", script, NULL});
    int pp[2];
    cr_assert_eq(pipe2(pp, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(pp[1], 1);
        int null = open("/dev/null", O_RDONLY);
        dup2(null, 0);
        dup2(fd3 >= 0 ? fd3 : null, 3);
        int f = open(p, O_RDONLY);
        dup2(f, 4);
        for (int fd = 5; fd < 64; fd++)
            close(fd);
        child_exec(argv, NULL);
    }
    close(pp[1]);
    read_all(pp[0], out, outlen);
    close(pp[0]);
    int rc = wait_exit(pid);
    load_stderr();
    return rc;
}

static int exec_preserving(const char *id, const char *script, char *out, size_t outlen)
{
    return exec_preserving_fd3(id, -1, script, out, outlen);
}

Test(oci_compat_cli, exec_preserve_fds)
{
    const char *id = start_sleeper("container");
    char out[4096];
    int rc = exec_preserving(id, "cat <&4; ls /proc/self/fd | tr '\\n' ' '", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s", err_text);
    cr_expect(strncmp(out, "hello-fd\n0 1 2 3 4 ", 19) == 0, "%s", out);
    /* ls's own directory fd is 5: nothing beyond what was asked for. */
    cr_expect(strstr(out, " 6 ") == NULL, "an fd leaked in: %s", out);
}

/* runc's test reopens the preserved file through /proc/self/fd: the
 * container's Landlock domain allows the file as it was opened (read here),
 * nothing more (no write through the reopen, nothing else beside it). */
Test(oci_compat_cli, exec_preserve_fds_reopened_as_opened)
{
    const char *id = start_sleeper("container");
    char out[4096];
    int rc = exec_preserving(id, "cat /proc/self/fd/4; echo x 2>&1 >>/proc/self/fd/4; echo w-$?",
                             out, sizeof(out));
    cr_expect_eq(rc, 0, "%s", err_text);
    cr_expect(strncmp(out, "hello-fd\n", 9) == 0, "the reopen was refused: %s", out);
    /* The file is 0666 (exec_preserving): only Landlock refuses the write. */
    cr_expect(strstr(out, "Permission denied") != NULL && strstr(out, "w-0") == NULL,
              "a read-only fd was reopened for writing: %s", out);
}

/* The kernel tier passes files and pipes: the guest reads and writes them
 * directly, as data; /dev/null on fd 3 is one of the sandbox's own devices. */
Test(oci_compat_cli, exec_preserve_fds_kernel_tier)
{
    h_require_kernel_tier();
    const char *id = start_sleeper("kernel");
    char out[4096];
    int rc = exec_preserving(id, "cat <&4; ls /proc/self/fd | tr '\\n' ' '", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s", err_text);
    cr_expect(strncmp(out, "hello-fd\n0 1 2 3 4 ", 19) == 0, "%s", out);
    cr_expect(strstr(out, " 6 ") == NULL, "an fd leaked in: %s", out);
}

/* What would reach around the broker is refused, named, before anything
 * runs: a host directory or O_PATH fd (a root for *at calls), a socket (a
 * line to a host service), a file of the host's procfs. */
Test(oci_compat_cli, exec_preserve_fds_refused_at_kernel_tier)
{
    h_require_kernel_tier();
    const char *id = start_sleeper("kernel");
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct {
        int fd;
        const char *why;
    } cases[] = {
        {open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC), "it is a directory"},
        {open(tmp, O_PATH | O_CLOEXEC), "it is an O_PATH fd"},
        {sv[0], "it is a socket"},
        {open("/proc/self/status", O_RDONLY | O_CLOEXEC), "a file of procfs"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char out[4096];
        cr_assert_geq(cases[i].fd, 0);
        cr_expect_eq(exec_preserving_fd3(id, cases[i].fd, "echo ran", out, sizeof(out)), 255);
        cr_expect(strstr(err_text, "extra fd 3 (--preserve-fds) is refused at the kernel tier") !=
                          NULL &&
                      strstr(err_text, cases[i].why) != NULL,
                  "case %zu: %s", i, err_text);
        cr_expect_str_eq(out, "");
        close(cases[i].fd);
    }
    close(sv[1]);
}

/* process.rlimits as runc sets them: a core limit (soft and hard) the
 * config raises above bulkhead's default of 0 is what the process gets. */
Test(oci_compat_config, rlimit_core_as_configured)
{
    config("[\"sh\", \"-c\", \"grep 'core file' /proc/self/limits; grep 'open files' "
           "/proc/self/limits\"]",
           false, NULL);
    json_t *doc = config_load();
    json_object_set_new(
        json_object_get(doc, "process"), "rlimits",
        json_pack("[{s:s,s:i,s:i}]", "type", "RLIMIT_CORE", "soft", 1024, "hard", 2048));
    config_save(doc);
    const char *id = new_id("rl");
    char out[1024];
    struct run_opts o = {.child_stdout = -1};
    cr_assert_eq(run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL}), 0, "%s",
                 err_text);
    cr_expect(strstr(out, "Max core file size        1024                 2048                 "
                          "bytes") != NULL,
              "%s", out);
    /* What the config does not name keeps bulkhead's default. */
    cr_expect(strstr(out, "Max open files            1024                 4096") != NULL, "%s",
              out);
}

/* process.noNewPrivileges false (or absent): no_new_privs is still set, as
 * every bulkhead tier sets it, and the state says so. */
Test(oci_compat_config, no_new_privileges_false_is_said_in_state)
{
    const char *id = start_sleeper(NULL);
    char out[16384];
    cr_assert_eq(RUN(out, "exec", id, "grep", "NoNewPrivs", "/proc/self/status"), 0, "%s",
                 err_text);
    cr_expect(strstr(out, "NoNewPrivs:\t1") != NULL, "%s", out);
    cr_assert_eq(RUN(out, "state", id), 0);
    json_t *st = json_loads(out, 0, NULL);
    const char *why = json_string_value(
        json_object_get(json_object_get(st, "annotations"), "dev.bulkhead.no-new-privileges"));
    cr_expect(why != NULL && strstr(why, "process.noNewPrivileges is false") != NULL, "%s", out);
    json_decref(st);
}

/* `spec` writes the tier --default-tier names, so a suite that makes its
 * configs with `spec` through a wrapper runs at the wrapper's tier. */
Test(oci_compat_cli, spec_follows_default_tier)
{
    const char *tiers[] = {"container", "kernel"};
    for (size_t i = 0; i < 2; i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
        unlink(p);
        struct run_opts o = {.child_stdout = -1, .tier = tiers[i]};
        cr_assert_eq(run_bh(NULL, 0, &o, (const char *const[]){"spec", NULL}), 0, "%s", err_text);
        json_t *doc = json_load_file(p, 0, NULL);
        cr_assert_not_null(doc);
        cr_expect_str_eq(json_string_value(json_object_get(json_object_get(doc, "annotations"),
                                                           "dev.bulkhead.tier")),
                         tiers[i]);
        json_decref(doc);
    }
}

/* events reports an OOM kill in the container as runc does, as it happens,
 * between the statistics. */
Test(oci_compat_config, events_reports_oom)
{
    config("[\"sleep\", \"1000\"]", false, NULL);
    json_t *doc = config_load();
    json_object_set_new(json_object_get(json_object_get(doc, "linux"), "resources"), "memory",
                        json_pack("{s:i,s:i}", "limit", 33554432, "swap", 33554432));
    config_save(doc);
    const char *id = new_id("oom");
    cr_assert_eq(run_quiet((const char *const[]){"run", "-d", id, NULL}), 0, "%s", err_text);
    char logp[512];
    snprintf(logp, sizeof(logp), "%s/events.log", tmp);
    int logfd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(logfd, 0);
    const char *argv[64];
    build_argv(argv, NULL, (const char *const[]){"events", "--interval", "1s", id, NULL});
    pid_t ev = fork();
    cr_assert_geq(ev, 0);
    if (ev == 0) {
        dup2(logfd, 1);
        child_exec(argv, NULL);
    }
    close(logfd);
    cr_assert_eq(
        run_quiet((const char *const[]){"exec", "-d", id, "sh", "-c",
                                        "x=$(dd if=/dev/urandom ibs=5120k 2>/dev/null)", NULL}),
        0, "%s", err_text);
    /* The bound only stops a hang: at load 36 the OOM came after 8-10 s, a
     * 15 s bound failed at times. */
    bool oom = false;
    for (int i = 0; i < 900 && !oom; i++) {
        usleep(100000);
        FILE *f = fopen(logp, "r");
        char line[4096];
        while (f && fgets(line, sizeof(line), f))
            oom = oom || strstr(line, "{\"type\":\"oom\",\"id\":\"") == line;
        if (f)
            fclose(f);
    }
    RUN0("delete", "--force", id);
    cr_expect_eq(wait_exit(ev), 0, "events did not end with the container");
    cr_expect(oom, "no oom event within 90 s");
}

/* A start that fails (a startContainer hook refuses) with the pty relayed
 * ends run with the error instead of leaving the relay spinning. */
Test(oci_compat_tty, failed_start_ends_the_relay)
{
    config("[\"true\"]", true,
           "\"hooks\": {\"startContainer\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\", "
           "\"exit 3\"]}]}");
    const char *id = new_id("ttyhook");
    char out[1024];
    struct run_opts o = {.child_stdout = -1, .tier = "container"};
    int rc = run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "startContainer") != NULL, "%s", err_text);
    cr_expect(state_gone(id), "run left its state");
}

/* ---- a seccomp agent (listenerPath) --------------------------------------- */

/* What the agent does with the listener it receives. */
enum agent_mode {
    AGENT_ANSWER, /* chmod* -> ENOMEDIUM, mkdir* -> let it run */
    AGENT_DROP,   /* close it at once: notified syscalls must fail with ENOSYS */
    AGENT_MKDIR,  /* mkdir* PATH -> the agent makes PATH-bar itself, as runc's example agent */
};

/* A tiny seccomp agent, runc's protocol: one connection bringing the
 * container's state (ContainerProcessState JSON) with the listener as
 * SCM_RIGHTS. It saves the JSON to TMP/agent.json, then answers
 * notifications until the container is gone. A child process, killed at the
 * end of the test. */
static char agent_json[32] = "agent.json";

static pid_t agent_start(const char *sock_path, enum agent_mode mode)
{
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(ls, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
    cr_assert_eq(bind(ls, (struct sockaddr *)&sa, sizeof(sa)), 0, "bind %s", sock_path);
    cr_assert_eq(listen(ls, 4), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid > 0) {
        close(ls);
        return pid;
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    /* One listener per connection (each exec'd process brings its own),
     * each served by a child of its own: agent.json, agent-2.json, ... */
    int c = -1;
    for (int nth = 1;; nth++) {
        c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            _exit(10);
        pid_t h = fork();
        if (h < 0)
            _exit(10);
        if (h == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
            if (nth > 1)
                snprintf(agent_json, sizeof(agent_json), "agent-%d.json", nth);
            break;
        }
        close(c);
    }
    close(ls);
    char buf[8192];
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf) - 1};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
    ssize_t n = recvmsg(c, &mh, MSG_CMSG_CLOEXEC);
    struct cmsghdr *h = CMSG_FIRSTHDR(&mh);
    if (n <= 0 || h == NULL || h->cmsg_type != SCM_RIGHTS)
        _exit(11);
    buf[n] = '\0';
    int fd;
    memcpy(&fd, CMSG_DATA(h), sizeof(int));
    h_write_file(tmp, agent_json, buf);
    if (mode == AGENT_DROP) {
        close(fd);
        pause();
        _exit(0);
    }
    struct seccomp_notif_sizes sz;
    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz) < 0)
        _exit(12);
    struct seccomp_notif *req =
        calloc(1, sz.seccomp_notif > sizeof(*req) ? sz.seccomp_notif : sizeof(*req));
    struct seccomp_notif_resp *resp =
        calloc(1, sz.seccomp_notif_resp > sizeof(*resp) ? sz.seccomp_notif_resp : sizeof(*resp));
    for (;;) {
        memset(req, 0, sz.seccomp_notif);
        if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0) {
            if (errno == EINTR || errno == ENOENT)
                continue;
            _exit(0); /* the container is gone */
        }
        memset(resp, 0, sz.seccomp_notif_resp);
        resp->id = req->id;
        int nr = req->data.nr;
        if (nr == SYS_chmod || nr == SYS_fchmod || nr == SYS_fchmodat) {
            resp->error = -ENOMEDIUM;
        } else if (mode == AGENT_MKDIR && (nr == SYS_mkdir || nr == SYS_mkdirat)) {
            /* As host root, through the process's root (absolute paths only). */
            char path[256] = "", made[600];
            struct iovec local = {path, sizeof(path) - 1};
            struct iovec remote = {(void *)(uintptr_t)req->data.args[nr == SYS_mkdirat ? 1 : 0],
                                   sizeof(path) - 1};
            process_vm_readv((pid_t)req->pid, &local, 1, &remote, 1, 0);
            path[sizeof(path) - 1] = '\0';
            snprintf(made, sizeof(made), "/proc/%u/root%s-bar", req->pid, path);
            if (path[0] != '/' || mkdir(made, 0755) < 0)
                resp->error = -ENOSYS;
        } else {
            /* mkdir: nothing in its arguments to check here, so the kernel may run it */
            resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        }
        ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, resp);
    }
}

static void agent_stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static const char *agent_profile(const char *sock, const char *names)
{
    static char p[1024];
    snprintf(p, sizeof(p),
             "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"listenerPath\": \"%s\", "
             "\"listenerMetadata\": \"meta-42\", \"architectures\": [\"SCMP_ARCH_X86\", "
             "\"SCMP_ARCH_X32\"], \"syscalls\": [{\"names\": [%s], \"action\": "
             "\"SCMP_ACT_NOTIFY\"}]}",
             sock, names);
    return p;
}

/* The agent gets the state and the listener before the process runs, and
 * its answers are what the process sees. */
Test(oci_compat_seccomp, agent_answers_notified_syscalls)
{
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
    pid_t agent = agent_start(sock, AGENT_ANSWER);
    int rc = run_with_profile(
        "container",
        agent_profile(sock, "\"chmod\", \"fchmod\", \"fchmodat\", \"mkdir\", \"mkdirat\""),
        "touch /tmp/f; chmod 600 /tmp/f; echo chmod-$?; mkdir /tmp/d; echo mkdir-$?; test -d "
        "/tmp/d && echo made",
        out, sizeof(out));
    agent_stop(agent);
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "No medium found") && strstr(out, "chmod-1"),
              "chmod was not answered by the agent (ENOMEDIUM): %s", out);
    cr_expect(strstr(out, "mkdir-0") && strstr(out, "made"), "mkdir did not run: %s", out);
    char p[256];
    snprintf(p, sizeof(p), "%s/agent.json", tmp);
    json_t *st = json_load_file(p, 0, NULL);
    cr_assert_not_null(st, "the agent received no state");
    cr_expect_str_eq(json_string_value(json_object_get(st, "metadata")), "meta-42");
    cr_expect_str_eq(json_string_value(json_array_get(json_object_get(st, "fds"), 0)), "seccompFd");
    json_t *s = json_object_get(st, "state");
    cr_expect_str_eq(json_string_value(json_object_get(s, "id")), ids[0]);
    cr_expect_str_eq(json_string_value(json_object_get(s, "status")), "creating");
    cr_expect_gt(json_integer_value(json_object_get(st, "pid")), 0);
    json_decref(st);
}

/* runc's bats `SCMP_ACT_NOTIFY important syscalls`: a profile that notifies
 * the calls every start-up makes (read, close, openat, execve). The guest's
 * own calls between its filters and the agent's listener must not be among
 * them, or the start waits on an agent that has nothing to answer with
 * (sentry/guest.c, the courier: futex only). Fails on a guest that reads or
 * closes there: "create sandbox: no answer in time" after 30 s. */
Test(oci_compat_seccomp, agent_notified_of_read_close_and_execve_starts)
{
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
    pid_t agent = agent_start(sock, AGENT_ANSWER);
    int rc = run_with_profile(
        "container", agent_profile(sock, "\"execve\", \"openat\", \"open\", \"read\", \"close\""),
        "read -r h < /etc/hostname; echo host-$h; /bin/true && echo started", out, sizeof(out));
    agent_stop(agent);
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "started") != NULL, "the process did not run: %s %s", out, err_text);
}

/* An exec'd process has a listener of its own, and the agent gets it (a
 * connection of its own, the state of a running container and the new
 * process's pid) before the process runs, as under runc. */
Test(oci_compat_seccomp, agent_answers_exec_d_processes)
{
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
    pid_t agent = agent_start(sock, AGENT_ANSWER);
    config("[\"sleep\", \"1000\"]", false, NULL);
    char cfg[512];
    snprintf(cfg, sizeof(cfg), "%s/bundle/config.json", tmp);
    json_t *j = json_load_file(cfg, 0, NULL);
    cr_assert_not_null(j);
    json_object_set_new(
        json_object_get(j, "linux"), "seccomp",
        json_loads(agent_profile(sock, "\"chmod\", \"fchmod\", \"fchmodat\""), 0, NULL));
    cr_assert_eq(json_dump_file(j, cfg, 0), 0);
    json_decref(j);
    const char *id = new_id("agx");
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    struct run_opts o = {.child_stdout = null, .tier = "container"};
    int started = run_bh(NULL, 0, &o, (const char *const[]){"run", "-d", id, NULL});
    close(null);
    cr_assert_eq(started, 0, "run -d: %s", err_text);
    int rc = RUN(out, "exec", id, "sh", "-c", "touch /tmp/f; chmod 600 /tmp/f 2>&1; echo chmod-$?");
    agent_stop(agent);
    cr_expect_eq(rc, 0, "%s", err_text);
    cr_expect(strstr(out, "No medium found") && strstr(out, "chmod-1"),
              "the exec'd process's chmod was not answered by the agent: %s", out);
    char p[256];
    snprintf(p, sizeof(p), "%s/agent-2.json", tmp);
    json_t *st = json_load_file(p, 0, NULL);
    cr_assert_not_null(st, "the agent received no second listener");
    json_t *s = json_object_get(st, "state");
    cr_expect_str_eq(json_string_value(json_object_get(s, "id")), id);
    cr_expect_str_eq(json_string_value(json_object_get(s, "status")), "running");
    cr_expect_neq(json_integer_value(json_object_get(st, "pid")),
                  json_integer_value(json_object_get(s, "pid")),
                  "the pid sent is the container's, not the exec'd process's");
    json_decref(st);
}

/* runc's example agent makes the directories itself, as host root, through
 * /proc/PID/root: with an agent the container's tmpfs mounts are made on the
 * host side (in the sandbox's own user namespace host root is unmapped and
 * every file it made failed with EOVERFLOW), and the container's root still
 * writes them. */
Test(oci_compat_seccomp, agent_writes_the_containers_tmpfs)
{
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
    pid_t agent = agent_start(sock, AGENT_MKDIR);
    int rc = run_with_profile("container", agent_profile(sock, "\"mkdir\", \"mkdirat\""),
                              "mkdir /tmp/foo && ls -d /tmp/foo-bar && touch /tmp/mine && "
                              "stat -c %u /tmp/mine && test ! -e /tmp/foo && echo only-the-agents",
                              out, sizeof(out));
    agent_stop(agent);
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "/tmp/foo-bar\n0\n") != NULL,
              "the agent's directory, or the container root's file: %s", out);
    cr_expect(strstr(out, "only-the-agents") != NULL, "mkdir ran in the container: %s", out);
}

/* Nobody else keeps the listener: once the agent lets go of it, notified
 * syscalls fail with ENOSYS instead of waiting forever. */
Test(oci_compat_seccomp, agent_gone_means_enosys)
{
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
    pid_t agent = agent_start(sock, AGENT_DROP);
    int rc = run_with_profile("container", agent_profile(sock, "\"mkdir\", \"mkdirat\""),
                              "mkdir /tmp/d; echo mkdir-$?", out, sizeof(out));
    agent_stop(agent);
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "Function not implemented") && strstr(out, "mkdir-1"), "%s", out);
}

Test(oci_compat_seccomp, agent_not_listening_is_refused)
{
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/nobody.sock", tmp);
    int rc = run_with_profile("container", agent_profile(sock, "\"mkdir\""), "echo ran", out,
                              sizeof(out));
    cr_expect_neq(rc, 0);
    cr_expect(strstr(out, "ran") == NULL, "the container ran without its agent: %s", out);
    cr_expect(strstr(err_text, "failed to connect with seccomp agent") != NULL, "%s", err_text);
}

/* A listenerPath without SCMP_ACT_NOTIFY rules calls no agent (runc); rules
 * without a listenerPath, and rules on write (the process needs it before
 * the agent holds the listener), are refused with the reason. */
Test(oci_compat_seccomp, listener_path_rules)
{
    char out[4096];
    int rc = run_with_profile("container",
                              "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"listenerPath\": "
                              "\"/nonexistent.sock\"}",
                              "echo ran", out, sizeof(out));
    cr_expect_eq(rc, 0, "%s %s", out, err_text);
    cr_expect(strstr(out, "ran") != NULL, "%s", out);
    rc = run_with_profile("container",
                          "{\"defaultAction\": \"SCMP_ACT_ALLOW\", \"syscalls\": [{\"names\": "
                          "[\"mkdir\"], \"action\": \"SCMP_ACT_NOTIFY\"}]}",
                          "echo ran", out, sizeof(out));
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "needs `listenerPath`") != NULL, "%s", err_text);
    rc = run_with_profile("container", agent_profile("/nonexistent.sock", "\"write\""), "echo ran",
                          out, sizeof(out));
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "SCMP_ACT_NOTIFY cannot be used for the write syscall") != NULL,
              "%s", err_text);
}

/* At the kernel tier the process's one listener is the sentry's broker's:
 * an agent is refused before anything runs, and the refusal says why. */
Test(oci_compat_seccomp, agent_refused_at_kernel_tier)
{
    h_require_kernel_tier();
    char sock[256], out[4096];
    snprintf(sock, sizeof(sock), "%s/agent.sock", tmp);
    pid_t agent = agent_start(sock, AGENT_ANSWER);
    int rc =
        run_with_profile("kernel", agent_profile(sock, "\"mkdir\""), "echo ran", out, sizeof(out));
    agent_stop(agent);
    cr_expect_neq(rc, 0);
    cr_expect(strstr(out, "ran") == NULL, "%s", out);
    cr_expect(strstr(err_text, "refused at the kernel tier") != NULL &&
                  strstr(err_text, "broker") != NULL,
              "%s", err_text);
}

/* ---- mounts ------------------------------------------------------------------ */

TestSuite(oci_compat_mounts, .init = setup, .fini = teardown, .timeout = 120);

/* Runs sh -c script in the foreground at tier with more mounts (JSON
 * objects, comma-separated) after /usr, /proc and /tmp. */
static int run_with_mounts(const char *tier, const char *mounts, const char *script, char *out,
                           size_t outlen)
{
    char text[8192];
    snprintf(text, sizeof(text),
             "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true}, "
             "\"process\": {\"args\": [\"sh\", \"-c\", \"exec 2>&1; %s\"], \"cwd\": \"/\", "
             "\"user\": {\"uid\": 0, \"gid\": 0}, \"env\": [\"PATH=/usr/bin:/bin\"]}, \"mounts\": "
             "[{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\", "
             "\"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": "
             "\"proc\", \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", "
             "\"source\": \"tmpfs\"}, %s], \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, "
             "{\"type\": \"mount\"}, {\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": "
             "\"uts\"}]}}",
             script, mounts);
    h_write_file(tmp, "bundle/config.json", text);
    const char *id = new_id("mnt");
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    return run_bh(out, outlen, &o, (const char *const[]){"run", id, NULL});
}

/* runc's rules: an rbind's "ro" makes its top mount read-only and leaves
 * the mounts below as they are; "rro" makes them all read-only. */
static void rbind_ro_and_rro(const char *tier)
{
    char src[256], sub[300], mounts[1024], out[4096];
    snprintf(src, sizeof(src), "%s/src", tmp);
    snprintf(sub, sizeof(sub), "%s/sub", src);
    cr_assert_eq(mkdir(src, 0755), 0);
    cr_assert_eq(mkdir(sub, 0755), 0);
    cr_assert_eq(mount("tmpfs", sub, "tmpfs", 0, "size=1m,mode=0777"), 0, "mount %s: %s", sub,
                 strerror(errno));
    snprintf(host_mount, sizeof(host_mount), "%s", sub);
    snprintf(mounts, sizeof(mounts),
             "{\"destination\": \"/mnt/ro\", \"type\": \"bind\", \"source\": \"%s\", "
             "\"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/mnt/rro\", \"type\": "
             "\"bind\", \"source\": \"%s\", \"options\": [\"rbind\", \"rro\"]}",
             src, src);
    int rc = run_with_mounts(tier, mounts,
                             "touch /mnt/ro/a; echo top-$?; touch /mnt/ro/sub/b; echo sub-$?; "
                             "touch /mnt/rro/sub/c; echo rsub-$?; touch /mnt/rro/d; echo rtop-$?",
                             out, sizeof(out));
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "top-1") != NULL, "the top of an rbind,ro was writable: %s", out);
    cr_expect(strstr(out, "sub-0") != NULL, "ro was applied below the top: %s", out);
    cr_expect(strstr(out, "rsub-1") != NULL && strstr(out, "rtop-1") != NULL,
              "rro left a mount writable: %s", out);
}

Test(oci_compat_mounts, rbind_ro_is_not_recursive_rro_is_container_tier)
{
    rbind_ro_and_rro("container");
}

Test(oci_compat_mounts, rbind_ro_is_not_recursive_rro_is_kernel_tier)
{
    h_require_kernel_tier();
    rbind_ro_and_rro("kernel");
}

/* An rbind carries the mounts below its source, each idmapped where its
 * filesystem allows (a v1 cgroupfs does not): a host tmpfs with a second
 * tmpfs below it, and optionally a host cgroupfs beside that. Returns
 * run_with_mounts's status; out holds what the guest printed. */
static int rbind_with_submounts(const char *tier, bool with_cgroupfs, char *out, size_t outlen)
{
    char src[256], sub[300], cg[300], file[320], mounts[1024], cgdir[4096];
    snprintf(src, sizeof(src), "%s/rsrc", tmp);
    snprintf(sub, sizeof(sub), "%s/sub", src);
    snprintf(cg, sizeof(cg), "%s/cg", src);
    cr_assert_eq(mkdir(src, 0755), 0);
    cr_assert_eq(mount("tmpfs", src, "tmpfs", 0, "size=1m,mode=0755"), 0, "mount %s: %s", src,
                 strerror(errno));
    snprintf(host_mount, sizeof(host_mount), "%s", src);
    cr_assert_eq(mkdir(sub, 0755), 0);
    cr_assert_eq(mount("tmpfs", sub, "tmpfs", 0, "size=1m,mode=0755"), 0, "mount %s: %s", sub,
                 strerror(errno));
    snprintf(file, sizeof(file), "%s/f", sub);
    h_write_file(sub, "f", "lower-file\n");
    cr_assert_eq(chmod(file, 0600), 0);
    if (with_cgroupfs) {
        h_cgroup_dir("pids", ".", cgdir, sizeof(cgdir));
        cr_assert_eq(mkdir(cg, 0755), 0);
        cr_assert_eq(mount(cgdir, cg, NULL, MS_BIND, NULL), 0, "bind %s: %s", cgdir,
                     strerror(errno));
    }
    snprintf(mounts, sizeof(mounts),
             "{\"destination\": \"/mnt/r\", \"type\": \"bind\", \"source\": \"%s\", "
             "\"options\": [\"rbind\"]}",
             src);
    return run_with_mounts(tier, mounts,
                           "cat /mnt/r/sub/f; stat -c owner-%u /mnt/r/sub/f; "
                           "test -e /mnt/r/cg/cgroup.procs && echo cgroupfs-there; true",
                           out, outlen);
}

/* The file of host root in the lower tmpfs reaches the container's root as
 * its own: the submount came along and is idmapped. */
static void rbind_carries_submounts(const char *tier)
{
    char out[4096];
    cr_expect_eq(rbind_with_submounts(tier, false, out, sizeof(out)), 0, "%s %s", out, err_text);
    cr_expect(strstr(out, "lower-file") != NULL && strstr(out, "owner-0") != NULL,
              "the rbind lost its submount, or it is not idmapped: %s", out);
}

Test(oci_compat_mounts, rbind_carries_submounts_container_tier)
{
    rbind_carries_submounts("container");
}

Test(oci_compat_mounts, rbind_carries_submounts_kernel_tier)
{
    h_require_kernel_tier();
    rbind_carries_submounts("kernel");
}

/* A cgroupfs below the source refuses an idmap; the recursive idmap is all
 * or nothing, so the whole tree used to stay unmapped (the tmpfs's file of
 * host root read as the overflow id). Now only the cgroupfs stays as is. */
Test(oci_compat_mounts, rbind_idmaps_the_submounts_that_allow_it_container_tier)
{
    char out[4096];
    int rc = rbind_with_submounts("container", true, out, sizeof(out));
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "lower-file") != NULL && strstr(out, "owner-0") != NULL,
              "the tmpfs below the rbind is missing or unmapped: %s", out);
    cr_expect(strstr(out, "cgroupfs-there") != NULL, "the cgroupfs did not come along: %s", out);
}

/* The kernel tier's one rule holds for what an rbind carries: the host's
 * cgroupfs below the source is refused, named, before anything runs. */
Test(oci_compat_mounts, rbind_of_a_host_cgroupfs_refused_kernel_tier)
{
    h_require_kernel_tier();
    char out[4096];
    int rc = rbind_with_submounts("kernel", true, out, sizeof(out));
    cr_expect_neq(rc, 0, "%s", out);
    cr_expect(strstr(out, "lower-file") == NULL, "the guest ran: %s", out);
    cr_expect(strstr(err_text, "cgroup on `/mnt/r/cg` is not one bulkhead made") != NULL, "%s",
              err_text);
}

/* A /dev asked read-only gets its nodes, devpts and shm first and turns
 * read-only after (runc's order); it was refused making /dev/pts. */
static void ro_dev(const char *tier)
{
    char out[4096];
    int rc = run_with_mounts(
        tier,
        "{\"destination\": \"/dev\", \"type\": \"tmpfs\", \"source\": \"tmpfs\", \"options\": "
        "[\"nosuid\", \"strictatime\", \"mode=755\", \"size=65536k\", \"ro\"]}, {\"destination\": "
        "\"/dev/pts\", \"type\": \"devpts\", \"source\": \"devpts\", \"options\": "
        "[\"newinstance\", \"ptmxmode=0666\", \"mode=0620\"]}",
        "grep '^tmpfs /dev ' /proc/mounts; grep -c '^devpts /dev/pts ' /proc/mounts; touch "
        "/dev/x; echo touch-$?; echo hi > /dev/null && echo null-ok",
        out, sizeof(out));
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "tmpfs /dev tmpfs ro,") != NULL, "/dev is not read-only: %s", out);
    cr_expect(strstr(out, "\n1\n") != NULL, "no devpts on /dev/pts: %s", out);
    cr_expect(strstr(out, "touch-1") && strstr(out, "null-ok"), "%s", out);
}

Test(oci_compat_mounts, ro_dev_container_tier)
{
    ro_dev("container");
}

Test(oci_compat_mounts, ro_dev_kernel_tier)
{
    h_require_kernel_tier();
    ro_dev("kernel");
}

/* ---- namespaces ------------------------------------------------------------- */

/* A namespace left out of the config would be the host's under runc; both
 * tiers give a sandbox its own, and the log says so. */
static void omitted_namespaces_are_own(const char *tier)
{
    char text[4096], out[4096];
    snprintf(text, sizeof(text),
             "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true}, "
             "\"process\": {\"args\": [\"sh\", \"-c\", \"exec 2>&1; grep -c : /proc/net/dev; "
             "hostname\"], \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": "
             "[\"PATH=/usr/bin:/bin\"]}, \"mounts\": [{\"destination\": \"/usr\", \"type\": "
             "\"bind\", \"source\": \"/usr\", \"options\": [\"rbind\", \"ro\"]}, {\"destination\": "
             "\"/proc\", \"type\": \"proc\", \"source\": \"proc\"}], \"linux\": {\"namespaces\": "
             "[{\"type\": \"pid\"}, {\"type\": \"mount\"}]}}");
    h_write_file(tmp, "bundle/config.json", text);
    const char *id = new_id("ns");
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(out, sizeof(out), &o, (const char *const[]){"--debug", "run", id, NULL});
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strncmp(out, "1\n", 2) == 0, "more than lo: the host's network? %s", out);
    char host[256] = "";
    gethostname(host, sizeof(host));
    cr_expect(strstr(out, host) == NULL || strcmp(host, "bulkhead") == 0, "the host's hostname: %s",
              out);
    cr_expect(strstr(err_text, "leaves out network") && strstr(err_text, "leaves out ipc") &&
                  strstr(err_text, "leaves out uts"),
              "%s", err_text);
}

Test(oci_compat_mounts, omitted_namespaces_are_own_container_tier)
{
    omitted_namespaces_are_own("container");
}

Test(oci_compat_mounts, omitted_namespaces_are_own_kernel_tier)
{
    h_require_kernel_tier();
    omitted_namespaces_are_own("kernel");
}

/* ---- process --------------------------------------------------------------- */

/* noNewPrivileges false: at the container tier the process runs without
 * no_new_privs, still under seccomp and with only its own capabilities (the
 * CAP_SYS_ADMIN it installed its filters with is gone); at the kernel tier
 * no_new_privs stays, and the state's annotations say why. */
static void no_new_privileges_false(const char *tier)
{
    char args[512], out[4096];
    snprintf(args, sizeof(args),
             "[\"sh\", \"-c\", \"grep -E 'NoNewPrivs|Seccomp:|CapEff|CapPrm' "
             "/proc/self/status; sleep 30\"]");
    config(args, false, "\"annotations\": {}");
    /* process.noNewPrivileges goes inside process: patch the written config */
    json_t *doc = config_load();
    json_object_set_new(json_object_get(doc, "process"), "noNewPrivileges", json_false());
    config_save(doc);
    const char *id = new_id("nnp");
    char outp[256];
    snprintf(outp, sizeof(outp), "%s/out", tmp);
    int fd = open(outp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    struct run_opts o = {.child_stdout = fd, .tier = tier};
    int rc = run_bh(NULL, 0, &o, (const char *const[]){"run", "-d", id, NULL});
    close(fd);
    cr_assert_eq(rc, 0, "%s", err_text);
    static char state[262144]; /* the tier report makes it long */
    struct run_opts so = {.child_stdout = -1};
    rc = run_bh(state, sizeof(state), &so, (const char *const[]){"state", id, NULL});
    cr_assert_eq(rc, 0, "%s", err_text);
    cr_assert(strstr(state, "\"annotations\"") != NULL, "no state: %s", state);
    for (double end = h_now() + 60; h_now() < end;) { /* a bound on a hang only */
        int in = open(outp, O_RDONLY | O_CLOEXEC);
        ssize_t n = in >= 0 ? read(in, out, sizeof(out) - 1) : -1;
        out[n > 0 ? n : 0] = '\0';
        if (in >= 0)
            close(in);
        if (strstr(out, "CapEff"))
            break;
        usleep(100000);
    }
    bool kernel = strcmp(tier, "kernel") == 0;
    cr_expect(strstr(out, kernel ? "NoNewPrivs:\t1" : "NoNewPrivs:\t0") != NULL, "%s", out);
    cr_expect(strstr(out, "Seccomp:\t2") != NULL, "%s", out);
    /* config()'s process has no capabilities: none effective, none permitted */
    cr_expect(strstr(out, "CapEff:\t0000000000000000") && strstr(out, "CapPrm:\t0000000000000000"),
              "%s", out);
    cr_expect_eq(strstr(state, "dev.bulkhead.no-new-privileges") != NULL, kernel, "%s", state);
    RUN0("kill", id, "KILL");
}

Test(oci_compat_mounts, no_new_privileges_false_container_tier)
{
    no_new_privileges_false("container");
}

Test(oci_compat_mounts, no_new_privileges_false_kernel_tier)
{
    h_require_kernel_tier();
    no_new_privileges_false("kernel");
}

/* ---- hooks ------------------------------------------------------------------- */

/* A startContainer hook runs in the container's namespaces, pid namespace
 * included (its /proc shows it, as under runc), and gets fds 0-2 alone, not
 * what bulkhead's caller left open. */
static void start_hook_namespaces_and_fds(const char *tier)
{
    config("[\"true\"]", false,
           "\"hooks\": {\"startContainer\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", \"-c\", "
           "\"echo fds=$(ls /proc/self/fd | wc -l) pid=$$; exit 3\"]}]}");
    int leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC: bulkhead inherits it */
    cr_assert_geq(leak, 3);
    const char *id = new_id("hookns");
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(NULL, 0, &o, (const char *const[]){"run", id, NULL});
    close(leak);
    cr_expect_neq(rc, 0);
    /* fds 0, 1, 2 and ls's own directory fd */
    cr_expect(strstr(err_text, "fds=4 ") != NULL, "%s", err_text);
    const char *p = strstr(err_text, "pid=");
    cr_assert_not_null(p, "%s", err_text);
    cr_expect_lt(atoi(p + 4), 100, "the hook is not in the container's pid namespace: %s",
                 err_text);
}

Test(oci_compat_mounts, start_hook_namespaces_and_fds_container_tier)
{
    start_hook_namespaces_and_fds("container");
}

Test(oci_compat_mounts, start_hook_namespaces_and_fds_kernel_tier)
{
    h_require_kernel_tier();
    start_hook_namespaces_and_fds("kernel");
}

/* A startContainer hook runs as the container's root (files it makes in
 * the container's tmpfs are the container's; as host root, unmapped there,
 * it failed with EOVERFLOW) and under the container's seccomp profile, as
 * runc runs it in the container's process: a killed syscall kills the hook,
 * and the refusal names the signal as runc does. */
static void start_hook_as_root_under_the_profile(const char *tier)
{
    config("[\"sh\", \"-c\", \"stat -c %u /tmp/hooked\"]", false,
           "\"hooks\": {\"startContainer\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", "
           "\"-c\", \"touch /tmp/hooked\"]}]}");
    const char *id = new_id("hookroot");
    char out[1024];
    struct run_opts o = {.child_stdout = -1, .tier = tier};
    int rc = run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_expect_eq(rc, 0, "%s", err_text);
    cr_expect_str_eq(out, "0\n", "the hook's file: %s", err_text);

    config("[\"true\"]", false,
           "\"hooks\": {\"startContainer\": [{\"path\": \"/bin/sh\", \"args\": [\"sh\", "
           "\"-c\", \"exec mkdir /tmp/d\"]}]}");
    char cfg[512];
    snprintf(cfg, sizeof(cfg), "%s/bundle/config.json", tmp);
    json_t *j = json_load_file(cfg, 0, NULL);
    cr_assert_not_null(j);
    json_object_set_new(json_object_get(j, "linux"), "seccomp",
                        json_pack("{s:s,s:[{s:[s,s],s:s}]}", "defaultAction", "SCMP_ACT_ALLOW",
                                  "syscalls", "names", "mkdir", "mkdirat", "action",
                                  "SCMP_ACT_KILL"));
    cr_assert_eq(json_dump_file(j, cfg, 0), 0);
    json_decref(j);
    id = new_id("hooksc");
    rc = run_bh(out, sizeof(out), &o, (const char *const[]){"run", id, NULL});
    cr_expect_neq(rc, 0);
    cr_expect(strstr(err_text, "error running hook") != NULL &&
                  strstr(err_text, "bad system call") != NULL,
              "%s", err_text);
    cr_expect(state_gone(id), "run left its state");
}

Test(oci_compat_mounts, start_hook_as_root_under_the_profile_container_tier)
{
    start_hook_as_root_under_the_profile("container");
}

Test(oci_compat_mounts, start_hook_as_root_under_the_profile_kernel_tier)
{
    h_require_kernel_tier();
    start_hook_as_root_under_the_profile("kernel");
}

/* Mounts are listed (/proc/self/mountinfo) in the config's order: a bind,
 * prepared by bulkhead before the sandbox's own mounts, sits between the
 * two tmpfs around it, as runtime-tools' "found in order" checks. */
static void mounts_in_config_order(const char *tier)
{
    char out[4096];
    int rc = run_with_mounts(
        tier,
        "{\"destination\": \"/mnt/a\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"}, "
        "{\"destination\": \"/mnt/b\", \"source\": \"/usr\", \"options\": [\"rbind\", \"ro\"]}, "
        "{\"destination\": \"/mnt/c\", \"type\": \"tmpfs\", \"source\": \"tmpfs\"}",
        "cut -d' ' -f5 /proc/self/mountinfo | grep '^/mnt/' | tr '\\\\n' ' '; ls /mnt/b/bin/sh",
        out, sizeof(out));
    cr_expect_eq(rc, 0, "%d %s %s", rc, out, err_text);
    cr_expect(strstr(out, "/mnt/a /mnt/b /mnt/c ") != NULL, "mounts out of order: %s", out);
    cr_expect(strstr(out, "/mnt/b/bin/sh") != NULL, "the bind lost its content: %s", out);
}

Test(oci_compat_mounts, mounts_in_config_order_container_tier)
{
    mounts_in_config_order("container");
}

Test(oci_compat_mounts, mounts_in_config_order_kernel_tier)
{
    h_require_kernel_tier();
    mounts_in_config_order("kernel");
}
