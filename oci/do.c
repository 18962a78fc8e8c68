/* `bulkhead do`: runs one command in a fresh sandbox over the host's
 * read-only system directories (or a given rootfs), passing stdio through
 * and exiting with the command's status. Flags are parsed by do_parse_args
 * so tests can call it; nothing of the caller's environment reaches the
 * guest except what --env names. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cgroup.h"
#include "cleanup.h"
#include "cli.h"
#include "paths.h"
#include "probe.h"
#include "sandbox.h"
#include "startup-trace.h"

#define DO_GUEST_UID 1000
#define DO_MAX_ENV 256
/* Floors a sandbox gets when its caller names none (issue 10, finding 8):
 * enough for CPython, node and a compiler, far from what starves the host. */
#define DO_DEFAULT_MEMORY (1024LL * 1024 * 1024)
#define DO_DEFAULT_PIDS 512

struct do_args {
    bool help;
    bool tier_given;
    enum bh_tier tier;
    const char *rootfs;
    int64_t memory;
    int64_t tmp_size;
    int64_t pids;
    double cpus;
    double timeout;
    const char *workdir;
    const char *env[DO_MAX_ENV];
    size_t n_env;
    char **cmd;
};

static void do_usage(FILE *out)
{
    fprintf(out,
            "usage: bulkhead do [OPTIONS] -- CMD [ARGS...]\n"
            "\n"
            "Runs CMD in a new sandbox and exits with its status. With no --rootfs the\n"
            "sandbox sees the host's /usr, /bin, /lib*, /sbin and a minimal /etc, read-only,\n"
            "a fresh /proc, a minimal /dev, and private tmpfs /tmp and working directory.\n"
            "It has no network (only lo), runs as uid/gid 1000 with no capabilities, and\n"
            "sees nothing of the host's environment. stdin, stdout and stderr pass through;\n"
            "SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to CMD.\n"
            "\n"
            "options:\n"
            "  --tier container|kernel  isolation tier (default: kernel when this host\n"
            "                           provides it, else container). kernel adds the\n"
            "                           sentry's syscall broker; it is refused when it\n"
            "                           cannot be provided\n"
            "  --rootfs DIR             use DIR (read-only) as the root instead of the host's\n"
            "                           system directories; /tmp is a private tmpfs\n"
            "  --memory SIZE            memory limit (bytes, or with k, m, g suffix; >= 4m;\n"
            "                           default 1g, no swap)\n"
            "  --tmp-size SIZE          size of each private tmpfs, /tmp and the working\n"
            "                           directory (default 64m; tmpfs pages count against\n"
            "                           --memory)\n"
            "  --pids N                 most processes and threads at once (>= 1; default\n"
            "                           512)\n"
            "  --cpus N                 CPU share, e.g. 0.5 or 2 (at most the host's CPUs)\n"
            "  --timeout SECONDS        kill the sandbox after SECONDS and exit 124\n"
            "  --workdir DIR            working directory inside (default /work; a private\n"
            "                           tmpfs with the embedded default)\n"
            "  --env K=V                set an environment variable (repeatable); the guest\n"
            "                           otherwise gets PATH, HOME, LANG, and TERM on a tty\n"
            "  --help                   this text\n"
            "\n"
            "exit status: CMD's own; 128+N when CMD was killed by signal N; 124 after\n"
            "--timeout; 125 when bulkhead refused or failed before CMD ran, or when the\n"
            "sandbox's sentry died so CMD's result is unknown (the reason is printed);\n"
            "126 when CMD is not executable; 127 when CMD was not found.\n");
}

static int parse_size(const char *s, int64_t *out, struct bh_error *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno != 0 || !(v >= 0))
        return bh_error_set(err, EINVAL, "size `%s` is not a number of bytes", s);
    double mult = 1;
    switch (*end) {
    case 'k':
    case 'K':
        mult = 1024.0;
        end++;
        break;
    case 'm':
    case 'M':
        mult = 1024.0 * 1024;
        end++;
        break;
    case 'g':
    case 'G':
        mult = 1024.0 * 1024 * 1024;
        end++;
        break;
    case 't':
    case 'T':
        mult = 1024.0 * 1024 * 1024 * 1024;
        end++;
        break;
    default:
        break;
    }
    if (*end == 'b' || *end == 'B')
        end++;
    if (*end != '\0' || v * mult > 9.0e18)
        return bh_error_set(err, EINVAL, "size `%s` is not understood: use e.g. 512m or 2g", s);
    *out = (int64_t)(v * mult);
    return 0;
}

static int parse_num(const char *flag, const char *s, double min, double max, double *out,
                     struct bh_error *err)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || errno != 0 || !isfinite(v))
        return bh_error_set(err, EINVAL, "%s `%s` is not a number", flag, s);
    if (v < min || v > max)
        return bh_error_set(err, EINVAL, "%s %s is out of range: it must be between %g and %g",
                            flag, s, min, max);
    *out = v;
    return 0;
}

int do_parse_args(int argc, char **argv, struct do_args *a, struct bh_error *err);

int do_parse_args(int argc, char **argv, struct do_args *a, struct bh_error *err)
{
    memset(a, 0, sizeof(*a));
    a->tier = BH_TIER_KERNEL;
    a->memory = DO_DEFAULT_MEMORY;
    a->pids = DO_DEFAULT_PIDS;
    int i = 1;
    for (; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--") == 0) {
            i++;
            break;
        }
        if (arg[0] != '-')
            break;
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = true;
            return 0;
        }
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        static const char *const with_value[] = {"--tier",    "--rootfs", "--memory",
                                                 "--pids",    "--cpus",   "--timeout",
                                                 "--workdir", "--env",    "--tmp-size"};
        const char *name = NULL;
        for (size_t k = 0; k < BH_ARRAY_SIZE(with_value); k++)
            if (strlen(with_value[k]) == len && strncmp(arg, with_value[k], len) == 0)
                name = with_value[k];
        if (name == NULL)
            return bh_error_set(err, EINVAL, "unknown flag `%s`: see `bulkhead do --help`", arg);
        const char *v = eq ? eq + 1 : NULL;
        if (v == NULL) {
            if (i + 1 >= argc)
                return bh_error_set(err, EINVAL, "flag `%s` needs a value", name);
            v = argv[++i];
        }
        double d;
        if (strcmp(name, "--tier") == 0) {
            if (strcmp(v, "container") == 0)
                a->tier = BH_TIER_CONTAINER;
            else if (strcmp(v, "kernel") == 0)
                a->tier = BH_TIER_KERNEL;
            else
                return bh_error_set(err, EINVAL,
                                    "--tier `%s` is not offered: use container or "
                                    "kernel",
                                    v);
            a->tier_given = true;
        } else if (strcmp(name, "--rootfs") == 0) {
            a->rootfs = v;
        } else if (strcmp(name, "--memory") == 0) {
            if (parse_size(v, &a->memory, err) < 0)
                return bh_error_prefix(err, "--memory");
            if (a->memory < 4 * 1024 * 1024)
                return bh_error_set(err, EINVAL,
                                    "--memory %s is too small: a sandbox needs at least 4m", v);
        } else if (strcmp(name, "--tmp-size") == 0) {
            if (parse_size(v, &a->tmp_size, err) < 0)
                return bh_error_prefix(err, "--tmp-size");
            if (a->tmp_size < 1024 * 1024)
                return bh_error_set(err, EINVAL, "--tmp-size %s is too small: at least 1m", v);
        } else if (strcmp(name, "--pids") == 0) {
            if (parse_num(name, v, 1, 4194304, &d, err) < 0)
                return -1;
            if (d != (double)(int64_t)d)
                return bh_error_set(err, EINVAL, "--pids `%s` must be a whole number", v);
            a->pids = (int64_t)d;
        } else if (strcmp(name, "--cpus") == 0) {
            long n = sysconf(_SC_NPROCESSORS_ONLN);
            if (parse_num(name, v, 0.01, n > 0 ? (double)n : 1.0, &a->cpus, err) < 0)
                return -1;
        } else if (strcmp(name, "--timeout") == 0) {
            if (parse_num(name, v, 0.001, 31536000, &a->timeout, err) < 0)
                return -1;
        } else if (strcmp(name, "--workdir") == 0) {
            if (v[0] != '/' || strcmp(v, "/") == 0 || strstr(v, "/../") != NULL ||
                (strlen(v) >= 3 && strcmp(v + strlen(v) - 3, "/..") == 0))
                return bh_error_set(err, EINVAL,
                                    "--workdir `%s` must be an absolute path below / without "
                                    "`..`",
                                    v);
            a->workdir = v;
        } else if (strcmp(name, "--env") == 0) {
            const char *e = strchr(v, '=');
            if (e == NULL || e == v)
                return bh_error_set(err, EINVAL, "--env `%s` must be KEY=VALUE", v);
            if (a->n_env >= DO_MAX_ENV)
                return bh_error_set(err, E2BIG, "at most %d --env flags", DO_MAX_ENV);
            a->env[a->n_env++] = v;
        }
    }
    if (i >= argc)
        return bh_error_set(err, EINVAL, "no command given: `bulkhead do [OPTIONS] -- CMD ...`");
    a->cmd = argv + i;
    return 0;
}

/* The one place the kernel tier is vouched for before anything runs: the
 * tier verification (sentry/probe.h, cached per boot and per binaries) must
 * report kernel, or `do` refuses and names the checks that failed. */
static int kernel_tier_gate(struct bh_error *err)
{
    char path[4096];
    if (bh_path_policy("kernel", path, sizeof(path), err) < 0)
        return bh_error_prefix(err, "the kernel tier is not available on this install");
    return bh_probe_require(BH_TIER_KERNEL, NULL, err);
}

/* A `bulkhead do` killed with SIGKILL cannot remove its cgroup (its sandbox
 * died with it: the sentry follows its creator). The next run removes such
 * leftovers: cgroups named do-PID-* whose PID no longer exists. */
static bool pid_is_gone(int pid)
{
    if (kill(pid, 0) < 0)
        return errno == ESRCH;
    /* A zombie nobody reaped is gone too. */
    char path[64], buf[256];
    snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    return p != NULL && p[1] == ' ' && p[2] == 'Z';
}

static void remove_stale_cgroups(void)
{
    /* Every sandbox has a pids cgroup (the floor); where the layout lacks
     * that hierarchy, the unified one lists the sandboxes. */
    char dir[4096];
    if (bh_cgroup_hierarchy("pids", dir, sizeof(dir) - 16, NULL) < 0 &&
        bh_cgroup_hierarchy(NULL, dir, sizeof(dir) - 16, NULL) < 0)
        return;
    strcat(dir, "/bulkhead");
    DIR *d = opendir(dir);
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        int pid = 0, n = 0;
        if (sscanf(e->d_name, "do-%d-%*[0-9a-f]%n", &pid, &n) != 1 || n == 0 ||
            e->d_name[n] != '\0' || pid <= 0 || pid == getpid())
            continue;
        if (!pid_is_gone(pid))
            continue; /* its creator lives (or may): not ours to touch */
        char path[300];
        snprintf(path, sizeof(path), "bulkhead/%s", e->d_name);
        struct bh_cgroup *cg = NULL;
        struct bh_error err = {0};
        if (bh_cgroup_open(path, &cg, &err) == 0)
            bh_cgroup_destroy(cg, &err);
    }
    closedir(d);
}

static volatile sig_atomic_t timed_out;
static volatile pid_t sentry_pid;

static void forward_signal(int sig)
{
    if (sig == SIGALRM) {
        timed_out = 1;
        sig = SIGKILL;
    }
    if (sentry_pid > 0)
        kill(sentry_pid, sig);
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s);
    if (d == NULL)
        abort();
    return d;
}

static char *fmt(const char *f, const char *v)
{
    char *out = NULL;
    if (asprintf(&out, f, v) < 0)
        abort();
    return out;
}

static int build_spec(const struct do_args *a, struct bh_sandbox_spec *s, struct bh_error *err)
{
    bh_sandbox_spec_init(s);
    uint8_t rnd[8];
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        return bh_error_errno(err, errno, "random sandbox id");
    char id[64];
    snprintf(id, sizeof(id), "do-%d-%02x%02x%02x%02x%02x%02x%02x%02x", getpid(), rnd[0], rnd[1],
             rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
    s->id = xstrdup(id);
    s->tier = a->tier;
    const char *workdir = a->workdir ? a->workdir : "/work";
    if (a->rootfs != NULL) {
        char *real = realpath(a->rootfs, NULL);
        struct stat st;
        if (real == NULL || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
            int e = real ? ENOTDIR : errno;
            free(real);
            return bh_error_errno(err, e, "--rootfs `%s` is not a directory", a->rootfs);
        }
        s->rootfs = real;
        s->rootfs_readonly = true;
        size_t n = a->workdir ? 2 : 1;
        s->mounts = calloc(n, sizeof(*s->mounts));
        if (s->mounts == NULL)
            abort();
        const char *dest[2] = {"/tmp", a->workdir};
        for (size_t i = 0; i < n; i++) {
            s->mounts[i].source = xstrdup("tmpfs");
            s->mounts[i].destination = xstrdup(dest[i]);
            s->mounts[i].type = xstrdup("tmpfs");
            s->mounts[i].flags = 0x2 | 0x4; /* MS_NOSUID | MS_NODEV */
            s->mounts[i].data = xstrdup(i == 0 ? "size=64m,mode=1777" : "size=64m,mode=0777");
            s->mounts[i].tree_fd = -1;
        }
        s->n_mounts = n;
        workdir = a->workdir ? a->workdir : "/";
    } else {
        s->workdir = xstrdup(workdir);
    }
    s->process.cwd = xstrdup(workdir);
    s->process.uid = DO_GUEST_UID;
    s->process.gid = DO_GUEST_UID;
    size_t n_argv = 0;
    while (a->cmd[n_argv] != NULL)
        n_argv++;
    s->process.argv = calloc(n_argv + 1, sizeof(char *));
    for (size_t i = 0; i < n_argv; i++)
        s->process.argv[i] = xstrdup(a->cmd[i]);
    s->process.env = calloc(a->n_env + 5, sizeof(char *));
    size_t ne = 0;
    s->process.env[ne++] = xstrdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
                                   "/sbin:/bin");
    s->process.env[ne++] = fmt("HOME=%s", a->rootfs ? "/tmp" : workdir);
    s->process.env[ne++] = xstrdup("LANG=C.UTF-8");
    const char *term = getenv("TERM");
    if (term != NULL && (isatty(0) || isatty(1)) && strlen(term) < 64)
        s->process.env[ne++] = fmt("TERM=%s", term);
    for (size_t i = 0; i < a->n_env; i++) {
        /* A later --env of the same key replaces the default. */
        size_t klen = (size_t)(strchr(a->env[i], '=') - a->env[i]) + 1;
        size_t j = 0;
        for (; j < ne; j++)
            if (strncmp(s->process.env[j], a->env[i], klen) == 0)
                break;
        if (j < ne)
            free(s->process.env[j]);
        s->process.env[j] = xstrdup(a->env[i]);
        if (j == ne)
            ne++;
    }
    s->limits.memory_bytes = a->memory;
    s->limits.memory_swap_bytes = a->memory;
    s->limits.tmpfs_bytes = a->tmp_size;
    s->limits.pids = a->pids;
    if (a->cpus > 0) {
        s->limits.cpu_period_us = 100000;
        s->limits.cpu_quota_us = (int64_t)(a->cpus * 100000 + 0.5);
    }
    return 0;
}

int cmd_do(const struct cli_globals *g, int argc, char **argv)
{
    struct do_args a;
    struct bh_error err = {0};
    if (do_parse_args(argc, argv, &a, &err) < 0) {
        cli_report_error(g, "do: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    if (a.help) {
        do_usage(stdout);
        return 0;
    }
    bh_startup_trace_init();
    bh_startup_mark("fe: args");
    /* A tier verification that runs now (its cache missed) builds a probe
     * sandbox of its own: its steps are not this sandbox's. */
    bool trace = bh_startup_trace_on;
    bh_startup_trace_on = false;
    if (a.tier == BH_TIER_KERNEL && kernel_tier_gate(&err) < 0) {
        if (a.tier_given) {
            cli_report_error(g,
                             "do: --tier kernel refused: %s; use --tier container for "
                             "namespaces, dropped capabilities, Landlock and a seccomp "
                             "allowlist without the sentry's broker",
                             err.msg);
            return CLI_EXIT_REFUSED;
        }
        a.tier = BH_TIER_CONTAINER;
    }
    bh_startup_trace_on = trace;
    bh_startup_mark("fe: tier gate");
    struct bh_sandbox_spec spec;
    if (build_spec(&a, &spec, &err) < 0) {
        bh_sandbox_spec_free(&spec);
        cli_report_error(g, "do: %s", err.msg);
        return CLI_EXIT_REFUSED;
    }
    /* Signals that arrive while the sandbox is built are held, then sent on. */
    sigset_t fwd, old;
    sigemptyset(&fwd);
    int fwd_sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM};
    for (size_t i = 0; i < BH_ARRAY_SIZE(fwd_sigs); i++)
        sigaddset(&fwd, fwd_sigs[i]);
    sigprocmask(SIG_BLOCK, &fwd, &old);
    struct sigaction sa = {.sa_handler = forward_signal, .sa_flags = SA_RESTART};
    sigfillset(&sa.sa_mask);
    for (size_t i = 0; i < BH_ARRAY_SIZE(fwd_sigs); i++)
        sigaction(fwd_sigs[i], &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct bh_sandbox *sb = NULL;
    /* Nothing is checked between create and start (the tier gate came
     * first): one step saves the sentry a round trip to us. */
    struct bh_create_opts create = {.flags = BH_CREATE_START};
    if (bh_sandbox_create(&spec, &create, &sb, &err) < 0) {
        bh_sandbox_spec_free(&spec);
        cli_report_error(g, "do: %s", err.msg);
        return bh_error_exit_code(&err);
    }
    bh_sandbox_spec_free(&spec);
    sentry_pid = bh_sandbox_pid(sb);
    if (a.timeout > 0) {
        struct itimerval it = {0};
        it.it_value.tv_sec = (time_t)a.timeout;
        it.it_value.tv_usec = (suseconds_t)((a.timeout - (double)(int64_t)a.timeout) * 1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0)
            it.it_value.tv_usec = 1;
        setitimer(ITIMER_REAL, &it, NULL);
    }
    int rc;
    if (bh_sandbox_start(sb, &err) < 0) {
        cli_report_error(g, "do: %s", err.msg);
        rc = bh_error_exit_code(&err);
        sigprocmask(SIG_SETMASK, &old, NULL);
        bh_sandbox_destroy(sb);
        return rc;
    }
    bh_startup_mark("fe: started");
    sigprocmask(SIG_SETMASK, &old, NULL);
    /* Leftovers of killed runs go while the command runs, not before it:
     * off the start-up path. */
    remove_stale_cgroups();
    bh_startup_mark("fe: stale cgroups");
    int status = 0;
    if (bh_sandbox_wait(sb, &status, &err) < 0) {
        /* after --timeout the sentry was killed on purpose: said below */
        if (!timed_out)
            cli_report_error(g, "do: %s", err.msg);
        rc = CLI_EXIT_REFUSED;
    } else {
        rc = bh_status_to_exit_code(status);
    }
    bh_startup_mark("fe: sentry exited");
    struct itimerval off = {0};
    setitimer(ITIMER_REAL, &off, NULL);
    sentry_pid = 0;
    bh_sandbox_destroy(sb);
    bh_startup_mark("fe: destroyed");
    if (timed_out) {
        cli_report_error(g, "do: the command ran longer than --timeout %g s and was killed",
                         a.timeout);
        return BH_EXIT_TIMEOUT;
    }
    return rc;
}
