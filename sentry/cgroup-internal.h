/* Shared by the cgroup backends (cgroup-v1.c, cgroup-v2.c, cgroup-hybrid.c),
 * layout detection (cgroup-layout.c) and the public API (cgroup.c): the
 * description of a sandbox's cgroup and the small file helpers. Only those
 * files include it. */
#ifndef BH_CGROUP_INTERNAL_H
#define BH_CGROUP_INTERNAL_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "cgroup.h"

#define WAIT_MS 5000 /* bound on freeze, kill and rmdir waits */
#define STEP_MS 5
/* A freeze still incomplete after this long is thawed and tried again: a
 * guest waiting (killable, so not freezable) for the sentry's answer to a
 * brokered call stays unfrozen for as long as the broker thread that was
 * answering it is frozen, and only a thaw lets the answer out. */
#define REFREEZE_MS 20

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
extern const char *const cg_ctl_names[CTL_N];

#define MAX_HIER 20

/* One hierarchy the sandbox has a directory in. */
struct hier {
    char *mount;   /* where the hierarchy is mounted */
    char *dir;     /* mount/rel: the sandbox's cgroup in it */
    unsigned ctls; /* v1 controllers bound here (1 << enum ctl) */
    bool unified;
    bool existed; /* joined, not made by create: never removed on its failure */
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
    /* Device rules at create; NULL where the layout cannot apply them. */
    int (*devices)(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);
};

/* The backends (one file each). */
extern const struct backend cg_v1_backend, cg_v2_backend, cg_hybrid_backend;

/* The root (BULKHEAD_CGROUP_ROOT or /sys/fs/cgroup). */
const char *cg_root(void);
void cg_backoff(long *us);
int64_t cg_now_ms(void);
bool cg_is_dir(const char *path);
bool cg_file_exists(const char *dir, const char *name);
int cg_write(const struct bh_cgroup *cg, const char *dir, const char *file, const char *value,
             struct bh_error *err);
int cg_write_i64(const struct bh_cgroup *cg, const char *dir, const char *file, int64_t v,
                 struct bh_error *err);
int cg_read(const char *dir, const char *file, char **out, struct bh_error *err);
int cg_read_u64(const char *dir, const char *file, uint64_t *v, struct bh_error *err);
int cg_read_key(const char *dir, const char *file, const char *key, uint64_t *v,
                struct bh_error *err);
int cg_list_pids(const char *dir, pid_t **pids, size_t *n, struct bh_error *err);
int cg_wait_empty(struct bh_cgroup *cg, int64_t deadline, bool resend, struct bh_error *err);
int cg_normalize_path(const char *in, char **out, struct bh_error *err);
int cg_memsw_total(const struct bh_limits *l, int64_t *memsw, struct bh_error *err);
/* Whether any block I/O weight or throttle is asked for. */
bool cg_wants_blkio(const struct bh_limits *l);

/* Layout (cgroup-layout.c). */
unsigned cg_ctls_from_list(const char *list);
void cg_index_hiers(struct bh_cgroup *cg);
int cg_new(const char *path, struct bh_cgroup **out, struct bh_error *err);

/* Directories of a sandbox's cgroup. */
const char *cg_ctl_dir(const struct bh_cgroup *cg, enum ctl c);
const char *cg_primary_dir(const struct bh_cgroup *cg);
int cg_need_ctl(const struct bh_cgroup *cg, enum ctl c, const char *what, struct bh_error *err);
size_t cg_rel_levels(const struct bh_cgroup *cg);
void cg_level_path(const struct bh_cgroup *cg, const struct hier *h, size_t k, char out[PATH_MAX]);

/* The v1 operations the hybrid backend shares. */
int cg_v1_prepare(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);
int cg_v1_apply(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);
int cg_v1_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err);
int cg_v1_kill(struct bh_cgroup *cg, struct bh_error *err);
int cg_v1_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err);
int cg_v1_devices(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);
/* cgroup-devices.c: the rules as a BPF program on the unified directory. */
int cg_v2_devices(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err);

#endif
