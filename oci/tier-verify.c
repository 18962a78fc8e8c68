/* `bulkhead tier`: verifies and prints the isolation tier, either of this host
 * (a fresh probe sandbox, see sentry/probe.h) or of a running OCI container
 * (checked live from outside). Exit 0 only when the requested tier is verified. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cleanup.h"
#include "oci-internal.h"
#include "probe.h"

/* The verified tier is below the one asked for. */
#define TIER_EXIT_NOT_VERIFIED 1

struct tier_args {
    bool json;
    bool help;
    const char *tier;
    const char *container;
    const char *root;
};

static void tier_usage(FILE *out)
{
    fprintf(
        out,
        "usage: bulkhead tier [--json] [--tier kernel|container] [--container ID] [--root DIR]\n"
        "\n"
        "Verifies the isolation tier and prints every check with its result.\n"
        "Without --container a probe sandbox of the requested tier (default kernel) is\n"
        "built on this host; with it the running container ID is checked live.\n"
        "Exit status: 0 when the requested tier is verified, 1 when a lower tier is,\n"
        "125 when the verification could not run.\n"
#ifdef BH_TEST_HOOKS
        "BULKHEAD_TEST_BREAK=CHECK[,CHECK] makes those checks fail (this test build only).\n"
#endif
    );
}

static int tier_parse_args(int argc, char **argv, struct tier_args *a, struct bh_error *err)
{
    memset(a, 0, sizeof(*a));
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char **value = NULL;
        if (strcmp(arg, "--json") == 0) {
            a->json = true;
            continue;
        }
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = true;
            continue;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        if (len == 6 && strncmp(arg, "--tier", len) == 0)
            value = &a->tier;
        else if (len == 11 && strncmp(arg, "--container", len) == 0)
            value = &a->container;
        else if (len == 6 && strncmp(arg, "--root", len) == 0)
            value = &a->root;
        else
            return bh_error_set(err, EINVAL,
                                "tier: unknown argument `%s`; see `bulkhead tier --help`", arg);
        if (eq != NULL) {
            *value = eq + 1;
        } else {
            if (i + 1 >= argc)
                return bh_error_set(err, EINVAL, "tier: `%s` needs a value", arg);
            *value = argv[++i];
        }
    }
    return 0;
}

static void list_failures(const struct bh_tier_report *r, enum bh_tier want, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->n_checks && used < size; i++) {
        const struct bh_check *c = &r->checks[i];
        if (c->result != BH_CHECK_PASS && c->required_for != BH_TIER_NONE &&
            c->required_for <= want)
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", c->name);
    }
}

static int check_container(const char *root, const char *id, enum bh_tier *want, bool want_given,
                           struct bh_tier_report **out, struct bh_error *err)
{
    if (oci_id_validate(id, err) < 0)
        return -1;
    cleanup_close int dirfd = -1;
    struct oci_state st = {0};
    if (oci_state_open(root, id, &dirfd, &st, err) < 0)
        return -1;
    if (!want_given)
        *want = st.tier;
    if (st.pid <= 0 || !oci_pid_alive(st.pid, st.pid_start)) {
        oci_state_free(&st);
        return bh_error_set(err, ESRCH,
                            "container `%s` is not running: its sentry is gone, so no tier can "
                            "be verified",
                            id);
    }
    /* The limits it was created with, when the bundle is still readable;
     * otherwise the checks only read them back. */
    struct oci_config cfg;
    memset(&cfg, 0, sizeof(cfg));
    bool have_cfg = st.bundle && oci_config_load(st.bundle, &cfg, NULL) == 0;
    if (have_cfg)
        oci_limits_as_created(st.annotations, &cfg.spec.limits);
    struct bh_live_target target = {
        .sentry_pid = st.pid,
        .tier = st.tier,
        .limits = have_cfg ? &cfg.spec.limits : NULL,
        /* Everything the config grants in any set is the most a guest may hold. */
        .caps = have_cfg ? cfg.spec.process.cap_bounding | cfg.spec.process.cap_effective |
                               cfg.spec.process.cap_permitted | cfg.spec.process.cap_ambient
                         : 0,
    };
    struct bh_tier_report *r = bh_tier_report_new(id, st.tier);
    int rc = bh_probe_check_live(&target, &r, err);
    const char *defaults =
        json_string_value(json_object_get(st.annotations, OCI_ANNOTATION_DEFAULT_LIMITS));
    if (rc == 0) /* information only: cgroup_limits and guest_rlimits check the values */
        bh_tier_report_add(r, "default_limits", BH_CHECK_PASS, BH_TIER_NONE, "%s%s",
                           defaults ? "runtime defaults applied where config.json set none: "
                                    : "config.json sets every limit bulkhead defaults",
                           defaults ? defaults : "");
    if (have_cfg)
        oci_config_free(&cfg);
    oci_state_free(&st);
    if (rc < 0) {
        bh_tier_report_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

int cmd_tier(const struct cli_globals *g, int argc, char **argv)
{
    struct tier_args a;
    struct bh_error err = {0};
    if (tier_parse_args(argc, argv, &a, &err) < 0) {
        cli_report_error(g, "%s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (a.help) {
        tier_usage(stdout);
        return 0;
    }
    enum bh_tier want = BH_TIER_KERNEL;
    if (a.tier != NULL) {
        if (bh_tier_parse(a.tier, &want, &err) < 0 ||
            (want != BH_TIER_KERNEL && want != BH_TIER_CONTAINER)) {
            cli_report_error(g, "tier: --tier `%s` cannot be verified: use kernel or container",
                             a.tier);
            return CLI_EXIT_REFUSED;
        }
    }

    struct bh_tier_report *r = NULL;
    int rc;
    if (a.container != NULL) {
        rc = check_container(a.root ? a.root : g->root, a.container, &want, a.tier != NULL, &r,
                             &err);
    } else {
        struct bh_probe_opts opts = {.tier = want};
        rc = bh_probe_run(&opts, &r, &err);
    }
    if (rc < 0) {
        cli_report_error(g, "%s", err.msg);
        return CLI_EXIT_REFUSED;
    }

    if (a.json) {
        cleanup_free char *json = bh_tier_report_json(r);
        if (json == NULL) {
            bh_tier_report_free(r);
            cli_report_error(g, "tier: out of memory rendering the report");
            return CLI_EXIT_REFUSED;
        }
        printf("%s\n", json);
    } else {
        bh_tier_report_print(r, stdout);
    }
    fflush(stdout);

    int code = 0;
    if (r->tier < want) {
        char failed[1024];
        list_failures(r, want, failed, sizeof(failed));
        cli_report_error(g,
                         "tier %s is not verified (verified: %s); failed checks: %s. Each "
                         "check's detail above says what was seen",
                         bh_tier_name(want), bh_tier_name(r->tier), failed[0] ? failed : "none");
        code = TIER_EXIT_NOT_VERIFIED;
    }
    bh_tier_report_free(r);
    return code;
}
