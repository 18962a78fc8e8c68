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
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "harness.h"

static char tmp[128];
static char live_id[64];

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

static void teardown(void)
{
    if (live_id[0]) {
        struct run_result r = bh("delete", "--force", live_id, NULL);
        h_free(&r);
    }
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
                       "\"c\", \"major\": 1, \"minor\": 11, \"access\": \"r\"}]}");
    const char *id = start(strcmp(tier, "kernel") == 0 ? "devk" : "devc");
    char *list = devices_list(id);
    cr_expect(!has_line(list, "a *:* rwm"), "%s: the deny-all rule was not applied:\n%s", tier,
              list);
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

/* Without rules the device cgroup is left as the parent has it (docker
 * always sends rules; `bulkhead do` and bulkheadd send none). */
Test(oci_cgroups, no_device_rules_leave_the_cgroup_as_inherited)
{
    write_config("container", NULL);
    const char *id = start("devnone");
    char *list = devices_list(id);
    cr_expect(has_line(list, "a *:* rwm"), "the device cgroup changed without rules:\n%s", list);
    free(list);
}

Test(oci_cgroups, malformed_device_rules_are_refused)
{
    static const char *const bad[][2] = {
        {"[{\"access\": \"rwm\"}]", "needs a boolean `allow`"},
        {"[{\"allow\": true, \"type\": \"x\"}]", "must be `a`, `c` or `b`"},
        {"[{\"allow\": true, \"type\": \"c\", \"access\": \"rwx\"}]", "letters of `rwm`"},
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
