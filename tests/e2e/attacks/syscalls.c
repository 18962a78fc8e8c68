/* Escape attempts through syscalls a guest must never reach the host kernel
 * with: open_by_handle_at, io_uring_setup, bpf, perf_event_open,
 * userfaultfd, keyctl/add_key, a nested user namespace (unshare and clone),
 * mount, TIOCSTI, raw and packet sockets, a netlink socket. */
#include <fcntl.h>
#include <linux/perf_event.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include <linux/if_ether.h>
#include <linux/netlink.h>

#include "attack.h"

#ifndef SYS_io_uring_setup
#define SYS_io_uring_setup 425
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif

static long closing(long r)
{
    if (r >= 0)
        close((int)r);
    return r;
}

int main(void)
{
    attack_require_sandbox();
    long r;

    struct {
        struct file_handle fh;
        unsigned char bytes[128];
    } h = {.fh.handle_bytes = 128};
    int mount_id = 0;
    errno = 0;
    r = name_to_handle_at(AT_FDCWD, "/", &h.fh, &mount_id, 0);
    if (r == 0) {
        errno = 0;
        r = closing(syscall(SYS_open_by_handle_at, AT_FDCWD, &h.fh, O_RDONLY | O_CLOEXEC));
        attack_result("open_by_handle_at", r, errno);
    } else {
        /* Without a handle, a forged one: the call itself must be refused. */
        h.fh.handle_bytes = 8;
        h.fh.handle_type = 1;
        errno = 0;
        r = closing(syscall(SYS_open_by_handle_at, AT_FDCWD, &h.fh, O_RDONLY | O_CLOEXEC));
        attack_result("open_by_handle_at", r, errno);
    }

    uint32_t params[30] = {0};
    errno = 0;
    r = closing(syscall(SYS_io_uring_setup, 8, params));
    attack_result("io_uring_setup", r, errno);

    uint32_t attr[32] = {2 /* array */, 4, 4, 1};
    errno = 0;
    r = closing(syscall(SYS_bpf, 0 /* BPF_MAP_CREATE */, attr, sizeof(attr)));
    attack_result("bpf", r, errno);

    struct perf_event_attr pe = {
        .type = PERF_TYPE_SOFTWARE,
        .size = sizeof(pe),
        .config = PERF_COUNT_SW_TASK_CLOCK,
        .disabled = 1,
        .exclude_kernel = 1,
        .exclude_hv = 1,
    };
    errno = 0;
    r = closing(syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
    attack_result("perf_event_open", r, errno);

    errno = 0;
    r = closing(syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY));
    attack_result("userfaultfd", r, errno);

    errno = 0;
    r = syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3 /* session */, 0);
    attack_result("keyctl", r, errno);

    errno = 0;
    r = syscall(SYS_add_key, "user", "bh-attack", "x", 1, -2 /* process keyring */);
    attack_result("add_key", r, errno);

    pid_t pid = fork();
    if (pid == 0)
        _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : errno);
    int st = 0;
    waitpid(pid, &st, 0);
    attack_result("unshare_newuser", WEXITSTATUS(st) == 0 ? 0 : -1, WEXITSTATUS(st));

    errno = 0;
    r = syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0);
    if (r == 0)
        _exit(0);
    if (r > 0)
        waitpid((pid_t)r, NULL, 0);
    attack_result("clone_newuser", r, errno);

    errno = 0;
    r = mount("none", "/tmp", "tmpfs", 0, NULL);
    attack_result("mount_tmpfs", r, errno);
    errno = 0;
    r = mount("/", "/tmp", NULL, MS_BIND | MS_REC, NULL);
    attack_result("mount_bind", r, errno);

    /* TIOCSTI on a terminal of our own: the pushed byte must not arrive. */
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (master < 0 || grantpt(master) < 0 || unlockpt(master) < 0) {
        attack_line("tiocsti", "refused", "no pty: %s", attack_errname(errno));
    } else {
        int slave = open(ptsname(master), O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        char c = 'x';
        errno = 0;
        r = slave >= 0 ? ioctl(slave, TIOCSTI, &c) : -1;
        int e = errno;
        char got;
        if (r >= 0 || (slave >= 0 && read(slave, &got, 1) == 1))
            attack_line("tiocsti", "ESCAPED", "a byte was pushed into the terminal's input");
        else
            attack_line("tiocsti", "refused", "%s", attack_errname(e));
        if (slave >= 0)
            close(slave);
        close(master);
    }

    errno = 0;
    r = closing(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
    attack_result("raw_socket", r, errno);
    errno = 0;
    r = closing(socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC, htons(ETH_P_ALL)));
    attack_result("packet_socket", r, errno);
    errno = 0;
    r = closing(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
    attack_result("netlink_socket", r, errno);

    attack_done();
    return 0;
}
