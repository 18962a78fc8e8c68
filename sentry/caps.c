/* Owns capabilities and securebits, through libcap: the sentry's narrow set
 * and the guests' exact sets.
 *
 * The sentry drops from inside root to its own uid keeping what it needs in
 * its effective set, plus, in its permitted set only, what guests may get
 * (nothing for `bulkhead do`; the OCI process's sets otherwise) and
 * CAP_SETPCAP so a guest can lock its securebits, and
 * CAP_DAC_READ_SEARCH so a guest can enter its working directory. The
 * bounding set becomes the
 * guests' bounding set: the sentry never execs, so it loses nothing by it. */
#include <errno.h>
#include <linux/securebits.h>
#include <stdio.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "caps-internal.h"

#define CAPBIT(c) (1ull << (c))

uint64_t bh_caps_sentry_effective(void)
{
    return CAPBIT(CAP_SYS_PTRACE) | CAPBIT(CAP_KILL) | CAPBIT(CAP_SETUID) | CAPBIT(CAP_SETGID);
}

static int set_caps(uint64_t eff, uint64_t perm, uint64_t inh, struct bh_error *err)
{
    cap_t c = cap_init();
    if (c == NULL)
        return bh_error_errno(err, errno, "cap_init");
    cap_value_t last = (cap_value_t)cap_max_bits();
    for (cap_value_t v = 0; v < last && v < 64; v++) {
        if (eff & CAPBIT(v))
            cap_set_flag(c, CAP_EFFECTIVE, 1, &v, CAP_SET);
        if (perm & CAPBIT(v))
            cap_set_flag(c, CAP_PERMITTED, 1, &v, CAP_SET);
        if (inh & CAPBIT(v))
            cap_set_flag(c, CAP_INHERITABLE, 1, &v, CAP_SET);
    }
    int r = cap_set_proc(c);
    int e = errno;
    cap_free(c);
    if (r < 0)
        return bh_error_errno(err, e, "set capabilities (effective %#llx, permitted %#llx)",
                              (unsigned long long)eff, (unsigned long long)perm);
    return 0;
}

int bh_caps_sentry_drop(const struct bh_process *guest, uint32_t uid, uint32_t gid,
                        struct bh_error *err)
{
    uint64_t guest_all = guest->cap_bounding | guest->cap_permitted | guest->cap_effective |
                         guest->cap_inheritable | guest->cap_ambient;
    int last = cap_max_bits();
    for (int v = 0; v < last && v < 64; v++) {
        if (guest->cap_bounding & CAPBIT(v))
            continue;
        if (prctl(PR_CAPBSET_DROP, v, 0, 0, 0) < 0 && errno != EINVAL)
            return bh_error_errno(err, errno, "drop capability %d from the bounding set", v);
    }
    if (prctl(PR_SET_SECUREBITS, SECBIT_KEEP_CAPS, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "keep capabilities across the sentry's uid switch");
    gid_t none[1];
    if (syscall(SYS_setgroups, 0, none) < 0 || syscall(SYS_setresgid, gid, gid, gid) < 0 ||
        syscall(SYS_setresuid, uid, uid, uid) < 0)
        return bh_error_errno(err, errno, "switch the sentry to its own uid/gid %u/%u", uid, gid);
    if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "clear keep-caps");
    uint64_t eff = bh_caps_sentry_effective();
    uint64_t perm = eff | guest_all | CAPBIT(CAP_SETPCAP);
    /* CAP_DAC_READ_SEARCH, permitted only: a new guest enters its working
     * directory with it, as runc's init does with its own privileges, and
     * drops it with the rest (bh_caps_guest_apply). A broker thread never
     * lends it (nor any permitted file capability) to a guest: it sets its
     * effective file capabilities to the guest thread's own after each
     * setfsuid, overriding the kernel's fix-up (broker.c, worker_fs_caps). */
    perm |= CAPBIT(CAP_DAC_READ_SEARCH);
    if (guest->allow_new_privs)
        perm |= CAPBIT(CAP_SYS_ADMIN); /* permitted only: see bh_process.allow_new_privs */
    return set_caps(eff, perm, guest->cap_inheritable, err);
}

int bh_caps_guest_securebits(const struct bh_process *proc, struct bh_error *err)
{
    /* SETPCAP is in the permitted set the sentry left us; raise it for this. */
    uint64_t eff = bh_caps_sentry_effective() | CAPBIT(CAP_SETPCAP);
    cap_t cur = cap_get_proc();
    if (cur == NULL)
        return bh_error_errno(err, errno, "read capabilities");
    uint64_t perm = 0, inh = 0;
    for (cap_value_t v = 0; v < 64 && v < (cap_value_t)cap_max_bits(); v++) {
        cap_flag_value_t f;
        if (cap_get_flag(cur, v, CAP_PERMITTED, &f) == 0 && f == CAP_SET)
            perm |= CAPBIT(v);
        if (cap_get_flag(cur, v, CAP_INHERITABLE, &f) == 0 && f == CAP_SET)
            inh |= CAPBIT(v);
    }
    cap_free(cur);
    if (set_caps(eff & perm, perm, inh, err) < 0)
        return -1;
    /* A uid-0 OCI guest keeps root's exec rule (no_new_privs clamps it to what
     * it holds); every other guest gets nothing from uid 0. All locked. */
    unsigned long bits = SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP_LOCKED |
                         SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
    if (proc->uid != 0)
        bits |= SECBIT_NOROOT;
    if (proc->cap_ambient == 0)
        bits |= SECBIT_NO_CAP_AMBIENT_RAISE;
    if (prctl(PR_SET_SECUREBITS, bits, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "set and lock securebits %#lx", bits);
    return 0;
}

bool bh_caps_have(int cap, bool effective)
{
    cap_t cur = cap_get_proc();
    cap_flag_value_t f = CAP_CLEAR;
    if (cur != NULL)
        cap_get_flag(cur, (cap_value_t)cap, effective ? CAP_EFFECTIVE : CAP_PERMITTED, &f);
    cap_free(cur);
    return f == CAP_SET;
}

int bh_caps_effective(int cap, bool on, struct bh_error *err)
{
    cap_t cur = cap_get_proc();
    if (cur == NULL)
        return bh_error_errno(err, errno, "read capabilities");
    cap_value_t v = (cap_value_t)cap;
    int r = cap_set_flag(cur, CAP_EFFECTIVE, 1, &v, on ? CAP_SET : CAP_CLEAR);
    if (r == 0)
        r = cap_set_proc(cur);
    int e = errno;
    cap_free(cur);
    if (r < 0)
        return bh_error_errno(err, e, "%s capability %d in the effective set",
                              on ? "raise" : "lower", cap);
    return 0;
}

int bh_caps_guest_apply(const struct bh_process *proc, uint64_t also, struct bh_error *err)
{
    if (set_caps(proc->cap_effective | also, proc->cap_permitted | proc->cap_effective | also,
                 proc->cap_inheritable | proc->cap_ambient, err) < 0)
        return bh_error_prefix(err, "guest capabilities");
    if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
        return bh_error_errno(err, errno, "clear ambient capabilities");
    for (int v = 0; v < 64 && v < cap_max_bits(); v++) {
        if (!(proc->cap_ambient & CAPBIT(v)))
            continue;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, v, 0, 0) < 0)
            return bh_error_errno(err, errno, "raise ambient capability %d", v);
    }
    return 0;
}

int bh_caps_from_names(const char *const *names, size_t n, uint64_t *mask, struct bh_error *err)
{
    *mask = 0;
    for (size_t i = 0; i < n; i++) {
        cap_value_t v;
        if (cap_from_name(names[i], &v) < 0 || v < 0 || v >= 64)
            return bh_error_set(err, EINVAL, "capability `%s` is not known", names[i]);
        *mask |= CAPBIT(v);
    }
    return 0;
}
