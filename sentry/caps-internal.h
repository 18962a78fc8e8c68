/* Private to the core: capabilities (caps.c), the sentry's half and the
 * guest's half. Used by sentry-main.c and guest.c. */
#ifndef BH_CAPS_INTERNAL_H
#define BH_CAPS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "sandbox-spec.h"

/* What the sentry keeps in its effective set: reading guest memory and
 * pidfd_getfd (SYS_PTRACE), killing guests (KILL), per-thread fs ids for the
 * broker (SETUID, SETGID). Nothing that overrides file permissions: the
 * broker acts with the guest's own fs ids and must not lend it more. */
uint64_t bh_caps_sentry_effective(void);
/* Sentry half: bounding set to the guests' bounding, keep-caps across the
 * switch to its own ids, then permitted = its needs | what guests get
 * | CAP_DAC_READ_SEARCH (a guest's working directory, see caps.c),
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

#endif
