/* bulkheadd against clients that hold its threads: one that stalls inside
 * a frame is cut off after --frame-timeout while others are served, and
 * connections beyond --max-connections get at_capacity. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "frame.h"
#include "harness.h"

static pid_t daemon_pid = -1;
static char sock_dir[] = "/tmp/bh-slow-XXXXXX";
static char sock_path[sizeof(sock_dir) + 16];

static void stop_daemon(void)
{
    if (daemon_pid > 0) {
        kill(daemon_pid, SIGTERM);
        for (int i = 0; i < 100; i++) {
            if (waitpid(daemon_pid, NULL, WNOHANG) == daemon_pid) {
                daemon_pid = -1;
                break;
            }
            usleep(100 * 1000);
        }
        if (daemon_pid > 0) {
            kill(daemon_pid, SIGKILL);
            waitpid(daemon_pid, NULL, 0);
            daemon_pid = -1;
        }
    }
    unlink(sock_path);
    rmdir(sock_dir);
}

static int connect_daemon(void)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* A daemon with short frame timeout and two connections at most; no
 * session is ever opened, so no sandbox is made. */
static void start_daemon(void)
{
    const char *build = getenv("BULKHEAD_BUILD");
    if (build == NULL)
        cr_skip_test("BULKHEAD_BUILD is not set");
    cr_assert_not_null(mkdtemp(sock_dir));
    snprintf(sock_path, sizeof(sock_path), "%s/s.sock", sock_dir);
    char bin[4096];
    snprintf(bin, sizeof(bin), "%s/bulkheadd", build);
    daemon_pid = fork();
    cr_assert_geq(daemon_pid, 0);
    if (daemon_pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execl(bin, bin, "--socket", sock_path, "--tier", "container", "--warm", "0",
              "--frame-timeout", "500", "--max-connections", "2", "--audit", "/dev/null",
              (char *)NULL);
        _exit(127);
    }
    pid_t pid = daemon_pid;
    daemon_pid = -1; /* reaped by h_wait_listening unless it listens */
    if (h_wait_listening(pid, sock_path) < 0)
        cr_skip_test("bulkheadd --tier container did not start on this host");
    daemon_pid = pid;
}

/* Sends Describe and returns the response (NULL when the connection ended). */
static Bulkhead__Control__Response *describe(int fd)
{
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Describe d = BULKHEAD__CONTROL__DESCRIBE__INIT;
    req.version = 1;
    req.request_id = 7;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE;
    req.describe = &d;
    size_t n = bulkhead__control__request__get_packed_size(&req);
    uint8_t *buf = malloc(n);
    bulkhead__control__request__pack(&req, buf);
    struct bh_error err = {0};
    int rc = bh_frame_write(fd, buf, n, &err);
    free(buf);
    if (rc < 0) {
        fprintf(stderr, "describe: %s\n", err.msg);
        return NULL;
    }
    void *reply = NULL;
    size_t len = 0;
    if (bh_frame_read(fd, 64 << 20, bh_now_ms() + 10000, &reply, &len, &err) <= 0) {
        fprintf(stderr, "describe: %s\n", err.msg);
        return NULL;
    }
    Bulkhead__Control__Response *resp =
        bulkhead__control__response__unpack(NULL, len, (const uint8_t *)reply);
    free(reply);
    return resp;
}

/* A connection the daemon serves (it answered Describe), held open. A place
 * freed by a closed connection (h_wait_listening's probe, a test's own) is
 * free again only once the daemon's thread has seen the end; until then it
 * answers at_capacity, which is retryable: retry, and bound only a hang. */
static int served_connection(void)
{
    for (double end = h_now() + 60; h_now() < end;) {
        int fd = connect_daemon();
        cr_assert_geq(fd, 0, "connect: %s", strerror(errno));
        Bulkhead__Control__Response *r = describe(fd);
        if (r == NULL) {
            /* refused at once and closed: our request could meet the close
             * (EPIPE) or be dropped with the socket; describe said which */
            close(fd);
            usleep(20000);
            continue;
        }
        bool at_capacity = r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR &&
                           r->error->code == BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY;
        cr_assert(at_capacity || r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE,
                  "Describe got neither its answer nor at_capacity (%d)", (int)r->body_case);
        bulkhead__control__response__free_unpacked(r, NULL);
        if (!at_capacity)
            return fd;
        close(fd);
        usleep(20000);
    }
    cr_assert_fail("a freed place was not usable again within 60 s");
    return -1;
}

TestSuite(slow_clients, .fini = stop_daemon, .timeout = 300);

Test(slow_clients, a_frame_that_stalls_is_cut_off_and_others_are_served)
{
    start_daemon();
    int stalled = connect_daemon();
    cr_assert_geq(stalled, 0);
    /* Two bytes of a four-byte length, then nothing. */
    cr_assert_eq(write(stalled, "\0\0", 2), 2);
    /* served_connection fails unless it is served while the first stalls */
    close(served_connection());
    /* The stalled connection ends by itself after --frame-timeout (0.5 s);
     * without it, never: 30 s only bounds a busy machine's delay. */
    struct pollfd p = {.fd = stalled, .events = POLLIN};
    cr_assert_eq(poll(&p, 1, 30000), 1, "the stalled connection was still open after 30 s");
    char c;
    ssize_t got = read(stalled, &c, 1);
    cr_expect(got <= 0, "expected the connection to close, got data");
    close(stalled);
}

Test(slow_clients, connections_beyond_the_cap_get_at_capacity)
{
    start_daemon();
    /* Both held and served: the daemon's threads hold them. */
    int a = served_connection(), b = served_connection();
    Bulkhead__Control__Response *r;
    int c = connect_daemon();
    cr_assert_geq(c, 0);
    void *reply = NULL;
    size_t len = 0;
    struct bh_error err = {0};
    cr_assert_gt(bh_frame_read(c, 1 << 20, bh_now_ms() + 10000, &reply, &len, &err), 0,
                 "no answer to the third connection: %s", err.msg);
    r = bulkhead__control__response__unpack(NULL, len, (const uint8_t *)reply);
    free(reply);
    cr_assert_not_null(r);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_ERROR);
    cr_expect_eq(r->error->code, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY);
    cr_expect(r->error->retryable);
    bulkhead__control__response__free_unpacked(r, NULL);
    close(c);
    /* A freed place is usable again. */
    close(a);
    close(served_connection());
    close(b);
}
