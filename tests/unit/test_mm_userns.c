/* What the sentry's second wall rests on (sentry/README.md, "A second wall
 * around the sentry"): a process's mm keeps the user namespace it was
 * exec'd in (fs/exec.c), and a fork or clone3 copies the mm with that
 * namespace (kernel/fork.c dup_mm), even when the clone makes a new user
 * namespace. A non-dumpable task whose mm belongs to the host's namespace
 * is then out of reach of a root of the new namespace holding
 * CAP_SYS_PTRACE there (__ptrace_may_access asks for the capability over
 * mm->user_ns); the same task exec'd inside the namespace is not. Landlock
 * plays no part here: nothing in this file takes a domain. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/kcmp.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#define HOST_BASE 1610612736u /* far from any real user's ids */

struct target {
    pid_t pid;
    int go;    /* write end: the maps are written */
    int ready; /* read end: one byte once non-dumpable */
};

/* clone3(CLONE_NEWUSER), as the exec'd sentry does; the child becomes root
 * of the new namespace and non-dumpable, then either stays (its mm is the
 * exec'd one) or execs a program that turns non-dumpable itself. */
static struct target target_start(bool exec_inside)
{
    int go[2], ready[2];
    cr_assert_eq(pipe2(go, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(ready, 0), 0);
    struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &ca, sizeof(ca));
    cr_assert_geq(pid, 0, "clone3(CLONE_NEWUSER): %s", strerror(errno));
    if (pid == 0) {
        char b;
        close(go[1]);
        close(ready[0]);
        if (read(go[0], &b, 1) != 1 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
            _exit(120);
        if (exec_inside) {
            /* fd 3 is the ready pipe; the program signals once non-dumpable */
            if (dup2(ready[1], 3) < 0)
                _exit(121);
            execl("/usr/bin/python3", "python3", "-c",
                  "import ctypes,os,time\n"
                  "assert ctypes.CDLL(None).prctl(4, 0, 0, 0, 0) == 0\n"
                  "os.write(3, b'r')\n"
                  "time.sleep(60)\n",
                  (char *)NULL);
            _exit(122);
        }
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || write(ready[1], "r", 1) != 1)
            _exit(123);
        pause();
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    char path[64], map[64];
    snprintf(map, sizeof(map), "0 %u 1\n", HOST_BASE);
    const char *files[] = {"uid_map", "setgroups", "gid_map"};
    const char *data[] = {map, "deny\n", map};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "/proc/%ld/%s", pid, files[i]);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
        cr_assert_eq(write(fd, data[i], strlen(data[i])), (ssize_t)strlen(data[i]), "write %s: %s",
                     path, strerror(errno));
        close(fd);
    }
    return (struct target){(pid_t)pid, go[1], ready[0]};
}

static void target_wait_ready(struct target *t)
{
    cr_assert_eq(write(t->go, "g", 1), 1);
    char b;
    cr_assert_eq(read(t->ready, &b, 1), 1, "the target died before it was non-dumpable");
}

static void target_stop(struct target *t)
{
    kill(t->pid, SIGKILL);
    waitpid(t->pid, NULL, 0);
    close(t->go);
    close(t->ready);
}

/* Exit codes of the attacker: 0 all three calls got past the access check,
 * 10 + n: that many were refused with the access check's errno, 1..9: the
 * attacker could not get into place. */
static int attacker(pid_t target)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", target);
    int ns = open(path, O_RDONLY | O_CLOEXEC);
    if (ns < 0 || setns(ns, CLONE_NEWUSER) < 0)
        return 1;
    if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
        return 2;
    /* root of the target's namespace, CAP_SYS_PTRACE effective there */
    if (prctl(PR_CAPBSET_READ, 19 /* CAP_SYS_PTRACE */, 0, 0, 0) != 1)
        return 3;
    int refused = 0;
    snprintf(path, sizeof(path), "/proc/%d/mem", target);
    int mem = open(path, O_RDONLY | O_CLOEXEC);
    if (mem < 0 && errno == EACCES)
        refused++;
    else if (mem < 0)
        return 4;
    char buf[8];
    struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x1000, sizeof(buf)};
    /* past the check, address 0x1000 is unmapped: EFAULT */
    ssize_t r = process_vm_readv(target, &local, 1, &remote, 1, 0);
    if (r < 0 && errno == EPERM)
        refused++;
    else if (!(r < 0 && errno == EFAULT))
        return 5;
    long k = syscall(SYS_kcmp, getpid(), target, KCMP_VM, 0, 0);
    if (k < 0 && errno == EPERM)
        refused++;
    else if (k < 0)
        return 6;
    return refused == 0 ? 0 : 10 + refused;
}

static int run_attacker(pid_t target)
{
    pid_t a = fork();
    cr_assert_geq(a, 0);
    if (a == 0)
        _exit(attacker(target));
    int st;
    cr_assert_eq(waitpid(a, &st, 0), a);
    cr_assert(WIFEXITED(st), "the attacker died (status %#x)", st);
    return WEXITSTATUS(st);
}

static void need_root(void)
{
    /* writing another user's id maps and joining its namespace take host root */
    cr_assert_eq(geteuid(), 0, "these kernel checks need host root (CI runs as root)");
}

Test(mm_userns, exec_before_the_new_user_namespace_keeps_its_root_out)
{
    need_root();
    struct target t = target_start(false);
    target_wait_ready(&t);
    int code = run_attacker(t.pid);
    target_stop(&t);
    cr_assert_eq(code, 13,
                 "a root of the new user namespace with CAP_SYS_PTRACE must fail open "
                 "/proc/PID/mem, process_vm_readv and kcmp on a non-dumpable task exec'd in "
                 "the host's namespace (attacker exit %d)",
                 code);
}

/* The control: the same attacker passes all three checks against a task
 * exec'd inside the namespace, which is what the sentry is before the wall. */
Test(mm_userns, exec_inside_the_new_user_namespace_lets_its_root_in)
{
    need_root();
    cr_assert_eq(access("/usr/bin/python3", X_OK), 0, "the control needs /usr/bin/python3");
    struct target t = target_start(true);
    target_wait_ready(&t);
    int code = run_attacker(t.pid);
    target_stop(&t);
    cr_assert_eq(code, 0,
                 "a non-dumpable task exec'd inside the namespace is open to its root "
                 "with CAP_SYS_PTRACE (attacker exit %d)",
                 code);
}
