/* Private to the core: the sandbox's id ranges (userns.c), its id slot, the
 * maps written for it, a pod's user namespace and the per-user rlimit
 * ceilings of its user namespace. Used by sandbox.c and userns.c. */
#ifndef BH_IDS_INTERNAL_H
#define BH_IDS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

/* Without maps in the spec, inside ids 0..65536 map to a host slot of 65537
 * ids starting at BH_IDS_BASE + slot * BH_IDS_SLOT_SIZE; inside 65536 is the
 * sentry's own uid/gid once setup is done, so no guest shares it. */
#define BH_IDS_BASE (1u << 30)
#define BH_IDS_SLOT_SIZE 65537u
#define BH_IDS_SLOTS 16384u
#define BH_SENTRY_ID 65536u
#define BH_IDS_DIR "/run/bulkhead/ids"

struct bh_id_slot {
    int lock_fd; /* flock'd; -1 when no slot is held */
    unsigned slot;
    char path[64];
};

/* Reserves a free slot (flock on BH_IDS_DIR/SLOT, held while lock_fd is open
 * by the front end or the sentry). */
int bh_id_slot_acquire(struct bh_id_slot *slot, struct bh_error *err);
/* Removes the lock file (only when no one else holds the lock) and closes. */
void bh_id_slot_release(struct bh_id_slot *slot);

/* The effective maps for a spec: its own, or the slot's. Refuses any map
 * that reaches host id 0 or overflows. The uid and gid arrays are malloc'd. */
int bh_idmaps_resolve(const struct bh_sandbox_spec *spec, const struct bh_id_slot *slot,
                      struct bh_idmap **uid, size_t *n_uid, struct bh_idmap **gid, size_t *n_gid,
                      struct bh_error *err);
/* A pod: the user namespace that owns the sandbox's joined namespaces when
 * that is not the host's (another sandbox's, e.g. the pause container's);
 * userns_fd -1 when there is none. Refused: namespaces of two sandboxes, one
 * a non-root user made, an owner not named as /proc/PID/ns/..., maps that
 * reach host 0, and a slot range whose lock cannot be held. */
struct bh_pod_userns {
    int userns_fd;
    pid_t owner_pid;
    struct bh_idmap *uid, *gid; /* the owner's maps, as the host sees them */
    size_t n_uid, n_gid;
    struct bh_id_slot slot; /* the owner sentry's open lock file, or lock_fd -1 */
    uid_t creator;          /* host uid that made the user namespace (its ucounts owner) */
};
int bh_pod_userns_find(const struct bh_sandbox_spec *spec, struct bh_pod_userns *out,
                       struct bh_error *err);
void bh_pod_userns_free(struct bh_pod_userns *p);
/* Parent half: writes /proc/PID/{uid,gid}_map while the child waits. */
int bh_idmaps_write(pid_t pid, const struct bh_idmap *uid, size_t n_uid, const struct bh_idmap *gid,
                    size_t n_gid, struct bh_error *err);
/* The inside id the sentry drops to: BH_SENTRY_ID when mapped, else the
 * highest mapped inside id. */
uint32_t bh_idmaps_sentry_id(const struct bh_idmap *maps, size_t n);
/* The host id that inside id 0 maps to (else the first map's host id): the
 * sandbox's user namespace is created by a process with this host euid/egid,
 * so the kernel charges the sandbox's per-user counters (ucounts) to it, not
 * to host root (see sentry/README.md, "Shared kernel state"). */
uint32_t bh_idmaps_owner(const struct bh_idmap *maps, size_t n);

/* Per-sandbox caps on what the kernel counts per user through the user
 * namespace chain. Set on the process that creates the sandbox's user
 * namespace, they become the namespace's ceiling for its whole tree at the
 * host level (create_user_ns copies the creator's rlimits), and the sentry
 * and guests inherit them as their own per-uid limits. A spec asking for
 * more (OCI process.rlimits) raises the ceiling to what it asks, except
 * RLIMIT_NPROC's soft limit under limits.tasks: that one is the cap on the
 * sandbox's tasks, so only its hard limit (the guests' own) is raised. */
#define BH_USERNS_SIGPENDING 1024ULL
#define BH_USERNS_MSGQUEUE 819200ULL /* bytes; the kernel's own default */
#define BH_USERNS_MEMLOCK (8ULL << 20)
#define BH_USERNS_N_RLIMITS 4 /* and RLIMIT_NPROC: the spec's limits.tasks, else ours */
struct bh_userns_rlimit {
    int resource;
    uint64_t soft, hard;
};
void bh_userns_rlimits(const struct bh_sandbox_spec *spec,
                       struct bh_userns_rlimit out[BH_USERNS_N_RLIMITS]);

#endif
