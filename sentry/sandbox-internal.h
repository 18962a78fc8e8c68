/* Private to the sandbox core: the wire protocol between the front end, the
 * sentry and its guests, the spec's serialisation, id slots, capabilities
 * and the guest's setup steps. Nothing here is for front ends. */
#ifndef BH_SANDBOX_INTERNAL_H
#define BH_SANDBOX_INTERNAL_H

#include <jansson.h>
#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox.h"

/* ---- ids (userns.c) -------------------------------------------------------
 * Without maps in the spec, inside ids 0..65536 map to a host slot of 65537
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
 * more (OCI process.rlimits) raises the ceiling to what it asks. */
#define BH_USERNS_SIGPENDING 1024ULL
#define BH_USERNS_MSGQUEUE 819200ULL /* bytes; the kernel's own default */
#define BH_USERNS_MEMLOCK (8ULL << 20)
#define BH_USERNS_N_RLIMITS 3
struct bh_userns_rlimit {
    int resource;
    uint64_t soft, hard;
};
void bh_userns_rlimits(const struct bh_sandbox_spec *spec,
                       struct bh_userns_rlimit out[BH_USERNS_N_RLIMITS]);

/* ---- idmapped trees (idmap.c) -------------------------------------------
 * The sandbox's user namespace from its first process (pidfd, else /proc
 * checked against the pidfd). */
int bh_idmap_userns_fd(int pidfd, pid_t pid, struct bh_error *err);
/* Idmaps every tree the spec flags (bh_mount.idmap, idmap_rootfs) with
 * userns, whose maps are uid/gid. An overlay rootfs is mounted afresh from
 * idmapped layers: then *rootfs_fd is that new detached mount (the
 * caller's to close and to send instead of spec->rootfs_tree_fd), else -1.
 * Trees whose filesystem refuses stay as they are, with a warning. */
int bh_idmap_trees(const struct bh_sandbox_spec *spec, const struct bh_create_opts *opts,
                   int userns, const struct bh_idmap *uid, size_t n_uid, const struct bh_idmap *gid,
                   size_t n_gid, int *rootfs_fd, struct bh_error *err);

/* ---- wire protocol (sandbox.c, control.c, sentry-main.c) -----------------
 * SOCK_SEQPACKET: one JSON object per packet, fds by SCM_RIGHTS. Requests
 * carry "op", replies "re", unsolicited sentry events "ev". The spec travels
 * as a memfd attached to {"op":"spec"} so its size is not bounded by the
 * socket buffer. */
#define BH_MSG_MAX (64 * 1024)
#define BH_SPEC_MAX (16 * 1024 * 1024)

/* Sends obj (not stolen) with optional fds. */
int bh_msg_send(int sock, json_t *obj, const int *fds, size_t n_fds, struct bh_error *err);
/* Receives one message; returns 1, 0 at end of stream, -1 on error. fds
 * beyond max_fds are closed. deadline_ms < 0: none. */
int bh_msg_recv(int sock, int64_t deadline_ms, json_t **obj, int *fds, size_t max_fds,
                size_t *n_fds, struct bh_error *err);
/* Async-signal-safe error report for a child before exec (no malloc):
 * {"ev":"error","code":N,"msg":"..."}. */
void bh_msg_send_raw_error(int sock, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Fills err from an error message object. */
int bh_msg_to_error(json_t *obj, struct bh_error *err);
json_t *bh_msg_error(const struct bh_error *err, const char *kind);

/* ---- spec (spec.c) ------------------------------------------------------- */
json_t *bh_spec_to_json(const struct bh_sandbox_spec *spec);
int bh_spec_from_json(json_t *obj, struct bh_sandbox_spec *spec, struct bh_error *err);
json_t *bh_process_to_json(const struct bh_process *proc);
int bh_process_from_json(json_t *obj, struct bh_process *proc, struct bh_error *err);
void bh_process_free(struct bh_process *proc);
/* Validates what every front end must give (argv, tier, paths absolute). */
int bh_spec_validate(const struct bh_sandbox_spec *spec, struct bh_error *err);

/* What only the core adds when handing the spec to the sentry. */
struct bh_sentry_params {
    bool detached;
    char *state_dir;                 /* detached: where sentry.sock goes */
    bool has_extra_policy;           /* a third BPF program (the caller's) was sent */
    bool has_console;                /* a connected console socket was sent */
    uint32_t sentry_uid, sentry_gid; /* inside ids the sentry drops to */
    bool made_netns, made_utsns;
    /* The pid namespace is a pod's, joined: the sentry is not pid 1 there. */
    bool joined_pidns;
};
void bh_sentry_params_free(struct bh_sentry_params *p);

/* Reads a compiled program sent by the front end (a sealed memfd: magic,
 * notify flag, BPF); prog->filter is malloc'd. */
int bh_bpf_blob_read(int fd, bool *has_notify, struct sock_fprog *prog, struct bh_error *err);

/* ---- capabilities (caps.c) ----------------------------------------------- */
/* What the sentry keeps in its effective set: reading guest memory and
 * pidfd_getfd (SYS_PTRACE), killing guests (KILL), per-thread fs ids for the
 * broker (SETUID, SETGID). Nothing that overrides file permissions: the
 * broker acts with the guest's own fs ids and must not lend it more. */
uint64_t bh_caps_sentry_effective(void);
/* Sentry half: bounding set to the guests' bounding, keep-caps across the
 * switch to its own ids, then permitted = its needs | what guests get,
 * effective = its needs. Runs as root of the sandbox's user namespace. */
int bh_caps_sentry_drop(const struct bh_process *guest, uint32_t uid, uint32_t gid,
                        struct bh_error *err);
/* Guest half, before its ids change: securebits set and locked. */
int bh_caps_guest_securebits(const struct bh_process *proc, struct bh_error *err);
/* Guest half, after its ids change: exactly the spec's sets (ambient raised),
 * plus `also` in effective and permitted (dropped by a second call with 0). */
int bh_caps_guest_apply(const struct bh_process *proc, uint64_t also, struct bh_error *err);
/* Whether the calling thread holds cap (effective, or else permitted). */
bool bh_caps_have(int cap, bool effective);
/* Raises (from the permitted set) or lowers cap in the effective set. */
int bh_caps_effective(int cap, bool on, struct bh_error *err);
/* "CAP_X,CAP_Y" or "none" for messages. */
int bh_caps_from_names(const char *const *names, size_t n, uint64_t *mask, struct bh_error *err);

/* ---- guests (guest.c, runs in the sentry) -------------------------------- */
struct bh_guest_ctx {
    const struct bh_sandbox_spec *spec;
    struct sock_fprog *prog;       /* tier filter */
    struct sock_fprog *extra_prog; /* caller's extra restrictions, or NULL */
    bool want_listener;            /* kernel tier: hand the listener to the sentry */
    bool want_user_listener;       /* container tier: extra_prog's, for the caller's agent */
    /* > 0: the sentry is not pid 1 (a pod's shared pid namespace), so the
     * guest dies with this parent by PDEATHSIG instead. */
    pid_t death_parent;
};

struct bh_guest {
    pid_t pid; /* inside the sandbox's pid namespace */
    int pidfd;
    int setup_fd;      /* sentry end of the setup channel; -1 once exec'd */
    int listener;      /* pidfd_getfd'd notification fd, -1 when none */
    int user_listener; /* the same of the caller's filter (its agent's), -1 when none */
};

/* Forks a guest, confines it, and returns once it waits for start (or with
 * its error). stdio are the guest's 0,1,2 (the guest gets its own copies). */
/* The guests' Landlock rules (read and execute the root, write only /tmp,
 * the working directory and the few /dev nodes; an OCI rootfs as its mount
 * modes allow), applied to the calling thread. The sentry takes them too,
 * so what the broker does for a guest obeys the guest's own rules. */
int bh_guest_landlock(const struct bh_sandbox_spec *spec, struct bh_error *err);

int bh_guest_spawn(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                   const int stdio[3], int console_fd, struct bh_guest *out, struct bh_error *err);
/* The same; the guest also gets extra[0..n_extra) as its fds 3, 4, ... */
int bh_guest_spawn_fds(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                       const int stdio[3], int console_fd, const int *extra, size_t n_extra,
                       struct bh_guest *out, struct bh_error *err);
/* Lets it exec; returns the exec error if the exec fails. */
int bh_guest_start(struct bh_guest *g, struct bh_error *err);

/* ---- the host side of a channel (control.c) ------------------------------ */
struct bh_sentry_conn {
    int fd;
    pid_t sentry_pid; /* host pid of the sentry */
    bool owned;       /* the channel made at create: freed with the sandbox */
    bool have_exit;   /* the sentry reported the first guest's end */
    int exit_status;
    bool have_error; /* the sentry reported a fatal error */
    struct bh_error error;
    /* Host -> inner pids of processes exec'd on this channel, so a wait
     * still names them after they ended (their /proc entry is gone). */
    struct {
        pid_t host, inner;
    } execd[32];
    unsigned n_execd;
};

/* Sends req, returns the reply (events met on the way are recorded in conn).
 * An {"re":"error"} reply becomes -1 with err filled. */
int bh_conn_request(struct bh_sentry_conn *conn, json_t *req, const int *fds, size_t n_fds,
                    json_t **reply, int *rfds, size_t max_rfds, size_t *n_rfds,
                    struct bh_error *err);
/* Reads until the sentry reports an event (ready, exit or error), or the
 * stream ends; returns 1 with an event, 0 at the end, -1 on error. */
int bh_conn_next_event(struct bh_sentry_conn *conn, int64_t deadline_ms, json_t **ev,
                       struct bh_error *err);

/* ---- paths (paths.h) are separate: the probe's reader uses them too. ---- */

#endif
