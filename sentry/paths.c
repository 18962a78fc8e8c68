/* Owns locating bulkhead's helper files (see paths.h). The search order is
 * BULKHEAD_LIBEXEC, the running binary's directory, PREFIX/lib/bulkhead: a
 * build tree runs its own sentry and policies, an install its installed ones. */
#include "paths.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int try_dir(const char *dir, const char *name, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= size)
        return -1;
    return access(buf, F_OK) == 0 ? 0 : -1;
}

int bh_path_find(const char *name, char *buf, size_t size, struct bh_error *err)
{
    const char *env = getenv("BULKHEAD_LIBEXEC");
    if (env != NULL && env[0] != '\0') {
        /* An explicit override is never silently bypassed. */
        if (try_dir(env, name, buf, size) == 0)
            return 0;
        return bh_error_set(err, ENOENT,
                            "`%s` is not in BULKHEAD_LIBEXEC=%s: point it at a build or "
                            "install directory, or unset it",
                            name, env);
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash != NULL) {
            *slash = '\0';
            if (try_dir(exe, name, buf, size) == 0)
                return 0;
            /* bin/bulkhead finds ../lib/bulkhead/ of its own prefix. */
            char lib[PATH_MAX + 32];
            snprintf(lib, sizeof(lib), "%s/../lib/bulkhead", exe);
            if (try_dir(lib, name, buf, size) == 0) {
                char real[PATH_MAX];
                if (realpath(buf, real) != NULL && strlen(real) < size)
                    strcpy(buf, real);
                return 0;
            }
        }
    }
    if (try_dir(BH_PREFIX "/lib/bulkhead", name, buf, size) == 0)
        return 0;
    return bh_error_set(err, ENOENT,
                        "`%s` was found neither next to this binary nor in %s/lib/bulkhead: "
                        "run `make` (or `make install`), or set BULKHEAD_LIBEXEC",
                        name, BH_PREFIX);
}

int bh_path_policy(const char *role, char *buf, size_t size, struct bh_error *err)
{
    char name[64];
    snprintf(name, sizeof(name), "seccomp-policies/%s.policy", role);
    return bh_path_find(name, buf, size, err);
}
