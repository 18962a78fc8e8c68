/* Owns the channel between the host side and a live sentry: the message
 * format every part of the core speaks (one JSON object per SOCK_SEQPACKET
 * packet, fds by SCM_RIGHTS) and the client half of control.h.
 *
 * Pids: callers speak host pids. A request names a guest by its pid inside
 * the sandbox, found from /proc/PID/status (NSpid) after checking that the
 * process is in the sentry's pid namespace; an exec's reply carries a pidfd,
 * whose fdinfo gives the host pid. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "cleanup.h"
#include "control.h"
#include "frame.h"
#include "conn-internal.h"
#include "msg-internal.h"
#include "spec-json-internal.h"

/* ---- messages ----------------------------------------------------------- */

int bh_msg_send(int sock, json_t *obj, const int *fds, size_t n_fds, struct bh_error *err)
{
    char *text = json_dumps(obj, JSON_COMPACT);
    if (text == NULL)
        return bh_error_set(err, ENOMEM, "encode a message to the sentry");
    size_t len = strlen(text);
    int r;
    if (len > BH_MSG_MAX)
        r = bh_error_set(err, EMSGSIZE, "message of %zu bytes is above %d", len, BH_MSG_MAX);
    else
        r = bh_send_fds(sock, text, len, fds, n_fds, err);
    free(text);
    return r;
}

int bh_msg_recv(int sock, int64_t deadline_ms, json_t **obj, int *fds, size_t max_fds,
                size_t *n_fds, struct bh_error *err)
{
    *obj = NULL;
    size_t dummy;
    if (n_fds == NULL)
        n_fds = &dummy;
    *n_fds = 0;
    if (deadline_ms >= 0) {
        for (;;) {
            int64_t left = deadline_ms - bh_now_ms();
            if (left <= 0)
                return bh_error_set(err, ETIMEDOUT, "no answer in time");
            struct pollfd p = {.fd = sock, .events = POLLIN};
            int r = poll(&p, 1, (int)left);
            if (r > 0)
                break;
            if (r < 0 && errno != EINTR)
                return bh_error_errno(err, errno, "poll");
        }
    }
    cleanup_free char *buf = malloc(BH_MSG_MAX + 1);
    if (buf == NULL)
        return bh_error_errno(err, ENOMEM, "message buffer");
    int tmp[BH_FDS_PER_MSG];
    size_t got = 0;
    ssize_t n = bh_recv_fds(sock, buf, BH_MSG_MAX, tmp, BH_FDS_PER_MSG, &got, err);
    if (n < 0)
        return -1;
    for (size_t i = 0; i < got; i++) {
        if (fds != NULL && i < max_fds)
            fds[(*n_fds)++] = tmp[i];
        else
            close(tmp[i]);
    }
    if (n == 0) {
        for (size_t i = 0; i < *n_fds; i++)
            close(fds[i]);
        *n_fds = 0;
        return 0;
    }
    buf[n] = '\0';
    json_error_t jerr;
    *obj = json_loadb(buf, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (*obj == NULL || !json_is_object(*obj)) {
        json_decref(*obj);
        *obj = NULL;
        for (size_t i = 0; i < *n_fds; i++)
            close(fds[i]);
        *n_fds = 0;
        return bh_error_set(err, EPROTO, "malformed message from the peer: %s", jerr.text);
    }
    return 1;
}

/* Escapes into out (bounded, no allocation): safe in a child after clone. */
static size_t json_escape_into(char *out, size_t size, const char *s)
{
    size_t o = 0;
    for (; *s && o + 7 < size; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else if (c < 0x20) {
            o += (size_t)snprintf(out + o, size - o, "\\u%04x", c);
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return o;
}

void bh_msg_send_raw_error(int sock, enum bh_error_kind kind, int code, const char *fmt, ...)
{
    char msg[BH_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    char buf[BH_ERROR_MSG_MAX * 2 + 64];
    int n = snprintf(buf, sizeof(buf), "{\"ev\":\"error\",\"code\":%d,%s\"msg\":\"", code,
                     kind == BH_ERROR_EXEC ? "\"kind\":\"exec\"," : "");
    n += (int)json_escape_into(buf + n, sizeof(buf) - (size_t)n - 3, msg);
    buf[n++] = '"';
    buf[n++] = '}';
    send(sock, buf, (size_t)n, MSG_NOSIGNAL);
}

json_t *bh_msg_error(const struct bh_error *err, const char *kind)
{
    json_t *m = json_pack("{s:s,s:i,s:s}", strcmp(kind, "error") == 0 ? "ev" : "re", "error",
                          "code", err->code, "msg", err->msg);
    /* Only the kinds a receiver acts on travel; absent means a setup failure. */
    if (m != NULL && err->kind == BH_ERROR_EXEC)
        json_object_set_new(m, "kind", json_string("exec"));
    return m;
}

int bh_msg_to_error(json_t *obj, struct bh_error *err)
{
    const char *msg = json_string_value(json_object_get(obj, "msg"));
    json_int_t code = json_integer_value(json_object_get(obj, "code"));
    if (code < 0 || code > 4095)
        code = EPROTO;
    bh_error_set(err, (int)code, "%s", msg ? msg : "the sentry failed without a reason");
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (kind != NULL && strcmp(kind, "exec") == 0)
        bh_error_mark(err, BH_ERROR_EXEC);
    return -1;
}

/* ---- client half ---------------------------------------------------------- */

static void record_event(struct bh_sentry_conn *conn, json_t *ev)
{
    const char *kind = json_string_value(json_object_get(ev, "ev"));
    if (kind == NULL)
        return;
    if (strcmp(kind, "exit") == 0) {
        conn->have_exit = true;
        conn->exit_status = (int)json_integer_value(json_object_get(ev, "status"));
    } else if (strcmp(kind, "error") == 0) {
        conn->have_error = true;
        bh_msg_to_error(ev, &conn->error);
    }
}

int bh_conn_next_event(struct bh_sentry_conn *conn, int64_t deadline_ms, json_t **ev,
                       struct bh_error *err)
{
    for (;;) {
        json_t *msg = NULL;
        int r = bh_msg_recv(conn->fd, deadline_ms, &msg, NULL, 0, NULL, err);
        if (r < 0 && (err->code == ECONNRESET || err->code == EPIPE) && !conn->have_error)
            /* It closed the socket with a message of ours unread: it ended. */
            return bh_error_set(err, ESRCH,
                                "the sandbox's sentry ended without its exit event: the sentry "
                                "or its guest died");
        if (r <= 0)
            return r;
        if (json_object_get(msg, "ev") != NULL) {
            record_event(conn, msg);
            *ev = msg;
            return 1;
        }
        json_decref(msg); /* a stray reply: nobody waits for it */
    }
}

int bh_conn_request(struct bh_sentry_conn *conn, json_t *req, const int *fds, size_t n_fds,
                    json_t **reply, int *rfds, size_t max_rfds, size_t *n_rfds,
                    struct bh_error *err)
{
    *reply = NULL;
    if (conn->have_error)
        return bh_error_copy(err, &conn->error);
    if (bh_msg_send(conn->fd, req, fds, n_fds, err) < 0) {
        if (err->code == ECONNRESET || err->code == EPIPE)
            return bh_error_set(err, ESRCH,
                                "the sandbox's sentry has ended (it or its guest died): "
                                "it cannot take the request");
        return bh_error_prefix(err, "talk to the sandbox's sentry");
    }
    for (;;) {
        json_t *msg = NULL;
        int r = bh_msg_recv(conn->fd, -1, &msg, rfds, max_rfds, n_rfds, err);
        if (r < 0 && (err->code == ECONNRESET || err->code == EPIPE)) {
            /* It closed the socket with our request unread: it ended. */
            if (conn->have_error)
                return bh_error_copy(err, &conn->error);
            return bh_error_set(err, ESRCH,
                                "the sandbox's sentry ended before it answered: the sentry or "
                                "its guest died during setup");
        }
        if (r < 0)
            return bh_error_prefix(err, "answer from the sandbox's sentry");
        if (r == 0)
            return bh_error_set(err, ESRCH,
                                "the sandbox's sentry has ended (container not "
                                "running)");
        if (json_object_get(msg, "ev") != NULL) {
            record_event(conn, msg);
            json_decref(msg);
            if (n_rfds != NULL) {
                for (size_t i = 0; i < *n_rfds; i++)
                    close(rfds[i]);
                *n_rfds = 0;
            }
            continue;
        }
        const char *re = json_string_value(json_object_get(msg, "re"));
        if (re != NULL && strcmp(re, "error") == 0) {
            bh_msg_to_error(msg, err);
            json_decref(msg);
            if (n_rfds != NULL) {
                for (size_t i = 0; i < *n_rfds; i++)
                    close(rfds[i]);
                *n_rfds = 0;
            }
            return -1;
        }
        *reply = msg;
        return 0;
    }
}

int bh_sentry_connect(const char *state_dir, struct bh_sentry_conn **out, struct bh_error *err)
{
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s/sentry.sock", state_dir) >=
        (int)sizeof(addr.sun_path))
        return bh_error_set(err, ENAMETOOLONG, "state directory `%s` is too long for a socket",
                            state_dir);
    cleanup_close int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "socket");
    if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
        if (errno == ENOENT || errno == ECONNREFUSED)
            return bh_error_errno(
                err, errno, "connect to the sentry at `%s` (container not running)", addr.sun_path);
        return bh_error_errno(err, errno, "connect to the sentry at `%s`", addr.sun_path);
    }
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return bh_error_errno(err, errno, "peer of `%s`", addr.sun_path);
    struct bh_sentry_conn *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return bh_error_errno(err, ENOMEM, "connection");
    c->fd = steal_fd(&fd);
    c->sentry_pid = cred.pid;
    *out = c;
    return 0;
}

void bh_sentry_disconnect(struct bh_sentry_conn *conn)
{
    if (conn == NULL || conn->owned)
        return;
    close(conn->fd);
    free(conn);
}

int bh_sentry_conn_dup(struct bh_sentry_conn *conn, struct bh_sentry_conn **out,
                       struct bh_error *err)
{
    json_t *req = json_pack("{s:s}", "op", "conn");
    json_t *reply = NULL;
    int fd = -1;
    size_t n = 0;
    int r = bh_conn_request(conn, req, NULL, 0, &reply, &fd, 1, &n, err);
    json_decref(req);
    json_decref(reply);
    if (r < 0)
        return -1;
    if (n != 1)
        return bh_error_set(err, EPROTO, "the sentry sent no channel");
    struct bh_sentry_conn *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        close(fd);
        return bh_error_errno(err, ENOMEM, "connection");
    }
    c->fd = fd;
    c->sentry_pid = conn->sentry_pid;
    *out = c;
    return 0;
}

static int simple_request(struct bh_sentry_conn *conn, json_t *req, struct bh_error *err)
{
    json_t *reply = NULL;
    int r = bh_conn_request(conn, req, NULL, 0, &reply, NULL, 0, NULL, err);
    json_decref(req);
    json_decref(reply);
    return r;
}

int bh_sentry_start(struct bh_sentry_conn *conn, struct bh_error *err)
{
    return simple_request(conn, json_pack("{s:s}", "op", "start"), err);
}

int bh_sentry_seccomp_listener(struct bh_sentry_conn *conn, int *fd, struct bh_error *err)
{
    *fd = -1;
    json_t *req = json_pack("{s:s}", "op", "seccomp_listener");
    json_t *reply = NULL;
    size_t n = 0;
    int r = bh_conn_request(conn, req, NULL, 0, &reply, fd, 1, &n, err);
    json_decref(req);
    json_decref(reply);
    if (r < 0)
        return -1;
    if (n != 1 || *fd < 0)
        return bh_error_set(err, EPROTO, "the sentry sent no seccomp listener");
    return 0;
}

static int read_ns_ino(pid_t pid, ino_t *ino)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
    if (stat(path, &st) < 0)
        return -1;
    *ino = st.st_ino;
    return 0;
}

/* Host pid -> pid inside the sentry's pid namespace. */
static int inner_pid(struct bh_sentry_conn *conn, pid_t host, pid_t *inner, struct bh_error *err)
{
    if (host == 0) {
        *inner = 0;
        return 0;
    }
    for (unsigned i = 0; i < conn->n_execd && i < BH_ARRAY_SIZE(conn->execd); i++) {
        if (conn->execd[i].host == host) {
            *inner = conn->execd[i].inner;
            return 0;
        }
    }
    ino_t a, b;
    if (read_ns_ino(conn->sentry_pid, &a) < 0)
        return bh_error_set(err, ESRCH, "the sandbox's sentry has ended (container not running)");
    if (read_ns_ino(host, &b) < 0 || a != b)
        return bh_error_set(err, ESRCH, "process %d: no such process in this sandbox", host);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/status", host);
    cleanup_fclose FILE *f = fopen(path, "re");
    char line[256];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "NSpid:", 6) != 0)
            continue;
        char *last = strrchr(line, '\t');
        long v = last ? strtol(last + 1, NULL, 10) : 0;
        if (v <= 1)
            break;
        *inner = (pid_t)v;
        return 0;
    }
    return bh_error_set(err, ESRCH, "process %d: no such process in this sandbox", host);
}

pid_t bh_pidfd_pid(int pidfd)
{
    char path[64], line[128];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", pidfd);
    cleanup_fclose FILE *f = fopen(path, "re");
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, "Pid:", 4) == 0)
            return (pid_t)strtol(line + 4, NULL, 10);
    return -1;
}

int bh_sentry_exec(struct bh_sentry_conn *conn, const struct bh_process *proc, const int stdio[3],
                   const char *console_socket, pid_t *pid, struct bh_error *err)
{
    return bh_sentry_exec_fds(conn, proc, stdio, console_socket, NULL, 0, pid, err);
}

int bh_sentry_exec_held(struct bh_sentry_conn *conn, const struct bh_process *proc,
                        const int stdio[3], const char *console_socket, const int *extra,
                        size_t n_extra, pid_t *pid, int *listener, struct bh_error *err)
{
    *listener = -1;
    if (n_extra > BH_EXEC_MAX_EXTRA_FDS)
        return bh_error_set(err, E2BIG, "at most %d extra fds can be passed to a process",
                            BH_EXEC_MAX_EXTRA_FDS);
    cleanup_close int console = -1;
    if (proc->terminal) {
        if (console_socket == NULL)
            return bh_error_set(err, EINVAL, "a terminal needs a console socket");
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", console_socket) >=
            (int)sizeof(addr.sun_path))
            return bh_error_set(err, ENAMETOOLONG, "console socket path is too long");
        console = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (console < 0 || connect(console, (struct sockaddr *)&addr, sizeof(addr)) < 0)
            return bh_error_errno(err, errno, "connect to console socket `%s`", console_socket);
    }
    int fds[4 + BH_EXEC_MAX_EXTRA_FDS];
    size_t n = 0;
    for (int i = 0; i < 3; i++)
        fds[n++] = stdio != NULL && stdio[i] >= 0 ? stdio[i] : i;
    if (console >= 0)
        fds[n++] = console;
    for (size_t i = 0; i < n_extra; i++)
        fds[n++] = extra[i];
    json_t *req =
        json_pack("{s:s,s:o,s:I,s:b,s:b}", "op", "exec", "process", bh_process_to_json(proc),
                  "extra_fds", (json_int_t)n_extra, "console", console >= 0, "agent", 1);
    json_t *reply = NULL;
    int rfds[2] = {-1, -1};
    size_t got = 0;
    int r = bh_conn_request(conn, req, fds, n, &reply, rfds, 2, &got, err);
    int pidfd = rfds[0];
    json_decref(req);
    if (r < 0)
        return bh_error_prefix(err, "exec in the sandbox");
    bool with_listener = json_is_true(json_object_get(reply, "listener"));
    if (got != (with_listener ? 2u : 1u)) {
        for (size_t i = 0; i < got && i < 2; i++)
            close(rfds[i]);
        json_decref(reply);
        return bh_error_set(err, EPROTO, "the sentry did not say which process it started");
    }
    /* The process waits for our start, so its pid is still readable. */
    json_int_t inner = json_integer_value(json_object_get(reply, "pid"));
    *pid = bh_pidfd_pid(pidfd);
    close(pidfd);
    json_decref(reply);
    if (*pid <= 0) {
        if (with_listener)
            close(rfds[1]);
        return bh_error_set(err, ESRCH, "the new process died before it started");
    }
    unsigned slot = conn->n_execd++ % BH_ARRAY_SIZE(conn->execd);
    conn->execd[slot].host = *pid;
    conn->execd[slot].inner = (pid_t)inner;
    *listener = with_listener ? rfds[1] : -1;
    return 0;
}

int bh_sentry_exec_release(struct bh_sentry_conn *conn, pid_t pid, struct bh_error *err)
{
    pid_t in;
    if (inner_pid(conn, pid, &in, err) < 0)
        return -1;
    return simple_request(conn, json_pack("{s:s,s:I}", "op", "start", "pid", (json_int_t)in), err);
}

int bh_sentry_exec_fds(struct bh_sentry_conn *conn, const struct bh_process *proc,
                       const int stdio[3], const char *console_socket, const int *extra,
                       size_t n_extra, pid_t *pid, struct bh_error *err)
{
    int listener = -1;
    if (bh_sentry_exec_held(conn, proc, stdio, console_socket, extra, n_extra, pid, &listener,
                            err) < 0)
        return -1;
    /* No agent to hand it to: the process's notified syscalls get ENOSYS. */
    if (listener >= 0)
        close(listener);
    return bh_sentry_exec_release(conn, *pid, err);
}

int bh_sentry_wait(struct bh_sentry_conn *conn, pid_t pid, int *status, struct bh_error *err)
{
    pid_t in;
    if (inner_pid(conn, pid, &in, err) < 0)
        return -1;
    json_t *req = json_pack("{s:s,s:i}", "op", "wait", "pid", in);
    json_t *reply = NULL;
    int r = bh_conn_request(conn, req, NULL, 0, &reply, NULL, 0, NULL, err);
    json_decref(req);
    if (r < 0)
        return -1;
    *status = (int)json_integer_value(json_object_get(reply, "status"));
    json_decref(reply);
    return 0;
}

int bh_sentry_signal(struct bh_sentry_conn *conn, pid_t pid, int sig, struct bh_error *err)
{
    pid_t in;
    if (sig <= 0 || sig >= 65)
        return bh_error_set(err, EINVAL, "signal %d is not a signal", sig);
    if (inner_pid(conn, pid, &in, err) < 0)
        return -1;
    return simple_request(conn, json_pack("{s:s,s:i,s:i}", "op", "signal", "pid", in, "sig", sig),
                          err);
}
