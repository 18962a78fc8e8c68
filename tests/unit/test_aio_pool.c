/* fs.aio-max-nr against the host's memory (sentry/aio-pool.c), through the
 * test build's BULKHEAD_TEST_AIO_MAX_NR: a file of the test's in place of
 * the sysctl; nothing here touches the host's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "aio-pool.h"

static char dir[64] = "", path[96] = "";

static void cleanup(void)
{
    unlink(path);
    if (dir[0] != '\0')
        rmdir(dir);
}

TestSuite(aio_pool, .fini = cleanup);

Test(aio_pool, what_memory_can_hold_is_its_size_over_two_ring_slots)
{
    cr_assert_eq(bh_aio_pool_needed(24ULL << 30), (24ULL << 30) / 64);
    cr_assert_eq(bh_aio_pool_needed(63), 0);
}

/* A kept small pool is refused, a garbled one fails closed, and a pool
 * already at what memory holds is left as it is. */
Test(aio_pool, a_kept_or_garbled_pool_is_refused_and_a_large_one_left_alone)
{
    snprintf(dir, sizeof(dir), "/tmp/bh-unit-aio-XXXXXX");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/aio-max-nr", dir);
    cr_assert_eq(setenv("BULKHEAD_TEST_AIO_MAX_NR", path, 1), 0);
    const struct {
        const char *value, *keep, *want;
    } cases[] = {
        {"65536\n", "1", "BULKHEAD_KEEP_AIO_MAX_NR=1 forbids raising it"},
        {"lots\n", "0", "fs.aio-max-nr (`"},
        {"18446744073709551615\n", "1", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        FILE *f = fopen(path, "we");
        cr_assert_not_null(f);
        fputs(cases[i].value, f);
        fclose(f);
        cr_assert_eq(setenv("BULKHEAD_KEEP_AIO_MAX_NR", cases[i].keep, 1), 0);
        struct bh_error err = {0};
        int rc = bh_aio_pool_ensure(&err);
        if (cases[i].want == NULL) {
            cr_assert_eq(rc, 0, "%s", err.msg);
            continue;
        }
        cr_assert_lt(rc, 0, "%s was accepted", cases[i].value);
        cr_assert_not_null(strstr(err.msg, cases[i].want), "no `%s` in: %s", cases[i].want,
                           err.msg);
    }
}
