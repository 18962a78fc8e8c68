/* The sandbox description: what a front end fills in and every step of the
 * core reads (tier, namespaces, mounts, ids, process, limits), and how it is
 * to be created. The bottom of the core's include graph: it needs nothing of
 * the core but error.h, so the step files (userns, idmap, caps, mounts,
 * cgroup, spec serialisation) take their types from here, not from
 * sandbox.h. bh_sandbox_spec_init/free live in sandbox-spec.c. */
#ifndef BH_SANDBOX_SPEC_H
#define BH_SANDBOX_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

enum bh_tier {
    BH_TIER_NONE = 0,
    BH_TIER_PROCESS,
    BH_TIER_CONTAINER,
    BH_TIER_KERNEL,
    BH_TIER_VM,
};

const char *bh_tier_name(enum bh_tier tier);
/* Returns -1 (and fills err) for an unknown name. */
int bh_tier_parse(const char *name, enum bh_tier *tier, struct bh_error *err);

/* Namespaces in the order the kernel needs them joined or made. */
enum bh_ns {
    BH_NS_USER = 0,
    BH_NS_PID,
    BH_NS_MOUNT,
    BH_NS_NET,
    BH_NS_IPC,
    BH_NS_UTS,
    BH_NS_CGROUP,
    BH_NS_TIME,
    BH_NS_COUNT,
};

struct bh_mount {
    char *source;        /* host path for binds; fs source otherwise */
    char *destination;   /* absolute path inside the sandbox */
    char *type;          /* "bind", "tmpfs", "proc", "sysfs", "devpts", "mqueue", "cgroup", ... */
    unsigned long flags; /* MS_* flags, MS_BIND|MS_REC for rbind */
    unsigned long propagation; /* MS_PRIVATE, MS_SLAVE, MS_SHARED or 0 */
    char *data;                /* fs options ("size=64m,mode=1777") or NULL */
    /* An rbind's flags apply to its top mount only (as runc does); these
     * (OCI "rro", "rnosuid", ...: set, or cleared by "rrw", "rsuid", ...)
     * apply to it and every mount below. Honoured on prepared trees. */
    unsigned long rec_set, rec_clear;
    /* A detached mount prepared by the host side (open_tree(OPEN_TREE_CLONE),
     * e.g. idmapped with mount_setattr(MOUNT_ATTR_IDMAP)), moved into place
     * as is instead of binding source; not closed by bh_mounts_setup. */
    bool has_tree_fd;
    int tree_fd;
    /* With tree_fd and the sandbox's own id range: bh_sandbox_create idmaps
     * the tree with the sandbox's user namespace (MOUNT_ATTR_IDMAP) before
     * the sentry gets it, so host ids 0..N of its files appear as the
     * sandbox's ids 0..N (host root's files as the sandbox's root, as under
     * runc) and what the sandbox writes lands with those host ids. A
     * filesystem that cannot be idmapped keeps the plain tree (a warning
     * through bh_create_opts.warn). */
    bool idmap;
};

struct bh_idmap {
    uint32_t inside;
    uint32_t outside;
    uint32_t count;
};

struct bh_rlimit {
    int resource; /* RLIMIT_* */
    uint64_t soft;
    uint64_t hard;
};

/* One device cgroup rule (OCI linux.resources.devices), applied in order:
 * type 'a' (every device), 'c' or 'b'; major/minor -1 for any; access a
 * subset of "rwm". */
struct bh_device_rule {
    bool allow;
    char type;
    int32_t major, minor;
    char access[4];
};
#define BH_MAX_DEVICE_RULES 64

/* Block I/O per device (OCI linux.resources.blockIO): a weight pair for
 * weightDevice, a rate for the four throttle lists. */
struct bh_blkio_device {
    int64_t major, minor;
    uint16_t weight, leaf_weight; /* weightDevice; 0: not set */
    uint64_t rate;                /* throttle*Device: bytes or ops per second */
};
#define BH_MAX_BLKIO_DEVICES 16
enum bh_blkio_throttle {
    BH_THROTTLE_READ_BPS,
    BH_THROTTLE_WRITE_BPS,
    BH_THROTTLE_READ_IOPS,
    BH_THROTTLE_WRITE_IOPS,
    BH_THROTTLE_N
};

/* Limits enforced through cgroups (and the tmpfs size). 0 means "not set". */
struct bh_limits {
    int64_t memory_bytes;      /* memory.max / memory.limit_in_bytes */
    int64_t memory_swap_bytes; /* total memory+swap; 0: same as memory (no swap) */
    int64_t pids;              /* pids.max */
    /* Every task of the sandbox together (threads and every guest uid),
     * through the RLIMIT_NPROC ceiling its user namespace copies from its
     * creator (sentry/README.md, "Per-user counters"); 0: no ceiling. Used
     * where pids.max is left at "max", as runc leaves it. */
    int64_t tasks;
    int64_t cpu_quota_us; /* with cpu_period_us: --cpus 1.5 is 150000/100000 */
    int64_t cpu_period_us;
    int64_t cpu_shares;               /* v1 shares; mapped to cpu.weight on v2 */
    int64_t tmpfs_bytes;              /* size of /tmp and of the working directory tmpfs */
    int64_t memory_reservation_bytes; /* soft limit: memory.soft_limit_in_bytes / memory.low */
    char cpuset_cpus[64];             /* "0-3,6"; empty: the parent's */
    char cpuset_mems[64];
    /* Device cgroup rules; none: the device cgroup is left as inherited. */
    size_t n_device_rules;
    struct bh_device_rule device_rules[BH_MAX_DEVICE_RULES];
    /* cgroup v1 realtime budget (cpu.rt_period_us, cpu.rt_runtime_us). */
    int64_t cpu_rt_period_us;
    int64_t cpu_rt_runtime_us;
    uint16_t blkio_weight, blkio_leaf_weight; /* 10..1000; 0: not set */
    size_t n_blkio_weight_devices;
    struct bh_blkio_device blkio_weight_devices[BH_MAX_BLKIO_DEVICES];
    size_t n_blkio_throttle[BH_THROTTLE_N];
    struct bh_blkio_device blkio_throttle[BH_THROTTLE_N][BH_MAX_BLKIO_DEVICES];
};

/* The process to run. Strings are owned by the spec (see bh_sandbox_spec_free). */
struct bh_process {
    char **argv;  /* NULL-terminated, argv[0] is the program */
    char **env;   /* NULL-terminated; nothing of the caller's env leaks in */
    char *cwd;    /* absolute path inside the sandbox */
    uint32_t uid; /* inside the user namespace */
    uint32_t gid;
    uint32_t *additional_gids;
    size_t n_additional_gids;
    int umask; /* -1: leave as 0022 */
    struct bh_rlimit *rlimits;
    size_t n_rlimits;
    /* Capability sets as bit masks of CAP_*; all 0 by default (everything dropped). */
    uint64_t cap_bounding, cap_effective, cap_permitted, cap_inheritable, cap_ambient;
    bool terminal; /* allocate a pty; master goes to console_socket */
    unsigned short console_rows, console_cols;
    bool has_oom_score_adj;
    int oom_score_adj;
    /* OCI noNewPrivileges false, honoured at the container tier only: the
     * guest installs Landlock and its filters holding CAP_SYS_ADMIN of the
     * sandbox's user namespace (the sentry keeps it permitted for this),
     * drops it, and execs without no_new_privs. */
    bool allow_new_privs;
};

struct bh_sysctl {
    char *key;
    char *value;
};

struct bh_sandbox_spec {
    char *id;          /* unique among live sandboxes; names the cgroup */
    enum bh_tier tier; /* BH_TIER_CONTAINER or BH_TIER_KERNEL */

    /* Filesystem. rootfs NULL selects the embedded default: the host's /usr,
     * /bin, /lib*, /sbin and a minimal /etc, read-only, with a fresh /proc, a
     * minimal /dev, and private size-limited tmpfs /tmp and working directory. */
    char *rootfs;
    bool rootfs_readonly;
    bool rootfs_overlay; /* writable tmpfs upper layer over a read-only rootfs */
    /* The rootfs as a detached mount prepared by the host side (open_tree
     * (OPEN_TREE_CLONE|AT_RECURSIVE), perhaps idmapped), for a rootfs the
     * sandbox's own ids cannot reach (docker's 0710 /var/lib/docker); rootfs
     * still names it in messages. Not closed by bh_mounts_setup. */
    bool has_rootfs_tree_fd;
    int rootfs_tree_fd;
    /* Set by the core, not by front ends: a read-only sysfs host root made
     * inside a joined host-owned network namespace, attached at the first
     * sysfs mount point (see sentry/README.md, joined namespaces). */
    bool has_sysfs_tree_fd;
    int sysfs_tree_fd;
    /* The same for the rootfs tree (see bh_mount.idmap). An overlay mount
     * (docker's rootfs) cannot be idmapped itself: it is mounted afresh
     * from its layers, each idmapped, with a work directory of its own
     * (UPPER/../bulkhead-work) beside the upper directory. */
    bool idmap_rootfs;
    struct bh_mount *mounts; /* applied in order after the base layout */
    size_t n_mounts;
    char **masked_paths;   /* NULL-terminated or NULL: default list */
    char **readonly_paths; /* NULL-terminated or NULL: default list */
    unsigned long rootfs_propagation;
    char *hostname; /* NULL: "bulkhead" */
    char *workdir;  /* embedded default: tmpfs working directory, default "/work" */

    /* Identity. Empty maps: the guest runs as process.uid inside, and the
     * whole inside range maps to a host range nobody else uses. Nothing ever
     * maps to host root. */
    struct bh_idmap *uid_maps;
    size_t n_uid_maps;
    struct bh_idmap *gid_maps;
    size_t n_gid_maps;

    /* Namespaces to join instead of creating (OCI "path"); NULL: create.
     * net, ipc, uts, cgroup and time are joined by host root before the
     * sandbox's user namespace is made, so host-owned ones work (a CRI's pod
     * netns); the sandbox then sees that namespace's interfaces, and its
     * tier report's net_lo_only check fails accordingly. Namespaces owned by
     * another sandbox's user namespace (a pod's) make the sandbox join that
     * user namespace too; pid can be joined only then (the sentry is then
     * not pid 1). user and mount are joined by the child. */
    char *ns_paths[BH_NS_COUNT];
    /* Keep the creator's cgroup namespace instead of making one (an OCI
     * config that does not list `cgroup`, container tier only, as runc):
     * guests then see their host cgroup paths, and cgroup mounts are binds
     * of the sandbox's own cgroup directories. */
    bool inherit_cgroup_ns;
    /* Enter the root by moving it over / and chroot (OCI --no-pivot, for
     * hosts whose root pivot_root refuses), container tier only: the host's
     * tree stays underneath (its proc and sysfs covered). */
    bool no_pivot;

    struct bh_process process;
    struct bh_limits limits;
    struct bh_sysctl *sysctls;
    size_t n_sysctls;

    char *cgroup_path;    /* relative to each hierarchy; NULL: "bulkhead/<id>" */
    char *seccomp_policy; /* policy file; NULL: the tier's policy */
    /* Extra syscall restrictions from the caller (OCI seccomp profile),
     * applied in addition to the tier policy: can only take away. */
    char *extra_policy_text;
    /* Its `notify` rules go to the caller's own agent (OCI listenerPath): the
     * first guest's listener is handed out once (bh_sentry_seccomp_listener).
     * Container tier only: the kernel gives a process one listener, and at
     * the kernel tier the sentry's broker holds it. */
    bool extra_policy_listener;

    /* Guest stdio; -1 means inherit the caller's. */
    int stdio[3];
    /* OCI: unix socket path that receives the pty master (SCM_RIGHTS). */
    char *console_socket;
};

void bh_sandbox_spec_init(struct bh_sandbox_spec *spec);
/* Frees every string and array the spec owns (not the struct itself). */
void bh_sandbox_spec_free(struct bh_sandbox_spec *spec);

enum bh_create_flags {
    /* The sandbox outlives the caller (OCI create): the sentry is not tied to
     * the caller's life, and start comes later through state_dir. */
    BH_CREATE_DETACHED = 1 << 0,
    /* Create and start in one step (bulkhead do): the sentry lets the first
     * guest exec once it is ready (filter installed, listener held), without
     * a round trip through the caller; bh_sandbox_start is then a no-op.
     * For callers with nothing to check between create and start. */
    BH_CREATE_START = 1 << 1,
};

struct bh_create_opts {
    unsigned flags;
    /* Host directory where the sentry keeps its control socket and start
     * trigger for detached sandboxes (OCI: ROOT/ID). */
    const char *state_dir;
    /* Optional: told what was degraded but not refused (a tree whose
     * filesystem cannot be idmapped). */
    void (*warn)(void *arg, const char *msg);
    void *warn_arg;
    /* Optional: the sentry stops once the root and the spec's mounts are in
     * place, before pivot_root, and this runs (OCI's prestart, createRuntime
     * and createContainer hooks); sentry_pid is the sentry's host pid, root
     * the root's path in its mount namespace. Nonzero fails the create.
     * NULL: no pause and no extra round trip. */
    int (*mounted)(void *arg, pid_t sentry_pid, const char *root, struct bh_error *err);
    void *mounted_arg;
};

#endif
