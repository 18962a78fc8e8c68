/* The spec message's fd layout (spec-fds.h): what the front end packs is
 * what the sentry unpacks, slot by slot, and a message short of a slot its
 * params promise is refused. The numbers stand for fds; none is opened. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "frame.h"
#include "msg-internal.h"
#include "spec-fds.h"

static void fill(struct bh_spec_fds *f, bool extra, bool listen, bool console, size_t trees)
{
    bh_spec_fds_init(f);
    f->slot[BH_SPEC_FD_SPEC] = 10;
    f->slot[BH_SPEC_FD_GUEST_BPF] = 11;
    f->slot[BH_SPEC_FD_SENTRY_BPF] = 12;
    if (extra)
        f->slot[BH_SPEC_FD_EXTRA_BPF] = 13;
    if (listen)
        f->slot[BH_SPEC_FD_LISTEN] = 14;
    if (console)
        f->slot[BH_SPEC_FD_CONSOLE] = 15;
    struct bh_error err = {0};
    for (size_t i = 0; i < trees; i++)
        cr_assert_eq(bh_spec_fds_add_tree(f, 20 + (int)i, &err), (int)i);
}

Test(spec_fds, every_combination_of_optional_slots_round_trips)
{
    for (int mask = 0; mask < 8; mask++) {
        bool extra = mask & 1, listen = mask & 2, console = mask & 4;
        struct bh_spec_fds f, g;
        fill(&f, extra, listen, console, 3);
        int wire[BH_SPEC_FDS_MAX];
        size_t n = bh_spec_fds_pack(&f, wire);
        cr_assert_eq(n, 3 + (size_t)extra + listen + console + 3);
        cr_assert_eq(wire[0], 10, "the spec goes first");
        struct bh_error err = {0};
        cr_assert_eq(bh_spec_fds_unpack(wire, n, extra, listen, console, &g, &err), 0, "%s",
                     err.msg);
        for (int i = 0; i < BH_SPEC_FD_N_SLOTS; i++)
            cr_assert_eq(g.slot[i], f.slot[i], "slot %d (mask %d)", i, mask);
        cr_assert_eq(g.n_trees, 3);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(bh_spec_fds_tree(&g, k), 20 + k);
    }
}

Test(spec_fds, a_tree_index_outside_the_message_is_no_fd)
{
    struct bh_spec_fds f;
    fill(&f, false, false, false, 2);
    cr_assert_eq(bh_spec_fds_tree(&f, 2), -1);
    cr_assert_eq(bh_spec_fds_tree(&f, -1), -1);
    cr_assert_eq(bh_spec_fds_tree(&f, 1), 21);
}

Test(spec_fds, a_message_short_of_a_promised_slot_is_refused)
{
    struct bh_spec_fds f, g;
    fill(&f, false, false, false, 0);
    int wire[BH_SPEC_FDS_MAX];
    size_t n = bh_spec_fds_pack(&f, wire);
    struct bh_error err = {0};
    /* The params say a caller's program and a console came too. */
    cr_assert_eq(bh_spec_fds_unpack(wire, n, true, false, true, &g, &err), -1);
    cr_assert_eq(err.code, EPROTO);
    cr_assert(strstr(err.msg, "not sent") != NULL, "%s", err.msg);
}

Test(spec_fds, more_trees_than_the_layout_holds_are_refused_by_name)
{
    struct bh_spec_fds f;
    fill(&f, false, false, false, BH_SPEC_MAX_TREES);
    struct bh_error err = {0};
    cr_assert_eq(bh_spec_fds_add_tree(&f, 99, &err), -1);
    cr_assert_eq(err.code, E2BIG);
    cr_assert(strstr(err.msg, "prepared mounts") != NULL, "%s", err.msg);
    int wire[BH_SPEC_FDS_MAX + 1];
    for (int i = 0; i < BH_SPEC_FDS_MAX + 1; i++)
        wire[i] = i;
    struct bh_spec_fds g;
    cr_assert_eq(bh_spec_fds_unpack(wire, 3 + BH_SPEC_MAX_TREES + 1, false, false, false, &g, &err),
                 -1);
    cr_assert_eq(err.code, EPROTO);
}

/* A spec message with every slot and the most trees crosses a socket whole:
 * the layout's bound is what one message carries, so a create never fails
 * in the send after the trees were prepared. Real fds this time (dups of
 * one pipe end), each seen on the other side as the same file. */
Test(spec_fds, the_fullest_spec_message_crosses_a_socket_whole)
{
    int sv[2], p[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    struct bh_spec_fds f;
    bh_spec_fds_init(&f);
    struct bh_error err = {0};
    for (int i = 0; i < BH_SPEC_FD_N_SLOTS; i++)
        f.slot[i] = fcntl(p[0], F_DUPFD_CLOEXEC, 0);
    for (int i = 0; i < BH_SPEC_MAX_TREES; i++)
        cr_assert_eq(bh_spec_fds_add_tree(&f, fcntl(p[0], F_DUPFD_CLOEXEC, 0), &err), i, "%s",
                     err.msg);
    int wire[BH_SPEC_FDS_MAX];
    size_t n = bh_spec_fds_pack(&f, wire);
    cr_assert_eq(n, (size_t)BH_SPEC_FDS_MAX);
    json_t *m = json_pack("{s:s}", "re", "spec");
    cr_assert_eq(bh_msg_send(sv[0], m, wire, n, &err), 0, "%s", err.msg);
    json_decref(m);
    int got[BH_SPEC_FDS_MAX];
    size_t n_got = 0;
    json_t *in = NULL;
    cr_assert_eq(bh_msg_recv(sv[1], bh_now_ms() + 10000, &in, got, BH_SPEC_FDS_MAX, &n_got, &err),
                 1, "%s", err.msg);
    json_decref(in);
    cr_assert_eq(n_got, n, "%zu of %zu fds arrived", n_got, n);
    struct bh_spec_fds g;
    cr_assert_eq(bh_spec_fds_unpack(got, n_got, true, true, true, &g, &err), 0, "%s", err.msg);
    struct stat want, st;
    cr_assert_eq(fstat(p[0], &want), 0);
    for (int k = 0; k < BH_SPEC_MAX_TREES; k++) {
        cr_assert_eq(fstat(bh_spec_fds_tree(&g, k), &st), 0);
        cr_assert_eq(st.st_ino, want.st_ino, "tree %d is another file", k);
    }
    for (size_t i = 0; i < n; i++) {
        close(wire[i]);
        close(got[i]);
    }
    close(p[0]);
    close(p[1]);
    close(sv[0]);
    close(sv[1]);
}
