/* socket-cap.c: owns the container tier's bound on what the sockets no
 * cgroup charges (NETLINK_ROUTE, and ICMP/ICMPv6 datagram "ping" sockets)
 * can pin of the host's kernel memory.
 *
 * A netlink socket's queue of replies, acks and events is memory no cgroup
 * charges: at most its receive buffer plus one message, and SO_RCVBUF raises
 * that to twice net.core.rmem_max (8 MiB here; 100 sockets held 800 MiB
 * under a 64 MiB limit when the tier allowed them unbounded). Refusing the
 * family cost docker users `ip`, getifaddrs and if_nameindex (Python's
 * socket.if_nameindex(), Node's os.networkInterfaces(), `hostname -I`).
 *
 * So the container tier's policy notifies socket(AF_NETLINK) and
 * setsockopt's SO_RCVBUF/SO_SNDBUF numbers and their FORCE forms, and the
 * sentry answers them here:
 * - socket: made by the sentry in the guest's network namespace (which must
 *   be the sentry's own), its buffers lowered to the cap if the host's
 *   defaults are above it, registered in an epoll set, handed over with
 *   ADDFD (atomically answering the call). An epoll item holds no reference
 *   and goes when its file's last reference does, wherever the references
 *   are (dups, forks, SCM_RIGHTS in flight), so the set's size counted from
 *   /proc/self/fdinfo is exactly the live sockets; past the cap the call
 *   fails with ENOBUFS.
 * - setsockopt: the value is read once from the guest, the guest's socket
 *   taken with pidfd_getfd and the option set on that copy (never CONTINUE:
 *   another thread could put a netlink socket at the fd number between the
 *   check and the kernel's own look-up). On a netlink socket the size is
 *   clamped to the cap, as the kernel clamps to rmem_max (SO_RCVBUF never
 *   fails for a large value); any other socket gets exactly what the kernel
 *   would give it. The FORCE forms need CAP_NET_ADMIN: the guest's is
 *   checked, the sentry's own is what the kernel then checks.
 * Every other netlink family is refused here (EPERM), and the sentry's own
 * policy allows it only NETLINK_ROUTE.
 *
 * ICMP and ICMPv6 datagram ("ping") sockets have the same problem (their
 * reply queues are charged to no cgroup: 30 held 240 MiB under a 64 MiB
 * limit) and the same answer: the sentry makes them in the guest's network
 * namespace, counts them in a second epoll set (BH_PING_CAP_SOCKETS), lowers
 * their buffers and clamps SO_RCVBUF/SO_SNDBUF on them. The kernel lets a
 * caller make one only if its effective gid or one of its supplementary
 * groups lies within net.ipv4.ping_group_range (also for ICMPv6); since the
 * socket is made with the sentry's credentials, the sentry checks the
 * guest's first, against the range of the namespace both are in, read by
 * the sentry in it (so both ranges and the guest's gids are read in the
 * sentry's user namespace), and answers EACCES as the kernel would. The
 * kernel then checks the sentry's own gid: a range that holds the guest's
 * gid but not the sentry's (0 in the sandbox) fails with EACCES, closed.
 * Raw sockets keep their answer (the policy refuses them): iputils' ping
 * falls back to a ping socket when a raw one is refused. */
#include "socket-cap-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/capability.h>
#include <linux/netlink.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cleanup.h"
#include "kernel-compat.h"
#include "proc-status.h"

#if defined(__x86_64__)
#define NL_NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NL_NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "socket-cap.c: unsupported architecture"
#endif

void bh_socket_cap_init(struct bh_socket_cap *cap, int proc_fd, unsigned max_sockets)
{
    cap->proc_fd = proc_fd;
    cap->max_sockets = max_sockets;
    cap->max_ping_sockets = BH_PING_CAP_SOCKETS;
    cap->track_fd = proc_fd >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
    cap->ping_track_fd = proc_fd >= 0 ? epoll_create1(EPOLL_CLOEXEC) : -1;
}

void bh_socket_cap_free(struct bh_socket_cap *cap)
{
    bh_closep(&cap->track_fd);
    bh_closep(&cap->ping_track_fd);
    cap->proc_fd = -1;
}

int bh_socket_cap_live(const struct bh_socket_cap *cap, int track_fd)
{
    if (track_fd < 0 || cap->proc_fd < 0)
        return -1;
    char path[48];
    snprintf(path, sizeof(path), "self/fdinfo/%d", track_fd);
    cleanup_close int fd = openat(cap->proc_fd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    /* One "tfd:" line per item; read whole lines across reads. */
    char buf[4096];
    size_t have = 0;
    int n = 0;
    for (;;) {
        ssize_t r = read(fd, buf + have, sizeof(buf) - 1 - have);
        if (r < 0)
            return -1;
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            if (strncmp(line, "tfd:", 4) == 0)
                n++;
            line = nl + 1;
        }
        size_t rest = have - (size_t)(line - buf);
        if (r == 0 || rest == sizeof(buf) - 1)
            return r == 0 ? n : -1;
        memmove(buf, line, rest);
        have = rest;
    }
}

bool bh_socket_cap_wants(const struct seccomp_notif *req)
{
    return req->data.arch == NL_NATIVE_ARCH &&
           (req->data.nr == __NR_socket || req->data.nr == __NR_setsockopt);
}

static bool still_waiting(int listener, uint64_t id)
{
    return ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

/* The guest's thread is in the sentry's network namespace. */
static bool same_netns(const struct bh_socket_cap *cap, pid_t tid)
{
    char path[48];
    struct stat theirs, ours;
    snprintf(path, sizeof(path), "%d/ns/net", tid);
    return fstatat(cap->proc_fd, path, &theirs, 0) == 0 &&
           fstatat(cap->proc_fd, "thread-self/ns/net", &ours, 0) == 0 &&
           theirs.st_dev == ours.st_dev && theirs.st_ino == ours.st_ino;
}

static void lower_to_cap(int s, int opt)
{
    int have = 0;
    socklen_t len = sizeof(have);
    if (getsockopt(s, SOL_SOCKET, opt, &have, &len) == 0 && have > (int)BH_SOCKET_CAP_BUFFER) {
        int want = (int)BH_SOCKET_CAP_BUFFER / 2;
        setsockopt(s, SOL_SOCKET, opt, &want, sizeof(want));
    }
}

/* The guest thread's /proc status, NUL-terminated, into buf; false if it
 * cannot be read (the thread is gone). */
static bool read_status(const struct bh_socket_cap *cap, pid_t tid, char *buf, size_t size)
{
    cleanup_close int fd = bh_status_open(cap->proc_fd, tid);
    return fd >= 0 && bh_status_read(fd, buf, size) > 0;
}

/* What the kernel's ping_init_sock checks, for the guest thread: its
 * effective gid, or one of its supplementary groups, within the range of
 * net.ipv4.ping_group_range of the network namespace the sentry is in (the
 * caller checked it is the guest's). */
static bool guest_may_ping(const struct bh_socket_cap *cap, pid_t tid)
{
    char range[64];
    unsigned long lo, hi;
    {
        cleanup_close int fd =
            openat(cap->proc_fd, "sys/net/ipv4/ping_group_range", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return false;
        ssize_t n = read(fd, range, sizeof(range) - 1);
        if (n <= 0)
            return false;
        range[n] = '\0';
    }
    if (sscanf(range, "%lu %lu", &lo, &hi) != 2 || lo > hi)
        return false;
    char status[8192], field[4096];
    if (!read_status(cap, tid, status, sizeof(status)))
        return false;
    unsigned long real, eff;
    if (bh_status_field(status, "Gid", field, sizeof(field)) == NULL ||
        sscanf(field, "%lu %lu", &real, &eff) != 2)
        return false;
    if (eff >= lo && eff <= hi)
        return true;
    if (bh_status_field(status, "Groups", field, sizeof(field)) == NULL)
        return false;
    char *save = NULL;
    for (char *g = strtok_r(field, " \t", &save); g != NULL; g = strtok_r(NULL, " \t", &save)) {
        unsigned long gid = strtoul(g, NULL, 10);
        if (gid >= lo && gid <= hi)
            return true;
    }
    return false;
}

/* Which cap a socket() call falls under: its epoll set and size, or false
 * with the errno of a refusal. */
static bool socket_kind(struct bh_socket_cap *cap, int domain, int type, int protocol,
                        int *track_fd, unsigned *max, int *refusal)
{
    *refusal = -EPERM;
    if (domain == AF_NETLINK && protocol == NETLINK_ROUTE) {
        *track_fd = cap->track_fd;
        *max = cap->max_sockets;
        return true;
    }
    /* Raw ICMP is not notified, but answer it as the policy would. */
    if ((type & 0xf) == SOCK_DGRAM && ((domain == AF_INET && protocol == IPPROTO_ICMP) ||
                                       (domain == AF_INET6 && protocol == IPPROTO_ICMPV6))) {
        *track_fd = cap->ping_track_fd;
        *max = cap->max_ping_sockets;
        return true;
    }
    return false;
}

static int answer_socket(struct bh_socket_cap *cap, const struct seccomp_notif *req, int listener,
                         struct seccomp_notif_resp *resp)
{
    int domain = (int)req->data.args[0], type = (int)req->data.args[1];
    int protocol = (int)req->data.args[2];
    int track_fd;
    unsigned max;
    if (!socket_kind(cap, domain, type, protocol, &track_fd, &max, &resp->error))
        return 0;
    if (track_fd < 0 || !same_netns(cap, (pid_t)req->pid)) {
        resp->error = -EPERM;
        return 0;
    }
    if (domain != AF_NETLINK && !guest_may_ping(cap, (pid_t)req->pid)) {
        resp->error = -EACCES;
        return 0;
    }
    int live = bh_socket_cap_live(cap, track_fd);
    if (live < 0 || (unsigned)live >= max) {
        resp->error = live < 0 ? -EPERM : -ENOBUFS;
        return 0;
    }
    cleanup_close int s = socket(domain, (type & ~SOCK_CLOEXEC) | SOCK_CLOEXEC, protocol);
    if (s < 0) {
        resp->error = -errno;
        return 0;
    }
    lower_to_cap(s, SO_RCVBUF);
    lower_to_cap(s, SO_SNDBUF);
    struct epoll_event ev = {.events = 0};
    if (epoll_ctl(track_fd, EPOLL_CTL_ADD, s, &ev) < 0) {
        resp->error = -ENOBUFS;
        return 0;
    }
    if (!still_waiting(listener, req->id)) {
        resp->error = -EINTR;
        return 0;
    }
    struct seccomp_notif_addfd add = {.id = req->id,
                                      .flags = SECCOMP_ADDFD_FLAG_SEND,
                                      .srcfd = (uint32_t)s,
                                      .newfd_flags = (type & SOCK_CLOEXEC) ? O_CLOEXEC : 0};
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add) >= 0)
        return 1;
    /* Not installed (EMFILE, or the caller is gone): answer with why; the
     * socket goes with our fd, and its epoll item with it. */
    resp->error = -errno;
    return 0;
}

/* CAP_NET_ADMIN in the guest thread's effective set, read while it waits in
 * this call (its credentials cannot change meanwhile). */
static bool guest_has_net_admin(const struct bh_socket_cap *cap, pid_t tid)
{
    char status[4096], eff[32];
    if (!read_status(cap, tid, status, sizeof(status)))
        return false;
    if (bh_status_field(status, "CapEff", eff, sizeof(eff)) == NULL)
        return false;
    unsigned long long bits = strtoull(eff, NULL, 16);
    return (bits >> CAP_NET_ADMIN) & 1;
}

static int answer_setsockopt(struct bh_socket_cap *cap, const struct seccomp_notif *req,
                             int listener, struct seccomp_notif_resp *resp)
{
    int gfd = (int)req->data.args[0], level = (int)req->data.args[1];
    int opt = (int)req->data.args[2];
    uint64_t optval = req->data.args[3];
    unsigned optlen = (unsigned)req->data.args[4];
    bool force = opt == SO_RCVBUFFORCE || opt == SO_SNDBUFFORCE;
    if (opt != SO_RCVBUF && opt != SO_SNDBUF && opt != SO_RCVBUFFORCE && opt != SO_SNDBUFFORCE) {
        resp->error = -ENOSYS;
        return 0;
    }
    /* The policy notifies these numbers at every level (it cannot say
     * "level and optname" without growing past its limit). No option of
     * another level sets a socket's buffer sizes, whatever socket the fd
     * names when the kernel runs it, so it runs as asked. */
    if (level != SOL_SOCKET) {
        resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
        return 0;
    }
    if (optlen < sizeof(int)) {
        resp->error = -EINVAL;
        return 0;
    }
    int val;
    struct iovec local = {&val, sizeof(val)}, remote = {(void *)(uintptr_t)optval, sizeof(val)};
    if (process_vm_readv((pid_t)req->pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(val)) {
        resp->error = -EFAULT;
        return 0;
    }
    cleanup_close int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)req->pid, PIDFD_THREAD);
    if (pidfd < 0) {
        resp->error = -ESRCH;
        return 0;
    }
    cleanup_close int s = (int)syscall(SYS_pidfd_getfd, pidfd, gfd, 0);
    if (s < 0) {
        resp->error = errno == EBADF ? -EBADF : -EPERM;
        return 0;
    }
    /* The fd and the value were the waiting caller's, not a reused pid's. */
    if (!still_waiting(listener, req->id)) {
        resp->error = -EINTR;
        return 0;
    }
    int domain = 0;
    socklen_t len = sizeof(domain);
    if (getsockopt(s, SOL_SOCKET, SO_DOMAIN, &domain, &len) < 0) {
        resp->error = -errno; /* ENOTSOCK, as the kernel would answer */
        return 0;
    }
    if (force && !guest_has_net_admin(cap, (pid_t)req->pid)) {
        resp->error = -EPERM;
        return 0;
    }
    int protocol = 0;
    len = sizeof(protocol);
    bool ping = (domain == AF_INET || domain == AF_INET6) &&
                getsockopt(s, SOL_SOCKET, SO_PROTOCOL, &protocol, &len) == 0 &&
                (protocol == IPPROTO_ICMP || protocol == IPPROTO_ICMPV6);
    if ((domain == AF_NETLINK || ping) && (val < 0 || val > (int)BH_SOCKET_CAP_BUFFER / 2))
        val = (int)BH_SOCKET_CAP_BUFFER / 2;
    if (setsockopt(s, SOL_SOCKET, opt, &val, sizeof(val)) < 0) {
        resp->error = -errno;
        return 0;
    }
    resp->val = 0;
    return 0;
}

int bh_socket_cap_answer(struct bh_socket_cap *cap, const struct seccomp_notif *req, int listener,
                         struct seccomp_notif_resp *resp)
{
    if (req->data.nr == __NR_socket)
        return answer_socket(cap, req, listener, resp);
    return answer_setsockopt(cap, req, listener, resp);
}
