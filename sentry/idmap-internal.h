/* Private to the core: idmapped trees (idmap.c), applied by the parent half
 * of bh_sandbox_create once the child's maps are written. */
#ifndef BH_IDMAP_INTERNAL_H
#define BH_IDMAP_INTERNAL_H

#include <stddef.h>

#include "error.h"
#include "sandbox-spec.h"

/* The sandbox's user namespace from its first process (pidfd, else /proc
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

#endif
