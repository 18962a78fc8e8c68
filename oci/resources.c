/* Owns `bulkhead update` (LinuxResources JSON or flags, applied to the
 * container's cgroups) and `bulkhead events` (runc's event stream: stats
 * once with --stats, else every --interval while the container lives). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "oci-internal.h"

/* "512m", "1g", "1048576" → bytes; -1 stays -1 (unlimited). */
static int parse_size(const char *s, int64_t *out)
{
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s)
        return -1;
    long long mul = 1;
    switch (*end) {
    case '\0':
        break;
    case 'k':
    case 'K':
        mul = 1024;
        end++;
        break;
    case 'm':
    case 'M':
        mul = 1024 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mul = 1024LL * 1024 * 1024;
        end++;
        break;
    default:
        return -1;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0')
        return -1;
    *out = v * mul;
    return 0;
}

int cmd_update(const struct cli_globals *g, int argc, char **argv)
{
    const char *resources = NULL, *memory = NULL, *swap = NULL, *pids = NULL, *quota = NULL,
               *period = NULL, *shares = NULL, *reservation = NULL, *kmem = NULL, *blkio = NULL,
               *cpus = NULL, *mems = NULL, *rt_period = NULL, *rt_runtime = NULL;
    const struct oci_opt opts[] = {
        {"resources", 'r', OCI_OPT_STRING, &resources},
        {"memory", 0, OCI_OPT_STRING, &memory},
        {"memory-swap", 0, OCI_OPT_STRING, &swap},
        {"memory-reservation", 0, OCI_OPT_STRING, &reservation},
        {"kernel-memory", 0, OCI_OPT_STRING, &kmem},
        {"pids-limit", 0, OCI_OPT_STRING, &pids},
        {"cpu-quota", 0, OCI_OPT_STRING, &quota},
        {"cpu-period", 0, OCI_OPT_STRING, &period},
        {"cpu-share", 0, OCI_OPT_STRING, &shares},
        {"blkio-weight", 0, OCI_OPT_STRING, &blkio},
        {"cpuset-cpus", 0, OCI_OPT_STRING, &cpus},
        {"cpuset-mems", 0, OCI_OPT_STRING, &mems},
        {"cpu-rt-period", 0, OCI_OPT_STRING, &rt_period},
        {"cpu-rt-runtime", 0, OCI_OPT_STRING, &rt_runtime},
    };
    bool help = false;
    struct bh_error err = {0};
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help, &err);
    if (pos < 0) {
        cli_report_error(g, "update: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (help) {
        printf("usage: bulkhead update [--resources FILE|-] [--memory N] [--memory-swap N]\n"
               "       [--memory-reservation N] [--pids-limit N] [--cpu-quota N] [--cpu-period N]\n"
               "       [--cpu-share N] [--cpu-rt-period N] [--cpu-rt-runtime N]\n"
               "       [--cpuset-cpus LIST] [--cpuset-mems LIST] [--blkio-weight N] ID\n");
        return 0;
    }
    const char *id;
    if (oci_need_id(g, "update", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    /* runc takes update's flags after the id too (`update ID --cpu-period N`,
     * as its own tests write it): parse what follows the id the same way. */
    if (pos + 1 < argc) {
        int more = oci_parse_args(argc - pos, argv + pos, opts, BH_ARRAY_SIZE(opts), &help, &err);
        if (more < 0) {
            cli_report_error(g, "update: %s", err.msg);
            return CLI_EXIT_REFUSED;
        }
        if (pos + more < argc) {
            cli_report_error(g, "update: unexpected argument `%s` after the container id",
                             argv[pos + more]);
            return CLI_EXIT_REFUSED;
        }
    }
    /* runc ignores kernel memory (the kernel dropped its limit) with a warning. */
    if (kmem != NULL && strcmp(kmem, "0") != 0)
        fprintf(stderr, "bulkhead: warning: update: kernel memory settings are ignored (the "
                        "kernel no longer limits kernel memory apart)\n");
    struct bh_limits l = {0};
    if (resources) {
        json_error_t jerr;
        json_t *doc = strcmp(resources, "-") == 0
                          ? json_loadf(stdin, JSON_REJECT_DUPLICATES, &jerr)
                          : json_load_file(resources, JSON_REJECT_DUPLICATES, &jerr);
        if (doc == NULL) {
            cli_report_error(g, "update: --resources line %d column %d: %s", jerr.line, jerr.column,
                             jerr.text);
            return CLI_EXIT_REFUSED;
        }
        int r = oci_resources_parse(doc, "resources", &l, &err);
        json_decref(doc);
        if (r < 0) {
            cli_report_error(g, "update: %s", err.msg);
            return CLI_EXIT_REFUSED;
        }
    }
    struct {
        const char *flag, *v;
        int64_t *dst;
    } flags[] = {
        {"--memory", memory, &l.memory_bytes},
        {"--memory-swap", swap, &l.memory_swap_bytes},
        {"--memory-reservation", reservation, &l.memory_reservation_bytes},
        {"--pids-limit", pids, &l.pids},
        {"--cpu-quota", quota, &l.cpu_quota_us},
        {"--cpu-period", period, &l.cpu_period_us},
        {"--cpu-share", shares, &l.cpu_shares},
        {"--cpu-rt-period", rt_period, &l.cpu_rt_period_us},
        {"--cpu-rt-runtime", rt_runtime, &l.cpu_rt_runtime_us},
    };
    for (size_t i = 0; i < BH_ARRAY_SIZE(flags); i++) {
        if (flags[i].v == NULL)
            continue;
        int64_t v;
        if (parse_size(flags[i].v, &v) < 0) {
            cli_report_error(g, "update: %s `%s` is not a number", flags[i].flag, flags[i].v);
            return CLI_EXIT_REFUSED;
        }
        /* -1 lifts a limit (`--memory-swap -1`: unlimited swap), as runc. */
        *flags[i].dst = v > 0 ? v : v < 0 ? -1 : 0;
    }
    if (blkio != NULL) {
        int64_t v;
        if (parse_size(blkio, &v) < 0 || v < 10 || v > 1000) {
            cli_report_error(g, "update: --blkio-weight `%s` must be 10 to 1000", blkio);
            return CLI_EXIT_REFUSED;
        }
        l.blkio_weight = (uint16_t)v;
    }
    const char *sets[] = {cpus, mems};
    for (size_t k = 0; k < BH_ARRAY_SIZE(sets); k++) {
        if (sets[k] == NULL)
            continue;
        if (strlen(sets[k]) >= sizeof(l.cpuset_cpus) ||
            strspn(sets[k], "0123456789,-") != strlen(sets[k])) {
            cli_report_error(g, "update: --cpuset-%s `%s` is not a list such as `0-3,6`",
                             k == 0 ? "cpus" : "mems", sets[k]);
            return CLI_EXIT_REFUSED;
        }
        snprintf(k == 0 ? l.cpuset_cpus : l.cpuset_mems, sizeof(l.cpuset_cpus), "%s", sets[k]);
    }
    /* A quota alone keeps the period the cgroup has (runc's `update cgroup
     * cpu limits`). */
    cleanup_close int dirfd = -1;
    struct oci_state st;
    if (oci_open(g, "update", id, &dirfd, &st) < 0)
        return 1;
    int rc = 1;
    char cgbuf[1200];
    struct bh_cgroup *cg = NULL;
    if (strcmp(oci_state_status(&st), "stopped") == 0) {
        cli_report_error(g, "update: container `%s` is stopped", id);
    } else if (bh_cgroup_open(oci_cgroup_of(&st, cgbuf, sizeof(cgbuf)), &cg, &err) < 0 ||
               bh_cgroup_update(cg, &l, &err) < 0) {
        cli_report_error(g, "update: %s", err.msg);
    } else {
        rc = 0;
    }
    if (cg)
        bh_cgroup_free(cg);
    oci_state_free(&st);
    return rc;
}

int oci_cgroup_precheck(const struct cli_globals *g, const char *path, struct bh_error *err)
{
    struct bh_cgroup *cg = NULL;
    if (bh_cgroup_open(path, &cg, NULL) < 0)
        return 0; /* not there: create makes it */
    bool frozen = false;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    int rc = 0;
    if (bh_cgroup_frozen(cg, &frozen, err) < 0)
        rc = bh_error_prefix(err, "cgroup `%s`", path);
    else if (frozen)
        rc = bh_error_set(err, EBUSY,
                          "container's cgroup unexpectedly frozen: `%s` exists and is frozen, so "
                          "the container's processes would never run; thaw it or use another "
                          "cgroupsPath",
                          path);
    else if (bh_cgroup_pids(cg, &pids, &n, NULL) == 0 && n > 0) {
        char msg[1400];
        snprintf(msg, sizeof(msg),
                 "container's cgroup is not empty: %zu process(es) already in `%s`; they will "
                 "share its limits (and be killed when this container is deleted)",
                 n, path);
        cli_log(g, "warning", "%s", msg);
        /* runc shows warnings on stderr even without --debug or --log. */
        if (g->log_path == NULL && !g->debug)
            fprintf(stderr, "bulkhead: warning: %s\n", msg);
    }
    bh_cgroup_free(cg);
    return rc;
}

/* A limit as runc prints it: "none" is the largest page-aligned value. */
static json_int_t limit_json(uint64_t v)
{
    return v == UINT64_MAX ? (json_int_t)INT64_MAX : (json_int_t)v;
}

static json_t *blkio_json(const struct bh_cgroup_blkio_entry *e, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("{s:I,s:I,s:s,s:I}", "major", (json_int_t)e[i].major,
                                           "minor", (json_int_t)e[i].minor, "op", e[i].op, "value",
                                           (json_int_t)e[i].value));
    return a;
}

/* runc's stats event (its types/events.go names): cpu, memory, pids, blkio. */
static json_t *stats_json(const char *id, const struct bh_cgroup_stats *s)
{
    json_t *data = json_object();
    json_t *cpu = json_object(), *usage = json_object();
    json_object_set_new(usage, "total", json_integer((json_int_t)s->cpu_usage_ns));
    json_object_set_new(usage, "kernel", json_integer((json_int_t)s->cpu_kernel_ns));
    json_object_set_new(usage, "user", json_integer((json_int_t)s->cpu_user_ns));
    json_object_set_new(cpu, "usage", usage);
    json_object_set_new(cpu, "throttling",
                        json_pack("{s:I,s:I,s:I}", "periods", (json_int_t)s->cpu_periods,
                                  "throttledPeriods", (json_int_t)s->cpu_throttled_periods,
                                  "throttledTime", (json_int_t)s->cpu_throttled_ns));
    json_object_set_new(data, "cpu", cpu);
    json_t *mem = json_object(), *mu = json_object();
    json_object_set_new(mu, "usage", json_integer((json_int_t)s->memory_usage));
    json_object_set_new(mu, "max", json_integer((json_int_t)s->memory_max_usage));
    json_object_set_new(mu, "limit", json_integer(limit_json(s->memory_limit)));
    json_object_set_new(mu, "failcnt", json_integer((json_int_t)s->memory_failcnt));
    json_object_set_new(mem, "usage", mu);
    json_object_set_new(mem, "swap",
                        json_pack("{s:I,s:I,s:I}", "usage", (json_int_t)s->swap_usage, "limit",
                                  limit_json(s->swap_limit), "failcnt", (json_int_t)0));
    json_object_set_new(mem, "cache", json_integer((json_int_t)s->memory_cache));
    json_object_set_new(data, "memory", mem);
    json_t *pids = json_object();
    json_object_set_new(pids, "current", json_integer((json_int_t)s->pids_current));
    json_object_set_new(pids, "limit",
                        json_integer(s->pids_limit == UINT64_MAX ? 0 : (json_int_t)s->pids_limit));
    json_object_set_new(data, "pids", pids);
    json_t *blkio = json_object();
    json_object_set_new(blkio, "ioServiceBytesRecursive", blkio_json(s->io_bytes, s->n_io_bytes));
    json_object_set_new(blkio, "ioServicedRecursive", blkio_json(s->io_ops, s->n_io_ops));
    json_object_set_new(data, "blkio", blkio);
    json_t *ev = json_object();
    json_object_set_new(ev, "type", json_string("stats"));
    json_object_set_new(ev, "id", json_string(id));
    json_object_set_new(ev, "data", data);
    return ev;
}

/* Go durations as runc takes them: "5s", "500ms", "1m"; a bare number is seconds. */
static int parse_interval(const char *s, unsigned *ms)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    if (strcmp(end, "ms") == 0)
        *ms = (unsigned)v;
    else if (strcmp(end, "s") == 0 || *end == '\0')
        *ms = (unsigned)(v * 1000);
    else if (strcmp(end, "m") == 0)
        *ms = (unsigned)(v * 60000);
    else
        return -1;
    return *ms > 0 ? 0 : -1;
}

int cmd_events(const struct cli_globals *g, int argc, char **argv)
{
    bool stats = false;
    const char *interval = "5s";
    const struct oci_opt opts[] = {
        {"stats", 0, OCI_OPT_BOOL, &stats},
        {"interval", 0, OCI_OPT_STRING, &interval},
    };
    bool help = false;
    struct bh_error err = {0};
    int pos = oci_parse_args(argc, argv, opts, BH_ARRAY_SIZE(opts), &help, &err);
    if (pos < 0) {
        cli_report_error(g, "events: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (help) {
        oci_help_print(stdout, "events");
        return 0;
    }
    const char *id;
    if (oci_need_id(g, "events", argc, argv, pos, &id) < 0)
        return CLI_EXIT_REFUSED;
    unsigned ms;
    if (parse_interval(interval, &ms) < 0) {
        cli_report_error(g, "events: --interval `%s` is not a duration (5s, 500ms)", interval);
        return CLI_EXIT_REFUSED;
    }
    /* OOM kills are looked for every tick (runc reports them as they
     * happen); statistics go out at start and every interval. */
    const unsigned tick_ms = 200;
    unsigned since_stats = ms;
    uint64_t oom_seen = 0;
    bool first = true;
    for (;;) {
        struct oci_state st;
        int dirfd = -1;
        struct bh_error oerr = {0};
        if (oci_state_open(g->root, id, &dirfd, &st, &oerr) < 0) {
            /* Deleted while we watched: the stream ends, as when it stops. */
            if (!first && oerr.code == ENOENT)
                return 0;
            cli_report_error(g, "events: %s", oerr.msg);
            return 1;
        }
        close(dirfd);
        bool stopped = strcmp(oci_state_status(&st), "stopped") == 0;
        char cgbuf[1200];
        struct bh_cgroup *cg = NULL;
        struct bh_cgroup_stats s;
        int r = -1;
        if (!stopped && bh_cgroup_open(oci_cgroup_of(&st, cgbuf, sizeof(cgbuf)), &cg, &err) == 0) {
            r = bh_cgroup_stats(cg, &s, &err);
            bh_cgroup_free(cg);
        }
        oci_state_free(&st);
        if (stopped) {
            if (stats) {
                cli_report_error(g, "events: container `%s` is not running", id);
                return 1;
            }
            return 0;
        }
        if (r < 0) {
            cli_report_error(g, "events: %s", err.msg);
            return 1;
        }
        if (!stats && !first && s.oom_kills > oom_seen) {
            json_t *ev = json_pack("{s:s,s:s}", "type", "oom", "id", id);
            char *text = json_dumps(ev, JSON_COMPACT);
            printf("%s\n", text);
            fflush(stdout);
            free(text);
            json_decref(ev);
        }
        oom_seen = s.oom_kills;
        first = false;
        if (since_stats >= ms) {
            json_t *ev = stats_json(id, &s);
            char *text = json_dumps(ev, JSON_COMPACT);
            printf("%s\n", text);
            fflush(stdout);
            free(text);
            json_decref(ev);
            since_stats = 0;
        }
        if (stats)
            return 0;
        unsigned nap = ms - since_stats < tick_ms ? ms - since_stats : tick_ms;
        usleep(nap * 1000);
        since_stats += nap;
    }
}
