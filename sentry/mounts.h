/* The sandbox's filesystem: runs inside the new mount namespace, as uid 0
 * of the sandbox's user namespace, before the sentry confines itself. */
#ifndef BH_MOUNTS_H
#define BH_MOUNTS_H

#include "error.h"
#include "sandbox.h"

/* Builds the whole tree in a private staging root (the rootfs or the
 * embedded default, the spec's mounts in order, fresh /proc with the masked
 * and read-only paths, a minimal /dev, tmpfs /tmp and working directory),
 * then pivot_root into it and detaches the old root. After it returns the
 * host's filesystem is unreachable from this mount namespace. */
int bh_mounts_setup(const struct bh_sandbox_spec *spec, struct bh_error *err);

#endif
