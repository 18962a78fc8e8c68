/* Owns the OCI container's tier report: checks made from the host on the live
 * sandbox (the sentry is alive and is what we started, every namespace differs
 * from the host's, the guest's Seccomp/NoNewPrivs/CapEff, cgroup limits read
 * back), the tier they prove, the JSON kept in state.json, and pushing it as
 * one TierReport frame to the socket named by dev.bulkhead.report-socket. */
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
#include "oci-report.h"

static void add_check(json_t *checks, const char *name, bool passed, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_check(json_t *checks, const char *name, bool passed, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    json_t *c = json_object();
    json_object_set_new(c, "name", json_string(name));
    json_object_set_new(c, "passed", json_boolean(passed));
    json_object_set_new(c, "detail", json_string(detail));
    json_array_append_new(checks, c);
}

static int read_small(const char *path, char *buf, size_t len)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, len - 1);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    return 0;
}

static bool status_field(pid_t pid, const char *key, char *out, size_t len)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/status", pid);
    if (read_small(path, buf, sizeof(buf)) < 0)
        return false;
    size_t klen = strlen(key);
    for (char *line = buf; line && *line;) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            const char *v = line + klen + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            size_t vl = nl ? (size_t)(nl - v) : strlen(v);
            if (vl >= len)
                vl = len - 1;
            memcpy(out, v, vl);
            out[vl] = '\0';
            return true;
        }
        line = nl ? nl + 1 : NULL;
    }
    return false;
}

/* The first child of the sentry: the guest's first process. */
static pid_t first_guest(pid_t sentry)
{
    char path[96], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", sentry, sentry);
    if (read_small(path, buf, sizeof(buf)) < 0)
        return -1;
    long p = strtol(buf, NULL, 10);
    return p > 0 ? (pid_t)p : -1;
}

json_t *oci_report_build(const char *id, pid_t pid, enum bh_tier requested, const char *cgroup_path)
{
    json_t *checks = json_array();
    char buf[256];
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/comm", pid);
    bool alive = read_small(path, buf, sizeof(buf)) == 0;
    add_check(checks, "sentry_alive", alive && strcmp(buf, "bulkhead-sentry") == 0,
              "pid %d comm `%s`", pid, alive ? buf : "(gone)");
    static const char *const nss[] = {"user", "pid", "mnt", "net", "ipc", "uts", "cgroup"};
    bool ns_ok = alive;
    char ns_detail[256] = "";
    for (size_t i = 0; i < BH_ARRAY_SIZE(nss); i++) {
        char a[96], b[96];
        struct stat sa, sb;
        snprintf(a, sizeof(a), "/proc/%d/ns/%s", pid, nss[i]);
        snprintf(b, sizeof(b), "/proc/self/ns/%s", nss[i]);
        if (stat(a, &sa) < 0 || stat(b, &sb) < 0 || sa.st_ino == sb.st_ino) {
            ns_ok = false;
            size_t l = strlen(ns_detail);
            snprintf(ns_detail + l, sizeof(ns_detail) - l, "%s%s", l ? "," : "shared: ", nss[i]);
        }
    }
    add_check(checks, "namespaces", ns_ok, "%s",
              ns_ok ? "user pid mnt net ipc uts cgroup: own" : ns_detail);
    pid_t guest = alive ? first_guest(pid) : -1;
    char v[128];
    bool sc = guest > 0 && status_field(guest, "Seccomp", v, sizeof(v)) && strcmp(v, "2") == 0;
    add_check(checks, "seccomp", sc, "guest %d Seccomp: %s", guest, sc ? "2" : "not 2");
    bool nnp = guest > 0 && status_field(guest, "NoNewPrivs", v, sizeof(v)) && strcmp(v, "1") == 0;
    add_check(checks, "no_new_privs", nnp, "guest %d NoNewPrivs: %s", guest, nnp ? "1" : "not 1");
    bool capeff = guest > 0 && status_field(guest, "CapEff", v, sizeof(v));
    add_check(checks, "capabilities", capeff, "guest %d CapEff: %s", guest,
              capeff ? v : "(unreadable)");
    bool cg_ok = false;
    struct bh_cgroup *cg = NULL;
    struct bh_error err = {0};
    if (cgroup_path && bh_cgroup_open(cgroup_path, &cg, &err) == 0) {
        pid_t *pids = NULL;
        size_t n = 0;
        if (bh_cgroup_pids(cg, &pids, &n, &err) == 0) {
            for (size_t i = 0; i < n; i++)
                cg_ok = cg_ok || pids[i] == pid;
            free(pids);
        }
        bh_cgroup_free(cg);
    }
    add_check(checks, "cgroup", cg_ok, "sentry %s cgroup `%s`", cg_ok ? "in" : "not in",
              cgroup_path ? cgroup_path : "");
    /* The tier proven: every check for the requested one, else the next below. */
    bool container_ok = alive && ns_ok && sc && cg_ok;
    enum bh_tier tier = BH_TIER_PROCESS;
    if (container_ok)
        tier = requested == BH_TIER_KERNEL && nnp ? BH_TIER_KERNEL : BH_TIER_CONTAINER;
    if (!alive)
        tier = BH_TIER_NONE;
    json_t *r = json_object();
    json_object_set_new(r, "container_id", json_string(id));
    json_object_set_new(r, "tier", json_string(bh_tier_name(tier)));
    json_object_set_new(r, "requested", json_string(bh_tier_name(requested)));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_object_set_new(r, "verified_at_unix_ms",
                        json_integer((json_int_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000));
    json_object_set_new(r, "checks", checks);
    return r;
}

int oci_report_send(const char *socket_path, json_t *report, struct bh_error *err)
{
    Bulkhead__Control__TierReport msg = BULKHEAD__CONTROL__TIER_REPORT__INIT;
    msg.container_id = (char *)json_string_value(json_object_get(report, "container_id"));
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
        cs[i].passed = json_is_true(json_object_get(c, "passed"));
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
