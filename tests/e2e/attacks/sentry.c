/* Escape attempts against the sentry (pid 1 of the sandbox) and the runtime
 * binaries: ptrace of it, its memory, signals to it, and overwriting the
 * binary behind /proc/1/exe or /proc/self/exe (the runc CVE-2019-5736 path),
 * also through an O_PATH fd reopened via /proc/self/fd. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "attack.h"

static void try_write_open(const char *name, const char *path)
{
    errno = 0;
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        attack_line(name, "ESCAPED", "%s opened for writing", path);
        return;
    }
    attack_result(name, -1, errno);
}

static void try_reopen(const char *name, const char *path)
{
    int p = open(path, O_PATH | O_CLOEXEC);
    if (p < 0) {
        attack_line(name, "refused", "O_PATH: %s", attack_errname(errno));
        return;
    }
    char via[64];
    snprintf(via, sizeof(via), "/proc/self/fd/%d", p);
    errno = 0;
    int fd = open(via, O_WRONLY | O_CLOEXEC);
    int e = errno;
    close(p);
    if (fd >= 0) {
        close(fd);
        attack_line(name, "ESCAPED", "%s reopened for writing through %s", path, via);
        return;
    }
    attack_result(name, -1, e);
}

int main(void)
{
    attack_require_sandbox();
    long r;
    errno = 0;
    r = ptrace(PTRACE_ATTACH, 1, 0, 0);
    attack_result("ptrace_attach_sentry", r, errno);
    errno = 0;
    r = ptrace(PTRACE_SEIZE, 1, 0, 0);
    attack_result("ptrace_seize_sentry", r, errno);

    errno = 0;
    int fd = open("/proc/1/mem", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    attack_result("proc1_mem_open", fd, errno);
    char buf[16];
    struct iovec local = {buf, sizeof(buf)}, remote = {(void *)0x400000, sizeof(buf)};
    errno = 0;
    r = syscall(SYS_process_vm_readv, 1, &local, 1, &remote, 1, 0);
    attack_result("process_vm_readv_sentry", r, errno);
    errno = 0;
    fd = open("/proc/1/environ", O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        close(fd);
    attack_result("proc1_environ_open", fd, errno);

    /* The kernel drops unhandled signals to a pid namespace's init without an
     * error, so only an explicit refusal counts; we are still alive after, so
     * the sentry is too (its death would have killed us). */
    static const int sigs[] = {SIGTERM, SIGKILL, SIGSTOP, SIGUSR1};
    static const char *const names[] = {"kill_sentry_term", "kill_sentry_kill", "kill_sentry_stop",
                                        "kill_sentry_usr1"};
    for (int i = 0; i < 4; i++) {
        errno = 0;
        r = kill(1, sigs[i]);
        attack_result(names[i], r, errno);
    }
    errno = 0;
    r = syscall(SYS_tgkill, 1, 1, SIGKILL);
    attack_result("tgkill_sentry", r, errno);

    try_write_open("write_proc1_exe", "/proc/1/exe");
    try_write_open("write_proc_self_exe", "/proc/self/exe");
    try_reopen("reopen_proc1_exe", "/proc/1/exe");
    try_reopen("reopen_proc_self_exe", "/proc/self/exe");

    attack_done();
    return 0;
}
