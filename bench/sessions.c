/* The supervisor benchmark's client: talks to a running bulkheadd over its
 * control socket (proto/control.proto in sentry/frame.h frames) and
 * prints one JSON object of measurements. It starts nothing itself; bench/run
 * starts and stops the daemon.
 *
 *   sessions --socket S open --reps N [--warm-target K]
 *       N times: wait until the daemon's warm pool holds K sandboxes (0: do
 *       not wait), time OpenSession, close the session. Prints every time
 *       and whether the daemon said the session came from the warm pool.
 *   sessions --socket S cells --lang python|javascript --reps N
 *       opens a session, times its first cell, then N more cells.
 *   sessions --socket S throughput --levels 1,10,100 --rounds R --seconds D
 *       opens max(levels) sessions (one connection and thread each), then
 *       R rounds over the levels: the first L sessions run cells back to back
 *       for D seconds. Prints cells per second per level and round.
 *   sessions --socket S hold --count N [--lang L,...]
 *       opens N sessions, runs one cell per language in each, prints
 *       "ready" and waits for stdin to close (bench/run measures memory
 *       meanwhile), then closes them. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "control.pb-c.h"
#include "error.h"
#include "frame.h"

#define MAX_ANSWER (64u * 1024 * 1024)
#define MAX_LEVELS 8

static const char *socket_path;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int connect_daemon(struct bh_error *err)
{
    return bh_control_connect(socket_path, "", err);
}

/* One request, one answer; an Error answer is returned as -1 with its text. */
static Bulkhead__Control__Response *call(int fd, Bulkhead__Control__Request *req,
                                         struct bh_error *err)
{
    static atomic_ulong next_id = 1;
    req->version = 1;
    req->request_id = atomic_fetch_add(&next_id, 1);
    size_t len = bulkhead__control__request__get_packed_size(req);
    cleanup_free uint8_t *buf = malloc(len + 1);
    if (buf == NULL) {
        bh_error_set(err, ENOMEM, "out of memory");
        return NULL;
    }
    bulkhead__control__request__pack(req, buf);
    if (bh_frame_write(fd, buf, len, err) < 0)
        return NULL;
    cleanup_free void *ans = NULL;
    size_t alen = 0;
    int rc = bh_frame_read(fd, MAX_ANSWER, -1, &ans, &alen, err);
    if (rc <= 0) {
        if (rc == 0)
            bh_error_set(err, EPIPE, "bulkheadd closed the connection");
        return NULL;
    }
    Bulkhead__Control__Response *resp =
        bulkhead__control__response__unpack(NULL, alen, (const uint8_t *)ans);
    if (resp == NULL) {
        bh_error_set(err, EPROTO, "the answer is not a Response");
        return NULL;
    }
    if (resp->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR) {
        bh_error_set(err, EPROTO, "bulkheadd refused: %s",
                     resp->error->message ? resp->error->message : "(no message)");
        bulkhead__control__response__free_unpacked(resp, NULL);
        return NULL;
    }
    return resp;
}

/* Opens a session; *warm tells whether it came from the pool. The id is
 * malloc'd into *id. */
static int open_session(int fd, const char *owner, char **id, int *warm, struct bh_error *err)
{
    Bulkhead__Control__OpenSession open = BULKHEAD__CONTROL__OPEN_SESSION__INIT;
    open.owner = (char *)owner;
    open.conversation = (char *)"bench";
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_OPEN_SESSION;
    req.open_session = &open;
    Bulkhead__Control__Response *resp = call(fd, &req, err);
    if (resp == NULL)
        return -1;
    if (resp->body_case != BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION) {
        bulkhead__control__response__free_unpacked(resp, NULL);
        return bh_error_set(err, EPROTO, "OpenSession answered with another message");
    }
    *id = strdup(resp->open_session->session_id);
    if (warm)
        *warm = resp->open_session->warm;
    bulkhead__control__response__free_unpacked(resp, NULL);
    return 0;
}

static int close_session(int fd, const char *id, struct bh_error *err)
{
    Bulkhead__Control__CloseSession c = BULKHEAD__CONTROL__CLOSE_SESSION__INIT;
    c.session_id = (char *)id;
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_CLOSE_SESSION;
    req.close_session = &c;
    Bulkhead__Control__Response *resp = call(fd, &req, err);
    if (resp == NULL)
        return -1;
    bulkhead__control__response__free_unpacked(resp, NULL);
    return 0;
}

/* Runs one cell; a guest failure (non-zero exit) counts as a failure here,
 * because the bench's cells are all meant to succeed. */
static int run_cell(int fd, const char *id, const char *lang, const char *code,
                    struct bh_error *err)
{
    Bulkhead__Control__RunCell cell = BULKHEAD__CONTROL__RUN_CELL__INIT;
    cell.session_id = (char *)id;
    cell.language = (char *)lang;
    cell.code = (char *)code;
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_RUN_CELL;
    req.run_cell = &cell;
    Bulkhead__Control__Response *resp = call(fd, &req, err);
    if (resp == NULL)
        return -1;
    int rc = 0;
    if (resp->body_case != BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL)
        rc = bh_error_set(err, EPROTO, "RunCell answered with another message");
    else if (resp->run_cell->exit_code != 0 || resp->run_cell->timed_out)
        rc = bh_error_set(err, EIO, "the %s cell failed (exit %d%s): %.300s", lang,
                          resp->run_cell->exit_code, resp->run_cell->timed_out ? ", timed out" : "",
                          resp->run_cell->stderr ? resp->run_cell->stderr : "");
    bulkhead__control__response__free_unpacked(resp, NULL);
    return rc;
}

static int warm_ready(int fd, struct bh_error *err)
{
    Bulkhead__Control__Stats st = BULKHEAD__CONTROL__STATS__INIT;
    Bulkhead__Control__Request req = BULKHEAD__CONTROL__REQUEST__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_STATS;
    req.stats = &st;
    Bulkhead__Control__Response *resp = call(fd, &req, err);
    if (resp == NULL)
        return -1;
    int n = resp->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_STATS
                ? (int)resp->stats->warm_ready
                : 0;
    bulkhead__control__response__free_unpacked(resp, NULL);
    return n;
}

/* The same expression is valid in both languages. */
static const char *cell_code(const char *lang)
{
    (void)lang;
    return "1 + 1";
}

static void die(const char *what, const struct bh_error *err)
{
    /* bench/run reads the last line of stderr as the reason: one line */
    char msg[BH_ERROR_MSG_MAX];
    snprintf(msg, sizeof(msg), "%s", err->msg);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r' || *c == '\t')
            *c = ' ';
    fprintf(stderr, "sessions: %s: %s\n", what, msg);
    exit(1);
}

static void print_array(const char *name, const double *v, size_t n)
{
    printf("\"%s\":[", name);
    for (size_t i = 0; i < n; i++)
        printf("%s%.3f", i ? "," : "", v[i]);
    printf("]");
}

/* ---- open ---------------------------------------------------------------- */

static int cmd_open(int reps, int warm_target)
{
    struct bh_error err = {0};
    cleanup_close int fd = connect_daemon(&err);
    if (fd < 0)
        die("connect", &err);
    cleanup_free double *ms = calloc((size_t)reps, sizeof(double));
    cleanup_free int *warm = calloc((size_t)reps, sizeof(int));
    for (int i = 0; i < reps; i++) {
        if (warm_target > 0) {
            /* the pool refills in the background; measuring while it works
             * would time the refill, not the open */
            double deadline = now_ms() + 60000;
            int n;
            while ((n = warm_ready(fd, &err)) < warm_target) {
                if (n < 0)
                    die("Stats", &err);
                if (now_ms() > deadline) {
                    bh_error_set(&err, ETIMEDOUT, "the warm pool holds %d of %d after 60 s", n,
                                 warm_target);
                    die("wait for the warm pool", &err);
                }
                usleep(20000);
            }
        }
        cleanup_free char *id = NULL;
        double t0 = now_ms();
        if (open_session(fd, "bench-open", &id, &warm[i], &err) < 0)
            die("OpenSession", &err);
        ms[i] = now_ms() - t0;
        if (close_session(fd, id, &err) < 0)
            die("CloseSession", &err);
    }
    printf("{");
    print_array("open_ms", ms, (size_t)reps);
    printf(",\"warm\":[");
    for (int i = 0; i < reps; i++)
        printf("%s%s", i ? "," : "", warm[i] ? "true" : "false");
    printf("]}\n");
    return 0;
}

/* ---- cells --------------------------------------------------------------- */

static int cmd_cells(const char *lang, int reps)
{
    struct bh_error err = {0};
    cleanup_close int fd = connect_daemon(&err);
    if (fd < 0)
        die("connect", &err);
    cleanup_free char *id = NULL;
    if (open_session(fd, "bench-cells", &id, NULL, &err) < 0)
        die("OpenSession", &err);
    cleanup_free double *ms = calloc((size_t)reps, sizeof(double));
    double t0 = now_ms();
    if (run_cell(fd, id, lang, cell_code(lang), &err) < 0)
        die("first cell", &err);
    double first = now_ms() - t0;
    for (int i = 0; i < reps; i++) {
        t0 = now_ms();
        if (run_cell(fd, id, lang, cell_code(lang), &err) < 0)
            die("warm cell", &err);
        ms[i] = now_ms() - t0;
    }
    close_session(fd, id, &err);
    printf("{\"first_ms\":%.3f,", first);
    print_array("warm_ms", ms, (size_t)reps);
    printf("}\n");
    return 0;
}

/* ---- throughput ---------------------------------------------------------- */

struct worker {
    pthread_t thread;
    int index;
    int fd;
    char *id;
    char owner[32];
    long cells;
    char error[BH_ERROR_MSG_MAX];
};

static pthread_mutex_t round_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t round_cond = PTHREAD_COND_INITIALIZER;
static int round_number;    /* bumped to start a round */
static int round_active;    /* workers [0, round_active) run in this round */
static double round_end_ms; /* when the round stops */
static int round_done;      /* workers finished with the round */
static int quitting;

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int seen = 0;
    for (;;) {
        pthread_mutex_lock(&round_lock);
        while (round_number == seen && !quitting)
            pthread_cond_wait(&round_cond, &round_lock);
        if (quitting) {
            pthread_mutex_unlock(&round_lock);
            return NULL;
        }
        seen = round_number;
        double end = round_end_ms;
        int active = w->index < round_active;
        pthread_mutex_unlock(&round_lock);
        if (!active)
            continue;
        w->cells = 0;
        struct bh_error err = {0};
        while (now_ms() < end && w->error[0] == '\0') {
            if (run_cell(w->fd, w->id, "python", cell_code("python"), &err) < 0)
                snprintf(w->error, sizeof(w->error), "%s", err.msg);
            else
                w->cells++;
        }
        pthread_mutex_lock(&round_lock);
        round_done++;
        pthread_cond_broadcast(&round_cond);
        pthread_mutex_unlock(&round_lock);
    }
}

static int cmd_throughput(const int *levels, int n_levels, int rounds, double seconds)
{
    int max = 0;
    for (int i = 0; i < n_levels; i++)
        if (levels[i] > max)
            max = levels[i];
    cleanup_free struct worker *ws = calloc((size_t)max, sizeof(*ws));
    struct bh_error err = {0};
    double t_open = now_ms();
    for (int i = 0; i < max; i++) {
        ws[i].fd = connect_daemon(&err);
        if (ws[i].fd < 0)
            die("connect", &err);
        /* one owner per session: the per-owner cap must not evict them */
        snprintf(ws[i].owner, sizeof(ws[i].owner), "bench-tp-%d", i);
        if (open_session(ws[i].fd, ws[i].owner, &ws[i].id, NULL, &err) < 0) {
            bh_error_prefix(&err, "session %d of %d", i + 1, max);
            die("OpenSession", &err);
        }
        if (run_cell(ws[i].fd, ws[i].id, "python", "1 + 1", &err) < 0)
            die("first cell", &err);
    }
    double open_all = now_ms() - t_open;
    for (int i = 0; i < max; i++) {
        ws[i].index = i;
        pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]);
    }
    printf("{\"open_all_ms\":%.1f,\"sessions\":%d,\"rounds\":[", open_all, max);
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < n_levels; k++) {
            /* rotate the starting level, as bench/run does between systems */
            int level = levels[(k + r) % n_levels];
            int n_threads = level;
            for (int i = 0; i < n_threads; i++)
                ws[i].cells = 0;
            pthread_mutex_lock(&round_lock);
            round_active = n_threads;
            round_done = 0;
            double t_round = now_ms();
            round_end_ms = t_round + seconds * 1000.0;
            round_number++;
            pthread_cond_broadcast(&round_cond);
            while (round_done < round_active)
                pthread_cond_wait(&round_cond, &round_lock);
            pthread_mutex_unlock(&round_lock);
            /* cells in flight at the deadline finish after it: divide by the
             * time the round really took */
            double elapsed_s = (now_ms() - t_round) / 1000.0;
            long total = 0;
            for (int i = 0; i < n_threads; i++) {
                if (ws[i].error[0]) {
                    struct bh_error e = {0};
                    bh_error_set(&e, EIO, "session %d: %s", i + 1, ws[i].error);
                    die("throughput", &e);
                }
                total += ws[i].cells;
            }
            printf("%s{\"level\":%d,\"cells\":%ld,\"seconds\":%.3f,\"cells_per_s\":%.2f}",
                   r + k ? "," : "", level, total, elapsed_s, (double)total / elapsed_s);
            fflush(stdout);
        }
    }
    printf("]}\n");
    pthread_mutex_lock(&round_lock);
    quitting = 1;
    pthread_cond_broadcast(&round_cond);
    pthread_mutex_unlock(&round_lock);
    for (int i = 0; i < max; i++) {
        pthread_join(ws[i].thread, NULL);
        close_session(ws[i].fd, ws[i].id, &err);
        close(ws[i].fd);
        free(ws[i].id);
    }
    return 0;
}

/* ---- hold ---------------------------------------------------------------- */

static int cmd_hold(int count, const char *langs)
{
    struct bh_error err = {0};
    cleanup_close int fd = connect_daemon(&err);
    if (fd < 0)
        die("connect", &err);
    cleanup_free char **ids = calloc((size_t)count, sizeof(char *));
    for (int i = 0; i < count; i++) {
        char owner[32];
        snprintf(owner, sizeof(owner), "bench-hold-%d", i);
        if (open_session(fd, owner, &ids[i], NULL, &err) < 0)
            die("OpenSession", &err);
        cleanup_free char *copy = strdup(langs);
        char *save = NULL;
        for (char *l = strtok_r(copy, ",", &save); l; l = strtok_r(NULL, ",", &save))
            if (*l && run_cell(fd, ids[i], l, cell_code(l), &err) < 0)
                die("cell", &err);
    }
    printf("ready\n");
    fflush(stdout);
    char c;
    while (read(STDIN_FILENO, &c, 1) > 0)
        ;
    for (int i = 0; i < count; i++) {
        close_session(fd, ids[i], &err);
        free(ids[i]);
    }
    return 0;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: sessions --socket S open --reps N [--warm-target K]\n"
            "       sessions --socket S cells --lang python|javascript --reps N\n"
            "       sessions --socket S throughput --levels 1,10,100 --rounds R --seconds D\n"
            "       sessions --socket S hold --count N [--lang python,javascript]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *cmd = NULL, *lang = "python";
    int reps = 10, warm_target = 0, rounds = 1, count = 1, n_levels = 0;
    int levels[MAX_LEVELS];
    double seconds = 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--socket") == 0 && v)
            socket_path = argv[++i];
        else if (strcmp(a, "--reps") == 0 && v)
            reps = atoi(argv[++i]);
        else if (strcmp(a, "--warm-target") == 0 && v)
            warm_target = atoi(argv[++i]);
        else if (strcmp(a, "--lang") == 0 && v)
            lang = argv[++i];
        else if (strcmp(a, "--rounds") == 0 && v)
            rounds = atoi(argv[++i]);
        else if (strcmp(a, "--seconds") == 0 && v)
            seconds = atof(argv[++i]);
        else if (strcmp(a, "--count") == 0 && v)
            count = atoi(argv[++i]);
        else if (strcmp(a, "--levels") == 0 && v) {
            cleanup_free char *copy = strdup(argv[++i]);
            char *save = NULL;
            for (char *l = strtok_r(copy, ",", &save); l && n_levels < MAX_LEVELS;
                 l = strtok_r(NULL, ",", &save))
                levels[n_levels++] = atoi(l);
        } else if (a[0] != '-' && cmd == NULL)
            cmd = a;
        else
            usage();
    }
    if (socket_path == NULL || cmd == NULL || reps < 1 || rounds < 1 || count < 1 || seconds <= 0)
        usage();
    for (int i = 0; i < n_levels; i++)
        if (levels[i] < 1 || levels[i] > 1000)
            usage();
    if (strcmp(cmd, "open") == 0)
        return cmd_open(reps, warm_target);
    if (strcmp(cmd, "cells") == 0)
        return cmd_cells(lang, reps);
    if (strcmp(cmd, "throughput") == 0) {
        if (n_levels == 0)
            levels[n_levels++] = 1;
        return cmd_throughput(levels, n_levels, rounds, seconds);
    }
    if (strcmp(cmd, "hold") == 0)
        return cmd_hold(count, lang);
    usage();
    return 2;
}
