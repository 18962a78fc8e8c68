/* Per-sandbox cgroups on v2, v1 and the v1+v2 hybrid layout (one backend per
 * layout behind a table of functions). Host side: called by the front end
 * (as host root) before the sandbox's first process runs. */
#ifndef BH_CGROUP_H
#define BH_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

enum bh_cgroup_layout {
    BH_CGROUP_UNKNOWN = 0,
    BH_CGROUP_V1,     /* only v1 hierarchies (a named systemd one may exist) */
    BH_CGROUP_V2,     /* unified hierarchy at the root */
    BH_CGROUP_HYBRID, /* v1 controllers plus a v2 hierarchy without controllers */
};

struct bh_cgroup;

/* Layout of the cgroup root (default /sys/fs/cgroup; env BULKHEAD_CGROUP_ROOT
 * overrides it, which tests use with a fake tree). Env BULKHEAD_CGROUP_LAYOUT
 * = v1 | v2 | hybrid forces the layout. A root that is no cgroup filesystem
 * is a fake tree: cgroup.controllers at its root means v2, a `unified`
 * directory hybrid, else v1 with controllers named by directory names
 * ("cpu,cpuacct" is one combined hierarchy); on a real host the v1
 * controllers come from /proc/self/mountinfo.
 *
 * Limits (struct bh_limits): 0 leaves a value alone, > 0 sets it, < 0 lifts
 * it ("max"/-1, for update). Swap 0 means memory+swap = memory, so --memory
 * really limits. */
enum bh_cgroup_layout bh_cgroup_detect(void);
const char *bh_cgroup_layout_name(enum bh_cgroup_layout layout);

/* Creates path (relative, e.g. "bulkhead/ID" or OCI "/docker/ID") in every
 * hierarchy the layout needs and writes the limits. Fails closed: a limit that
 * is set but cannot be applied is an error, and what was made is removed.
 * A path outside bulkhead's own "bulkhead/" that exists already is joined,
 * as runc joins an existing cgroupsPath; under "bulkhead/" it is a clash. */
int bh_cgroup_create(const char *path, const struct bh_limits *limits, struct bh_cgroup **out,
                     struct bh_error *err);
/* A device rule as a v1 devices.allow/devices.deny line ("c 1:3 rwm", "a");
 * -1 when the rule is malformed (a type or access the kernel does not take). */
int bh_cgroup_device_line(const struct bh_device_rule *r, char *out, size_t size);
/* The v2 form of the rules (cgroup-devices.c): a BPF_PROG_TYPE_CGROUP_DEVICE
 * program, the last matching rule deciding, default deny. _program writes
 * it into out (room for _program_max(n) instructions) and returns its
 * length, or -1 for a malformed rule; _load returns the loaded program's
 * fd; _attach attaches it to the cgroup v2 directory dir (the program then
 * lives as long as the cgroup). */
struct bpf_insn;
size_t bh_cgroup_device_program_max(size_t n_rules);
ssize_t bh_cgroup_device_program(const struct bh_device_rule *rules, size_t n, struct bpf_insn *out,
                                 size_t max);
int bh_cgroup_device_program_load(const struct bh_device_rule *rules, size_t n,
                                  struct bh_error *err);
int bh_cgroup_device_attach(const char *dir, const struct bh_device_rule *rules, size_t n,
                            struct bh_error *err);

/* Opens an existing sandbox cgroup (OCI: later commands of the same container). */
int bh_cgroup_open(const char *path, struct bh_cgroup **out, struct bh_error *err);
int bh_cgroup_attach(struct bh_cgroup *cg, pid_t pid, struct bh_error *err);
int bh_cgroup_update(struct bh_cgroup *cg, const struct bh_limits *limits, struct bh_error *err);
int bh_cgroup_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err);
/* Whether the cgroup is frozen (or freezing), as the kernel reports it. */
int bh_cgroup_frozen(struct bh_cgroup *cg, bool *frozen, struct bh_error *err);
/* Host pids of every process in the cgroup; *pids is malloc'd. */
int bh_cgroup_pids(struct bh_cgroup *cg, pid_t **pids, size_t *n, struct bh_error *err);
/* SIGKILLs every process and waits (bounded) until the cgroup is empty. */
int bh_cgroup_kill(struct bh_cgroup *cg, struct bh_error *err);

/* One line of a block I/O statistic, as runc reports it ("Read", "Write"). */
struct bh_cgroup_blkio_entry {
    uint32_t major, minor;
    char op[8];
    uint64_t value;
};
#define BH_CGROUP_BLKIO_MAX 32

struct bh_cgroup_stats {
    uint64_t memory_usage;
    uint64_t memory_limit; /* UINT64_MAX: none */
    uint64_t memory_max_usage;
    uint64_t memory_failcnt; /* times the limit was hit (v2: memory.events max) */
    uint64_t memory_cache;   /* page cache (v1 memory.stat cache, v2 file) */
    uint64_t swap_usage;     /* v1: memory+swap; v2: swap alone, as runc reports them */
    uint64_t swap_limit;     /* UINT64_MAX: none */
    uint64_t pids_current;
    uint64_t pids_limit; /* UINT64_MAX: none */
    uint64_t cpu_usage_ns;
    uint64_t cpu_user_ns, cpu_kernel_ns;
    uint64_t cpu_periods, cpu_throttled_periods, cpu_throttled_ns;
    uint64_t oom_kills;
    /* Bytes and operations per device and direction (io_service_bytes and
     * io_serviced of v1's blkio, rbytes/wbytes and rios/wios of v2's io.stat). */
    size_t n_io_bytes, n_io_ops;
    struct bh_cgroup_blkio_entry io_bytes[BH_CGROUP_BLKIO_MAX];
    struct bh_cgroup_blkio_entry io_ops[BH_CGROUP_BLKIO_MAX];
};
int bh_cgroup_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err);

/* Where bulkhead's cgroups live: the directory of the hierarchy that holds a
 * controller ("memory", "pids", ...), or of the unified hierarchy for NULL.
 * On v1 and hybrid that is each controller's own mount (/sys/fs/cgroup/pids);
 * on v2 every controller answers the one root. A sandbox at path P is at
 * <answer>/P. The one place front ends, the probe and tests learn the
 * layout from; ENOENT when the layout has no such hierarchy. */
int bh_cgroup_hierarchy(const char *controller, char *out, size_t size, struct bh_error *err);
/* Calls fn with the directory of every hierarchy a sandbox gets a cgroup in
 * (named v1 ones such as name=systemd included), e.g. for leak checks. */
int bh_cgroup_each_hierarchy(void (*fn)(const char *dir, void *arg), void *arg,
                             struct bh_error *err);

/* Path of the cgroup for a controller ("memory", "pids", "cpu", "cpuacct",
 * "cpuset", "freezer") or NULL for the v2 one; used by checks that read
 * limits back. On v2 every controller names the unified directory; NULL is
 * returned for a controller (or v2 directory) the layout does not have. */
const char *bh_cgroup_dir(const struct bh_cgroup *cg, const char *controller);
/* The normalised path relative to each hierarchy root ("docker/ID"). */
const char *bh_cgroup_path(const struct bh_cgroup *cg);
enum bh_cgroup_layout bh_cgroup_layout_of(const struct bh_cgroup *cg);

/* Kills what remains, removes every directory made by create, frees cg.
 * Shared parents ("bulkhead", "docker") stay: another sandbox may be
 * creating in them. Frees cg even when it fails. */
int bh_cgroup_destroy(struct bh_cgroup *cg, struct bh_error *err);
/* Frees without touching the kernel state (the cgroup lives on). */
void bh_cgroup_free(struct bh_cgroup *cg);

#endif
