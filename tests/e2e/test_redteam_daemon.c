/* Red team of bulkheadd through what a client of its socket can do
 * (branch redteam8; tests/README.md, "Session 10"). */
#include <criterion/criterion.h>
#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static struct h_daemon d = H_DAEMON_INIT(5000);
static pid_t holder = -1;

static void stop_all(void)
{
    if (holder > 0) {
        kill(holder, SIGKILL);
        waitpid(holder, NULL, 0);
        holder = -1;
    }
    h_daemon_stop(&d);
}

TestSuite(redteam_daemon, .fini = stop_all, .timeout = 300);

/* 1: answered Describe; 0: refused (at_capacity); -1: no answer. */
static int describe_on(int fd)
{
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Describe de = BULKHEAD__CONTROL__DESCRIBE__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE;
    req.describe = &de;
    /* a connection over the cap is answered before any request is read */
    if (h_send(fd, &req) < 0 && errno != EPIPE)
        return -1;
    Bulkhead__Control__Response *r = h_recv(fd, 60000, NULL);
    if (r == NULL)
        return -1;
    int v = r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE ? 1
            : r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR &&
                    r->error->code == BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY
                ? 0
                : -1;
    bulkhead__control__response__free_unpacked(r, NULL);
    return v;
}

/* As uid/gid 65534 (in the socket's group): holds `want` answered
 * connections, says so on ready, then waits to be killed. Retries refused
 * ones (the daemon's own start-up probe counts until its thread ends). */
static void hold_connections(int want, int ready)
{
    gid_t g = 65534;
    if (setgroups(1, &g) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
        _exit(2);
    int held = 0;
    for (int tries = 0; held < want && tries < 1200; tries++) {
        int fd = h_connect(d.sock);
        int v = fd >= 0 ? describe_on(fd) : -1;
        if (v == 1) {
            held++;
            continue;
        }
        if (fd >= 0)
            close(fd);
        usleep(50000);
    }
    char c = held == want ? 'h' : 'n';
    if (write(ready, &c, 1) != 1)
        _exit(3);
    /* the next one, beyond the cap, for the parent to judge */
    int fd = h_connect(d.sock);
    c = fd >= 0 && describe_on(fd) == 0 ? 'r' : 'a';
    if (write(ready, &c, 1) != 1)
        _exit(3);
    for (;;)
        pause();
}

/* With --socket-group, several uids share the socket, and a connection
 * costs its client nothing to keep (waiting for a request has no time
 * limit). On main one uid holding --max-connections idle connections kept
 * every other uid, root included, out (at_capacity) for as long as it
 * liked. Now a uid holding two more than the caller gives up its longest
 * idle connection (its reading side shut, as at a hand-over), and the
 * crowding uid itself is refused past its share. */
Test(redteam_daemon, one_uid_holding_every_connection_cannot_keep_another_out)
{
    char msg[2048];
    if (h_daemon_launch(&d, "/tmp/bh-rt8-XXXXXX", "container",
                        "--warm 0 --max-connections 4 --socket-group nogroup", msg,
                        sizeof(msg)) < 0)
        h_skip_kernel("bulkheadd --tier container did not start: %s", msg);
    cr_assert_eq(chmod(d.tmp, 0755), 0, "chmod %s: %s", d.tmp, strerror(errno));
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    holder = fork();
    cr_assert_geq(holder, 0);
    if (holder == 0) {
        close(p[0]);
        hold_connections(4, p[1]);
    }
    close(p[1]);
    char c = 0;
    struct pollfd pfd = {.fd = p[0], .events = POLLIN};
    /* 120 s bounds a hang only */
    cr_assert_eq(poll(&pfd, 1, 120000), 1, "uid 65534 did not report its connections");
    cr_assert_eq(read(p[0], &c, 1), 1);
    cr_assert_eq(c, 'h', "uid 65534 could not hold 4 connections (--max-connections 4)");
    cr_assert_eq(poll(&pfd, 1, 120000), 1);
    cr_assert_eq(read(p[0], &c, 1), 1);
    cr_expect_eq(c, 'r', "uid 65534 got a fifth connection past --max-connections 4");
    int fd = h_connect(d.sock);
    cr_assert_geq(fd, 0, "connect: %s", strerror(errno));
    int v = describe_on(fd);
    close(fd);
    cr_expect_eq(v, 1, "root was %s while uid 65534 held every connection (--max-connections 4)",
                 v == 0 ? "refused (at_capacity)" : "not answered");
    close(p[0]);
}
