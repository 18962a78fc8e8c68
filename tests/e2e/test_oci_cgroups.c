/* The OCI front end's cgroups, end to end with the real `bulkhead`: the
 * device cgroup follows linux.resources.devices (runc's rules, then its
 * defaults), read back from the kernel's devices.list of a live container
 * at both tiers. The layout a test needs is asked of the core
 * (h_cgroup_dir); a host without it fails the test, it never skips. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <jansson.h>
#include <unistd.h>

#include "cgroup.h"
#include "harness.h"

static char tmp[128];
static char live_id[64];
static char made_rel[8][128]; /* cgroups a test made ("parent", "parent/leaf") */
static int n_made;

static void setup(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/bh-ocicg-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    chmod(tmp, 0711);
    static const char *const dirs[] = {"bundle",
                                       "bundle/rootfs",
                                       "bundle/rootfs/usr",
                                       "bundle/rootfs/proc",
                                       "bundle/rootfs/dev",
                                       "bundle/rootfs/tmp"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", tmp, dirs[i]);
        cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s", p);
    }
    static const char *const links[] = {"bin", "lib", "lib64"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        char p[512], t[64];
        snprintf(p, sizeof(p), "%s/bundle/rootfs/%s", tmp, links[i]);
        snprintf(t, sizeof(t), "usr/%s", links[i]);
        cr_assert_eq(symlink(t, p), 0);
    }
    struct stat st;
    cr_assert(lstat("/bin", &st) == 0 && S_ISLNK(st.st_mode),
              "the host has no merged /usr, which this test's bind rootfs needs");
    live_id[0] = '\0';
}

static struct run_result bh(const char *a1, const char *a2, const char *a3, const char *a4)
{
    char root[256], *path = h_path("bulkhead");
    snprintf(root, sizeof(root), "%s/root", tmp);
    char *argv[] = {path, "--root", root, (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL};
    struct run_result r = h_run(argv, NULL, "/dev/null", 60);
    free(path);
    return r;
}

static void add_hier(const char *dir, void *arg)
{
    char(*hiers)[512] = arg;
    for (int i = 0; i < 24; i++)
        if (hiers[i][0] == '\0') {
            snprintf(hiers[i], 512, "%s", dir);
            return;
        }
}

static void teardown(void)
{
    if (live_id[0]) {
        struct run_result r = bh("delete", "--force", live_id, NULL);
        h_free(&r);
    }
    /* Last made first, in every hierarchy (bulkhead made the others). */
    char hier[24][512] = {{0}};
    bh_cgroup_each_hierarchy(add_hier, hier, NULL);
    for (int i = n_made; i-- > 0;)
        for (int h = 0; h < 24 && hier[h][0]; h++) {
            char dir[700], p[800];
            snprintf(dir, sizeof(dir), "%.511s/%.127s", hier[h], made_rel[i]);
            snprintf(p, sizeof(p), "%s/freezer.state", dir);
            FILE *f = fopen(p, "we");
            if (f != NULL) {
                fputs("THAWED", f);
                fclose(f);
            }
            snprintf(p, sizeof(p), "%s/cgroup.procs", dir);
            f = fopen(p, "re");
            int pid;
            while (f != NULL && fscanf(f, "%d", &pid) == 1)
                kill(pid, SIGKILL);
            if (f != NULL)
                fclose(f);
            for (int k = 0; k < 100 && rmdir(dir) < 0 && errno == EBUSY; k++)
                usleep(20000);
        }
    n_made = 0;
    while (waitpid(-1, NULL, WNOHANG) > 0)
        ;
    if (tmp[0])
        h_remove_tree(tmp);
    tmp[0] = '\0';
}

/* A config that runs `sleep 60` at tier, with linux_extra inside "linux". */
static void write_config(const char *tier, const char *linux_extra)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fprintf(f,
            "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true},"
            " \"hostname\": \"cg\", \"annotations\": {\"dev.bulkhead.tier\": \"%s\"},"
            " \"process\": {\"args\": [\"/bin/sleep\", \"60\"], \"cwd\": \"/\","
            " \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": [\"PATH=/usr/bin:/bin\"]},"
            " \"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\","
            " \"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": \"proc\","
            " \"source\": \"proc\"}],"
            " \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"},"
            " {\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}]%s%s}}",
            tier, linux_extra ? ", " : "", linux_extra ? linux_extra : "");
    fclose(f);
}

/* Creates and starts the container; fails the test with bulkhead's words. */
static const char *start(const char *base)
{
    snprintf(live_id, sizeof(live_id), "%s-%d", base, (int)getpid());
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r = bh("create", "--bundle", bundle, live_id);
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    h_free(&r);
    r = bh("start", live_id, NULL, NULL);
    cr_assert_eq(r.status, 0, "start: %s", r.err);
    h_free(&r);
    return live_id;
}

/* The kernel's devices.list of the container's cgroup (malloc'd). */
static char *devices_list(const char *id)
{
    char rel[128], dir[700];
    snprintf(rel, sizeof(rel), "bulkhead/%s/devices.list", id);
    h_cgroup_dir("devices", rel, dir, sizeof(dir));
    FILE *f = fopen(dir, "re");
    cr_assert_not_null(f, "open %s: %s", dir, strerror(errno));
    /* cgroup files report size 0: read until the end. */
    char *s = calloc(1, 65536);
    cr_assert_not_null(s);
    size_t n = fread(s, 1, 65535, f);
    fclose(f);
    s[n] = '\0';
    return s;
}

static bool has_line(const char *list, const char *line)
{
    size_t l = strlen(line);
    for (const char *p = list; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        if (strncmp(p, line, l) == 0 && (p[l] == '\n' || p[l] == '\0'))
            return true;
    return false;
}

#define DENY_ALL "{\"allow\": false, \"access\": \"rwm\"}"

static void rules_followed(const char *tier)
{
    write_config(tier, "\"resources\": {\"devices\": [" DENY_ALL ", {\"allow\": true, \"type\": "
                       "\"c\", \"major\": 1, \"minor\": 11, \"access\": \"ra\"}]}");
    const char *id = start(strcmp(tier, "kernel") == 0 ? "devk" : "devc");
    char *list = devices_list(id);
    cr_expect(!has_line(list, "a *:* rwm"), "%s: the deny-all rule was not applied:\n%s", tier,
              list);
    /* "ra": the kernel takes r, w and m only (runc's tests write "rwa"). */
    cr_expect(has_line(list, "c 1:11 r"), "%s: the config's allow rule is missing:\n%s", tier,
              list);
    /* runc's defaults follow the config's rules. */
    cr_expect(has_line(list, "c 1:3 rwm"), "%s: /dev/null is not allowed:\n%s", tier, list);
    cr_expect(has_line(list, "c 136:* rwm"), "%s: the ptys are not allowed:\n%s", tier, list);
    cr_expect(has_line(list, "c *:* m") && has_line(list, "b *:* m"), "%s: mknod rules:\n%s", tier,
              list);
    cr_expect(!has_line(list, "b 8:0 r") && !has_line(list, "c 1:1 rwm"),
              "%s: a device no rule allows is allowed:\n%s", tier, list);
    free(list);
    /* update leaves the device rules alone (runc's `device cgroup deny`). */
    struct run_result r = bh("update", "--pids-limit", "42", id);
    cr_expect_eq(r.status, 0, "update: %s", r.err);
    h_free(&r);
    list = devices_list(id);
    cr_expect(!has_line(list, "a *:* rwm") && has_line(list, "c 1:11 r"),
              "%s: update changed the device rules:\n%s", tier, list);
    free(list);
}

TestSuite(oci_cgroups, .init = setup, .fini = teardown, .timeout = 90);

Test(oci_cgroups, device_rules_follow_the_config_container)
{
    rules_followed("container");
}

Test(oci_cgroups, device_rules_follow_the_config_kernel)
{
    rules_followed("kernel");
}

/* Without rules an OCI container still gets runc's device cgroup: default
 * deny, then the devices every container needs (runc's emulator starts
 * from deny; `bulkhead do` and bulkheadd send no rules and change nothing). */
Test(oci_cgroups, no_device_rules_mean_runcs_defaults)
{
    write_config("container", NULL);
    const char *id = start("devnone");
    char *list = devices_list(id);
    cr_expect(!has_line(list, "a *:* rwm"), "all devices allowed without rules:\n%s", list);
    cr_expect(has_line(list, "c 1:3 rwm") && has_line(list, "c 136:* rwm"),
              "runc's defaults missing:\n%s", list);
    free(list);
}

Test(oci_cgroups, malformed_device_rules_are_refused)
{
    static const char *const bad[][2] = {
        {"[{\"access\": \"rwm\"}]", "needs a boolean `allow`"},
        {"[{\"allow\": true, \"type\": \"x\"}]", "must be `a`, `c` or `b`"},
        {"[{\"allow\": true, \"type\": \"c\", \"access\": \"xq\"}]", "letters of `rwm`"},
        {"{}", "must be an array"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char extra[256];
        snprintf(extra, sizeof(extra), "\"resources\": {\"devices\": %s}", bad[i][0]);
        write_config("container", extra);
        char bundle[256], id[64];
        snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
        snprintf(id, sizeof(id), "devbad-%d-%zu", (int)getpid(), i);
        struct run_result r = bh("create", "--bundle", bundle, id);
        cr_expect_neq(r.status, 0, "`%s` was accepted", bad[i][0]);
        cr_expect(strstr(r.err, bad[i][1]) != NULL, "`%s`: %s", bad[i][0], r.err);
        h_free(&r);
    }
}

/* Makes rel ("parent/leaf") in controller's hierarchy, both removed at
 * the end; returns the leaf's path. */
static const char *make_cgroup(const char *controller, const char *rel)
{
    static char leaf[700];
    cr_assert_lt(n_made, 7);
    snprintf(made_rel[n_made], sizeof(made_rel[0]), "%s", rel);
    *strrchr(made_rel[n_made], '/') = '\0';
    char parent[700];
    h_cgroup_dir(controller, made_rel[n_made], parent, sizeof(parent));
    cr_assert_eq(mkdir(parent, 0755), 0, "mkdir %s: %s", parent, strerror(errno));
    n_made++;
    snprintf(made_rel[n_made], sizeof(made_rel[0]), "%s", rel);
    h_cgroup_dir(controller, rel, leaf, sizeof(leaf));
    cr_assert_eq(mkdir(leaf, 0755), 0, "mkdir %s: %s", leaf, strerror(errno));
    n_made++;
    return leaf;
}

static void put(const char *dir, const char *file, const char *value)
{
    char p[800];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    FILE *f = fopen(p, "we");
    cr_assert_not_null(f, "open %s: %s", p, strerror(errno));
    fputs(value, f);
    cr_assert_eq(fclose(f), 0, "write %s", p);
}

/* runc's `should refuse pre-existing frozen cgroup`: exit 1 and why. */
Test(oci_cgroups, pre_existing_frozen_cgroup_is_refused)
{
    char rel[96], extra[160];
    snprintf(rel, sizeof(rel), "bh-e2e-frozen-%d/ct", (int)getpid());
    const char *dir = make_cgroup("freezer", rel);
    put(dir, "freezer.state", "FROZEN");
    snprintf(extra, sizeof(extra), "\"cgroupsPath\": \"/%s\"", rel);
    write_config("container", extra);
    char bundle[256], id[64];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(id, sizeof(id), "frozen-%d", (int)getpid());
    struct run_result r = bh("create", "--bundle", bundle, id);
    cr_expect_eq(r.status, 1, "create into a frozen cgroup: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "container's cgroup unexpectedly frozen") != NULL, "%s", r.err);
    h_free(&r);
    r = bh("state", id, NULL, NULL);
    cr_expect_neq(r.status, 0, "a refused create left its state");
    h_free(&r);
}

/* runc joins an existing cgroupsPath and warns when something runs there. */
Test(oci_cgroups, existing_cgroup_is_joined_with_a_warning_when_not_empty)
{
    char rel[96], extra[160];
    snprintf(rel, sizeof(rel), "bh-e2e-shared-%d/ct", (int)getpid());
    const char *dir = make_cgroup("pids", rel);
    pid_t other = fork();
    cr_assert_geq(other, 0);
    if (other == 0) {
        pause();
        _exit(0);
    }
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)other);
    put(dir, "cgroup.procs", pid);
    snprintf(extra, sizeof(extra), "\"cgroupsPath\": \"/%s\"", rel);
    write_config("container", extra);
    snprintf(live_id, sizeof(live_id), "shared-%d", (int)getpid());
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r = bh("create", "--bundle", bundle, live_id);
    cr_assert_eq(r.status, 0, "create into an existing cgroup: %s", r.err);
    cr_expect(strstr(r.err, "container's cgroup is not empty") != NULL, "no warning: %s", r.err);
    h_free(&r);
    struct run_result st = bh("state", live_id, NULL, NULL);
    cr_assert_eq(st.status, 0, "%s", st.err);
    char *p = strstr(st.out, "\"pid\"");
    cr_assert_not_null(p, "%s", st.out);
    int sentry = atoi(strchr(p, ':') + 1);
    h_free(&st);
    char procs[800], line[64];
    snprintf(procs, sizeof(procs), "/proc/%d/cgroup", sentry);
    FILE *f = fopen(procs, "re");
    cr_assert_not_null(f);
    bool joined = false;
    char want[128];
    snprintf(want, sizeof(want), ":pids:/%s", rel);
    char buf[512];
    while (fgets(buf, sizeof(buf), f) != NULL)
        if (strstr(buf, want) != NULL && (strstr(buf, want)[strlen(want)] == '\n'))
            joined = true;
    fclose(f);
    (void)line;
    cr_expect(joined, "the sentry %d is not in %s", sentry, rel);
    kill(other, SIGKILL);
    waitpid(other, NULL, 0);
}

/* runc's `delete --force ... with subcgroups`: a sub-cgroup made inside the
 * container's (here by the host, as a guest with a writable mount would)
 * is emptied and removed with it. */
Test(oci_cgroups, delete_removes_sub_cgroups)
{
    write_config("container", NULL);
    const char *id = start("subcg");
    char rel[128], sub[700];
    snprintf(rel, sizeof(rel), "bulkhead/%s/foo", id);
    h_cgroup_dir("memory", rel, sub, sizeof(sub));
    cr_assert_eq(mkdir(sub, 0755), 0, "mkdir %s: %s", sub, strerror(errno));
    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        pause();
        _exit(0);
    }
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)child);
    put(sub, "cgroup.procs", pid);
    /* runc's test makes it in memory and freezer, the process in both. */
    char fsub[700];
    h_cgroup_dir("freezer", rel, fsub, sizeof(fsub));
    cr_assert_eq(mkdir(fsub, 0755), 0, "mkdir %s: %s", fsub, strerror(errno));
    put(fsub, "cgroup.procs", pid);
    struct run_result r = bh("delete", "--force", id, NULL);
    cr_expect_eq(r.status, 0, "delete --force: %s", r.err);
    h_free(&r);
    int st = 0;
    cr_expect_eq(waitpid(child, &st, 0), child);
    cr_expect(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the sub-cgroup's process lived on");
    cr_expect_neq(access(sub, F_OK), 0, "%s left behind", sub);
    cr_expect_neq(access(fsub, F_OK), 0, "%s left behind", fsub);
    if (access(sub, F_OK) == 0)
        rmdir(sub);
    if (access(fsub, F_OK) == 0)
        rmdir(fsub);
    live_id[0] = '\0';
}

/* A file of the container's cgroup at rel (malloc'd-free static buffer). */
static char *read_rel(const char *controller, const char *rel, const char *file)
{
    char r[300], p[800];
    snprintf(r, sizeof(r), "%s/%s", rel, file);
    h_cgroup_dir(controller, r, p, sizeof(p));
    FILE *f = fopen(p, "re");
    cr_assert_not_null(f, "open %s: %s", p, strerror(errno));
    static char buf[512];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return buf;
}

/* A file of the cgroup bulkhead made for container id. */
static char *read_cg(const char *controller, const char *id, const char *file)
{
    char rel[200];
    snprintf(rel, sizeof(rel), "bulkhead/%s", id);
    return read_rel(controller, rel, file);
}

/* v1 settings runc applies that bulkhead once accepted and dropped: the
 * memory reservation and cpuset cpus/mems, at create and through update. */
Test(oci_cgroups, memory_reservation_and_cpuset_are_applied)
{
    cr_assert_neq(bh_cgroup_detect(), BH_CGROUP_V2,
                  "this test reads v1 files; on a v2-only host memory.low and the v2 cpuset "
                  "refusal need their own test");
    write_config("container", "\"resources\": {\"memory\": {\"limit\": 67108864, "
                              "\"reservation\": 25165824}, \"cpu\": {\"cpus\": \"0\", "
                              "\"mems\": \"0\"}}");
    const char *id = start("v1set");
    cr_expect_str_eq(read_cg("memory", id, "memory.soft_limit_in_bytes"), "25165824");
    cr_expect_str_eq(read_cg("cpuset", id, "cpuset.cpus"), "0");
    cr_expect_str_eq(read_cg("cpuset", id, "cpuset.mems"), "0");
    struct run_result r = bh("update", "--memory-reservation", "16m", id);
    cr_expect_eq(r.status, 0, "update --memory-reservation: %s", r.err);
    h_free(&r);
    cr_expect_str_eq(read_cg("memory", id, "memory.soft_limit_in_bytes"), "16777216");
    r = bh("update", "--cpuset-cpus", "0", id);
    cr_expect_eq(r.status, 0, "update --cpuset-cpus: %s", r.err);
    h_free(&r);
    /* runc's tests put the flags after the id. */
    r = bh("update", id, "--memory-reservation", "20m");
    cr_expect_eq(r.status, 0, "update ID --memory-reservation: %s", r.err);
    h_free(&r);
    cr_expect_str_eq(read_cg("memory", id, "memory.soft_limit_in_bytes"), "20971520");
    r = bh("update", id, "--memory-swap", "-1");
    cr_expect_eq(r.status, 0, "update --memory-swap -1: %s", r.err);
    h_free(&r);
    cr_expect_eq(strtoull(read_cg("memory", id, "memory.memsw.limit_in_bytes"), NULL, 10),
                 9223372036854771712ULL, "--memory-swap -1 did not lift the swap limit");
    r = bh("update", id, "--cpu-period", "900000");
    cr_expect_eq(r.status, 0, "update --cpu-period: %s", r.err);
    h_free(&r);
    r = bh("update", id, "--cpu-quota", "600000");
    cr_expect_eq(r.status, 0, "update --cpu-quota: %s", r.err);
    h_free(&r);
    cr_expect_str_eq(read_cg("cpu", id, "cpu.cfs_quota_us"), "600000");
    cr_expect_str_eq(read_cg("cpu", id, "cpu.cfs_period_us"), "900000",
                     "a quota alone changed the period");
    r = bh("update", id, "stray", NULL);
    cr_expect_neq(r.status, 0, "a stray argument after the id was accepted");
    h_free(&r);
    r = bh("update", "--cpuset-cpus", "0;reboot", id);
    cr_expect_neq(r.status, 0, "a malformed cpu list was accepted");
    cr_expect(strstr(r.err, "--cpuset-cpus") != NULL, "%s", r.err);
    h_free(&r);
}

/* ---- runc's update.bats and cgroups.bats settings ---------------------- */

static void need_v1_files(void)
{
    cr_assert_neq(bh_cgroup_detect(), BH_CGROUP_V2,
                  "this test reads cgroup v1 files (blkio, memsw, cpu.rt_*); a v2-only host "
                  "is covered by the unit tests' fake v2 tree");
}

/* Registers rel for teardown (last registered is removed first) and makes it
 * in every hierarchy, as runc's tests make a parent cgroup. */
static void make_in_every_hierarchy(const char *rel, bool mk)
{
    cr_assert_lt(n_made, 8);
    snprintf(made_rel[n_made++], sizeof(made_rel[0]), "%s", rel);
    if (!mk)
        return;
    char hier[24][512] = {{0}};
    cr_assert_eq(bh_cgroup_each_hierarchy(add_hier, hier, NULL), 0);
    for (int h = 0; h < 24 && hier[h][0]; h++) {
        char p[700];
        snprintf(p, sizeof(p), "%.511s/%.127s", hier[h], rel);
        cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
    }
}

/* How many hierarchies hold rel. */
static int hierarchies_with(const char *rel)
{
    char hier[24][512] = {{0}};
    cr_assert_eq(bh_cgroup_each_hierarchy(add_hier, hier, NULL), 0);
    int n = 0;
    for (int h = 0; h < 24 && hier[h][0]; h++) {
        char p[700];
        snprintf(p, sizeof(p), "%.511s/%.127s", hier[h], rel);
        n += access(p, F_OK) == 0;
    }
    return n;
}

static void update_ok(const char *id, const char *flag, const char *value)
{
    struct run_result r = bh("update", id, flag, value);
    cr_expect_eq(r.status, 0, "update %s %s: exit %d: %s", flag, value, r.status, r.err);
    h_free(&r);
}

/* runc's `update cgroup v1/v2 common limits`, read back as its test reads
 * them: memory, reservation, swap alone, lifting, pids, cpu, -r FILE. */
static void update_like_runc(const char *tier)
{
    need_v1_files();
    write_config(tier, "\"resources\": {\"memory\": {\"limit\": 33554432, \"reservation\": "
                       "25165824}, \"cpu\": {\"shares\": 100, \"quota\": 500000, \"period\": "
                       "1000000}, \"pids\": {\"limit\": 20}}");
    const char *id = start("upd");
    char rel[128];
    snprintf(rel, sizeof(rel), "bulkhead/%s", id);
    cr_expect_str_eq(read_rel("memory", rel, "memory.limit_in_bytes"), "33554432");
    cr_expect_str_eq(read_rel("memory", rel, "memory.soft_limit_in_bytes"), "25165824");
    cr_expect_str_eq(read_rel("pids", rel, "pids.max"), "20");
    update_ok(id, "--memory", "67108864");
    cr_expect_str_eq(read_rel("memory", rel, "memory.limit_in_bytes"), "67108864");
    update_ok(id, "--memory", "50M");
    cr_expect_str_eq(read_rel("memory", rel, "memory.limit_in_bytes"), "52428800");
    update_ok(id, "--memory-reservation", "33554432");
    cr_expect_str_eq(read_rel("memory", rel, "memory.soft_limit_in_bytes"), "33554432");
    char sysmem[64];
    snprintf(sysmem, sizeof(sysmem), "%s", read_rel("memory", ".", "memory.limit_in_bytes"));
    update_ok(id, "--memory-swap", "-1");
    cr_expect_str_eq(read_rel("memory", rel, "memory.memsw.limit_in_bytes"), sysmem);
    /* The total alone: the memory limit stays. */
    update_ok(id, "--memory-swap", "96468992");
    cr_expect_str_eq(read_rel("memory", rel, "memory.memsw.limit_in_bytes"), "96468992");
    cr_expect_str_eq(read_rel("memory", rel, "memory.limit_in_bytes"), "52428800");
    update_ok(id, "--memory", "-1");
    cr_expect_str_eq(read_rel("memory", rel, "memory.limit_in_bytes"), sysmem);
    cr_expect_str_eq(read_rel("memory", rel, "memory.memsw.limit_in_bytes"), sysmem);
    update_ok(id, "--pids-limit", "30");
    cr_expect_str_eq(read_rel("pids", rel, "pids.max"), "30");
    struct run_result r = bh("update", id, "--kernel-memory", "50M");
    cr_expect_eq(r.status, 0, "runc ignores kernel memory with a warning: %s", r.err);
    cr_expect(strstr(r.err, "kernel memory") != NULL, "no warning: %s", r.err);
    h_free(&r);
    char json[300];
    snprintf(json, sizeof(json), "%s/res.json", tmp);
    FILE *f = fopen(json, "we");
    cr_assert_not_null(f);
    fputs("{\"cpu\": {\"shares\": 200, \"quota\": 400000, \"period\": 800000}, "
          "\"memory\": {\"limit\": 41943040}, \"pids\": {\"limit\": 25}}",
          f);
    fclose(f);
    r = bh("update", "-r", json, id);
    cr_expect_eq(r.status, 0, "update -r: %s", r.err);
    h_free(&r);
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.shares"), "200");
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.cfs_quota_us"), "400000");
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.cfs_period_us"), "800000");
    cr_expect_str_eq(read_rel("memory", rel, "memory.limit_in_bytes"), "41943040");
    cr_expect_str_eq(read_rel("pids", rel, "pids.max"), "25");
    /* A quota alone keeps the period the cgroup has; --cpu-quota -1 lifts it. */
    f = fopen(json, "we");
    cr_assert_not_null(f);
    fputs("{\"cpu\": {\"quota\": 300000}}", f);
    fclose(f);
    r = bh("update", "-r", json, id);
    cr_expect_eq(r.status, 0, "update -r quota: %s", r.err);
    h_free(&r);
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.cfs_quota_us"), "300000");
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.cfs_period_us"), "800000");
    update_ok(id, "--cpu-quota", "-1");
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.cfs_quota_us"), "-1");
    cr_expect_str_eq(read_rel("cpu", rel, "cpu.cfs_period_us"), "800000");
    /* The kernel refuses the value (period below 1000 us): runc's status 1. */
    r = bh("update", id, "--cpu-period", "100");
    cr_expect_eq(r.status, 1, "a refused period: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "cpu period") != NULL, "%s", r.err);
    h_free(&r);
}

Test(oci_cgroups, update_takes_every_runc_setting_container)
{
    update_like_runc("container");
}

Test(oci_cgroups, update_takes_every_runc_setting_kernel)
{
    h_require_kernel_tier();
    update_like_runc("kernel");
}

/* runc's `set cpu period with no quota (invalid period)`: the kernel refuses
 * the value, create exits 1 (not 125) and leaves no cgroup in any hierarchy
 * below a parent it did not make, which stays. */
Test(oci_cgroups, refused_cpu_period_exits_1_and_leaves_no_cgroup)
{
    char parent[96], leaf[128], extra[200];
    snprintf(parent, sizeof(parent), "bh-e2e-period-%d", (int)getpid());
    snprintf(leaf, sizeof(leaf), "%s/ct", parent);
    make_in_every_hierarchy(parent, true);
    make_in_every_hierarchy(leaf, false); /* teardown's, should bulkhead leave it */
    int hiers = hierarchies_with(parent);
    cr_assert_gt(hiers, 0);
    snprintf(extra, sizeof(extra),
             "\"cgroupsPath\": \"/%s\", \"resources\": {\"cpu\": {\"period\": 100}}", leaf);
    write_config("container", extra);
    char bundle[256], id[64];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(id, sizeof(id), "period-%d", (int)getpid());
    struct run_result r = bh("create", "--bundle", bundle, id);
    cr_expect_eq(r.status, 1, "create with cpu period 100: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "cpu period 100") != NULL, "%s", r.err);
    h_free(&r);
    cr_expect_eq(hierarchies_with(leaf), 0, "the refused container's cgroup was left behind");
    cr_expect_eq(hierarchies_with(parent), hiers, "a parent bulkhead did not make was removed");
    r = bh("state", id, NULL, NULL);
    cr_expect_neq(r.status, 0, "a failed create left its state");
    h_free(&r);
}

/* runc's `update rt period and runtime`: the parents get a realtime budget
 * (as the test writes them), the container's follows config, -r and flags;
 * delete then removes its cgroup in every hierarchy, the one the test made
 * in cpu included, and leaves the parent. */
Test(oci_cgroups, rt_budget_follows_update_and_delete_leaves_only_the_parent)
{
    need_v1_files();
    char parent[96], leaf[128], extra[200];
    snprintf(parent, sizeof(parent), "bh-e2e-rt-%d", (int)getpid());
    snprintf(leaf, sizeof(leaf), "%s/ct", parent);
    const char *cpu_leaf = make_cgroup("cpu", leaf);
    char cpu_parent[700];
    h_cgroup_dir("cpu", parent, cpu_parent, sizeof(cpu_parent));
    /* A tenth of the host's budget, not all of it as runc's test takes:
     * sibling cgroups (another run's) may hold some. */
    put(cpu_parent, "cpu.rt_period_us", "1000000");
    char rtp[800];
    snprintf(rtp, sizeof(rtp), "%s/cpu.rt_runtime_us", cpu_parent);
    FILE *bf = fopen(rtp, "we");
    cr_assert_not_null(bf, "open %s: %s", rtp, strerror(errno));
    fputs("100000", bf);
    cr_assert_eq(fclose(bf), 0,
                 "no realtime budget left for %s: other cgroups below the cpu root hold the "
                 "host's cpu.rt_runtime_us (a run that left one behind?)",
                 cpu_parent);
    put(cpu_leaf, "cpu.rt_period_us", "1000000");
    put(cpu_leaf, "cpu.rt_runtime_us", "100000");
    snprintf(extra, sizeof(extra), "\"cgroupsPath\": \"/%s\"", leaf);
    write_config("container", extra);
    const char *id = start("rt");
    char json[300];
    snprintf(json, sizeof(json), "%s/rt.json", tmp);
    FILE *f = fopen(json, "we");
    cr_assert_not_null(f);
    fputs("{\"cpu\": {\"realtimePeriod\": 800001, \"realtimeRuntime\": 50001}}", f);
    fclose(f);
    struct run_result r = bh("update", "-r", json, id);
    cr_expect_eq(r.status, 0, "update -r realtime: %s", r.err);
    h_free(&r);
    cr_expect_str_eq(read_rel("cpu", leaf, "cpu.rt_period_us"), "800001");
    cr_expect_str_eq(read_rel("cpu", leaf, "cpu.rt_runtime_us"), "50001");
    update_ok(id, "--cpu-rt-period", "900001");
    update_ok(id, "--cpu-rt-runtime", "60001");
    cr_expect_str_eq(read_rel("cpu", leaf, "cpu.rt_period_us"), "900001");
    cr_expect_str_eq(read_rel("cpu", leaf, "cpu.rt_runtime_us"), "60001");
    int hiers = hierarchies_with(leaf);
    cr_expect_gt(hiers, 1, "the container's cgroup is in one hierarchy only");
    r = bh("delete", "--force", id, NULL);
    cr_expect_eq(r.status, 0, "delete --force: %s", r.err);
    h_free(&r);
    live_id[0] = '\0';
    cr_expect_eq(hierarchies_with(leaf), 0, "delete left the container's cgroup behind");
    cr_expect_eq(access(cpu_parent, F_OK), 0, "delete removed a parent it did not make");
}

/* runc's `per-device io weight for bfq`: blockIO weight and weightDevice of
 * a loop device whose scheduler is BFQ, read back from the kernel. */
Test(oci_cgroups, blkio_weight_and_per_device_weight)
{
    need_v1_files();
    char img[300], cmd[600];
    snprintf(img, sizeof(img), "%s/backing.img", tmp);
    FILE *f = fopen(img, "we");
    cr_assert_not_null(f);
    cr_assert_eq(ftruncate(fileno(f), 4096), 0);
    fclose(f);
    snprintf(cmd, sizeof(cmd), "losetup --find --show %s", img);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char dev[64] = "";
    cr_assert_not_null(fgets(dev, sizeof(dev), p), "losetup found no free loop device");
    pclose(p);
    dev[strcspn(dev, "\n")] = '\0';
    cr_assert(strncmp(dev, "/dev/loop", 9) == 0, "losetup: `%s`", dev);
    struct stat st;
    cr_assert_eq(stat(dev, &st), 0);
    char sched[128];
    snprintf(sched, sizeof(sched), "/sys/block/%s/queue/scheduler", dev + 5);
    FILE *s = fopen(sched, "we");
    bool bfq = s != NULL && fputs("bfq", s) >= 0;
    if (s != NULL)
        bfq = fclose(s) == 0 && bfq;
    char extra[400];
    snprintf(extra, sizeof(extra),
             "\"resources\": {\"blockIO\": {\"weight\": 333, \"weightDevice\": [{\"major\": %u, "
             "\"minor\": %u, \"weight\": 444}]}}",
             major(st.st_rdev), minor(st.st_rdev));
    write_config("container", extra);
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(live_id, sizeof(live_id), "bfq-%d", (int)getpid());
    struct run_result r = bfq ? bh("create", "--bundle", bundle, live_id) : (struct run_result){0};
    snprintf(cmd, sizeof(cmd), "losetup -d %s", dev);
    if (system(cmd) != 0)
        fprintf(stderr, "losetup -d %s failed\n", dev);
    cr_assert(bfq, "the BFQ scheduler is not available for %s (modprobe bfq)", dev);
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    h_free(&r);
    char rel[128], want[64];
    snprintf(rel, sizeof(rel), "bulkhead/%s", live_id);
    const char *w = read_rel("blkio", rel, "blkio.bfq.weight_device");
    cr_expect(strstr(w, "default 333") != NULL, "%s", w);
    snprintf(want, sizeof(want), "%u:%u 444", major(st.st_rdev), minor(st.st_rdev));
    cr_expect(strstr(w, want) != NULL, "no `%s` in %s", want, w);
    update_ok(live_id, "--blkio-weight", "500");
    cr_expect_str_eq(read_rel("blkio", rel, "blkio.bfq.weight"), "500");
    r = bh("update", live_id, "--blkio-weight", "5");
    cr_expect_neq(r.status, 0, "a weight below 10 was accepted");
    h_free(&r);
}

/* `events --stats` once and the stream, with runc's fields: cpu (usage,
 * throttling), memory (usage, limit, swap), pids, and blkio, whose counters
 * move when the container reads its disk past the page cache. */
/* The whole disk under the filesystem holding path ("MAJ:MIN"): throttle
 * rules and their statistics name disks, not partitions. */
static void disk_of(const char *path, unsigned *maj, unsigned *min)
{
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    *maj = major(st.st_dev);
    *min = minor(st.st_dev);
    char sys[128], part[160], parent[200];
    snprintf(sys, sizeof(sys), "/sys/dev/block/%u:%u", *maj, *min);
    snprintf(part, sizeof(part), "%s/partition", sys);
    if (access(part, F_OK) != 0)
        return;
    snprintf(parent, sizeof(parent), "%s/../dev", sys);
    FILE *f = fopen(parent, "re");
    cr_assert_not_null(f, "no disk above partition %u:%u", *maj, *min);
    cr_assert_eq(fscanf(f, "%u:%u", maj, min), 2);
    fclose(f);
}

Test(oci_cgroups, events_report_cpu_memory_pids_and_blkio)
{
    char img[300];
    snprintf(img, sizeof(img), "%s/bundle/rootfs/data.img", tmp);
    FILE *f = fopen(img, "we");
    cr_assert_not_null(f);
    static char block[65536];
    memset(block, 'x', sizeof(block));
    for (int i = 0; i < 16; i++)
        cr_assert_eq(fwrite(block, 1, sizeof(block), f), sizeof(block));
    cr_assert_eq(fclose(f), 0);
    /* v1's blkio counts I/O only where a throttle rule is (the kernel's
     * blk-throttle keeps the counters): a generous one on the disk. */
    unsigned maj, min;
    disk_of(img, &maj, &min);
    char extra[400];
    snprintf(extra, sizeof(extra),
             "\"resources\": {\"memory\": {\"limit\": 67108864}, \"pids\": {\"limit\": 50}, "
             "\"blockIO\": {\"throttleReadBpsDevice\": [{\"major\": %u, \"minor\": %u, "
             "\"rate\": 1073741824}]}}",
             maj, min);
    write_config("container", extra);
    const char *id = start("events");
    char rel[128], rule[64];
    snprintf(rel, sizeof(rel), "bulkhead/%s", id);
    snprintf(rule, sizeof(rule), "%u:%u 1073741824", maj, min);
    cr_expect(strstr(read_rel("blkio", rel, "blkio.throttle.read_bps_device"), rule) != NULL,
              "throttle rule `%s` not applied", rule);
    char root[256], *path = h_path("bulkhead");
    snprintf(root, sizeof(root), "%s/root", tmp);
    char *dd[] = {path,           "--root",       root,       "exec",         (char *)id, "dd",
                  "if=/data.img", "of=/dev/null", "bs=65536", "iflag=direct", NULL};
    struct run_result r = h_run(dd, NULL, "/dev/null", 60);
    cr_assert_eq(r.status, 0, "dd in the container: %s", r.err);
    h_free(&r);
    /* v1's user and kernel times count in 10 ms ticks: a quiet, fast
     * machine ran the dd in less than one (CI saw 0). Work in the container
     * until the stats show some, bounded only against a hang. */
    char *burn[] = {path,       "--root", root, "exec",
                    (char *)id, "sh",     "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
                    NULL};
    json_t *ev = NULL;
    for (int round = 0; round < 50; round++) {
        json_decref(ev);
        r = bh("events", "--stats", id, NULL);
        cr_assert_eq(r.status, 0, "events --stats: %s", r.err);
        json_error_t jerr;
        ev = json_loads(r.out, 0, &jerr);
        cr_assert_not_null(ev, "events --stats is not one JSON line: %s", r.out);
        h_free(&r);
        json_t *u = json_object_get(json_object_get(json_object_get(ev, "data"), "cpu"), "usage");
        if (json_integer_value(json_object_get(u, "user")) +
                json_integer_value(json_object_get(u, "kernel")) >
            0)
            break;
        r = h_run(burn, NULL, "/dev/null", 60);
        cr_assert_eq(r.status, 0, "a CPU loop in the container: %s", r.err);
        h_free(&r);
    }
    cr_expect_str_eq(json_string_value(json_object_get(ev, "type")), "stats");
    cr_expect_str_eq(json_string_value(json_object_get(ev, "id")), id);
    json_t *data = json_object_get(ev, "data");
    json_t *cpu = json_object_get(json_object_get(data, "cpu"), "usage");
    cr_expect_gt(json_integer_value(json_object_get(cpu, "total")), 0);
    cr_expect_gt(json_integer_value(json_object_get(cpu, "user")) +
                     json_integer_value(json_object_get(cpu, "kernel")),
                 0, "no user or kernel time");
    cr_expect_not_null(json_object_get(json_object_get(data, "cpu"), "throttling"));
    json_t *mem = json_object_get(data, "memory");
    cr_expect_eq(json_integer_value(json_object_get(json_object_get(mem, "usage"), "limit")),
                 67108864);
    cr_expect_gt(json_integer_value(json_object_get(json_object_get(mem, "usage"), "usage")), 0);
    cr_expect_not_null(json_object_get(mem, "swap"));
    json_t *pids = json_object_get(data, "pids");
    cr_expect_eq(json_integer_value(json_object_get(pids, "limit")), 50);
    cr_expect_gt(json_integer_value(json_object_get(pids, "current")), 0);
    json_t *bytes = json_object_get(json_object_get(data, "blkio"), "ioServiceBytesRecursive");
    cr_assert(json_is_array(bytes), "no blkio.ioServiceBytesRecursive");
    json_int_t read = 0;
    size_t i;
    json_t *e;
    json_array_foreach(bytes, i,
                       e) if (strcmp(json_string_value(json_object_get(e, "op")), "Read") == 0)
        read += json_integer_value(json_object_get(e, "value"));
    cr_expect_geq(read, 16 * 65536, "the container read 1 MiB past the cache, blkio says %lld",
                  (long long)read);
    json_decref(ev);

    /* The stream: a stats line every interval until the container goes. */
    char *argv[] = {path, "--root", root, "events", "--interval", "100ms", (char *)id, NULL};
    char logp[300];
    snprintf(logp, sizeof(logp), "%s/events.log", tmp);
    int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    pid_t ev_pid = fork();
    cr_assert_geq(ev_pid, 0);
    if (ev_pid == 0) {
        dup2(fd, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd);
    int lines = 0;
    for (int k = 0; k < 200 && lines < 3; k++) {
        usleep(50000);
        FILE *lf = fopen(logp, "re");
        char line[8192];
        lines = 0;
        while (lf != NULL && fgets(line, sizeof(line), lf) != NULL)
            lines += strstr(line, "{\"type\":\"stats\"") == line;
        if (lf != NULL)
            fclose(lf);
    }
    cr_expect_geq(lines, 3, "the stream gave %d stats lines in 10 s", lines);
    r = bh("delete", "--force", id, NULL);
    h_free(&r);
    live_id[0] = '\0';
    int st = 0;
    bool ended = false;
    for (int k = 0; k < 100 && !ended; k++) {
        ended = waitpid(ev_pid, &st, WNOHANG) == ev_pid;
        if (!ended)
            usleep(50000);
    }
    if (!ended) {
        kill(ev_pid, SIGKILL);
        waitpid(ev_pid, NULL, 0);
    }
    cr_expect(ended && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "events did not end with status 0 when the container was deleted");
    free(path);
}

/* A malformed blockIO is refused before anything is made, naming the field. */
Test(oci_cgroups, malformed_blockio_is_refused)
{
    static const struct {
        const char *res, *field;
    } cases[] = {
        {"{\"blockIO\": {\"weight\": 5000}}", "blockIO.weight"},
        {"{\"blockIO\": {\"weightDevice\": [{\"minor\": 0, \"weight\": 10}]}}",
         "blockIO.weightDevice[0]"},
        {"{\"blockIO\": {\"throttleReadBpsDevice\": [{\"major\": 8, \"minor\": 0}]}}",
         "throttleReadBpsDevice[0]"},
        {"{\"blockIO\": []}", "blockIO"},
        {"{\"cpu\": {\"realtimePeriod\": -5}}", "cpu.realtimePeriod"},
    };
    char bundle[256], id[64];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(id, sizeof(id), "badio-%d", (int)getpid());
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char extra[300];
        snprintf(extra, sizeof(extra), "\"resources\": %s", cases[i].res);
        write_config("container", extra);
        struct run_result r = bh("create", "--bundle", bundle, id);
        cr_expect_eq(r.status, 125, "%s: exit %d: %s", cases[i].res, r.status, r.err);
        cr_expect(strstr(r.err, cases[i].field) != NULL, "%s: %s", cases[i].res, r.err);
        h_free(&r);
        char rel[128];
        snprintf(rel, sizeof(rel), "bulkhead/%s", id);
        cr_expect_eq(hierarchies_with(rel), 0, "%s: a cgroup was made", cases[i].res);
    }
}

/* runc's `delete --force in cgroupv1 with subcgroups` adds a cgroup
 * namespace to the config `spec` wrote: as runc's, the spec lists one only
 * on a v2 host, so the added entry is the only one (a namespace given twice
 * is refused, by runc too). */
Test(oci_cgroups, spec_lists_the_cgroup_namespace_on_v2_only)
{
    char bundle[256];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r = bh("spec", "--bundle", bundle, NULL);
    cr_assert_eq(r.status, 0, "spec: %s", r.err);
    h_free(&r);
    char p[300];
    snprintf(p, sizeof(p), "%s/config.json", bundle);
    json_t *doc = json_load_file(p, 0, NULL);
    cr_assert_not_null(doc);
    json_t *nss = json_object_get(json_object_get(doc, "linux"), "namespaces");
    int cgroup_ns = 0;
    size_t i;
    json_t *n;
    json_array_foreach(nss, i, n) cgroup_ns +=
        strcmp(json_string_value(json_object_get(n, "type")), "cgroup") == 0;
    json_decref(doc);
    cr_expect_eq(cgroup_ns, bh_cgroup_detect() == BH_CGROUP_V2 ? 1 : 0,
                 "spec lists %d cgroup namespaces on a %s host", cgroup_ns,
                 bh_cgroup_layout_name(bh_cgroup_detect()));
    /* Twice is refused with the reason, before anything is made. */
    write_config("container", NULL);
    doc = json_load_file(p, 0, NULL);
    cr_assert_not_null(doc);
    nss = json_object_get(json_object_get(doc, "linux"), "namespaces");
    json_array_append_new(nss, json_pack("{s:s}", "type", "cgroup"));
    json_array_append_new(nss, json_pack("{s:s}", "type", "cgroup"));
    cr_assert_eq(json_dump_file(doc, p, 0), 0);
    json_decref(doc);
    char id[64];
    snprintf(id, sizeof(id), "twice-%d", (int)getpid());
    r = bh("create", "--bundle", bundle, id);
    cr_expect_eq(r.status, 125, "a namespace twice: exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "namespace `cgroup` is given twice") != NULL, "%s", r.err);
    h_free(&r);
}

/* Creates container base-PID from tmp/bundle through h_bulkhead_in (a fresh
 * log) and returns what the create logged (malloc'd, "" for nothing). */
static char *create_logged(const char *base)
{
    char p[300], bundle[256];
    snprintf(p, sizeof(p), "%s/log.json", tmp);
    unlink(p);
    snprintf(live_id, sizeof(live_id), "%s-%d", base, (int)getpid());
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    h_bulkhead_in(tmp, (const char *const[]){"create", "--bundle", bundle, live_id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "create: %s", r.err);
    h_free(&r);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0 || errno == ENOENT, "open %s: %s", p, strerror(errno));
    char *log = fd >= 0 ? h_read_fd(fd) : strdup("");
    if (fd >= 0)
        close(fd);
    return log;
}

/* Starts the container create_logged made, then runs `sh -c script` in it. */
static struct run_result start_and_exec(const char *script)
{
    struct run_result r;
    h_bulkhead_in(tmp, (const char *const[]){"start", live_id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "start: %s", r.err);
    h_free(&r);
    h_bulkhead_in(tmp, (const char *const[]){"exec", live_id, "/bin/sh", "-c", script, NULL}, 60,
                  &r);
    return r;
}

/* runc's bats `delete --force in cgroupv1 with subcgroups` and `exec
 * --cgroup sub-cgroups [v1]` make sub-cgroups from inside the container,
 * through a cgroup mount the config asks read-write. bulkhead keeps that
 * mount read-only (nothing would bound the cgroups a guest made: invariant
 * 5), and says so in the log, naming the mount and the reason. runc's 46
 * also lists a cgroup namespace: with one, every hierarchy the mount shows
 * refuses the mkdir, and none appears in the host's tree. */
Test(oci_cgroups, cgroup_mount_asked_read_write_stays_read_only_and_says_why)
{
    write_config("container", NULL);
    char p[300];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    json_t *doc = json_load_file(p, 0, NULL);
    cr_assert_not_null(doc);
    json_array_append_new(json_object_get(json_object_get(doc, "linux"), "namespaces"),
                          json_pack("{s:s}", "type", "cgroup"));
    json_array_append_new(json_object_get(doc, "mounts"),
                          json_pack("{s:s,s:s,s:s,s:[s,s,s,s]}", "destination", "/sys/fs/cgroup",
                                    "type", "cgroup", "source", "cgroup", "options", "nosuid",
                                    "noexec", "nodev", "relatime"));
    cr_assert_eq(json_dump_file(doc, p, 0), 0);
    json_decref(doc);
    static const char *const points[] = {"sys", "sys/fs", "sys/fs/cgroup"};
    for (size_t i = 0; i < sizeof(points) / sizeof(points[0]); i++) {
        snprintf(p, sizeof(p), "%s/bundle/rootfs/%s", tmp, points[i]);
        cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
    }
    char *log = create_logged("rwcg");
    cr_expect(strstr(log, "level=warning") != NULL &&
                  strstr(log, "the cgroup mount on `/sys/fs/cgroup` is made read-only although "
                              "the config asks read-write") != NULL &&
                  strstr(log, "memcg ids are one host-wide pool") != NULL,
              "create did not say why the cgroup mount is read-only:\n%s", log);
    free(log);
    /* Every directory the mount shows: the v2 mount itself, or v1's per
     * hierarchy directories (memory and freezer among them: runc's 46). */
    struct run_result r = start_and_exec("for d in /sys/fs/cgroup /sys/fs/cgroup/*/; do "
                                         "mkdir \"$d/bhsub\" && echo \"MADE $d\"; "
                                         "echo \"$$\" > \"$d/cgroup.procs\" && echo \"MOVED $d\"; "
                                         "done 2>&1; echo done");
    cr_assert_eq(r.status, 0, "exec: %s", r.err);
    cr_expect(strstr(r.out, "done\n") != NULL, "%s", r.out);
    cr_expect(strstr(r.out, "MADE") == NULL, "a sub-cgroup was made:\n%s", r.out);
    cr_expect(strstr(r.out, "MOVED") == NULL, "a cgroup.procs was written:\n%s", r.out);
    cr_expect(strstr(r.out, "Read-only file system") != NULL, "%s", r.out);
    if (bh_cgroup_detect() != BH_CGROUP_V2)
        cr_expect(strstr(r.out, "/sys/fs/cgroup/memory/") != NULL &&
                      strstr(r.out, "/sys/fs/cgroup/freezer/") != NULL,
                  "memory and freezer are not shown:\n%s", r.out);
    h_free(&r);
    char hier[24][512] = {{0}};
    bh_cgroup_each_hierarchy(add_hier, hier, NULL);
    for (int h = 0; h < 24 && hier[h][0]; h++) {
        char sub[700];
        snprintf(sub, sizeof(sub), "%.511s/bulkhead/%.63s/bhsub", hier[h], live_id);
        cr_expect_neq(access(sub, F_OK), 0, "%s was made", sub);
        if (access(sub, F_OK) == 0)
            rmdir(sub);
    }
}

/* Loads the config write_config wrote, for changes (json_t *, the caller's). */
static json_t *load_config(char *path, size_t size)
{
    snprintf(path, size, "%s/bundle/config.json", tmp);
    json_t *doc = json_load_file(path, 0, NULL);
    cr_assert_not_null(doc);
    return doc;
}

/* runc's bats `device cgroup allow rw char device` (51) and `allow rm block
 * device` (52) grant CAP_SYSLOG and CAP_MKNOD, which take effect in the
 * container's user namespace only: the kernel still refuses the host's log
 * and mknod of a device node there. create says so in the log; the guest's
 * mknod of the block device the rules allow gets EPERM, and the node the
 * config lists is made by create. A docker-like config (CAP_MKNOD with `m`
 * rules for char devices only) gets no such warning. */
Test(oci_cgroups, capabilities_the_user_namespace_cannot_honour_are_named)
{
    write_config("container",
                 "\"resources\": {\"devices\": [" DENY_ALL ", {\"allow\": true, "
                 "\"type\": \"b\", \"major\": 7, \"minor\": 0, \"access\": \"rwm\"}]}");
    char p[300];
    json_t *doc = load_config(p, sizeof(p));
    json_t *caps = json_pack("[s,s]", "CAP_SYSLOG", "CAP_MKNOD");
    json_object_set_new(json_object_get(doc, "process"), "capabilities",
                        json_pack("{s:O,s:O,s:O,s:O}", "bounding", caps, "effective", caps,
                                  "permitted", caps, "inheritable", caps));
    json_decref(caps);
    /* the root is read-only: the guest's mknod goes to a tmpfs */
    json_array_append_new(
        json_object_get(doc, "mounts"),
        json_pack("{s:s,s:s,s:s}", "destination", "/tmp", "type", "tmpfs", "source", "tmpfs"));
    json_object_set_new(json_object_get(doc, "linux"), "devices",
                        json_pack("[{s:s,s:s,s:i,s:i}]", "path", "/dev/listed", "type", "b",
                                  "major", 7, "minor", 0));
    cr_assert_eq(json_dump_file(doc, p, 0), 0);
    json_decref(doc);
    char *log = create_logged("capwarn");
    cr_expect(strstr(log, "grants CAP_SYSLOG in the container's user namespace only") != NULL,
              "no word on CAP_SYSLOG:\n%s", log);
    cr_expect(strstr(log, "grants CAP_MKNOD in the container's user namespace only") != NULL,
              "no word on CAP_MKNOD:\n%s", log);
    free(log);
    struct run_result r = start_and_exec("test -b /dev/listed && echo LISTED; "
                                         "mknod /tmp/made b 7 0 && echo MADE; echo done");
    cr_expect(strstr(r.out, "LISTED\n") != NULL, "the listed node is missing: %s %s", r.out, r.err);
    cr_expect(strstr(r.out, "MADE") == NULL && strstr(r.err, "Operation not permitted") != NULL,
              "mknod in the container: %s %s", r.out, r.err);
    cr_expect(strstr(r.out, "done\n") != NULL, "%s", r.out);
    h_free(&r);
    h_bulkhead_in(tmp, (const char *const[]){"delete", "--force", live_id, NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "delete: %s", r.err);
    h_free(&r);
    live_id[0] = '\0';
    /* docker's shape: CAP_MKNOD, `m` only for char devices; no CAP_SYSLOG */
    write_config("container",
                 "\"resources\": {\"devices\": [" DENY_ALL ", {\"allow\": true, "
                 "\"type\": \"c\", \"major\": 1, \"minor\": 3, \"access\": \"rwm\"}]}");
    doc = load_config(p, sizeof(p));
    caps = json_pack("[s]", "CAP_MKNOD");
    json_object_set_new(json_object_get(doc, "process"), "capabilities",
                        json_pack("{s:O,s:O}", "bounding", caps, "effective", caps));
    json_decref(caps);
    cr_assert_eq(json_dump_file(doc, p, 0), 0);
    json_decref(doc);
    log = create_logged("capquiet");
    cr_expect(strstr(log, "CAP_MKNOD") == NULL && strstr(log, "CAP_SYSLOG") == NULL,
              "a docker-like config is warned about:\n%s", log);
    free(log);
}
