/* Attacks on the sentry as pid 1 from a container-tier OCI guest that holds
 * Docker's default capabilities plus CAP_SYS_PTRACE (docker --cap-add
 * SYS_PTRACE, common for debuggers). The kernel-tier attacks of sentry.c
 * meet the broker and kernel.policy; here only the kernel's own checks, the
 * guest's Landlock domain (the sentry is outside it) and container.policy
 * stand in the way.
 *   ptrace_cap_*   as container root with CAP_SYS_PTRACE: the sentry's
 *                  memory, fds and binary (CVE-2019-5736 reopened /proc/1/exe
 *                  for writing)
 *   sentry_uid_*   as the sentry's own uid and gid (65536, which CAP_SETUID
 *                  may take): its limits, niceness, CPUs, I/O priority,
 *                  scheduling class, and a pidfd on it */
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attack.h"

#define SENTRY_ID 65536 /* sentry/ids-internal.h, BH_SENTRY_ID */

static void open_result(const char *name, const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC);
    attack_result(name, fd, errno);
    if (fd >= 0)
        close(fd);
}

static void as_root_with_ptrace(void)
{
    open_result("ptrace_cap_mem_write", "/proc/1/mem", O_RDWR);
    open_result("ptrace_cap_mem_read", "/proc/1/mem", O_RDONLY);
    open_result("ptrace_cap_exe_open", "/proc/1/exe", O_RDONLY);
    open_result("ptrace_cap_environ", "/proc/1/environ", O_RDONLY);
    char buf[256];
    ssize_t n = readlink("/proc/1/root", buf, sizeof(buf));
    attack_result("ptrace_cap_root_link", n, errno);
    DIR *d = opendir("/proc/1/fd");
    int e = errno;
    long fds = -1;
    if (d != NULL) {
        /* A listing alone names fd numbers; opening one is the escape. */
        struct dirent *de;
        fds = -1;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char p[300];
            snprintf(p, sizeof(p), "/proc/1/fd/%s", de->d_name);
            int fd = open(p, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                fds = fd;
                close(fd);
                break;
            }
            e = errno;
        }
        closedir(d);
    }
    attack_result("ptrace_cap_fd_open", fds, e);
    long r = syscall(SYS_ptrace, 16 /* PTRACE_ATTACH */, 1, 0, 0);
    attack_result("ptrace_cap_attach", r, errno);
}

static int sentry_ioclass(void);

/* pid 1's nice value (field 19 of /proc/1/stat), or -100 when unreadable. */
static int sentry_nice(void)
{
    char buf[1024];
    FILE *f = fopen("/proc/1/stat", "re");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')');
    int field = 2, nice = -100;
    for (; p && *p; p++)
        if (*p == ' ' && ++field == 19)
            nice = atoi(p + 1);
    return nice;
}

/* ESCAPED when the sentry's niceness or I/O class moved from what they were
 * just before the call, whatever the call returned; otherwise judged by the
 * return value. */
static void renice_result(const char *name, long ret, int err, int nice0, int class0)
{
    int nice = sentry_nice(), class = sentry_ioclass();
    if (nice0 == -100 || nice == -100)
        attack_line(name, "inconclusive", "cannot read the sentry's nice value");
    else if (nice != nice0 || class != class0)
        attack_line(name, "ESCAPED", "the sentry's nice %d -> %d, I/O class %d -> %d", nice0, nice,
                    class0, class);
    else
        attack_result(name, ret, err);
}

static int sentry_ioclass(void)
{
    return (int)syscall(SYS_ioprio_get, 1, 1) >> 13;
}

#define RENICE(name, call)                                                                         \
    do {                                                                                           \
        int nice0_ = sentry_nice(), class0_ = sentry_ioclass();                                    \
        long r_ = (call);                                                                          \
        renice_result(name, r_, errno, nice0_, class0_);                                           \
    } while (0)

static void as_sentry_uid(void)
{
    if (setresgid(SENTRY_ID, SENTRY_ID, SENTRY_ID) < 0 ||
        setresuid(SENTRY_ID, SENTRY_ID, SENTRY_ID) < 0) {
        attack_line("sentry_uid", "inconclusive", "could not take uid %d: %s", SENTRY_ID,
                    attack_errname(errno));
        return;
    }
    struct rlimit lim = {4, 4};
    attack_result("sentry_uid_prlimit", syscall(SYS_prlimit64, 1, RLIMIT_NOFILE, &lim, NULL),
                  errno);
    attack_result("sentry_uid_setpriority", setpriority(PRIO_PROCESS, 1, 19), errno);
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    CPU_SET(0, &cpus);
    attack_result("sentry_uid_affinity", sched_setaffinity(1, sizeof(cpus), &cpus), errno);
    struct sched_param sp = {0};
    attack_result("sentry_uid_scheduler", sched_setscheduler(1, SCHED_IDLE, &sp), errno);
    /* IOPRIO_WHO_PROCESS, class idle */
    attack_result("sentry_uid_ioprio", syscall(SYS_ioprio_set, 1, 1, 3 << 13), errno);
    attack_result("sentry_uid_pidfd_open", syscall(SYS_pidfd_open, 1, 0), errno);
    /* The same through the forms that name a group or a uid, not pid 1: the
     * sentry leads process group 1, and uid SENTRY_ID (0: the caller's own,
     * now the sentry's) names it too. The kernel may renice part of a group
     * and still fail the call, so the verdict is the sentry's niceness (and
     * I/O class) read back, not the return value alone. */
    RENICE("sentry_uid_prio_pgrp", setpriority(PRIO_PGRP, 1, 19));
    RENICE("sentry_uid_prio_user", setpriority(PRIO_USER, SENTRY_ID, 19));
    RENICE("sentry_uid_prio_user_self", setpriority(PRIO_USER, 0, 19));
    /* IOPRIO_WHO_PGRP (2) and IOPRIO_WHO_USER (3), class idle */
    RENICE("sentry_uid_ioprio_pgrp", syscall(SYS_ioprio_set, 2, 1, 3 << 13));
    RENICE("sentry_uid_ioprio_user", syscall(SYS_ioprio_set, 3, SENTRY_ID, 3 << 13));
    RENICE("sentry_uid_ioprio_user_self", syscall(SYS_ioprio_set, 3, 0, 3 << 13));
    /* Joining the sentry's group would make PRIO_PGRP 0 name it. */
    attack_result("sentry_uid_join_pgrp", setpgid(0, 1), errno);
}

int main(void)
{
    attack_require_sandbox();
    setvbuf(stdout, NULL, _IONBF, 0);
    as_root_with_ptrace();
    /* As the container's root, with CAP_SYS_NICE when the config grants it
     * (docker --cap-add SYS_NICE): the kernel then lets a renice of any
     * process of the namespace through, the sentry's too. */
    RENICE("root_prio_pgrp", setpriority(PRIO_PGRP, 1, 19));
    RENICE("root_prio_user", setpriority(PRIO_USER, SENTRY_ID, 19));
    RENICE("root_ioprio_user", syscall(SYS_ioprio_set, 3, SENTRY_ID, 3 << 13));
    pid_t p = fork();
    if (p == 0) {
        as_sentry_uid();
        _exit(0);
    }
    waitpid(p, NULL, 0);
    attack_done();
    return 0;
}
