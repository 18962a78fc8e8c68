/* Owns per-sandbox cgroups' public API (create, open, attach, update,
 * freeze, kill, stats, destroy) and the helpers every backend shares. The
 * layout is found in cgroup-layout.c; each layout's backend lives in its own
 * file behind struct backend (cgroup-v1.c, cgroup-v2.c, cgroup-hybrid.c), as
 * crun keeps its cgroupfs and systemd managers apart.
 *
 * The root is /sys/fs/cgroup unless env BULKHEAD_CGROUP_ROOT names another;
 * a root that is not a cgroup filesystem is a fake tree for tests, where
 * files are created by the writes since no kernel populates new
 * directories. */
#include "cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cgroup-internal.h"
#include "cleanup.h"

#define DEFAULT_ROOT "/sys/fs/cgroup"

const char *const cg_ctl_names[CTL_N] = {"memory",   "pids",       "cpu",     "cpuacct", "cpuset",
                                         "freezer",  "blkio",      "devices", "hugetlb", "net_cls",
                                         "net_prio", "perf_event", "rdma",    "misc"};

/* ---- small helpers ------------------------------------------------------ */

const char *cg_root(void)
{
    const char *r = getenv("BULKHEAD_CGROUP_ROOT");
    return r != NULL && r[0] == '/' ? r : DEFAULT_ROOT;
}

/* Waits between polls: from 100 us doubling to STEP_MS, since most waits
 * (a killed process leaving, a freeze settling) end within a millisecond. */
void cg_backoff(long *us)
{
    if (*us <= 0)
        *us = 100;
    struct timespec ts = {*us / 1000000, (*us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
    if (*us < STEP_MS * 1000)
        *us *= 2;
}

int64_t cg_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

bool cg_is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

bool cg_file_exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return false;
    return access(path, F_OK) == 0;
}

int cg_write(const struct bh_cgroup *cg, const char *dir, const char *file, const char *value,
             struct bh_error *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
        return bh_error_set(err, ENAMETOOLONG, "cgroup path `%s/%s` is too long", dir, file);
    int flags = O_WRONLY | O_CLOEXEC;
    /* A fake tree keeps every subtree_control write, as the kernel keeps
     * every enabled controller. */
    if (cg->fake)
        flags |= O_CREAT |
                 ((strcmp(file, "cgroup.subtree_control") == 0 || strncmp(file, "devices.", 8) == 0
                       ? O_APPEND
                       : O_TRUNC));
    cleanup_close int fd = open(path, flags, 0644);
    if (fd < 0)
        return bh_error_errno(err, errno, "open `%s` for writing", path);
    size_t len = strlen(value);
    ssize_t w = write(fd, value, len);
    if (w < 0 || (size_t)w != len) {
        /* The kernel refused the value itself: runc's status for that is 1,
         * not the 125 of a refusal by bulkhead. */
        bh_error_errno(err, w < 0 ? errno : EIO, "write `%s` to `%s`", value, path);
        return bh_error_mark(err, BH_ERROR_LIMIT);
    }
    return 0;
}

/* Reads a whole (small or cgroup.procs sized) file; *out is malloc'd. */
int cg_read(const char *dir, const char *file, char **out, struct bh_error *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
        return bh_error_set(err, ENAMETOOLONG, "cgroup path `%s/%s` is too long", dir, file);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "open `%s`", path);
    size_t cap = 4096, len = 0;
    cleanup_free char *buf = malloc(cap);
    if (buf == NULL)
        return bh_error_errno(err, ENOMEM, "read `%s`", path);
    for (;;) {
        if (len + 1 >= cap) {
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL)
                return bh_error_errno(err, ENOMEM, "read `%s`", path);
            buf = nb;
            cap *= 2;
        }
        ssize_t r = read(fd, buf + len, cap - len - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return bh_error_errno(err, errno, "read `%s`", path);
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    *out = steal_pointer(&buf);
    return 0;
}

/* "max" and v1's "unlimited" page-counter ceiling read as UINT64_MAX. */
static uint64_t parse_limit(const char *s)
{
    if (strncmp(s, "max", 3) == 0)
        return UINT64_MAX;
    uint64_t v = strtoull(s, NULL, 10);
    if (v >= 0x7FFFFFFFFFFFF000ULL)
        return UINT64_MAX;
    return v;
}

int cg_read_u64(const char *dir, const char *file, uint64_t *v, struct bh_error *err)
{
    cleanup_free char *s = NULL;
    if (cg_read(dir, file, &s, err) < 0)
        return -1;
    *v = parse_limit(s);
    return 0;
}

/* Value of "key N" in a flat keyed file (memory.events, cpu.stat, ...). */
int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *v,
                struct bh_error *err)
{
    cleanup_free char *s = NULL;
    if (cg_read(dir, file, &s, err) < 0)
        return -1;
    size_t kl = strlen(key);
    for (char *line = s; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            *v = strtoull(line + kl + 1, NULL, 10);
            return 0;
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return bh_error_set(err, ENOENT, "no `%s` in `%s/%s`", key, dir, file);
}

static int parse_pids(const char *s, pid_t **pids, size_t *n, struct bh_error *err)
{
    size_t cap = 16, len = 0;
    pid_t *out = malloc(cap * sizeof(*out));
    if (out == NULL)
        return bh_error_errno(err, ENOMEM, "list cgroup pids");
    for (const char *p = s; *p != '\0';) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            p++;
            continue;
        }
        p = end;
        if (v <= 0)
            continue;
        if (len == cap) {
            pid_t *no = realloc(out, cap * 2 * sizeof(*out));
            if (no == NULL) {
                free(out);
                return bh_error_errno(err, ENOMEM, "list cgroup pids");
            }
            out = no;
            cap *= 2;
        }
        out[len++] = (pid_t)v;
    }
    *pids = out;
    *n = len;
    return 0;
}

/* Relative path, '/'-joined, with no empty, "." or ".." component: an
 * absolute OCI cgroupsPath is taken relative to each hierarchy's root. */
int cg_normalize_path(const char *in, char **out, struct bh_error *err)
{
    if (in == NULL || strlen(in) >= PATH_MAX / 2)
        return bh_error_set(err, EINVAL, "cgroup path is missing or too long");
    cleanup_free char *res = calloc(1, strlen(in) + 1);
    if (res == NULL)
        return bh_error_errno(err, ENOMEM, "cgroup path");
    size_t len = 0;
    for (const char *p = in; *p != '\0';) {
        while (*p == '/')
            p++;
        if (*p == '\0')
            break;
        const char *e = strchrnul(p, '/');
        size_t cl = (size_t)(e - p);
        if ((cl == 1 && p[0] == '.') || (cl == 2 && p[0] == '.' && p[1] == '.'))
            return bh_error_set(err, EINVAL,
                                "cgroup path `%s` refused: `.` and `..` components could "
                                "escape the hierarchy; name the cgroup without them",
                                in);
        for (size_t i = 0; i < cl; i++)
            if ((unsigned char)p[i] < 0x20 || p[i] == 0x7f)
                return bh_error_set(err, EINVAL, "cgroup path `%s` refused: control characters",
                                    in);
        if (len > 0)
            res[len++] = '/';
        memcpy(res + len, p, cl);
        len += cl;
        p = e;
    }
    if (len == 0)
        return bh_error_set(err, EINVAL,
                            "cgroup path `%s` refused: it names the hierarchy root; give a "
                            "sandbox path such as `bulkhead/ID`",
                            in);
    res[len] = '\0';
    *out = steal_pointer(&res);
    return 0;
}

int cg_write_i64(const struct bh_cgroup *cg, const char *dir, const char *file, int64_t v,
                 struct bh_error *err)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return cg_write(cg, dir, file, buf, err);
}

/* Resolves the swap request: memory+swap total, -1 unlimited. */
int cg_memsw_total(const struct bh_limits *l, int64_t *memsw, struct bh_error *err)
{
    /* Swap alone: the total as given, checked by the kernel against the
     * memory limit in place (v1; v2 needs both, see v2_apply). */
    if (l->memory_bytes == 0) {
        *memsw = l->memory_swap_bytes > 0 ? l->memory_swap_bytes : -1;
        return 0;
    }
    if (l->memory_bytes < 0 || l->memory_swap_bytes < 0) {
        *memsw = -1;
        return 0;
    }
    if (l->memory_swap_bytes == 0) {
        *memsw = l->memory_bytes;
        return 0;
    }
    if (l->memory_swap_bytes < l->memory_bytes)
        return bh_error_set(err, EINVAL,
                            "memory+swap limit (%" PRId64 ") is below the memory limit (%" PRId64
                            "); it counts memory plus swap, so give at least the memory limit",
                            l->memory_swap_bytes, l->memory_bytes);
    *memsw = l->memory_swap_bytes;
    return 0;
}

bool cg_wants_blkio(const struct bh_limits *l)
{
    size_t n = l->n_blkio_weight_devices;
    for (int t = 0; t < BH_THROTTLE_N; t++)
        n += l->n_blkio_throttle[t];
    return l->blkio_weight != 0 || l->blkio_leaf_weight != 0 || n > 0;
}

int cg_list_pids(const char *dir, pid_t **pids, size_t *n, struct bh_error *err)
{
    cleanup_free char *s = NULL;
    if (cg_read(dir, "cgroup.procs", &s, err) < 0)
        return -1;
    return parse_pids(s, pids, n, err);
}

/* Empty in every hierarchy that lists processes. */
int cg_wait_empty(struct bh_cgroup *cg, int64_t deadline, bool resend, struct bh_error *err)
{
    long wait_us = 0;
    for (;;) {
        size_t total = 0;
        for (size_t i = 0; i < cg->nh; i++) {
            cleanup_free pid_t *pids = NULL;
            size_t n = 0;
            if (cg_list_pids(cg->h[i].dir, &pids, &n, err) < 0)
                return -1;
            if (resend)
                for (size_t j = 0; j < n; j++)
                    kill(pids[j], SIGKILL);
            total += n;
        }
        if (total == 0)
            return 0;
        if (cg_now_ms() > deadline)
            return bh_error_set(err, ETIMEDOUT,
                                "cgroup `%s` still has %zu processes %d ms after SIGKILL "
                                "(stuck in the kernel, or zombies nobody reaps)",
                                cg->rel, total, WAIT_MS);
        cg_backoff(&wait_us);
    }
}

const char *cg_ctl_dir(const struct bh_cgroup *cg, enum ctl c)
{
    return cg->ctl_h[c] < 0 ? NULL : cg->h[cg->ctl_h[c]].dir;
}

/* The hierarchy whose cgroup.procs lists the sandbox's processes. */
const char *cg_primary_dir(const struct bh_cgroup *cg)
{
    if (cg->layout == BH_CGROUP_V2)
        return cg->h[cg->unified_h].dir;
    static const enum ctl order[] = {CTL_PIDS, CTL_MEMORY, CTL_FREEZER, CTL_CPU};
    for (size_t i = 0; i < BH_ARRAY_SIZE(order); i++)
        if (cg_ctl_dir(cg, order[i]) != NULL)
            return cg_ctl_dir(cg, order[i]);
    return cg->h[0].dir;
}

int cg_need_ctl(const struct bh_cgroup *cg, enum ctl c, const char *what, struct bh_error *err)
{
    if (cg_ctl_dir(cg, c) != NULL)
        return 0;
    return bh_error_set(err, ENOTSUP,
                        "%s limit refused: the `%s` cgroup controller is not mounted under "
                        "`%s`; mount it or run without the limit",
                        what, cg_ctl_names[c], cg_root());
}

/* Removes a sandbox directory, retrying while the kernel still holds it
 * (EBUSY right after the last process died). */
static int remove_dir(const struct bh_cgroup *cg, const char *dir, struct bh_error *err)
{
    if (cg->fake) {
        DIR *d = opendir(dir);
        if (d != NULL) {
            struct dirent *de;
            while ((de = readdir(d)) != NULL)
                if (de->d_type == DT_REG)
                    unlinkat(dirfd(d), de->d_name, 0);
            closedir(d);
        }
    }
    int64_t deadline = cg_now_ms() + 1000;
    long wait_us = 0;
    for (;;) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || cg_now_ms() > deadline)
            return bh_error_errno(err, errno, "remove cgroup `%s`", dir);
        cg_backoff(&wait_us);
    }
}

/* Levels of rel: "bulkhead/ID" has 2; level 0 is the hierarchy root. */
size_t cg_rel_levels(const struct bh_cgroup *cg)
{
    size_t n = 1;
    for (const char *p = cg->rel; *p != '\0'; p++)
        n += *p == '/';
    return n;
}

void cg_level_path(const struct bh_cgroup *cg, const struct hier *h, size_t k, char out[PATH_MAX])
{
    const char *e = cg->rel;
    for (size_t i = 0; i < k; i++) {
        e = strchrnul(e, '/');
        if (i + 1 < k)
            e++;
    }
    if (k == 0)
        snprintf(out, PATH_MAX, "%s", h->mount);
    else
        snprintf(out, PATH_MAX, "%s/%.*s", h->mount, (int)(e - cg->rel), cg->rel);
}

/* mkdir -p of rel in every hierarchy; the leaf must be new. */
static int make_dirs(struct bh_cgroup *cg, size_t *made, struct bh_error *err)
{
    *made = 0;
    for (size_t i = 0; i < cg->nh; i++) {
        struct hier *h = &cg->h[i];
        size_t ml = strlen(h->mount);
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s", h->dir);
        for (char *s = p + ml + 1; (s = strchr(s, '/')) != NULL; s++) {
            *s = '\0';
            if (mkdir(p, 0755) < 0 && errno != EEXIST)
                return bh_error_errno(err, errno, "create cgroup `%s`", p);
            *s = '/';
        }
        int r = mkdir(h->dir, 0755);
        /* A last sandbox may have removed the shared parent just now:
         * make it again (a few times at most). */
        for (int again = 0; r < 0 && errno == ENOENT && again < 5; again++) {
            for (char *s = p + ml + 1; (s = strchr(s, '/')) != NULL; s++) {
                *s = '\0';
                if (mkdir(p, 0755) < 0 && errno != EEXIST)
                    return bh_error_errno(err, errno, "create cgroup `%s`", p);
                *s = '/';
            }
            r = mkdir(h->dir, 0755);
        }
        /* A cgroup the caller named (an OCI cgroupsPath, docker's
         * /docker/ID) is the caller's to share: runc joins it. bulkhead's
         * own names are per sandbox, so an existing one is a clash. */
        if (r < 0 && errno == EEXIST && strncmp(cg->rel, "bulkhead/", 9) != 0) {
            h->existed = true;
            r = 0;
        }
        if (r < 0) {
            if (errno == EEXIST)
                return bh_error_set(err, EEXIST,
                                    "cgroup `%s` already exists: another sandbox uses this id, "
                                    "or a previous one was not cleaned up (delete it or pick "
                                    "another id)",
                                    h->dir);
            return bh_error_errno(err, errno, "create cgroup `%s`", h->dir);
        }
        *made = i + 1;
    }
    return 0;
}

/* ---- public API --------------------------------------------------------- */

int bh_cgroup_create(const char *path, const struct bh_limits *limits, struct bh_cgroup **out,
                     struct bh_error *err)
{
    static const struct bh_limits none;
    if (limits == NULL)
        limits = &none;
    struct bh_cgroup *cg = NULL;
    if (cg_new(path, &cg, err) < 0)
        return -1;
    /* Refuse a limit the layout cannot enforce before creating anything. */
    if (cg->layout != BH_CGROUP_V2) {
        if (((limits->memory_bytes != 0 || limits->memory_swap_bytes != 0 ||
              limits->memory_reservation_bytes != 0) &&
             cg_need_ctl(cg, CTL_MEMORY, "memory", err) < 0) ||
            (limits->pids != 0 && cg_need_ctl(cg, CTL_PIDS, "pids", err) < 0) ||
            ((limits->cpu_quota_us != 0 || limits->cpu_period_us != 0 || limits->cpu_shares != 0 ||
              limits->cpu_rt_period_us != 0 || limits->cpu_rt_runtime_us != 0) &&
             cg_need_ctl(cg, CTL_CPU, "cpu", err) < 0) ||
            (cg_wants_blkio(limits) && cg_need_ctl(cg, CTL_BLKIO, "blkio", err) < 0)) {
            bh_cgroup_free(cg);
            return -1;
        }
    }
    size_t made = 0;
    if (make_dirs(cg, &made, err) < 0 || cg->be->prepare(cg, limits, err) < 0 ||
        cg->be->apply(cg, limits, err) < 0 ||
        (cg->be->devices != NULL && cg->be->devices(cg, limits, err) < 0)) {
        bh_error_prefix(err, "cgroup `%s` (%s)", cg->rel, cg->be->name);
        /* Only the leaves: a shared parent may be in use by a concurrent create. */
        for (size_t i = made; i-- > 0;)
            if (!cg->h[i].existed)
                remove_dir(cg, cg->h[i].dir, NULL);
        bh_cgroup_free(cg);
        return -1;
    }
    *out = cg;
    return 0;
}

int bh_cgroup_open(const char *path, struct bh_cgroup **out, struct bh_error *err)
{
    struct bh_cgroup *cg = NULL;
    if (cg_new(path, &cg, err) < 0)
        return -1;
    /* It exists where any hierarchy has it: one made by another tool (a
     * freezer-only cgroup, runc's `pre-existing frozen cgroup`), or before a
     * controller was mounted. Keep only those, so kill and destroy work. */
    bool any = false;
    for (size_t i = 0; i < cg->nh; i++)
        any = any || cg_is_dir(cg->h[i].dir);
    if (!any) {
        bh_error_set(err, ENOENT, "cgroup `%s` does not exist (no `%s`)", cg->rel,
                     cg_primary_dir(cg));
        bh_cgroup_free(cg);
        return -1;
    }
    size_t kept = 0;
    for (size_t i = 0; i < cg->nh; i++) {
        if (cg_is_dir(cg->h[i].dir)) {
            cg->h[kept++] = cg->h[i];
        } else {
            free(cg->h[i].mount);
            free(cg->h[i].dir);
        }
    }
    cg->nh = kept;
    cg_index_hiers(cg);
    *out = cg;
    return 0;
}

int bh_cgroup_attach(struct bh_cgroup *cg, pid_t pid, struct bh_error *err)
{
    /* A fake tree (BULKHEAD_CGROUP_ROOT for tests) limits nothing: a process
     * "attached" there would run without its limits. Fail closed. */
    if (cg->fake)
        return bh_error_set(
            err, EPERM,
            "attach pid %d: the cgroup root `%s` is not a cgroup filesystem (a test "
            "tree?), so no limit would apply; unset BULKHEAD_CGROUP_ROOT",
            (int)pid, cg->h[0].mount);
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", (int)pid);
    /* cpuset first: it is the one that can refuse (ENOSPC on empty sets). */
    int order[MAX_HIER];
    size_t no = 0;
    if (cg->ctl_h[CTL_CPUSET] >= 0 && cg->layout != BH_CGROUP_V2)
        order[no++] = cg->ctl_h[CTL_CPUSET];
    for (size_t i = 0; i < cg->nh; i++)
        if ((int)i != cg->ctl_h[CTL_CPUSET] || cg->layout == BH_CGROUP_V2)
            order[no++] = (int)i;
    for (size_t i = 0; i < no; i++)
        if (cg_write(cg, cg->h[order[i]].dir, "cgroup.procs", buf, err) < 0)
            return bh_error_prefix(err, "attach pid %d to cgroup", (int)pid);
    return 0;
}

int bh_cgroup_update(struct bh_cgroup *cg, const struct bh_limits *limits, struct bh_error *err)
{
    if (cg->layout == BH_CGROUP_V2 && cg->be->prepare(cg, limits, err) < 0)
        return bh_error_prefix(err, "update cgroup `%s`", cg->rel);
    if (cg->be->apply(cg, limits, err) < 0)
        return bh_error_prefix(err, "update cgroup `%s`", cg->rel);
    return 0;
}

int bh_cgroup_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err)
{
    return cg->be->freeze(cg, frozen, err);
}

int bh_cgroup_frozen(struct bh_cgroup *cg, bool *frozen, struct bh_error *err)
{
    *frozen = false;
    cleanup_free char *s = NULL;
    if (cg->layout == BH_CGROUP_V2) {
        if (cg_read(cg->h[cg->unified_h].dir, "cgroup.freeze", &s, err) < 0)
            return -1;
        *frozen = s[0] == '1';
        return 0;
    }
    const char *d = cg_ctl_dir(cg, CTL_FREEZER);
    if (d == NULL)
        return 0; /* no freezer: nothing can hold it frozen */
    if (cg_read(d, "freezer.state", &s, err) < 0)
        return -1;
    *frozen = strncmp(s, "THAWED", 6) != 0;
    return 0;
}

int bh_cgroup_pids(struct bh_cgroup *cg, pid_t **pids, size_t *n, struct bh_error *err)
{
    return cg_list_pids(cg_primary_dir(cg), pids, n, err);
}

int bh_cgroup_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    if (cg->be->kill(cg, err) < 0)
        return bh_error_prefix(err, "kill cgroup `%s`", cg->rel);
    return 0;
}

int bh_cgroup_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err)
{
    memset(st, 0, sizeof(*st));
    st->memory_limit = UINT64_MAX;
    st->swap_limit = UINT64_MAX;
    st->pids_limit = UINT64_MAX;
    if (cg->be->stats(cg, st, err) < 0)
        return bh_error_prefix(err, "stats of cgroup `%s`", cg->rel);
    return 0;
}

const char *bh_cgroup_dir(const struct bh_cgroup *cg, const char *controller)
{
    if (controller == NULL)
        return cg->unified_h >= 0 ? cg->h[cg->unified_h].dir : NULL;
    for (int c = 0; c < CTL_N; c++)
        if (strcmp(controller, cg_ctl_names[c]) == 0)
            return cg_ctl_dir(cg, (enum ctl)c);
    return NULL;
}

int bh_cgroup_hierarchy(const char *controller, char *out, size_t size, struct bh_error *err)
{
    struct bh_cgroup *cg = NULL;
    if (cg_new("bulkhead", &cg, err) < 0)
        return -1;
    const char *dir = bh_cgroup_dir(cg, controller);
    int rc = 0;
    if (dir == NULL)
        rc = bh_error_set(err, ENOENT, "no %s%s%s cgroup hierarchy under `%s` (%s layout)",
                          controller ? "`" : "", controller ? controller : "unified",
                          controller ? "`" : "", cg_root(), bh_cgroup_layout_name(cg->layout));
    else if (snprintf(out, size, "%.*s", (int)(strlen(dir) - strlen("/bulkhead")), dir) >=
             (int)size)
        rc = bh_error_set(err, ENAMETOOLONG, "cgroup hierarchy path `%s` is too long", dir);
    bh_cgroup_free(cg);
    return rc;
}

int bh_cgroup_each_hierarchy(void (*fn)(const char *dir, void *arg), void *arg,
                             struct bh_error *err)
{
    struct bh_cgroup *cg = NULL;
    if (cg_new("bulkhead", &cg, err) < 0)
        return -1;
    for (size_t i = 0; i < cg->nh; i++)
        fn(cg->h[i].mount, arg);
    bh_cgroup_free(cg);
    return 0;
}

/* Sub-cgroups a guest made (a v1 hierarchy mounted writable, runc's
 * `delete --force ... with subcgroups`): their processes killed, then the
 * directories removed deepest first, so the sandbox's own can go. */
static int remove_children(const struct bh_cgroup *cg, const char *dir, int depth,
                           struct bh_error *err)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    int rc = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        char sub[PATH_MAX];
        if (snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name) >= (int)sizeof(sub) ||
            depth > 32) {
            rc = bh_error_set(err, ENAMETOOLONG, "sub-cgroups below `%s` nest too deep", dir);
            continue;
        }
        if (remove_children(cg, sub, depth + 1, err) < 0)
            rc = -1;
        int64_t deadline = cg_now_ms() + WAIT_MS;
        long wait_us = 0;
        for (;;) {
            cleanup_free pid_t *pids = NULL;
            size_t n = 0;
            if (cg_list_pids(sub, &pids, &n, NULL) < 0 || n == 0 || cg_now_ms() > deadline)
                break;
            for (size_t i = 0; i < n; i++)
                kill(pids[i], SIGKILL);
            cg_backoff(&wait_us);
        }
        if (remove_dir(cg, sub, err) < 0)
            rc = -1;
    }
    closedir(d);
    return rc;
}

int bh_cgroup_destroy(struct bh_cgroup *cg, struct bh_error *err)
{
    if (cg == NULL)
        return 0;
    int rc = 0;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    if (cg_list_pids(cg_primary_dir(cg), &pids, &n, NULL) == 0 && n > 0)
        rc = bh_cgroup_kill(cg, err);
    for (size_t i = cg->nh; i-- > 0;)
        if (remove_children(cg, cg->h[i].dir, 0, rc == 0 ? err : NULL) < 0)
            rc = -1;
    for (size_t i = cg->nh; i-- > 0;)
        if (remove_dir(cg, cg->h[i].dir, rc == 0 ? err : NULL) < 0)
            rc = -1;
    /* bulkhead's own parent goes with its last sandbox (rmdir fails while
     * another sandbox is in it; create makes it again when needed). Others'
     * parents, such as docker's, are theirs. */
    if (rc == 0 && strncmp(cg->rel, "bulkhead/", 9) == 0 && strchr(cg->rel + 9, '/') == NULL) {
        for (size_t i = 0; i < cg->nh; i++) {
            char parent[PATH_MAX];
            cg_level_path(cg, &cg->h[i], 1, parent);
            rmdir(parent);
        }
    }
    bh_cgroup_free(cg);
    return rc;
}

void bh_cgroup_free(struct bh_cgroup *cg)
{
    if (cg == NULL)
        return;
    for (size_t i = 0; i < cg->nh; i++) {
        free(cg->h[i].mount);
        free(cg->h[i].dir);
    }
    free(cg->rel);
    free(cg);
}

const char *bh_cgroup_path(const struct bh_cgroup *cg)
{
    return cg->rel;
}

enum bh_cgroup_layout bh_cgroup_layout_of(const struct bh_cgroup *cg)
{
    return cg->layout;
}
