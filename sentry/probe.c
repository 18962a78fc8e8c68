/* Owns tier verification on the host side (see probe.h): running the probe
 * in a probe sandbox, the outside checks of a live sandbox, the tier rule,
 * the per-boot cache, and the report's JSON and text forms. */
#include "probe.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <linux/nsfs.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "file-table.h"
#include "pid-space.h"
#include "aio-pool.h"
#include "kernel-compat.h"
#include "paths.h"
#include "probe-report.h"
#include "proc-status.h"
#include "sandbox.h"
#include "sha256.h"

/* ---- which tier needs which check ------------------------------------------ */

struct check_rule {
    const char *name;
    enum bh_tier required_for;
    bool from_probe; /* the probe must report it */
};

/* The container tier is namespaces, dropped capabilities and a
 * Docker-default-like filter; the kernel tier adds the sentry, the broker,
 * Landlock, no network and no_new_privs (design.md, "Tiers"). The cgroup
 * and time namespaces are kernel-tier: container runtimes commonly share them. */
static const struct check_rule rules[] = {
    {BH_CHECK_SECCOMP, BH_TIER_CONTAINER, true},
    {BH_CHECK_NO_NEW_PRIVS, BH_TIER_KERNEL, true},
    {BH_CHECK_CAPS, BH_TIER_CONTAINER, true},
    {BH_CHECK_REFUSED, BH_TIER_CONTAINER, true},
    {BH_CHECK_BROKER_REFUSED, BH_TIER_KERNEL, true},
    {BH_CHECK_CONFINED_OPEN, BH_TIER_KERNEL, true},
    {BH_CHECK_NET_LO_ONLY, BH_TIER_KERNEL, true},
    {BH_CHECK_LANDLOCK, BH_TIER_KERNEL, true},
    {BH_CHECK_SENTRY_INSIDE, BH_TIER_KERNEL, true},
    {BH_CHECK_CGROUP_INSIDE, BH_TIER_NONE, true},
    {"ns_user", BH_TIER_CONTAINER, false},
    {"ns_pid", BH_TIER_CONTAINER, false},
    {"ns_mnt", BH_TIER_CONTAINER, false},
    {"ns_net", BH_TIER_CONTAINER, false},
    {"ns_ipc", BH_TIER_CONTAINER, false},
    {"ns_uts", BH_TIER_CONTAINER, false},
    {"ns_cgroup", BH_TIER_KERNEL, false},
    {"ns_time", BH_TIER_KERNEL, false},
    {"sentry_pid1", BH_TIER_KERNEL, false},
    {"guests", BH_TIER_CONTAINER, false},
    {"cgroup_limits", BH_TIER_CONTAINER, false},
    {"userns_owner", BH_TIER_KERNEL, false},
    {"sentry_mm", BH_TIER_CONTAINER, false},
    {"guest_rlimits", BH_TIER_NONE, false},
    {"probe_complete", BH_TIER_CONTAINER, false},
};

static const char *const ns_types[] = {"user", "pid", "mnt", "net", "ipc", "uts", "cgroup", "time"};

/* Unknown names are required for the container tier: an unexpected failure
 * must lower the tier, not vanish. */
static enum bh_tier rule_tier(const char *name)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(rules); i++) {
        if (strcmp(rules[i].name, name) == 0)
            return rules[i].required_for;
    }
    return BH_TIER_CONTAINER;
}

/* ---- reports ------------------------------------------------------------------ */

static const char *const result_names[] = {
    [BH_CHECK_PASS] = "pass",
    [BH_CHECK_FAIL] = "fail",
    [BH_CHECK_SKIP] = "skip",
};

const char *bh_check_result_name(enum bh_check_result result)
{
    if ((unsigned)result >= BH_ARRAY_SIZE(result_names))
        return "fail";
    return result_names[result];
}

static int result_parse(const char *s, enum bh_check_result *out)
{
    for (unsigned i = 0; i < BH_ARRAY_SIZE(result_names); i++) {
        if (strcmp(s, result_names[i]) == 0) {
            *out = (enum bh_check_result)i;
            return 0;
        }
    }
    return -1;
}

struct bh_tier_report *bh_tier_report_new(const char *subject, enum bh_tier checked)
{
    struct bh_tier_report *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return NULL;
    r->subject = strdup(subject ? subject : "");
    if (r->subject == NULL) {
        free(r);
        return NULL;
    }
    r->checked = checked;
    r->tier = BH_TIER_NONE;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    r->verified_at_unix_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    return r;
}

const struct bh_check *bh_tier_report_find(const struct bh_tier_report *r, const char *name)
{
    for (size_t i = 0; i < r->n_checks; i++) {
        if (strcmp(r->checks[i].name, name) == 0)
            return &r->checks[i];
    }
    return NULL;
}

/* Out of memory, a check is still merged where it can be and the report is
 * marked incomplete, so it verifies nothing. */
static void report_vadd(struct bh_tier_report *r, const char *name, enum bh_check_result result,
                        enum bh_tier required_for, const char *fmt, va_list ap)
{
    char *detail = NULL;
    if (vasprintf(&detail, fmt, ap) < 0) {
        detail = NULL;
        r->incomplete = true;
    }
    for (char *p = detail; p != NULL && *p; p++) {
        if (*p == '\n')
            *p = ' ';
    }
    struct bh_check *c = (struct bh_check *)bh_tier_report_find(r, name);
    if (c != NULL) {
        /* A failure anywhere wins over a pass; a pass over a skip. */
        if (result == BH_CHECK_FAIL || (result == BH_CHECK_PASS && c->result == BH_CHECK_SKIP))
            c->result = result;
        if (required_for > c->required_for)
            c->required_for = required_for;
        char *joined = NULL;
        if (detail != NULL && asprintf(&joined, "%s; %s", c->detail, detail) >= 0) {
            free(c->detail);
            c->detail = joined;
        } else {
            r->incomplete = true;
        }
        free(detail);
        return;
    }
    struct bh_check *grown = realloc(r->checks, (r->n_checks + 1) * sizeof(*grown));
    char *cname = strdup(name);
    if (grown != NULL)
        r->checks = grown;
    if (grown == NULL || cname == NULL || detail == NULL) {
        r->incomplete = true;
        free(cname);
        free(detail);
        return;
    }
    r->checks[r->n_checks++] = (struct bh_check){
        .name = cname,
        .result = result,
        .required_for = required_for,
        .detail = detail,
    };
}

void bh_tier_report_add(struct bh_tier_report *r, const char *name, enum bh_check_result result,
                        enum bh_tier required_for, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    report_vadd(r, name, result, required_for, fmt, ap);
    va_end(ap);
}

void bh_tier_report_free(struct bh_tier_report *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->n_checks; i++) {
        free(r->checks[i].name);
        free(r->checks[i].detail);
    }
    free(r->checks);
    free(r->subject);
    free(r);
}

int bh_tier_report_parse_probe(struct bh_tier_report *r, const char *text, struct bh_error *err)
{
    bool header = false, end = false;
    size_t n_lines = 0;
    const char *line = text;
    while (line != NULL && *line != '\0' && !end) {
        const char *nl = strchr(line, '\n');
        size_t len = nl ? (size_t)(nl - line) : strlen(line);
        char buf[BH_PROBE_LINE_MAX];
        if (len >= sizeof(buf))
            len = sizeof(buf) - 1;
        memcpy(buf, line, len);
        buf[len] = '\0';
        line = nl ? nl + 1 : NULL;
        n_lines++;

        if (!header) {
            char magic[32];
            int version = 0;
            if (sscanf(buf, "%31s %d", magic, &version) != 2 || strcmp(magic, BH_PROBE_MAGIC) != 0)
                return bh_error_set(err, EPROTO,
                                    "the probe's output does not start with `%s`: is "
                                    "bulkhead-probe the right binary?",
                                    BH_PROBE_MAGIC);
            if (version != BH_PROBE_VERSION)
                return bh_error_set(err, EPROTO,
                                    "the probe speaks report version %d, this bulkhead %d: "
                                    "install matching binaries",
                                    version, BH_PROBE_VERSION);
            header = true;
            continue;
        }
        if (strcmp(buf, BH_PROBE_END) == 0) {
            end = true;
            continue;
        }
        char *save = NULL;
        char *kind = strtok_r(buf, " ", &save);
        char *name = strtok_r(NULL, " ", &save);
        if (kind == NULL || name == NULL)
            continue;
        if (strcmp(kind, "check") == 0) {
            char *res = strtok_r(NULL, " ", &save);
            const char *detail = save ? save : "";
            enum bh_check_result result;
            if (res == NULL || result_parse(res, &result) < 0) {
                bh_tier_report_add(r, name, BH_CHECK_FAIL, rule_tier(name),
                                   "the probe gave no valid result");
                continue;
            }
            bh_tier_report_add(r, name, result, rule_tier(name), "%s", detail);
        }
        /* Facts are read by the outside checks through the live guest. */
    }
    if (!header)
        return bh_error_set(err, EPROTO, "the probe printed nothing (%zu lines)", n_lines);
    for (size_t i = 0; i < BH_ARRAY_SIZE(rules); i++) {
        if (rules[i].from_probe && bh_tier_report_find(r, rules[i].name) == NULL)
            bh_tier_report_add(r, rules[i].name, BH_CHECK_FAIL, rules[i].required_for,
                               "missing from the probe's report");
    }
    if (end)
        bh_tier_report_add(r, "probe_complete", BH_CHECK_PASS, BH_TIER_CONTAINER,
                           "the probe's report is complete");
    else
        bh_tier_report_add(r, "probe_complete", BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "the probe's report ends early: the probe died or was killed");
    return 0;
}

static bool name_in_list(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        size_t len = strcspn(p, ", ");
        if (len == n && strncmp(p, name, n) == 0)
            return true;
        p += len;
        p += strspn(p, ", ");
    }
    return false;
}

/* Only the test build (make test: BH_TEST_HOOKS) has the hook; a production
 * binary never reads BULKHEAD_TEST_BREAK, and holds not even its name. */
#ifdef BH_TEST_HOOKS
/* The checks BULKHEAD_TEST_BREAK names, or NULL. */
static const char *test_break_list(void)
{
    const char *brk = getenv("BULKHEAD_TEST_BREAK");
    return brk != NULL && *brk != '\0' ? brk : NULL;
}

/* The hook only ever turns a result into a failure. */
static void test_break_apply(struct bh_tier_report *r)
{
    const char *brk = test_break_list();
    for (size_t i = 0; brk != NULL && i < r->n_checks; i++) {
        struct bh_check *c = &r->checks[i];
        if (c->result != BH_CHECK_FAIL && name_in_list(brk, c->name)) {
            c->result = BH_CHECK_FAIL;
            char *d = NULL;
            if (asprintf(&d, "%s; failed by BULKHEAD_TEST_BREAK", c->detail) >= 0) {
                free(c->detail);
                c->detail = d;
            }
        }
    }
}
#else
static const char *test_break_list(void)
{
    return NULL;
}

static void test_break_apply(struct bh_tier_report *r)
{
    (void)r;
}
#endif

void bh_tier_report_compute(struct bh_tier_report *r)
{
    test_break_apply(r);

    /* Nothing above what the checks were made for can be verified. */
    enum bh_tier tier = r->checked;
    if (tier > BH_TIER_KERNEL)
        tier = BH_TIER_KERNEL;
    for (size_t i = 0; i < r->n_checks; i++) {
        const struct bh_check *c = &r->checks[i];
        if (c->result != BH_CHECK_PASS && c->required_for != BH_TIER_NONE &&
            (int)c->required_for - 1 < (int)tier)
            tier = (enum bh_tier)(c->required_for - 1);
    }
    if (tier < BH_TIER_CONTAINER) {
        const struct bh_check *sc = bh_tier_report_find(r, BH_CHECK_SECCOMP);
        tier = sc && sc->result == BH_CHECK_PASS ? BH_TIER_PROCESS : BH_TIER_NONE;
    }
    if (r->n_checks == 0 || r->incomplete)
        tier = BH_TIER_NONE;
    r->tier = tier;
}

char *bh_tier_report_json(const struct bh_tier_report *r)
{
    json_t *checks = json_array();
    for (size_t i = 0; i < r->n_checks; i++) {
        const struct bh_check *c = &r->checks[i];
        json_array_append_new(checks,
                              json_pack("{s:s, s:s, s:s, s:s}", "name", c->name, "result",
                                        bh_check_result_name(c->result), "required_for",
                                        bh_tier_name(c->required_for), "detail", c->detail));
    }
    json_t *doc = json_pack("{s:s, s:s, s:s, s:I, s:b, s:o}", "subject", r->subject, "checked",
                            bh_tier_name(r->checked), "tier", bh_tier_name(r->tier),
                            "verified_at_unix_ms", (json_int_t)r->verified_at_unix_ms, "from_cache",
                            r->from_cache, "checks", checks);
    if (doc == NULL)
        return NULL;
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(doc);
    return s;
}

int bh_tier_report_from_json(const char *text, struct bh_tier_report **out, struct bh_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    if (doc == NULL)
        return bh_error_set(err, EINVAL, "tier report: %s at line %d", jerr.text, jerr.line);
    const char *subject = NULL, *checked = NULL, *tier = NULL;
    json_int_t at = 0;
    json_t *checks = NULL;
    int from_cache = 0;
    if (json_unpack_ex(doc, &jerr, 0, "{s:s, s:s, s:s, s:I, s?b, s:o}", "subject", &subject,
                       "checked", &checked, "tier", &tier, "verified_at_unix_ms", &at, "from_cache",
                       &from_cache, "checks", &checks) < 0 ||
        !json_is_array(checks)) {
        json_decref(doc);
        return bh_error_set(err, EINVAL, "tier report: %s", jerr.text);
    }
    enum bh_tier t_checked, t_tier;
    if (bh_tier_parse(checked, &t_checked, err) < 0 || bh_tier_parse(tier, &t_tier, err) < 0) {
        json_decref(doc);
        return bh_error_prefix(err, "tier report");
    }
    struct bh_tier_report *r = bh_tier_report_new(subject, t_checked);
    if (r == NULL) {
        json_decref(doc);
        return bh_error_set(err, ENOMEM, "tier report: out of memory");
    }
    r->tier = t_tier;
    r->verified_at_unix_ms = (uint64_t)at;
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c)
    {
        const char *name = NULL, *res = NULL, *req = NULL, *detail = NULL;
        enum bh_check_result result;
        enum bh_tier required;
        if (json_unpack(c, "{s:s, s:s, s:s, s:s}", "name", &name, "result", &res, "required_for",
                        &req, "detail", &detail) < 0 ||
            result_parse(res, &result) < 0 || bh_tier_parse(req, &required, NULL) < 0) {
            bh_tier_report_free(r);
            json_decref(doc);
            return bh_error_set(err, EINVAL, "tier report: check %zu is malformed", i);
        }
        bh_tier_report_add(r, name, result, required, "%s", detail);
    }
    json_decref(doc);
    *out = r;
    return 0;
}

void bh_tier_report_print(const struct bh_tier_report *r, FILE *out)
{
    fprintf(out, "checks for tier %s (%s%s):\n", bh_tier_name(r->checked), r->subject,
            r->from_cache ? ", cached this boot" : "");
    for (size_t i = 0; i < r->n_checks; i++) {
        const struct bh_check *c = &r->checks[i];
        fprintf(out, "  %-4s  %-20s %-9s %s\n", bh_check_result_name(c->result), c->name,
                c->required_for == BH_TIER_NONE ? "info" : bh_tier_name(c->required_for),
                c->detail);
    }
    fprintf(out, "tier: %s\n", bh_tier_name(r->tier));
}

/* ---- outside checks of a live sandbox -------------------------------------------- */

static ssize_t read_file(const char *path, char *buf, size_t size)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t off = 0;
    while (off + 1 < size) {
        ssize_t n = read(fd, buf + off, size - 1 - off);
        if (n < 0)
            return -errno;
        if (n == 0)
            break;
        off += (size_t)n;
    }
    buf[off] = '\0';
    return (ssize_t)off;
}

/* Direct children of the sentry (every thread's children): the guests. */
static size_t find_guests(pid_t sentry, pid_t *out, size_t max)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)sentry);
    DIR *d = opendir(path);
    if (d == NULL)
        return 0;
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && n < max) {
        if (de->d_name[0] == '.')
            continue;
        char cpath[320], buf[1024];
        snprintf(cpath, sizeof(cpath), "/proc/%d/task/%s/children", (int)sentry, de->d_name);
        if (read_file(cpath, buf, sizeof(buf)) <= 0)
            continue;
        char *save = NULL;
        for (char *t = strtok_r(buf, " \n", &save); t && n < max; t = strtok_r(NULL, " \n", &save))
            out[n++] = (pid_t)atoi(t);
    }
    closedir(d);
    return n;
}

/* A sentry in a pod's shared pid namespace is not pid 1 there: the pod's
 * first sentry is. Host pid of that pid 1 if it is a sentry, else 0. */
static pid_t pod_pid1_sentry(pid_t sentry)
{
    char path[64];
    struct stat ns;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)sentry);
    if (stat(path, &ns) < 0)
        return 0;
    DIR *d = opendir("/proc");
    if (d == NULL)
        return 0;
    pid_t found = 0;
    struct dirent *e;
    while (found == 0 && (e = readdir(d)) != NULL) {
        pid_t p = (pid_t)atoi(e->d_name);
        struct stat st;
        char status[4096], name[64] = "", nspid[64] = "";
        if (p <= 0 || p == sentry)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/ns/pid", (int)p);
        if (stat(path, &st) < 0 || st.st_ino != ns.st_ino || st.st_dev != ns.st_dev)
            continue;
        snprintf(path, sizeof(path), "/proc/%d/status", (int)p);
        if (read_file(path, status, sizeof(status)) < 0)
            continue;
        bh_status_field(status, "Name", name, sizeof(name));
        bh_status_field(status, "NSpid", nspid, sizeof(nspid));
        const char *last = strrchr(nspid, '\t');
        if (last != NULL && strcmp(last + 1, "1") == 0 && strcmp(name, BH_SENTRY_COMM) == 0)
            found = p;
    }
    closedir(d);
    return found;
}

static void check_sentry(struct bh_tier_report *r, pid_t sentry)
{
    char path[64], status[4096], name[64] = "", state[32] = "", nspid[64] = "";
    snprintf(path, sizeof(path), "/proc/%d/status", (int)sentry);
    ssize_t n = read_file(path, status, sizeof(status));
    if (n < 0) {
        bh_tier_report_add(r, "sentry_pid1", BH_CHECK_FAIL, BH_TIER_KERNEL,
                           "the sentry (host pid %d) is gone: %s", (int)sentry, strerror((int)-n));
        return;
    }
    bh_status_field(status, "Name", name, sizeof(name));
    bh_status_field(status, "State", state, sizeof(state));
    bh_status_field(status, "NSpid", nspid, sizeof(nspid));
    const char *last = strrchr(nspid, '\t');
    last = last ? last + 1 : nspid;
    bool alive = state[0] != 'Z' && state[0] != 'X' && state[0] != '\0';
    bool pid1 = strcmp(last, "1") == 0 && strchr(nspid, '\t') != NULL;
    bool named = strcmp(name, BH_SENTRY_COMM) == 0;
    pid_t head = 0;
    if (!pid1 && strchr(nspid, '\t') != NULL && (head = pod_pid1_sentry(sentry)) > 0) {
        /* Its guests die with it by PDEATHSIG (it is their subreaper), and
         * with the pod's pid 1. */
        bh_tier_report_add(r, "sentry_pid1", alive && named ? BH_CHECK_PASS : BH_CHECK_FAIL,
                           BH_TIER_KERNEL,
                           "host pid %d: Name %s, State %s, NSpid %s: in a pod's pid namespace "
                           "headed by sentry %d",
                           (int)sentry, name, state, nspid, (int)head);
        return;
    }
    bh_tier_report_add(r, "sentry_pid1", alive && pid1 && named ? BH_CHECK_PASS : BH_CHECK_FAIL,
                       BH_TIER_KERNEL, "host pid %d: Name %s, State %s, NSpid %s", (int)sentry,
                       name, state, nspid);
}

static int ns_ino(pid_t pid, const char *type, ino_t *ino)
{
    char path[64];
    if (pid > 0)
        snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, type);
    else
        snprintf(path, sizeof(path), "/proc/self/ns/%s", type);
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    *ino = st.st_ino;
    return 0;
}

static void check_guest_ns(struct bh_tier_report *r, pid_t guest, pid_t sentry)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(ns_types); i++) {
        char name[32];
        snprintf(name, sizeof(name), "ns_%s", ns_types[i]);
        ino_t host = 0, g = 0;
        int he = ns_ino(0, ns_types[i], &host);
        int ge = ns_ino(guest, ns_types[i], &g);
        if (he == -ENOENT && ge == -ENOENT) {
            bh_tier_report_add(r, name, BH_CHECK_SKIP, rule_tier(name),
                               "the kernel has no %s namespace", ns_types[i]);
            continue;
        }
        if (he < 0 || ge < 0) {
            bh_tier_report_add(r, name, BH_CHECK_FAIL, rule_tier(name),
                               "pid %d: cannot read its %s namespace: %s", (int)guest, ns_types[i],
                               strerror(-(he < 0 ? he : ge)));
            continue;
        }
        bh_tier_report_add(r, name, g != host ? BH_CHECK_PASS : BH_CHECK_FAIL, rule_tier(name),
                           "pid %d: %s:[%lu], host %s:[%lu]", (int)guest, ns_types[i],
                           (unsigned long)g, ns_types[i], (unsigned long)host);
    }
    /* The guest lives in the pid namespace the sentry heads. */
    ino_t gp = 0, sp = 0;
    if (ns_ino(guest, "pid", &gp) == 0 && ns_ino(sentry, "pid", &sp) == 0 && gp != sp)
        bh_tier_report_add(r, "sentry_pid1", BH_CHECK_FAIL, BH_TIER_KERNEL,
                           "guest %d is not in the sentry's pid namespace", (int)guest);
}

static void check_guest_status(struct bh_tier_report *r, pid_t guest, uint64_t caps)
{
    char path[64], status[8192];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)guest);
    ssize_t n = read_file(path, status, sizeof(status));
    if (n < 0) {
        bh_tier_report_add(r, BH_CHECK_SECCOMP, BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "guest %d: cannot read its status: %s", (int)guest, strerror((int)-n));
        return;
    }
    char mode[16] = "", filters[16] = "", nnp[16] = "";
    bh_status_field(status, "Seccomp", mode, sizeof(mode));
    bh_status_field(status, "Seccomp_filters", filters, sizeof(filters));
    bh_status_field(status, "NoNewPrivs", nnp, sizeof(nnp));
    bool sc = strcmp(mode, "2") == 0 && atoi(filters) >= 1;
    bh_tier_report_add(r, BH_CHECK_SECCOMP, sc ? BH_CHECK_PASS : BH_CHECK_FAIL, BH_TIER_CONTAINER,
                       "outside, guest %d: Seccomp: %s, Seccomp_filters: %s", (int)guest, mode,
                       filters);
    bh_tier_report_add(r, BH_CHECK_NO_NEW_PRIVS,
                       strcmp(nnp, "1") == 0 ? BH_CHECK_PASS : BH_CHECK_FAIL, BH_TIER_KERNEL,
                       "outside, guest %d: NoNewPrivs: %s", (int)guest, nnp);
    static const char *const sets[] = {"CapEff", "CapPrm", "CapBnd", "CapAmb"};
    bool ok = true;
    char detail[256] = "";
    size_t used = 0;
    for (size_t i = 0; i < BH_ARRAY_SIZE(sets); i++) {
        char v[32] = "";
        bool have = bh_status_field(status, sets[i], v, sizeof(v)) != NULL;
        if (!have || (strtoull(v, NULL, 16) & ~caps) != 0)
            ok = false;
        used += (size_t)snprintf(detail + used, sizeof(detail) - used, "%s%s: %s", i ? ", " : "",
                                 sets[i], have ? v : "missing");
    }
    bh_tier_report_add(r, BH_CHECK_CAPS, ok ? BH_CHECK_PASS : BH_CHECK_FAIL, BH_TIER_CONTAINER,
                       "outside, guest %d: %s", (int)guest, detail);
}

/* Reads one limit file of the guest's own cgroup; "max" reads as -1. */
static int read_limit(const char *dir, const char *file, int64_t *value, char *shown, size_t size)
{
    char path[PATH_MAX], buf[64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    ssize_t n = read_file(path, buf, sizeof(buf));
    if (n <= 0)
        return -1;
    buf[strcspn(buf, "\n")] = '\0';
    snprintf(shown, size, "%s", buf);
    *value = strcmp(buf, "max") == 0 ? -1 : strtoll(buf, NULL, 10);
    return 0;
}

/* From the guest's /proc/PID/cgroup, not from the config: this proves the
 * limits hold for the process that runs, wherever it was put. */
static void check_guest_cgroup(struct bh_tier_report *r, pid_t guest, pid_t sentry,
                               const struct bh_limits *want)
{
    char path[64], buf[4096];
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)guest);
    if (read_file(path, buf, sizeof(buf)) <= 0) {
        bh_tier_report_add(r, "cgroup_limits", BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "guest %d: cannot read its cgroups", (int)guest);
        return;
    }
    bool pure_v2 = bh_cgroup_detect() == BH_CGROUP_V2;
    char mem_root[PATH_MAX] = "", pids_root[PATH_MAX] = "";
    bh_cgroup_hierarchy("memory", mem_root, sizeof(mem_root), NULL);
    bh_cgroup_hierarchy("pids", pids_root, sizeof(pids_root), NULL);

    char mem_dir[PATH_MAX] = "", pids_dir[PATH_MAX] = "";
    const char *mem_file = NULL, *pids_file = "pids.max";
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2 == NULL)
            continue;
        *c1 = *c2 = '\0';
        const char *ctrls = c1 + 1, *cg = c2 + 1;
        if (*ctrls == '\0' && pure_v2) {
            snprintf(mem_dir, sizeof(mem_dir), "%s%s", mem_root, cg);
            snprintf(pids_dir, sizeof(pids_dir), "%s%s", pids_root, cg);
            mem_file = "memory.max";
        } else if (name_in_list(ctrls, "memory") && mem_root[0]) {
            snprintf(mem_dir, sizeof(mem_dir), "%s%s", mem_root, cg);
            mem_file = "memory.limit_in_bytes";
        } else if (name_in_list(ctrls, "pids") && pids_root[0]) {
            snprintf(pids_dir, sizeof(pids_dir), "%s%s", pids_root, cg);
        }
    }

    bool ok = true;
    char detail[1024] = "";
    size_t used = 0;
    int64_t mem = -1, pids = -1;
    char shown[64];
    if (mem_file && read_limit(mem_dir, mem_file, &mem, shown, sizeof(shown)) == 0) {
        used += (size_t)snprintf(detail + used, sizeof(detail) - used, "%s/%s = %s", mem_dir,
                                 mem_file, shown);
    } else {
        used += (size_t)snprintf(detail + used, sizeof(detail) - used, "no memory limit file");
        mem = -2;
    }
    if (pids_dir[0] && read_limit(pids_dir, pids_file, &pids, shown, sizeof(shown)) == 0) {
        used += (size_t)snprintf(detail + used, sizeof(detail) - used, ", %s/%s = %s", pids_dir,
                                 pids_file, shown);
    } else {
        used += (size_t)snprintf(detail + used, sizeof(detail) - used, ", no pids limit file");
        pids = -2;
    }
    /* No limit is no floor: "max" (v2), the v1 "unlimited" (a huge page
     * multiple) and a missing file all fail, whatever the caller asked. */
    if (mem < 0 || mem >= (INT64_C(1) << 62)) {
        ok = false;
        used += (size_t)snprintf(detail + used, sizeof(detail) - used,
                                 "; no memory limit: one sandbox could take the host's memory");
    }
    int64_t nproc = -1;
    if (pids == -1 && want != NULL && want->tasks > 0) {
        /* pids.max "max" with the tasks cap held by the user namespace's
         * RLIMIT_NPROC ceiling. That ceiling cannot be read from outside;
         * the sentry's own soft limit, which it was cloned with and never
         * raises, stands in for it and fails if it is above the cap. Not a
         * guest's: a config's RLIMIT_NPROC (docker --ulimit nproc) sets
         * those, and it raises only their per-uid limit. */
        char lp[64], lim[4096];
        snprintf(lp, sizeof(lp), "/proc/%d/limits", (int)sentry);
        const char *line =
            read_file(lp, lim, sizeof(lim)) > 0 ? strstr(lim, "Max processes") : NULL;
        char soft[32] = "";
        if (line != NULL && sscanf(line + strlen("Max processes"), "%31s", soft) == 1 &&
            strcmp(soft, "unlimited") != 0)
            nproc = strtoll(soft, NULL, 10);
        used += (size_t)snprintf(detail + used, sizeof(detail) - used,
                                 "; tasks capped at %lld by the user namespace's RLIMIT_NPROC "
                                 "ceiling (sentry's Max processes %s)",
                                 (long long)want->tasks, soft[0] ? soft : "unreadable");
    }
    if (pids < 0 && !(nproc > 0 && nproc <= want->tasks)) {
        ok = false;
        used += (size_t)snprintf(detail + used, sizeof(detail) - used,
                                 "; no pids limit: one sandbox could take every pid");
    }
    if (want != NULL && want->memory_bytes > 0) {
        /* The kernel keeps whole pages. */
        int64_t page = sysconf(_SC_PAGESIZE);
        int64_t expect = want->memory_bytes / page * page;
        if (mem != expect) {
            ok = false;
            used += (size_t)snprintf(detail + used, sizeof(detail) - used,
                                     "; memory limit should be %lld", (long long)expect);
        }
    }
    if (want != NULL && want->pids > 0 && pids != want->pids) {
        ok = false;
        snprintf(detail + used, sizeof(detail) - used, "; pids limit should be %lld",
                 (long long)want->pids);
    }
    bh_tier_report_add(r, "cgroup_limits", ok ? BH_CHECK_PASS : BH_CHECK_FAIL, BH_TIER_CONTAINER,
                       "guest %d: %s", (int)guest, detail);
}

/* The host uid that owns the sandbox's user namespace is the one the kernel
 * charges every per-user counter (ucounts) of the sandbox to: host root
 * would mean one guest can exhaust root's inotify instances or queued
 * signals (sentry/README.md, "Shared kernel state"). */
static void check_userns_owner(struct bh_tier_report *r, pid_t sentry)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)sentry);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uid_t owner = 0;
    int e = 0;
    if (fd < 0 || ioctl(fd, NS_GET_OWNER_UID, &owner) < 0)
        e = errno;
    if (fd >= 0)
        close(fd);
    if (e != 0)
        bh_tier_report_add(r, "userns_owner", BH_CHECK_FAIL, BH_TIER_KERNEL,
                           "sentry %d: cannot read its user namespace's owner: %s", (int)sentry,
                           strerror(e));
    else
        bh_tier_report_add(r, "userns_owner", owner != 0 ? BH_CHECK_PASS : BH_CHECK_FAIL,
                           BH_TIER_KERNEL, "sentry %d: user namespace owned by host uid %u%s",
                           (int)sentry, (unsigned)owner,
                           owner != 0 ? " (per-user kernel counters are charged to it)"
                                      : ": its per-user kernel counters are charged to host "
                                        "root, which a guest could exhaust");
}

/* sentry_mm's control when no guest has exec'd (a created container): a
 * task of the attacker's own, of another uid where uid 1 is mapped, made
 * dumpable, must be open to it. Raw syscalls, as in its caller. */
static bool dumpable_child_mem_opens(void)
{
    int p[2];
    if (syscall(SYS_pipe2, p, O_CLOEXEC) < 0)
        return false;
    long c = syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
    if (c == 0) {
        syscall(SYS_close, p[0]);
        syscall(SYS_setresgid, 1, 1, 1);
        syscall(SYS_setresuid, 1, 1, 1);
        char b = 'r';
        if (syscall(SYS_prctl, PR_SET_DUMPABLE, 1, 0, 0, 0) == 0)
            syscall(SYS_write, p[1], &b, 1);
        /* until the attacker kills it */
        syscall(SYS_pause);
        syscall(SYS_exit_group, 0);
    }
    syscall(SYS_close, p[1]);
    bool ok = false;
    char b, mem[64];
    if (c > 0 && syscall(SYS_read, p[0], &b, 1) == 1) {
        snprintf(mem, sizeof(mem), "/proc/%ld/mem", c);
        ok = syscall(SYS_openat, AT_FDCWD, mem, O_RDONLY | O_CLOEXEC) >= 0;
    }
    if (c > 0) {
        syscall(SYS_kill, c, SIGKILL);
        syscall(SYS_wait4, c, NULL, 0, NULL);
    }
    syscall(SYS_close, p[0]);
    return ok;
}

/* In one forked child (raw syscalls: the caller may be multi-threaded):
 * root of the sentry's user namespace with every capability there,
 * CAP_SYS_PTRACE included, and no Landlock domain, as a container guest
 * root granted CAP_SYS_PTRACE would be without the guest's, opens the
 * sentry's /proc/PID/mem and a guest's. *sentry_errno: 0 if it opened the
 * sentry's, else the errno; *guest_ok: it opened the guest's. -1 with an
 * errno when the child could not get in place. */
static int open_mem_as_userns_root(pid_t sentry, pid_t guest, int *sentry_errno, bool *guest_ok)
{
    char ns[64], mem[64], gmem[64];
    snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)sentry);
    snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)sentry);
    snprintf(gmem, sizeof(gmem), "/proc/%d/mem", (int)guest);
    pid_t child = fork();
    if (child < 0)
        return -1;
    if (child == 0) {
        int fd = (int)syscall(SYS_openat, AT_FDCWD, ns, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || syscall(SYS_setns, fd, CLONE_NEWUSER) < 0 ||
            syscall(SYS_setresgid, 0, 0, 0) < 0 || syscall(SYS_setresuid, 0, 0, 0) < 0)
            syscall(SYS_kill, syscall(SYS_getpid), SIGKILL);
        int m = (int)syscall(SYS_openat, AT_FDCWD, mem, O_RDONLY | O_CLOEXEC);
        int code = m >= 0 ? 0 : (errno & 0x7f);
        if (guest > 0 && syscall(SYS_openat, AT_FDCWD, gmem, O_RDONLY | O_CLOEXEC) >= 0)
            code |= 0x80;
        else if (dumpable_child_mem_opens())
            code |= 0x80; /* no guest has exec'd yet: each stays non-dumpable until then */
        syscall(SYS_exit_group, code);
    }
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st)) {
        errno = EPERM;
        return -1;
    }
    *sentry_errno = WEXITSTATUS(st) & 0x7f;
    *guest_ok = (WEXITSTATUS(st) & 0x80) != 0;
    return 0;
}

/* Which process a sentry is, beyond its pid, which can be reused: the
 * pidfs inode of a pidfd on it (never reused within a boot; 0 on kernels
 * before pidfs), its start time, and where its mm put the code, stack and
 * heap (an exec moves them, with ASLR; the sentry never execs after
 * start-up, but its policy cannot refuse execve, which its guests
 * inherit). Read through a pidfd that is checked to still name a live
 * process afterwards, so the numbers are that process's. */
struct sentry_identity {
    pid_t pid;
    uint64_t pidfs_ino;
    unsigned long long start, start_code, start_stack, start_brk;
};

static int read_sentry_identity(pid_t pid, struct sentry_identity *id)
{
    memset(id, 0, sizeof(*id));
    id->pid = pid;
    cleanup_close int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0)
        return -1;
    struct statfs sf;
    struct stat st;
    if (fstatfs(fd, &sf) == 0 && (unsigned long)sf.f_type == PID_FS_MAGIC && fstat(fd, &st) == 0)
        id->pidfs_ino = (uint64_t)st.st_ino;
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (read_file(path, buf, sizeof(buf)) <= 0)
        return -1;
    /* fields after the comm, which may hold spaces and parentheses */
    const char *p = strrchr(buf, ')');
    if (p == NULL)
        return -1;
    unsigned long long v[50] = {0};
    int n = 0;
    for (p++; n < 50 && *p != '\0'; n++) {
        while (*p == ' ')
            p++;
        if (*p == '\0' || *p == '\n')
            break;
        v[n] = strtoull(p, (char **)&p, 10);
        if (*p != ' ' && *p != '\n' && *p != '\0')
            p += strcspn(p, " "); /* the state letter */
    }
    /* v[0] is field 3 (state): field k is v[k - 3] */
    if (n < 45)
        return -1;
    id->start = v[22 - 3];
    id->start_code = v[26 - 3];
    id->start_stack = v[28 - 3];
    id->start_brk = v[47 - 3];
    /* still that process: the numbers above were not a reused pid's */
    if (syscall(SYS_pidfd_send_signal, fd, 0, NULL, 0) < 0)
        return -1;
    return 0;
}

static bool same_sentry(const struct sentry_identity *a, const struct sentry_identity *b)
{
    return a->pid == b->pid && a->pidfs_ino == b->pidfs_ino && a->start == b->start &&
           a->start_code == b->start_code && a->start_stack == b->start_stack &&
           a->start_brk == b->start_brk;
}

/* sentry_mm's passes, one per sentry process: a sentry never execs after
 * start-up, so the mm checked (and its user namespace) is its mm for life,
 * and bulkheadd, which verifies every session it opens, forks for the check
 * once per sentry instead of once per open. A failed check is not kept. */
#define MM_PASSES 256
static struct sentry_identity mm_passes[MM_PASSES];
static size_t mm_passes_next;
static pthread_mutex_t mm_passes_lock = PTHREAD_MUTEX_INITIALIZER;

static bool mm_pass_known(const struct sentry_identity *id)
{
    bool known = false;
    pthread_mutex_lock(&mm_passes_lock);
    for (size_t i = 0; i < MM_PASSES && !known; i++)
        known = same_sentry(&mm_passes[i], id);
    pthread_mutex_unlock(&mm_passes_lock);
    return known;
}

static void mm_pass_keep(const struct sentry_identity *id)
{
    pthread_mutex_lock(&mm_passes_lock);
    mm_passes[mm_passes_next++ % MM_PASSES] = *id;
    pthread_mutex_unlock(&mm_passes_lock);
}

/* The sentry's second wall (sentry/README.md): it was exec'd in the host's
 * user namespace, so non-dumpable keeps out even a root of the sandbox's
 * namespace holding CAP_SYS_PTRACE there, with no Landlock domain to stop
 * it. The control is a guest, exec'd inside and dumpable (or, before any
 * guest has exec'd, a dumpable task of the attacker's own): the same root
 * opens its memory, or the check proved nothing. */
static void check_sentry_mm(struct bh_tier_report *r, pid_t sentry, pid_t guest)
{
    struct sentry_identity before, after;
    bool known = read_sentry_identity(sentry, &before) == 0;
    if (known && mm_pass_known(&before)) {
        bh_tier_report_add(r, "sentry_mm", BH_CHECK_PASS, BH_TIER_CONTAINER,
                           "sentry %d: a root of its user namespace with CAP_SYS_PTRACE cannot "
                           "open its memory (checked earlier on this very process, which has "
                           "not exec'd since): exec'd in the host's user namespace, non-dumpable",
                           (int)sentry);
        return;
    }
    int e = 0;
    bool ctl = false;
    if (open_mem_as_userns_root(sentry, guest, &e, &ctl) < 0 || !ctl)
        bh_tier_report_add(r, "sentry_mm", BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "sentry %d: a root of its user namespace with CAP_SYS_PTRACE could "
                           "not be put in place (%s), or could not open guest %d's memory",
                           (int)sentry, strerror(errno), (int)guest);
    else if (e == 0)
        bh_tier_report_add(r, "sentry_mm", BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "sentry %d: a root of its user namespace with CAP_SYS_PTRACE opens "
                           "its /proc/PID/mem: it was exec'd inside the sandbox's user "
                           "namespace, so only Landlock keeps guests out of it",
                           (int)sentry);
    else {
        bh_tier_report_add(r, "sentry_mm", BH_CHECK_PASS, BH_TIER_CONTAINER,
                           "sentry %d: a root of its user namespace with CAP_SYS_PTRACE cannot "
                           "open its memory (%s; a guest's it can): exec'd in the host's user "
                           "namespace, non-dumpable",
                           (int)sentry, strerror(e));
        /* kept only if the process checked is the one named before */
        if (known && read_sentry_identity(sentry, &after) == 0 && same_sentry(&before, &after))
            mm_pass_keep(&before);
    }
}

/* Per-user counters the kernel checks against rlimits, shown for each
 * guest; "unlimited" fails. Information, not a requirement of the tier: an
 * OCI config may ask for it (docker --ulimit), and with the user namespace
 * owned by the slot's uid (userns_owner) and kernel memory charged to the
 * sandbox's cgroup, what it then takes is the sandbox's own loss. */
static void check_guest_rlimits(struct bh_tier_report *r, pid_t guest)
{
    static const char *const names[] = {"Max open files", "Max pending signals",
                                        "Max msgqueue size", "Max locked memory"};
    char path[64], buf[4096], detail[512] = "";
    snprintf(path, sizeof(path), "/proc/%d/limits", (int)guest);
    if (read_file(path, buf, sizeof(buf)) <= 0) {
        bh_tier_report_add(r, "guest_rlimits", BH_CHECK_FAIL, BH_TIER_NONE,
                           "guest %d: cannot read its limits", (int)guest);
        return;
    }
    bool ok = true;
    size_t used = 0;
    for (size_t i = 0; i < BH_ARRAY_SIZE(names); i++) {
        const char *line = strstr(buf, names[i]);
        char soft[32] = "?", hard[32] = "?";
        if (line == NULL || sscanf(line + strlen(names[i]), "%31s %31s", soft, hard) != 2 ||
            strcmp(hard, "unlimited") == 0)
            ok = false;
        used += (size_t)snprintf(detail + used, sizeof(detail) - used, "%s%s %s/%s", i ? ", " : "",
                                 names[i] + 4, soft, hard);
    }
    bh_tier_report_add(r, "guest_rlimits", ok ? BH_CHECK_PASS : BH_CHECK_FAIL, BH_TIER_NONE,
                       "guest %d: %s%s", (int)guest, detail,
                       ok ? "" : " (every one must be finite)");
}

/* A global pool of the host that every tier needs larger than what all
 * sandboxes together can take (sentry/file-table.h, sentry/pid-space.h).
 * The create raised it; this reads it again, so a value lowered since shows.
 * The detail: "SYSCTL VALUE, NEED NEEDED UNIT". */
static void check_host_pool(struct bh_tier_report *r, const char *check, const char *sysctl,
                            int (*state)(uint64_t *, uint64_t *, struct bh_error *),
                            const char *need, const char *unit)
{
    uint64_t value = 0, needed = 0;
    struct bh_error err = {0};
    if (state(&value, &needed, &err) < 0) {
        bh_tier_report_add(r, check, BH_CHECK_FAIL, BH_TIER_CONTAINER, "%s", err.msg);
        return;
    }
    bh_tier_report_add(r, check, value >= needed ? BH_CHECK_PASS : BH_CHECK_FAIL, BH_TIER_CONTAINER,
                       "%s %" PRIu64 ", %s %" PRIu64 " %s", sysctl, value, need, needed, unit);
}

/* What the sandbox's network namespace holds, read from the host through
 * the sentry: a joined namespace (a pod's, made by a CRI) may hold more than
 * lo, which the kernel tier does not allow. */
static void check_net(struct bh_tier_report *r, pid_t sentry)
{
    char path[64], line[512], seen[256] = "";
    snprintf(path, sizeof(path), "/proc/%d/net/dev", (int)sentry);
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        bh_tier_report_add(r, "net_lo_only", BH_CHECK_FAIL, BH_TIER_KERNEL,
                           "sentry %d: cannot read %s: %s", (int)sentry, path, strerror(errno));
        return;
    }
    bool ok = true;
    int lines = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (++lines <= 2)
            continue; /* the two header lines */
        char *colon = strchr(line, ':');
        if (colon == NULL)
            continue;
        *colon = '\0';
        const char *name = line + strspn(line, " ");
        if (strcmp(name, "lo") == 0)
            continue;
        ok = false;
        size_t l = strlen(seen);
        snprintf(seen + l, sizeof(seen) - l, "%s%s", l ? ", " : "", name);
    }
    fclose(f);
    if (ok)
        bh_tier_report_add(r, "net_lo_only", BH_CHECK_PASS, BH_TIER_KERNEL,
                           "outside, sentry %d: only lo in its network namespace", (int)sentry);
    else
        bh_tier_report_add(r, "net_lo_only", BH_CHECK_FAIL, BH_TIER_KERNEL,
                           "outside, sentry %d: interfaces besides lo: %s (the kernel tier "
                           "allows no network)",
                           (int)sentry, seen);
}

int bh_probe_check_live(const struct bh_live_target *target, struct bh_tier_report **r,
                        struct bh_error *err)
{
    if (target->sentry_pid <= 0)
        return bh_error_set(err, EINVAL, "no sentry pid to check");
    if (*r == NULL)
        *r = bh_tier_report_new("host", target->tier);
    if (*r == NULL)
        return bh_error_set(err, ENOMEM, "check the sandbox live: out of memory");
    struct bh_tier_report *rep = *r;

    check_sentry(rep, target->sentry_pid);
    check_net(rep, target->sentry_pid);
    check_host_pool(rep, "file_table", "fs.file-max", bh_file_table_state,
                    "the host's memory can hold", "files");
    check_host_pool(rep, "pid_space", "kernel.pid_max", bh_pid_space_state,
                    "the host's thread pool needs", "pids");
    check_host_pool(rep, "aio_pool", "fs.aio-max-nr", bh_aio_pool_state,
                    "the host's memory can hold", "events");
    check_userns_owner(rep, target->sentry_pid);
    pid_t guests[64];
    size_t n = find_guests(target->sentry_pid, guests, BH_ARRAY_SIZE(guests));
    if (n == 0) {
        bh_tier_report_add(rep, "guests", BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "no guest process runs under the sentry (host pid %d)",
                           (int)target->sentry_pid);
    } else {
        bh_tier_report_add(rep, "guests", BH_CHECK_PASS, BH_TIER_CONTAINER,
                           "%zu guest process(es) under the sentry", n);
    }
    check_sentry_mm(rep, target->sentry_pid, n > 0 ? guests[0] : 0);
    for (size_t i = 0; i < n; i++) {
        check_guest_status(rep, guests[i], target->caps);
        check_guest_ns(rep, guests[i], target->sentry_pid);
        check_guest_cgroup(rep, guests[i], target->sentry_pid, target->limits);
        check_guest_rlimits(rep, guests[i]);
    }
    bh_tier_report_compute(rep);
    return 0;
}

/* ---- the probe sandbox -------------------------------------------------------- */

/* Until the sandbox core (sentry/sandbox.c) is in the tree, these resolve to
 * NULL and bh_probe_run refuses; remove once it lands. */
#pragma weak bh_sandbox_create
#pragma weak bh_sandbox_start
#pragma weak bh_sandbox_pid
#pragma weak bh_sandbox_wait
#pragma weak bh_sandbox_signal
#pragma weak bh_sandbox_destroy
#pragma weak bh_sandbox_spec_init
#pragma weak bh_sandbox_spec_free
#pragma weak bh_status_to_exit_code

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The probe's claims decide the tier, so only a binary that root alone can
 * change is believed. */
static int probe_binary(const struct bh_probe_opts *opts, char *buf, size_t size,
                        struct bh_error *err)
{
    if (opts->probe_path != NULL)
        snprintf(buf, size, "%s", opts->probe_path);
    else if (bh_path_find("bulkhead-probe", buf, size, err) < 0)
        return bh_error_prefix(err, "cannot verify the tier");
    char real[PATH_MAX];
    if (realpath(buf, real) == NULL)
        return bh_error_errno(err, errno, "cannot verify the tier: probe `%s`", buf);
    struct stat st;
    if (stat(real, &st) < 0)
        return bh_error_errno(err, errno, "cannot verify the tier: probe `%s`", real);
    if (!S_ISREG(st.st_mode) || st.st_uid != 0 || (st.st_mode & 022) != 0)
        return bh_error_set(err, EPERM,
                            "cannot verify the tier: probe `%s` must be a regular file owned by "
                            "root and writable by root only (chown root, chmod go-w)",
                            real);
    snprintf(buf, size, "%s", real);
    return 0;
}

struct secret {
    char dir[64];
    char path[96];
    char token[33];
};

static void secret_remove(struct secret *s)
{
    if (s->path[0])
        unlink(s->path);
    if (s->dir[0])
        rmdir(s->dir);
    s->path[0] = s->dir[0] = '\0';
}

/* A host file the probe must fail to read by any path trick. It lives where
 * no sandbox layout mounts anything (/run), never in the probe's view. */
static int secret_make(struct secret *s, struct bh_error *err)
{
    memset(s, 0, sizeof(*s));
    uint8_t raw[16];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        return bh_error_errno(err, errno, "getrandom for the probe's secret");
    bh_hex(raw, sizeof(raw), s->token);
    snprintf(s->dir, sizeof(s->dir), "/run/bulkhead-probe-XXXXXX");
    if (mkdtemp(s->dir) == NULL) {
        s->dir[0] = '\0';
        return bh_error_errno(err, errno, "make a directory for the probe's secret in /run");
    }
    snprintf(s->path, sizeof(s->path), "%s/secret", s->dir);
    cleanup_close int fd = open(s->path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, s->token, strlen(s->token)) != (ssize_t)strlen(s->token)) {
        int e = errno;
        secret_remove(s);
        return bh_error_errno(err, e, "write the probe's secret");
    }
    /* The guest's ids are not host root: the file must be readable to them,
     * or a refusal could come from file modes instead of confinement. */
    chmod(s->dir, 0755);
    return 0;
}

/* Reads the probe's report until its "end" line, EOF or the deadline. */
static char *read_report(int fd, int64_t deadline)
{
    size_t cap = 8192, len = 0;
    char *buf = calloc(1, cap);
    if (buf == NULL)
        return NULL; /* no report: the probe did not complete */
    for (;;) {
        if (strstr(buf, "\n" BH_PROBE_END "\n") != NULL)
            break;
        int64_t left = deadline - now_ms();
        if (left <= 0)
            break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int pr = poll(&p, 1, (int)left);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        if (len + 1 >= cap) {
            if (cap >= (1u << 20))
                break; /* a probe that talks this much is not the probe */
            cap *= 2;
            char *g = realloc(buf, cap);
            if (g == NULL)
                break; /* what was read so far: without its end line, incomplete */
            buf = g;
        }
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
        buf[len] = '\0';
    }
    return buf;
}

/* A NULL-terminated copy of v, or NULL (out of memory). */
static char **strv_dup(char *const *v)
{
    size_t n = 0;
    while (v[n])
        n++;
    char **out = calloc(n + 1, sizeof(char *));
    for (size_t i = 0; out != NULL && i < n; i++) {
        out[i] = strdup(v[i]);
        if (out[i] == NULL) {
            while (i > 0)
                free(out[--i]);
            free(out);
            out = NULL;
        }
    }
    return out;
}

static int probe_run_here(const struct bh_probe_opts *opts, struct bh_tier_report **out,
                          struct bh_error *err)
{
    enum bh_tier tier = opts->tier ? opts->tier : BH_TIER_KERNEL;
    if (tier != BH_TIER_KERNEL && tier != BH_TIER_CONTAINER)
        return bh_error_set(err, EINVAL,
                            "tier `%s` cannot be verified here: use container or kernel",
                            bh_tier_name(tier));
    if (bh_sandbox_create == NULL || bh_sandbox_spec_init == NULL)
        return bh_error_set(err, ENOSYS,
                            "cannot verify the tier: this build has no sandbox core yet");
    char probe[PATH_MAX];
    if (probe_binary(opts, probe, sizeof(probe), err) < 0)
        return -1;

    struct secret secret;
    if (secret_make(&secret, err) < 0)
        return bh_error_prefix(err, "cannot verify the tier");

    struct bh_sandbox_spec spec;
    bh_sandbox_spec_init(&spec);
    char id[64];
    uint8_t raw[6];
    char hex[13];
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
        memset(raw, 0, sizeof(raw));
    bh_hex(raw, sizeof(raw), hex);
    snprintf(id, sizeof(id), "probe-%d-%s", (int)getpid(), hex);
    spec.id = strdup(id);
    spec.tier = tier;
    spec.limits = opts->limits;
    if (spec.limits.memory_bytes == 0)
        spec.limits.memory_bytes = 256ll << 20;
    if (spec.limits.pids == 0)
        spec.limits.pids = 64;
    spec.mounts = calloc(1, sizeof(struct bh_mount));
    if (spec.mounts != NULL) {
        spec.n_mounts = 1;
        spec.mounts[0] = (struct bh_mount){
            .source = strdup(probe),
            .destination = strdup(BH_PROBE_GUEST_PATH),
            .type = strdup("bind"),
            .flags = MS_BIND | MS_RDONLY,
        };
    }
    char errno_arg[16];
    snprintf(errno_arg, sizeof(errno_arg), "%d", EPERM);
    char *argv[] = {BH_PROBE_GUEST_PATH, "--tier",     (char *)bh_tier_name(tier),
                    "--errno",           errno_arg,    "--secret",
                    secret.path,         secret.token, NULL};
    spec.process.argv = strv_dup(argv);
    spec.process.env = strv_dup((char *[]){"PATH=/usr/bin:/bin", NULL});
    /* The default working directory tmpfs: a cwd of "/" would be a writable tree. */
    spec.process.cwd = strdup("/work");
    if (spec.id == NULL || spec.mounts == NULL || spec.mounts[0].source == NULL ||
        spec.mounts[0].destination == NULL || spec.mounts[0].type == NULL ||
        spec.process.argv == NULL || spec.process.env == NULL || spec.process.cwd == NULL) {
        bh_sandbox_spec_free(&spec);
        secret_remove(&secret);
        return bh_error_set(err, ENOMEM, "cannot verify the tier: out of memory");
    }

    int in[2] = {-1, -1}, outp[2] = {-1, -1};
    cleanup_close int errfd = memfd_create("bulkhead-probe-stderr", MFD_CLOEXEC);
    if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0 || errfd < 0) {
        int e = errno;
        bh_closep(&in[0]), bh_closep(&in[1]), bh_closep(&outp[0]), bh_closep(&outp[1]);
        bh_sandbox_spec_free(&spec);
        secret_remove(&secret);
        return bh_error_errno(err, e, "cannot verify the tier: pipes for the probe");
    }
    cleanup_close int to_probe = in[1];
    cleanup_close int from_probe = outp[0];
    spec.stdio[0] = in[0];
    spec.stdio[1] = outp[1];
    spec.stdio[2] = errfd;

    int64_t deadline = now_ms() + (opts->timeout_ms > 0 ? opts->timeout_ms : 20000);
    struct bh_sandbox *sb = NULL;
    int rc = bh_sandbox_create(&spec, &(struct bh_create_opts){0}, &sb, err);
    close(in[0]);
    close(outp[1]);
    spec.stdio[0] = spec.stdio[1] = spec.stdio[2] = -1;
    if (rc < 0 || bh_sandbox_start(sb, err) < 0) {
        if (sb != NULL)
            bh_sandbox_destroy(sb);
        bh_sandbox_spec_free(&spec);
        secret_remove(&secret);
        return bh_error_prefix(err, "cannot verify the tier: the %s-tier probe sandbox",
                               bh_tier_name(tier));
    }

    cleanup_free char *text = read_report(from_probe, deadline);
    struct bh_tier_report *r = bh_tier_report_new("host", tier);
    if (r == NULL) {
        bh_sandbox_destroy(sb);
        bh_sandbox_spec_free(&spec);
        secret_remove(&secret);
        return bh_error_set(err, ENOMEM, "cannot verify the tier: out of memory");
    }
    struct bh_error perr = {0};
    if (bh_tier_report_parse_probe(r, text, &perr) < 0)
        bh_tier_report_add(r, "probe_complete", BH_CHECK_FAIL, BH_TIER_CONTAINER, "%s", perr.msg);

    /* While the probe waits on stdin, look at it from outside. */
    struct bh_live_target target = {
        .sentry_pid = bh_sandbox_pid(sb),
        .tier = tier,
        .limits = &spec.limits,
        .caps = 0,
    };
    struct bh_error lerr = {0};
    if (bh_probe_check_live(&target, &r, &lerr) < 0)
        bh_tier_report_add(r, "sentry_pid1", BH_CHECK_FAIL, BH_TIER_KERNEL, "%s", lerr.msg);

    /* A probe that did not finish its report may never read stdin again. */
    close(steal_fd(&to_probe));
    if (now_ms() > deadline || text == NULL || strstr(text, "\n" BH_PROBE_END "\n") == NULL)
        bh_sandbox_signal(sb, SIGKILL, NULL);
    int status = 0;
    struct bh_error werr = {0};
    if (bh_sandbox_wait(sb, &status, &werr) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char tail[512] = "";
        ssize_t n = pread(errfd, tail, sizeof(tail) - 1, 0);
        tail[n > 0 ? n : 0] = '\0';
        bh_tier_report_add(r, "probe_complete", BH_CHECK_FAIL, BH_TIER_CONTAINER,
                           "the probe ended with status %d%s%s", bh_status_to_exit_code(status),
                           tail[0] ? ": " : "", tail);
    }
    bh_sandbox_destroy(sb);
    bh_sandbox_spec_free(&spec);
    secret_remove(&secret);

    bh_tier_report_compute(r);
    *out = r;
    return 0;
}

/* ---- the per-boot cache ---------------------------------------------------------- */

static void key_file(struct bh_sha256 *h, const char *path)
{
    struct stat st;
    char line[PATH_MAX + 128];
    int n;
    if (stat(path, &st) == 0)
        n = snprintf(line, sizeof(line), "%s %lu %lu %lld %lld.%09ld\n", path,
                     (unsigned long)st.st_dev, (unsigned long)st.st_ino, (long long)st.st_size,
                     (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    else
        n = snprintf(line, sizeof(line), "%s missing\n", path);
    bh_sha256_update(h, line, (size_t)n);
}

extern char **environ;

/* Everything a verification depends on: a change of any makes a new key. */
static void cache_key(enum bh_tier tier, const char *probe, char out[BH_SHA256_HEX])
{
    struct bh_sha256 h;
    bh_sha256_init(&h);
    char buf[256] = "";
    read_file("/proc/sys/kernel/random/boot_id", buf, sizeof(buf));
    bh_sha256_update(&h, buf, strlen(buf));
    struct utsname u;
    if (uname(&u) == 0) {
        bh_sha256_update(&h, u.release, strlen(u.release));
        bh_sha256_update(&h, u.version, strlen(u.version));
    }
    bh_sha256_update(&h, bh_tier_name(tier), strlen(bh_tier_name(tier)));
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    exe[n > 0 ? n : 0] = '\0';
    key_file(&h, exe);
    key_file(&h, probe);
    char path[PATH_MAX];
    if (bh_path_find("bulkhead-sentry", path, sizeof(path), NULL) == 0)
        key_file(&h, path);
    if (bh_path_find("seccomp-policies", path, sizeof(path), NULL) == 0) {
        key_file(&h, path);
        DIR *d = opendir(path);
        struct dirent *de;
        while (d != NULL && (de = readdir(d)) != NULL) {
            char f[PATH_MAX * 2];
            if (de->d_name[0] == '.')
                continue;
            snprintf(f, sizeof(f), "%s/%s", path, de->d_name);
            key_file(&h, f);
        }
        if (d != NULL)
            closedir(d);
    }
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "BULKHEAD_", 9) == 0) {
            bh_sha256_update(&h, *e, strlen(*e));
            bh_sha256_update(&h, "\n", 1);
        }
    }
    uint8_t digest[BH_SHA256_LEN];
    bh_sha256_final(&h, digest);
    bh_hex(digest, sizeof(digest), out);
}

/* Parents are made traversable (0711): /run/bulkhead is shared with OCI
 * state, which sandboxes running under their own ids must reach. */
static int mkdir_private(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0711) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0700) < 0 && errno != EEXIST)
        return -1;
    return 0;
}

/* Only a cache file root alone could have written is believed. */
static struct bh_tier_report *cache_load(const char *file)
{
    cleanup_close int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != 0 ||
        (st.st_mode & 022) != 0 || st.st_size > (1 << 20))
        return NULL;
    cleanup_free char *text = calloc(1, (size_t)st.st_size + 1);
    if (text == NULL || read(fd, text, (size_t)st.st_size) != st.st_size)
        return NULL;
    struct bh_tier_report *r = NULL;
    if (bh_tier_report_from_json(text, &r, NULL) < 0)
        return NULL;
    r->from_cache = true;
    return r;
}

/* The probe sandbox belongs to a worker process, not to the caller: the
 * sandbox dies with the thread that made it, and a caller killed mid-probe
 * (bulkheadd at start) could not remove its cgroup. The worker always
 * finishes (the probe has a deadline), cleans up, and hands the report over
 * as JSON; a caller that died meanwhile simply does not read it. */
int bh_probe_run(const struct bh_probe_opts *opts, struct bh_tier_report **out,
                 struct bh_error *err)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return bh_error_errno(err, errno, "cannot verify the tier: pipe");
    pid_t worker = fork();
    if (worker < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return bh_error_errno(err, e, "cannot verify the tier: fork");
    }
    if (worker == 0) {
        close(p[0]);
        signal(SIGPIPE, SIG_IGN);
        struct bh_tier_report *r = NULL;
        struct bh_error e = {0};
        char *text = NULL;
        if (probe_run_here(opts, &r, &e) == 0 && r != NULL && (text = bh_tier_report_json(r)))
            (void)!write(p[1], "R", 1);
        else
            (void)!write(p[1], "E", 1);
        const char *body = text ? text : e.msg;
        size_t len = strlen(body);
        for (size_t at = 0; at < len;) {
            ssize_t w = write(p[1], body + at, len - at);
            if (w <= 0)
                break;
            at += (size_t)w;
        }
        _exit(0);
    }
    close(p[1]);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 16384;
            char *nb = realloc(buf, cap);
            if (nb == NULL)
                break;
            buf = nb;
        }
        ssize_t n = read(p[0], buf + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(p[0]);
    while (waitpid(worker, NULL, 0) < 0 && errno == EINTR)
        ;
    if (buf == NULL || len == 0) {
        free(buf);
        return bh_error_set(err, EPROTO, "cannot verify the tier: the probe worker said nothing");
    }
    buf[len] = '\0';
    int rc;
    if (buf[0] == 'R') {
        rc = bh_tier_report_from_json(buf + 1, out, err);
        if (rc < 0)
            bh_error_prefix(err, "cannot verify the tier: the probe worker's report");
    } else {
        rc = bh_error_set(err, EIO, "%s", buf + 1);
    }
    free(buf);
    return rc;
}

static void cache_store(const char *dir, const char *file, const struct bh_tier_report *r)
{
    if (mkdir_private(dir) < 0)
        return;
    cleanup_free char *json = bh_tier_report_json(r);
    if (json == NULL)
        return;
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof(tmp), "%s.%d", file, (int)getpid());
    cleanup_close int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    size_t len = strlen(json);
    if (write(fd, json, len) != (ssize_t)len || fsync(fd) < 0 || rename(tmp, file) < 0)
        unlink(tmp);
}

int bh_probe_run_cached(const struct bh_probe_opts *opts, const char *cache_dir,
                        struct bh_tier_report **out, struct bh_error *err)
{
    enum bh_tier tier = opts->tier ? opts->tier : BH_TIER_KERNEL;
    bool bypass = test_break_list() != NULL;
    if (cache_dir == NULL)
        cache_dir = "/run/bulkhead/tier-cache";

    char probe[PATH_MAX], key[BH_SHA256_HEX], file[PATH_MAX];
    if (probe_binary(opts, probe, sizeof(probe), err) < 0)
        return -1;
    cache_key(tier, probe, key);
    snprintf(file, sizeof(file), "%s/%s.json", cache_dir, key);
    if (!bypass) {
        struct bh_tier_report *r = cache_load(file);
        if (r != NULL) {
            bh_tier_report_compute(r);
            *out = r;
            return 0;
        }
    }
    struct bh_tier_report *r = NULL;
    if (bh_probe_run(opts, &r, err) < 0)
        return -1;
    if (!bypass && r->tier >= tier)
        cache_store(cache_dir, file, r);
    *out = r;
    return 0;
}

int bh_probe_require(enum bh_tier tier, struct bh_tier_report **out, struct bh_error *err)
{
    if (out != NULL)
        *out = NULL;
    struct bh_tier_report *r = NULL;
    if (bh_probe_run_cached(&(struct bh_probe_opts){.tier = tier}, NULL, &r, err) < 0)
        return -1;
    int rc = 0;
    if (r->tier < tier) {
        char failed[768] = "";
        size_t used = 0;
        for (size_t i = 0; i < r->n_checks && used < sizeof(failed); i++) {
            const struct bh_check *c = &r->checks[i];
            if (c->result != BH_CHECK_PASS && c->required_for != BH_TIER_NONE &&
                c->required_for <= tier)
                used += (size_t)snprintf(failed + used, sizeof(failed) - used, "%s%s (%s)",
                                         used ? "; " : "", c->name, c->detail);
        }
        rc = bh_error_set(err, EPERM,
                          "the %s tier is not verified on this host (verified: %s); failed "
                          "checks: %s. `bulkhead tier` shows every check",
                          bh_tier_name(tier), bh_tier_name(r->tier), failed);
    }
    if (out != NULL)
        *out = r;
    else
        bh_tier_report_free(r);
    return rc;
}
