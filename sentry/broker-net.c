/* Owns the broker's socket syscalls that carry an address: connect, bind,
 * sendto, sendmsg. The address is copied once, checked, and the call is made
 * by the broker on its own copy of the guest's socket (pidfd_getfd), which
 * is the same open socket, so the guest's fd sees the result.
 *
 * Addresses: AF_UNIX paths resolve inside the guest's root like any path
 * (connect and sendto reach the socket inode through /proc/self/fd/N of the
 * broker's O_PATH fd on it; bind runs in the worker's private cwd set to the
 * confined parent, so getsockname shows the last name only); abstract unix
 * names are allowed: they live in the sandbox's network namespace, which
 * holds nothing of the host (the broker, outside the guest's Landlock
 * domain, does not apply Landlock's abstract-socket scoping between guests
 * of one sandbox). AF_INET/AF_INET6: connect and send only to loopback
 * (127.0.0.0/8, ::1, ::ffff:127.0.0.0/104, and the any-address which means
 * this host), else ENETUNREACH. Other families: EAFNOSUPPORT.
 *
 * Known differences: a unix stream peer sees the sentry's credentials
 * (SO_PEERCRED) rather than the guest's, because the sentry connects;
 * SCM_CREDENTIALS is refused (EPERM) for the same reason; a send larger than
 * 1 MiB is cut to 1 MiB (a short write, as stream sockets allow; no
 * datagram is that large). */
#include "broker-internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"

#define ARG(i) (r->n->data.args[i])
#define ARG_FD(i) ((int)(int32_t)r->n->data.args[i])
#define SEND_CAP (1u << 20)

enum addr_use { USE_CONNECT, USE_BIND, USE_SEND };

static bool inet_loopback(const struct sockaddr_storage *ss, socklen_t len)
{
    if (ss->ss_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
        uint32_t a = ntohl(((const struct sockaddr_in *)ss)->sin_addr.s_addr);
        return (a >> 24) == 127 || a == INADDR_ANY;
    }
    if (ss->ss_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_LOOPBACK(a) || IN6_IS_ADDR_UNSPECIFIED(a))
            return true;
        return IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127;
    }
    return false;
}

/* Checks an address the guest gave and rewrites a unix path into one the
 * broker can use. *keep holds an fd the rewritten address refers to. */
static long check_addr(struct bh_req *r, enum addr_use use, struct sockaddr_storage *ss,
                       socklen_t *len, int *keep)
{
    *keep = -1;
    if (*len < sizeof(sa_family_t))
        return -EINVAL;
    switch (ss->ss_family) {
    case AF_UNSPEC:
        return use == USE_CONNECT ? 0 : -EAFNOSUPPORT;
    case AF_INET:
    case AF_INET6:
        if (use == USE_BIND)
            return 0; /* only lo exists in the sandbox's network namespace */
        if (!inet_loopback(ss, *len)) {
            bh_debug(r, "refused: destination is not loopback");
            return -ENETUNREACH;
        }
        return 0;
    case AF_UNIX:
        break;
    default:
        bh_debug(r, "refused: address family %d", ss->ss_family);
        return -EAFNOSUPPORT;
    }
    struct sockaddr_un *un = (struct sockaddr_un *)ss;
    size_t off = offsetof(struct sockaddr_un, sun_path);
    if (*len <= off || un->sun_path[0] == '\0')
        return 0; /* autobind or abstract: network-namespace scoped */
    char path[sizeof(un->sun_path) + 1];
    size_t plen = *len - off;
    if (plen > sizeof(un->sun_path))
        plen = sizeof(un->sun_path);
    memcpy(path, un->sun_path, plen);
    path[plen] = '\0';
    if (use == USE_BIND) {
        char last[NAME_MAX + 2];
        int pfd = bh_resolve_parent(r, AT_FDCWD, path, last);
        if (pfd < 0)
            return pfd;
        /* This worker's own cwd (unshare(CLONE_FS)): bind by the last name. */
        if (fchdir(pfd) < 0) {
            int e = errno;
            close(pfd);
            return -e;
        }
        *keep = pfd;
        size_t ll = strlen(last);
        if (ll >= sizeof(un->sun_path)) /* cannot be: it came from sun_path */
            return -ENAMETOOLONG;
        memset(un->sun_path, 0, sizeof(un->sun_path));
        memcpy(un->sun_path, last, ll);
        *len = (socklen_t)(off + ll + 1);
        return 0;
    }
    int fd = bh_resolve_open(r, AT_FDCWD, path, O_PATH, 0);
    if (fd < 0)
        return fd;
    *keep = fd;
    memset(un->sun_path, 0, sizeof(un->sun_path));
    snprintf(un->sun_path, sizeof(un->sun_path), "/proc/self/fd/%d", fd);
    *len = (socklen_t)(off + strlen(un->sun_path) + 1);
    return 0;
}

static long read_addr(struct bh_req *r, uint64_t addr, uint64_t len, struct sockaddr_storage *ss)
{
    if ((int64_t)(int32_t)len < 0 || len > sizeof(*ss))
        return -EINVAL;
    memset(ss, 0, sizeof(*ss));
    return bh_mem_read(r, addr, ss, len);
}

static void raise_sigpipe(struct bh_req *r, int flags, long ret)
{
    /* The broker always sends with MSG_NOSIGNAL; the guest gets its SIGPIPE
     * (through its thread pidfd: CAP_KILL, the guest runs as another uid). */
    if (ret == -EPIPE && !(flags & MSG_NOSIGNAL))
        syscall(SYS_pidfd_send_signal, r->g->pidfd, SIGPIPE, NULL, 0);
}

/* Becomes the guest and takes its socket (argument 0), after checking the
 * address it names when there is one (ss not NULL); the socket, or -errno. */
static long guest_socket(struct bh_req *r, enum addr_use use, struct sockaddr_storage *ss,
                         socklen_t *len, int *keep)
{
    if (bh_req_valid(r) < 0)
        return -ESRCH;
    long rc = bh_req_become_guest(r, false);
    if (rc < 0)
        return rc;
    cleanup_close int sock = bh_req_getfd(r, ARG_FD(0));
    if (sock < 0)
        return sock;
    if (ss != NULL && (rc = check_addr(r, use, ss, len, keep)) < 0)
        return rc;
    return steal_fd(&sock);
}

static long do_addr_call(struct bh_req *r, enum addr_use use)
{
    struct sockaddr_storage ss;
    socklen_t len = (socklen_t)ARG(2);
    long rc = read_addr(r, ARG(1), ARG(2), &ss);
    if (rc < 0)
        return rc;
    cleanup_close int keep = -1;
    cleanup_close int sock = (int)guest_socket(r, use, &ss, &len, &keep);
    if (sock < 0)
        return sock;
    if (use == USE_BIND) {
        rc = bind(sock, (struct sockaddr *)&ss, len) < 0 ? -errno : 0;
        return rc;
    }
    bh_blocking_begin();
    rc = connect(sock, (struct sockaddr *)&ss, len) < 0 ? -errno : 0;
    bh_blocking_end();
    return rc;
}

long bh_sys_connect(struct bh_req *r)
{
    return do_addr_call(r, USE_CONNECT);
}

long bh_sys_bind(struct bh_req *r)
{
    return do_addr_call(r, USE_BIND);
}

long bh_sys_sendto(struct bh_req *r)
{
    size_t len = ARG(2);
    int flags = (int)ARG(3);
    if (len > SEND_CAP)
        len = SEND_CAP;
    cleanup_free char *buf = malloc(len ? len : 1);
    if (buf == NULL)
        return -ENOMEM;
    long rc = bh_mem_read(r, ARG(1), buf, len);
    if (rc < 0)
        return rc;
    struct sockaddr_storage ss;
    socklen_t alen = 0;
    bool has_addr = ARG(4) != 0;
    if (has_addr) {
        alen = (socklen_t)ARG(5);
        if ((rc = read_addr(r, ARG(4), ARG(5), &ss)) < 0)
            return rc;
    }
    cleanup_close int keep = -1;
    cleanup_close int sock = (int)guest_socket(r, USE_SEND, has_addr ? &ss : NULL, &alen, &keep);
    if (sock < 0)
        return sock;
    bh_blocking_begin();
    ssize_t n = sendto(sock, buf, len, flags | MSG_NOSIGNAL,
                       has_addr ? (struct sockaddr *)&ss : NULL, alen);
    rc = n < 0 ? -errno : n;
    bh_blocking_end();
    raise_sigpipe(r, flags, rc);
    return rc;
}

/* Control messages: SCM_RIGHTS numbers are the guest's fds, so they are
 * replaced by the broker's copies; SCM_CREDENTIALS cannot be sent for
 * another process. Copies are closed by the caller through fds/nfds. */
static long translate_control(struct bh_req *r, char *ctl, size_t len, int *fds, int *nfds, int max)
{
    struct msghdr mh = {.msg_control = ctl, .msg_controllen = len};
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c != NULL; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_len < CMSG_LEN(0) || c->cmsg_len > (size_t)(ctl + len - (char *)c))
            return -EINVAL;
        if (c->cmsg_level != SOL_SOCKET)
            continue;
        if (c->cmsg_type == SCM_CREDENTIALS)
            return -EPERM;
        if (c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *v = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            if (*nfds == max)
                return -ETOOMANYREFS;
            int fd;
            memcpy(&fd, &v[i], sizeof(fd));
            int copy = bh_req_getfd(r, fd);
            if (copy < 0)
                return -EBADF;
            fds[(*nfds)++] = copy;
            memcpy(&v[i], &copy, sizeof(copy));
        }
    }
    return 0;
}

long bh_sys_sendmsg(struct bh_req *r)
{
    int flags = (int)ARG(2);
    struct msghdr mh;
    long rc = bh_mem_read(r, ARG(1), &mh, sizeof(mh));
    if (rc < 0)
        return rc;
    if (mh.msg_iovlen > 1024)
        return -EMSGSIZE;
    if (mh.msg_controllen > 65536)
        return -ENOBUFS;
    struct sockaddr_storage ss;
    socklen_t alen = mh.msg_namelen;
    bool has_addr = mh.msg_name != NULL;
    if (has_addr && (rc = read_addr(r, (uintptr_t)mh.msg_name, mh.msg_namelen, &ss)) < 0)
        return rc;
    cleanup_free struct iovec *iov = calloc(mh.msg_iovlen ? mh.msg_iovlen : 1, sizeof(*iov));
    if (iov == NULL)
        return -ENOMEM;
    if ((rc = bh_mem_read(r, (uintptr_t)mh.msg_iov, iov, mh.msg_iovlen * sizeof(*iov))) < 0)
        return rc;
    size_t total = 0;
    size_t used = 0;
    for (; used < mh.msg_iovlen && total < SEND_CAP; used++) {
        if (iov[used].iov_len > SEND_CAP - total)
            iov[used].iov_len = SEND_CAP - total;
        total += iov[used].iov_len;
    }
    cleanup_free char *data = malloc(total ? total : 1);
    cleanup_free char *ctl = malloc(mh.msg_controllen ? mh.msg_controllen : 1);
    if (data == NULL || ctl == NULL)
        return -ENOMEM;
    if (total > 0) {
        struct iovec local = {data, total};
        ssize_t n = process_vm_readv(r->n->pid, &local, 1, iov, used, 0);
        if (n < 0 || (size_t)n != total)
            return -EFAULT;
    }
    if (mh.msg_controllen > 0 &&
        (rc = bh_mem_read(r, (uintptr_t)mh.msg_control, ctl, mh.msg_controllen)) < 0)
        return rc;
    cleanup_close int keep = -1;
    cleanup_close int sock = (int)guest_socket(r, USE_SEND, has_addr ? &ss : NULL, &alen, &keep);
    if (sock < 0)
        return sock;
    int fds[253];
    int nfds = 0;
    rc = mh.msg_controllen ? translate_control(r, ctl, mh.msg_controllen, fds, &nfds, 253) : 0;
    if (rc == 0) {
        struct iovec one = {data, total};
        struct msghdr out = {
            .msg_name = has_addr ? &ss : NULL,
            .msg_namelen = has_addr ? alen : 0,
            .msg_iov = &one,
            .msg_iovlen = 1,
            .msg_control = mh.msg_controllen ? ctl : NULL,
            .msg_controllen = mh.msg_controllen,
        };
        bh_blocking_begin();
        ssize_t n = sendmsg(sock, &out, flags | MSG_NOSIGNAL);
        rc = n < 0 ? -errno : n;
        bh_blocking_end();
        raise_sigpipe(r, flags, rc);
    }
    for (int i = 0; i < nfds; i++)
        close(fds[i]);
    return rc;
}
