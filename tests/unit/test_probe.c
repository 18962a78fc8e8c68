/* Tier verification without a sandbox: the probe's report format, the tier
 * rule, the test hook that may only lower the tier, JSON round trips, and
 * the outside checks against processes that are not confined at all (which
 * must never verify as anything but none or process). */
#include <criterion/criterion.h>
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "probe-report.h"
#include "probe.h"

#ifndef BH_TEST_HOOKS
#error                                                                                             \
    "the tests are built by make test, test-run, unit or e2e (into build/test, with BH_TEST_HOOKS)"
#endif

/* Everything the probe reports at the kernel tier, all passing. */
static char *full_report(const char *override_name, const char *override_result, bool with_end)
{
    static const char *const names[] = {
        BH_CHECK_SECCOMP,        BH_CHECK_NO_NEW_PRIVS,  BH_CHECK_CAPS,        BH_CHECK_REFUSED,
        BH_CHECK_BROKER_REFUSED, BH_CHECK_CONFINED_OPEN, BH_CHECK_NET_LO_ONLY, BH_CHECK_LANDLOCK,
        BH_CHECK_SENTRY_INSIDE,  BH_CHECK_CGROUP_INSIDE,
    };
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fprintf(f, "%s %d\nfact ns.user 4026532000\n", BH_PROBE_MAGIC, BH_PROBE_VERSION);
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *res = "pass";
        if (override_name && strcmp(names[i], override_name) == 0)
            res = override_result;
        fprintf(f, "check %s %s detail of %s\n", names[i], res, names[i]);
    }
    if (with_end)
        fprintf(f, "%s\n", BH_PROBE_END);
    fclose(f);
    return buf;
}

/* The outside checks a live kernel-tier sandbox passes. */
static void add_outside_pass(struct bh_tier_report *r)
{
    static const char *const outside[] = {"ns_user", "ns_pid",      "ns_mnt",       "ns_net",
                                          "ns_ipc",  "ns_uts",      "ns_cgroup",    "ns_time",
                                          "guests",  "sentry_pid1", "cgroup_limits"};
    for (size_t i = 0; i < sizeof(outside) / sizeof(outside[0]); i++) {
        enum bh_tier t = strncmp(outside[i], "ns_c", 4) == 0 ||
                                 strcmp(outside[i], "ns_time") == 0 ||
                                 strcmp(outside[i], "sentry_pid1") == 0
                             ? BH_TIER_KERNEL
                             : BH_TIER_CONTAINER;
        bh_tier_report_add(r, outside[i], BH_CHECK_PASS, t, "ok");
    }
}

static struct bh_tier_report *report_for(enum bh_tier checked, const char *name, const char *res,
                                         bool with_end)
{
    char *text = full_report(name, res, with_end);
    struct bh_tier_report *r = bh_tier_report_new("host", checked);
    struct bh_error err = {0};
    cr_assert_eq(bh_tier_report_parse_probe(r, text, &err), 0, "%s", err.msg);
    free(text);
    add_outside_pass(r);
    bh_tier_report_compute(r);
    return r;
}

Test(probe, all_checks_pass_verifies_kernel)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, NULL, NULL, true);
    cr_assert_eq(r->tier, BH_TIER_KERNEL, "got %s", bh_tier_name(r->tier));
    const struct bh_check *c = bh_tier_report_find(r, BH_CHECK_LANDLOCK);
    cr_assert_not_null(c);
    cr_assert_str_eq(c->detail, "detail of landlock");
    cr_assert_eq(c->required_for, BH_TIER_KERNEL);
    bh_tier_report_free(r);
}

/* A check that could not be recorded (out of memory) must not leave a
 * report that verifies a tier: it verifies none. */
Test(probe, an_incomplete_report_verifies_nothing)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, NULL, NULL, true);
    cr_assert_eq(r->tier, BH_TIER_KERNEL);
    r->incomplete = true;
    bh_tier_report_compute(r);
    cr_assert_eq(r->tier, BH_TIER_NONE, "got %s", bh_tier_name(r->tier));
    bh_tier_report_free(r);
}

Test(probe, kernel_only_failure_gives_container)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    const char *kernel_only[] = {BH_CHECK_LANDLOCK,      BH_CHECK_BROKER_REFUSED,
                                 BH_CHECK_CONFINED_OPEN, BH_CHECK_NET_LO_ONLY,
                                 BH_CHECK_NO_NEW_PRIVS,  BH_CHECK_SENTRY_INSIDE};
    for (size_t i = 0; i < sizeof(kernel_only) / sizeof(kernel_only[0]); i++) {
        struct bh_tier_report *r = report_for(BH_TIER_KERNEL, kernel_only[i], "fail", true);
        cr_assert_eq(r->tier, BH_TIER_CONTAINER, "%s failed: got %s", kernel_only[i],
                     bh_tier_name(r->tier));
        bh_tier_report_free(r);
    }
}

Test(probe, skipped_required_check_does_not_pass)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, BH_CHECK_BROKER_REFUSED, "skip", true);
    cr_assert_eq(r->tier, BH_TIER_CONTAINER);
    bh_tier_report_free(r);
}

Test(probe, informational_check_never_lowers)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, BH_CHECK_CGROUP_INSIDE, "skip", true);
    cr_assert_eq(r->tier, BH_TIER_KERNEL);
    bh_tier_report_free(r);
}

Test(probe, container_failure_gives_process_or_none)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, BH_CHECK_CAPS, "fail", true);
    cr_assert_eq(r->tier, BH_TIER_PROCESS);
    bh_tier_report_free(r);
    r = report_for(BH_TIER_KERNEL, BH_CHECK_SECCOMP, "fail", true);
    cr_assert_eq(r->tier, BH_TIER_NONE);
    bh_tier_report_free(r);
}

Test(probe, container_probe_never_verifies_kernel)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_CONTAINER, NULL, NULL, true);
    cr_assert_eq(r->tier, BH_TIER_CONTAINER);
    bh_tier_report_free(r);
}

Test(probe, truncated_report_fails_closed)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, NULL, NULL, false);
    const struct bh_check *c = bh_tier_report_find(r, "probe_complete");
    cr_assert_not_null(c);
    cr_assert_eq(c->result, BH_CHECK_FAIL);
    cr_assert_lt(r->tier, BH_TIER_CONTAINER);
    bh_tier_report_free(r);

    /* A check the probe never printed counts as failed. */
    r = bh_tier_report_new("host", BH_TIER_KERNEL);
    cr_assert_eq(
        bh_tier_report_parse_probe(r, "bulkhead-probe 1\ncheck seccomp pass x\nend\n", NULL), 0);
    c = bh_tier_report_find(r, BH_CHECK_LANDLOCK);
    cr_assert_not_null(c);
    cr_assert_eq(c->result, BH_CHECK_FAIL);
    cr_assert_str_eq(c->detail, "missing from the probe's report");
    bh_tier_report_free(r);
}

Test(probe, bad_header_and_version_are_refused)
{
    struct bh_error err = {0};
    struct bh_tier_report *r = bh_tier_report_new("host", BH_TIER_KERNEL);
    cr_assert_eq(bh_tier_report_parse_probe(r, "hello\nend\n", &err), -1);
    cr_assert(strstr(err.msg, "bulkhead-probe") != NULL, "%s", err.msg);
    cr_assert_eq(bh_tier_report_parse_probe(r, "bulkhead-probe 99\nend\n", &err), -1);
    cr_assert(strstr(err.msg, "version 99") != NULL, "%s", err.msg);
    cr_assert_eq(bh_tier_report_parse_probe(r, "", &err), -1);
    bh_tier_report_free(r);
}

Test(probe, invalid_result_word_is_a_failure)
{
    struct bh_tier_report *r = bh_tier_report_new("host", BH_TIER_KERNEL);
    cr_assert_eq(
        bh_tier_report_parse_probe(r, "bulkhead-probe 1\ncheck landlock maybe x\nend\n", NULL), 0);
    cr_assert_eq(bh_tier_report_find(r, BH_CHECK_LANDLOCK)->result, BH_CHECK_FAIL);
    bh_tier_report_free(r);
}

Test(probe, test_break_lowers_and_never_raises)
{
    setenv("BULKHEAD_TEST_BREAK", BH_CHECK_LANDLOCK, 1);
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, NULL, NULL, true);
    cr_assert_eq(r->tier, BH_TIER_CONTAINER);
    const struct bh_check *c = bh_tier_report_find(r, BH_CHECK_LANDLOCK);
    cr_assert_eq(c->result, BH_CHECK_FAIL);
    cr_assert(strstr(c->detail, "BULKHEAD_TEST_BREAK") != NULL);
    bh_tier_report_free(r);

    /* Naming a failed check, or one that does not exist, raises nothing. */
    setenv("BULKHEAD_TEST_BREAK", "capabilities,no_such_check", 1);
    r = report_for(BH_TIER_KERNEL, BH_CHECK_CAPS, "fail", true);
    cr_assert_eq(r->tier, BH_TIER_PROCESS);
    cr_assert_eq(bh_tier_report_find(r, BH_CHECK_CAPS)->result, BH_CHECK_FAIL);
    bh_tier_report_free(r);

    setenv("BULKHEAD_TEST_BREAK", "seccomp , ns_user", 1);
    r = report_for(BH_TIER_KERNEL, NULL, NULL, true);
    cr_assert_eq(r->tier, BH_TIER_NONE);
    bh_tier_report_free(r);
    unsetenv("BULKHEAD_TEST_BREAK");
}

Test(probe, merged_checks_keep_the_failure)
{
    struct bh_tier_report *r = bh_tier_report_new("x", BH_TIER_KERNEL);
    bh_tier_report_add(r, "seccomp", BH_CHECK_PASS, BH_TIER_CONTAINER, "inside ok");
    bh_tier_report_add(r, "seccomp", BH_CHECK_FAIL, BH_TIER_CONTAINER, "outside: mode 0");
    bh_tier_report_add(r, "seccomp", BH_CHECK_PASS, BH_TIER_CONTAINER, "again ok");
    cr_assert_eq(r->n_checks, 1);
    cr_assert_eq(r->checks[0].result, BH_CHECK_FAIL);
    cr_assert_str_eq(r->checks[0].detail, "inside ok; outside: mode 0; again ok");
    bh_tier_report_free(r);
}

Test(probe, json_round_trip)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, BH_CHECK_LANDLOCK, "fail", true);
    char *json = bh_tier_report_json(r);
    cr_assert_not_null(json);
    cr_assert(strstr(json, "\"tier\": \"container\"") != NULL, "%s", json);
    struct bh_tier_report *back = NULL;
    struct bh_error err = {0};
    cr_assert_eq(bh_tier_report_from_json(json, &back, &err), 0, "%s", err.msg);
    cr_assert_eq(back->n_checks, r->n_checks);
    cr_assert_eq(back->tier, r->tier);
    cr_assert_str_eq(back->checks[2].name, r->checks[2].name);
    cr_assert_eq(back->checks[7].result, r->checks[7].result);
    free(json);
    bh_tier_report_free(back);
    bh_tier_report_free(r);
    cr_assert_eq(bh_tier_report_from_json("{\"tier\": 3}", &back, &err), -1);
}

Test(probe, text_lists_every_check_and_the_tier)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    struct bh_tier_report *r = report_for(BH_TIER_KERNEL, NULL, NULL, true);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    bh_tier_report_print(r, f);
    fclose(f);
    for (size_t i = 0; i < r->n_checks; i++)
        cr_assert(strstr(buf, r->checks[i].name) != NULL, "%s missing", r->checks[i].name);
    cr_assert(strstr(buf, "tier: kernel\n") != NULL, "%s", buf);
    free(buf);
    bh_tier_report_free(r);
}

/* A plain child of this test stands in for the guest of a "sentry": it
 * shares every namespace with the host, so nothing may verify. */
static pid_t spawn_child(bool with_filter)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        if (with_filter) {
            struct sock_filter allow = BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
            struct sock_fprog prog = {.len = 1, .filter = &allow};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
                prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                _exit(1);
        }
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(p[1]);
    char c;
    cr_assert_eq(read(p[0], &c, 1), 1);
    close(p[0]);
    return pid;
}

static void reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(probe, live_checks_refuse_an_unconfined_process)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    pid_t child = spawn_child(false);
    struct bh_tier_report *r = NULL;
    struct bh_live_target t = {.sentry_pid = getpid(), .tier = BH_TIER_KERNEL};
    struct bh_error err = {0};
    int rc = bh_probe_check_live(&t, &r, &err);
    reap(child);
    cr_assert_eq(rc, 0, "%s", err.msg);
    cr_assert_eq(r->tier, BH_TIER_NONE, "got %s", bh_tier_name(r->tier));
    cr_assert_eq(bh_tier_report_find(r, "ns_user")->result, BH_CHECK_FAIL);
    cr_assert_eq(bh_tier_report_find(r, "sentry_pid1")->result, BH_CHECK_FAIL);
    cr_assert_eq(bh_tier_report_find(r, "guests")->result, BH_CHECK_PASS);
    cr_assert_eq(bh_tier_report_find(r, BH_CHECK_SECCOMP)->result, BH_CHECK_FAIL);
    bh_tier_report_free(r);
}

Test(probe, live_checks_see_a_filter_but_not_isolation)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    pid_t child = spawn_child(true);
    struct bh_tier_report *r = NULL;
    struct bh_live_target t = {.sentry_pid = getpid(), .tier = BH_TIER_KERNEL};
    int rc = bh_probe_check_live(&t, &r, NULL);
    reap(child);
    cr_assert_eq(rc, 0);
    cr_assert_eq(bh_tier_report_find(r, BH_CHECK_SECCOMP)->result, BH_CHECK_PASS);
    cr_assert_eq(bh_tier_report_find(r, BH_CHECK_NO_NEW_PRIVS)->result, BH_CHECK_PASS);
    cr_assert_eq(r->tier, BH_TIER_PROCESS, "got %s", bh_tier_name(r->tier));
    bh_tier_report_free(r);
}

Test(probe, live_checks_of_a_gone_sentry_fail)
{
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    waitpid(child, NULL, 0);
    struct bh_tier_report *r = NULL;
    struct bh_live_target t = {.sentry_pid = child, .tier = BH_TIER_KERNEL};
    cr_assert_eq(bh_probe_check_live(&t, &r, NULL), 0);
    cr_assert_eq(bh_tier_report_find(r, "sentry_pid1")->result, BH_CHECK_FAIL);
    cr_assert_eq(bh_tier_report_find(r, "guests")->result, BH_CHECK_FAIL);
    cr_assert_eq(r->tier, BH_TIER_NONE);
    bh_tier_report_free(r);
}

Test(probe, capabilities_may_hold_only_what_is_configured)
{
    unsetenv("BULKHEAD_TEST_BREAK");
    pid_t child = spawn_child(false);
    struct bh_tier_report *none = NULL, *all = NULL;
    struct bh_live_target t = {.sentry_pid = getpid(), .tier = BH_TIER_KERNEL, .caps = 0};
    cr_assert_eq(bh_probe_check_live(&t, &none, NULL), 0);
    t.caps = UINT64_MAX;
    cr_assert_eq(bh_probe_check_live(&t, &all, NULL), 0);
    reap(child);
    /* This test runs as host root: its child holds capabilities. */
    if (geteuid() == 0)
        cr_assert_eq(bh_tier_report_find(none, BH_CHECK_CAPS)->result, BH_CHECK_FAIL);
    cr_assert_eq(bh_tier_report_find(all, BH_CHECK_CAPS)->result, BH_CHECK_PASS);
    bh_tier_report_free(none);
    bh_tier_report_free(all);
}

/* ---- cgroup_limits against a fake cgroup tree (BULKHEAD_CGROUP_ROOT) -------- */

/* Mirrors this process's cgroups under root with the given limit values, in
 * the layout /proc/self/cgroup shows (v1 controllers, or v2 when only the
 * unified line exists). */
static void fake_limits(const char *root, const char *mem, const char *pids)
{
    char line[512];
    FILE *f = fopen("/proc/self/cgroup", "re");
    cr_assert_not_null(f);
    bool v1 = false;
    char v2path[512] = "";
    while (fgets(line, sizeof(line), f) != NULL) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c2 = '\0';
        const char *ctrls = c1 + 1, *path = c2 + 1;
        const char *what = NULL, *file = NULL, *value = NULL;
        if (strcmp(ctrls, "memory") == 0)
            what = "memory", file = "memory.limit_in_bytes", value = mem;
        else if (strcmp(ctrls, "pids") == 0)
            what = "pids", file = "pids.max", value = pids;
        else if (*ctrls == '\0')
            snprintf(v2path, sizeof(v2path), "%s", path);
        if (what == NULL)
            continue;
        v1 = true;
        char cmd[1400];
        snprintf(cmd, sizeof(cmd), "mkdir -p '%s/%s%s' && printf '%%s\\n' '%s' > '%s/%s%s/%s'",
                 root, what, path, value, root, what, path, file);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
    fclose(f);
    if (!v1) {
        char cmd[2000];
        snprintf(cmd, sizeof(cmd),
                 "mkdir -p '%s%s' && touch '%s/cgroup.controllers' && printf '%%s\\n' '%s' > "
                 "'%s%s/memory.max' && printf '%%s\\n' '%s' > '%s%s/pids.max'",
                 root, v2path, root, strcmp(mem, "9223372036854771712") == 0 ? "max" : mem, root,
                 v2path, pids, root, v2path);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
    }
}

static const char *limits_result(const char *mem, const char *pids, const char **detail)
{
    char root[] = "/tmp/bh-unit-cg-XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    fake_limits(root, mem, pids);
    setenv("BULKHEAD_CGROUP_ROOT", root, 1);
    unsetenv("BULKHEAD_TEST_BREAK");
    pid_t child = spawn_child(false);
    struct bh_tier_report *r = NULL;
    struct bh_live_target t = {.sentry_pid = getpid(), .tier = BH_TIER_KERNEL};
    cr_assert_eq(bh_probe_check_live(&t, &r, NULL), 0);
    reap(child);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    cr_assert_eq(system(cmd), 0);
    unsetenv("BULKHEAD_CGROUP_ROOT");
    const struct bh_check *c = bh_tier_report_find(r, "cgroup_limits");
    cr_assert_not_null(c);
    static char saved[1024];
    snprintf(saved, sizeof(saved), "%s", c->detail);
    *detail = saved;
    const char *res = bh_check_result_name(c->result);
    bh_tier_report_free(r);
    return res;
}

Test(probe, cgroup_limits_fails_when_a_limit_is_max)
{
    const char *d = NULL;
    cr_assert_str_eq(limits_result("268435456", "64", &d), "pass", "%s", d);
    cr_assert_str_eq(limits_result("9223372036854771712", "64", &d), "fail", "%s", d);
    cr_assert(strstr(d, "no memory limit") != NULL, "%s", d);
    cr_assert_str_eq(limits_result("268435456", "max", &d), "fail", "%s", d);
    cr_assert(strstr(d, "no pids limit") != NULL, "%s", d);
}
