/* One session's sandbox ("box"): the keeper process that owns it, the
 * session agent inside and the framed channel to that agent, plus the checks
 * made on a live box and the validation of everything the agent sends back.
 *
 * Why a keeper: a sandbox's cgroups can only be removed by someone alive, and
 * the core ties an owned sandbox's life to its creator. So each box is created
 * by a small forked keeper that holds one end of a socketpair to bulkheadd;
 * when that socket ends (session closed, or bulkheadd killed with -9) the
 * keeper destroys the sandbox (processes, mounts, cgroups) and exits. The
 * keeper is single-threaded, so the core's fork-based setup is safe in it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <ftw.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "alloc.h"
#include "bulkheadd.h"
#include "cgroup.h"
#include "cleanup.h"
#include "frame.h"
#include "probe.h"
#include "sandbox.h"
#include "sha256.h"
#include "text.h"

#define AGENT_GRACE_MS 10000
#define AGENT_START_MS 45000
/* Where a re-executed keeper finds its two sockets. */
#define KEEPER_CTL_FD 3
#define KEEPER_CHAN_FD 4
#define KEEPER_KEEP_FD 5 /* a copy of the daemon's end of the agent channel */
#define MAX_IMAGES 16
#define MAX_IMAGE_BYTES (8u * 1024 * 1024)
#define NODE_PATH "/usr/bin/node"
#define PYTHON_PATH "/usr/bin/python3"
#define SANDBOX_WORKDIR "/work"
/* the guest is unprivileged inside, as `bulkhead do` runs it; the working
 * directory tmpfs belongs to it */
#define SANDBOX_UID 1000

/* ---- runner sources ------------------------------------------------------ */

static char *read_text(const char *dir, const char *name, struct bh_error *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    cleanup_fclose FILE *f = fopen(path, "re");
    if (f == NULL)
        return bh_error_errno(err, errno, "read runner `%s`", path), NULL;
    char *buf = bh_read_stream(f, NULL);
    if (buf == NULL)
        return bh_error_errno(err, errno, "read runner `%s`", path), NULL;
    return buf;
}

int bhd_runners_load(const char *dir, struct bhd_runners *r, struct bh_error *err)
{
    r->agent = read_text(dir, "agent.py", err);
    if (r->agent == NULL)
        return -1;
    r->python = read_text(dir, "runner.py", err);
    if (r->python == NULL)
        return -1;
    r->javascript = read_text(dir, "runner.js", err);
    if (r->javascript == NULL)
        return -1;
    return 0;
}

/* ---- UTF-8 --------------------------------------------------------------- */

/* Length of the valid sequence at s, or 0. */
static size_t utf8_seq(const unsigned char *s, size_t left)
{
    unsigned char c = s[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    if (left < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

bool bhd_utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0)
            return false;
        i += n;
    }
    return true;
}

char *bhd_utf8_sanitize(const char *s, size_t len, size_t *out_len)
{
    const unsigned char *p = (const unsigned char *)s;
    char *out = malloc(len * 3 + 1);
    if (out == NULL)
        return NULL;
    size_t o = 0;
    for (size_t i = 0; i < len;) {
        size_t n = utf8_seq(p + i, len - i);
        if (n == 0 || (n == 1 && p[i] == 0)) {
            memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD */
            o += 3;
            i++;
            continue;
        }
        memcpy(out + o, p + i, n);
        o += n;
        i += n;
    }
    out[o] = '\0';
    if (out_len)
        *out_len = o;
    return out;
}

/* ---- the keeper ---------------------------------------------------------- */

static volatile sig_atomic_t keeper_stop;

static void keeper_on_term(int sig)
{
    (void)sig;
    keeper_stop = 1;
}

static char **strv(const char *const *in)
{
    size_t n = 0;
    while (in[n] != NULL)
        n++;
    char **v = bhd_xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++)
        v[i] = bhd_xstrdup(in[i]);
    return v;
}

static const char *const guest_env[] = {"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/work",
                                        "LANG=C.UTF-8", "TMPDIR=/tmp", NULL};

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void keeper_report(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void keeper_report(int fd, const char *fmt, ...)
{
    char msg[BH_ERROR_MSG_MAX + 64];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    bh_frame_write(fd, msg, strlen(msg), NULL);
}

/* ---- the keeper's side of a hand-over ------------------------------------
 *
 * The keeper protocol (version BHD_KEEPER_PROTOCOL), on the keeper's control
 * socket, frames whose first byte says what they are:
 *   daemon -> keeper  'S' + JSON  the session's record (bind, then after each
 *                                 call): from the first one on, the keeper
 *                                 listens on STATE/<fingerprint>.sock
 *                     'X'         end the sandbox now (session closed)
 *                     'R'         end the sandbox but keep the record: the
 *                                 next daemon rebuilds the session fresh
 *   end of stream                 unbound: end the sandbox; bound: wait up to
 *                                 the grace period for a daemon to adopt
 * Adoption, on a connection to STATE/<fingerprint>.sock: the keeper sends one
 * byte with the daemon's end of the agent channel (SCM_RIGHTS), then a JSON
 * frame (the record plus "keeper": the protocol version, its pid, the
 * sandbox's name and pid 1); the daemon answers 'A' (this connection is the
 * control socket from now on) or 'X' (refused: end the sandbox). The
 * directory holds no secret: a session is named by its fingerprint only. */
enum { KEEPER_END_CLOSE, KEEPER_END_RECYCLE };

struct keeper {
    int ctl, chan, listen, pidfd, dir;
    pid_t pid1;
    const char *name, *workdir;
    int64_t created_ms;
    char fp[BH_SHA256_HEX];
    json_t *record;
};

static void keeper_path(const struct keeper *k, const char *suffix, char *out, size_t size)
{
    snprintf(out, size, "/proc/self/fd/%d/%s%s", k->dir, k->fp, suffix);
}

static void keeper_unlink(const struct keeper *k, const char *suffix)
{
    char path[160];
    keeper_path(k, suffix, path, sizeof(path));
    unlink(path);
}

/* The record with what only the keeper knows; a new reference. */
static json_t *keeper_hello(const struct keeper *k)
{
    json_t *h = json_deep_copy(k->record);
    json_object_set_new(h, "keeper", json_integer(BHD_KEEPER_PROTOCOL));
    json_object_set_new(h, "keeper_pid", json_integer(getpid()));
    json_object_set_new(h, "sandbox", json_string(k->name));
    json_object_set_new(h, "sentry", json_integer(k->pid1));
    json_object_set_new(h, "workdir", json_string(k->workdir));
    return h;
}

/* STATE/<fp>.json, written whole then renamed: what a daemon needs to rebuild
 * the session (and remove the sandbox's cgroup) if this keeper is gone. */
static void keeper_write_record(const struct keeper *k)
{
    char path[160], tmp[170];
    keeper_path(k, ".json", path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    json_t *h = keeper_hello(k);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    char *text = json_dumps(h, JSON_COMPACT);
    json_decref(h);
    /* no fsync: the record matters only while this boot's sandboxes live */
    if (fd >= 0 && text != NULL && bh_write_full(fd, text, strlen(text), NULL) == 0)
        rename(tmp, path);
    else
        unlink(tmp);
    if (fd >= 0)
        close(fd);
    free(text);
}

/* The first record names the session: listen for a daemon that adopts it. */
static int keeper_bind(struct keeper *k, const char *fp)
{
    k->dir = open(bhd_cfg.state_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    /* the daemon checked it at start; it must still be ours alone */
    if (k->dir >= 0 && (fstat(k->dir, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077))) {
        close(k->dir);
        k->dir = -1;
        errno = EPERM;
    }
    if (k->dir < 0)
        return -1;
    snprintf(k->fp, sizeof(k->fp), "%s", fp);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    keeper_path(k, ".sock", addr.sun_path, sizeof(addr.sun_path));
    unlink(addr.sun_path);
    k->listen = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    mode_t old = umask(0177);
    int rc = k->listen < 0 ? -1 : bind(k->listen, (struct sockaddr *)&addr, sizeof(addr));
    umask(old);
    if (rc < 0 || listen(k->listen, 4) < 0) {
        k->fp[0] = '\0';
        return -1;
    }
    keeper_write_record(k);
    return 0;
}

/* One frame from the daemon: <0 end of stream (or garbage), else 0, or
 * 1 + KEEPER_END_* to end. */
static int keeper_frame(struct keeper *k, int fd)
{
    void *buf = NULL;
    size_t len = 0;
    int rc = bh_frame_read(fd, 256 * 1024, bh_now_ms() + 10000, &buf, &len, NULL);
    if (rc <= 0 || len == 0) {
        free(buf);
        return -1;
    }
    char op = ((char *)buf)[0];
    int ret = 0;
    if (op == 'X') {
        ret = 1 + KEEPER_END_CLOSE;
    } else if (op == 'R') {
        ret = 1 + KEEPER_END_RECYCLE;
    } else if (op == 'S') {
        json_t *j = json_loadb((char *)buf + 1, len - 1, 0, NULL);
        const char *fp = json_string_value(json_object_get(j, "fp"));
        if (!json_is_object(j) || !bh_sha256_hex_valid(fp) ||
            (k->fp[0] && strcmp(fp, k->fp) != 0)) {
            json_decref(j);
        } else {
            json_decref(k->record);
            k->record = j;
            /* kept current on disk too: if this keeper is killed, the next
             * daemon still continues the session's record chain */
            if (k->fp[0] != '\0')
                keeper_write_record(k);
            /* the daemon reads nothing more from us: say it on the log */
            else if (keeper_bind(k, fp) < 0)
                fprintf(stderr,
                        "bulkheadd keeper: cannot listen in `%s` (%s): this session cannot be "
                        "handed to another daemon\n",
                        bhd_cfg.state_dir, strerror(errno));
        }
    }
    free(buf);
    return ret;
}

/* Without a daemon: waits up to the grace period for one to adopt the
 * session; 0 when one did (k->ctl is its connection), -1 to end, -2 when
 * the sandbox ended by itself meanwhile. */
static int keeper_wait_adoption(struct keeper *k)
{
    keeper_write_record(k);
    int64_t deadline = bh_now_ms() + bhd_cfg.grace_ms;
    while (!keeper_stop) {
        int64_t left = deadline - bh_now_ms();
        if (left <= 0)
            return -1;
        struct pollfd pfd[2] = {{.fd = k->listen, .events = POLLIN},
                                {.fd = k->pidfd, .events = POLLIN}};
        int r = poll(pfd, k->pidfd >= 0 ? 2 : 1, (int)(left > 500 ? 500 : left));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        /* the sandbox died meanwhile: keep the record, so the owner's next
         * call gets a fresh sandbox under the same session, not a hang */
        if ((k->pidfd >= 0 && pfd[1].revents) || (k->pidfd < 0 && kill(k->pid1, 0) < 0))
            return -2;
        if (!(pfd[0].revents & POLLIN))
            continue;
        cleanup_close int c = accept4(k->listen, NULL, NULL, SOCK_CLOEXEC);
        struct ucred cred;
        socklen_t cl = sizeof(cred);
        /* only a daemon of our own uid (root) may take the sandbox over */
        if (c < 0 || getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 ||
            cred.uid != geteuid())
            continue;
        json_t *h = keeper_hello(k);
        char *text = json_dumps(h, JSON_COMPACT);
        json_decref(h);
        int sent = text != NULL && bh_send_fds(c, "K", 1, &k->chan, 1, NULL) == 0 &&
                   bh_frame_write(c, text, strlen(text), NULL) == 0;
        free(text);
        if (!sent)
            continue;
        void *ans = NULL;
        size_t alen = 0;
        int rc = bh_frame_read(c, 16, bh_now_ms() + 10000, &ans, &alen, NULL);
        char op = rc > 0 && alen > 0 ? ((char *)ans)[0] : 0;
        free(ans);
        if (op == 'A') {
            k->ctl = steal_fd(&c);
            return 0;
        }
        if (op == 'X')
            return -1; /* a daemon that does not understand us: end cleanly */
    }
    return -1;
}

/* Keeps the sandbox while a daemon holds us, and between daemons; returns
 * how it ends. */
static int keeper_serve(struct keeper *k)
{
    for (;;) {
        while (!keeper_stop) {
            struct pollfd pfd[2] = {{.fd = k->ctl, .events = POLLIN},
                                    {.fd = k->pidfd, .events = POLLIN}};
            int r = poll(pfd, k->pidfd >= 0 ? 2 : 1, k->pidfd >= 0 ? -1 : 500);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return KEEPER_END_CLOSE;
            if (k->pidfd >= 0 && pfd[1].revents)
                return KEEPER_END_CLOSE; /* the sandbox ended by itself */
            if (k->pidfd < 0 && kill(k->pid1, 0) < 0)
                return KEEPER_END_CLOSE;
            if (!pfd[0].revents)
                continue;
            int f = keeper_frame(k, k->ctl);
            if (f > 0)
                return f - 1;
            if (f < 0)
                break; /* the daemon went away, by a hand-over or a crash */
        }
        if (keeper_stop || k->fp[0] == '\0')
            return KEEPER_END_CLOSE; /* never a session's (warm pool): nothing to keep */
        close(k->ctl);
        k->ctl = -1;
        int w = keeper_wait_adoption(k);
        if (w < 0)
            return w == -2 ? KEEPER_END_RECYCLE : KEEPER_END_CLOSE;
    }
}

/* Runs in the forked keeper: never returns. ctl is our end to bulkheadd,
 * agent_fd the agent's end of its channel, keep_chan a copy of the daemon's
 * end, held so the channel outlives the daemon and can be handed on. */
static void keeper_main(int ctl, int agent_fd, int keep_chan, const char *workdir_none,
                        const char *name)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL); /* bulkheadd's threads block SIGTERM */
    struct sigaction sa = {.sa_handler = keeper_on_term};
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGINT, SIG_IGN);
    signal(SIGHUP, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
    struct bh_error err = {0};
    struct bh_sandbox *sb = NULL;
    pid_t agent = -1;
    pid_t pid1;
    char sandbox_id[64] = "-";
    const char *argv_agent[] = {PYTHON_PATH, "-I", "-c", bhd_runners.agent, NULL};

    if (bhd_cfg.tier == BH_TIER_NONE) {
        agent = fork();
        if (agent < 0) {
            keeper_report(ctl, "Efork the agent: %s", strerror(errno));
            _exit(1);
        }
        if (agent == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            setpgid(0, 0);
            int null = open("/dev/null", O_RDWR | O_CLOEXEC);
            dup2(agent_fd, 0);
            dup2(agent_fd, 1);
            dup2(null, 2);
            if (chdir(workdir_none) < 0)
                _exit(BH_EXIT_NOT_FOUND);
            execve(PYTHON_PATH, (char **)argv_agent, (char **)guest_env);
            _exit(BH_EXIT_NOT_FOUND);
        }
        setpgid(agent, agent);
        pid1 = agent;
    } else {
        struct bh_sandbox_spec spec;
        bh_sandbox_spec_init(&spec);
        spec.id = strdup(name);
        if (spec.id == NULL)
            _exit(1);
        snprintf(sandbox_id, sizeof(sandbox_id), "%s", spec.id);
        spec.tier = bhd_cfg.tier;
        spec.rootfs = bhd_cfg.rootfs ? bhd_xstrdup(bhd_cfg.rootfs) : NULL;
        spec.rootfs_readonly = true;
        spec.workdir = bhd_xstrdup(SANDBOX_WORKDIR);
        spec.hostname = bhd_xstrdup("bulkhead");
        spec.process.argv = strv(argv_agent);
        spec.process.env = strv(guest_env);
        spec.process.cwd = bhd_xstrdup(SANDBOX_WORKDIR);
        spec.process.uid = SANDBOX_UID;
        spec.process.gid = SANDBOX_UID;
        spec.limits.memory_bytes = bhd_cfg.memory_bytes;
        spec.limits.pids = bhd_cfg.pids;
        if (bhd_cfg.cpu_millis > 0) {
            spec.limits.cpu_period_us = 100000;
            spec.limits.cpu_quota_us = bhd_cfg.cpu_millis * 100;
        }
        /* headroom over the budget so "over budget" is observable after a call */
        spec.limits.tmpfs_bytes = bhd_cfg.disk_bytes + 1024 * 1024;
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        spec.stdio[0] = agent_fd;
        spec.stdio[1] = agent_fd;
        spec.stdio[2] = bhd_cfg.debug ? 2 : null;
        int rc = bh_sandbox_create(&spec, NULL, &sb, &err);
        spec.stdio[0] = spec.stdio[1] = spec.stdio[2] = -1;
        bh_sandbox_spec_free(&spec);
        if (rc < 0) {
            keeper_report(ctl, "Ecreate the session sandbox: %s", err.msg);
            _exit(1);
        }
        if (bh_sandbox_start(sb, &err) < 0) {
            keeper_report(ctl, "Estart the session agent: %s", err.msg);
            bh_sandbox_destroy(sb);
            _exit(1);
        }
        if (null >= 0)
            close(null);
        pid1 = bh_sandbox_pid(sb);
    }
    close(agent_fd);
    keeper_report(ctl, "P%d %s", (int)pid1, sandbox_id);

    struct keeper k = {.ctl = ctl,
                       .dir = -1,
                       .chan = keep_chan,
                       .listen = -1,
                       .pid1 = pid1,
                       .name = name,
                       .workdir = workdir_none,
                       .created_ms = bh_now_ms()};
    k.pidfd = (int)syscall(SYS_pidfd_open, pid1, 0);
    int end = keeper_serve(&k);
    if (sb != NULL) {
        bh_sandbox_destroy(sb);
    } else {
        kill(-agent, SIGKILL);
        kill(agent, SIGKILL);
        waitpid(agent, NULL, 0);
        nftw(workdir_none, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    /* Only after the sandbox is gone: a daemon that then finds the record
     * without a keeper rebuilds the session on a fresh sandbox. */
    if (k.fp[0] != '\0') {
        keeper_unlink(&k, ".sock");
        if (end == KEEPER_END_RECYCLE)
            keeper_write_record(&k);
        else
            keeper_unlink(&k, ".json");
    }
    _exit(0);
}

/* Closes every fd of the forked keeper but stdio and the two it keeps. */
int bhd_argc;
char **bhd_argv;
const char *bhd_keeper_args;

void bhd_keeper_exec_main(const char *args)
{
    int ctl = -1, chan = -1, used = 0;
    char name[64] = "", workdir[PATH_MAX] = "";
    if (sscanf(args, "%d,%d,%63[^,],%n", &ctl, &chan, name, &used) != 3 || used == 0 ||
        ctl != KEEPER_CTL_FD || chan != KEEPER_CHAN_FD) {
        fprintf(stderr, "bulkheadd: --internal-keeper is for bulkheadd itself\n");
        _exit(2);
    }
    snprintf(workdir, sizeof(workdir), "%s", args + used);
    fcntl(ctl, F_SETFD, FD_CLOEXEC);
    fcntl(chan, F_SETFD, FD_CLOEXEC);
    fcntl(KEEPER_KEEP_FD, F_SETFD, FD_CLOEXEC);
    keeper_main(ctl, chan, KEEPER_KEEP_FD, strcmp(workdir, "-") == 0 ? "" : workdir, name);
    _exit(1);
}

static json_t *agent_init(const char *workdir, const char *prestart)
{
    json_t *env =
        json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "PATH", "/usr/local/bin:/usr/bin:/bin",
                  "HOME", workdir, "LANG", "C.UTF-8", "TMPDIR", "/tmp", "MPLBACKEND", "Agg",
                  "MPLCONFIGDIR", "/tmp/.mpl", "PYTHONDONTWRITEBYTECODE", "1");
    json_t *pre = json_array();
    /* a comma-separated list of languages whose interpreters start with the box */
    for (const char *p = prestart ? prestart : ""; *p;) {
        size_t n = strcspn(p, ",");
        if (n > 0)
            json_array_append_new(pre, json_stringn(p, n));
        p += n;
        if (*p == ',')
            p++;
    }
    /* Extra node flags stay empty: kernel.policy allows V8's JIT mappings. */
    json_t *node_flags = json_array();
    return json_pack("{s:s, s:b, s:s, s:s, s:s, s:o, s:o, s:o}", "workdir", workdir, "sandboxed",
                     bhd_cfg.tier != BH_TIER_NONE, "python_runner", bhd_runners.python,
                     "javascript_runner", bhd_runners.javascript, "node", NODE_PATH, "env", env,
                     "prestart", pre, "node_flags", node_flags);
}

static int send_json(int fd, json_t *obj, struct bh_error *err)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    if (text == NULL)
        return bh_error_set(err, ENOMEM, "encode a message to the agent");
    int rc = bh_frame_write(fd, text, strlen(text), err);
    free(text);
    return rc;
}

/* "PID ID" from the keeper: the sandbox's pid 1 and its cgroup, which we
 * read (never change) for what a call ran into (OOM kills, pids.max). */
static void box_opened(struct bhd_box *box, const char *msg)
{
    char id[64] = "";
    int pid = 0;
    if (sscanf(msg, "%d %63s", &pid, id) < 1)
        return;
    box->sentry = pid;
    if (box->tier == BH_TIER_NONE || id[0] == '-' || id[0] == '\0')
        return;
    char path[96];
    snprintf(path, sizeof(path), "bulkhead/%s", id);
    struct bh_error err = {0};
    if (bh_cgroup_open(path, &box->cg, &err) < 0)
        box->cg = NULL;
}

int bhd_box_counters(struct bhd_box *box, struct bhd_box_counters *c)
{
    memset(c, 0, sizeof(*c));
    if (box->cg == NULL)
        return -1;
    struct bh_cgroup_stats st;
    struct bh_error err = {0};
    if (bh_cgroup_stats(box->cg, &st, &err) == 0) {
        c->oom_kills = st.oom_kills;
        c->memory_max_usage = st.memory_max_usage;
        c->cpu_usage_ns = st.cpu_usage_ns;
    }
    const char *dir = bh_cgroup_dir(box->cg, "pids");
    if (dir != NULL) {
        char path[4200], line[128];
        snprintf(path, sizeof(path), "%s/pids.events", dir);
        FILE *f = fopen(path, "re");
        while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            unsigned long long v;
            if (sscanf(line, "max %llu", &v) == 1)
                c->pids_max_hits = v;
        }
        if (f != NULL)
            fclose(f);
    }
    return 0;
}

/* A tier-none working directory not (yet) handed to a keeper is removed. */
static void rmdir_unowned(char **dir)
{
    if (*dir != NULL)
        rmdir(*dir);
}

int bhd_box_create(const char *prestart, struct bhd_box **out, struct bh_error *err)
{
    int64_t t0 = bh_now_ms();
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        return bh_error_errno(err, errno, "socketpair for the agent channel");
    cleanup_close int chan = pair[0];
    cleanup_close int chan_keeper = pair[1];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0)
        return bh_error_errno(err, errno, "socketpair for the keeper");
    cleanup_close int ctl = pair[0];
    cleanup_close int ctl_keeper = pair[1];
    char workdir_none[64] = "";
    __attribute__((cleanup(rmdir_unowned))) char *unowned_workdir = NULL;
    if (bhd_cfg.tier == BH_TIER_NONE) {
        strcpy(workdir_none, "/tmp/bulkheadd-none-XXXXXX");
        if (mkdtemp(workdir_none) == NULL)
            return bh_error_errno(err, errno, "make a working directory");
        unowned_workdir = workdir_none;
    }
    /* Named here, not in the keeper: if the keeper must be killed before it
     * could destroy its sandbox, the daemon still knows which cgroup to remove. */
    char name[64];
    uint8_t rnd[6];
    char hex[13];
    if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
        memset(rnd, 0, sizeof(rnd));
    bh_hex(rnd, sizeof(rnd), hex);
    snprintf(name, sizeof(name), "bhd-%d-%s", (int)getpid(), hex);
    /* The keeper is a fresh exec of this binary: a fork of the threaded
     * daemon may only make async-signal-safe calls (another thread may have
     * held a lock, e.g. the allocator's, at the fork), so the child only
     * moves two fds into place and execs; argv is built before the fork. */
    char keeper_arg[PATH_MAX + 160];
    snprintf(keeper_arg, sizeof(keeper_arg), "--internal-keeper=%d,%d,%s,%s", KEEPER_CTL_FD,
             KEEPER_CHAN_FD, name, workdir_none[0] ? workdir_none : "-");
    cleanup_free char **kargv = calloc((size_t)bhd_argc + 2, sizeof(char *));
    /* Allocated before the fork: once a keeper runs, nothing may fail here. */
    cleanup_free struct bhd_box *box = calloc(1, sizeof(*box));
    if (kargv == NULL || box == NULL)
        return bh_error_errno(err, ENOMEM, "start a keeper");
    for (int i = 0; i < bhd_argc; i++)
        kargv[i] = bhd_argv[i];
    kargv[bhd_argc] = keeper_arg;
    pid_t pid = fork();
    if (pid < 0)
        return bh_error_errno(err, errno, "fork a keeper");
    if (pid == 0) {
        int a = fcntl(ctl_keeper, F_DUPFD, 100), b = fcntl(chan_keeper, F_DUPFD, 100),
            c = fcntl(chan, F_DUPFD, 100);
        if (a < 0 || b < 0 || c < 0 || dup2(a, KEEPER_CTL_FD) < 0 || dup2(b, KEEPER_CHAN_FD) < 0 ||
            dup2(c, KEEPER_KEEP_FD) < 0)
            _exit(BH_EXIT_CANNOT_EXEC);
        syscall(SYS_close_range, KEEPER_KEEP_FD + 1, ~0U, 0);
        execv("/proc/self/exe", kargv);
        _exit(BH_EXIT_NOT_FOUND);
    }
    /* The keeper removes its working directory; our ends of its sockets
     * close now, so its death shows as end of stream. */
    unowned_workdir = NULL;
    close(steal_fd(&chan_keeper));
    close(steal_fd(&ctl_keeper));
    pthread_mutex_init(&box->tell_lock, NULL);
    box->pidfd = -1;
    box->keeper = pid;
    snprintf(box->name, sizeof(box->name), "%s", name);
    box->keeper_fd = steal_fd(&ctl);
    box->chan = steal_fd(&chan);
    box->tier = bhd_cfg.tier;
    box->created_ms = t0;

    json_t *init =
        agent_init(bhd_cfg.tier == BH_TIER_NONE ? workdir_none : SANDBOX_WORKDIR, prestart);
    int rc = send_json(box->chan, init, err);
    json_decref(init);
    void *msg = NULL;
    size_t len;
    int64_t deadline = bh_now_ms() + AGENT_START_MS;
    if (rc == 0) {
        rc = bh_frame_read(box->keeper_fd, 4096, deadline, &msg, &len, err);
        if (rc == 0)
            rc = bh_error_set(err, EPIPE, "the keeper ended before the sandbox was made");
        else if (rc > 0 && ((char *)msg)[0] == 'E')
            rc = bh_error_set(err, EIO, "%s", (char *)msg + 1);
        else if (rc > 0)
            box_opened(box, (char *)msg + 1);
        free(msg);
    }
    if (rc >= 0) {
        rc = bh_frame_read(box->chan, 4096, deadline, &msg, &len, err);
        if (rc == 0)
            rc = bh_error_set(err, EPIPE, "the session agent ended before it was ready");
        if (rc > 0) {
            json_t *j = json_loadb(msg, len, 0, NULL);
            if (!json_is_true(json_object_get(j, "ready")))
                rc = bh_error_set(err, EPROTO, "the session agent did not say it was ready");
            json_decref(j);
        }
        free(msg);
    }
    if (rc < 0) {
        bh_error_prefix(err, "start a session sandbox");
        bhd_box_destroy(steal_pointer(&box));
        return -1;
    }
    box->create_ms = bh_now_ms() - t0;
    *out = steal_pointer(&box);
    return 0;
}

/* Waits (bounded) for the keeper to end: our child is reaped, an adopted
 * one (another daemon's child) is watched through its pidfd. */
bool bhd_box_wait_keeper(struct bhd_box *box, int tries)
{
    for (int i = 0; i < tries; i++) {
        if (box->adopted) {
            struct pollfd p = {.fd = box->pidfd, .events = POLLIN};
            if (box->pidfd < 0 || kill(box->keeper, 0) < 0 || poll(&p, 1, 0) > 0)
                return true;
        } else {
            pid_t r = waitpid(box->keeper, NULL, WNOHANG);
            if (r == box->keeper || (r < 0 && errno == ECHILD))
                return true;
        }
        usleep(i < 50 ? 1000 : 10000);
    }
    return false;
}

static void box_free(struct bhd_box *box)
{
    if (box->chan >= 0)
        close(box->chan);
    if (box->keeper_fd >= 0)
        close(box->keeper_fd);
    if (box->pidfd >= 0)
        close(box->pidfd);
    if (box->cg != NULL)
        bh_cgroup_free(box->cg);
    pthread_mutex_destroy(&box->tell_lock);
    free(box);
}

int bhd_box_tell(struct bhd_box *box, char op, json_t *record)
{
    char *text = record != NULL ? json_dumps(record, JSON_COMPACT) : NULL;
    size_t n = text != NULL ? strlen(text) : 0;
    char *buf = malloc(n + 1);
    int rc = -1;
    if (buf != NULL) {
        buf[0] = op;
        if (n)
            memcpy(buf + 1, text, n);
        pthread_mutex_lock(&box->tell_lock);
        if (box->keeper_fd >= 0)
            rc = bh_frame_write(box->keeper_fd, buf, n + 1, NULL);
        pthread_mutex_unlock(&box->tell_lock);
    }
    free(buf);
    free(text);
    return rc;
}

void bhd_box_end_keeper(struct bhd_box *box, char op)
{
    bhd_box_tell(box, op, NULL);
    pthread_mutex_lock(&box->tell_lock);
    if (box->keeper_fd >= 0)
        close(box->keeper_fd);
    box->keeper_fd = -1;
    pthread_mutex_unlock(&box->tell_lock);
}

void bhd_box_release(struct bhd_box *box)
{
    if (box == NULL)
        return;
    /* no 'X': the keeper keeps the sandbox for the next daemon */
    box_free(box);
}

void bhd_box_destroy(struct bhd_box *box)
{
    if (box == NULL)
        return;
    bhd_box_end_keeper(box, 'X');
    if (box->chan >= 0)
        close(box->chan);
    box->chan = -1;
    /* The keeper destroys the sandbox on 'X'; wait for it (bounded), so a
     * closed session has nothing left when the answer goes out. */
    if (!bhd_box_wait_keeper(box, 1000)) {
        kill(box->keeper, SIGKILL);
        if (!box->adopted)
            waitpid(box->keeper, NULL, 0);
        else
            bhd_box_wait_keeper(box, 200);
    }
    /* A keeper that could not finish (killed, by us or anyone): whatever it
     * built is removed here (the sentry died with it; its cgroup did not). */
    bhd_box_remove_remains(box->tier, box->name);
    box_free(box);
}

void bhd_box_remove_remains(enum bh_tier tier, const char *name)
{
    /* the name may come from a record on disk: only a sandbox name we make
     * (bhd-PID-HEX) may name a cgroup to remove */
    unsigned pid;
    char hex[16];
    int used = 0;
    if (tier == BH_TIER_NONE || name == NULL ||
        sscanf(name, "bhd-%u-%13[0-9a-f]%n", &pid, hex, &used) != 2 || name[used] != '\0' ||
        strlen(hex) != 12)
        return;
    char path[128];
    snprintf(path, sizeof(path), "bulkhead/%s", name);
    struct bh_cgroup *cg = NULL;
    struct bh_error e = {0};
    if (bh_cgroup_open(path, &cg, &e) < 0)
        return; /* nothing there */
    if (bh_cgroup_destroy(cg, &e) < 0)
        bhd_log("remove the cgroup of a keeper that is gone: %s", e.msg);
}

/* Why a keeper's hello cannot be adopted, or NULL. */
static const char *hello_invalid(json_t *h, const char *fp, pid_t peer)
{
    json_int_t v = json_integer_value(json_object_get(h, "keeper"));
    if (!json_is_integer(json_object_get(h, "keeper")) || v != BHD_KEEPER_PROTOCOL)
        return "it speaks another keeper protocol version";
    const char *hfp = json_string_value(json_object_get(h, "fp"));
    if (hfp == NULL || strcmp(hfp, fp) != 0)
        return "its record names another session";
    if (json_integer_value(json_object_get(h, "keeper_pid")) != peer)
        return "its pid is not the one connected";
    const char *name = json_string_value(json_object_get(h, "sandbox"));
    if (name == NULL || strlen(name) >= sizeof(((struct bhd_box *)0)->name) || strchr(name, '/') ||
        strstr(name, ".."))
        return "its sandbox name is not valid";
    json_int_t pid1 = json_integer_value(json_object_get(h, "sentry"));
    if (pid1 <= 0 || pid1 > INT_MAX)
        return "its sandbox pid is not valid";
    return NULL;
}

int bhd_box_adopt(int dirfd, const char *fp, struct bhd_box **out, json_t **record,
                  struct bh_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d/%s.sock", dirfd, fp);
    cleanup_close int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "socket");
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0)
        return 0; /* no keeper listens: it is gone */
    struct ucred cred;
    socklen_t cl = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0)
        return bh_error_errno(err, errno, "SO_PEERCRED of a keeper");
    if (cred.uid != geteuid())
        return bh_error_set(err, EPERM,
                            "the keeper socket of session %.12s belongs to uid %u, not to us: "
                            "not adopted",
                            fp, (unsigned)cred.uid);
    int64_t deadline = bh_now_ms() + 5000;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int left = (int)(deadline - bh_now_ms());
    if (poll(&p, 1, left > 0 ? left : 0) <= 0)
        return bh_error_set(err, ETIMEDOUT,
                            "the keeper of session %.12s did not answer (is another daemon "
                            "holding it?)",
                            fp);
    char k;
    int chan = -1;
    size_t n_fds = 0;
    if (bh_recv_fds(fd, &k, 1, &chan, 1, &n_fds, err) != 1 || n_fds != 1 || k != 'K') {
        if (chan >= 0)
            close(chan);
        return bh_error_set(err, EPROTO, "the keeper of session %.12s sent no channel", fp);
    }
    void *buf = NULL;
    size_t len = 0;
    if (bh_frame_read(fd, 256 * 1024, deadline, &buf, &len, err) != 1) {
        close(chan);
        return bh_error_set(err, EPROTO, "the keeper of session %.12s sent no record", fp);
    }
    json_t *h = json_loadb(buf, len, 0, NULL);
    free(buf);
    const char *why = json_is_object(h) ? hello_invalid(h, fp, cred.pid) : "its record is not JSON";
    if (why != NULL) {
        /* refused: the keeper ends its sandbox; the caller rebuilds the
         * session fresh if it can read the record */
        bh_frame_write(fd, "X", 1, NULL);
        close(chan);
        json_decref(h);
        return bh_error_set(err, EPROTO, "the keeper of session %.12s is not adopted: %s", fp, why);
    }
    struct bhd_box *box = bhd_xcalloc(1, sizeof(*box));
    pthread_mutex_init(&box->tell_lock, NULL);
    box->keeper = cred.pid;
    box->pidfd = (int)syscall(SYS_pidfd_open, cred.pid, 0);
    box->adopted = true;
    snprintf(box->name, sizeof(box->name), "%s", json_string_value(json_object_get(h, "sandbox")));
    box->chan = chan;
    box->sentry = (pid_t)json_integer_value(json_object_get(h, "sentry"));
    box->tier = bhd_cfg.tier;
    box->created_ms = bh_now_ms();
    if (bh_frame_write(fd, "A", 1, err) < 0) {
        box->keeper_fd = -1;
        box_free(box);
        json_decref(h);
        return bh_error_prefix(err, "adopt the keeper of session %.12s", fp);
    }
    box->keeper_fd = steal_fd(&fd);
    if (box->tier != BH_TIER_NONE) {
        char path[96];
        snprintf(path, sizeof(path), "bulkhead/%s", box->name);
        struct bh_error e = {0};
        if (bh_cgroup_open(path, &box->cg, &e) < 0)
            box->cg = NULL;
    }
    *out = box;
    *record = h;
    return 1;
}

/* ---- a cell -------------------------------------------------------------- */

void bhd_cell_out_free(struct bhd_cell_out *o)
{
    free(o->value);
    free(o->out);
    free(o->err);
    for (size_t i = 0; i < o->n_images; i++)
        free(o->images[i]);
    free(o->images);
    free(o->image_lens);
    free(o->files_error);
    memset(o, 0, sizeof(*o));
}

static bool get_int(json_t *o, const char *k, int64_t lo, int64_t hi, int64_t *v)
{
    json_t *x = json_object_get(o, k);
    if (!json_is_integer(x))
        return false;
    json_int_t n = json_integer_value(x);
    if (n < lo || n > hi)
        return false;
    *v = n;
    return true;
}

/* Between calls the agent never writes, so anything readable on its channel
 * (its end closed) or from the keeper (it ended) means the sandbox is gone. */
static bool box_gone(struct bhd_box *box)
{
    if (box->dead)
        return true;
    struct pollfd p[2] = {{.fd = box->chan, .events = POLLIN | POLLRDHUP},
                          {.fd = box->keeper_fd, .events = POLLIN}};
    return poll(p, 2, 0) > 0;
}

int bhd_box_run(struct bhd_box *box, Bulkhead__Control__RunCell *req, uint64_t timeout_ms,
                struct bhd_cell_out *out, struct bh_error *err)
{
    memset(out, 0, sizeof(*out));
    /* A sandbox that died between calls gets no cell: the caller is told
     * nothing ran, not that a cell died in it. */
    if (box_gone(box)) {
        box->dead = true;
        out->box_died = true;
        out->not_dispatched = true;
        return bh_error_set(err, EPIPE, "the session sandbox had ended before this call");
    }
    json_t *files = json_array();
    for (size_t i = 0; i < req->n_files; i++)
        json_array_append_new(files, json_pack("{s:s, s:s}", "path", req->files[i]->path, "content",
                                               req->files[i]->content));
    json_t *msg = json_pack("{s:s, s:s, s:s, s:o, s:I, s:I}", "op", "cell", "language",
                            req->language, "code", req->code, "files", files, "timeout_ms",
                            (json_int_t)timeout_ms, "output_cap", (json_int_t)bhd_cfg.output_bytes);
    if (msg == NULL)
        return bh_error_set(err, EINVAL, "encode the cell for the agent");
    int rc = send_json(box->chan, msg, err);
    json_decref(msg);
    if (rc < 0) {
        /* the agent never had the whole request: it cannot have run it */
        box->dead = true;
        out->box_died = true;
        out->not_dispatched = true;
        return -1;
    }
    int64_t deadline = bh_now_ms() + (int64_t)timeout_ms + AGENT_GRACE_MS;
    void *buf = NULL;
    size_t len = 0;
    json_t *hdr = NULL;
    if (rc == 0)
        rc = bh_frame_read(box->chan, 1024 * 1024, deadline, &buf, &len, err);
    if (rc > 0) {
        hdr = json_loadb(buf, len, 0, NULL);
        free(buf);
        buf = NULL;
        rc = json_is_object(hdr) ? 1 : bh_error_set(err, EPROTO, "agent sent no result header");
    }
    int64_t v = 0;
    if (rc > 0) {
        json_t *fe = json_object_get(hdr, "files_error");
        if (json_is_string(fe)) {
            out->files_error = bhd_utf8_sanitize(json_string_value(fe),
                                                 strnlen(json_string_value(fe), 1024), NULL);
            json_decref(hdr);
            /* the agent answers every cell with the same frames (header,
             * stdout, stderr): drop the two so the next call reads its own */
            for (int i = 0; i < 2; i++) {
                rc = bh_frame_read(box->chan, (size_t)bhd_cfg.output_bytes, deadline, &buf, &len,
                                   err);
                free(buf);
                buf = NULL;
                if (rc <= 0) {
                    if (rc == 0)
                        bh_error_set(err, EPIPE, "the session agent ended inside a result");
                    box->dead = true;
                    out->box_died = true;
                    return -1;
                }
            }
            return 0;
        }
        int64_t n_images = 0;
        if (!get_int(hdr, "exit", -1024, 1024, &v))
            rc = bh_error_set(err, EPROTO, "agent result: bad exit");
        out->exit_code = (int)v;
        if (rc > 0 && !get_int(hdr, "n_images", 0, MAX_IMAGES, &n_images))
            rc = bh_error_set(err, EPROTO, "agent result: bad image count");
        out->timed_out = json_is_true(json_object_get(hdr, "timed_out"));
        out->has_value = json_is_true(json_object_get(hdr, "has_value"));
        out->fresh_interpreter = json_is_true(json_object_get(hdr, "fresh_interpreter"));
        out->state_kept = json_is_true(json_object_get(hdr, "state_kept"));
        json_t *val = json_object_get(hdr, "value");
        if (out->has_value && json_is_string(val)) {
            size_t vl = json_string_length(val);
            if (vl > (size_t)bhd_cfg.output_bytes)
                vl = (size_t)bhd_cfg.output_bytes;
            out->value = bhd_utf8_sanitize(json_string_value(val), vl, NULL);
        }
        if (get_int(hdr, "stdout_bytes", 0, INT64_MAX, &v))
            out->out_total = (uint64_t)v;
        if (get_int(hdr, "stderr_bytes", 0, INT64_MAX, &v))
            out->err_total = (uint64_t)v;
        if (get_int(hdr, "run_ms", 0, INT64_MAX, &v))
            out->run_ms = (uint64_t)v;
        if (get_int(hdr, "disk_used", 0, INT64_MAX, &v)) {
            out->disk_used = (uint64_t)v;
            out->disk_known = true;
        }
        for (int s = 0; rc > 0 && s < 2; s++) {
            rc = bh_frame_read(box->chan, (size_t)bhd_cfg.output_bytes, deadline, &buf, &len, err);
            if (rc == 0)
                rc = bh_error_set(err, EPIPE, "agent ended inside a result");
            if (rc > 0) {
                size_t clean_len;
                char *clean = bhd_utf8_sanitize(buf, len, &clean_len);
                free(buf);
                buf = NULL;
                if (s == 0) {
                    out->out = clean;
                    out->out_len = clean_len;
                    if (out->out_total < len)
                        out->out_total = len;
                } else {
                    out->err = clean;
                    out->err_len = clean_len;
                    if (out->err_total < len)
                        out->err_total = len;
                }
            }
        }
        if (rc > 0 && n_images > 0) {
            out->images = bhd_xcalloc((size_t)n_images, sizeof(uint8_t *));
            out->image_lens = bhd_xcalloc((size_t)n_images, sizeof(size_t));
        }
        for (int64_t i = 0; rc > 0 && i < n_images; i++) {
            rc = bh_frame_read(box->chan, MAX_IMAGE_BYTES, deadline, &buf, &len, err);
            if (rc == 0)
                rc = bh_error_set(err, EPIPE, "agent ended inside a result");
            if (rc > 0) {
                out->images[out->n_images] = buf;
                out->image_lens[out->n_images++] = len;
                buf = NULL;
            }
        }
    }
    json_decref(hdr);
    if (rc <= 0) {
        /* the channel is out of step or the agent is gone: the box cannot be
         * trusted with another call */
        if (rc == 0)
            bh_error_set(err, EPIPE, "the session agent ended");
        box->dead = true;
        out->box_died = true;
        return -1;
    }
    out->files_persist = true;
    return 0;
}

int64_t bhd_box_disk_used(struct bhd_box *box)
{
    if (box->tier == BH_TIER_NONE || box->sentry <= 0)
        return -1;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/root" SANDBOX_WORKDIR, (int)box->sentry);
    struct statvfs st;
    if (statvfs(path, &st) < 0)
        return -1;
    return (int64_t)((st.f_blocks - st.f_bfree) * st.f_frsize);
}

/* ---- verification -------------------------------------------------------- */

static void report_add(Bulkhead__Control__TierReport *r, const char *name, bool passed,
                       const char *detail)
{
    r->checks = realloc(r->checks, (r->n_checks + 1) * sizeof(*r->checks));
    Bulkhead__Control__Check *c = bhd_xcalloc(1, sizeof(*c));
    bulkhead__control__check__init(c);
    c->name = bhd_xstrdup(name);
    c->passed = passed;
    c->detail = bhd_utf8_sanitize(detail ? detail : "", strlen(detail ? detail : ""), NULL);
    r->checks[r->n_checks++] = c;
}

void bhd_tier_report_free(Bulkhead__Control__TierReport *r)
{
    for (size_t i = 0; i < r->n_checks; i++) {
        free(r->checks[i]->name);
        free(r->checks[i]->detail);
        free(r->checks[i]);
    }
    free(r->checks);
    if (r->tier != protobuf_c_empty_string)
        free(r->tier);
    if (r->container_id != protobuf_c_empty_string)
        free(r->container_id);
    bulkhead__control__tier_report__init(r);
}

enum bh_tier bhd_box_verify(struct bhd_box *box, Bulkhead__Control__TierReport *report)
{
    bulkhead__control__tier_report__init(report);
    report->verified_at_unix_ms = (uint64_t)bhd_unix_ms();
    enum bh_tier tier = BH_TIER_NONE;
    if (box->tier == BH_TIER_NONE) {
        report_add(report, "sandbox", false,
                   "--tier none: cells run without any isolation (development only)");
    } else {
        struct bh_tier_report *r = NULL;
        struct bh_error err = {0};
        struct bh_limits limits = {0};
        limits.memory_bytes = bhd_cfg.memory_bytes;
        limits.pids = bhd_cfg.pids;
        struct bh_live_target t = {
            .sentry_pid = box->sentry, .tier = box->tier, .limits = &limits, .caps = 0};
        if (bh_probe_check_live(&t, &r, &err) < 0) {
            report_add(report, "live-checks", false, err.msg);
        } else {
            for (size_t i = 0; i < r->n_checks; i++) {
                const struct bh_check *c = &r->checks[i];
                char detail[1200];
                snprintf(detail, sizeof(detail), "%s%s[%s, required for %s] %s",
                         c->result == BH_CHECK_SKIP ? "skipped " : "", "",
                         bh_check_result_name(c->result), bh_tier_name(c->required_for),
                         c->detail ? c->detail : "");
                report_add(report, c->name, c->result == BH_CHECK_PASS, detail);
            }
            tier = r->tier;
            if (tier > box->tier)
                tier = box->tier; /* never report more than was built */
        }
        bh_tier_report_free(r);
    }
    report->tier = bhd_xstrdup(bh_tier_name(tier));
    return tier;
}
