/* Private to the core: the sentry's guests (guest.c, runs in the sentry):
 * how one is forked, confined and let go. Used by sentry-main.c. */
#ifndef BH_GUEST_INTERNAL_H
#define BH_GUEST_INTERNAL_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

struct bh_guest_ctx {
    const struct bh_sandbox_spec *spec;
    struct sock_fprog *prog;       /* tier filter */
    struct sock_fprog *extra_prog; /* caller's extra restrictions, or NULL */
    bool want_listener;            /* hand the tier filter's listener to the sentry */
    bool want_user_listener;       /* container tier: extra_prog's, for the caller's agent */
    bool notify_unserved;          /* prog notifies, but the agent's filter takes the listener */
    /* > 0: the sentry is not pid 1 (a pod's shared pid namespace), so the
     * guest dies with this parent by PDEATHSIG instead. */
    pid_t death_parent;
};

struct bh_guest {
    pid_t pid; /* inside the sandbox's pid namespace */
    int pidfd;
    int setup_fd;      /* sentry end of the setup channel; -1 once exec'd */
    int listener;      /* the tier's notification fd, sent by the guest; -1 when none */
    int user_listener; /* the same of the caller's filter (its agent's), -1 when none */
};

/* The guests' Landlock rules (read and execute the root, write only /tmp,
 * the working directory and the few /dev nodes; an OCI rootfs as its mount
 * modes allow), applied to the calling thread. The sentry takes them too,
 * so what the broker does for a guest obeys the guest's own rules. */
int bh_guest_landlock(const struct bh_sandbox_spec *spec, struct bh_error *err);
/* The same for a guest holding n_extra caller's fds at 3, 4, ...: their
 * files stay reachable through /proc/self/fd (container tier). */
/* At the kernel tier, refuses (naming it and why) any fd passed for
 * exec --preserve-fds that is not a regular file of an ordinary filesystem,
 * a pipe or a stateless device (/dev/null, ...). */
int bh_guest_extra_fds_check(const struct bh_sandbox_spec *spec, const int *extra, size_t n_extra,
                             struct bh_error *err);
int bh_guest_landlock_fds(const struct bh_sandbox_spec *spec, size_t n_extra, struct bh_error *err);

/* Forks a guest, confines it, and returns once it waits for start (or with
 * its error). stdio are the guest's 0,1,2 (the guest gets its own copies). */
int bh_guest_spawn(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                   const int stdio[3], int console_fd, struct bh_guest *out, struct bh_error *err);
/* The same; the guest also gets extra[0..n_extra) as its fds 3, 4, ... */
int bh_guest_spawn_fds(const struct bh_guest_ctx *ctx, const struct bh_process *proc,
                       const int stdio[3], int console_fd, const int *extra, size_t n_extra,
                       struct bh_guest *out, struct bh_error *err);
/* Lets it exec; returns the exec error if the exec fails. */
/* A guest's spawn in two halves, for a caller with work to do while the
 * guest sets itself up (the sentry starts its broker in between);
 * bh_guest_spawn_fds is the two back to back. bh_guest_fork forks the
 * guest, which confines itself and then waits (out->pid, pidfd and setup_fd
 * set; on failure nothing is left). */
int bh_guest_fork(const struct bh_guest_ctx *ctx, const struct bh_process *proc, const int stdio[3],
                  int console_fd, const int *extra, size_t n_extra, struct bh_guest *out,
                  struct bh_error *err);
/* Waits for the forked guest's report: its listeners (sent over the setup
 * socket, the tier's and the caller's agent's, into out), then that it
 * waits for start; or its error, after which it has been killed and reaped. */
int bh_guest_await_ready(const struct bh_guest_ctx *ctx, struct bh_guest *out,
                         struct bh_error *err);
int bh_guest_start(struct bh_guest *g, struct bh_error *err);

#endif
