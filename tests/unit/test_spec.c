/* The sandbox core's pure parts: the spec's JSON round trip (how it reaches
 * the sentry), its validation, id maps (never host root), exit codes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "ids-internal.h"
#include "msg-internal.h"
#include "sandbox.h"
#include "sentry-params-internal.h"
#include "spec-json-internal.h"

static char **strv(const char *a, const char *b)
{
    char **v = calloc(3, sizeof(char *));
    v[0] = strdup(a);
    v[1] = b ? strdup(b) : NULL;
    return v;
}

static void fill(struct bh_sandbox_spec *s)
{
    bh_sandbox_spec_init(s);
    s->id = strdup("unit-1");
    s->tier = BH_TIER_KERNEL;
    s->workdir = strdup("/work");
    s->hostname = strdup("h");
    s->process.argv = strv("/bin/echo", "hi \"there\"\n");
    s->process.env = strv("PATH=/bin", NULL);
    s->process.cwd = strdup("/work");
    s->process.uid = 1000;
    s->process.gid = 1001;
    s->process.cap_bounding = 1ull << 63;
    s->process.rlimits = calloc(1, sizeof(struct bh_rlimit));
    s->process.rlimits[0] = (struct bh_rlimit){7, 1024, UINT64_MAX};
    s->process.n_rlimits = 1;
    s->limits.memory_bytes = 64 << 20;
    s->limits.pids = 32;
    s->mounts = calloc(1, sizeof(struct bh_mount));
    s->mounts[0] = (struct bh_mount){.source = strdup("/src"),
                                     .destination = strdup("/dst"),
                                     .type = strdup("bind"),
                                     .flags = 4096,
                                     .tree_fd = -1};
    s->n_mounts = 1;
    s->ns_paths[BH_NS_NET] = strdup("/proc/1/ns/net");
}

Test(spec, json_round_trip_keeps_every_field)
{
    struct bh_sandbox_spec a, b;
    struct bh_error err = {0};
    fill(&a);
    json_t *j = bh_spec_to_json(&a);
    cr_assert_eq(bh_spec_from_json(j, &b, &err), 0, "%s", err.msg);
    json_decref(j);
    cr_assert_str_eq(b.id, "unit-1");
    cr_assert_eq(b.tier, BH_TIER_KERNEL);
    cr_assert_str_eq(b.process.argv[1], "hi \"there\"\n");
    cr_assert_null(b.process.argv[2]);
    cr_assert_eq(b.process.uid, 1000);
    cr_assert_eq(b.process.gid, 1001);
    cr_assert_eq(b.process.cap_bounding, 1ull << 63);
    cr_assert_eq(b.process.n_rlimits, 1);
    cr_assert_eq(b.process.rlimits[0].hard, UINT64_MAX);
    cr_assert_eq(b.limits.memory_bytes, 64 << 20);
    cr_assert_eq(b.limits.pids, 32);
    cr_assert_eq(b.n_mounts, 1);
    cr_assert_str_eq(b.mounts[0].destination, "/dst");
    cr_assert_eq(b.mounts[0].flags, 4096);
    cr_assert_str_eq(b.ns_paths[BH_NS_NET], "/proc/1/ns/net");
    cr_assert_null(b.ns_paths[BH_NS_USER]);
    cr_assert_eq(b.process.umask, -1);
    cr_assert(!b.inherit_cgroup_ns);
    bh_sandbox_spec_free(&a);
    bh_sandbox_spec_free(&b);
}

/* The sentry mounts cgroups by it: binds without a cgroup namespace of its own. */
Test(spec, json_round_trip_keeps_the_inherited_cgroup_namespace)
{
    struct bh_sandbox_spec a, b;
    struct bh_error err = {0};
    fill(&a);
    a.tier = BH_TIER_CONTAINER;
    a.inherit_cgroup_ns = true;
    a.no_pivot = true;
    json_t *j = bh_spec_to_json(&a);
    cr_assert_eq(bh_spec_from_json(j, &b, &err), 0, "%s", err.msg);
    json_decref(j);
    cr_assert(b.inherit_cgroup_ns);
    cr_assert(b.no_pivot);
    bh_sandbox_spec_free(&a);
    bh_sandbox_spec_free(&b);
}

/* A cgroup namespace of its own and pivot_root (chroot leaves the host's
 * tree in the mount namespace) are part of the kernel tier. */
Test(spec, kernel_tier_keeps_its_own_cgroup_namespace_and_pivot_root)
{
    for (int which = 0; which < 2; which++) {
        struct bh_sandbox_spec s;
        struct bh_error err = {0};
        fill(&s);
        if (which == 0)
            s.inherit_cgroup_ns = true;
        else
            s.no_pivot = true;
        cr_assert_eq(bh_spec_validate(&s, &err), -1);
        cr_assert(strstr(err.msg, which == 0 ? "cgroup namespace" : "--no-pivot") != NULL, "%s",
                  err.msg);
        s.tier = BH_TIER_CONTAINER;
        cr_assert_eq(bh_spec_validate(&s, &err), 0, "%s", err.msg);
        bh_sandbox_spec_free(&s);
    }
}

Test(spec, malformed_json_is_an_error_naming_the_field)
{
    struct bh_sandbox_spec s;
    struct bh_error err = {0};
    json_t *j = json_pack("{s:s,s:i,s:i}", "id", "x", "tier", BH_TIER_CONTAINER, "rootfs", 5);
    cr_assert_eq(bh_spec_from_json(j, &s, &err), -1);
    cr_assert(strstr(err.msg, "rootfs") != NULL, "%s", err.msg);
    json_decref(j);
    j = json_pack("[]");
    cr_assert_eq(bh_spec_from_json(j, &s, &err), -1);
    json_decref(j);
}

Test(spec, validation_refuses_what_cannot_be_built)
{
    struct bh_sandbox_spec s;
    struct bh_error err = {0};
    fill(&s);
    cr_assert_eq(bh_spec_validate(&s, &err), 0, "%s", err.msg);
    s.tier = BH_TIER_VM;
    cr_assert_eq(bh_spec_validate(&s, &err), -1);
    s.tier = BH_TIER_CONTAINER;
    free(s.id);
    s.id = strdup("../escape");
    cr_assert_eq(bh_spec_validate(&s, &err), -1);
    free(s.id);
    s.id = strdup("ok");
    free(s.process.cwd);
    s.process.cwd = strdup("relative");
    cr_assert_eq(bh_spec_validate(&s, &err), -1);
    bh_sandbox_spec_free(&s);
}

Test(idmaps, never_map_host_root)
{
    struct bh_sandbox_spec s;
    struct bh_error err = {0};
    bh_sandbox_spec_init(&s);
    struct bh_idmap bad = {0, 0, 65536};
    s.uid_maps = &bad;
    s.n_uid_maps = 1;
    s.gid_maps = &bad;
    s.n_gid_maps = 1;
    struct bh_idmap *u = NULL, *g = NULL;
    size_t nu, ng;
    cr_assert_eq(bh_idmaps_resolve(&s, NULL, &u, &nu, &g, &ng, &err), -1);
    cr_assert(strstr(err.msg, "host root") != NULL, "%s", err.msg);
    struct bh_idmap good = {0, 100000, 65536};
    s.uid_maps = s.gid_maps = &good;
    cr_assert_eq(bh_idmaps_resolve(&s, NULL, &u, &nu, &g, &ng, &err), 0, "%s", err.msg);
    cr_assert_eq(nu, 1);
    cr_assert_eq(u[0].outside, 100000);
    free(u);
    free(g);
}

Test(idmaps, default_slots_are_disjoint_and_hold_the_sentry_id)
{
    struct bh_id_slot a = {.lock_fd = -1}, b = {.lock_fd = -1};
    struct bh_error err = {0};
    if (bh_id_slot_acquire(&a, &err) < 0)
        cr_skip_test("cannot reserve an id slot here: %s", err.msg);
    cr_assert_eq(bh_id_slot_acquire(&b, &err), 0, "%s", err.msg);
    cr_assert_neq(a.slot, b.slot);
    struct bh_sandbox_spec s;
    bh_sandbox_spec_init(&s);
    struct bh_idmap *u = NULL, *g = NULL;
    size_t nu, ng;
    cr_assert_eq(bh_idmaps_resolve(&s, &a, &u, &nu, &g, &ng, &err), 0, "%s", err.msg);
    cr_assert_eq(u[0].inside, 0);
    cr_assert_geq(u[0].outside, BH_IDS_BASE);
    cr_assert_eq(u[0].count, BH_IDS_SLOT_SIZE);
    cr_assert_eq(bh_idmaps_sentry_id(u, nu), BH_SENTRY_ID);
    free(u);
    free(g);
    bh_id_slot_release(&a);
    bh_id_slot_release(&b);
    cr_assert_eq(access(a.path, F_OK), -1, "the released slot's lock file remains");
}

Test(status, exit_codes_map_like_a_shell)
{
    cr_assert_eq(bh_status_to_exit_code(W_EXITCODE(0, 0)), 0);
    cr_assert_eq(bh_status_to_exit_code(W_EXITCODE(3, 0)), 3);
    cr_assert_eq(bh_status_to_exit_code(W_EXITCODE(0, 9)), 137);
    cr_assert_eq(bh_status_to_exit_code(W_EXITCODE(0, 15)), 143);
}

#include <sys/mman.h>
#include <sys/socket.h>

Test(msg, raw_child_error_survives_quotes_and_newlines)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    bh_msg_send_raw_error(sv[0], BH_ERROR_EXEC, ENOENT, "exec `%s`: %s", "a\"b\\c\nd", "gone");
    json_t *m = NULL;
    struct bh_error err = {0};
    cr_assert_eq(bh_msg_recv(sv[1], -1, &m, NULL, 0, NULL, &err), 1, "%s", err.msg);
    cr_assert_str_eq(json_string_value(json_object_get(m, "ev")), "error");
    bh_msg_to_error(m, &err);
    cr_assert_eq(err.code, ENOENT);
    cr_assert_eq(err.kind, BH_ERROR_EXEC);
    cr_assert_str_eq(err.msg, "exec `a\"b\\c\nd`: gone");
    json_decref(m);
    close(sv[0]);
    cr_assert_eq(bh_msg_recv(sv[1], -1, &m, NULL, 0, NULL, &err), 0, "end of stream");
    close(sv[1]);
}

Test(msg, malformed_messages_are_errors)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    cr_assert_eq(send(sv[0], "{not json", 9, 0), 9);
    cr_assert_eq(send(sv[0], "[1,2]", 5, 0), 5);
    json_t *m = NULL;
    struct bh_error err = {0};
    cr_assert_eq(bh_msg_recv(sv[1], -1, &m, NULL, 0, NULL, &err), -1);
    cr_assert_eq(err.code, EPROTO);
    cr_assert_eq(bh_msg_recv(sv[1], -1, &m, NULL, 0, NULL, &err), -1);
    cr_assert_eq(bh_msg_recv(sv[1], 0, &m, NULL, 0, NULL, &err), -1);
    cr_assert_eq(err.code, ETIMEDOUT);
    close(sv[0]);
    close(sv[1]);
}

Test(msg, compiled_programs_are_checked_before_use)
{
    struct bh_error err = {0};
    struct sock_fprog prog;
    bool notify;
    int fd = memfd_create("bpf", MFD_CLOEXEC);
    cr_assert_eq(write(fd, "garbage-garbage-garbage", 23), 23);
    cr_assert_eq(bh_bpf_blob_read(fd, &notify, &prog, &err), -1);
    close(fd);
    fd = memfd_create("bpf", MFD_CLOEXEC);
    char head[16] = "BHBPF1\n";
    head[8] = 1;
    struct sock_filter insn = BPF_STMT(BPF_RET | BPF_K, 0x7fff0000);
    cr_assert_eq(write(fd, head, 16), 16);
    cr_assert_eq(write(fd, &insn, sizeof(insn)), (ssize_t)sizeof(insn));
    cr_assert_eq(bh_bpf_blob_read(fd, &notify, &prog, &err), 0, "%s", err.msg);
    cr_assert(notify);
    cr_assert_eq(prog.len, 1);
    free(prog.filter);
    /* a partial instruction is refused */
    cr_assert_eq(write(fd, "x", 1), 1);
    cr_assert_eq(bh_bpf_blob_read(fd, &notify, &prog, &err), -1);
    close(fd);
}

Test(ids, the_user_namespace_owner_is_the_host_id_of_inside_root)
{
    struct bh_idmap slot[] = {{0, (1u << 30) + 65537, 65537}};
    cr_assert_eq(bh_idmaps_owner(slot, 1), (1u << 30) + 65537);
    struct bh_idmap two[] = {{1000, 200000, 10}, {0, 100000, 1}};
    cr_assert_eq(bh_idmaps_owner(two, 2), 100000u);
    struct bh_idmap no_root[] = {{1000, 300000, 10}};
    cr_assert_eq(bh_idmaps_owner(no_root, 1), 300000u);
}

Test(ids, userns_rlimit_ceilings_default_and_rise_to_what_the_spec_asks)
{
    struct bh_sandbox_spec s;
    bh_sandbox_spec_init(&s);
    struct bh_userns_rlimit rl[BH_USERNS_N_RLIMITS];
    bh_userns_rlimits(&s, rl);
    for (int i = 0; i < BH_USERNS_N_RLIMITS; i++) {
        if (rl[i].resource == RLIMIT_SIGPENDING)
            cr_assert_eq(rl[i].hard, BH_USERNS_SIGPENDING);
        cr_assert(rl[i].hard > 0 && rl[i].soft <= rl[i].hard);
    }
    struct bh_rlimit asked[] = {{RLIMIT_SIGPENDING, 5000, 6000}, {RLIMIT_MSGQUEUE, 10, 20}};
    s.process.rlimits = asked;
    s.process.n_rlimits = 2;
    bh_userns_rlimits(&s, rl);
    for (int i = 0; i < BH_USERNS_N_RLIMITS; i++) {
        if (rl[i].resource == RLIMIT_SIGPENDING)
            cr_assert(rl[i].soft == 5000 && rl[i].hard == 6000);
        if (rl[i].resource == RLIMIT_MSGQUEUE) /* asking less lowers nothing here */
            cr_assert_eq(rl[i].hard, BH_USERNS_MSGQUEUE);
    }
    s.process.rlimits = NULL;
    s.process.n_rlimits = 0;
    bh_sandbox_spec_free(&s);
}

Test(ids, userns_nproc_ceiling_is_the_tasks_cap_and_only_its_hard_limit_rises)
{
    struct bh_sandbox_spec s;
    bh_sandbox_spec_init(&s);
    struct rlimit ours;
    cr_assert_eq(getrlimit(RLIMIT_NPROC, &ours), 0);
    struct bh_userns_rlimit rl[BH_USERNS_N_RLIMITS];
    const struct bh_userns_rlimit *nproc = NULL;
    bh_userns_rlimits(&s, rl);
    for (int i = 0; i < BH_USERNS_N_RLIMITS; i++)
        if (rl[i].resource == RLIMIT_NPROC)
            nproc = &rl[i];
    cr_assert_not_null(nproc, "no RLIMIT_NPROC ceiling");
    /* No cap asked: ours, so nothing needs CAP_SYS_RESOURCE. */
    cr_assert(nproc->soft == ours.rlim_cur && nproc->hard == ours.rlim_max);
    cr_assert_gt(ours.rlim_max, 100, "this test needs an RLIMIT_NPROC hard limit above 100");
    s.limits.tasks = 100;
    bh_userns_rlimits(&s, rl);
    cr_assert(nproc->soft == 100 && nproc->hard == ours.rlim_max, "%llu/%llu",
              (unsigned long long)nproc->soft, (unsigned long long)nproc->hard);
    /* A config's own RLIMIT_NPROC raises the guests' limit, never the cap
     * (the soft limit the namespace copies). */
    struct bh_rlimit asked[] = {{RLIMIT_NPROC, RLIM_INFINITY, RLIM_INFINITY}};
    s.process.rlimits = asked;
    s.process.n_rlimits = 1;
    bh_userns_rlimits(&s, rl);
    cr_assert(nproc->soft == 100 && nproc->hard == RLIM_INFINITY);
    /* A cap above our hard limit is cut to it: no raise is needed. */
    s.process.n_rlimits = 0;
    s.limits.tasks = INT64_MAX;
    bh_userns_rlimits(&s, rl);
    cr_assert_eq(nproc->soft, ours.rlim_max);
    s.process.rlimits = NULL;
    bh_sandbox_spec_free(&s);
}
