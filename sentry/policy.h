/* Seccomp policies: text files in seccomp-policies/ compiled with libseccomp
 * into a BPF program that the guest (or the sentry) loads last. */
#ifndef BH_POLICY_H
#define BH_POLICY_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stddef.h>

#include "error.h"

struct bh_policy;

/* Parses a policy file (following @include relative to its directory).
 * Errors name the file and line. */
int bh_policy_load(const char *path, struct bh_policy **out, struct bh_error *err);
/* Same from text in memory; includes resolve against include_dir (may be NULL). */
int bh_policy_parse(const char *text, const char *name, const char *include_dir,
                    struct bh_policy **out, struct bh_error *err);
/* A caller's profile (an OCI config's linux.seccomp), only ever loaded on
 * top of a tier's policy: unlike a tier's policy it may allow by default
 * (the stacked filters intersect), and rules that can never match are
 * dropped instead of refused, as libseccomp treats them. No @include. */
int bh_policy_parse_stacked(const char *text, const char *name, struct bh_policy **out,
                            struct bh_error *err);
void bh_policy_free(struct bh_policy *policy);

/* True when some rule sends syscalls to the sentry (SECCOMP_RET_USER_NOTIF). */
bool bh_policy_has_notify(const struct bh_policy *policy);

/* Compiles to a classic BPF program for the running architecture;
 * prog->filter is malloc'd (free with bh_policy_prog_free). */
int bh_policy_compile(const struct bh_policy *policy, struct sock_fprog *prog,
                      struct bh_error *err);
void bh_policy_prog_free(struct sock_fprog *prog);

/* Writes libseccomp's readable pseudo-code of the compiled filter to fd
 * (for review and debugging). */
int bh_policy_export_pfc(const struct bh_policy *policy, int fd, struct bh_error *err);
/* How many libseccomp rules the policy's lines became. */
size_t bh_policy_rule_count(const struct bh_policy *policy);

/* Loads prog on the calling thread with seccomp(2) (no_new_privs must be set
 * already). With a notify rule the listener fd is returned (>= 0), else 0;
 * -1 on failure. */
/* The same without no_new_privs, for a caller that holds CAP_SYS_ADMIN of
 * its user namespace (a guest whose noNewPrivileges is false, container
 * tier; bh_process.allow_new_privs): the kernel then keeps the filter
 * across setuid execs by itself refusing to let it be shed. */
int bh_policy_install_privileged(const struct sock_fprog *prog, bool want_listener,
                                 struct bh_error *err);
int bh_policy_install(const struct sock_fprog *prog, bool want_listener, struct bh_error *err);
/* The same for a program whose notified syscalls nobody serves (a caller's
 * seccomp agent holds the one listener a process may have): they fail with
 * ENOSYS. privileged: without no_new_privs, as above. */
int bh_policy_install_unserved(const struct sock_fprog *prog, bool privileged,
                               struct bh_error *err);

#endif
