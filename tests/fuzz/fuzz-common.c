/* What the fuzz harnesses share: bulkheadd's globals for in-process serving
 * (this replaces supervisor/main.c, which is not linked), a client that
 * feeds bytes to the daemon's connection handler over a socketpair and
 * checks every answer, a reference UTF-8 check, and a temporary directory. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulkheadd.h"
#include "frame.h"
#include "fuzz.h"

extern Bulkhead__Control__DescribeResult bhd_describe;

void bh_fuzz_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "bh_fuzz: oracle failed: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    abort();
}

void bh_fuzz_supervisor_init(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    signal(SIGPIPE, SIG_IGN);
    bhd_cfg.socket_path = "/nonexistent/bulkheadd-fuzz.sock";
    bhd_cfg.tier = BH_TIER_KERNEL;
    bhd_cfg.audit_path = "-";
    bhd_cfg.idle_ms = 1000;
    bhd_cfg.lifetime_ms = 2000;
    bhd_cfg.per_owner = 3;
    bhd_cfg.max_sessions = 0; /* OpenSession stops at the cap: no sandbox, ever */
    bhd_cfg.owner_calls = 8;
    bhd_cfg.disk_bytes = 1 << 20;
    bhd_cfg.memory_bytes = 32 << 20;
    bhd_cfg.pids = 16;
    bhd_cfg.cpu_millis = 100;
    bhd_cfg.output_bytes = 1024;
    bhd_cfg.max_timeout_ms = 60000;
    bhd_cfg.default_timeout_ms = 1000;
    bhd_cfg.max_frame = 64 * 1024;
    bhd_cfg.warm = 0;
    struct bh_error err = {0};
    if (bhd_server_init(&err) < 0)
        bh_fuzz_fail("bhd_server_init: %s", err.msg);
    bulkhead__control__describe_result__init(&bhd_describe);
    bhd_describe.host = "bulkheadd";
    bhd_describe.version = BHD_VERSION;
    bhd_describe.supports_sessions = true;
    bhd_describe.protocol_version = BHD_PROTOCOL;
}

/* One helper thread for the whole process runs the other side of each
 * exchange: creating a thread per input makes the sanitizers' thread
 * bookkeeping grow by a few hundred bytes per input, which a long run turns
 * into an out-of-memory report. */
static pthread_t worker;
static sem_t worker_go, worker_done;
static void (*worker_job)(void *);
static void *worker_arg;

static void *worker_main(void *arg)
{
    (void)arg;
    for (;;) {
        while (sem_wait(&worker_go) < 0)
            ;
        worker_job(worker_arg);
        sem_post(&worker_done);
    }
    return NULL;
}

static void worker_start(void (*job)(void *), void *arg)
{
    static int started;
    if (!started) {
        started = 1;
        sem_init(&worker_go, 0, 0);
        sem_init(&worker_done, 0, 0);
        if (pthread_create(&worker, NULL, worker_main, NULL) != 0)
            bh_fuzz_fail("pthread_create failed");
    }
    worker_job = job;
    worker_arg = arg;
    sem_post(&worker_go);
}

static void worker_wait(void)
{
    while (sem_wait(&worker_done) < 0)
        ;
}

struct client {
    int fd;
    const uint8_t *data;
    size_t size;
    uint8_t *got;
    size_t got_len, got_cap;
};

static void client_job(void *arg)
{
    struct client *c = arg;
    size_t off = 0;
    while (off < c->size) {
        ssize_t n = send(c->fd, c->data + off, c->size - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the daemon closed early: what it answered is still to read */
        off += (size_t)n;
    }
    shutdown(c->fd, SHUT_WR);
    for (;;) {
        if (c->got_cap - c->got_len < 65536) {
            c->got_cap = c->got_cap ? c->got_cap * 2 : 65536 * 2;
            c->got = realloc(c->got, c->got_cap);
            if (c->got == NULL)
                abort();
        }
        ssize_t n = read(c->fd, c->got + c->got_len, c->got_cap - c->got_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        c->got_len += (size_t)n;
    }
}

size_t bh_fuzz_serve(const uint8_t *data, size_t size,
                     void (*each_response)(const Bulkhead__Control__Response *r, void *ctx),
                     void *ctx)
{
    bh_fuzz_supervisor_init();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        bh_fuzz_fail("socketpair: %s", strerror(errno));
    struct client c = {.fd = sv[1], .data = data, .size = size};
    worker_start(client_job, &c);
    bhd_serve_connection(sv[0]); /* closes sv[0] */
    worker_wait();
    close(sv[1]);

    size_t n = 0, off = 0;
    while (off < c.got_len) {
        if (c.got_len - off < BH_FRAME_HEADER)
            bh_fuzz_fail("the daemon sent %zu stray bytes after its last frame", c.got_len - off);
        uint32_t len = bh_frame_header_decode(c.got + off);
        off += BH_FRAME_HEADER;
        if (len > c.got_len - off)
            bh_fuzz_fail("the daemon announced a %u-byte frame and sent %zu", len, c.got_len - off);
        Bulkhead__Control__Response *r =
            bulkhead__control__response__unpack(NULL, len, c.got + off);
        if (r == NULL)
            bh_fuzz_fail("the daemon's answer %zu is not a Response", n);
        if (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR) {
            const char *m = r->error->message;
            if (m[0] == '\0' || !bh_fuzz_utf8_ok((const uint8_t *)m, strlen(m)))
                bh_fuzz_fail("error message is empty or not UTF-8");
            if (r->error->retryable !=
                (r->error->code == BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY))
                bh_fuzz_fail("retryable set on code %d", r->error->code);
        }
        if (each_response)
            each_response(r, ctx);
        bulkhead__control__response__free_unpacked(r, NULL);
        off += len;
        n++;
    }
    free(c.got);
    return n;
}

static void agent_job(void *arg)
{
    struct bh_fuzz_agent *a = arg;
    for (size_t i = 0; i < a->n; i++) {
        void *req = NULL;
        size_t len = 0;
        if (bh_frame_read(a->fd, 64u << 20, bh_now_ms() + 10000, &req, &len, NULL) != 1)
            break; /* the caller sent nothing (more): nothing to answer */
        free(req);
        size_t off = 0;
        while (off < a->replies[i].len) {
            ssize_t n =
                send(a->fd, a->replies[i].data + off, a->replies[i].len - off, MSG_NOSIGNAL);
            if (n < 0 && errno == EINTR)
                continue;
            if (n <= 0)
                break; /* the caller stopped reading: it gave up on the reply */
            off += (size_t)n;
        }
    }
    shutdown(a->fd, SHUT_WR);
}

void bh_fuzz_agent_start(struct bh_fuzz_agent *a, int fd, const struct bh_fuzz_reply *replies,
                         size_t n)
{
    bh_fuzz_supervisor_init(); /* SIGPIPE ignored */
    a->fd = fd;
    a->replies = replies;
    a->n = n;
    worker_start(agent_job, a);
}

void bh_fuzz_agent_join(struct bh_fuzz_agent *a)
{
    (void)a;
    worker_wait();
}

int bh_fuzz_utf8_ok(const uint8_t *s, size_t len)
{
    size_t i = 0;
    while (i < len) {
        uint8_t b = s[i];
        size_t need;
        uint32_t cp, min;
        if (b < 0x80) {
            i++;
            continue;
        } else if ((b & 0xe0) == 0xc0) {
            need = 1, cp = b & 0x1f, min = 0x80;
        } else if ((b & 0xf0) == 0xe0) {
            need = 2, cp = b & 0x0f, min = 0x800;
        } else if ((b & 0xf8) == 0xf0) {
            need = 3, cp = b & 0x07, min = 0x10000;
        } else {
            return 0;
        }
        if (len - i - 1 < need)
            return 0;
        for (size_t k = 1; k <= need; k++) {
            if ((s[i + k] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += need + 1;
    }
    return 1;
}

static char tmpdir[64];

static void remove_tmpdir(void)
{
    if (tmpdir[0] == '\0')
        return;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "bh_fuzz: could not remove %s\n", tmpdir);
}

const char *bh_fuzz_tmpdir(void)
{
    if (tmpdir[0] == '\0') {
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/bh-fuzz-XXXXXX");
        if (mkdtemp(tmpdir) == NULL)
            bh_fuzz_fail("mkdtemp: %s", strerror(errno));
        atexit(remove_tmpdir);
    }
    return tmpdir;
}
