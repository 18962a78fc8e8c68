/* Global pools of the host that no cgroup counts, end to end: each default
 * sandbox is capped, and the pool must outlast what every sandbox together
 * can take before the host's memory runs out (design.md, invariant 5).
 *
 * The host's pid space (sentry/pid-space.c): every task of every sandbox
 * also takes a pid of the host's namespace, and past kernel.pid_max fork
 * fails for everyone, root included. At 32768 (this host's value before the
 * mend) 32 default OCI containers (1024 pids each) or 64 default `do`
 * sandboxes (512) took it all. The mended runtime keeps pid_max above the
 * thread pool (kernel.threads-max, sized by the kernel from memory), or
 * refuses the sandbox. The raise and refusal paths use the test build's
 * BULKHEAD_TEST_PID_MAX and BULKHEAD_TEST_THREADS_MAX (files of the test's
 * in place of the sysctls); only the first test reads the host's own. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "attacks/harness.h"
#include "error.h"
#include "aio-pool.h"
#include "pid-space.h"

static char tmp[64] = "";
static char pid_max_path[96] = "", threads_max_path[96] = "", aio_max_nr_path[96] = "";

/* A fake fs.aio-max-nr above any host's memory, for the tests of other
 * pools (a container-tier create checks all three). */
#define AIO_PLENTY "1000000000000\n"

static void teardown(void)
{
    if (tmp[0] != '\0')
        h_remove_tree(tmp);
}

TestSuite(shared_pools, .fini = teardown, .timeout = 240);

static unsigned long long number_in(const char *path)
{
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    unsigned long long v = 0;
    cr_assert_eq(fscanf(f, "%llu", &v), 1, "%s holds no number", path);
    fclose(f);
    return v;
}

/* `bulkhead do --tier TIER -- /bin/true`, no flags: it runs. */
static void default_sandbox_runs(const char *tier)
{
    h_require_kernel_tier();
    struct run_result r = h_do(tier, 180, "--", "/bin/true", NULL);
    cr_assert_eq(r.status, 0, "a default %s sandbox: %s", tier, r.err);
    h_free(&r);
}

/* The host as a default sandbox leaves it: its pid space outlasts its thread
 * pool, so no number of capped sandboxes can leave the host without a pid
 * while it still has memory for their threads. Fails on a host whose
 * pid_max is below threads-max when the runtime does not mend it. */
static void pid_space_outlasts_threads(const char *tier)
{
    default_sandbox_runs(tier);
    unsigned long long pid_max = number_in("/proc/sys/kernel/pid_max");
    unsigned long long threads = number_in("/proc/sys/kernel/threads-max");
    unsigned long long needed = bh_pid_space_needed(threads);
    cr_assert_geq(pid_max, needed,
                  "after a default %s sandbox the host's kernel.pid_max is %llu, below its "
                  "thread pool (threads-max %llu + %llu reserved): %llu default OCI containers "
                  "(1024 pids each) take every pid of the host",
                  tier, pid_max, threads, BH_PID_RESERVED, (pid_max + 1023) / 1024);
}

Test(shared_pools, a_default_sandbox_leaves_a_pid_space_that_outlasts_the_thread_pool_kernel)
{
    pid_space_outlasts_threads("kernel");
}

Test(shared_pools, a_default_sandbox_leaves_a_pid_space_that_outlasts_the_thread_pool_container)
{
    pid_space_outlasts_threads("container");
}

/* A fake host: pid_max, threads-max and aio-max-nr in files of ours; the
 * env entries that point the test build at them. */
static void fake_host(const char *pid_max, const char *threads_max, const char *aio_max_nr,
                      char env[3][128])
{
    snprintf(tmp, sizeof(tmp), "/tmp/bh-e2e-pools-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
    h_write_file(tmp, "pid_max", pid_max);
    h_write_file(tmp, "threads-max", threads_max);
    h_write_file(tmp, "aio-max-nr", aio_max_nr);
    snprintf(pid_max_path, sizeof(pid_max_path), "%s/pid_max", tmp);
    snprintf(threads_max_path, sizeof(threads_max_path), "%s/threads-max", tmp);
    snprintf(aio_max_nr_path, sizeof(aio_max_nr_path), "%s/aio-max-nr", tmp);
    snprintf(env[0], 128, "BULKHEAD_TEST_PID_MAX=%s", pid_max_path);
    snprintf(env[1], 128, "BULKHEAD_TEST_THREADS_MAX=%s", threads_max_path);
    snprintf(env[2], 128, "BULKHEAD_TEST_AIO_MAX_NR=%s", aio_max_nr_path);
}

/* bulkhead do --tier TIER -- /bin/true on the fake host; keep may be NULL. */
static struct run_result do_on_fake_host(const char *tier, char env[3][128], const char *keep)
{
    char *const envv[] = {env[0], env[1], env[2], (char *)keep, NULL};
    char *bh = h_path("bulkhead");
    char *argv[] = {bh, "do", "--tier", (char *)tier, "--", "/bin/true", NULL};
    struct run_result r = h_run(argv, envv, NULL, 180);
    free(bh);
    return r;
}

/* pid_max 32768 under a thread pool of 192725 (this host's values before the
 * mend): raised to the kernel's limit before the sandbox is made. */
static void small_pid_space_is_raised(const char *tier)
{
    h_require_kernel_tier();
    char env[3][128];
    fake_host("32768\n", "192725\n", AIO_PLENTY, env);
    struct run_result r = do_on_fake_host(tier, env, NULL);
    cr_assert_eq(r.status, 0, "a sandbox on a host whose pid_max the runtime may raise: %s", r.err);
    h_free(&r);
    cr_assert_eq(number_in(pid_max_path), BH_PID_MAX_RAISED,
                 "kernel.pid_max (fake) was 32768 and is now %llu, not raised to %llu",
                 number_in(pid_max_path), BH_PID_MAX_RAISED);
}

Test(shared_pools, a_pid_space_smaller_than_the_thread_pool_is_raised_kernel)
{
    small_pid_space_is_raised("kernel");
}

Test(shared_pools, a_pid_space_smaller_than_the_thread_pool_is_raised_container)
{
    small_pid_space_is_raised("container");
}

/* A pid space that already outlasts the pool is left as it is. */
Test(shared_pools, a_pid_space_larger_than_the_thread_pool_is_left_as_it_is)
{
    h_require_kernel_tier();
    char env[3][128];
    fake_host("200000\n", "192725\n", AIO_PLENTY, env);
    struct run_result r = do_on_fake_host("kernel", env, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_free(&r);
    cr_assert_eq(number_in(pid_max_path), 200000);
}

/* BULKHEAD_KEEP_PID_MAX=1: the operator keeps the value, so no sandbox; the
 * refusal names the sysctl, its value, what the host needs and the fix. */
static void kept_small_pid_space_refuses(const char *tier)
{
    h_require_kernel_tier();
    char env[3][128];
    fake_host("32768\n", "192725\n", AIO_PLENTY, env);
    struct run_result r = do_on_fake_host(tier, env, "BULKHEAD_KEEP_PID_MAX=1");
    cr_assert_eq(r.status, BH_EXIT_REFUSED,
                 "a sandbox on a host whose pid_max is 32768 and may not be raised ran "
                 "(exit %d): %s",
                 r.status, r.err);
    const char *want[] = {"kernel.pid_max is 32768, below the 193026 pids",
                          "BULKHEAD_KEEP_PID_MAX=1 forbids raising it",
                          "sysctl kernel.pid_max=4194304", "unable to fork"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_assert_not_null(strstr(r.err, want[i]), "no `%s` in: %s", want[i], r.err);
    h_free(&r);
    cr_assert_eq(number_in(pid_max_path), 32768);
}

Test(shared_pools, a_kept_small_pid_space_refuses_the_sandbox_with_the_numbers_kernel)
{
    kept_small_pid_space_refuses("kernel");
}

Test(shared_pools, a_kept_small_pid_space_refuses_the_sandbox_with_the_numbers_container)
{
    kept_small_pid_space_refuses("container");
}

/* `bulkhead tier` checks the pid space on every verification (a value
 * lowered after the create shows), and a kept small one fails it. */
Test(shared_pools, the_tier_report_checks_the_pid_space)
{
    h_require_kernel_tier();
    char *bh = h_path("bulkhead");
    struct run_result r = h_run((char *const[]){bh, "tier", NULL}, NULL, NULL, 180);
    cr_assert_eq(r.status, 0, "bulkhead tier: exit %d: %s", r.status, r.err);
    char want[160];
    snprintf(want, sizeof(want), "kernel.pid_max %llu, the host's thread pool needs",
             number_in("/proc/sys/kernel/pid_max"));
    const char *aio = strstr(r.out, "aio_pool");
    cr_assert_not_null(aio, "the tier report has no aio_pool check: %s", r.out);
    cr_assert_eq(strncmp(aio - 6, "pass", 4), 0, "aio_pool did not pass: %.200s", aio - 6);
    const char *line = strstr(r.out, "pid_space");
    cr_assert_not_null(line, "the tier report has no pid_space check: %s", r.out);
    cr_assert_not_null(strstr(line, want), "no `%s` in: %s", want, line);
    cr_assert_eq(strncmp(line - 6, "pass", 4), 0, "pid_space did not pass: %.200s", line - 6);
    h_free(&r);

    char env[3][128];
    fake_host("32768\n", "192725\n", AIO_PLENTY, env);
    r = h_run((char *const[]){bh, "tier", NULL},
              (char *const[]){env[0], env[1], env[2], "BULKHEAD_KEEP_PID_MAX=1", NULL}, NULL, 180);
    free(bh);
    cr_assert_neq(r.status, 0, "bulkhead tier verified a tier with pid_max kept at 32768: %s",
                  r.out);
    cr_assert_not_null(strstr(r.err, "kernel.pid_max is 32768"), "%s", r.err);
    h_free(&r);
}

/* ---- the host's AIO pool (sentry/aio-pool.c) ----------------------------
 * fs.aio-max-nr (65536 here before the mend) counts the events every
 * io_setup asked for, host-wide; past it io_setup fails for everyone. The
 * container tier caps a sandbox at 4096 events (aio-cap.c): 16 default
 * containers took the pool. The ring pages are charged to the caller's
 * memory cgroup (4 contexts of 1024 events: +256 KiB in a v1 memory cgroup,
 * by hand), so the pool can be made larger than memory can fill. */

static unsigned long long host_memory(void)
{
    struct sysinfo si;
    cr_assert_eq(sysinfo(&si), 0, "sysinfo: %s", strerror(errno));
    return (unsigned long long)si.totalram * (si.mem_unit ? si.mem_unit : 1);
}

static void aio_pool_outlasts_memory(const char *tier)
{
    default_sandbox_runs(tier);
    unsigned long long max_nr = number_in("/proc/sys/fs/aio-max-nr");
    unsigned long long needed = (unsigned long long)bh_aio_pool_needed(host_memory());
    cr_assert_geq(max_nr, needed,
                  "after a default %s sandbox the host's fs.aio-max-nr is %llu, below the %llu "
                  "events its memory can hold: %llu containers at the 4096-event cap take "
                  "every AIO event of the host",
                  tier, max_nr, needed, (max_nr + 4095) / 4096);
}

Test(shared_pools, a_default_sandbox_leaves_an_aio_pool_only_memory_bounds_container)
{
    aio_pool_outlasts_memory("container");
}

Test(shared_pools, a_default_sandbox_leaves_an_aio_pool_only_memory_bounds_kernel)
{
    aio_pool_outlasts_memory("kernel");
}

/* 65536, the kernel's default: raised to what memory can hold, exactly. */
Test(shared_pools, a_small_aio_pool_is_raised_to_what_memory_can_hold)
{
    h_require_kernel_tier();
    char env[3][128];
    fake_host("4194304\n", "192725\n", "65536\n", env);
    struct run_result r = do_on_fake_host("container", env, NULL);
    cr_assert_eq(r.status, 0, "a sandbox on a host whose aio-max-nr the runtime may raise: %s",
                 r.err);
    h_free(&r);
    unsigned long long want = (unsigned long long)bh_aio_pool_needed(host_memory());
    cr_assert_eq(number_in(aio_max_nr_path), want,
                 "fs.aio-max-nr (fake) was 65536 and is now %llu, not %llu",
                 number_in(aio_max_nr_path), want);
}

Test(shared_pools, a_kept_small_aio_pool_refuses_the_sandbox_with_the_numbers)
{
    h_require_kernel_tier();
    char env[3][128];
    fake_host("4194304\n", "192725\n", "65536\n", env);
    struct run_result r = do_on_fake_host("container", env, "BULKHEAD_KEEP_AIO_MAX_NR=1");
    cr_assert_eq(r.status, BH_EXIT_REFUSED,
                 "a sandbox on a host whose aio-max-nr is 65536 and may not be raised ran "
                 "(exit %d): %s",
                 r.status, r.err);
    char needed[160];
    snprintf(needed, sizeof(needed), "fs.aio-max-nr is 65536, below the %llu events",
             (unsigned long long)bh_aio_pool_needed(host_memory()));
    const char *want[] = {needed, "BULKHEAD_KEEP_AIO_MAX_NR=1 forbids raising it",
                          "sysctl fs.aio-max-nr=", "io_setup failing (EAGAIN)"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        cr_assert_not_null(strstr(r.err, want[i]), "no `%s` in: %s", want[i], r.err);
    h_free(&r);
    cr_assert_eq(number_in(aio_max_nr_path), 65536);
}
