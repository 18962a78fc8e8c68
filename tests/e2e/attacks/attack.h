/* Shared by the escape attack programs: each attempt prints one verdict line
 *   attempt NAME refused ERRNO_NAME
 *   attempt NAME ESCAPED what happened
 *   attempt NAME inconclusive why      (e.g. EINVAL: the call never got far)
 * and the program ends with "done". tests/e2e/test_escape.c reads them. Each
 * call below would succeed (or at least be judged on its merits) on a plain
 * host, so a failure is the sandbox's doing. */
#ifndef BH_ATTACK_H
#define BH_ATTACK_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline const char *attack_errname(int e)
{
    const char *n = strerrorname_np(e);
    return n ? n : "E?";
}

static inline void attack_line(const char *name, const char *verdict, const char *fmt, ...)
{
    char detail[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof(detail), fmt, ap);
    va_end(ap);
    for (char *p = detail; *p; p++)
        if (*p == '\n')
            *p = ' ';
    printf("attempt %s %s %s\n", name, verdict, detail);
    fflush(stdout);
}

/* A failed call is a refusal unless its errno says the arguments were bad,
 * which proves nothing either way. */
static inline void attack_result(const char *name, long ret, int err)
{
    if (ret >= 0)
        attack_line(name, "ESCAPED", "returned %ld", ret);
    else if (err == EFAULT || err == EINVAL || err == EBADF)
        attack_line(name, "inconclusive", "%s", attack_errname(err));
    else
        attack_line(name, "refused", "%s", attack_errname(err));
}

/* The attempts are real: outside a sandbox they would change the host
 * (mounts, sysctls, signals to its init). Run only under a bulkhead sentry. */
static inline void attack_require_sandbox(void)
{
    char comm[32] = "";
    FILE *f = fopen("/proc/1/comm", "re");
    if (f != NULL) {
        if (fgets(comm, sizeof(comm), f) == NULL)
            comm[0] = '\0';
        fclose(f);
    }
    comm[strcspn(comm, "\n")] = '\0';
    if (strcmp(comm, "bulkhead-sentry") != 0) {
        printf("attempt sandbox inconclusive pid 1 is `%s`, not bulkhead-sentry: refusing to "
               "attack this host\n",
               comm);
        exit(3);
    }
}

static inline void attack_done(void)
{
    printf("done\n");
    fflush(stdout);
}

#endif
