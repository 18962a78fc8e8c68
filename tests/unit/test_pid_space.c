/* kernel.pid_max against kernel.threads-max (sentry/pid-space.c), through
 * the test build's BULKHEAD_TEST_PID_MAX and BULKHEAD_TEST_THREADS_MAX:
 * files of the test's in place of the sysctls; nothing touches the host's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pid-space.h"

static char dir[64] = "";
static char pid_max[96] = "", threads_max[96] = "";

static void put(const char *path, const char *value)
{
    FILE *f = fopen(path, "we");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(value, f);
    fclose(f);
}

/* A fake host: its pid_max and threads-max. */
static void host(const char *pids, const char *threads)
{
    snprintf(dir, sizeof(dir), "/tmp/bh-unit-pidmax-XXXXXX");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(pid_max, sizeof(pid_max), "%s/pid_max", dir);
    snprintf(threads_max, sizeof(threads_max), "%s/threads-max", dir);
    put(pid_max, pids);
    put(threads_max, threads);
    cr_assert_eq(setenv("BULKHEAD_TEST_PID_MAX", pid_max, 1), 0);
    cr_assert_eq(setenv("BULKHEAD_TEST_THREADS_MAX", threads_max, 1), 0);
}

static void cleanup(void)
{
    unlink(pid_max);
    unlink(threads_max);
    if (dir[0] != '\0')
        rmdir(dir);
}

static unsigned long long now_pid_max(void)
{
    FILE *f = fopen(pid_max, "re");
    cr_assert_not_null(f);
    unsigned long long v = 0;
    cr_assert_eq(fscanf(f, "%llu", &v), 1);
    fclose(f);
    return v;
}

TestSuite(pid_space, .fini = cleanup);

Test(pid_space, the_pid_space_needed_is_the_thread_pool_and_the_reserve_up_to_the_kernels_limit)
{
    cr_assert_eq(bh_pid_space_needed(192725), 192725 + 301);
    cr_assert_eq(bh_pid_space_needed(BH_PID_MAX_RAISED), BH_PID_MAX_RAISED);
    cr_assert_eq(bh_pid_space_needed(1ULL << 40), BH_PID_MAX_RAISED);
}

Test(pid_space, a_pid_space_smaller_than_the_thread_pool_is_raised_never_lowered)
{
    host("32768\n", "192725\n");
    struct bh_error err = {0};
    cr_assert_eq(bh_pid_space_ensure(&err), 0, "%s", err.msg);
    cr_assert_eq(now_pid_max(), BH_PID_MAX_RAISED);
    /* Past the kernel's limit already: nothing to raise, nothing lowered. */
    put(threads_max, "100000000\n");
    put(pid_max, "4194304\n");
    cr_assert_eq(bh_pid_space_ensure(&err), 0, "%s", err.msg);
    cr_assert_eq(now_pid_max(), BH_PID_MAX_RAISED);
    uint64_t pm = 0, needed = 0;
    cr_assert_eq(bh_pid_space_state(&pm, &needed, &err), 0, "%s", err.msg);
    cr_assert_eq(pm, BH_PID_MAX_RAISED);
    cr_assert_eq(needed, BH_PID_MAX_RAISED);
}

Test(pid_space, a_kept_small_pid_space_is_refused_with_the_numbers)
{
    host("32768\n", "192725\n");
    cr_assert_eq(setenv("BULKHEAD_KEEP_PID_MAX", "1", 1), 0);
    struct bh_error err = {0};
    cr_assert_lt(bh_pid_space_ensure(&err), 0);
    cr_assert_eq(err.code, EPERM);
    cr_assert_not_null(strstr(err.msg, "kernel.pid_max is 32768, below the 193026 pids"), "%s",
                       err.msg);
    cr_assert_not_null(strstr(err.msg, "BULKHEAD_KEEP_PID_MAX=1 forbids raising it"), "%s",
                       err.msg);
    cr_assert_not_null(strstr(err.msg, "sysctl kernel.pid_max=4194304"), "%s", err.msg);
    cr_assert_eq(now_pid_max(), 32768);
}

Test(pid_space, an_unreadable_or_garbled_sysctl_fails_closed)
{
    host("32768\n", "many\n");
    struct bh_error err = {0};
    cr_assert_lt(bh_pid_space_ensure(&err), 0);
    cr_assert_not_null(strstr(err.msg, "kernel.threads-max"), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "holds no number"), "%s", err.msg);
    cr_assert_eq(setenv("BULKHEAD_TEST_PID_MAX", "/nonexistent/pid_max", 1), 0);
    cr_assert_lt(bh_pid_space_ensure(&err), 0);
    cr_assert_not_null(strstr(err.msg, "read kernel.pid_max (`/nonexistent/pid_max`)"), "%s",
                       err.msg);
}
