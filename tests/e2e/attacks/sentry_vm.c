/* process_vm_readv, process_vm_writev and kcmp from a container-tier OCI
 * guest against every task of its sandbox that is not its own: the sentry
 * (pid 1) and each of its threads. container.policy lets these calls reach
 * the kernel when the OCI profile (or its absence) allows them, as runc does;
 * what must stop them is the kernel's ptrace access check
 * (__ptrace_may_access), where the guest's Landlock domain denies any task
 * outside it. The guest's own children are in its domain: reading them must
 * work, or nothing here reached that check.
 *   ptrace_cap_*   as container root with CAP_SYS_PTRACE (it owns the
 *                  sentry's user namespace, so the uid and dumpable checks
 *                  let it through: Landlock alone stands)
 *   sentry_uid_*   as the sentry's own real uid and gid (65536) with
 *                  CAP_SYS_PTRACE effective
 * The remote address is 0x1000, below mmap_min_addr: a call that passes the
 * access check fails with EFAULT and never touches the sentry's memory. */
#include <dirent.h>
#include <signal.h>
#include <linux/capability.h>
#include <linux/kcmp.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attack.h"

#define SENTRY_ID 65536 /* sentry/ids-internal.h, BH_SENTRY_ID */
#define MAX_TARGETS 256

static volatile unsigned long marker = 0x5eed5eedUL;

/* Every tid in /proc but those of the processes in ours[3] (the guest's own,
 * in its Landlock domain). */
static size_t other_tasks(const pid_t ours[3], pid_t *out, size_t max)
{
    size_t n = 0;
    DIR *procs = opendir("/proc");
    if (procs == NULL)
        return 0;
    struct dirent *p;
    while ((p = readdir(procs)) != NULL) {
        pid_t pid = (pid_t)atoi(p->d_name);
        if (pid <= 0 || pid == ours[0] || pid == ours[1] || pid == ours[2])
            continue;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        DIR *tasks = opendir(path);
        if (tasks == NULL)
            continue;
        struct dirent *t;
        while ((t = readdir(tasks)) != NULL && n < max) {
            pid_t tid = (pid_t)atoi(t->d_name);
            if (tid > 0)
                out[n++] = tid;
        }
        closedir(tasks);
    }
    closedir(procs);
    return n;
}

/* One verdict for a call against every target: refused only if each target
 * was refused by the access check (EPERM, or ESRCH for a thread gone
 * meanwhile); anything else, EFAULT included, means the check let it by. */
struct tally {
    const char *name;
    size_t refused;
    long escaped_ret;
    int escaped_errno;
    pid_t escaped_tid;
    int last_errno;
};

static void tally_add(struct tally *t, pid_t tid, long ret, int err)
{
    if (ret < 0 && (err == EPERM || err == ESRCH)) {
        t->refused++;
        t->last_errno = err;
    } else if (t->escaped_tid == 0) {
        t->escaped_tid = tid;
        t->escaped_ret = ret;
        t->escaped_errno = ret < 0 ? err : 0;
    }
}

static void tally_print(const struct tally *t, size_t targets)
{
    if (targets == 0)
        attack_line(t->name, "inconclusive", "no task of the sandbox but our own is visible");
    else if (t->escaped_tid != 0)
        attack_line(t->name, "ESCAPED", "tid %d: returned %ld (%s): past the access check",
                    (int)t->escaped_tid, t->escaped_ret,
                    t->escaped_errno ? attack_errname(t->escaped_errno) : "no error");
    else
        attack_line(t->name, "refused", "%s for all %zu tasks", attack_errname(t->last_errno),
                    targets);
}

/* The guest's own child is in its domain: the calls must reach it. */
static void controls(const char *prefix, pid_t child)
{
    char name[64];
    unsigned long got = 0;
    struct iovec local = {&got, sizeof(got)};
    struct iovec remote = {(void *)&marker, sizeof(marker)};
    long r = syscall(SYS_process_vm_readv, child, &local, 1, &remote, 1, 0);
    snprintf(name, sizeof(name), "%s_control_vm_readv", prefix);
    if (r != (long)sizeof(got) || got != marker)
        attack_line(name, "inconclusive",
                    "reading our own child returned %ld (%s): the call never reached the kernel's "
                    "access check",
                    r, r < 0 ? attack_errname(errno) : "short");
    else
        printf("control %s ok\n", name);
    r = syscall(SYS_kcmp, getpid(), child, KCMP_FILES, 0, 0);
    snprintf(name, sizeof(name), "%s_control_kcmp", prefix);
    if (r < 0)
        attack_line(name, "inconclusive",
                    "comparing with our own child failed (%s): the call never reached the "
                    "kernel's access check",
                    attack_errname(errno));
    else
        printf("control %s ok\n", name);
}

static void attack_all(const char *prefix, const pid_t ours[3])
{
    pid_t tids[MAX_TARGETS];
    size_t n = other_tasks(ours, tids, MAX_TARGETS);
    char names[4][64];
    struct tally t[4] = {{0}};
    static const char *const calls[] = {"vm_readv", "vm_writev", "kcmp_vm", "kcmp_file"};
    for (int i = 0; i < 4; i++) {
        snprintf(names[i], sizeof(names[i]), "%s_%s", prefix, calls[i]);
        t[i].name = names[i];
    }
    unsigned long buf = 0;
    struct iovec local = {&buf, sizeof(buf)};
    struct iovec remote = {(void *)0x1000, sizeof(buf)};
    for (size_t i = 0; i < n; i++) {
        long r = syscall(SYS_process_vm_readv, tids[i], &local, 1, &remote, 1, 0);
        tally_add(&t[0], tids[i], r, errno);
        r = syscall(SYS_process_vm_writev, tids[i], &local, 1, &remote, 1, 0);
        tally_add(&t[1], tids[i], r, errno);
        r = syscall(SYS_kcmp, tids[i], getpid(), KCMP_VM, 0, 0);
        tally_add(&t[2], tids[i], r, errno);
        r = syscall(SYS_kcmp, getpid(), tids[i], KCMP_FILE, 0, 0);
        tally_add(&t[3], tids[i], r, errno);
    }
    for (int i = 0; i < 4; i++)
        tally_print(&t[i], n);
}

/* A child in the guest's own Landlock domain, waiting to be read. */
static pid_t idle_child(void)
{
    pid_t p = fork();
    if (p == 0) {
        for (;;)
            pause();
    }
    return p;
}

static void end_child(pid_t p)
{
    if (p > 0) {
        kill(p, SIGKILL);
        waitpid(p, NULL, 0);
    }
}

/* Takes the sentry's real ids (what the access check compares, REALCREDS)
 * keeping CAP_SYS_PTRACE effective: guests' securebits lock KEEP_CAPS off,
 * but a saved uid of 0 keeps the permitted set through the change. On
 * failure, the step that failed. */
static const char *become_sentry_uid_with_ptrace(void)
{
    if (setresgid(SENTRY_ID, SENTRY_ID, SENTRY_ID) < 0)
        return "setresgid";
    if (setresuid(SENTRY_ID, SENTRY_ID, 0) < 0)
        return "setresuid";
    struct __user_cap_header_struct h = {_LINUX_CAPABILITY_VERSION_3, 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return "capget";
    d[CAP_SYS_PTRACE / 32].effective |= 1u << (CAP_SYS_PTRACE % 32);
    if (syscall(SYS_capset, &h, d) < 0)
        return "capset";
    return NULL;
}

int main(void)
{
    attack_require_sandbox();
    setvbuf(stdout, NULL, _IONBF, 0);
    pid_t child = idle_child();
    controls("ptrace_cap", child);
    attack_all("ptrace_cap", (pid_t[3]){getpid(), child, 0});
    end_child(child);
    pid_t guest = getpid();
    pid_t p = fork();
    if (p == 0) {
        const char *failed = become_sentry_uid_with_ptrace();
        if (failed != NULL) {
            attack_line("sentry_uid", "inconclusive",
                        "could not take uid %d keeping CAP_SYS_PTRACE: %s: %s", SENTRY_ID, failed,
                        attack_errname(errno));
            _exit(0);
        }
        pid_t c = idle_child();
        controls("sentry_uid", c);
        attack_all("sentry_uid", (pid_t[3]){getpid(), c, guest});
        end_child(c);
        _exit(0);
    }
    waitpid(p, NULL, 0);
    attack_done();
    return 0;
}
