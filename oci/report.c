/* Owns the OCI container's tier report: the live checks of sentry/probe.h on
 * the running sandbox (sentry alive as pid 1, the guests' Seccomp,
 * NoNewPrivs, capabilities, namespaces, cgroup), the JSON kept in state.json,
 * and pushing it as one TierReport frame to the socket named by the
 * annotation dev.bulkhead.report-socket. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "control.pb-c.h"
#include "frame.h"
#include "probe.h"
#include "oci-report.h"

json_t *oci_report_build(const char *id, pid_t pid, enum bh_tier requested, uint64_t caps,
                         const struct bh_limits *limits)
{
    struct bh_live_target target = {
        .sentry_pid = pid, .tier = requested, .caps = caps, .limits = limits};
    struct bh_tier_report *rep = bh_tier_report_new(id, requested);
    struct bh_error err = {0};
    json_t *out = NULL;
    if (rep != NULL && bh_probe_check_live(&target, &rep, &err) == 0) {
        char *text = bh_tier_report_json(rep);
        if (text != NULL) {
            out = json_loads(text, 0, NULL);
            free(text);
        }
    }
    if (rep != NULL)
        bh_tier_report_free(rep);
    if (out == NULL) {
        /* Nothing verified: say so rather than claim a tier. */
        out = json_pack("{s:s, s:s, s:s, s:I, s:[{s:s, s:s, s:s}]}", "subject", id, "checked",
                        bh_tier_name(requested), "tier", "none", "verified_at_unix_ms",
                        (json_int_t)0, "checks", "name", "verification", "result", "fail", "detail",
                        err.msg[0] ? err.msg : "the live checks could not run");
    }
    return out;
}

int oci_report_send(const char *socket_path, json_t *report, struct bh_error *err)
{
    Bulkhead__Control__TierReport msg = BULKHEAD__CONTROL__TIER_REPORT__INIT;
    msg.container_id = (char *)json_string_value(json_object_get(report, "subject"));
    msg.tier = (char *)json_string_value(json_object_get(report, "tier"));
    msg.verified_at_unix_ms =
        (uint64_t)json_integer_value(json_object_get(report, "verified_at_unix_ms"));
    json_t *checks = json_object_get(report, "checks");
    size_t n = json_array_size(checks);
    cleanup_free Bulkhead__Control__Check *cs = calloc(n + 1, sizeof(*cs));
    cleanup_free Bulkhead__Control__Check **cps = calloc(n + 1, sizeof(*cps));
    if (cs == NULL || cps == NULL)
        return bh_error_errno(err, ENOMEM, "tier report");
    for (size_t i = 0; i < n; i++) {
        json_t *c = json_array_get(checks, i);
        bulkhead__control__check__init(&cs[i]);
        cs[i].name = (char *)json_string_value(json_object_get(c, "name"));
        const char *res = json_string_value(json_object_get(c, "result"));
        cs[i].passed = res != NULL && strcmp(res, "pass") == 0;
        cs[i].detail = (char *)json_string_value(json_object_get(c, "detail"));
        cps[i] = &cs[i];
    }
    msg.n_checks = n;
    msg.checks = cps;
    size_t len = bulkhead__control__tier_report__get_packed_size(&msg);
    cleanup_free uint8_t *buf = malloc(len + 1);
    if (buf == NULL)
        return bh_error_errno(err, ENOMEM, "tier report");
    bulkhead__control__tier_report__pack(&msg, buf);

    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(socket_path) >= sizeof(sa.sun_path))
        return bh_error_set(err, ENAMETOOLONG, "report socket `%s`: path too long", socket_path);
    strcpy(sa.sun_path, socket_path);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "report socket `%s`", socket_path);
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
        return bh_error_errno(err, errno,
                              "the tier report cannot be delivered to `%s` (annotation %s), so "
                              "the container does not start: connect",
                              socket_path, "dev.bulkhead.report-socket");
    if (bh_frame_write(fd, buf, len, err) < 0)
        return bh_error_prefix(err,
                               "the tier report cannot be delivered to `%s`, so the "
                               "container does not start",
                               socket_path);
    return 0;
}
