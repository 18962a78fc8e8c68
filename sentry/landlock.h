/* Landlock: the guest reads only its root, writes only its tmpfs and working
 * directory, executes only from the trees the rules allow. */
#ifndef BH_LANDLOCK_H
#define BH_LANDLOCK_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

enum bh_landlock_access {
    BH_LL_READ = 1 << 0,    /* read files, list directories */
    BH_LL_WRITE = 1 << 1,   /* write, create, remove, rename, truncate */
    BH_LL_EXECUTE = 1 << 2, /* execute files */
};

struct bh_landlock_rule {
    const char *path; /* opened with O_PATH when fd < 0 */
    int fd;           /* an O_PATH fd, or -1 */
    unsigned access;  /* enum bh_landlock_access bits */
};

/* Highest Landlock ABI the running kernel offers, 0 when none. */
int bh_landlock_abi(void);

/* Restricts the calling thread (and what it execs) to the rules: every
 * right the running ABI knows is handled, so whatever no rule grants is
 * denied; with ABI 6, abstract unix sockets and signals outside the domain
 * are scoped too. Fails (fail closed) when Landlock is missing. Sets
 * no_new_privs first when it is not set yet (Landlock needs it without
 * CAP_SYS_ADMIN). Only the calling thread is restricted: call it before
 * creating threads. Network ports are not restricted. A rule on a
 * non-directory grants only file rights (read, write, truncate, execute). */
int bh_landlock_restrict(const struct bh_landlock_rule *rules, size_t n, struct bh_error *err);
/* The same leaving no_new_privs unset: the caller holds CAP_SYS_ADMIN of its
 * user namespace (bh_process.allow_new_privs). */
int bh_landlock_restrict_privileged(const struct bh_landlock_rule *rules, size_t n,
                                    struct bh_error *err);

#endif
