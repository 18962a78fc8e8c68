/* Frame I/O and fd passing (see frame.h): the one place that turns a byte
 * stream from an untrusted peer into bounded messages. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "frame.h"

void bh_frame_header_encode(uint8_t out[BH_FRAME_HEADER], uint32_t len)
{
    out[0] = (uint8_t)(len >> 24);
    out[1] = (uint8_t)(len >> 16);
    out[2] = (uint8_t)(len >> 8);
    out[3] = (uint8_t)len;
}

uint32_t bh_frame_header_decode(const uint8_t in[BH_FRAME_HEADER])
{
    return ((uint32_t)in[0] << 24) | ((uint32_t)in[1] << 16) | ((uint32_t)in[2] << 8) | in[3];
}

int64_t bh_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_socket(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

int bh_write_full(int fd, const void *buf, size_t len, struct bh_error *err)
{
    const char *p = buf;
    int sock = is_socket(fd);
    while (len > 0) {
        ssize_t n = sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN) {
                struct pollfd pfd = {.fd = fd, .events = POLLOUT};
                poll(&pfd, 1, -1);
                continue;
            }
            return bh_error_errno(err, errno, "write frame");
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Waits until fd is readable or the deadline passes. */
static int wait_readable(int fd, int64_t deadline_ms, struct bh_error *err)
{
    for (;;) {
        int timeout = -1;
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - bh_now_ms();
            if (left <= 0)
                return bh_error_set(err, ETIMEDOUT, "read frame: deadline passed");
            timeout = left > 60000 ? 60000 : (int)left;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, timeout);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return bh_error_errno(err, errno, "read frame: poll");
        }
        if (r > 0)
            return 0;
    }
}

/* Returns bytes read before the end of stream (< len) or -1. */
static ssize_t read_some(int fd, void *buf, size_t len, int64_t deadline_ms, struct bh_error *err)
{
    char *p = buf;
    size_t got = 0;
    while (got < len) {
        if (wait_readable(fd, deadline_ms, err) < 0)
            return -1;
        ssize_t n = read(fd, p + got, len - got);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return bh_error_errno(err, errno, "read frame");
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    return (ssize_t)got;
}

int bh_read_full(int fd, void *buf, size_t len, int64_t deadline_ms, struct bh_error *err)
{
    ssize_t n = read_some(fd, buf, len, deadline_ms, err);
    if (n < 0)
        return -1;
    if ((size_t)n < len)
        return bh_error_set(err, EPROTO, "read: stream ended after %zd of %zu bytes", n, len);
    return 0;
}

int bh_frame_write(int fd, const void *buf, size_t len, struct bh_error *err)
{
    if (len > UINT32_MAX)
        return bh_error_set(err, EMSGSIZE, "frame of %zu bytes is too large to send", len);
    uint8_t hdr[BH_FRAME_HEADER];
    bh_frame_header_encode(hdr, (uint32_t)len);
    /* One buffer, one write for small frames: the peer sees whole frames. */
    if (len <= 64 * 1024) {
        uint8_t tmp[BH_FRAME_HEADER + 64 * 1024];
        memcpy(tmp, hdr, BH_FRAME_HEADER);
        if (len > 0)
            memcpy(tmp + BH_FRAME_HEADER, buf, len);
        return bh_write_full(fd, tmp, BH_FRAME_HEADER + len, err);
    }
    if (bh_write_full(fd, hdr, sizeof(hdr), err) < 0)
        return -1;
    return bh_write_full(fd, buf, len, err);
}

int bh_frame_read(int fd, size_t max, int64_t deadline_ms, void **buf, size_t *len,
                  struct bh_error *err)
{
    uint8_t hdr[BH_FRAME_HEADER];
    *buf = NULL;
    *len = 0;
    ssize_t n = read_some(fd, hdr, sizeof(hdr), deadline_ms, err);
    if (n < 0)
        return -1;
    if (n == 0)
        return 0;
    if ((size_t)n < sizeof(hdr))
        return bh_error_set(err, EPROTO, "stream ended inside a frame header");
    uint32_t want = bh_frame_header_decode(hdr);
    if (want > max)
        return bh_error_set(err, EMSGSIZE, "frame of %u bytes is above the limit of %zu bytes",
                            want, max);
    char *data = malloc((size_t)want + 1);
    if (data == NULL)
        return bh_error_errno(err, ENOMEM, "frame of %u bytes", want);
    if (bh_read_full(fd, data, want, deadline_ms, err) < 0) {
        free(data);
        return -1;
    }
    data[want] = '\0';
    *buf = data;
    *len = want;
    return 1;
}

int bh_send_fds(int sock, const void *data, size_t len, const int *fds, size_t n,
                struct bh_error *err)
{
    char zero = 0;
    struct iovec iov = {.iov_base = len > 0 ? (void *)data : &zero, .iov_len = len > 0 ? len : 1};
    size_t space = CMSG_SPACE(sizeof(int) * n);
    char cbuf[CMSG_SPACE(sizeof(int) * BH_FDS_PER_MSG)];
    if (n > BH_FDS_PER_MSG)
        return bh_error_set(err, E2BIG, "send %zu fds: at most %d at once", n, BH_FDS_PER_MSG);
    memset(cbuf, 0, sizeof(cbuf));
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        msg.msg_control = cbuf;
        msg.msg_controllen = space;
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * n);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * n);
    }
    for (;;) {
        ssize_t r = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return bh_error_errno(err, errno, "send %zu fds", n);
        if ((size_t)r != iov.iov_len)
            return bh_error_set(err, EPROTO, "send fds: short write");
        return 0;
    }
}

ssize_t bh_recv_fds(int sock, void *data, size_t len, int *fds, size_t max_fds, size_t *n_fds,
                    struct bh_error *err)
{
    char cbuf[CMSG_SPACE(sizeof(int) * BH_FDS_PER_MSG)];
    struct iovec iov = {.iov_base = data, .iov_len = len};
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof(cbuf)};
    *n_fds = 0;
    ssize_t r;
    do {
        r = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (r < 0 && errno == EINTR);
    if (r < 0)
        return bh_error_errno(err, errno, "receive fds");
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        int *in = (int *)CMSG_DATA(c);
        for (size_t i = 0; i < count; i++) {
            int fd;
            memcpy(&fd, in + i, sizeof(int));
            if (*n_fds < max_fds)
                fds[(*n_fds)++] = fd;
            else
                close(fd);
        }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
        for (size_t i = 0; i < *n_fds; i++)
            close(fds[i]);
        *n_fds = 0;
        return bh_error_set(err, EPROTO, "receive fds: control data truncated");
    }
    return r;
}

int bh_control_connect(const char *path, const char *hint, struct bh_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(addr.sun_path))
        return bh_error_set(err, ENAMETOOLONG, "socket path `%s` is too long", path);
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "socket");
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        int e = errno;
        close(fd);
        return bh_error_errno(err, e, "connect to bulkheadd at `%s`%s", path, hint);
    }
    return fd;
}
