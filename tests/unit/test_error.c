#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "error.h"
#include "sandbox.h"

Test(error, set_returns_minus_one_and_keeps_message)
{
    struct bh_error err = {0};
    cr_assert_eq(bh_error_set(&err, EINVAL, "bad `%s`", "x"), -1);
    cr_assert_eq(err.code, EINVAL);
    cr_assert_str_eq(err.msg, "bad `x`");
}

Test(error, errno_appends_reason_and_prefix_adds_context)
{
    struct bh_error err = {0};
    bh_error_errno(&err, ENOENT, "open `%s`", "/nope");
    bh_error_prefix(&err, "mount %s", "rootfs");
    cr_assert_str_eq(err.msg, "mount rootfs: open `/nope`: No such file or directory");
}

Test(error, null_error_object_is_allowed)
{
    cr_assert_eq(bh_error_set(NULL, EINVAL, "ignored"), -1);
}

Test(tier, names_round_trip_and_unknown_is_refused)
{
    enum bh_tier t;
    struct bh_error err = {0};
    cr_assert_eq(bh_tier_parse("kernel", &t, &err), 0);
    cr_assert_eq(t, BH_TIER_KERNEL);
    cr_assert_str_eq(bh_tier_name(BH_TIER_CONTAINER), "container");
    cr_assert_eq(bh_tier_parse("gvisor", &t, &err), -1);
    cr_assert(strstr(err.msg, "gvisor") != NULL);
    cr_assert(BH_TIER_CONTAINER < BH_TIER_KERNEL);
}
