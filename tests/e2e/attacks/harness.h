/* Host side of the tier and escape suites: compile an attack program
 * statically and read attack verdicts (running a binary and finding it are
 * in ../harness.h, shared by every e2e suite). */
#ifndef BH_E2E_HARNESS_H
#define BH_E2E_HARNESS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../harness.h"

/* Source directory of the attack programs: next to this file when the tests
 * run from the source tree, else found above BULKHEAD_BUILD. */
static inline char *h_attack_dir(void)
{
    char *p = NULL;
    if (access("tests/e2e/attacks/attack.h", R_OK) == 0)
        return realpath("tests/e2e/attacks", NULL);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", h_build());
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            break;
        *slash = '\0';
        free(p);
        cr_assert_geq(asprintf(&p, "%s/tests/e2e/attacks", dir), 0);
        if (access(p, R_OK) == 0)
            return p;
    }
    free(p);
    cr_skip_test("tests/e2e/attacks not found from the cwd or above BULKHEAD_BUILD");
    return NULL;
}

/* Compiles attacks/NAME.c statically (system cc) into dir/NAME. */
static inline char *h_compile_attack(const char *dir, const char *name)
{
    char *src_dir = h_attack_dir();
    char *src = NULL, *bin = NULL, *inc = NULL;
    cr_assert_geq(asprintf(&src, "%s/%s.c", src_dir, name), 0);
    cr_assert_geq(asprintf(&bin, "%s/%s", dir, name), 0);
    cr_assert_geq(asprintf(&inc, "-I%s", src_dir), 0);
    char *argv[] = {"/usr/bin/cc", "-static", "-O2", "-D_GNU_SOURCE", "-pthread", inc, "-o",
                    bin,           src,       NULL};
    struct run_result r = h_run(argv, NULL, NULL, 120);
    cr_assert_eq(r.status, 0, "compiling %s failed: %s", src, r.err);
    h_free(&r);
    chmod(bin, 0755);
    free(src);
    free(inc);
    free(src_dir);
    return bin;
}

/* The verdict word of "attempt NAME VERDICT ..." in out, or NULL. */
static inline const char *h_verdict(const char *out, const char *name, char *line, size_t size)
{
    char key[128];
    snprintf(key, sizeof(key), "attempt %s ", name);
    const char *p = out;
    while ((p = strstr(p, key)) != NULL) {
        if (p == out || p[-1] == '\n') {
            size_t n = strcspn(p, "\n");
            if (n >= size)
                n = size - 1;
            memcpy(line, p, n);
            line[n] = '\0';
            return line + strlen(key);
        }
        p += strlen(key);
    }
    return NULL;
}

#endif
