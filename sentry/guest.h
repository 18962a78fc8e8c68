/* A guest's spawn in two halves (guest.c), for a caller with work to do
 * while the guest sets itself up: the sentry starts its broker in between.
 * bh_guest_spawn_fds (sandbox-internal.h) is the two back to back. */
#ifndef BH_GUEST_H
#define BH_GUEST_H

#include "sandbox-internal.h"

/* Forks the guest, which confines itself and then waits; out->pid, pidfd
 * and setup_fd are set. On failure nothing is left. */
int bh_guest_fork(const struct bh_guest_ctx *ctx, const struct bh_process *proc, const int stdio[3],
                  int console_fd, const int *extra, size_t n_extra, struct bh_guest *out,
                  struct bh_error *err);
/* Waits for the forked guest's report: it waits for start (its listener
 * taken into out->listener at the kernel tier), or its error, after which
 * it has been killed and reaped. */
int bh_guest_await_ready(const struct bh_guest_ctx *ctx, struct bh_guest *out,
                         struct bh_error *err);

#endif
