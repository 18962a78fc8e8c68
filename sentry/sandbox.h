/* The public face of the sandbox core: what front ends (oci/, supervisor/)
 * describe and call. Everything behind it lives in sentry/ and is private.
 *
 * Shape of a running sandbox:
 *
 *   front end (bulkhead do / bulkheadd / bulkhead create)     host side
 *     |  clone(NEWUSER|NEWPID|NEWNS|NEWNET|NEWIPC|NEWUTS|NEWCGROUP), id maps
 *     |  written by the parent, cgroups created and joined by the parent
 *     v
 *   bulkhead-sentry (pid 1 of the sandbox)  mounts, pivot_root, lo, hostname,
 *     |   then confines itself (sentry.policy) and serves notifications
 *     v
 *   guest process(es): rlimits, ids, caps dropped, no_new_privs, Landlock,
 *   seccomp (tier policy; kernel tier hands its listener to the sentry), exec.
 *
 * The sentry is pid 1, so its death kills every guest (fail closed). In a
 * pod's shared pid namespace (ns_paths[BH_NS_PID]) it is not: it is then the
 * subreaper of its guests, which die with it by PDEATHSIG (sentry/README.md).
 */
#ifndef BH_SANDBOX_H
#define BH_SANDBOX_H

#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

struct bh_sandbox;

/* Builds every layer, up to a guest that waits before exec. On failure
 * nothing is left behind and err says which step failed and why (also when
 * it failed in the child). */
int bh_sandbox_create(const struct bh_sandbox_spec *spec, const struct bh_create_opts *opts,
                      struct bh_sandbox **out, struct bh_error *err);

/* Lets the guest exec its process. */
int bh_sandbox_start(struct bh_sandbox *sb, struct bh_error *err);

/* Host pid of the sentry (pid 1 inside): the pid OCI reports. */
pid_t bh_sandbox_pid(const struct bh_sandbox *sb);

/* Waits for the sandbox to end. *status is a wait status of the guest:
 * exit code, or the signal that killed it. Returns -1 (ECHILD, err says
 * so) when the sentry died without reporting the guest's status: the
 * command's result is then unknown (*status holds the sentry's own). */
int bh_sandbox_wait(struct bh_sandbox *sb, int *status, struct bh_error *err);

/* Forwards sig to the guest (through the sentry). */
int bh_sandbox_signal(struct bh_sandbox *sb, int sig, struct bh_error *err);

/* Kills whatever still runs, removes cgroups and state, frees sb. */
void bh_sandbox_destroy(struct bh_sandbox *sb);

/* Frees the handle's memory and fds and kills nothing: a detached sandbox
 * (OCI create) lives on, reached again through its state directory. */
void bh_sandbox_release(struct bh_sandbox *sb);

/* Maps a wait status to a shell exit code: the code, or 128+signal. */
int bh_status_to_exit_code(int status);

#endif
