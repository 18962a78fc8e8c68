/* The sandbox's filesystem: runs inside the new mount namespace, as uid 0
 * of the sandbox's user namespace, before the sentry confines itself. */
#ifndef BH_MOUNTS_H
#define BH_MOUNTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

/* Builds the whole tree in a private staging root (the rootfs or the
 * embedded default, the spec's mounts in order, fresh /proc with the masked
 * and read-only paths, a minimal /dev, tmpfs /tmp and working directory),
 * then pivot_root into it and detaches the old root. After it returns the
 * host's filesystem is unreachable from this mount namespace. */
int bh_mounts_setup(const struct bh_sandbox_spec *spec, struct bh_error *err);
/* The same, with /dev's device nodes (and the /dev/null that masks paths)
 * taken from dev_tree (bh_mounts_dev_tree) instead of the host's /dev; -1:
 * the host's. */
int bh_mounts_setup_with_dev(const struct bh_sandbox_spec *spec, int dev_tree,
                             struct bh_error *err);

/* A pause between the mounts and pivot_root, where an OCI runtime runs its
 * prestart, createRuntime and createContainer hooks (runc's order). fn gets
 * the root's path in this mount namespace (the rootfs's own host path when
 * the sandbox's ids reach it, so hooks that mount by that path land in the
 * root) and returns 0 to go on. */
struct bh_mounts_pause {
    int (*fn)(void *arg, const char *root, struct bh_error *err);
    void *arg;
};
/* What the setup made that a later step relies on: at the kernel tier, the
 * superblocks of the tmpfs mounts made for the sandbox, whose names only its
 * guests can change (the broker's parent-directory cache serves them
 * alone). Past BH_MOUNTS_OWN_TMPFS_MAX the rest is left out: not cached,
 * slower, never wrong. */
#define BH_MOUNTS_OWN_TMPFS_MAX 64
struct bh_mounts_made {
    dev_t own_tmpfs[BH_MOUNTS_OWN_TMPFS_MAX];
    size_t n_own_tmpfs;
};
/* bh_mounts_setup_with_dev with a pause (NULL: none). At the kernel tier
 * the mounts the pause added are checked against the broker's rules:
 * procfs, sysfs and cgroupfs only under /proc and /sys, and no mount that
 * takes part in propagation; a breach fails the setup.
 * made: filled when not NULL. */
int bh_mounts_setup_paused(const struct bh_sandbox_spec *spec, int dev_tree,
                           const struct bh_mounts_pause *pause, struct bh_mounts_made *made,
                           struct bh_error *err);

/* Front end, as host root in the initial user namespace: a detached tmpfs
 * holding the sandbox's own device nodes (null, zero, full, random, urandom,
 * tty, with the host's modes and numbers). Its inodes are the sandbox's
 * alone, so flock/POSIX locks and inotify marks on /dev/null no longer
 * cross sandboxes; a user namespace cannot make them itself (mknod is
 * refused there, and its own tmpfs is nodev). The nodes belong to host ids
 * uid:gid (the sandbox's root, so that they show as 0:0 inside, as runc's
 * do), or with -1 to the host's owners of the host's nodes. The fd, or -1. */
int bh_mounts_dev_tree(int64_t uid, int64_t gid, struct bh_error *err);

/* The device nodes every sandbox has of its own, with the numbers they must
 * carry: one table for the nodes mounts.c binds into /dev, for the OCI
 * front end's check of a config's linux.devices, and for the kernel tier's
 * check of an exec's extra fds (guest.c), so that a node added to one is
 * known to all. */
struct bh_dev_node {
    const char *name; /* under /dev */
    unsigned major, minor;
    /* Bound from the device tree (or the host's /dev) into /dev; false for
     * ptmx, a symlink to the sandbox's own devpts instance. */
    bool bound;
    /* Holds no state across opens and reaches nothing of the host but its
     * bytes (null, zero, full, random, urandom; not tty, which is the
     * caller's terminal). */
    bool stateless;
};
#define BH_N_DEV_NODES 7
extern const struct bh_dev_node bh_dev_nodes[BH_N_DEV_NODES];
/* The entry for a character device's numbers, or NULL. */
const struct bh_dev_node *bh_dev_node_by_rdev(dev_t rdev);

#endif
