/* `bulkhead tier` end to end: on this machine it verifies kernel with every
 * check passing; a check made to fail (BULKHEAD_TEST_BREAK) lowers the tier,
 * makes `tier` exit non-zero and makes `bulkhead do --tier kernel` refuse;
 * a running OCI container is checked live with --container. */
#include <criterion/criterion.h>
#include <jansson.h>

#include "attacks/harness.h"
#include "cleanup.h"

/* Runs `bulkhead tier ARGS` with BULKHEAD_TEST_BREAK=brk (NULL: unset). */
static struct run_result tier_run(const char *brk, const char *a1, const char *a2, const char *a3)
{
    char *bh = h_path("bulkhead");
    if (access(bh, X_OK) < 0)
        h_skip_kernel("%s is not built", bh);
    char *argv[] = {bh, "tier", (char *)a1, (char *)a2, (char *)a3, NULL};
    char env[128];
    snprintf(env, sizeof(env), "BULKHEAD_TEST_BREAK=%s", brk ? brk : "");
    char *extra[] = {env, NULL};
    struct run_result r = h_run(argv, extra, NULL, 120);
    free(bh);
    /* 125: the verification itself could not run (no sandbox core yet). */
    if (r.status == 125 && strstr(r.err, "cannot verify the tier") != NULL)
        h_skip_kernel("the probe sandbox does not run yet: %.300s", r.err);
    return r;
}

static json_t *parse_report(const struct run_result *r)
{
    json_error_t e;
    json_t *doc = json_loads(r->out, 0, &e);
    cr_assert_not_null(doc, "not JSON (%s): %s\nstderr: %s", e.text, r->out, r->err);
    return doc;
}

static const char *check_result(json_t *doc, const char *name)
{
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "checks"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), name) == 0)
            return json_string_value(json_object_get(c, "result"));
    }
    return NULL;
}

Test(tier, this_host_verifies_kernel_with_every_check, .timeout = 180)
{
    struct run_result r = tier_run(NULL, NULL, NULL, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s\n%s", r.status, r.out, r.err);
    cr_assert(strstr(r.out, "tier: kernel\n") != NULL, "%s", r.out);
    static const char *const expected[] = {
        "seccomp",          "no_new_privs",   "capabilities",
        "refused_syscalls", "broker_refused", "confined_open",
        "net_lo_only",      "landlock",       "sentry_pid1_inside",
        "ns_user",          "ns_pid",         "ns_mnt",
        "ns_net",           "ns_ipc",         "ns_uts",
        "ns_cgroup",        "ns_time",        "sentry_pid1",
        "cgroup_limits",    "guests",         "probe_complete",
    };
    for (size_t i = 0; i < BH_ARRAY_SIZE(expected); i++)
        cr_expect(strstr(r.out, expected[i]) != NULL, "check %s is not listed", expected[i]);
    cr_expect(strstr(r.out, "  fail ") == NULL, "a check failed:\n%s", r.out);
    h_free(&r);
}

Test(tier, json_report_lists_every_check, .timeout = 180)
{
    struct run_result r = tier_run(NULL, "--json", NULL, NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s", r.status, r.err);
    json_t *doc = parse_report(&r);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "tier")), "kernel");
    cr_assert_str_eq(json_string_value(json_object_get(doc, "checked")), "kernel");
    json_t *checks = json_object_get(doc, "checks");
    cr_assert_geq(json_array_size(checks), 20);
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c)
    {
        const char *res = json_string_value(json_object_get(c, "result"));
        const char *req = json_string_value(json_object_get(c, "required_for"));
        cr_expect(strcmp(res, "pass") == 0 || strcmp(req, "none") == 0, "%s: %s (%s)",
                  json_string_value(json_object_get(c, "name")), res,
                  json_string_value(json_object_get(c, "detail")));
    }
    json_decref(doc);
    h_free(&r);
}

Test(tier, a_broken_kernel_check_gives_container_and_exit_1, .timeout = 180)
{
    struct run_result r = tier_run("landlock", "--json", NULL, NULL);
    cr_assert_eq(r.status, 1, "exit %d\n%s", r.status, r.err);
    json_t *doc = parse_report(&r);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "tier")), "container");
    cr_assert_str_eq(check_result(doc, "landlock"), "fail");
    cr_assert(strstr(r.err, "tier kernel is not verified") != NULL, "%s", r.err);
    cr_assert(strstr(r.err, "landlock") != NULL, "%s", r.err);
    json_decref(doc);
    h_free(&r);

    /* Asking only for container then succeeds. */
    r = tier_run("landlock", "--tier", "container", NULL);
    cr_assert_eq(r.status, 0, "exit %d\n%s\n%s", r.status, r.out, r.err);
    cr_assert(strstr(r.out, "tier: container\n") != NULL, "%s", r.out);
    h_free(&r);
}

Test(tier, a_broken_container_check_gives_less, .timeout = 180)
{
    struct run_result r = tier_run("capabilities", NULL, NULL, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.out, "tier: process\n") != NULL, "%s", r.out);
    h_free(&r);
    r = tier_run("seccomp", "--tier", "container", NULL);
    cr_assert_eq(r.status, 1);
    cr_assert(strstr(r.out, "tier: none\n") != NULL, "%s", r.out);
    h_free(&r);
}

Test(tier, do_refuses_the_kernel_tier_when_a_check_fails, .timeout = 180)
{
    char *bh = h_path("bulkhead");
    if (access(bh, X_OK) < 0)
        h_skip_kernel("%s is not built", bh);
    char *argv[] = {bh, "do", "--tier", "kernel", "--", "/bin/echo", "ran", NULL};
    struct run_result ok = h_run(argv, NULL, NULL, 120);
    if (ok.status != 0)
        h_skip_kernel("`bulkhead do --tier kernel` does not run yet: %.300s", ok.err);
    cr_assert(strstr(ok.out, "ran") != NULL);
    h_free(&ok);

    char *extra[] = {"BULKHEAD_TEST_BREAK=broker_refused", NULL};
    struct run_result r = h_run(argv, extra, NULL, 120);
    cr_assert_neq(r.status, 0, "do --tier kernel ran with a failed check");
    cr_assert(strstr(r.out, "ran") == NULL, "the command ran: %s", r.out);
    cr_assert(strstr(r.err, "broker_refused") != NULL, "the refusal does not say why: %s", r.err);
    h_free(&r);
    free(bh);
}

Test(tier, bad_arguments_are_refused)
{
    struct run_result r = tier_run(NULL, "--tier", "vm", NULL);
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "use kernel or container") != NULL, "%s", r.err);
    h_free(&r);
    r = tier_run(NULL, "--bogus", NULL, NULL);
    cr_assert_eq(r.status, 125);
    h_free(&r);
    r = tier_run(NULL, "--container", "no-such-container", "--root=/run/bh-tier-test-none");
    cr_assert_eq(r.status, 125);
    cr_assert(strstr(r.err, "does not exist") != NULL, "%s", r.err);
    h_free(&r);
}

/* ---- a running OCI container, checked live ---------------------------------- */

static char bundle[64], root[64], cid[64];

static void oci_cleanup(void)
{
    if (cid[0]) {
        char *bh = h_path("bulkhead");
        char *argv[] = {bh, "--root", root, "delete", "--force", cid, NULL};
        struct run_result r = h_run(argv, NULL, NULL, 60);
        h_free(&r);
        free(bh);
    }
    /* The whole bundle: `create` leaves the rootfs's mount points behind. */
    if (bundle[0]) {
        h_remove_tree(bundle);
        bundle[0] = '\0';
    }
    if (root[0]) {
        h_remove_tree(root);
        root[0] = '\0';
    }
}

Test(tier, running_container_is_checked_live, .fini = oci_cleanup, .timeout = 180)
{
    char *bh = h_path("bulkhead");
    if (access(bh, X_OK) < 0)
        h_skip_kernel("%s is not built", bh);
    snprintf(bundle, sizeof(bundle), "/tmp/bh-tier-bundle-XXXXXX");
    snprintf(root, sizeof(root), "/run/bh-tier-root-XXXXXX");
    cr_assert_not_null(mkdtemp(bundle));
    cr_assert_not_null(mkdtemp(root));
    chmod(root, 0711);
    snprintf(cid, sizeof(cid), "tier-live-%d", (int)getpid());
    /* The container's whole root: one static program that sleeps. */
    char src[128], rootfs[128], sleeper[160];
    snprintf(src, sizeof(src), "%s/sleep.c", bundle);
    snprintf(rootfs, sizeof(rootfs), "%s/rootfs", bundle);
    snprintf(sleeper, sizeof(sleeper), "%s/sleep", rootfs);
    cr_assert_eq(mkdir(rootfs, 0755), 0);
    FILE *f = fopen(src, "we");
    cr_assert_not_null(f);
    fputs("#include <unistd.h>\nint main(void) { sleep(60); return 0; }\n", f);
    fclose(f);
    char *cc[] = {"/usr/bin/cc", "-static", "-O2", "-o", sleeper, src, NULL};
    struct run_result c = h_run(cc, NULL, NULL, 120);
    cr_assert_eq(c.status, 0, "cc: %s", c.err);
    h_free(&c);

    char cfg[128];
    snprintf(cfg, sizeof(cfg), "%s/config.json", bundle);
    f = fopen(cfg, "we");
    cr_assert_not_null(f);
    fprintf(f, "{\"ociVersion\":\"1.2.0\",\"root\":{\"path\":\"rootfs\",\"readonly\":true},"
               "\"process\":{\"args\":[\"/sleep\"],\"cwd\":\"/\","
               "\"env\":[\"PATH=/usr/bin:/bin\"],\"user\":{\"uid\":0,\"gid\":0}},"
               "\"hostname\":\"t\",\"linux\":{\"namespaces\":[{\"type\":\"pid\"},"
               "{\"type\":\"mount\"},{\"type\":\"network\"},{\"type\":\"ipc\"},{\"type\":\"uts\"}],"
               "\"resources\":{\"memory\":{\"limit\":268435456},\"pids\":{\"limit\":32}}},"
               "\"annotations\":{\"dev.bulkhead.tier\":\"kernel\"}}\n");
    fclose(f);

    char *create[] = {bh, "--root", root, "create", "--bundle", bundle, cid, NULL};
    struct run_result r = h_run(create, NULL, NULL, 60);
    if (r.status != 0) {
        /* A skip ends the test here, before .fini: clean up first. */
        cid[0] = '\0';
        char why[400];
        snprintf(why, sizeof(why), "%.300s", r.err);
        h_free(&r);
        oci_cleanup();
        h_skip_kernel("`bulkhead create` does not run yet: %s", why);
    }
    h_free(&r);
    char *start[] = {bh, "--root", root, "start", cid, NULL};
    r = h_run(start, NULL, NULL, 60);
    cr_assert_eq(r.status, 0, "start: %s", r.err);
    h_free(&r);

    char *tier[] = {bh, "--root", root, "tier", "--container", cid, "--json", NULL};
    r = h_run(tier, NULL, NULL, 60);
    cr_assert_eq(r.status, 0, "exit %d\n%s\n%s", r.status, r.out, r.err);
    json_t *doc = parse_report(&r);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "subject")), cid);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "tier")), "kernel");
    cr_assert_str_eq(check_result(doc, "sentry_pid1"), "pass");
    cr_assert_str_eq(check_result(doc, "seccomp"), "pass");
    cr_assert_str_eq(check_result(doc, "cgroup_limits"), "pass");
    cr_assert_str_eq(check_result(doc, "ns_user"), "pass");
    json_decref(doc);
    h_free(&r);

    /* The test hook lowers a live check as well. */
    char *extra[] = {"BULKHEAD_TEST_BREAK=sentry_pid1", NULL};
    r = h_run(tier, extra, NULL, 60);
    cr_assert_eq(r.status, 1, "exit %d\n%s", r.status, r.err);
    doc = parse_report(&r);
    cr_assert_str_eq(json_string_value(json_object_get(doc, "tier")), "container");
    json_decref(doc);
    h_free(&r);
    free(bh);
}

/* The binaries `make` builds (BULKHEAD_PRODUCTION_BUILD, which `make test`
 * exports; else the parent of the test build) never read the test hook: they
 * do not even hold its name, and a check it names still passes. */
Test(tier, the_production_build_has_no_test_hook, .timeout = 180)
{
    const char *env = getenv("BULKHEAD_PRODUCTION_BUILD");
    char prod[PATH_MAX];
    if (env != NULL && *env != '\0')
        snprintf(prod, sizeof(prod), "%s", env);
    else
        snprintf(prod, sizeof(prod), "%s/..", h_build());
    static const char *const bins[] = {"bulkhead", "bulkheadd", "bulkhead-sentry"};
    static const char hook[] = "BULKHEAD_TEST_BREAK";
    /* the start-up fault hook (sandbox.c) is in every front end's library */
    static const char fault_hook[] = "BULKHEAD_TEST_FAULT";
    for (size_t i = 0; i < BH_ARRAY_SIZE(bins); i++) {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/%s", prod, bins[i]);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "the production build's %s is not there (run make, or make test)",
                      path);
        cleanup_free char *text = h_read_fd(fd);
        close(fd);
        struct stat st;
        cr_assert_eq(stat(path, &st), 0);
        cr_assert(memmem(text, (size_t)st.st_size, hook, strlen(hook)) == NULL,
                  "%s holds the test hook", path);
        cr_assert(memmem(text, (size_t)st.st_size, fault_hook, strlen(fault_hook)) == NULL,
                  "%s holds the start-up fault hook", path);
    }
    /* The scan can see the hook: the test build's bulkhead holds it. */
    cleanup_free char *mine = h_path("bulkhead");
    int fd = open(mine, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "%s", mine);
    cleanup_free char *text = h_read_fd(fd);
    close(fd);
    struct stat st;
    cr_assert_eq(stat(mine, &st), 0);
    cr_assert(memmem(text, (size_t)st.st_size, hook, strlen(hook)) != NULL,
              "the test build's bulkhead has no hook: was it built by make test?");
    cr_assert(memmem(text, (size_t)st.st_size, fault_hook, strlen(fault_hook)) != NULL,
              "the test build's bulkhead has no start-up fault hook");

    char bh[PATH_MAX + 16];
    snprintf(bh, sizeof(bh), "%s/bulkhead", prod);
    char *argv[] = {bh, "tier", "--json", "--tier", "container", NULL};
    char *extra[] = {"BULKHEAD_TEST_BREAK=capabilities", NULL};
    struct run_result r = h_run(argv, extra, NULL, 120);
    json_t *doc = parse_report(&r);
    const char *res = check_result(doc, "capabilities");
    cr_assert(res != NULL && strcmp(res, "pass") == 0,
              "the production bulkhead obeyed BULKHEAD_TEST_BREAK: capabilities %s\n%s",
              res ? res : "(missing)", r.out);
    cr_assert(strstr(r.out, hook) == NULL, "%s", r.out);
    json_decref(doc);
    h_free(&r);
}
