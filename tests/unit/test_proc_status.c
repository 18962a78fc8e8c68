/* bh_status_field: one field of /proc/PID/status, as the probe and the host
 * side's checks read it. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <unistd.h>

#include "proc-status.h"

static const char status[] = "Name:\tpython3\n"
                             "State:\tS (sleeping)\n"
                             "NSpid:\t4242\t7\n"
                             "Seccomp:\t2\n"
                             "Seccomp_filters:\t1\n"
                             "NoNewPrivs:    1\n";

Test(proc_status, finds_a_field_without_its_blanks)
{
    char v[32];
    cr_assert_str_eq(bh_status_field(status, "Name", v, sizeof(v)), "python3");
    cr_assert_str_eq(bh_status_field(status, "NSpid", v, sizeof(v)), "4242\t7");
    cr_assert_str_eq(bh_status_field(status, "NoNewPrivs", v, sizeof(v)), "1");
    /* a key that is the prefix of another is not confused with it */
    cr_assert_str_eq(bh_status_field(status, "Seccomp", v, sizeof(v)), "2");
    cr_assert_str_eq(bh_status_field(status, "Seccomp_filters", v, sizeof(v)), "1");
}

Test(proc_status, missing_field_is_null_and_long_values_are_cut)
{
    char v[5] = "";
    cr_assert_null(bh_status_field(status, "CapEff", v, sizeof(v)));
    cr_assert_null(bh_status_field("", "Name", v, sizeof(v)));
    cr_assert_null(bh_status_field(status, "Nam", v, sizeof(v)));
    cr_assert_str_eq(bh_status_field(status, "State", v, sizeof(v)), "S (s");
}

Test(proc_status, reads_this_process_from_proc)
{
    char path[64], buf[8192], v[32];
    snprintf(path, sizeof(path), "/proc/%d/status", (int)getpid());
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char want[32];
    snprintf(want, sizeof(want), "%d", (int)getpid());
    cr_assert_str_eq(bh_status_field(buf, "Tgid", v, sizeof(v)), want);
}
