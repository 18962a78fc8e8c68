/* A guest's pre-exec window (sentry/README.md, start-up): from its fork to
 * its exec a guest is the sentry's copy, whose mm belongs to the host's
 * user namespace, and it stays non-dumpable at every tier, with or without
 * a caller's seccomp agent: its listeners leave over the setup socket from
 * a courier thread made before its filters, never by pidfd_getfd (which
 * would need it dumpable). A guest waits in that window as long as the
 * caller likes between `create` and `start`, or, in the test build, while
 * its environment has BULKHEAD_TEST_HOLD_BEFORE_EXEC.
 *
 * The attacker is more than any guest of the sandbox can be: root of the
 * sandbox's user namespace (every capability there, CAP_SYS_PTRACE among
 * them), with no Landlock domain and no seccomp filter; it must get none of
 * open /proc/PID/mem, process_vm_readv, kcmp and pidfd_getfd against the
 * waiting guest, and the guest's /proc/PID/status must belong to host root
 * (a dumpable task's belongs to its own uid). The control: the same
 * attacker gets all four once the guest has exec'd, so a refusal is the
 * window's. Each test fails on a start-up that turns the guest dumpable. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/kcmp.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define REACH_MEM 1
#define REACH_VM_READV 2
#define REACH_KCMP 4
#define REACH_GETFD 8
#define REACH_ALL (REACH_MEM | REACH_VM_READV | REACH_KCMP | REACH_GETFD)
#define REACH_NOT_IN_PLACE 64

static char dir[64];
static char id[64];

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/bh-e2e-window-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(chmod(dir, 0755), 0);
}

static void cleanup(void)
{
    if (dir[0] == '\0')
        return;
    if (id[0] != '\0') {
        struct run_result r;
        h_bulkhead_in(dir, (const char *const[]){"delete", "--force", id, NULL}, 60, &r);
        h_free(&r);
    }
    h_remove_tree(dir);
}

/* In a forked child: becomes root of the user namespace of userns_of and
 * tries the four calls on target; the bits of those that got past the
 * kernel's ptrace access check, or REACH_NOT_IN_PLACE. */
static int attack(pid_t userns_of, pid_t target)
{
    char ns[64], mem[64];
    snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)userns_of);
    snprintf(mem, sizeof(mem), "/proc/%d/mem", (int)target);
    int nsfd = open(ns, O_RDONLY | O_CLOEXEC);
    if (nsfd < 0 || setns(nsfd, CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 ||
        setresuid(0, 0, 0) < 0)
        return REACH_NOT_IN_PLACE;
    char buf[8];
    /* below mmap_min_addr: a read that passed the check ends in EFAULT */
    struct iovec here = {buf, sizeof(buf)}, there = {(void *)0x1000, sizeof(buf)};
    int pidfd = (int)syscall(SYS_pidfd_open, target, 0);
    const bool passed[] = {
        open(mem, O_RDONLY | O_CLOEXEC) >= 0,
        process_vm_readv(target, &here, 1, &there, 1, 0) >= 0 || errno == EFAULT,
        syscall(SYS_kcmp, getpid(), target, KCMP_VM, 0, 0) >= 0,
        pidfd >= 0 && syscall(SYS_pidfd_getfd, pidfd, 0, 0) >= 0,
    };
    int got = 0;
    for (size_t i = 0; i < sizeof(passed) / sizeof(passed[0]); i++)
        got |= passed[i] ? 1 << i : 0;
    return got;
}

/* The host uid owning /proc/PID/status, or -1. */
static long status_owner(pid_t pid)
{
    char status[64];
    struct stat st;
    snprintf(status, sizeof(status), "/proc/%d/status", (int)pid);
    return stat(status, &st) == 0 ? (long)st.st_uid : -1;
}

/* Expects want (REACH_* bits) from the attacker on guest, a child of
 * sentry, and, before its exec, its /proc/PID/status owned by host root
 * (a dumpable task's belongs to its own uid; /proc/PID itself always
 * shows the euid). */
static void expect_reach(pid_t sentry, pid_t guest, int want, const char *what)
{
    if (want == 0) {
        long owner = status_owner(guest);
        cr_expect_eq(owner, 0,
                     "%s: the guest %d is dumpable before its exec (its /proc/PID/status belongs "
                     "to host uid %ld, not to the host's root; -1: it is gone)",
                     what, (int)guest, owner);
    }
    pid_t a = fork();
    cr_assert_geq(a, 0);
    if (a == 0)
        _exit(attack(sentry, guest));
    int wst;
    cr_assert_eq(waitpid(a, &wst, 0), a);
    cr_assert(WIFEXITED(wst) && WEXITSTATUS(wst) != REACH_NOT_IN_PLACE,
              "%s: the attacker did not get in place as root of the sandbox's user namespace "
              "(status %#x)",
              what, wst);
    int got = WEXITSTATUS(wst);
    cr_expect_eq(got, want,
                 "%s: root of the sandbox's user namespace (CAP_SYS_PTRACE there, no Landlock, no "
                 "filter) on guest %d got %#x, expected %#x (1 /proc/PID/mem, 2 process_vm_readv, "
                 "4 kcmp, 8 pidfd_getfd)",
                 what, (int)guest, got, want);
}

/* The first pid of /proc/PID/task/PID/children whose comm is comm (NULL:
 * any), or -1. */
static pid_t child_named(pid_t pid, const char *comm)
{
    char path[64], kids[512] = "";
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    if (fgets(kids, sizeof(kids), f) == NULL)
        kids[0] = '\0';
    fclose(f);
    char *save = NULL;
    for (char *t = strtok_r(kids, " \n", &save); t != NULL; t = strtok_r(NULL, " \n", &save)) {
        pid_t k = (pid_t)atoi(t);
        char name[32] = "";
        snprintf(path, sizeof(path), "/proc/%d/comm", (int)k);
        FILE *c = fopen(path, "re");
        if (c != NULL && fgets(name, sizeof(name), c) != NULL)
            name[strcspn(name, "\n")] = '\0';
        if (c != NULL)
            fclose(c);
        if (comm == NULL || strcmp(name, comm) == 0)
            return k;
    }
    return -1;
}

/* child_named, waiting up to 60 s (a bound on a hang, never a measure). */
static pid_t wait_child_named(pid_t pid, const char *comm)
{
    pid_t k = -1;
    for (int i = 0; i < 6000 && (k = child_named(pid, comm)) < 0; i++)
        usleep(10000);
    return k;
}

/* The window, then the control once the guest has exec'd sleep. */
static void expect_closed_until_exec(pid_t sentry, pid_t guest, const char *what,
                                     const char *const *release_args, int release_fd)
{
    expect_reach(sentry, guest, 0, what);
    if (release_fd >= 0) {
        cr_assert_eq(write(release_fd, "g", 1), 1);
    } else {
        struct run_result r;
        h_bulkhead_in(dir, release_args, 60, &r);
        cr_expect_eq(r.status, 0, "start: %s", r.err);
        h_free(&r);
    }
    pid_t execd = wait_child_named(sentry, "sleep");
    cr_assert_eq(execd, guest, "the guest %d did not exec sleep (found %d)", (int)guest,
                 (int)execd);
    expect_reach(sentry, guest, REACH_ALL, "control, after the exec");
}

/* bulkhead do --tier TIER with the test build's hold: the guest says
 * "held" on stdout after its filters and "go", and waits for a byte on
 * stdin (a FIFO we hold open). */
static void held_do(const char *tier)
{
    make_dir();
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/hold", dir);
    int release = h_held_fifo(fifo);
    char *bh = h_path("bulkhead");
    char *argv[] = {
        bh,   "do",         "--tier", (char *)tier, "--env", "BULKHEAD_TEST_HOLD_BEFORE_EXEC=1",
        "--", "/bin/sleep", "60",     NULL};
    struct h_job j = h_spawn(argv, NULL, fifo, NULL);
    free(bh);
    char held[8] = "";
    ssize_t got = 0;
    for (int i = 0; i < 12000 && got < 5; i++)
        if ((got = pread(j.out, held, 5, 0)) < 5)
            usleep(10000);
    /* bulkhead do's first child is the sentry (pid 1 of its namespace) */
    pid_t sentry = -1;
    for (int i = 0; got == 5 && i < 6000 && sentry < 0; i++) {
        pid_t k = child_named(j.pid, "bulkhead-sentry");
        if (k > 0 && h_pidns_differs(k, j.pid))
            sentry = k;
        else
            usleep(10000);
    }
    pid_t guest = sentry > 0 ? wait_child_named(sentry, "bulkhead-sentry") : -1;
    if (guest <= 0) {
        close(release);
        kill(j.pid, SIGKILL);
        char *why = NULL, text[512] = "";
        h_finish(&j, 30, NULL, &why);
        if (why != NULL) /* copied: the skip does not return */
            snprintf(text, sizeof(text), "%s", why);
        free(why);
        h_skip_kernel("bulkhead do --tier %s held no guest before its exec (read `%.*s`; is this "
                      "the test build, BH_TEST_HOOKS?): %s",
                      tier, (int)(got > 0 ? got : 0), held, text);
    }
    cr_expect_str_eq(held, "held\n");
    char what[64];
    snprintf(what, sizeof(what), "bulkhead do --tier %s, held", tier);
    expect_closed_until_exec(sentry, guest, what, NULL, release);
    close(release);
    kill(j.pid, SIGKILL);
    h_finish(&j, 30, NULL, NULL);
}

Test(exec_window, kernel_guest_held_before_its_exec_is_not_dumpable_do, .fini = cleanup)
{
    held_do("kernel");
}

/* The container tier without an agent (window9's case, by the courier now). */
Test(exec_window, container_guest_held_before_its_exec_is_not_dumpable_do, .fini = cleanup)
{
    held_do("container");
}

/* The agent's child: takes one connection and its listener, then holds it
 * until killed. */
static _Noreturn void agent_hold(int ls)
{
    int c = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
    char buf[8192];
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } cm;
    struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b, .msg_controllen = sizeof(cm.b)};
    if (c < 0 || recvmsg(c, &mh, MSG_CMSG_CLOEXEC) <= 0 || CMSG_FIRSTHDR(&mh) == NULL)
        _exit(11);
    for (;;)
        pause();
}

/* A seccomp agent for the test: takes one connection (runc's protocol: the
 * state JSON with the listener as SCM_RIGHTS) and holds the listener until
 * killed; syscalls it would be asked about (chmod) the guest never makes. */
static pid_t agent_start(const char *sock_path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(sock_path), sizeof(sa.sun_path));
    memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(ls, 1) == 0,
              "the agent's socket %s: %s", sock_path, strerror(errno));
    pid_t agent = fork();
    cr_assert_geq(agent, 0);
    if (agent == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        agent_hold(ls);
    }
    close(ls);
    return agent;
}

/* DIR/bundle's config for tier over the host's /usr, running args (the
 * caller's to dump and free); bundle gets the bundle's path. */
static json_t *bundle_config(const char *tier, json_t *args, char bundle[128])
{
    make_dir();
    h_bundle_skeleton(dir);
    snprintf(bundle, 128, "%s/bundle", dir);
    json_t *c = h_spec_config(dir, bundle);
    json_object_set_new(c, "annotations", json_pack("{s:s}", "dev.bulkhead.tier", tier));
    json_t *proc = json_object_get(c, "process");
    json_object_set_new(proc, "args", args);
    json_object_set_new(proc, "terminal", json_false());
    json_array_append_new(json_object_get(c, "mounts"),
                          json_pack("{s:s, s:s, s:s, s:[s, s, s]}", "destination", "/usr", "type",
                                    "bind", "source", "/usr", "options", "rbind", "ro", "nosuid"));
    return c;
}

static void dump_config(json_t *c, const char *bundle)
{
    char config[160];
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    cr_assert_eq(json_dump_file(c, config, JSON_INDENT(1)), 0);
    json_decref(c);
}

/* An OCI container of tier, created (its guest waits for start in the
 * window, as long as the caller likes), with a caller's seccomp agent
 * when agent_sock is not NULL; then started (the control). */
static void created(const char *tier, const char *agent_sock_name)
{
    char bundle[128], sock[100];
    json_t *c = bundle_config(tier, json_pack("[s, s]", "/bin/sleep", "60"), bundle);
    pid_t agent = -1;
    if (agent_sock_name != NULL) {
        snprintf(sock, sizeof(sock), "%s/%s", dir, agent_sock_name);
        agent = agent_start(sock);
        json_object_set_new(json_object_get(c, "linux"), "seccomp",
                            json_pack("{s:s, s:s, s:[s], s:[{s:[s, s, s], s:s}]}", "defaultAction",
                                      "SCMP_ACT_ALLOW", "listenerPath", sock, "architectures",
                                      "SCMP_ARCH_X86", "syscalls", "names", "chmod", "fchmod",
                                      "fchmodat", "action", "SCMP_ACT_NOTIFY"));
    }
    dump_config(c, bundle);
    snprintf(id, sizeof(id), "window-%s-%d", tier, (int)getpid());
    struct run_result r;
    h_bulkhead_in(dir, (const char *const[]){"create", "--bundle", bundle, id, NULL}, 120, &r);
    if (r.status != 0) {
        char why[400];
        snprintf(why, sizeof(why), "exit %d: %.300s", r.status, r.err);
        h_free(&r);
        if (agent > 0) {
            kill(agent, SIGKILL);
            waitpid(agent, NULL, 0);
        }
        h_skip_kernel("bulkhead create of a %s-tier container failed (%s)", tier, why);
    }
    h_free(&r);
    h_bulkhead_in(dir, (const char *const[]){"state", id, NULL}, 30, &r);
    cr_assert_eq(r.status, 0, "state: %s", r.err);
    json_t *state = json_loads(r.out, 0, NULL);
    cr_assert_not_null(state, "state: %s", r.out);
    pid_t sentry = (pid_t)json_integer_value(json_object_get(state, "pid"));
    json_decref(state);
    h_free(&r);
    pid_t guest = wait_child_named(sentry, "bulkhead-sentry");
    cr_assert_gt(guest, 0, "no guest waits for start under the container's sentry %d", (int)sentry);
    char what[96];
    snprintf(what, sizeof(what), "OCI container, %s tier%s, created", tier,
             agent > 0 ? ", with a seccomp agent" : "");
    expect_closed_until_exec(sentry, guest, what, (const char *const[]){"start", id, NULL}, -1);
    if (agent > 0) {
        kill(agent, SIGKILL);
        waitpid(agent, NULL, 0);
    }
}

Test(exec_window, kernel_guest_created_is_not_dumpable_oci, .fini = cleanup)
{
    created("kernel", NULL);
}

/* The agent's listener comes from the caller's profile, installed last,
 * which may refuse or notify sendmsg: it leaves by the courier as well. */
Test(exec_window, container_guest_with_a_seccomp_agent_is_not_dumpable_oci, .fini = cleanup)
{
    created("container", "agent.sock");
}

/* The courier is a second task of the guest's uid until the exec, so the
 * guest starts with room for it (RLIMIT_NPROC at least 2) and lowers the
 * limit to the config's once it is made: a process limited to itself
 * (docker run --ulimit nproc=1) still starts, with its own limit. Fails
 * with a courier made under the config's limit (EAGAIN, nothing runs). */
static void one_process(const char *tier)
{
    char bundle[128];
    json_t *c = bundle_config(
        tier, json_pack("[s, s, s]", "/bin/grep", "Max processes", "/proc/self/limits"), bundle);
    json_object_set_new(
        json_object_get(c, "process"), "rlimits",
        json_pack("[{s:s, s:i, s:i}]", "type", "RLIMIT_NPROC", "hard", 1, "soft", 1));
    dump_config(c, bundle);
    char run_id[64];
    snprintf(run_id, sizeof(run_id), "window-nproc-%s-%d", tier, (int)getpid());
    struct run_result r;
    h_bulkhead_in(dir, (const char *const[]){"run", "--bundle", bundle, run_id, NULL}, 120, &r);
    cr_expect_eq(r.status, 0, "%s tier, RLIMIT_NPROC 1: exit %d: %s", tier, r.status, r.err);
    char *line = strstr(r.out, "Max processes");
    unsigned long soft = 0, hard = 0;
    cr_expect(line != NULL && sscanf(line, "Max processes %lu %lu", &soft, &hard) == 2 &&
                  soft == 1 && hard == 1,
              "%s tier: the process's limit is not the config's 1/1: `%s` (stderr: %s)", tier,
              r.out, r.err);
    h_free(&r);
}

Test(exec_window, a_guest_limited_to_one_process_starts_kernel, .fini = cleanup)
{
    one_process("kernel");
}

Test(exec_window, a_guest_limited_to_one_process_starts_container, .fini = cleanup)
{
    one_process("container");
}
