/* Talking to the sentry of a live sandbox from the host side. Sandboxes the
 * caller owns (bulkhead do, bulkheadd) keep the channel made at create;
 * detached ones (OCI) are reached through STATE_DIR/sentry.sock, a unix
 * socket the sentry bound before pivot_root. Every request is checked by the
 * sentry (peer credentials: host root only). */
#ifndef BH_CONTROL_H
#define BH_CONTROL_H

#include <stdbool.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

struct bh_sandbox;
struct bh_sentry_conn;

int bh_sentry_connect(const char *state_dir, struct bh_sentry_conn **out, struct bh_error *err);
/* The channel of a sandbox this process created (not to be freed separately). */
struct bh_sentry_conn *bh_sandbox_conn(struct bh_sandbox *sb);
void bh_sentry_disconnect(struct bh_sentry_conn *conn);
/* A second, independent channel to the same sentry (free with
 * bh_sentry_disconnect): one request runs at a time on a channel, so a thread
 * that waits on a process should have its own. */
int bh_sentry_conn_dup(struct bh_sentry_conn *conn, struct bh_sentry_conn **out,
                       struct bh_error *err);

/* Releases the waiting first guest of a created sandbox (OCI start). */
int bh_sentry_start(struct bh_sentry_conn *conn, struct bh_error *err);

/* Takes the first guest's notification fd of the caller's filter (spec
 * extra_policy_listener), for the caller's seccomp agent; given once. */
int bh_sentry_seccomp_listener(struct bh_sentry_conn *conn, int *fd, struct bh_error *err);

/* Spawns one more guest process, confined exactly as the first one (tier,
 * filter, Landlock, and brokered by the same sentry). stdio fds travel with
 * SCM_RIGHTS; with proc->terminal the pty master goes to console_socket.
 * *pid is the process's pid as the host sees it. */
int bh_sentry_exec(struct bh_sentry_conn *conn, const struct bh_process *proc, const int stdio[3],
                   const char *console_socket, pid_t *pid, struct bh_error *err);
/* The same with n_extra more fds that the process gets as 3, 4, ...
 * (runc's --preserve-fds); the sentry refuses them at the kernel tier. */
#define BH_EXEC_MAX_EXTRA_FDS 12
int bh_sentry_exec_fds(struct bh_sentry_conn *conn, const struct bh_process *proc,
                       const int stdio[3], const char *console_socket, const int *extra,
                       size_t n_extra, pid_t *pid, struct bh_error *err);
/* The same in two steps: the process is made and waits (before it execs)
 * until bh_sentry_exec_release, so that the caller may first place it (a
 * sub-cgroup: exec --cgroup), hand its listener to a seccomp agent, or kill
 * it. *listener is its notification fd of the caller's filter (spec
 * extra_policy_listener; -1 when none), the caller's to hand on and close. */
int bh_sentry_exec_held(struct bh_sentry_conn *conn, const struct bh_process *proc,
                        const int stdio[3], const char *console_socket, const int *extra,
                        size_t n_extra, pid_t *pid, int *listener, struct bh_error *err);
int bh_sentry_exec_release(struct bh_sentry_conn *conn, pid_t pid, struct bh_error *err);

/* Waits until a process spawned by bh_sentry_exec ends; *status is its wait
 * status. */
int bh_sentry_wait(struct bh_sentry_conn *conn, pid_t pid, int *status, struct bh_error *err);

/* Signals a guest process (pid 0: the first guest). */
int bh_sentry_signal(struct bh_sentry_conn *conn, pid_t pid, int sig, struct bh_error *err);

#endif
