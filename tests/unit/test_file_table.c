/* fs.file-max against the host's memory (sentry/file-table.c), through the
 * test build's BULKHEAD_TEST_FILE_MAX: a file of the test's in place of the
 * sysctl, so nothing here touches the host's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "file-table.h"

static char dir[64] = "";
static char path[96] = "";

static void fake(const char *value)
{
    snprintf(dir, sizeof(dir), "/tmp/bh-unit-filemax-XXXXXX");
    cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/file-max", dir);
    FILE *f = fopen(path, "we");
    cr_assert_not_null(f);
    fputs(value, f);
    fclose(f);
    cr_assert_eq(setenv("BULKHEAD_TEST_FILE_MAX", path, 1), 0);
}

static void cleanup(void)
{
    if (path[0] != '\0')
        unlink(path);
    if (dir[0] != '\0')
        rmdir(dir);
}

static const char *content(void)
{
    static char buf[64];
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

TestSuite(file_table, .fini = cleanup);

Test(file_table, what_memory_can_hold_is_its_size_over_the_least_a_file_costs)
{
    cr_assert_eq(bh_file_table_needed(24ULL << 30), (24ULL << 30) / 128);
    cr_assert_eq(bh_file_table_needed(127), 0);
}

Test(file_table, a_value_at_or_above_what_memory_can_hold_is_left_alone)
{
    fake("18446744073709551615\n");
    struct bh_error err = {0};
    cr_assert_eq(bh_file_table_ensure(&err), 0, "%s", err.msg);
    cr_assert_str_eq(content(), "18446744073709551615\n");
    uint64_t fm = 0, needed = 0;
    cr_assert_eq(bh_file_table_state(&fm, &needed, &err), 0, "%s", err.msg);
    struct sysinfo si;
    cr_assert_eq(sysinfo(&si), 0);
    cr_assert_eq(needed, (uint64_t)si.totalram * si.mem_unit / BH_FILE_MIN_BYTES);
    cr_assert_eq(fm, 18446744073709551615ULL);
}

Test(file_table, a_low_value_is_raised_to_the_sysctls_maximum)
{
    fake("1000\n");
    struct bh_error err = {0};
    cr_assert_eq(bh_file_table_ensure(&err), 0, "%s", err.msg);
    cr_assert_str_eq(content(), "9223372036854775807\n");
}

Test(file_table, a_kept_low_value_is_refused_with_the_numbers_and_left_alone)
{
    fake("1000\n");
    cr_assert_eq(setenv("BULKHEAD_KEEP_FILE_MAX", "1", 1), 0);
    struct bh_error err = {0};
    cr_assert_eq(bh_file_table_ensure(&err), -1);
    cr_assert_eq(err.code, EPERM);
    cr_assert_not_null(strstr(err.msg, "fs.file-max is 1000, below the "), "%s", err.msg);
    cr_assert_not_null(strstr(err.msg, "BULKHEAD_KEEP_FILE_MAX=1 forbids raising it"), "%s",
                       err.msg);
    cr_assert_str_eq(content(), "1000\n");
}

/* What cannot be read as a number is refused, not taken for 0 or for a
 * large value that would pass. */
Test(file_table, a_value_that_is_no_number_is_refused)
{
    static const char *const bad[] = {"", "abc\n", "-5\n", "12x\n", "99999999999999999999999\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        fake(bad[i]);
        struct bh_error err = {0};
        cr_assert_eq(bh_file_table_ensure(&err), -1, "`%s` was taken", bad[i]);
        cr_assert_not_null(strstr(err.msg, "holds no number"), "`%s`: %s", bad[i], err.msg);
        cleanup();
    }
}

Test(file_table, a_missing_sysctl_is_refused)
{
    cr_assert_eq(setenv("BULKHEAD_TEST_FILE_MAX", "/nonexistent/file-max", 1), 0);
    struct bh_error err = {0};
    cr_assert_eq(bh_file_table_ensure(&err), -1);
    cr_assert_eq(err.code, ENOENT);
    cr_assert_not_null(strstr(err.msg, "read fs.file-max (`/nonexistent/file-max`)"), "%s",
                       err.msg);
}
