/* Private to the core: the container tier's per-sandbox bound on the kernel
 * memory NETLINK_ROUTE and ICMP datagram ("ping") sockets can pin
 * (socket-cap.c), served through the AIO cap's listener (aio-cap.c). */
#ifndef BH_SOCKET_CAP_INTERNAL_H
#define BH_SOCKET_CAP_INTERNAL_H

#include <linux/seccomp.h>
#include <stdbool.h>

/* Live NETLINK_ROUTE sockets per sandbox: `ip` holds one or two, glibc's
 * getifaddrs and if_nameindex one for the length of the call. */
#define BH_NETLINK_CAP_SOCKETS 16u
/* A netlink socket's receive and send buffers as the kernel keeps them
 * (twice what SO_RCVBUF asks): a queue holds at most this plus one message
 * (the kernel checks before it adds), and an ack echoes at most a send
 * buffer's worth. 16 sockets then pin at most ~8 MiB no cgroup charges. */
#define BH_SOCKET_CAP_BUFFER (256u * 1024u)
/* Live ICMP and ICMPv6 datagram ("ping") sockets per sandbox: ping holds
 * one or two. Their buffers are clamped to BH_SOCKET_CAP_BUFFER as well, so
 * 16 pin at most ~4 MiB no cgroup charges. */
#define BH_PING_CAP_SOCKETS 16u

struct bh_socket_cap {
    /* An epoll set holding one item per socket handed to a guest; the
     * kernel drops an item when its file's last reference goes (closed by
     * every process, also an fd in flight in an SCM_RIGHTS message holds
     * it), so the set's size is the number of live sockets. -1: none can be
     * counted, and none is made. */
    int track_fd;
    int ping_track_fd; /* the same, for ping sockets (their own cap) */
    int proc_fd;       /* borrowed: the sandbox's own procfs (aio-cap.c checked it) */
    unsigned max_sockets;
    unsigned max_ping_sockets;
};

void bh_socket_cap_init(struct bh_socket_cap *cap, int proc_fd, unsigned max_sockets);
void bh_socket_cap_free(struct bh_socket_cap *cap);

/* The sockets of an epoll set (track_fd or ping_track_fd) handed out that
 * are still alive, or -1. */
int bh_socket_cap_live(const struct bh_socket_cap *cap, int track_fd);

/* Whether req is a call this cap answers (socket or setsockopt). */
bool bh_socket_cap_wants(const struct seccomp_notif *req);

/* Answers req on listener: socket(AF_NETLINK, NETLINK_ROUTE) and ICMP/ICMPv6
 * datagram sockets are made by the sentry within their caps and handed over
 * with ADDFD; setsockopt's
 * SO_RCVBUF, SO_SNDBUF and their FORCE forms are performed by the sentry on
 * its copy of the guest's socket, clamped to BH_SOCKET_CAP_BUFFER on a
 * netlink or ping socket. 1: answered already (the fd was sent); else resp is
 * filled for the caller to send. */
int bh_socket_cap_answer(struct bh_socket_cap *cap, const struct seccomp_notif *req, int listener,
                         struct seccomp_notif_resp *resp);

#endif
