/* Cgroup backends: v1 and v2 file writes on fake trees (BULKHEAD_CGROUP_ROOT),
 * and the hybrid backend for real on this machine. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"

#define MiB (1024LL * 1024)

/* ---- helpers ------------------------------------------------------------ */

static char fake_root[256];
static struct bh_cgroup *live_cg;
static pid_t live_child = -1;
static char real_parent[64];

static void put(const char *dir, const char *file, const char *value)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    FILE *f = fopen(p, "we");
    cr_assert_not_null(f, "create %s", p);
    fputs(value, f);
    fclose(f);
}

static char *get(const char *dir, const char *file)
{
    static char buf[4096];
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    FILE *f = fopen(p, "re");
    if (f == NULL)
        return NULL;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    while (n > 0 && buf[n - 1] == '\n')
        buf[--n] = '\0';
    return buf;
}

static void mkdirs(const char *fmt, const char *sub)
{
    char p[1024];
    snprintf(p, sizeof(p), fmt, fake_root, sub);
    cr_assert_eq(mkdir(p, 0755), 0, "mkdir %s: %s", p, strerror(errno));
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void fake_setup(void)
{
    snprintf(fake_root, sizeof(fake_root), "/tmp/bh-cgfake-XXXXXX");
    cr_assert_not_null(mkdtemp(fake_root));
    setenv("BULKHEAD_CGROUP_ROOT", fake_root, 1);
    unsetenv("BULKHEAD_CGROUP_LAYOUT");
}

static void fake_teardown(void)
{
    if (live_cg != NULL)
        bh_cgroup_free(live_cg);
    live_cg = NULL;
    if (fake_root[0] != '\0') {
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", fake_root);
        if (system(cmd) != 0)
            fprintf(stderr, "cleanup of %s failed\n", fake_root);
    }
}

/* A v2 root: cgroup.controllers offers what `ctls` names. */
static void fake_v2(const char *ctls)
{
    put(fake_root, "cgroup.controllers", ctls);
    put(fake_root, "cgroup.subtree_control", "");
}

/* A v1 root as a v1-only host mounts it: cpu and cpuacct combined. */
static void fake_v1(bool with_pids)
{
    mkdirs("%s/%s", "memory");
    mkdirs("%s/%s", "cpu,cpuacct");
    mkdirs("%s/%s", "cpuset");
    mkdirs("%s/%s", "freezer");
    if (with_pids)
        mkdirs("%s/%s", "pids");
    char d[512];
    snprintf(d, sizeof(d), "%s/memory", fake_root);
    put(d, "memory.limit_in_bytes", "9223372036854771712");
    put(d, "memory.memsw.limit_in_bytes", "9223372036854771712");
    snprintf(d, sizeof(d), "%s/cpuset", fake_root);
    put(d, "cpuset.cpus", "0-1\n");
    put(d, "cpuset.mems", "0\n");
}

static pid_t spawn_sleeper(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        for (;;)
            pause();
    }
    return pid;
}

/* ---- paths -------------------------------------------------------------- */

TestSuite(cgroup_fake, .init = fake_setup, .fini = fake_teardown);

Test(cgroup_fake, escaping_paths_are_refused)
{
    fake_v2("memory pids cpu");
    static const char *const bad[] = {"../x", "bulkhead/../../etc", "/", "", "a/./b", "a/\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct bh_error err = {0};
        struct bh_cgroup *cg = NULL;
        cr_assert_eq(bh_cgroup_create(bad[i], NULL, &cg, &err), -1, "accepted `%s`", bad[i]);
        cr_assert_eq(err.code, EINVAL, "`%s`: %s", bad[i], err.msg);
    }
    cr_assert_eq(bh_cgroup_create(NULL, NULL, &live_cg, NULL), -1);
}

Test(cgroup_fake, layout_markers_and_override)
{
    fake_v2("memory");
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_V2);
    setenv("BULKHEAD_CGROUP_LAYOUT", "hybrid", 1);
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_HYBRID);
    setenv("BULKHEAD_CGROUP_LAYOUT", "nonsense", 1);
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_UNKNOWN);
    unsetenv("BULKHEAD_CGROUP_LAYOUT");
    char p[512];
    snprintf(p, sizeof(p), "%s/cgroup.controllers", fake_root);
    unlink(p);
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_V1);
    mkdirs("%s/%s", "unified");
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_HYBRID);
    cr_assert_str_eq(bh_cgroup_layout_name(BH_CGROUP_HYBRID), "hybrid");
}

/* The one answer to "where do bulkhead's cgroups live", per layout. */
Test(cgroup_fake, hierarchy_answers_per_layout)
{
    char dir[1024], want[1024];
    struct bh_error err = {0};
    fake_v2("memory pids");
    cr_assert_eq(bh_cgroup_hierarchy("pids", dir, sizeof(dir), &err), 0, "%s", err.msg);
    cr_assert_str_eq(dir, fake_root, "v2: every controller is the one root");
    cr_assert_eq(bh_cgroup_hierarchy(NULL, dir, sizeof(dir), &err), 0, "%s", err.msg);
    cr_assert_str_eq(dir, fake_root);

    char p[512];
    snprintf(p, sizeof(p), "%s/cgroup.controllers", fake_root);
    unlink(p);
    fake_v1(false);
    cr_assert_eq(bh_cgroup_hierarchy("cpuacct", dir, sizeof(dir), &err), 0, "%s", err.msg);
    snprintf(want, sizeof(want), "%s/cpu,cpuacct", fake_root);
    cr_assert_str_eq(dir, want, "v1: a combined mount answers for both controllers");
    cr_assert_eq(bh_cgroup_hierarchy("pids", dir, sizeof(dir), &err), -1);
    cr_assert_eq(err.code, ENOENT);
    cr_assert(strstr(err.msg, "`pids`") != NULL, "%s", err.msg);
    cr_assert_eq(bh_cgroup_hierarchy(NULL, dir, sizeof(dir), &err), -1, "v1 has no unified");

    mkdirs("%s/%s", "unified");
    cr_assert_eq(bh_cgroup_hierarchy(NULL, dir, sizeof(dir), &err), 0, "%s", err.msg);
    snprintf(want, sizeof(want), "%s/unified", fake_root);
    cr_assert_str_eq(dir, want, "hybrid: the controller-less v2 mount");
    cr_assert_eq(bh_cgroup_hierarchy("memory", dir, sizeof(dir), &err), 0, "%s", err.msg);
    snprintf(want, sizeof(want), "%s/memory", fake_root);
    cr_assert_str_eq(dir, want);
}

/* ---- v2 on a fake tree -------------------------------------------------- */

Test(cgroup_fake, v2_writes_limits_and_enables_controllers)
{
    fake_v2("cpuset cpu io memory pids");
    struct bh_limits l = {.memory_bytes = 64 * MiB,
                          .pids = 32,
                          .cpu_quota_us = 150000,
                          .cpu_period_us = 100000,
                          .cpu_shares = 1024};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("/bulkhead/c1", &l, &live_cg, &err), 0, "%s", err.msg);
    const char *d = bh_cgroup_dir(live_cg, NULL);
    char want[512];
    snprintf(want, sizeof(want), "%s/bulkhead/c1", fake_root);
    cr_assert_str_eq(d, want);
    cr_assert_str_eq(bh_cgroup_dir(live_cg, "memory"), want);
    cr_assert_str_eq(get(d, "memory.max"), "67108864");
    cr_assert_str_eq(get(d, "memory.swap.max"), "0"); /* --memory really limits */
    cr_assert_str_eq(get(d, "pids.max"), "32");
    cr_assert_str_eq(get(d, "cpu.max"), "150000 100000");
    cr_assert_str_eq(get(d, "cpu.weight"), "39"); /* 1 + (1024-2)*9999/262142 */
    /* Enabled at the root and in the shared parent, not in the leaf. */
    char parent[512];
    snprintf(parent, sizeof(parent), "%s/bulkhead", fake_root);
    for (int i = 0; i < 2; i++) {
        const char *s = get(i == 0 ? fake_root : parent, "cgroup.subtree_control");
        cr_assert(strstr(s, "+memory") && strstr(s, "+pids") && strstr(s, "+cpu"), "%s", s);
    }
    cr_assert_null(get(d, "cgroup.subtree_control"));

    /* Same id again: refused, the first one untouched. */
    struct bh_cgroup *dup = NULL;
    cr_assert_eq(bh_cgroup_create("bulkhead/c1", &l, &dup, &err), -1);
    cr_assert_eq(err.code, EEXIST);
    cr_assert(exists(d));
    /* A path the caller named is joined, as runc joins a cgroupsPath, and
     * a failed create leaves the cgroup it joined. */
    struct bh_limits bad = {.memory_bytes = 64 * MiB, .memory_swap_bytes = 1};
    cr_assert_eq(bh_cgroup_create("bulkhead/c1", &l, &dup, &err), -1);
    cr_assert_eq(bh_cgroup_create("shared/x", &l, &dup, &err), 0, "%s", err.msg);
    bh_cgroup_free(dup);
    cr_assert_eq(bh_cgroup_create("shared/x", &l, &dup, &err), 0, "join: %s", err.msg);
    bh_cgroup_free(dup);
    cr_assert_eq(bh_cgroup_create("shared/x", &bad, &dup, &err), -1);
    char joined[512];
    snprintf(joined, sizeof(joined), "%s/shared/x", fake_root);
    cr_assert(exists(joined), "a failed join removed the cgroup it joined");
    cr_assert_eq(bh_cgroup_open("shared/x", &dup, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_cgroup_destroy(dup, &err), 0, "%s", err.msg);

    /* Update: only what is given changes; -1 lifts a limit. */
    struct bh_limits u = {.pids = -1,
                          .cpu_quota_us = 50000,
                          .memory_bytes = 128 * MiB,
                          .memory_swap_bytes = 256 * MiB};
    cr_assert_eq(bh_cgroup_update(live_cg, &u, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(d, "pids.max"), "max");
    cr_assert_str_eq(get(d, "cpu.max"), "50000 100000");
    cr_assert_str_eq(get(d, "memory.max"), "134217728");
    cr_assert_str_eq(get(d, "memory.swap.max"), "134217728"); /* swap alone on v2 */

    cr_assert_eq(bh_cgroup_freeze(live_cg, true, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(d, "cgroup.freeze"), "1");
    cr_assert_eq(bh_cgroup_freeze(live_cg, false, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(d, "cgroup.freeze"), "0");

    put(d, "cgroup.procs", "123\n456\n");
    pid_t *pids = NULL;
    size_t n = 0;
    cr_assert_eq(bh_cgroup_pids(live_cg, &pids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 2);
    cr_assert_eq(pids[0], 123);
    cr_assert_eq(pids[1], 456);
    free(pids);
    put(d, "cgroup.procs", "");

    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(d));
    cr_assert(exists(parent), "shared parent must stay");
}

Test(cgroup_fake, v2_missing_controller_fails_closed_and_leaves_nothing)
{
    fake_v2("cpu io");
    struct bh_limits l = {.memory_bytes = 64 * MiB};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/c2", &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, ENOTSUP, "%s", err.msg);
    cr_assert(strstr(err.msg, "memory") != NULL, "%s", err.msg);
    char p[512];
    snprintf(p, sizeof(p), "%s/bulkhead/c2", fake_root);
    cr_assert(!exists(p));
}

Test(cgroup_fake, swap_below_memory_is_refused)
{
    fake_v2("memory pids cpu");
    struct bh_limits l = {.memory_bytes = 64 * MiB, .memory_swap_bytes = 32 * MiB};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/c3", &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, EINVAL, "%s", err.msg);
    char p[512];
    snprintf(p, sizeof(p), "%s/bulkhead/c3", fake_root);
    cr_assert(!exists(p));
}

/* ---- v1 on a fake tree -------------------------------------------------- */

Test(cgroup_fake, v1_combined_cpu_mount_cpuset_and_memsw)
{
    fake_v1(true);
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_V1);
    struct bh_limits l = {.memory_bytes = 64 * MiB,
                          .pids = 10,
                          .cpu_quota_us = 50000,
                          .cpu_period_us = 100000,
                          .cpu_shares = 512};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("/docker/abc", &l, &live_cg, &err), 0, "%s", err.msg);
    char want[512];
    snprintf(want, sizeof(want), "%s/cpu,cpuacct/docker/abc", fake_root);
    cr_assert_str_eq(bh_cgroup_dir(live_cg, "cpu"), want);
    cr_assert_str_eq(bh_cgroup_dir(live_cg, "cpuacct"), want);
    cr_assert_null(bh_cgroup_dir(live_cg, NULL));
    const char *cpu = bh_cgroup_dir(live_cg, "cpu");
    cr_assert_str_eq(get(cpu, "cpu.cfs_quota_us"), "50000");
    cr_assert_str_eq(get(cpu, "cpu.cfs_period_us"), "100000");
    cr_assert_str_eq(get(cpu, "cpu.shares"), "512");
    const char *mem = bh_cgroup_dir(live_cg, "memory");
    cr_assert_str_eq(get(mem, "memory.limit_in_bytes"), "67108864");
    cr_assert_str_eq(get(mem, "memory.memsw.limit_in_bytes"), "67108864");
    /* TCP buffers: the memory limit, at most 1/32 of the host's tcp_mem */
    unsigned long long lo, pr, max;
    FILE *tm = fopen("/proc/sys/net/ipv4/tcp_mem", "re");
    cr_assert_not_null(tm);
    cr_assert_eq(fscanf(tm, "%llu %llu %llu", &lo, &pr, &max), 3);
    fclose(tm);
    long long share = (long long)(max / 32) * sysconf(_SC_PAGESIZE);
    char tcp[32];
    snprintf(tcp, sizeof(tcp), "%lld", share < 64 * MiB ? share : 64 * MiB);
    cr_assert_str_eq(get(mem, "memory.kmem.tcp.limit_in_bytes"), tcp);
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "pids"), "pids.max"), "10");
    /* cpusets copied at every level, else attach would fail with ENOSPC. */
    const char *cs = bh_cgroup_dir(live_cg, "cpuset");
    cr_assert_str_eq(get(cs, "cpuset.cpus"), "0-1");
    cr_assert_str_eq(get(cs, "cpuset.mems"), "0");
    char parent[512];
    snprintf(parent, sizeof(parent), "%s/cpuset/docker", fake_root);
    cr_assert_str_eq(get(parent, "cpuset.cpus"), "0-1");

    cr_assert_eq(bh_cgroup_freeze(live_cg, true, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "freezer"), "freezer.state"), "FROZEN");
    cr_assert_eq(bh_cgroup_freeze(live_cg, false, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "freezer"), "freezer.state"), "THAWED");

    struct bh_limits u = {.memory_bytes = 32 * MiB, .memory_swap_bytes = -1};
    cr_assert_eq(bh_cgroup_update(live_cg, &u, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(mem, "memory.limit_in_bytes"), "33554432");
    cr_assert_str_eq(get(mem, "memory.memsw.limit_in_bytes"), "-1");

    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(want));
    cr_assert(!exists(cs));
}

Test(cgroup_fake, device_rules_as_v1_lines)
{
    char line[64];
    struct bh_device_rule all = {false, 'a', -1, -1, "rwm"};
    cr_assert_eq(bh_cgroup_device_line(&all, line, sizeof(line)), 0);
    cr_assert_str_eq(line, "a");
    struct bh_device_rule kmsg = {true, 'c', 1, 11, "rw"};
    cr_assert_eq(bh_cgroup_device_line(&kmsg, line, sizeof(line)), 0);
    cr_assert_str_eq(line, "c 1:11 rw");
    struct bh_device_rule pts = {true, 'c', 136, -1, "rwm"};
    cr_assert_eq(bh_cgroup_device_line(&pts, line, sizeof(line)), 0);
    cr_assert_str_eq(line, "c 136:* rwm");
    struct bh_device_rule mknod = {true, 'b', -1, -1, "m"};
    cr_assert_eq(bh_cgroup_device_line(&mknod, line, sizeof(line)), 0);
    cr_assert_str_eq(line, "b *:* m");
    struct bh_device_rule bad_type = {true, 'p', 1, 1, "r"};
    cr_assert_eq(bh_cgroup_device_line(&bad_type, line, sizeof(line)), -1);
    struct bh_device_rule bad_access = {true, 'c', 1, 1, "rx"};
    cr_assert_eq(bh_cgroup_device_line(&bad_access, line, sizeof(line)), -1);
    struct bh_device_rule no_access = {true, 'c', 1, 1, ""};
    cr_assert_eq(bh_cgroup_device_line(&no_access, line, sizeof(line)), -1);
}

/* Each rule in order on devices.deny or devices.allow (the fake tree keeps
 * every write, as the kernel keeps every exception), after an `a` on
 * devices.deny that the rules need not give: default deny, as runc. */
Test(cgroup_fake, v1_device_rules_written_in_order)
{
    fake_v1(true);
    mkdirs("%s/%s", "devices");
    struct bh_limits l = {.n_device_rules = 2};
    l.device_rules[0] = (struct bh_device_rule){true, 'c', 1, 11, "r"};
    l.device_rules[1] = (struct bh_device_rule){false, 'c', 1, 11, "w"};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/dev", &l, &live_cg, &err), 0, "%s", err.msg);
    const char *d = bh_cgroup_dir(live_cg, "devices");
    cr_assert_not_null(d);
    cr_assert_str_eq(get(d, "devices.deny"), "a\nc 1:11 w");
    cr_assert_str_eq(get(d, "devices.allow"), "c 1:11 r");
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

Test(cgroup_fake, v1_device_rules_without_the_controller_fail_closed)
{
    fake_v1(true);
    struct bh_limits l = {.n_device_rules = 1};
    l.device_rules[0] = (struct bh_device_rule){false, 'a', -1, -1, "rwm"};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/dev", &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, ENOTSUP, "%s", err.msg);
    cr_assert(strstr(err.msg, "`devices`") != NULL, "%s", err.msg);
    char p[512];
    snprintf(p, sizeof(p), "%s/pids/bulkhead/dev", fake_root);
    cr_assert(!exists(p), "a refused create left %s", p);
}

Test(cgroup_fake, v1_reservation_and_cpuset_v2_refuses_cpuset)
{
    fake_v1(true);
    struct bh_limits l = {.memory_reservation_bytes = 24 * MiB};
    snprintf(l.cpuset_cpus, sizeof(l.cpuset_cpus), "1");
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/r", &l, &live_cg, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "memory"), "memory.soft_limit_in_bytes"),
                     "25165824");
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "cpuset"), "cpuset.cpus"), "1");
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "cpuset"), "cpuset.mems"), "0", "from the parent");
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

Test(cgroup_fake, v2_cpuset_is_refused_not_dropped)
{
    fake_v2("memory pids cpu");
    struct bh_limits l = {.pids = 5};
    snprintf(l.cpuset_cpus, sizeof(l.cpuset_cpus), "1");
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/r", &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, ENOTSUP, "%s", err.msg);
    cr_assert(strstr(err.msg, "cpuset") != NULL, "%s", err.msg);
}

Test(cgroup_fake, v1_missing_controller_creates_nothing)
{
    fake_v1(false);
    struct bh_limits l = {.pids = 10};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/x", &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, ENOTSUP, "%s", err.msg);
    cr_assert(strstr(err.msg, "pids") != NULL, "%s", err.msg);
    char p[512];
    snprintf(p, sizeof(p), "%s/memory/bulkhead/x", fake_root);
    cr_assert(!exists(p));
}

Test(cgroup_fake, open_of_a_missing_cgroup_is_enoent)
{
    fake_v1(true);
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_open("docker/nope", &live_cg, &err), -1);
    cr_assert_eq(err.code, ENOENT, "%s", err.msg);
}

/* ---- hybrid, for real --------------------------------------------------- */

static int real_seq;

static void real_setup(void)
{
    unsetenv("BULKHEAD_CGROUP_ROOT");
    unsetenv("BULKHEAD_CGROUP_LAYOUT");
    snprintf(real_parent, sizeof(real_parent), "bulkhead-test-%d", (int)getpid());
}

static void real_teardown(void)
{
    if (live_child > 0) {
        kill(live_child, SIGKILL);
        waitpid(live_child, NULL, 0);
        live_child = -1;
    }
    if (live_cg != NULL) {
        struct bh_error err = {0};
        if (bh_cgroup_destroy(live_cg, &err) < 0)
            fprintf(stderr, "teardown: %s\n", err.msg);
        live_cg = NULL;
    }
    /* Our own parent in every hierarchy (the shared ones stay in real use). */
    DIR *d = opendir("/sys/fs/cgroup");
    struct dirent *de;
    while (d != NULL && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char p[512];
        snprintf(p, sizeof(p), "/sys/fs/cgroup/%s/%s", de->d_name, real_parent);
        if (rmdir(p) < 0 && errno != ENOENT && errno != ENOTDIR)
            fprintf(stderr, "teardown: rmdir %s: %s\n", p, strerror(errno));
    }
    if (d != NULL)
        closedir(d);
}

static void need_hybrid(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root to create cgroups");
    if (bh_cgroup_detect() != BH_CGROUP_HYBRID)
        cr_skip_test("the host's cgroup layout is %s, not hybrid",
                     bh_cgroup_layout_name(bh_cgroup_detect()));
}

static const char *real_path(void)
{
    static char p[128];
    snprintf(p, sizeof(p), "%s/%d", real_parent, real_seq++);
    return p;
}

TestSuite(cgroup_hybrid, .init = real_setup, .fini = real_teardown, .timeout = 30);

Test(cgroup_hybrid, limits_read_back_and_lifecycle)
{
    need_hybrid();
    struct bh_limits l = {.memory_bytes = 64 * MiB,
                          .pids = 16,
                          .cpu_quota_us = 50000,
                          .cpu_period_us = 100000,
                          .cpu_shares = 256};
    struct bh_error err = {0};
    const char *path = real_path();
    cr_assert_eq(bh_cgroup_create(path, &l, &live_cg, &err), 0, "%s", err.msg);
    const char *mem = bh_cgroup_dir(live_cg, "memory");
    cr_assert_str_eq(get(mem, "memory.limit_in_bytes"), "67108864");
    cr_assert_str_eq(get(mem, "memory.memsw.limit_in_bytes"), "67108864");
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "pids"), "pids.max"), "16");
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "cpu"), "cpu.cfs_quota_us"), "50000");
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "cpu"), "cpu.shares"), "256");
    cr_assert_not_null(bh_cgroup_dir(live_cg, NULL));

    live_child = spawn_sleeper();
    cr_assert_eq(bh_cgroup_attach(live_cg, live_child, &err), 0, "%s", err.msg);

    /* Tracked in every hierarchy, the unified one included. */
    char p[64], want[256];
    snprintf(p, sizeof(p), "/proc/%d", (int)live_child);
    const char *cgf = get(p, "cgroup");
    static const char *const ctl[] = {"memory",  "pids",  "cpu",     "cpuacct",     "cpuset",
                                      "freezer", "blkio", "devices", "name=systemd"};
    for (size_t i = 0; i < sizeof(ctl) / sizeof(ctl[0]); i++) {
        snprintf(want, sizeof(want), ":%s:/%s\n", ctl[i], path);
        cr_assert(strstr(cgf, want) != NULL, "%s missing in\n%s", want, cgf);
    }
    snprintf(want, sizeof(want), "0::/%s", path);
    cr_assert(strstr(cgf, want) != NULL, "%s missing in\n%s", want, cgf);

    pid_t *pids = NULL;
    size_t n = 0;
    cr_assert_eq(bh_cgroup_pids(live_cg, &pids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(pids[0], live_child);
    free(pids);

    cr_assert_eq(bh_cgroup_freeze(live_cg, true, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "freezer"), "freezer.state"), "FROZEN");
    cr_assert_eq(bh_cgroup_freeze(live_cg, false, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(bh_cgroup_dir(live_cg, "freezer"), "freezer.state"), "THAWED");

    struct bh_cgroup_stats st;
    cr_assert_eq(bh_cgroup_stats(live_cg, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.memory_limit, 64 * MiB);
    cr_assert_eq(st.pids_limit, 16);
    cr_assert_eq(st.pids_current, 1);

    /* A second handle on the same cgroup, as OCI's later commands get. */
    struct bh_cgroup *again = NULL;
    cr_assert_eq(bh_cgroup_open(path, &again, &err), 0, "%s", err.msg);
    struct bh_limits u = {.pids = 20, .memory_bytes = 96 * MiB};
    cr_assert_eq(bh_cgroup_update(again, &u, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(bh_cgroup_dir(again, "pids"), "pids.max"), "20");
    cr_assert_str_eq(get(mem, "memory.limit_in_bytes"), "100663296");
    cr_assert_str_eq(get(mem, "memory.memsw.limit_in_bytes"), "100663296");
    bh_cgroup_free(again);

    cr_assert_eq(bh_cgroup_kill(live_cg, &err), 0, "%s", err.msg);
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    char dirs[12][512];
    size_t nd = 0;
    static const char *const all[] = {"memory", "pids",    "cpu",   "cpuacct",
                                      "cpuset", "freezer", "blkio", "devices"};
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
        snprintf(dirs[nd++], sizeof(dirs[0]), "%s", bh_cgroup_dir(live_cg, all[i]));
    snprintf(dirs[nd++], sizeof(dirs[0]), "%s", bh_cgroup_dir(live_cg, NULL));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    for (size_t i = 0; i < nd; i++)
        cr_assert(!exists(dirs[i]), "%s left behind", dirs[i]);
}

Test(cgroup_hybrid, destroy_kills_what_remains)
{
    need_hybrid();
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create(real_path(), NULL, &live_cg, &err), 0, "%s", err.msg);
    /* A process that forks more once attached: all of them must go. */
    int go[2];
    cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
    live_child = fork();
    cr_assert_geq(live_child, 0);
    if (live_child == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        for (int i = 0; i < 4; i++)
            if (fork() == 0)
                break;
        for (;;)
            pause();
    }
    close(go[0]);
    cr_assert_eq(bh_cgroup_attach(live_cg, live_child, &err), 0, "%s", err.msg);
    cr_assert_eq(write(go[1], "x", 1), 1);
    close(go[1]);
    size_t n = 0;
    for (int i = 0; i < 400 && n < 5; i++) {
        pid_t *pids = NULL;
        cr_assert_eq(bh_cgroup_pids(live_cg, &pids, &n, &err), 0, "%s", err.msg);
        free(pids);
        if (n < 5)
            usleep(5000);
    }
    cr_assert_eq(n, 5);
    char d[512];
    snprintf(d, sizeof(d), "%s", bh_cgroup_dir(live_cg, "memory"));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(d));
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFSIGNALED(status));
}

Test(cgroup_hybrid, memory_bomb_is_oom_killed_inside)
{
    need_hybrid();
    struct bh_limits l = {.memory_bytes = 32 * MiB};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create(real_path(), &l, &live_cg, &err), 0, "%s", err.msg);
    int go[2];
    cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
    live_child = fork();
    cr_assert_geq(live_child, 0);
    if (live_child == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        size_t sz = 256 * MiB;
        char *m = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED)
            _exit(3);
        for (size_t i = 0; i < sz; i += 4096)
            m[i] = 1;
        _exit(0); /* the limit did not hold */
    }
    close(go[0]);
    cr_assert_eq(bh_cgroup_attach(live_cg, live_child, &err), 0, "%s", err.msg);
    cr_assert_eq(write(go[1], "x", 1), 1);
    close(go[1]);
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL, "status %#x", status);
    struct bh_cgroup_stats st;
    cr_assert_eq(bh_cgroup_stats(live_cg, &st, &err), 0, "%s", err.msg);
    cr_assert_geq(st.oom_kills, 1);
    cr_assert_geq(st.memory_max_usage, 16 * MiB);
}

Test(cgroup_hybrid, fork_bomb_stops_at_pids_limit)
{
    need_hybrid();
    struct bh_limits l = {.pids = 8};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create(real_path(), &l, &live_cg, &err), 0, "%s", err.msg);
    int go[2];
    cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
    live_child = fork();
    cr_assert_geq(live_child, 0);
    if (live_child == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(2);
        int made = 0;
        for (int i = 0; i < 32; i++) {
            pid_t p = fork();
            if (p == 0) {
                for (;;)
                    pause();
            }
            if (p < 0)
                break;
            made++;
        }
        _exit(made); /* the parent counts how far it got */
    }
    close(go[0]);
    cr_assert_eq(bh_cgroup_attach(live_cg, live_child, &err), 0, "%s", err.msg);
    cr_assert_eq(write(go[1], "x", 1), 1);
    close(go[1]);
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFEXITED(status));
    cr_assert_eq(WEXITSTATUS(status), 7, "forked %d children under pids.max 8",
                 WEXITSTATUS(status));
    /* The orphans are still in the cgroup: kill and remove them. */
    cr_assert_eq(bh_cgroup_kill(live_cg, &err), 0, "%s", err.msg);
}

Test(cgroup_hybrid, refused_limit_leaves_nothing)
{
    need_hybrid();
    struct bh_limits l = {.memory_bytes = 64 * MiB, .memory_swap_bytes = 1 * MiB};
    struct bh_error err = {0};
    const char *path = real_path();
    cr_assert_eq(bh_cgroup_create(path, &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, EINVAL, "%s", err.msg);
    char p[256];
    snprintf(p, sizeof(p), "/sys/fs/cgroup/memory/%s", path);
    cr_assert(!exists(p));
    snprintf(p, sizeof(p), "/sys/fs/cgroup/unified/%s", path);
    cr_assert(!exists(p));
    /* A cpu quota the kernel refuses (below 1 ms) is an error too. */
    struct bh_limits bad = {.cpu_quota_us = 10, .cpu_period_us = 100000};
    cr_assert_eq(bh_cgroup_create(real_path(), &bad, &live_cg, &err), -1);
    cr_assert(strstr(err.msg, "cpu") != NULL, "%s", err.msg);
}

/* The v1 backend for real: this machine's v1 hierarchies without the
 * unified one, so kill takes the freeze, SIGKILL, thaw path. */
Test(cgroup_hybrid, v1_backend_for_real)
{
    need_hybrid();
    setenv("BULKHEAD_CGROUP_LAYOUT", "v1", 1);
    struct bh_limits l = {.memory_bytes = 48 * MiB, .pids = 12};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create(real_path(), &l, &live_cg, &err), 0, "%s", err.msg);
    cr_assert_null(bh_cgroup_dir(live_cg, NULL));
    live_child = spawn_sleeper();
    cr_assert_eq(bh_cgroup_attach(live_cg, live_child, &err), 0, "%s", err.msg);
    struct bh_cgroup_stats st;
    cr_assert_eq(bh_cgroup_stats(live_cg, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.memory_limit, 48 * MiB);
    cr_assert_eq(st.pids_limit, 12);
    cr_assert_eq(st.pids_current, 1);
    cr_assert_eq(bh_cgroup_kill(live_cg, &err), 0, "%s", err.msg);
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    char d[512];
    snprintf(d, sizeof(d), "%s", bh_cgroup_dir(live_cg, "freezer"));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(d));
}

/* The v2 backend for real on the controller-less cgroup2 mount: core files
 * (cgroup.freeze, cgroup.kill, cpu.stat) work, and any limit fails closed. */
Test(cgroup_hybrid, v2_backend_on_the_unified_mount)
{
    need_hybrid();
    setenv("BULKHEAD_CGROUP_ROOT", "/sys/fs/cgroup/unified", 1);
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_V2);
    struct bh_error err = {0};
    struct bh_limits l = {.pids = 10};
    const char *path = real_path();
    cr_assert_eq(bh_cgroup_create(path, &l, &live_cg, &err), -1);
    cr_assert_eq(err.code, ENOTSUP, "%s", err.msg);
    char p[256];
    snprintf(p, sizeof(p), "/sys/fs/cgroup/unified/%s", path);
    cr_assert(!exists(p));

    cr_assert_eq(bh_cgroup_create(real_path(), NULL, &live_cg, &err), 0, "%s", err.msg);
    live_child = spawn_sleeper();
    cr_assert_eq(bh_cgroup_attach(live_cg, live_child, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_cgroup_freeze(live_cg, true, &err), 0, "%s", err.msg);
    cr_assert(strstr(get(bh_cgroup_dir(live_cg, NULL), "cgroup.events"), "frozen 1"));
    cr_assert_eq(bh_cgroup_freeze(live_cg, false, &err), 0, "%s", err.msg);
    pid_t *pids = NULL;
    size_t n = 0;
    cr_assert_eq(bh_cgroup_pids(live_cg, &pids, &n, &err), 0, "%s", err.msg);
    cr_assert_eq(n, 1);
    cr_assert_eq(pids[0], live_child);
    free(pids);
    struct bh_cgroup_stats st;
    cr_assert_eq(bh_cgroup_stats(live_cg, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.memory_limit, UINT64_MAX);
    cr_assert_eq(bh_cgroup_kill(live_cg, &err), 0, "%s", err.msg);
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    char d[512];
    snprintf(d, sizeof(d), "%s", bh_cgroup_dir(live_cg, NULL));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(d));
}

Test(cgroup_fake, open_keeps_only_hierarchies_the_cgroup_is_in)
{
    fake_v1(true);
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("docker/part", NULL, &live_cg, &err), 0, "%s", err.msg);
    char fz[512];
    snprintf(fz, sizeof(fz), "%s", bh_cgroup_dir(live_cg, "freezer"));
    bh_cgroup_free(live_cg);
    live_cg = NULL;
    cr_assert_eq(rmdir(fz), 0, "%s", strerror(errno));
    cr_assert_eq(bh_cgroup_open("/docker/part", &live_cg, &err), 0, "%s", err.msg);
    cr_assert_null(bh_cgroup_dir(live_cg, "freezer"));
    cr_assert_str_eq(bh_cgroup_path(live_cg), "docker/part");
    cr_assert_eq(bh_cgroup_layout_of(live_cg), BH_CGROUP_V1);
    struct bh_error ferr = {0};
    cr_assert_eq(bh_cgroup_freeze(live_cg, true, &ferr), -1);
    cr_assert(strstr(ferr.msg, "freezer") != NULL, "%s", ferr.msg);
    char mem[512];
    snprintf(mem, sizeof(mem), "%s", bh_cgroup_dir(live_cg, "memory"));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(mem));
}

/* ---- the v2 device program (cgroup-devices.c) ---------------------------- */

TestSuite(cgroup_devices);

#include <linux/bpf.h>

/* Runs the program on one access as the kernel would: only the
 * instructions the generator emits are known; any other fails the test. */
static int run_device_program(const struct bpf_insn *p, ssize_t len, char type, unsigned access,
                              uint32_t major, uint32_t minor)
{
    uint32_t ctx[3] = {(access << 16) | (type == 'c' ? BPF_DEVCG_DEV_CHAR : BPF_DEVCG_DEV_BLOCK),
                       major, minor};
    uint64_t r[11] = {0};
    for (ssize_t pc = 0; pc < len; pc++) {
        const struct bpf_insn *i = &p[pc];
        uint64_t imm = (uint64_t)(int64_t)i->imm;
        switch (i->code) {
        case BPF_LDX | BPF_MEM | BPF_W:
            cr_assert_eq(i->src_reg, BPF_REG_1);
            cr_assert(i->off >= 0 && i->off <= 8 && i->off % 4 == 0, "load at %d", i->off);
            r[i->dst_reg] = ctx[i->off / 4];
            break;
        case BPF_ALU64 | BPF_MOV | BPF_X:
            r[i->dst_reg] = r[i->src_reg];
            break;
        case BPF_ALU64 | BPF_MOV | BPF_K:
            r[i->dst_reg] = imm;
            break;
        case BPF_ALU64 | BPF_AND | BPF_K:
            r[i->dst_reg] &= imm;
            break;
        case BPF_ALU64 | BPF_RSH | BPF_K:
            r[i->dst_reg] >>= i->imm;
            break;
        case BPF_JMP | BPF_JNE | BPF_K:
            if (r[i->dst_reg] != imm)
                pc += i->off;
            break;
        case BPF_JMP | BPF_JEQ | BPF_K:
            if (r[i->dst_reg] == imm)
                pc += i->off;
            break;
        case BPF_JMP | BPF_EXIT:
            cr_assert(r[0] == 0 || r[0] == 1, "returns %llu", (unsigned long long)r[0]);
            return (int)r[0];
        default:
            cr_assert_fail("instruction %zd: unexpected code %#x", pc, i->code);
        }
    }
    cr_assert_fail("the program runs off its end");
    return -1;
}

#define R BPF_DEVCG_ACC_READ
#define W BPF_DEVCG_ACC_WRITE
#define M BPF_DEVCG_ACC_MKNOD

/* The decisions of runc's dev.bats lists: default deny, last match wins, an
 * allow needs every access asked, a deny takes any of them. */
Test(cgroup_devices, program_decides_as_the_rule_list_reads)
{
    struct bh_device_rule rules[] = {
        {false, 'a', -1, -1, "rwm"}, /* runc's spec default */
        {true, 'c', 1, 11, "rw"},    /* kmsg, read and write */
        {true, 'b', 7, -1, "rwm"},   /* every loop device */
        {false, 'b', 7, 3, "w"},     /* but loop3 not written */
        {true, 'c', -1, -1, "m"},    /* mknod of any char device */
        {true, 'c', 1, 3, "rwm"},    /* null */
    };
    size_t n = sizeof(rules) / sizeof(rules[0]);
    struct bpf_insn prog[256];
    ssize_t len = bh_cgroup_device_program(rules, n, prog, 256);
    cr_assert_gt(len, 0);
    cr_assert_leq((size_t)len, bh_cgroup_device_program_max(n));
    cr_expect_eq(run_device_program(prog, len, 'c', R, 1, 11), 1);
    cr_expect_eq(run_device_program(prog, len, 'c', R | W, 1, 11), 1);
    cr_expect_eq(run_device_program(prog, len, 'c', M, 1, 11), 1, "the char mknod rule");
    cr_expect_eq(run_device_program(prog, len, 'c', R, 1, 12), 0, "default deny");
    cr_expect_eq(run_device_program(prog, len, 'b', R, 1, 11), 0, "type matters");
    cr_expect_eq(run_device_program(prog, len, 'b', R | W, 7, 0), 1);
    cr_expect_eq(run_device_program(prog, len, 'b', M, 7, 9), 1);
    cr_expect_eq(run_device_program(prog, len, 'b', R, 7, 3), 1, "deny w leaves r");
    cr_expect_eq(run_device_program(prog, len, 'b', R | W, 7, 3), 0, "deny w takes rw");
    cr_expect_eq(run_device_program(prog, len, 'b', M, 8, 0), 0);
    cr_expect_eq(run_device_program(prog, len, 'c', R | W | M, 1, 3), 1);

    /* No rules at all: everything denied. */
    len = bh_cgroup_device_program(NULL, 0, prog, 256);
    cr_assert_gt(len, 0);
    cr_expect_eq(run_device_program(prog, len, 'c', R, 1, 3), 0);
    /* A later allow-all undoes an earlier deny. */
    struct bh_device_rule all[] = {{false, 'c', 1, 3, "rwm"}, {true, 'a', -1, -1, "rwm"}};
    len = bh_cgroup_device_program(all, 2, prog, 256);
    cr_expect_eq(run_device_program(prog, len, 'c', R, 1, 3), 1);
}

Test(cgroup_devices, malformed_rules_and_short_buffers_are_refused)
{
    struct bpf_insn prog[64];
    struct bh_device_rule bad_access = {true, 'c', 1, 3, "rx"};
    cr_expect_eq(bh_cgroup_device_program(&bad_access, 1, prog, 64), -1);
    struct bh_device_rule bad_type = {true, 'p', 1, 3, "r"};
    cr_expect_eq(bh_cgroup_device_program(&bad_type, 1, prog, 64), -1);
    struct bh_device_rule no_access = {true, 'c', 1, 3, ""};
    cr_expect_eq(bh_cgroup_device_program(&no_access, 1, prog, 64), -1);
    struct bh_device_rule ok = {true, 'c', 1, 3, "r"};
    cr_expect_eq(bh_cgroup_device_program(&ok, 1, prog, 4), -1);
    struct bh_error err = {0};
    cr_expect_eq(bh_cgroup_device_program_load(&bad_access, 1, &err), -1);
    cr_expect_eq(err.code, EINVAL, "%s", err.msg);
}

/* The kernel's verifier takes the largest program the OCI front end makes. */
/* The size bh_cgroup_device_program_max gives is enough for the largest
 * rules (type, major and minor all named): a sentinel just past it stays. */
Test(cgroup_devices, the_largest_rules_fit_the_size_given)
{
    struct bh_device_rule rules[BH_MAX_DEVICE_RULES];
    for (size_t i = 0; i < BH_MAX_DEVICE_RULES; i++)
        rules[i] = (struct bh_device_rule){i % 2 == 0, 'c', (int32_t)i, (int32_t)i, "rwm"};
    for (size_t n = 0; n <= BH_MAX_DEVICE_RULES; n++) {
        size_t max = bh_cgroup_device_program_max(n);
        struct bpf_insn *buf = calloc(max + 1, sizeof(*buf));
        cr_assert_not_null(buf);
        buf[max].code = 0xee;
        ssize_t len = bh_cgroup_device_program(rules, n, buf, max);
        cr_expect_eq(len, (ssize_t)max, "%zu rules: %zd instructions for a size of %zu", n, len,
                     max);
        cr_expect_eq(buf[max].code, 0xee, "%zu rules: written past the size given", n);
        free(buf);
    }
}

Test(cgroup_devices, kernel_loads_the_largest_program)
{
    cr_assert_eq(geteuid(), 0, "loading a BPF program needs root");
    struct bh_device_rule rules[BH_MAX_DEVICE_RULES];
    for (size_t i = 0; i < BH_MAX_DEVICE_RULES; i++)
        rules[i] = (struct bh_device_rule){i % 2 == 0, i % 3 == 0 ? 'b' : 'c', (int32_t)i,
                                           (int32_t)(i * 7), "rw"};
    struct bh_error err = {0};
    int fd = bh_cgroup_device_program_load(rules, BH_MAX_DEVICE_RULES, &err);
    cr_assert_geq(fd, 0, "%s", err.msg);
    close(fd);
}

/* Where this host has a cgroup v2 hierarchy (hybrid: the controller-less
 * one; v2: the root). */
static const char *cgroup2_root(void)
{
    enum bh_cgroup_layout l = bh_cgroup_detect();
    if (l == BH_CGROUP_V2)
        return "/sys/fs/cgroup";
    if (l == BH_CGROUP_HYBRID && exists("/sys/fs/cgroup/unified/cgroup.procs"))
        return "/sys/fs/cgroup/unified";
    cr_assert_fail("no cgroup v2 hierarchy on this host (layout %s)", bh_cgroup_layout_name(l));
    return NULL;
}

/* A child already in cg when it returns 0 (the parent moves it in while it
 * waits); the parent gets its pid. */
static pid_t fork_into(struct bh_cgroup *cg)
{
    int go[2];
    cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    char c = 'x';
    if (pid == 0) {
        close(go[1]);
        if (read(go[0], &c, 1) != 1)
            _exit(100);
        close(go[0]);
        return 0;
    }
    close(go[0]);
    struct bh_error err = {0};
    int rc = bh_cgroup_attach(cg, pid, &err);
    if (rc == 0)
        cr_assert_eq(write(go[1], &c, 1), 1);
    close(go[1]);
    cr_assert_eq(rc, 0, "%s", err.msg);
    return pid;
}

/* The program for real: a process in the cgroup opens what the rules allow
 * and gets EPERM for the rest (not EACCES: the nodes are 0666). */
Test(cgroup_hybrid, v2_device_program_enforced_on_a_real_cgroup)
{
    cr_assert_eq(geteuid(), 0, "needs root to create cgroups and load BPF programs");
    setenv("BULKHEAD_CGROUP_ROOT", cgroup2_root(), 1);
    struct bh_limits l = {.n_device_rules = 3};
    l.device_rules[0] = (struct bh_device_rule){false, 'a', -1, -1, "rwm"};
    l.device_rules[1] = (struct bh_device_rule){true, 'c', 1, 3, "rw"};
    l.device_rules[2] = (struct bh_device_rule){true, 'c', 1, 5, "r"};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create(real_path(), &l, &live_cg, &err), 0, "%s", err.msg);
    live_child = fork_into(live_cg);
    if (live_child == 0) {
        int bits = 0, fd;
        if ((fd = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0)
            bits |= 1, close(fd);
        if ((fd = open("/dev/zero", O_RDONLY | O_CLOEXEC)) >= 0)
            bits |= 2, close(fd);
        if ((fd = open("/dev/zero", O_WRONLY | O_CLOEXEC)) < 0 && errno == EPERM)
            bits |= 4;
        if ((fd = open("/dev/full", O_RDONLY | O_CLOEXEC)) < 0 && errno == EPERM)
            bits |= 8;
        _exit(bits);
    }
    int status;
    cr_assert_eq(waitpid(live_child, &status, 0), live_child);
    live_child = -1;
    cr_assert(WIFEXITED(status), "status %#x", status);
    cr_expect_eq(WEXITSTATUS(status), 15, "null rw %d, zero r %d, zero w EPERM %d, full EPERM %d",
                 WEXITSTATUS(status) & 1, !!(WEXITSTATUS(status) & 2), !!(WEXITSTATUS(status) & 4),
                 !!(WEXITSTATUS(status) & 8));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

/* A fake v2 tree is no cgroup: the program cannot be attached, and the
 * create fails instead of running without the rules. */
Test(cgroup_fake, v2_device_rules_fail_closed_where_no_program_attaches)
{
    fake_v2("memory pids");
    struct bh_limits l = {.n_device_rules = 1};
    l.device_rules[0] = (struct bh_device_rule){false, 'a', -1, -1, "rwm"};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/dev", &l, &live_cg, &err), -1);
    cr_assert(strstr(err.msg, "device rules refused") != NULL, "%s", err.msg);
}

/* Hybrid: the rules go to the v1 devices hierarchy, as on v1 (the unified
 * mount holds no controller); no program is needed there. */
Test(cgroup_fake, hybrid_device_rules_on_the_v1_devices_files)
{
    fake_v1(true);
    mkdirs("%s/%s", "devices");
    mkdirs("%s/%s", "unified");
    cr_assert_eq(bh_cgroup_detect(), BH_CGROUP_HYBRID);
    struct bh_limits l = {.n_device_rules = 2};
    l.device_rules[0] = (struct bh_device_rule){true, 'c', 1, 11, "rw"};
    l.device_rules[1] = (struct bh_device_rule){true, 'b', 7, -1, "rwm"};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/dev", &l, &live_cg, &err), 0, "%s", err.msg);
    const char *d = bh_cgroup_dir(live_cg, "devices");
    cr_assert_not_null(d);
    cr_expect_str_eq(get(d, "devices.deny"), "a");
    cr_expect_str_eq(get(d, "devices.allow"), "c 1:11 rw\nb 7:* rwm");
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

/* ---- settings runc writes (update.bats, cgroups.bats) ------------------- */

/* A v1 fake with blkio, as a hybrid or v1-only host mounts it. */
static void fake_v1_blkio(bool hybrid)
{
    fake_v1(true);
    mkdirs("%s/%s", "blkio");
    if (hybrid)
        mkdirs("%s/%s", "unified");
}

static void blkio_limits(struct bh_limits *l)
{
    l->blkio_weight = 333;
    l->n_blkio_weight_devices = 1;
    l->blkio_weight_devices[0] = (struct bh_blkio_device){.major = 7, .minor = 3, .weight = 444};
    l->n_blkio_throttle[BH_THROTTLE_WRITE_BPS] = 1;
    l->blkio_throttle[BH_THROTTLE_WRITE_BPS][0] =
        (struct bh_blkio_device){.major = 7, .minor = 3, .rate = 1048576};
}

static void blkio_and_rt_on(bool hybrid)
{
    fake_v1_blkio(hybrid);
    cr_assert_eq(bh_cgroup_detect(), hybrid ? BH_CGROUP_HYBRID : BH_CGROUP_V1);
    struct bh_limits l = {.cpu_rt_period_us = 800001, .cpu_rt_runtime_us = 500001};
    blkio_limits(&l);
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/io", &l, &live_cg, &err), 0, "%s", err.msg);
    /* A fresh blkio cgroup without CFQ's blkio.weight: BFQ's files, as runc picks. */
    const char *b = bh_cgroup_dir(live_cg, "blkio");
    cr_assert_not_null(b);
    cr_assert_str_eq(get(b, "blkio.bfq.weight"), "333");
    cr_assert_str_eq(get(b, "blkio.bfq.weight_device"), "7:3 444");
    cr_assert_str_eq(get(b, "blkio.throttle.write_bps_device"), "7:3 1048576");
    cr_assert(!exists(strcat(strcpy((char[600]){0}, b), "/blkio.weight")));
    const char *c = bh_cgroup_dir(live_cg, "cpu");
    cr_assert_str_eq(get(c, "cpu.rt_period_us"), "800001");
    cr_assert_str_eq(get(c, "cpu.rt_runtime_us"), "500001");
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    cr_assert(!exists(b));
}

Test(cgroup_fake, v1_blkio_bfq_files_and_rt_budget)
{
    blkio_and_rt_on(false);
}

Test(cgroup_fake, hybrid_blkio_bfq_files_and_rt_budget)
{
    blkio_and_rt_on(true);
}

/* A cgroup whose blkio has CFQ's blkio.weight gets CFQ's files. */
Test(cgroup_fake, v1_blkio_cfq_files_where_the_kernel_has_them)
{
    fake_v1_blkio(false);
    mkdirs("%s/%s", "blkio/docker");
    mkdirs("%s/%s", "blkio/docker/cfq");
    char d[600];
    snprintf(d, sizeof(d), "%s/blkio/docker/cfq", fake_root);
    put(d, "blkio.weight", "500");
    struct bh_limits l = {0};
    blkio_limits(&l);
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("docker/cfq", &l, &live_cg, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(d, "blkio.weight"), "333");
    cr_assert_str_eq(get(d, "blkio.weight_device"), "7:3 444");
    cr_assert_null(get(d, "blkio.bfq.weight"));
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

/* v2: io.weight on its own scale (runc's conversion), io.max lines, the io
 * controller enabled down the tree; realtime refused with the reason. */
Test(cgroup_fake, v2_io_weight_and_throttle_rt_refused)
{
    fake_v2("cpu io memory pids");
    struct bh_limits l = {0};
    blkio_limits(&l);
    l.n_blkio_weight_devices = 0; /* no io.bfq.weight in a fake: per-device needs BFQ */
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/io2", &l, &live_cg, &err), 0, "%s", err.msg);
    const char *d = bh_cgroup_dir(live_cg, NULL);
    cr_assert_str_eq(get(d, "io.weight"), "3263"); /* 1 + (333-10)*9999/990 */
    cr_assert_str_eq(get(d, "io.max"), "7:3 wbps=1048576");
    char parent[512];
    snprintf(parent, sizeof(parent), "%s/bulkhead", fake_root);
    cr_assert(strstr(get(parent, "cgroup.subtree_control"), "+io") != NULL, "%s",
              get(parent, "cgroup.subtree_control"));
    struct bh_limits rt = {.cpu_rt_runtime_us = 1000};
    cr_assert_eq(bh_cgroup_update(live_cg, &rt, &err), -1);
    cr_assert_eq(err.code, ENOTSUP);
    cr_assert(strstr(err.msg, "realtime") != NULL, "%s", err.msg);
    struct bh_limits pd = {0};
    blkio_limits(&pd);
    cr_assert_eq(bh_cgroup_update(live_cg, &pd, &err), -1, "per-device weight without BFQ");
    cr_assert(strstr(err.msg, "io.bfq.weight") != NULL, "%s", err.msg);
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

/* runc's `update --memory-swap N` alone: on v1 only the total changes (the
 * memory limit stays); v2 counts swap apart and needs both. */
Test(cgroup_fake, swap_alone_on_v1_keeps_memory_v2_needs_both)
{
    fake_v1(true);
    struct bh_limits l = {.memory_bytes = 50 * MiB};
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/sw", &l, &live_cg, &err), 0, "%s", err.msg);
    const char *m = bh_cgroup_dir(live_cg, "memory");
    struct bh_limits u = {.memory_swap_bytes = 96468992};
    cr_assert_eq(bh_cgroup_update(live_cg, &u, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(m, "memory.memsw.limit_in_bytes"), "96468992");
    cr_assert_str_eq(get(m, "memory.limit_in_bytes"), "52428800");
    /* --memory -1 lifts both, as runc's setMemoryAndSwap does. */
    struct bh_limits lift = {.memory_bytes = -1};
    cr_assert_eq(bh_cgroup_update(live_cg, &lift, &err), 0, "%s", err.msg);
    cr_assert_str_eq(get(m, "memory.limit_in_bytes"), "-1");
    cr_assert_str_eq(get(m, "memory.memsw.limit_in_bytes"), "-1");
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
    fake_teardown();
    fake_setup();
    fake_v2("memory pids cpu");
    cr_assert_eq(bh_cgroup_create("bulkhead/sw2", NULL, &live_cg, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_cgroup_update(live_cg, &u, &err), -1);
    cr_assert_eq(err.code, EINVAL);
    cr_assert(strstr(err.msg, "--memory") != NULL, "%s", err.msg);
}

/* A value the kernel refuses at write() is BH_ERROR_LIMIT (create exits 1
 * as runc); /dev/full stands in for a cgroup file refusing the write. */
Test(cgroup_fake, kernel_refusal_is_a_limit_error)
{
    fake_v1(true);
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/full", NULL, &live_cg, &err), 0, "%s", err.msg);
    char f[600];
    snprintf(f, sizeof(f), "%s/pids.max", bh_cgroup_dir(live_cg, "pids"));
    unlink(f);
    cr_assert_eq(symlink("/dev/full", f), 0);
    struct bh_limits l = {.pids = 5};
    cr_assert_eq(bh_cgroup_update(live_cg, &l, &err), -1);
    cr_assert_eq(err.kind, BH_ERROR_LIMIT, "%s", err.msg);
    cr_assert(strstr(err.msg, "pids limit") != NULL, "%s", err.msg);
    unlink(f);
    struct bh_limits bad = {.memory_bytes = 64 * MiB, .memory_swap_bytes = 32 * MiB};
    cr_assert_eq(bh_cgroup_update(live_cg, &bad, &err), -1);
    cr_assert_eq(err.kind, BH_ERROR_SETUP, "bulkhead's own refusal is not the kernel's");
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;
}

/* Statistics as runc reports them: v1's blkio lines (Total left out),
 * cpuacct ticks, memsw as swap; v2's io.stat onto Read/Write entries. */
Test(cgroup_fake, stats_read_blkio_cpu_and_swap_v1_and_v2)
{
    fake_v1_blkio(false);
    struct bh_error err = {0};
    cr_assert_eq(bh_cgroup_create("bulkhead/st", NULL, &live_cg, &err), 0, "%s", err.msg);
    const char *m = bh_cgroup_dir(live_cg, "memory");
    put(m, "memory.usage_in_bytes", "4096");
    put(m, "memory.limit_in_bytes", "8192");
    put(m, "memory.max_usage_in_bytes", "6000");
    put(m, "memory.failcnt", "3");
    put(m, "memory.memsw.usage_in_bytes", "5000");
    put(m, "memory.memsw.limit_in_bytes", "9223372036854771712");
    put(m, "memory.stat", "cache 123\nrss 456\n");
    const char *c = bh_cgroup_dir(live_cg, "cpuacct");
    put(c, "cpuacct.usage", "999");
    put(c, "cpuacct.stat", "user 2\nsystem 1\n");
    put(bh_cgroup_dir(live_cg, "pids"), "pids.current", "2");
    put(bh_cgroup_dir(live_cg, "pids"), "pids.max", "max");
    put(bh_cgroup_dir(live_cg, "blkio"), "blkio.throttle.io_service_bytes_recursive",
        "8:0 Read 4096\n8:0 Write 512\nTotal 4608\n");
    put(bh_cgroup_dir(live_cg, "blkio"), "blkio.throttle.io_serviced_recursive",
        "8:0 Read 2\n8:0 Write 1\nTotal 3\n");
    struct bh_cgroup_stats st;
    cr_assert_eq(bh_cgroup_stats(live_cg, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.memory_failcnt, 3);
    cr_assert_eq(st.memory_cache, 123);
    cr_assert_eq(st.swap_usage, 5000);
    cr_assert_eq(st.swap_limit, UINT64_MAX);
    long hz = sysconf(_SC_CLK_TCK);
    cr_assert_eq(st.cpu_user_ns, 2ULL * 1000000000ULL / (uint64_t)hz);
    cr_assert_eq(st.cpu_kernel_ns, 1ULL * 1000000000ULL / (uint64_t)hz);
    cr_assert_eq(st.n_io_bytes, 2, "the Total line is not a device");
    cr_assert_eq(st.io_bytes[0].major, 8);
    cr_assert_str_eq(st.io_bytes[0].op, "Read");
    cr_assert_eq(st.io_bytes[0].value, 4096);
    cr_assert_eq(st.n_io_ops, 2);
    cr_assert_eq(st.io_ops[1].value, 1);
    cr_assert_eq(bh_cgroup_destroy(live_cg, &err), 0, "%s", err.msg);
    live_cg = NULL;

    fake_teardown();
    fake_setup();
    fake_v2("memory pids cpu io");
    cr_assert_eq(bh_cgroup_create("bulkhead/st2", NULL, &live_cg, &err), 0, "%s", err.msg);
    const char *d = bh_cgroup_dir(live_cg, NULL);
    put(d, "memory.current", "100");
    put(d, "memory.max", "max");
    put(d, "memory.events", "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\n");
    put(d, "memory.swap.current", "10");
    put(d, "memory.swap.max", "max");
    put(d, "pids.current", "1");
    put(d, "pids.max", "max");
    put(d, "cpu.stat",
        "usage_usec 5\nuser_usec 3\nsystem_usec 2\nnr_periods 4\n"
        "nr_throttled 1\nthrottled_usec 9\n");
    put(d, "io.stat", "8:16 rbytes=1024 wbytes=2048 rios=3 wios=4 dbytes=0 dios=0\n");
    cr_assert_eq(bh_cgroup_stats(live_cg, &st, &err), 0, "%s", err.msg);
    cr_assert_eq(st.memory_failcnt, 7);
    cr_assert_eq(st.oom_kills, 1);
    cr_assert_eq(st.swap_usage, 10);
    cr_assert_eq(st.cpu_user_ns, 3000);
    cr_assert_eq(st.cpu_throttled_ns, 9000);
    cr_assert_eq(st.cpu_periods, 4);
    cr_assert_eq(st.n_io_bytes, 2);
    cr_assert_str_eq(st.io_bytes[1].op, "Write");
    cr_assert_eq(st.io_bytes[1].value, 2048);
    cr_assert_eq(st.io_bytes[1].minor, 16);
    cr_assert_eq(st.n_io_ops, 2);
    cr_assert_eq(st.io_ops[0].value, 3);
}
