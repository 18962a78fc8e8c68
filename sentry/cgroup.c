/* Owns per-sandbox cgroups: layout detection, the hierarchies a sandbox lives
 * in, and one backend per layout (v2, v1, v1+v2 hybrid) behind a table of
 * functions, as crun does for its drivers.
 *
 * The root is /sys/fs/cgroup unless env BULKHEAD_CGROUP_ROOT names another.
 * Env BULKHEAD_CGROUP_LAYOUT=v1|v2|hybrid forces the layout (tests use it with
 * fake trees). A root that is not a cgroup filesystem is a fake tree: its
 * layout comes from markers (cgroup.controllers at the root: v2; a `unified`
 * directory: hybrid; else v1), its v1 controllers from directory names
 * (split on ',' so "cpu,cpuacct" is one combined hierarchy), and files are
 * created by the writes since no kernel populates new directories. */
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
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

#ifndef CGROUP_SUPER_MAGIC
#define CGROUP_SUPER_MAGIC 0x27e0eb
#endif
#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

#define DEFAULT_ROOT "/sys/fs/cgroup"
#define WAIT_MS 5000 /* bound on freeze, kill and rmdir waits */
#define STEP_MS 5

/* The first six are the ones limits, freezing and stats use; the rest are
 * joined like runc does, so per-container figures (blkio for docker stats)
 * and device rules have a cgroup of their own. */
enum ctl {
    CTL_MEMORY,
    CTL_PIDS,
    CTL_CPU,
    CTL_CPUACCT,
    CTL_CPUSET,
    CTL_FREEZER,
    CTL_BLKIO,
    CTL_DEVICES,
    CTL_HUGETLB,
    CTL_NET_CLS,
    CTL_NET_PRIO,
    CTL_PERF_EVENT,
    CTL_RDMA,
    CTL_MISC,
    CTL_N
};
static const char *const ctl_names[CTL_N] = {
    "memory",  "pids",    "cpu",     "cpuacct",  "cpuset",     "freezer", "blkio",
    "devices", "hugetlb", "net_cls", "net_prio", "perf_event", "rdma",    "misc"};

#define MAX_HIER 20

/* One hierarchy the sandbox has a directory in. */
struct hier {
    char *mount;   /* where the hierarchy is mounted */
    char *dir;     /* mount/rel: the sandbox's cgroup in it */
    unsigned ctls; /* v1 controllers bound here (1 << enum ctl) */
    bool unified;
};

struct backend;

struct bh_cgroup {
    const struct backend *be;
    enum bh_cgroup_layout layout;
    bool fake; /* a plain directory tree standing in for cgroupfs */
    char *rel;
    struct hier h[MAX_HIER];
    size_t nh;
    int ctl_h[CTL_N]; /* index into h, -1 when the controller is absent */
    int unified_h;
};

struct backend {
    const char *name;
    /* After the directories exist: controllers enabled, cpusets filled. */
    int (*prepare)(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);
    int (*apply)(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);
    int (*freeze)(struct bh_cgroup *cg, bool frozen, struct bh_error *err);
    int (*kill)(struct bh_cgroup *cg, struct bh_error *err);
    int (*stats)(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err);
};

/* ---- small helpers ------------------------------------------------------ */

static const char *cgroup_root(void)
{
    const char *r = getenv("BULKHEAD_CGROUP_ROOT");
    return r != NULL && r[0] == '/' ? r : DEFAULT_ROOT;
}

/* Waits between polls: from 100 us doubling to STEP_MS, since most waits
 * (a killed process leaving, a freeze settling) end within a millisecond. */
static void backoff(long *us)
{
    if (*us <= 0)
        *us = 100;
    struct timespec ts = {*us / 1000000, (*us % 1000000) * 1000L};
    nanosleep(&ts, NULL);
    if (*us < STEP_MS * 1000)
        *us *= 2;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long fs_magic(const char *path)
{
    struct statfs sfs;
    if (statfs(path, &sfs) < 0)
        return 0;
    return (long)sfs.f_type;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool file_exists(const char *dir, const char *name)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path))
        return false;
    return access(path, F_OK) == 0;
}

static int cg_write(const struct bh_cgroup *cg, const char *dir, const char *file,
                    const char *value, struct bh_error *err)
{
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", dir, file) >= (int)sizeof(path))
        return bh_error_set(err, ENAMETOOLONG, "cgroup path `%s/%s` is too long", dir, file);
    int flags = O_WRONLY | O_CLOEXEC;
    /* A fake tree keeps every subtree_control write, as the kernel keeps
     * every enabled controller. */
    if (cg->fake)
        flags |= O_CREAT | (strcmp(file, "cgroup.subtree_control") == 0 ? O_APPEND : O_TRUNC);
    cleanup_close int fd = open(path, flags, 0644);
    if (fd < 0)
        return bh_error_errno(err, errno, "open `%s` for writing", path);
    size_t len = strlen(value);
    ssize_t w = write(fd, value, len);
    if (w < 0 || (size_t)w != len)
        return bh_error_errno(err, w < 0 ? errno : EIO, "write `%s` to `%s`", value, path);
    return 0;
}

/* Reads a whole (small or cgroup.procs sized) file; *out is malloc'd. */
static int cg_read(const char *dir, const char *file, char **out, struct bh_error *err)
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

static int read_u64(const char *dir, const char *file, uint64_t *v, struct bh_error *err)
{
    cleanup_free char *s = NULL;
    if (cg_read(dir, file, &s, err) < 0)
        return -1;
    *v = parse_limit(s);
    return 0;
}

/* Value of "key N" in a flat keyed file (memory.events, cpu.stat, ...). */
static int read_key(const char *dir, const char *file, const char *key, uint64_t *v,
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
static int normalize_path(const char *in, char **out, struct bh_error *err)
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

/* ---- layout and hierarchies --------------------------------------------- */

static enum bh_cgroup_layout layout_from_markers(const char *root)
{
    char p[PATH_MAX];
    if (file_exists(root, "cgroup.controllers"))
        return BH_CGROUP_V2;
    snprintf(p, sizeof(p), "%s/unified", root);
    if (is_dir(p))
        return BH_CGROUP_HYBRID;
    return is_dir(root) ? BH_CGROUP_V1 : BH_CGROUP_UNKNOWN;
}

static bool root_is_fake(const char *root)
{
    long m = fs_magic(root);
    if (m == CGROUP2_SUPER_MAGIC)
        return false;
    /* v1 roots are a tmpfs holding cgroupfs mounts: real when the memory,
     * pids or unified child is one. */
    static const char *const probes[] = {"unified", "memory", "pids", "cpu", "freezer"};
    for (size_t i = 0; i < BH_ARRAY_SIZE(probes); i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", root, probes[i]);
        long cm = fs_magic(p);
        if (cm == CGROUP_SUPER_MAGIC || cm == CGROUP2_SUPER_MAGIC)
            return false;
    }
    return true;
}

enum bh_cgroup_layout bh_cgroup_detect(void)
{
    const char *forced = getenv("BULKHEAD_CGROUP_LAYOUT");
    if (forced != NULL && forced[0] != '\0') {
        if (strcmp(forced, "v1") == 0)
            return BH_CGROUP_V1;
        if (strcmp(forced, "v2") == 0)
            return BH_CGROUP_V2;
        if (strcmp(forced, "hybrid") == 0)
            return BH_CGROUP_HYBRID;
        return BH_CGROUP_UNKNOWN;
    }
    const char *root = cgroup_root();
    if (fs_magic(root) == CGROUP2_SUPER_MAGIC)
        return BH_CGROUP_V2;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/unified", root);
    if (fs_magic(p) == CGROUP2_SUPER_MAGIC)
        return BH_CGROUP_HYBRID;
    if (!root_is_fake(root))
        return BH_CGROUP_V1;
    return layout_from_markers(root);
}

const char *bh_cgroup_layout_name(enum bh_cgroup_layout layout)
{
    switch (layout) {
    case BH_CGROUP_V1:
        return "v1";
    case BH_CGROUP_V2:
        return "v2";
    case BH_CGROUP_HYBRID:
        return "hybrid";
    default:
        return "unknown";
    }
}

static unsigned ctls_from_list(const char *list)
{
    unsigned m = 0;
    cleanup_free char *copy = strdup(list);
    if (copy == NULL)
        return 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save))
        for (int c = 0; c < CTL_N; c++)
            if (strcmp(t, ctl_names[c]) == 0)
                m |= 1u << c;
    return m;
}

static int add_hier(struct bh_cgroup *cg, const char *mount, unsigned ctls, bool unified,
                    struct bh_error *err)
{
    for (size_t i = 0; i < cg->nh; i++)
        if (strcmp(cg->h[i].mount, mount) == 0) {
            cg->h[i].ctls |= ctls;
            return 0;
        }
    if (cg->nh == MAX_HIER)
        return bh_error_set(err, E2BIG, "too many cgroup hierarchies under `%s`", mount);
    struct hier *h = &cg->h[cg->nh];
    h->mount = strdup(mount);
    if (h->mount == NULL || asprintf(&h->dir, "%s/%s", mount, cg->rel) < 0) {
        free(h->mount);
        h->mount = NULL;
        h->dir = NULL;
        return bh_error_errno(err, ENOMEM, "cgroup hierarchy `%s`", mount);
    }
    h->ctls = ctls;
    h->unified = unified;
    cg->nh++;
    return 0;
}

/* v1 hierarchies from /proc/self/mountinfo: cgroup mounts below the root,
 * controllers from the super options, so combined mounts ("cpu,cpuacct")
 * and any directory name work. */
static int v1_from_mountinfo(struct bh_cgroup *cg, const char *root, struct bh_error *err)
{
    cleanup_fclose FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL)
        return bh_error_errno(err, errno, "open `/proc/self/mountinfo`");
    cleanup_free char *line = NULL;
    size_t cap = 0;
    size_t rl = strlen(root);
    while (getline(&line, &cap, f) > 0) {
        char *sep = strstr(line, " - ");
        if (sep == NULL)
            continue;
        char mnt[PATH_MAX], fstype[64], source[256], opts[1024];
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1)
            continue;
        if (sscanf(sep + 3, "%63s %255s %1023s", fstype, source, opts) != 3)
            continue;
        if (strcmp(fstype, "cgroup") != 0)
            continue;
        if (strncmp(mnt, root, rl) != 0 || mnt[rl] != '/')
            continue;
        /* Named hierarchies (name=systemd) hold no controller but track
         * processes; runc joins them too. */
        unsigned ctls = ctls_from_list(opts);
        if ((ctls != 0 || strstr(opts, "name=") != NULL) && add_hier(cg, mnt, ctls, false, err) < 0)
            return -1;
    }
    return 0;
}

static int v1_from_dirnames(struct bh_cgroup *cg, const char *root, struct bh_error *err)
{
    DIR *d = opendir(root);
    if (d == NULL)
        return bh_error_errno(err, errno, "open cgroup root `%s`", root);
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        unsigned ctls = ctls_from_list(de->d_name);
        if (ctls == 0)
            continue;
        char mnt[PATH_MAX];
        snprintf(mnt, sizeof(mnt), "%s/%s", root, de->d_name);
        rc = add_hier(cg, mnt, ctls, false, err);
    }
    closedir(d);
    return rc;
}

static const struct backend v1_backend, v2_backend, hybrid_backend;

static void index_hiers(struct bh_cgroup *cg)
{
    for (int c = 0; c < CTL_N; c++)
        cg->ctl_h[c] = -1;
    cg->unified_h = -1;
    for (size_t i = 0; i < cg->nh; i++) {
        if (cg->h[i].unified)
            cg->unified_h = (int)i;
        for (int c = 0; c < CTL_N; c++)
            if (cg->h[i].ctls & (1u << c))
                cg->ctl_h[c] = (int)i;
    }
    if (cg->layout == BH_CGROUP_V2)
        for (int c = 0; c < CTL_N; c++)
            cg->ctl_h[c] = cg->unified_h;
}

/* Builds cg (without touching the kernel) for rel under the current root. */
static int cgroup_new(const char *path, struct bh_cgroup **out, struct bh_error *err)
{
    struct bh_cgroup *cg = calloc(1, sizeof(*cg));
    if (cg == NULL)
        return bh_error_errno(err, ENOMEM, "cgroup");
    for (int c = 0; c < CTL_N; c++)
        cg->ctl_h[c] = -1;
    cg->unified_h = -1;
    if (normalize_path(path, &cg->rel, err) < 0)
        goto fail;
    const char *root = cgroup_root();
    cg->layout = bh_cgroup_detect();
    cg->fake = root_is_fake(root);
    switch (cg->layout) {
    case BH_CGROUP_V2:
        cg->be = &v2_backend;
        if (add_hier(cg, root, 0, true, err) < 0)
            goto fail;
        break;
    case BH_CGROUP_V1:
    case BH_CGROUP_HYBRID:
        cg->be = cg->layout == BH_CGROUP_V1 ? &v1_backend : &hybrid_backend;
        if ((cg->fake ? v1_from_dirnames(cg, root, err) : v1_from_mountinfo(cg, root, err)) < 0)
            goto fail;
        if (cg->layout == BH_CGROUP_HYBRID) {
            char u[PATH_MAX];
            snprintf(u, sizeof(u), "%s/unified", root);
            if (add_hier(cg, u, 0, true, err) < 0)
                goto fail;
        }
        break;
    default:
        bh_error_set(err, ENOTSUP,
                     "cgroup layout under `%s` not recognised (neither cgroup2 nor v1 "
                     "controllers); mount cgroups there or set BULKHEAD_CGROUP_ROOT",
                     root);
        goto fail;
    }
    index_hiers(cg);
    if (cg->nh == 0) {
        bh_error_set(err, ENOTSUP, "no cgroup hierarchy found under `%s`", root);
        goto fail;
    }
    *out = cg;
    return 0;
fail:
    bh_cgroup_free(cg);
    return -1;
}

static const char *ctl_dir(const struct bh_cgroup *cg, enum ctl c)
{
    return cg->ctl_h[c] < 0 ? NULL : cg->h[cg->ctl_h[c]].dir;
}

/* The hierarchy whose cgroup.procs lists the sandbox's processes. */
static const char *primary_dir(const struct bh_cgroup *cg)
{
    if (cg->layout == BH_CGROUP_V2)
        return cg->h[cg->unified_h].dir;
    static const enum ctl order[] = {CTL_PIDS, CTL_MEMORY, CTL_FREEZER, CTL_CPU};
    for (size_t i = 0; i < BH_ARRAY_SIZE(order); i++)
        if (ctl_dir(cg, order[i]) != NULL)
            return ctl_dir(cg, order[i]);
    return cg->h[0].dir;
}

static int need_ctl(const struct bh_cgroup *cg, enum ctl c, const char *what, struct bh_error *err)
{
    if (ctl_dir(cg, c) != NULL)
        return 0;
    return bh_error_set(err, ENOTSUP,
                        "%s limit refused: the `%s` cgroup controller is not mounted under "
                        "`%s`; mount it or run without the limit",
                        what, ctl_names[c], cgroup_root());
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
    int64_t deadline = now_ms() + 1000;
    long wait_us = 0;
    for (;;) {
        if (rmdir(dir) == 0 || errno == ENOENT)
            return 0;
        if (errno != EBUSY || now_ms() > deadline)
            return bh_error_errno(err, errno, "remove cgroup `%s`", dir);
        backoff(&wait_us);
    }
}

/* Levels of rel: "bulkhead/ID" has 2; level 0 is the hierarchy root. */
static size_t rel_levels(const struct bh_cgroup *cg)
{
    size_t n = 1;
    for (const char *p = cg->rel; *p != '\0'; p++)
        n += *p == '/';
    return n;
}

static void level_path(const struct bh_cgroup *cg, const struct hier *h, size_t k,
                       char out[PATH_MAX])
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

/* ---- v1 backend --------------------------------------------------------- */

/* A new v1 cpuset has empty cpus and mems (attaching then fails with
 * ENOSPC): fill each level from its parent, top down. */
static int v1_fill_cpuset(struct bh_cgroup *cg, struct bh_error *err)
{
    int hi = cg->ctl_h[CTL_CPUSET];
    if (hi < 0)
        return 0;
    const struct hier *h = &cg->h[hi];
    size_t levels = rel_levels(cg);
    for (size_t k = 1; k <= levels; k++) {
        char p[PATH_MAX], parent[PATH_MAX];
        level_path(cg, h, k, p);
        level_path(cg, h, k - 1, parent);
        static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
        for (size_t f = 0; f < BH_ARRAY_SIZE(files); f++) {
            cleanup_free char *mine = NULL;
            cleanup_free char *theirs = NULL;
            if (!cg->fake || file_exists(p, files[f])) {
                if (cg_read(p, files[f], &mine, err) < 0)
                    return -1;
                if (strspn(mine, " \n") != strlen(mine))
                    continue;
            }
            if (cg_read(parent, files[f], &theirs, err) < 0 ||
                cg_write(cg, p, files[f], theirs, err) < 0)
                return bh_error_prefix(err, "fill cpuset of `%s` from its parent", p);
        }
    }
    return 0;
}

static int v1_prepare(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    (void)l;
    return v1_fill_cpuset(cg, err);
}

static int write_i64(const struct bh_cgroup *cg, const char *dir, const char *file, int64_t v,
                     struct bh_error *err)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    return cg_write(cg, dir, file, buf, err);
}

/* memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every moment:
 * try one order, and the other when the kernel refuses. */
static int v1_write_memory(struct bh_cgroup *cg, const char *dir, int64_t mem, int64_t memsw,
                           bool has_memsw, struct bh_error *err)
{
    if (!has_memsw)
        return write_i64(cg, dir, "memory.limit_in_bytes", mem, err);
    if (write_i64(cg, dir, "memory.limit_in_bytes", mem, NULL) == 0)
        return write_i64(cg, dir, "memory.memsw.limit_in_bytes", memsw, err);
    if (write_i64(cg, dir, "memory.memsw.limit_in_bytes", memsw, err) < 0)
        return -1;
    return write_i64(cg, dir, "memory.limit_in_bytes", mem, err);
}

/* Resolves the swap request: memory+swap total, -1 unlimited. */
static int memsw_total(const struct bh_limits *l, int64_t *memsw, struct bh_error *err)
{
    if (l->memory_swap_bytes != 0 && l->memory_bytes == 0)
        return bh_error_set(err, EINVAL,
                            "a memory+swap limit needs a memory limit too (set --memory)");
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

static int v1_apply(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->memory_bytes != 0 || l->memory_swap_bytes != 0) {
        int64_t memsw;
        if (memsw_total(l, &memsw, err) < 0 || need_ctl(cg, CTL_MEMORY, "memory", err) < 0)
            return -1;
        const struct hier *h = &cg->h[cg->ctl_h[CTL_MEMORY]];
        bool has_memsw = file_exists(h->mount, "memory.memsw.limit_in_bytes");
        int64_t mem = l->memory_bytes > 0 ? l->memory_bytes : -1;
        if (!has_memsw && l->memory_swap_bytes > 0 && l->memory_swap_bytes != l->memory_bytes)
            return bh_error_set(err, ENOTSUP,
                                "memory+swap limit refused: swap accounting is off on this host "
                                "(no memory.memsw.limit_in_bytes); boot with swapaccount=1 or "
                                "drop the swap limit");
        if (v1_write_memory(cg, h->dir, mem, memsw, has_memsw, err) < 0)
            return bh_error_prefix(err, "memory limit");
    }
    if (l->pids != 0) {
        if (need_ctl(cg, CTL_PIDS, "pids", err) < 0)
            return -1;
        const char *d = ctl_dir(cg, CTL_PIDS);
        int rc = l->pids > 0 ? write_i64(cg, d, "pids.max", l->pids, err)
                             : cg_write(cg, d, "pids.max", "max", err);
        if (rc < 0)
            return bh_error_prefix(err, "pids limit");
    }
    if (l->cpu_shares != 0 || l->cpu_quota_us != 0 || l->cpu_period_us != 0) {
        if (need_ctl(cg, CTL_CPU, "cpu", err) < 0)
            return -1;
        const char *d = ctl_dir(cg, CTL_CPU);
        if (l->cpu_shares > 0 && write_i64(cg, d, "cpu.shares", l->cpu_shares, err) < 0)
            return bh_error_prefix(err, "cpu shares");
        int64_t quota = l->cpu_quota_us > 0 ? l->cpu_quota_us : -1;
        if (l->cpu_period_us > 0) {
            /* The kernel checks quota against period: when the period write
             * is refused, set the quota first. */
            if (write_i64(cg, d, "cpu.cfs_period_us", l->cpu_period_us, NULL) < 0) {
                if (l->cpu_quota_us == 0 || write_i64(cg, d, "cpu.cfs_quota_us", quota, err) < 0 ||
                    write_i64(cg, d, "cpu.cfs_period_us", l->cpu_period_us, err) < 0)
                    return bh_error_prefix(err, "cpu period");
            }
        }
        if (l->cpu_quota_us != 0 && write_i64(cg, d, "cpu.cfs_quota_us", quota, err) < 0)
            return bh_error_prefix(err, "cpu quota");
    }
    return 0;
}

static int v1_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err)
{
    const char *d = ctl_dir(cg, CTL_FREEZER);
    if (d == NULL)
        return bh_error_set(err, ENOTSUP,
                            "freeze refused: the `freezer` cgroup controller is not mounted under "
                            "`%s`",
                            cgroup_root());
    const char *want = frozen ? "FROZEN" : "THAWED";
    int64_t deadline = now_ms() + WAIT_MS;
    long wait_us = 0;
    /* FREEZING can stall while a task is in an uninterruptible sleep: write
     * again until the state reads back. */
    for (;;) {
        if (cg_write(cg, d, "freezer.state", want, err) < 0)
            return -1;
        cleanup_free char *s = NULL;
        if (cg_read(d, "freezer.state", &s, err) < 0)
            return -1;
        if (strncmp(s, want, strlen(want)) == 0)
            return 0;
        if (now_ms() > deadline) {
            if (frozen)
                cg_write(cg, d, "freezer.state", "THAWED", NULL);
            return bh_error_set(err, ETIMEDOUT, "cgroup `%s` did not reach %s within %d ms", d,
                                want, WAIT_MS);
        }
        backoff(&wait_us);
    }
}

static int list_pids(const char *dir, pid_t **pids, size_t *n, struct bh_error *err)
{
    cleanup_free char *s = NULL;
    if (cg_read(dir, "cgroup.procs", &s, err) < 0)
        return -1;
    return parse_pids(s, pids, n, err);
}

/* Empty in every hierarchy that lists processes. */
static int wait_empty(struct bh_cgroup *cg, int64_t deadline, bool resend, struct bh_error *err)
{
    long wait_us = 0;
    for (;;) {
        size_t total = 0;
        for (size_t i = 0; i < cg->nh; i++) {
            cleanup_free pid_t *pids = NULL;
            size_t n = 0;
            if (list_pids(cg->h[i].dir, &pids, &n, err) < 0)
                return -1;
            if (resend)
                for (size_t j = 0; j < n; j++)
                    kill(pids[j], SIGKILL);
            total += n;
        }
        if (total == 0)
            return 0;
        if (now_ms() > deadline)
            return bh_error_set(err, ETIMEDOUT,
                                "cgroup `%s` still has %zu processes %d ms after SIGKILL "
                                "(stuck in the kernel, or zombies nobody reaps)",
                                cg->rel, total, WAIT_MS);
        backoff(&wait_us);
    }
}

/* Freeze so nothing forks between listing and killing, SIGKILL each
 * process, thaw so the signals are delivered, then wait for empty. */
static int v1_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    int64_t deadline = now_ms() + WAIT_MS;
    bool frozen = ctl_dir(cg, CTL_FREEZER) != NULL && v1_freeze(cg, true, NULL) == 0;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    int rc = list_pids(primary_dir(cg), &pids, &n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        kill(pids[i], SIGKILL);
    if (frozen && v1_freeze(cg, false, err) < 0)
        return -1;
    if (rc < 0)
        return -1;
    return wait_empty(cg, deadline, true, err);
}

/* Hybrid: the controller-less v2 hierarchy still has cgroup.kill, which
 * kills atomically; the v1 path covers kernels before 5.14. */
static int hybrid_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    if (cg->unified_h >= 0 && !cg->fake && file_exists(cg->h[cg->unified_h].dir, "cgroup.kill") &&
        cg_write(cg, cg->h[cg->unified_h].dir, "cgroup.kill", "1", NULL) == 0)
        return wait_empty(cg, now_ms() + WAIT_MS, true, err);
    return v1_kill(cg, err);
}

static int v1_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err)
{
    const char *d;
    if ((d = ctl_dir(cg, CTL_MEMORY)) != NULL) {
        if (read_u64(d, "memory.usage_in_bytes", &st->memory_usage, err) < 0 ||
            read_u64(d, "memory.limit_in_bytes", &st->memory_limit, err) < 0 ||
            read_u64(d, "memory.max_usage_in_bytes", &st->memory_max_usage, err) < 0)
            return -1;
        read_key(d, "memory.oom_control", "oom_kill", &st->oom_kills, NULL);
    }
    if ((d = ctl_dir(cg, CTL_PIDS)) != NULL &&
        (read_u64(d, "pids.current", &st->pids_current, err) < 0 ||
         read_u64(d, "pids.max", &st->pids_limit, err) < 0))
        return -1;
    if ((d = ctl_dir(cg, CTL_CPUACCT)) != NULL &&
        read_u64(d, "cpuacct.usage", &st->cpu_usage_ns, err) < 0)
        return -1;
    return 0;
}

/* ---- v2 backend --------------------------------------------------------- */

/* Enables memory, pids and cpu from the root down to the leaf's parent. A
 * level offers what its parent enabled, so the set can only shrink. */
/* Controllers named in a space- (kernel) or '+'-separated (fake tree) list. */
static unsigned ctls_in(char *list)
{
    unsigned m = 0;
    for (char *save = NULL, *t = strtok_r(list, " \n+", &save); t != NULL;
         t = strtok_r(NULL, " \n+", &save))
        m |= ctls_from_list(t);
    return m;
}

/* Enables memory, pids and cpu from the root down to the leaf's parent. A
 * level offers what its parent has enabled; a write that is refused (say, a
 * delegated root we may not change) is fine when the controller is already
 * on, and an error only when a requested limit needs it. */
static int v2_prepare(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    const struct hier *h = &cg->h[cg->unified_h];
    bool required[CTL_N] = {0};
    required[CTL_MEMORY] = l->memory_bytes != 0 || l->memory_swap_bytes != 0;
    required[CTL_PIDS] = l->pids != 0;
    required[CTL_CPU] = l->cpu_quota_us != 0 || l->cpu_period_us != 0 || l->cpu_shares != 0;
    static const enum ctl wanted[] = {CTL_MEMORY, CTL_PIDS, CTL_CPU};

    cleanup_free char *avail_s = NULL;
    if (cg_read(h->mount, "cgroup.controllers", &avail_s, err) < 0)
        return -1;
    unsigned avail = ctls_in(avail_s);

    size_t levels = rel_levels(cg);
    for (size_t k = 0; k < levels; k++) {
        char p[PATH_MAX];
        level_path(cg, h, k, p);
        struct bh_error werr[CTL_N];
        for (size_t i = 0; i < BH_ARRAY_SIZE(wanted); i++) {
            enum ctl c = wanted[i];
            char op[32];
            snprintf(op, sizeof(op), "+%s", ctl_names[c]);
            bh_error_clear(&werr[c]);
            if (avail & (1u << c))
                cg_write(cg, p, "cgroup.subtree_control", op, &werr[c]);
        }
        cleanup_free char *on_s = NULL;
        unsigned on = cg_read(p, "cgroup.subtree_control", &on_s, NULL) == 0 ? ctls_in(on_s) : 0;
        for (size_t i = 0; i < BH_ARRAY_SIZE(wanted); i++) {
            enum ctl c = wanted[i];
            if (!required[c] || (on & (1u << c)))
                continue;
            if (avail & (1u << c)) {
                if (err != NULL)
                    *err = werr[c];
                return bh_error_prefix(err, "enable the `%s` controller for the limit",
                                       ctl_names[c]);
            }
            return bh_error_set(err, ENOTSUP,
                                "%s limit refused: the `%s` controller is not available at `%s` "
                                "(see its cgroup.controllers); enable it in the parents' "
                                "cgroup.subtree_control or run without the limit",
                                ctl_names[c], ctl_names[c], p);
        }
        avail = on;
    }
    return 0;
}

static int v2_apply(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (l->memory_bytes != 0 || l->memory_swap_bytes != 0) {
        int64_t memsw;
        if (memsw_total(l, &memsw, err) < 0)
            return -1;
        int rc = l->memory_bytes > 0 ? write_i64(cg, d, "memory.max", l->memory_bytes, err)
                                     : cg_write(cg, d, "memory.max", "max", err);
        if (rc < 0)
            return bh_error_prefix(err, "memory limit");
        /* v2 counts swap alone. Without the file the kernel has no swap
         * accounting, and only an explicit swap limit is refused. */
        if (file_exists(d, "memory.swap.max") || cg->fake) {
            rc = memsw < 0 ? cg_write(cg, d, "memory.swap.max", "max", err)
                           : write_i64(cg, d, "memory.swap.max", memsw - l->memory_bytes, err);
            if (rc < 0)
                return bh_error_prefix(err, "swap limit");
        } else if (l->memory_swap_bytes > 0 && l->memory_swap_bytes != l->memory_bytes) {
            return bh_error_set(err, ENOTSUP,
                                "memory+swap limit refused: no memory.swap.max in `%s` (swap "
                                "accounting is off); drop the swap limit",
                                d);
        }
    }
    if (l->pids != 0) {
        int rc = l->pids > 0 ? write_i64(cg, d, "pids.max", l->pids, err)
                             : cg_write(cg, d, "pids.max", "max", err);
        if (rc < 0)
            return bh_error_prefix(err, "pids limit");
    }
    if (l->cpu_shares > 0) {
        int64_t s = l->cpu_shares < 2 ? 2 : l->cpu_shares > 262144 ? 262144 : l->cpu_shares;
        /* The conversion runc and crun use: shares 2..262144 onto 1..10000. */
        if (write_i64(cg, d, "cpu.weight", 1 + ((s - 2) * 9999) / 262142, err) < 0)
            return bh_error_prefix(err, "cpu shares as cpu.weight");
    }
    if (l->cpu_quota_us != 0 || l->cpu_period_us != 0) {
        char quota[32] = "max";
        int64_t period = 100000;
        /* Keep what the request leaves out (an update may set only one). */
        cleanup_free char *cur = NULL;
        if (cg_read(d, "cpu.max", &cur, NULL) == 0) {
            char q[32];
            long long p;
            if (sscanf(cur, "%31s %lld", q, &p) == 2) {
                snprintf(quota, sizeof(quota), "%s", q);
                period = p;
            }
        }
        if (l->cpu_quota_us > 0)
            snprintf(quota, sizeof(quota), "%" PRId64, l->cpu_quota_us);
        else if (l->cpu_quota_us < 0)
            snprintf(quota, sizeof(quota), "max");
        if (l->cpu_period_us > 0)
            period = l->cpu_period_us;
        char v[80];
        snprintf(v, sizeof(v), "%s %" PRId64, quota, period);
        if (cg_write(cg, d, "cpu.max", v, err) < 0)
            return bh_error_prefix(err, "cpu quota");
    }
    return 0;
}

static int v2_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (cg_write(cg, d, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
        return -1;
    if (cg->fake)
        return 0;
    int64_t deadline = now_ms() + WAIT_MS;
    long wait_us = 0;
    for (;;) {
        uint64_t v = 0;
        if (read_key(d, "cgroup.events", "frozen", &v, err) < 0)
            return -1;
        if ((v != 0) == frozen)
            return 0;
        if (now_ms() > deadline) {
            if (frozen)
                cg_write(cg, d, "cgroup.freeze", "0", NULL);
            return bh_error_set(err, ETIMEDOUT, "cgroup `%s` did not %s within %d ms", d,
                                frozen ? "freeze" : "thaw", WAIT_MS);
        }
        backoff(&wait_us);
    }
}

static int v2_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (!cg->fake && file_exists(d, "cgroup.kill")) {
        if (cg_write(cg, d, "cgroup.kill", "1", err) < 0)
            return -1;
        return wait_empty(cg, now_ms() + WAIT_MS, false, err);
    }
    /* Before 5.14: freeze, kill each, thaw. */
    int64_t deadline = now_ms() + WAIT_MS;
    bool frozen = v2_freeze(cg, true, NULL) == 0;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    int rc = list_pids(d, &pids, &n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        kill(pids[i], SIGKILL);
    if (frozen && v2_freeze(cg, false, err) < 0)
        return -1;
    if (rc < 0)
        return -1;
    return wait_empty(cg, deadline, true, err);
}

static int v2_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (file_exists(d, "memory.current")) {
        if (read_u64(d, "memory.current", &st->memory_usage, err) < 0 ||
            read_u64(d, "memory.max", &st->memory_limit, err) < 0)
            return -1;
        read_u64(d, "memory.peak", &st->memory_max_usage, NULL);
        read_key(d, "memory.events", "oom_kill", &st->oom_kills, NULL);
    }
    if (file_exists(d, "pids.current") &&
        (read_u64(d, "pids.current", &st->pids_current, err) < 0 ||
         read_u64(d, "pids.max", &st->pids_limit, err) < 0))
        return -1;
    uint64_t usec = 0;
    if (read_key(d, "cpu.stat", "usage_usec", &usec, NULL) == 0)
        st->cpu_usage_ns = usec * 1000;
    return 0;
}

static const struct backend v1_backend = {
    .name = "v1",
    .prepare = v1_prepare,
    .apply = v1_apply,
    .freeze = v1_freeze,
    .kill = v1_kill,
    .stats = v1_stats,
};

static const struct backend hybrid_backend = {
    .name = "hybrid",
    .prepare = v1_prepare,
    .apply = v1_apply,
    .freeze = v1_freeze,
    .kill = hybrid_kill,
    .stats = v1_stats,
};

static const struct backend v2_backend = {
    .name = "v2",
    .prepare = v2_prepare,
    .apply = v2_apply,
    .freeze = v2_freeze,
    .kill = v2_kill,
    .stats = v2_stats,
};

/* ---- public API --------------------------------------------------------- */

int bh_cgroup_create(const char *path, const struct bh_limits *limits, struct bh_cgroup **out,
                     struct bh_error *err)
{
    static const struct bh_limits none;
    if (limits == NULL)
        limits = &none;
    struct bh_cgroup *cg = NULL;
    if (cgroup_new(path, &cg, err) < 0)
        return -1;
    /* Refuse a limit the layout cannot enforce before creating anything. */
    if (cg->layout != BH_CGROUP_V2) {
        if (((limits->memory_bytes != 0 || limits->memory_swap_bytes != 0) &&
             need_ctl(cg, CTL_MEMORY, "memory", err) < 0) ||
            (limits->pids != 0 && need_ctl(cg, CTL_PIDS, "pids", err) < 0) ||
            ((limits->cpu_quota_us != 0 || limits->cpu_period_us != 0 || limits->cpu_shares != 0) &&
             need_ctl(cg, CTL_CPU, "cpu", err) < 0)) {
            bh_cgroup_free(cg);
            return -1;
        }
    }
    size_t made = 0;
    if (make_dirs(cg, &made, err) < 0 || cg->be->prepare(cg, limits, err) < 0 ||
        cg->be->apply(cg, limits, err) < 0) {
        bh_error_prefix(err, "cgroup `%s` (%s)", cg->rel, cg->be->name);
        /* Only the leaves: a shared parent may be in use by a concurrent create. */
        for (size_t i = made; i-- > 0;)
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
    if (cgroup_new(path, &cg, err) < 0)
        return -1;
    if (!is_dir(primary_dir(cg))) {
        bh_error_set(err, ENOENT, "cgroup `%s` does not exist (no `%s`)", cg->rel, primary_dir(cg));
        bh_cgroup_free(cg);
        return -1;
    }
    /* Keep only the hierarchies it exists in (one made by another tool, or
     * before a controller was mounted), so kill and destroy still work. */
    size_t kept = 0;
    for (size_t i = 0; i < cg->nh; i++) {
        if (is_dir(cg->h[i].dir)) {
            cg->h[kept++] = cg->h[i];
        } else {
            free(cg->h[i].mount);
            free(cg->h[i].dir);
        }
    }
    cg->nh = kept;
    index_hiers(cg);
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

int bh_cgroup_pids(struct bh_cgroup *cg, pid_t **pids, size_t *n, struct bh_error *err)
{
    return list_pids(primary_dir(cg), pids, n, err);
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
        if (strcmp(controller, ctl_names[c]) == 0)
            return ctl_dir(cg, (enum ctl)c);
    return NULL;
}

int bh_cgroup_hierarchy(const char *controller, char *out, size_t size, struct bh_error *err)
{
    struct bh_cgroup *cg = NULL;
    if (cgroup_new("bulkhead", &cg, err) < 0)
        return -1;
    const char *dir = bh_cgroup_dir(cg, controller);
    int rc = 0;
    if (dir == NULL)
        rc = bh_error_set(err, ENOENT, "no %s%s%s cgroup hierarchy under `%s` (%s layout)",
                          controller ? "`" : "", controller ? controller : "unified",
                          controller ? "`" : "", cgroup_root(), bh_cgroup_layout_name(cg->layout));
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
    if (cgroup_new("bulkhead", &cg, err) < 0)
        return -1;
    for (size_t i = 0; i < cg->nh; i++)
        fn(cg->h[i].mount, arg);
    bh_cgroup_free(cg);
    return 0;
}

int bh_cgroup_destroy(struct bh_cgroup *cg, struct bh_error *err)
{
    if (cg == NULL)
        return 0;
    int rc = 0;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    if (list_pids(primary_dir(cg), &pids, &n, NULL) == 0 && n > 0)
        rc = bh_cgroup_kill(cg, err);
    for (size_t i = cg->nh; i-- > 0;)
        if (remove_dir(cg, cg->h[i].dir, rc == 0 ? err : NULL) < 0)
            rc = -1;
    /* bulkhead's own parent goes with its last sandbox (rmdir fails while
     * another sandbox is in it; create makes it again when needed). Others'
     * parents, such as docker's, are theirs. */
    if (rc == 0 && strncmp(cg->rel, "bulkhead/", 9) == 0 && strchr(cg->rel + 9, '/') == NULL) {
        for (size_t i = 0; i < cg->nh; i++) {
            char parent[PATH_MAX];
            level_path(cg, &cg->h[i], 1, parent);
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
