/* Owns the foreground terminal of `run` and `exec` when process.terminal is
 * true and no --console-socket was given: as runc does, bulkhead then
 * receives the pty master itself (on a private console socket of its own)
 * and relays it to its own stdio until the process ends. The host's
 * terminal, if stdio is one, is put in raw mode for that time and restored
 * after, so keys reach the container's line discipline untouched. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <termios.h>
#include <unistd.h>

#include "cleanup.h"
#include "frame.h"
#include "oci-internal.h"

/* How long the pty master may take to arrive once the process exists: it is
 * sent during the process's setup, before create or exec returns. */
#define TTY_RECV_TIMEOUT_MS 10000

void oci_tty_init(struct oci_tty *t)
{
    memset(t, 0, sizeof(*t));
    t->listen_fd = t->master = t->host_fd = -1;
    t->stop_pipe[0] = t->stop_pipe[1] = -1;
}

int oci_tty_listen(struct oci_tty *t, struct bh_error *err)
{
    /* A private directory (0700, root's) keeps anyone else from connecting
     * first and handing us a pty of their choosing. */
    snprintf(t->dir, sizeof(t->dir), "/tmp/bulkhead-tty-XXXXXX");
    if (mkdtemp(t->dir) == NULL) {
        t->dir[0] = '\0';
        return bh_error_errno(err, errno, "make a directory for the console socket");
    }
    snprintf(t->path, sizeof(t->path), "%s/console.sock", t->dir);
    t->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (t->listen_fd < 0)
        return bh_error_errno(err, errno, "make the console socket");
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", t->path);
    if (bind(t->listen_fd, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
        listen(t->listen_fd, 1) < 0)
        return bh_error_errno(err, errno, "listen on the console socket `%s`", t->path);
    return 0;
}

/* The host terminal to put in raw mode and take the size from, as runc
 * looks for one: stderr, stdout, stdin. None (stdio redirected) is fine:
 * the relay then only copies bytes. */
static int host_console(void)
{
    const int fds[] = {2, 1, 0};
    for (size_t i = 0; i < BH_ARRAY_SIZE(fds); i++)
        if (isatty(fds[i]))
            return fds[i];
    return -1;
}

void oci_tty_resize(struct oci_tty *t)
{
    struct winsize ws;
    if (t->master >= 0 && t->host_fd >= 0 && ioctl(t->host_fd, TIOCGWINSZ, &ws) == 0 && ws.ws_row &&
        ws.ws_col)
        ioctl(t->master, TIOCSWINSZ, &ws);
}

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, buf, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, 100);
            continue;
        }
        if (w <= 0)
            return -1;
        buf += w;
        len -= (size_t)w;
    }
    return 0;
}

/* Copies the master to stdout until it reads end or EIO (every slave closed)
 * or until told to stop, then drains what is left; stdin goes to the master
 * until it ends. */
static void *relay_thread(void *arg)
{
    struct oci_tty *t = arg;
    char buf[16384];
    bool stdin_open = true, stopping = false;
    for (;;) {
        /* Once told to stop, only what the master still holds matters (the
         * stop pipe stays readable: polling it again would never time out). */
        struct pollfd p[3] = {
            {.fd = t->master, .events = POLLIN},
            {.fd = stopping ? -1 : t->stop_pipe[0], .events = POLLIN},
            {.fd = stdin_open && !stopping ? 0 : -1, .events = POLLIN},
        };
        int n = poll(p, 3, stopping ? 0 : -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            break;
        if (n == 0 && stopping)
            break;
        if (p[0].revents) {
            ssize_t r = read(t->master, buf, sizeof(buf));
            if (r > 0) {
                if (write_all(1, buf, (size_t)r) < 0)
                    break;
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                break;
            }
        }
        if (p[1].revents)
            stopping = true;
        if (p[2].revents) {
            ssize_t r = read(0, buf, sizeof(buf));
            if (r > 0) {
                if (write_all(t->master, buf, (size_t)r) < 0)
                    stdin_open = false;
            } else if (r == 0 || (errno != EINTR && errno != EAGAIN)) {
                stdin_open = false;
            }
        }
    }
    return NULL;
}

int oci_tty_attach(struct oci_tty *t, struct bh_error *err)
{
    struct pollfd p = {.fd = t->listen_fd, .events = POLLIN};
    int n = poll(&p, 1, TTY_RECV_TIMEOUT_MS);
    if (n <= 0)
        return bh_error_set(err, n < 0 ? errno : ETIMEDOUT,
                            "the container's pty did not arrive on the console socket");
    cleanup_close int conn = accept4(t->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0)
        return bh_error_errno(err, errno, "accept on the console socket");
    char name[128];
    size_t n_fds = 0;
    ssize_t r = bh_recv_fds(conn, name, sizeof(name) - 1, &t->master, 1, &n_fds, err);
    if (r < 0)
        return bh_error_prefix(err, "receive the container's pty");
    if (n_fds != 1)
        return bh_error_set(err, EPROTO, "the console socket carried no pty master");
    /* As runc: the relay's output is the program's, not "\r\n" for "\n". */
    struct termios tio;
    if (tcgetattr(t->master, &tio) == 0) {
        tio.c_oflag &= ~(tcflag_t)ONLCR;
        tcsetattr(t->master, TCSANOW, &tio);
    }
    t->host_fd = host_console();
    if (t->host_fd >= 0 && tcgetattr(t->host_fd, &t->saved) == 0) {
        struct termios raw = t->saved;
        cfmakeraw(&raw);
        raw.c_oflag |= OPOST; /* our own stderr messages keep their line ends */
        if (tcsetattr(t->host_fd, TCSANOW, &raw) == 0)
            t->raw = true;
    }
    oci_tty_resize(t);
    if (pipe2(t->stop_pipe, O_CLOEXEC) < 0)
        return bh_error_errno(err, errno, "pipe for the terminal relay");
    if (pthread_create(&t->thread, NULL, relay_thread, t) != 0)
        return bh_error_set(err, EAGAIN, "start the terminal relay");
    t->running = true;
    return 0;
}

void oci_tty_finish(struct oci_tty *t)
{
    if (t->running) {
        char c = 1;
        ssize_t w = write(t->stop_pipe[1], &c, 1);
        (void)w;
        pthread_join(t->thread, NULL);
        t->running = false;
    }
    if (t->raw) {
        tcsetattr(t->host_fd, TCSANOW, &t->saved);
        t->raw = false;
    }
    int *fds[] = {&t->listen_fd, &t->master, &t->stop_pipe[0], &t->stop_pipe[1]};
    for (size_t i = 0; i < BH_ARRAY_SIZE(fds); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
    if (t->path[0])
        unlink(t->path);
    if (t->dir[0])
        rmdir(t->dir);
    t->path[0] = t->dir[0] = '\0';
}
