/* bulkheadd: the standalone execution host. main parses flags (each limit a
 * flag and an environment variable), verifies the tier it was asked for
 * (refusing to start when it cannot be proven), proves each language with a
 * trivial cell, binds the control socket and serves one thread per
 * connection until SIGTERM, which closes every session and removes the
 * socket, or until a hand-over (SIGUSR2, or SIGTERM with --keep-sessions),
 * which leaves every session to the next bulkheadd on the same state
 * directory. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <grp.h>
#include <libgen.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "alloc.h"
#include "bulkheadd.h"
#include "cleanup.h"
#include "frame.h"
#include "paths.h"
#include "probe.h"
#include "sha256.h"

extern Bulkhead__Control__DescribeResult bhd_describe;

struct limit_flag {
    const char *flag;
    const char *env;
    int64_t *value;
    int64_t def;
    int64_t min, max;
    const char *unit; /* "ms", "bytes" or "" */
    const char *help;
};

#define MIB (1024LL * 1024)
static struct limit_flag limit_flags[] = {
    {"idle-timeout", "BULKHEADD_IDLE_TIMEOUT_MS", &bhd_cfg.idle_ms, 10 * 60 * 1000, 100,
     7LL * 24 * 3600 * 1000, "ms", "close a session after this long without a call"},
    {"lifetime", "BULKHEADD_LIFETIME_MS", &bhd_cfg.lifetime_ms, 30 * 60 * 1000, 100,
     7LL * 24 * 3600 * 1000, "ms", "close a session this long after it opened"},
    {"max-sessions-per-owner", "BULKHEADD_MAX_SESSIONS_PER_OWNER", &bhd_cfg.per_owner, 3, 1, 1000,
     "", "a further OpenSession evicts the owner's least recently used idle session"},
    {"max-sessions", "BULKHEADD_MAX_SESSIONS", &bhd_cfg.max_sessions, 64, 1, 100000, "",
     "sessions in all; beyond it OpenSession answers at_capacity, unless another uid holds "
     "at least two sessions more than the caller's (its least recently used idle one is evicted)"},
    {"evict-min-idle", "BULKHEADD_EVICT_MIN_IDLE_MS", &bhd_cfg.evict_min_idle_ms, 60 * 1000, 0,
     7LL * 24 * 3600 * 1000, "ms",
     "at --max-sessions, another uid's session is evicted only after this long without a "
     "call; if none is, OpenSession answers at_capacity naming both limits"},
    {"max-calls-per-owner", "BULKHEADD_MAX_CALLS_PER_OWNER", &bhd_cfg.owner_calls, 8, 1, 10000, "",
     "calls one owner may have in flight at once (at_capacity beyond)"},
    {"disk", "BULKHEADD_DISK_BYTES", &bhd_cfg.disk_bytes, 64 * MIB, MIB, 1LL << 40, "bytes",
     "working directory budget; a call that leaves more ends the session"},
    {"memory", "BULKHEADD_MEMORY_BYTES", &bhd_cfg.memory_bytes, 512 * MIB, 32 * MIB, 1LL << 40,
     "bytes", "memory per session (cgroup)"},
    {"pids", "BULKHEADD_PIDS", &bhd_cfg.pids, 128, 16, 100000, "", "processes per session"},
    {"cpu", "BULKHEADD_CPU_MILLIS", &bhd_cfg.cpu_millis, 1000, 10, 256000, "",
     "CPU quota per session in thousandths of a core"},
    {"output", "BULKHEADD_OUTPUT_BYTES", &bhd_cfg.output_bytes, MIB, 1024, 64 * MIB, "bytes",
     "cap for stdout and for stderr of one cell"},
    {"max-timeout", "BULKHEADD_MAX_TIMEOUT_MS", &bhd_cfg.max_timeout_ms, 10 * 60 * 1000, 100,
     24LL * 3600 * 1000, "ms", "largest timeout a cell may ask for"},
    {"default-timeout", "BULKHEADD_DEFAULT_TIMEOUT_MS", &bhd_cfg.default_timeout_ms, 30 * 1000, 100,
     24LL * 3600 * 1000, "ms", "timeout of a cell that names none"},
    {"max-frame", "BULKHEADD_MAX_FRAME_BYTES", &bhd_cfg.max_frame, 8 * MIB, 64 * 1024, 64 * MIB,
     "bytes", "largest request frame; larger: an error, then the connection closes"},
    {"frame-timeout", "BULKHEADD_FRAME_TIMEOUT_MS", &bhd_cfg.frame_timeout_ms, 30 * 1000, 100,
     3600LL * 1000, "ms",
     "a request frame, once begun, must arrive whole within this; else the connection closes"},
    {"max-connections", "BULKHEADD_MAX_CONNECTIONS", &bhd_cfg.max_connections, 256, 1, 100000, "",
     "client connections at once; beyond it a new one gets at_capacity and is closed, unless "
     "another uid holds at least two more than the caller's (its longest idle one is closed)"},
    {"warm", "BULKHEADD_WARM", &bhd_cfg.warm, 2, 0, 64, "", "ready sandboxes kept for OpenSession"},
    {"adopt-grace", "BULKHEADD_ADOPT_GRACE_MS", &bhd_cfg.grace_ms, 60 * 1000, 100,
     24LL * 3600 * 1000, "ms",
     "after the daemon ends without closing them (crash, hand-over), sessions wait this long "
     "for a new one to adopt them, then end"},
    {"handover-wait", "BULKHEADD_HANDOVER_WAIT_MS", &bhd_cfg.handover_wait_ms, 30 * 1000, 0,
     3600LL * 1000, "ms",
     "a hand-over lets calls in flight finish this long; a cell still running then is "
     "answered \"may have run\" and its session starts fresh"},
};

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: bulkheadd --socket PATH [--tier kernel|container] [--rootfs DIR]\n"
        "                 [--socket-group GROUP] [--audit FILE] [--runners DIR] [LIMITS...]\n"
        "\n"
        "The standalone execution host: one sandbox per session, Python and JavaScript\n"
        "interpreters kept alive between cells, served over a unix socket (protobuf,\n"
        "proto/control.proto). It verifies its tier at start and refuses to start\n"
        "when the tier asked for cannot be proven.\n"
        "\n"
        "  --socket PATH          control socket (env BULKHEADD_SOCKET)\n"
        "  --socket-group GROUP   socket mode 0660 with this group (default: 0600)\n"
        "  --tier TIER            kernel (default) or container (env BULKHEADD_TIER);\n"
        "                         none: NO isolation, for developing bulkheadd only\n"
        "  --rootfs DIR           guest root (default: the host's system directories, read-only)\n"
        "  --audit FILE           one JSON line per call (default: stderr; env BULKHEADD_AUDIT)\n"
        "  --runners DIR          agent and runners (default: next to the binary)\n"
        "  --prestart LANGS       interpreters each new sandbox starts before its first cell:\n"
        "                         python (default), javascript, both comma-separated, or none\n"
        "                         (env BULKHEADD_PRESTART; each costs memory per session)\n"
        "  --state-dir DIR        where session keepers wait to be adopted, root only (env\n"
        "                         BULKHEADD_STATE_DIR; default /run/bulkhead/sessions/ plus\n"
        "                         a hash of the socket path); a new bulkheadd on the same\n"
        "                         directory adopts every live session\n"
        "  --keep-sessions        SIGTERM hands sessions over to the next bulkheadd instead\n"
        "                         of closing them (SIGUSR2 always does)\n"
        "  --debug                the agent's stderr reaches ours\n"
        "\nlimits (flag, environment variable, default):\n");
    for (size_t i = 0; i < BH_ARRAY_SIZE(limit_flags); i++) {
        struct limit_flag *l = &limit_flags[i];
        char flag[64];
        snprintf(flag, sizeof(flag), "--%s N", l->flag);
        fprintf(out, "  %-28s %s (%s, default %lld%s%s)\n", flag, l->help, l->env,
                (long long)l->def, l->unit[0] ? " " : "", l->unit);
    }
}

static int parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long n = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return -1;
    *v = n;
    return 0;
}

static int set_limit(struct limit_flag *l, const char *val, const char *from)
{
    int64_t v;
    if (parse_i64(val, &v) < 0 || v < l->min || v > l->max) {
        fprintf(stderr, "bulkheadd: %s `%s` is not a number from %lld to %lld%s%s\n", from, val,
                (long long)l->min, (long long)l->max, l->unit[0] ? " " : "", l->unit);
        return -1;
    }
    *l->value = v;
    return 0;
}

static int parse_args(int argc, char **argv)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(limit_flags); i++) {
        *limit_flags[i].value = limit_flags[i].def;
        const char *e = getenv(limit_flags[i].env);
        if (e != NULL && set_limit(&limit_flags[i], e, limit_flags[i].env) < 0)
            return -1;
    }
    bhd_cfg.socket_path = getenv("BULKHEADD_SOCKET");
    bhd_cfg.audit_path = getenv("BULKHEADD_AUDIT");
    bhd_cfg.prestart = getenv("BULKHEADD_PRESTART");
    bhd_cfg.state_dir = getenv("BULKHEADD_STATE_DIR");
    const char *tier = getenv("BULKHEADD_TIER");
    if (tier == NULL)
        tier = "kernel";
    enum {
        O_SOCKET = 256,
        O_GROUP,
        O_TIER,
        O_ROOTFS,
        O_AUDIT,
        O_RUNNERS,
        O_DEBUG,
        O_PRESTART,
        O_KEEPER,
        O_STATE_DIR,
        O_KEEP_SESSIONS,
        O_HELP,
        O_LIMIT
    };
    struct option base[] = {
        {"socket", required_argument, NULL, O_SOCKET},
        {"socket-group", required_argument, NULL, O_GROUP},
        {"tier", required_argument, NULL, O_TIER},
        {"rootfs", required_argument, NULL, O_ROOTFS},
        {"audit", required_argument, NULL, O_AUDIT},
        {"runners", required_argument, NULL, O_RUNNERS},
        {"debug", no_argument, NULL, O_DEBUG},
        {"prestart", required_argument, NULL, O_PRESTART},
        {"internal-keeper", required_argument, NULL, O_KEEPER},
        {"state-dir", required_argument, NULL, O_STATE_DIR},
        {"keep-sessions", no_argument, NULL, O_KEEP_SESSIONS},
        {"help", no_argument, NULL, O_HELP},
    };
    /* Sized from both tables, so a new flag can never overflow it. */
    struct option opts[BH_ARRAY_SIZE(base) + BH_ARRAY_SIZE(limit_flags) + 1];
    size_t n = 0;
    for (size_t i = 0; i < BH_ARRAY_SIZE(base); i++)
        opts[n++] = base[i];
    for (size_t i = 0; i < BH_ARRAY_SIZE(limit_flags); i++)
        opts[n++] = (struct option){limit_flags[i].flag, required_argument, NULL, O_LIMIT + (int)i};
    opts[n] = (struct option){0};
    int c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case O_SOCKET:
            bhd_cfg.socket_path = optarg;
            break;
        case O_GROUP:
            bhd_cfg.socket_group = optarg;
            break;
        case O_TIER:
            tier = optarg;
            break;
        case O_ROOTFS:
            bhd_cfg.rootfs = optarg;
            break;
        case O_AUDIT:
            bhd_cfg.audit_path = optarg;
            break;
        case O_RUNNERS:
            bhd_cfg.runners_dir = optarg;
            break;
        case O_DEBUG:
            bhd_cfg.debug = true;
            break;
        case O_PRESTART:
            bhd_cfg.prestart = optarg;
            break;
        case O_KEEPER:
            bhd_keeper_args = optarg;
            break;
        case O_STATE_DIR:
            bhd_cfg.state_dir = optarg;
            break;
        case O_KEEP_SESSIONS:
            bhd_cfg.keep_sessions = true;
            break;
        case O_HELP:
        case 'h':
            usage(stdout);
            exit(0);
        default:
            if (c >= O_LIMIT && c < O_LIMIT + (int)BH_ARRAY_SIZE(limit_flags)) {
                char from[80];
                snprintf(from, sizeof(from), "--%s", limit_flags[c - O_LIMIT].flag);
                if (set_limit(&limit_flags[c - O_LIMIT], optarg, from) < 0)
                    return -1;
                break;
            }
            fprintf(stderr, "bulkheadd: unknown or incomplete option `%s`; see --help\n",
                    argv[optind - 1]);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "bulkheadd: unexpected argument `%s`; see --help\n", argv[optind]);
        return -1;
    }
    struct bh_error err = {0};
    if (bh_tier_parse(tier, &bhd_cfg.tier, &err) < 0) {
        fprintf(stderr, "bulkheadd: --tier: %s\n", err.msg);
        return -1;
    }
    if (bhd_cfg.tier != BH_TIER_KERNEL && bhd_cfg.tier != BH_TIER_CONTAINER &&
        bhd_cfg.tier != BH_TIER_NONE) {
        fprintf(stderr, "bulkheadd: --tier %s is not served: use kernel or container\n", tier);
        return -1;
    }
    if (bhd_cfg.socket_path == NULL) {
        fprintf(stderr, "bulkheadd: --socket PATH is required\n");
        return -1;
    }
    if (bhd_cfg.prestart != NULL) {
        if (strcmp(bhd_cfg.prestart, "none") == 0)
            bhd_cfg.prestart = "";
        for (const char *p = bhd_cfg.prestart; *p;) {
            size_t n = strcspn(p, ",");
            if (!((n == 6 && strncmp(p, "python", 6) == 0) ||
                  (n == 10 && strncmp(p, "javascript", 10) == 0))) {
                fprintf(stderr,
                        "bulkheadd: --prestart `%s`: name python, javascript, both "
                        "comma-separated, or none\n",
                        bhd_cfg.prestart);
                return -1;
            }
            p += n;
            if (*p == ',')
                p++;
        }
    }
    if (bhd_cfg.state_dir == NULL) {
        /* one directory per socket: daemons on other sockets never adopt
         * each other's sessions */
        static char dir[128];
        char h[BH_SHA256_HEX];
        bh_sha256_hex(bhd_cfg.socket_path, strlen(bhd_cfg.socket_path), h);
        snprintf(dir, sizeof(dir), "%s/%.16s", BHD_STATE_ROOT, h);
        bhd_cfg.state_dir = dir;
        bhd_cfg.state_dir_default = true;
    }
    if (bhd_cfg.state_dir[0] != '/') {
        fprintf(stderr, "bulkheadd: --state-dir `%s` must be an absolute path\n",
                bhd_cfg.state_dir);
        return -1;
    }
    if (bhd_cfg.default_timeout_ms > bhd_cfg.max_timeout_ms)
        bhd_cfg.default_timeout_ms = bhd_cfg.max_timeout_ms;
    return 0;
}

static int find_runners(char *dir, size_t size, struct bh_error *err)
{
    if (bhd_cfg.runners_dir != NULL) {
        snprintf(dir, size, "%s", bhd_cfg.runners_dir);
        return 0;
    }
    const char *env = getenv("BULKHEADD_RUNNERS");
    if (env != NULL) {
        snprintf(dir, size, "%s", env);
        return 0;
    }
    if (bh_path_find("runners/agent.py", dir, size, err) < 0)
        return -1;
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    return 0;
}

/* Starts one box and runs a trivial cell in each language: what Describe says
 * is proven, not assumed. Also the box's live tier report. */
static int prove(Bulkhead__Control__TierReport *live, char ***langs, size_t *n_langs,
                 struct bh_error *err)
{
    struct bhd_box *box = NULL;
    if (bhd_box_create("", &box, err) < 0)
        return -1;
    enum bh_tier tier = bhd_box_verify(box, live);
    if (tier < bhd_cfg.tier) {
        bhd_box_destroy(box);
        return bh_error_set(err, EPERM,
                            "a session sandbox verified as `%s`, below the `%s` asked for",
                            bh_tier_name(tier), bh_tier_name(bhd_cfg.tier));
    }
    static const char *const names[] = {"python", "javascript"};
    *langs = bhd_xcalloc(3, sizeof(char *));
    *n_langs = 0;
    for (size_t i = 0; i < 2; i++) {
        Bulkhead__Control__RunCell rc = BULKHEAD__CONTROL__RUN_CELL__INIT;
        rc.language = (char *)names[i];
        rc.code = "6*7";
        struct bhd_cell_out out;
        struct bh_error e2 = {0};
        if (bhd_box_run(box, &rc, 20000, &out, &e2) == 0 && out.exit_code == 0 && out.value &&
            strcmp(out.value, "42") == 0)
            (*langs)[(*n_langs)++] = bhd_xstrdup(names[i]);
        else
            bhd_log("language %s not proven: %s", names[i],
                    e2.msg[0] ? e2.msg : (out.err ? out.err : "wrong answer"));
        bhd_cell_out_free(&out);
    }
    bhd_box_destroy(box);
    return 0;
}

static int verify_tier(Bulkhead__Control__TierReport *rep, struct bh_error *err)
{
    if (bhd_cfg.tier == BH_TIER_NONE)
        return 0;
    struct bh_probe_opts opts = {.tier = bhd_cfg.tier};
    struct bh_tier_report *r = NULL;
    if (bh_probe_run(&opts, &r, err) < 0)
        return bh_error_prefix(err, "verify tier `%s`", bh_tier_name(bhd_cfg.tier));
    char failed[900] = "";
    size_t off = 0;
    for (size_t i = 0; i < r->n_checks; i++) {
        const struct bh_check *c = &r->checks[i];
        char detail[1200];
        snprintf(detail, sizeof(detail), "[probe %s, required for %s] %s",
                 bh_check_result_name(c->result), bh_tier_name(c->required_for),
                 c->detail ? c->detail : "");
        rep->checks = realloc(rep->checks, (rep->n_checks + 1) * sizeof(*rep->checks));
        Bulkhead__Control__Check *pc = bhd_xcalloc(1, sizeof(*pc));
        bulkhead__control__check__init(pc);
        pc->name = bhd_xstrdup(c->name);
        pc->passed = c->result == BH_CHECK_PASS;
        pc->detail = bhd_utf8_sanitize(detail, strlen(detail), NULL);
        rep->checks[rep->n_checks++] = pc;
        if (c->result != BH_CHECK_PASS && c->required_for != BH_TIER_NONE &&
            c->required_for <= bhd_cfg.tier && off < sizeof(failed) - 1)
            off += (size_t)snprintf(failed + off, sizeof(failed) - off, "%s%s (%s)",
                                    off ? ", " : "", c->name, c->detail ? c->detail : "");
    }
    enum bh_tier got = r->tier;
    bh_tier_report_free(r);
    if (got < bhd_cfg.tier)
        return bh_error_set(err, EPERM,
                            "tier `%s` cannot be proven on this host (verified: `%s`); failed: "
                            "%s. Fix the host or start with --tier %s",
                            bh_tier_name(bhd_cfg.tier), bh_tier_name(got),
                            failed[0] ? failed : "see `bulkhead tier`", bh_tier_name(got));
    return 0;
}

static int bind_socket(struct bh_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(bhd_cfg.socket_path) >= sizeof(addr.sun_path))
        return bh_error_set(err, ENAMETOOLONG, "socket path `%s` is too long", bhd_cfg.socket_path);
    strcpy(addr.sun_path, bhd_cfg.socket_path);
    gid_t gid = (gid_t)-1;
    if (bhd_cfg.socket_group != NULL) {
        struct group *g = getgrnam(bhd_cfg.socket_group);
        if (g == NULL)
            return bh_error_set(err, ENOENT, "--socket-group `%s` is not a group",
                                bhd_cfg.socket_group);
        gid = g->gr_gid;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "socket");
    struct stat st;
    if (lstat(bhd_cfg.socket_path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            close(fd);
            return bh_error_set(err, EEXIST,
                                "`%s` exists and is not a socket: refusing to "
                                "replace it",
                                bhd_cfg.socket_path);
        }
        /* a live daemon answers connect: refuse to steal its socket */
        int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(probe, (struct sockaddr *)&addr, sizeof(addr)) == 0) {
            close(probe);
            close(fd);
            return bh_error_set(err, EADDRINUSE, "another bulkheadd serves `%s`",
                                bhd_cfg.socket_path);
        }
        close(probe);
        unlink(bhd_cfg.socket_path);
    }
    mode_t old = umask(0177);
    int rc = bind(fd, (struct sockaddr *)&addr, sizeof(addr));
    umask(old);
    if (rc < 0) {
        int e = errno;
        close(fd);
        return bh_error_errno(err, e, "bind `%s`", bhd_cfg.socket_path);
    }
    if (gid != (gid_t)-1 &&
        (chown(bhd_cfg.socket_path, (uid_t)-1, gid) < 0 || chmod(bhd_cfg.socket_path, 0660) < 0)) {
        int e = errno;
        close(fd);
        unlink(bhd_cfg.socket_path);
        return bh_error_errno(err, e, "give `%s` to group `%s`", bhd_cfg.socket_path,
                              bhd_cfg.socket_group);
    }
    if (listen(fd, 128) < 0) {
        int e = errno;
        close(fd);
        unlink(bhd_cfg.socket_path);
        return bh_error_errno(err, e, "listen");
    }
    return fd;
}

static void *conn_thread(void *arg)
{
    bhd_serve_connection((int)(intptr_t)arg);
    atomic_fetch_sub(&bhd_open_connections, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    bhd_argc = argc;
    bhd_argv = argv;
    if (parse_args(argc, argv) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    struct bh_error err = {0};
    char dir[PATH_MAX];
    if (find_runners(dir, sizeof(dir), &err) < 0 || bhd_runners_load(dir, &bhd_runners, &err) < 0) {
        fprintf(stderr, "bulkheadd: cannot find the session runners: %s (give --runners DIR)\n",
                err.msg);
        return 1;
    }
    /* A session's keeper: the daemon re-executes itself with its own flags
     * plus --internal-keeper, so the keeper starts single-threaded. */
    if (bhd_keeper_args != NULL)
        bhd_keeper_exec_main(bhd_keeper_args);
    if (bhd_server_init(&err) < 0) {
        fprintf(stderr, "bulkheadd: %s\n", err.msg);
        return 1;
    }
    if (bhd_cfg.tier == BH_TIER_NONE)
        bhd_log("WARNING: --tier none runs cells WITHOUT ANY ISOLATION; development only");

    static Bulkhead__Control__TierReport tier_report = BULKHEAD__CONTROL__TIER_REPORT__INIT;
    if (verify_tier(&tier_report, &err) < 0) {
        fprintf(stderr, "bulkheadd: refusing to start: %s\n", err.msg);
        return 1;
    }
    Bulkhead__Control__TierReport live;
    char **langs = NULL;
    size_t n_langs = 0;
    if (prove(&live, &langs, &n_langs, &err) < 0) {
        fprintf(stderr, "bulkheadd: refusing to start: %s\n", err.msg);
        return 1;
    }
    /* the report: the probe's checks, then the live checks of a session box */
    for (size_t i = 0; i < live.n_checks; i++) {
        tier_report.checks =
            realloc(tier_report.checks, (tier_report.n_checks + 1) * sizeof(void *));
        tier_report.checks[tier_report.n_checks++] = live.checks[i];
    }
    free(live.checks); /* the checks moved; their array did not */
    tier_report.tier = live.tier;
    tier_report.verified_at_unix_ms = live.verified_at_unix_ms;
    static Bulkhead__Control__Limits limits = BULKHEAD__CONTROL__LIMITS__INIT;
    limits.idle_timeout_ms = (uint64_t)bhd_cfg.idle_ms;
    limits.lifetime_ms = (uint64_t)bhd_cfg.lifetime_ms;
    limits.max_sessions_per_owner = (uint32_t)bhd_cfg.per_owner;
    limits.max_sessions = (uint32_t)bhd_cfg.max_sessions;
    limits.max_calls_per_owner = (uint32_t)bhd_cfg.owner_calls;
    limits.disk_bytes = (uint64_t)bhd_cfg.disk_bytes;
    limits.memory_bytes = (uint64_t)bhd_cfg.memory_bytes;
    limits.pids = (uint64_t)bhd_cfg.pids;
    limits.cpu_millis_per_sec = (uint64_t)bhd_cfg.cpu_millis;
    limits.output_bytes = (uint64_t)bhd_cfg.output_bytes;
    limits.max_timeout_ms = (uint64_t)bhd_cfg.max_timeout_ms;
    limits.default_timeout_ms = (uint64_t)bhd_cfg.default_timeout_ms;
    limits.max_files = 200;
    limits.max_files_bytes = 4 * MIB;
    limits.max_frame_bytes = (uint64_t)bhd_cfg.max_frame;
    bulkhead__control__describe_result__init(&bhd_describe);
    bhd_describe.host = "bulkheadd";
    bhd_describe.version = BHD_VERSION;
    bhd_describe.tier = &tier_report;
    bhd_describe.languages = langs;
    bhd_describe.n_languages = n_langs;
    bhd_describe.limits = &limits;
    bhd_describe.supports_sessions = true;
    bhd_describe.protocol_version = BHD_PROTOCOL;

    /* Sessions a previous bulkheadd left on this state directory are ours
     * before the first client can ask for them. */
    if (bhd_adopt_sessions(&err) < 0) {
        fprintf(stderr, "bulkheadd: refusing to start: %s\n", err.msg);
        return 1;
    }
    int lfd = bind_socket(&err);
    if (lfd < 0) {
        fprintf(stderr, "bulkheadd: %s\n", err.msg);
        return 1;
    }
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &mask, NULL); /* threads inherit: only signalfd sees them */
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    pthread_t mt;
    pthread_create(&mt, NULL, bhd_maintenance_thread, NULL);
    bhd_log("serving %s at tier %s (languages:%s%s)", bhd_cfg.socket_path,
            bh_tier_name(bhd_cfg.tier), n_langs > 0 ? " " : " none",
            n_langs > 1 ? "python javascript"
            : n_langs   ? langs[0]
                        : "");
    bool hand_over = false;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    for (;;) {
        struct pollfd p[2] = {{.fd = lfd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            if (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                hand_over =
                    si.ssi_signo == SIGUSR2 || (si.ssi_signo == SIGTERM && bhd_cfg.keep_sessions);
            break;
        }
        if (p[0].revents) {
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                continue;
            /* Each connection holds a thread: a client that opens many and
             * sends nothing must not exhaust the daemon. */
            if (!bhd_admit_connection(c)) {
                bhd_refuse_connection(c);
                continue;
            }
            pthread_t t;
            if (pthread_create(&t, &attr, conn_thread, (void *)(intptr_t)c) != 0) {
                atomic_fetch_sub(&bhd_open_connections, 1);
                close(c);
            }
        }
    }
    if (hand_over) {
        /* No call starts from now on; the path goes first, so a client
         * either cannot connect (and retries on the next daemon) or was
         * connected and gets an answer: connections still waiting in the
         * backlog are served, not reset, which would leave their callers
         * guessing. */
        bhd_handover_begin();
        unlink(bhd_cfg.socket_path);
        int fl = fcntl(lfd, F_GETFL);
        fcntl(lfd, F_SETFL, fl | O_NONBLOCK);
        for (;;) {
            int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (c < 0)
                break;
            atomic_fetch_add(&bhd_open_connections, 1);
            pthread_t t;
            if (pthread_create(&t, &attr, conn_thread, (void *)(intptr_t)c) != 0) {
                atomic_fetch_sub(&bhd_open_connections, 1);
                close(c);
            }
        }
        close(lfd);
    } else {
        close(lfd);
        unlink(bhd_cfg.socket_path);
    }
    if (hand_over) {
        /* the socket is gone first, so the next bulkheadd can bind it while
         * this one lets its calls finish */
        bhd_log("handing sessions over: the next bulkheadd on %s adopts them", bhd_cfg.state_dir);
        bhd_handover_sessions();
        return 0;
    }
    bhd_log("shutting down: closing every session");
    bhd_shutdown_sessions();
    pthread_join(mt, NULL);
    return 0;
}
