/* `bulkhead checkpoint` and `restore` (oci/checkpoint.c): at either tier a
 * checkpoint of a running Python process is refused with the layer CRIU
 * would lose, and the process keeps running with its state, untouched;
 * restore is refused and creates nothing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"

static char tmp[256];
static char id[64];
static bool created;

static void bh(const char *const *args, int timeout_s, struct run_result *r)
{
    h_bulkhead_in(tmp, args, timeout_s, r);
}

static void setup(void)
{
    h_build();
    snprintf(tmp, sizeof(tmp), "/tmp/bh-ckpt-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    chmod(tmp, 0711);
    h_bundle_skeleton(tmp);
    created = false;
}

static void teardown(void)
{
    if (created) {
        struct run_result r;
        bh((const char *const[]){"delete", "--force", id, NULL}, 30, &r);
        h_free(&r);
    }
    h_remove_tree(tmp);
}

TestSuite(checkpoint, .init = setup, .fini = teardown, .timeout = 120);

/* A Python process whose state (a counter it keeps in memory and mirrors in
 * /tmp/n) must survive the refused checkpoint. */
static void start_counter(const char *tier)
{
    char cfg[4096];
    snprintf(
        cfg, sizeof(cfg),
        "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true},"
        " \"annotations\": {\"dev.bulkhead.tier\": \"%s\"},"
        " \"process\": {\"args\": [\"/usr/bin/python3\", \"-c\", \"import time\\nn = 0\\n"
        "while True:\\n    n += 1\\n    open('/tmp/n.new', 'w').write(str(n))\\n"
        "    __import__('os').rename('/tmp/n.new', '/tmp/n')\\n    time.sleep(0.02)\\n\"],"
        " \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": [\"PATH=/usr/bin\"]},"
        " \"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\","
        " \"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": \"proc\","
        " \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", \"source\":"
        " \"tmpfs\"}], \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"},"
        " {\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}]}}",
        tier);
    h_write_file(tmp, "bundle/config.json", cfg);
    snprintf(id, sizeof(id), "ckpt-%s-%d", tier, (int)getpid());
    char bundle[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    bh((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "create at the %s tier: %s", tier, r.err);
    h_free(&r);
    created = true;
    bh((const char *const[]){"start", id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "start: %s", r.err);
    h_free(&r);
}

/* The counter, read inside the container. */
static long counter(void)
{
    struct run_result r;
    for (int i = 0; i < 200; i++) {
        bh((const char *const[]){"exec", id, "/usr/bin/cat", "/tmp/n", NULL}, 30, &r);
        long n = r.status == 0 ? atol(r.out) : 0;
        h_free(&r);
        if (n > 0)
            return n;
        usleep(50000);
    }
    cr_assert_fail("the counter never appeared in /tmp/n");
    return 0;
}

static char *state_field(const char *field)
{
    struct run_result r;
    bh((const char *const[]){"state", id, NULL}, 30, &r);
    cr_assert_eq(r.status, 0, "state: %s", r.err);
    char *p = strstr(r.out, field);
    char *v = strdup(p ? p : "");
    char *end = strchr(v, ',');
    if (end)
        *end = '\0';
    h_free(&r);
    return v;
}

static void refused_and_untouched(const char *tier, const char *layer)
{
    start_counter(tier);
    long before = counter();
    char *pid = state_field("\"pid\"");
    char images[300];
    snprintf(images, sizeof(images), "%s/images", tmp);
    struct run_result r;
    bh((const char *const[]){"checkpoint", "--image-path", images, "--leave-running", id, NULL}, 60,
       &r);
    cr_expect_eq(r.status, 125, "checkpoint exit %d", r.status);
    cr_expect(strstr(r.err, "refused") != NULL && strstr(r.err, layer) != NULL &&
                  strstr(r.err, tier) != NULL,
              "the refusal does not name the %s tier and `%s`: %s", tier, layer, r.err);
    h_free(&r);
    cr_expect_neq(access(images, F_OK), 0, "an image directory was made");
    /* Same process, still counting from where it was. */
    char *pid_after = state_field("\"pid\"");
    cr_expect_str_eq(pid_after, pid);
    char *status = state_field("\"status\"");
    cr_expect(strstr(status, "running") != NULL, "%s", status);
    long after = 0;
    for (int i = 0; i < 100 && (after = counter()) <= before; i++)
        usleep(20000);
    cr_expect_gt(after, before, "the Python process's counter stopped at %ld", before);
    free(pid);
    free(pid_after);
    free(status);
}

Test(checkpoint, container_tier_refused_process_keeps_state)
{
    refused_and_untouched("container", "Landlock");
}

/* The container tier's filter notifies io_setup to the sentry (the AIO cap):
 * a checkpoint would lose that listener too, and the refusal says so. */
Test(checkpoint, container_tier_refusal_names_the_aio_listener)
{
    refused_and_untouched("container", "caps the sandbox's Linux AIO contexts");
}

Test(checkpoint, kernel_tier_refused_process_keeps_state)
{
    h_require_kernel_tier();
    refused_and_untouched("kernel", "notification listeners");
}

Test(checkpoint, stopped_or_missing_container)
{
    struct run_result r;
    bh((const char *const[]){"checkpoint", "no-such-container", NULL}, 30, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "no-such-container") != NULL, "%s", r.err);
    h_free(&r);
}

Test(checkpoint, restore_refused_creates_nothing)
{
    char bundle[300], images[300], p[400];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(images, sizeof(images), "%s/images", tmp);
    cr_assert_eq(mkdir(images, 0700), 0);
    struct run_result r;
    bh((const char *const[]){"restore", "--detach", "--bundle", bundle, "--image-path", images,
                             "restored", NULL},
       30, &r);
    cr_expect_eq(r.status, 125, "restore exit %d", r.status);
    cr_expect(strstr(r.err, "refused") != NULL && strstr(r.err, "Landlock") != NULL &&
                  strstr(r.err, "notification listeners") != NULL,
              "%s", r.err);
    h_free(&r);
    snprintf(p, sizeof(p), "%s/root/restored", tmp);
    cr_expect_neq(access(p, F_OK), 0, "restore left state %s", p);
    bh((const char *const[]){"state", "restored", NULL}, 30, &r);
    cr_expect_neq(r.status, 0, "a container `restored` exists");
    h_free(&r);
}

/* runc's --parent-path checks come first and name the flag: an absolute
 * path, and one that is not a directory under --image-path, are refused. */
Test(checkpoint, parent_path_checked_as_runc_does)
{
    start_counter("container");
    char images[300], parent[400];
    snprintf(images, sizeof(images), "%s/images", tmp);
    snprintf(parent, sizeof(parent), "%s/parent-dir", tmp);
    cr_assert_eq(mkdir(images, 0700), 0);
    struct run_result r;
    bh((const char *const[]){"checkpoint", "--pre-dump", "--parent-path", parent, "--image-path",
                             images, id, NULL},
       30, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "--parent-path") != NULL && strstr(r.err, "relative") != NULL, "%s",
              r.err);
    h_free(&r);
    bh((const char *const[]){"checkpoint", "--parent-path", "./parent-dir", "--image-path", images,
                             id, NULL},
       30, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "invalid --parent-path") != NULL &&
                  strstr(r.err, "No such file or directory") != NULL,
              "%s", r.err);
    h_free(&r);
    /* A parent that is there passes the check: the refusal is then the tier's. */
    snprintf(parent, sizeof(parent), "%s/parent-dir", images);
    cr_assert_eq(mkdir(parent, 0700), 0);
    bh((const char *const[]){"checkpoint", "--parent-path", "parent-dir", "--image-path", images,
                             id, NULL},
       30, &r);
    cr_expect_eq(r.status, 125);
    cr_expect(strstr(r.err, "Landlock") != NULL, "%s", r.err);
    h_free(&r);
}
