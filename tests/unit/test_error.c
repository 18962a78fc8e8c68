#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <jansson.h>
#include <sys/socket.h>
#include <unistd.h>

#include "error.h"
#include "msg-internal.h"
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

Test(error, kind_decides_the_exit_status_not_the_code)
{
    struct bh_error err = {0};
    bh_error_set(&err, ENOENT, "exec `x`: not found");
    cr_assert_eq(err.kind, BH_ERROR_SETUP);
    cr_assert_eq(bh_error_exit_code(&err), BH_EXIT_REFUSED, "an ENOENT of setup is a refusal");
    cr_assert_eq(bh_error_mark(&err, BH_ERROR_EXEC), -1);
    cr_assert_eq(bh_error_exit_code(&err), BH_EXIT_NOT_FOUND);
    err.code = EACCES;
    cr_assert_eq(bh_error_exit_code(&err), BH_EXIT_CANNOT_EXEC);
    err.code = ENOEXEC;
    cr_assert_eq(bh_error_exit_code(&err), BH_EXIT_CANNOT_EXEC);
    cr_assert_eq(BH_EXIT_REFUSED, 125);
    cr_assert_eq(BH_EXIT_CANNOT_EXEC, 126);
    cr_assert_eq(BH_EXIT_NOT_FOUND, 127);
}

Test(error, prefix_and_copy_keep_the_kind_and_a_new_error_resets_it)
{
    struct bh_error err = {0}, copy = {0};
    bh_error_errno(&err, ENOENT, "exec `%s`", "x");
    bh_error_mark(&err, BH_ERROR_EXEC);
    bh_error_prefix(&err, "create sandbox");
    cr_assert_eq(err.kind, BH_ERROR_EXEC);
    cr_assert_eq(bh_error_copy(&copy, &err), -1);
    cr_assert_eq(copy.kind, BH_ERROR_EXEC);
    cr_assert_eq(copy.code, ENOENT);
    cr_assert_str_eq(copy.msg, err.msg);
    bh_error_set(&err, EINVAL, "another failure");
    cr_assert_eq(err.kind, BH_ERROR_SETUP);
    bh_error_mark(&copy, BH_ERROR_EXEC);
    bh_error_clear(&copy);
    cr_assert_eq(copy.kind, BH_ERROR_SETUP);
}

Test(error, kind_travels_on_the_wire)
{
    struct bh_error err = {0}, back = {0};
    bh_error_set(&err, EACCES, "exec `/x`: Permission denied");
    bh_error_mark(&err, BH_ERROR_EXEC);
    json_t *m = bh_msg_error(&err, "error");
    cr_assert_not_null(m);
    cr_assert_eq(bh_msg_to_error(m, &back), -1);
    json_decref(m);
    cr_assert_eq(back.kind, BH_ERROR_EXEC);
    cr_assert_eq(back.code, EACCES);
    cr_assert_str_eq(back.msg, err.msg);

    /* A setup failure carries no kind, and comes back as one. */
    bh_error_set(&err, ENOENT, "mount `/x`");
    m = bh_msg_error(&err, "re");
    cr_assert_null(json_object_get(m, "kind"));
    back.kind = BH_ERROR_EXEC;
    bh_msg_to_error(m, &back);
    json_decref(m);
    cr_assert_eq(back.kind, BH_ERROR_SETUP);
}

Test(error, raw_report_of_a_child_carries_the_kind)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    bh_msg_send_raw_error(sv[0], BH_ERROR_EXEC, ENOENT, "exec `%s`: %s", "/a\"b", "gone");
    bh_msg_send_raw_error(sv[0], BH_ERROR_SETUP, EPERM, "mount `%s`", "/m");
    struct bh_error e = {0};
    json_t *m = NULL;
    cr_assert_eq(bh_msg_recv(sv[1], -1, &m, NULL, 0, NULL, &e), 1, "%s", e.msg);
    bh_msg_to_error(m, &e);
    json_decref(m);
    cr_assert_eq(e.kind, BH_ERROR_EXEC);
    cr_assert_eq(e.code, ENOENT);
    cr_assert_str_eq(e.msg, "exec `/a\"b`: gone");
    cr_assert_eq(bh_msg_recv(sv[1], -1, &m, NULL, 0, NULL, &e), 1, "%s", e.msg);
    bh_msg_to_error(m, &e);
    json_decref(m);
    cr_assert_eq(e.kind, BH_ERROR_SETUP);
    cr_assert_eq(e.code, EPERM);
    close(sv[0]);
    close(sv[1]);
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
