/* The fds that travel with the spec message, front end -> sentry: each in a
 * named slot, so neither side works out positions by arithmetic. Wire order:
 * the fixed slots that are present, in enum order, then the prepared mount
 * trees, which the spec's JSON names by index. Which optional slots are
 * present is said by the spec's sentry params (extra_policy, detached,
 * console), so the receiver knows the layout before it looks at an fd. */
#ifndef BH_SPEC_FDS_H
#define BH_SPEC_FDS_H

#include <stdbool.h>
#include <stddef.h>

#include "error.h"

enum bh_spec_fd_slot {
    BH_SPEC_FD_SPEC,       /* sealed memfd of the spec's JSON */
    BH_SPEC_FD_GUEST_BPF,  /* the tier's program for guests */
    BH_SPEC_FD_SENTRY_BPF, /* the sentry's own program */
    BH_SPEC_FD_EXTRA_BPF,  /* optional: the caller's program, stacked on the guests' */
    BH_SPEC_FD_LISTEN,     /* optional: a detached sandbox's bound control socket */
    BH_SPEC_FD_CONSOLE,    /* optional: the caller's connected console socket */
    BH_SPEC_FD_N_SLOTS,
};

/* A privileged pod container (a CRI's default binds, its hostPath volumes,
 * a device tree and sysfs) needs more than a dozen; the bound is one
 * message's fds (frame.h), checked at compile time in spec-fds.c. */
#define BH_SPEC_MAX_TREES 48
#define BH_SPEC_FDS_MAX (BH_SPEC_FD_N_SLOTS + BH_SPEC_MAX_TREES)

/* Borrowed fds (neither function closes one); -1 marks an absent slot. */
struct bh_spec_fds {
    int slot[BH_SPEC_FD_N_SLOTS];
    int tree[BH_SPEC_MAX_TREES];
    size_t n_trees;
};

void bh_spec_fds_init(struct bh_spec_fds *f);
/* Appends a prepared tree; returns its index, or -1 (E2BIG) when full. */
int bh_spec_fds_add_tree(struct bh_spec_fds *f, int fd, struct bh_error *err);
/* The fds in wire order into out (BH_SPEC_FDS_MAX long); returns how many. */
size_t bh_spec_fds_pack(const struct bh_spec_fds *f, int out[BH_SPEC_FDS_MAX]);
/* The receiver's half: places n received fds in their slots given which
 * optional slots the params say were sent. Refuses a message that lacks a
 * slot it should carry. */
int bh_spec_fds_unpack(const int *fds, size_t n, bool extra, bool listen, bool console,
                       struct bh_spec_fds *f, struct bh_error *err);
/* The tree at index k of the spec's JSON, or -1 when the message carries no
 * such tree (the caller names what referred to it). */
int bh_spec_fds_tree(const struct bh_spec_fds *f, long long k);

#endif
