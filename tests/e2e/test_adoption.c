/* Sessions outliving their bulkheadd (issue 12): a new daemon on the same
 * state directory adopts every live session after a graceful hand-over
 * (SIGUSR2, or SIGTERM with --keep-sessions), after an upgrade to another
 * binary, and after a kill -9 within the grace period; a session whose keeper
 * died meanwhile goes on fresh; without a new daemon nothing is left after
 * the grace period; a cell running during a hand-over is answered with its
 * result or "may have run". Real daemons, driven over the control socket.
 *
 * The tier is BULKHEADD_TEST_TIER, else kernel, else container. When no
 * daemon starts at all the tests FAIL: adoption is not something that may
 * silently go untested. BULKHEAD_LOAD=1 runs the measurements big (100
 * sessions, 16 clients). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "frame.h"
#include "harness.h"
#include "sha256.h"

typedef Bulkhead__Control__Request Req;
typedef Bulkhead__Control__Response Resp;
#define FREE(r) bulkhead__control__response__free_unpacked((r), NULL)

/* one test's directory: s.sock, state/, the daemons' logs */
static char dir[64];
static char sock[128];
static char state[128];
static char tier[16];
static pid_t daemon_pid = -1;
static int test_lock = -1;

static void launch_at(const char *bin, const char *t, const char *extra, bool must)
{
    const char *b = h_build();
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "BULKHEAD_LIBEXEC=%s exec %s --runners %s/runners --socket %s --state-dir %s "
             "--tier %s --warm 0 --audit %s/audit.log %s 2>>%s/err.log",
             b, bin, b, sock, state, t, dir, extra ? extra : "", dir);
    daemon_pid = fork();
    cr_assert_geq(daemon_pid, 0);
    if (daemon_pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    pid_t pid = daemon_pid;
    daemon_pid = -1; /* reaped by h_wait_listening unless it listens */
    if (h_wait_listening(pid, sock) == 0) {
        daemon_pid = pid;
        snprintf(tier, sizeof(tier), "%s", t);
        return;
    }
    if (must)
        cr_assert_fail("bulkheadd (%s) did not start at tier %s: see %s/err.log", bin, t, dir);
}

/* Starts bulkheadd (bin NULL: the built one) on this test's socket and state
 * directory at the test tier. */
static void launch(const char *bin, const char *extra)
{
    char *path = bin ? strdup(bin) : h_path("bulkheadd");
    if (tier[0] != '\0') {
        launch_at(path, tier, extra, true);
    } else if (getenv("BULKHEADD_TEST_TIER") != NULL) {
        launch_at(path, getenv("BULKHEADD_TEST_TIER"), extra, true);
    } else {
        launch_at(path, "kernel", extra, false);
        if (daemon_pid < 0) {
            fprintf(stderr, "test_adoption: the kernel tier cannot be verified here: running at "
                            "the container tier\n");
            launch_at(path, "container", extra, true);
        }
    }
    free(path);
}

/* Sends sig and waits for the daemon to end; its exit status. */
static int stop(int sig)
{
    cr_assert_gt(daemon_pid, 0);
    kill(daemon_pid, sig);
    int st = 0;
    waitpid(daemon_pid, &st, 0);
    daemon_pid = -1;
    return st;
}

/* Entries of the state directory ending with suffix ("": all). */
static int count_state(const char *suffix)
{
    DIR *d = opendir(state);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name), sl = strlen(suffix);
        if (e->d_name[0] != '.' && l >= sl && strcmp(e->d_name + l - sl, suffix) == 0)
            n++;
    }
    closedir(d);
    return n;
}

static int count_state_entries(void)
{
    DIR *d = opendir(state);
    if (d == NULL)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

static void setup(void)
{
    test_lock = open(H_SUPERVISOR_TEST_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (test_lock >= 0)
        flock(test_lock, LOCK_SH);
    snprintf(dir, sizeof(dir), "/tmp/bhd-adopt-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    snprintf(sock, sizeof(sock), "%s/s.sock", dir);
    snprintf(state, sizeof(state), "%s/state", dir);
    tier[0] = '\0';
}

/* Whatever a test left: a daemon of ours ends with SIGTERM (closing every
 * session); keepers still waiting for a daemon are adopted by one that is
 * then ended the same way. */
static void teardown(void)
{
    if (daemon_pid > 0)
        stop(SIGTERM);
    if (count_state_entries() > 0 && tier[0] != '\0') {
        char *path = h_path("bulkheadd");
        launch_at(path, tier, NULL, false);
        free(path);
        if (daemon_pid > 0)
            stop(SIGTERM);
    }
    if (dir[0] != '\0')
        h_remove_tree(dir);
    dir[0] = '\0';
    if (test_lock >= 0)
        close(test_lock);
    test_lock = -1;
}

static Resp *roundtrip(Req *req)
{
    int fd = h_connect(sock);
    cr_assert(fd >= 0, "connect to %s", sock);
    cr_assert_eq(h_send(fd, req), 0);
    struct bh_error err = {0};
    Resp *r = h_recv(fd, 120000, &err);
    cr_assert_not_null(r, "no answer: %s", err.msg);
    close(fd);
    return r;
}

static char *open_session(const char *owner)
{
    Req req;
    Bulkhead__Control__OpenSession o;
    h_open_req(&req, &o, owner);
    Resp *r = roundtrip(&req);
    char *id = h_session_id(r);
    FREE(r);
    return id;
}

static Resp *run(const char *id, const char *lang, const char *code)
{
    Req req;
    Bulkhead__Control__RunCell c;
    h_cell_req(&req, &c, id, lang, code, 60000, NULL, 0);
    return roundtrip(&req);
}

static Bulkhead__Control__CellResult *ok(Resp *r)
{
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL, "not a result: %s",
                 r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? r->error->message : "?");
    cr_assert_eq(r->run_cell->exit_code, 0, "stderr: %s", r->run_cell->stderr);
    return r->run_cell;
}

static Bulkhead__Control__StatsResult *stats(Resp **keep)
{
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Stats st = BULKHEAD__CONTROL__STATS__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_STATS;
    req.stats = &st;
    *keep = roundtrip(&req);
    cr_assert_eq((*keep)->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_STATS);
    return (*keep)->stats;
}

static Bulkhead__Control__DescribeResult *describe(Resp **keep)
{
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Describe d = BULKHEAD__CONTROL__DESCRIBE__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE;
    req.describe = &d;
    *keep = roundtrip(&req);
    cr_assert_eq((*keep)->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE);
    return (*keep)->describe;
}

/* The record a keeper keeps for session id (its fingerprint's .json). */
static json_t *keeper_record(const char *id)
{
    char fp[BH_SHA256_HEX], path[256];
    bh_sha256_hex(id, strlen(id), fp);
    snprintf(path, sizeof(path), "%s/%s.json", state, fp);
    json_t *j = json_load_file(path, 0, NULL);
    cr_assert_not_null(j, "no keeper record at %s", path);
    return j;
}

/* Any cgroup directory of a sandbox named name, in any hierarchy. */
static bool cgroup_exists(const char *name)
{
    char pat[256];
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/*/bulkhead/%s", name);
    glob_t g;
    bool found = glob(pat, 0, NULL, &g) == 0 && g.gl_pathc > 0;
    globfree(&g);
    snprintf(pat, sizeof(pat), "/sys/fs/cgroup/bulkhead/%s", name);
    struct stat st;
    return found || stat(pat, &st) == 0;
}

static bool alive(pid_t pid)
{
    if (kill(pid, 0) < 0)
        return false;
    /* a zombie waiting for init is gone for our purpose */
    char path[64], buf[512];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    bool z = fgets(buf, sizeof(buf), f) != NULL && strstr(buf, ") Z ") != NULL;
    fclose(f);
    return !z;
}

TestSuite(adoption, .init = setup, .fini = teardown, .timeout = 900);

/* ---- twenty sessions through a hand-over, an upgrade and a crash ---------- */

#define N_SESSIONS 20
struct sess {
    char *id;
    char owner[16];
    char digest[BH_SHA256_HEX];
    int n;
};

static void remember(struct sess *s, Bulkhead__Control__CellResult *c)
{
    snprintf(s->digest, sizeof(s->digest), "%s", c->record->digest);
}

/* The next cells of every session see their Python and JavaScript state and
 * their file, on the same sandbox, the chain going on. */
static void check_all(struct sess *ss, const char *when)
{
    for (int i = 0; i < N_SESSIONS; i++) {
        struct sess *s = &ss[i];
        char code[128], want[128];
        snprintf(code, sizeof(code), "(x, open('f.txt').read())");
        snprintf(want, sizeof(want), "(%d, 's%d')", s->n, s->n);
        Resp *r = run(s->id, "python", code);
        Bulkhead__Control__CellResult *c = ok(r);
        cr_assert_str_eq(c->value, want, "%s: session %d: python state or file lost", when, i);
        cr_assert(!c->fresh_interpreter && !c->fresh_sandbox, "%s: session %d came back fresh",
                  when, i);
        cr_assert_str_eq(c->record->previous_digest, s->digest,
                         "%s: session %d: the record chain does not continue", when, i);
        remember(s, c);
        FREE(r);
        r = run(s->id, "javascript", "y");
        c = ok(r);
        snprintf(want, sizeof(want), "%d", s->n * 2);
        cr_assert_str_eq(c->value, want, "%s: session %d: javascript state lost", when, i);
        cr_assert(!c->fresh_interpreter && !c->fresh_sandbox);
        cr_assert_str_eq(c->record->previous_digest, s->digest);
        remember(s, c);
        FREE(r);
    }
}

static void check_adopted(uint32_t want, const char *when)
{
    Resp *r1, *r2;
    Bulkhead__Control__StatsResult *st = stats(&r1);
    cr_assert_eq(st->adopted_sessions, want, "%s: Stats says %u adopted", when,
                 st->adopted_sessions);
    cr_assert_eq(st->adopted_fresh, 0);
    cr_assert_eq(st->sessions, want);
    Bulkhead__Control__DescribeResult *d = describe(&r2);
    cr_assert_eq(d->adopted_sessions, want, "%s: Describe says %u adopted", when,
                 d->adopted_sessions);
    FREE(r1);
    FREE(r2);
}

Test(adoption, twenty_sessions_survive_a_handover_an_upgrade_and_a_crash)
{
    launch(NULL, "--max-sessions-per-owner 3 --adopt-grace 60000");
    struct sess ss[N_SESSIONS];
    for (int i = 0; i < N_SESSIONS; i++) {
        struct sess *s = &ss[i];
        /* owners o0..o5 at their cap of 3, o6 with 2 */
        snprintf(s->owner, sizeof(s->owner), "o%d", i / 3);
        s->n = i + 1;
        s->id = open_session(s->owner);
        char code[128];
        snprintf(code, sizeof(code), "x = %d\nopen('f.txt', 'w').write('s%d')", s->n, s->n);
        Resp *r = run(s->id, "python", code);
        Bulkhead__Control__CellResult *c = ok(r);
        cr_assert(c->fresh_sandbox);
        remember(s, c);
        FREE(r);
        snprintf(code, sizeof(code), "var y = %d", s->n * 2);
        r = run(s->id, "javascript", code);
        remember(s, ok(r));
        FREE(r);
    }

    /* 1. a graceful hand-over (SIGUSR2) to the same binary */
    int st = stop(SIGUSR2);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the old daemon ended with %d", st);
    cr_assert_eq(count_state(".json"), N_SESSIONS, "every keeper keeps its record");
    cr_assert_eq(count_state(".sock"), N_SESSIONS, "every keeper waits for a daemon");
    launch(NULL, "--max-sessions-per-owner 3 --keep-sessions");
    check_adopted(N_SESSIONS, "after SIGUSR2");
    check_all(ss, "after SIGUSR2");

    /* 2. an upgrade: SIGTERM with --keep-sessions, then another binary (a
     * copy elsewhere: what the keepers run is not what adopts them) */
    st = stop(SIGTERM);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char newbin[256], cmd[512];
    snprintf(newbin, sizeof(newbin), "%s/bulkheadd-upgraded", dir);
    snprintf(cmd, sizeof(cmd), "cp %s/bulkheadd %s", h_build(), newbin);
    cr_assert_eq(system(cmd), 0);
    launch(newbin, "--max-sessions-per-owner 3");
    check_adopted(N_SESSIONS, "after an upgrade");
    check_all(ss, "after an upgrade");

    /* 3. a crash: kill -9, then a new daemon within the grace period */
    stop(SIGKILL);
    launch(NULL, "--max-sessions-per-owner 3 --warm 1");
    check_adopted(N_SESSIONS, "after kill -9");
    check_all(ss, "after kill -9");
    /* the new daemon fills its own warm pool beside the adopted sessions */
    uint32_t warm = 0;
    for (double end = h_now() + 120; h_now() < end && warm < 1;) { /* a bound on a hang */
        Resp *sr;
        warm = stats(&sr)->warm_ready;
        FREE(sr);
        if (warm < 1)
            usleep(100000);
    }
    cr_assert_eq(warm, 1, "the warm pool was not rebuilt");

    /* the per-owner cap and LRU order came along: o0's fourth session
     * evicts its least recently used one, the first checked above */
    char *extra = open_session("o0");
    Resp *r = run(ss[0].id, "python", "1");
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_ERROR);
    cr_assert_eq(r->error->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED, "%s",
                 r->error->message);
    FREE(r);
    r = run(ss[1].id, "python", "x");
    cr_assert_str_eq(ok(r)->value, "2", "o0's other sessions are kept");
    FREE(r);
    free(extra);

    /* SIGTERM without --keep-sessions still closes everything */
    stop(SIGTERM);
    cr_assert_eq(count_state_entries(), 0, "SIGTERM without --keep-sessions left sessions");
    for (int i = 0; i < N_SESSIONS; i++)
        free(ss[i].id);
}

/* ---- a keeper that died meanwhile ----------------------------------------- */

Test(adoption, a_session_whose_keeper_died_meanwhile_goes_on_fresh)
{
    launch(NULL, "--adopt-grace 60000");
    char *dead = open_session("alice");
    char *kept = open_session("alice");
    Resp *r = run(dead, "python", "x = 1\nopen('f.txt', 'w').write('a')");
    char digest[BH_SHA256_HEX];
    snprintf(digest, sizeof(digest), "%s", ok(r)->record->digest);
    FREE(r);
    r = run(kept, "python", "x = 2");
    ok(r);
    FREE(r);
    stop(SIGKILL);
    json_t *rec = keeper_record(dead);
    pid_t keeper = (pid_t)json_integer_value(json_object_get(rec, "keeper_pid"));
    char sandbox[64];
    snprintf(sandbox, sizeof(sandbox), "%s", json_string_value(json_object_get(rec, "sandbox")));
    json_decref(rec);
    cr_assert_gt(keeper, 1);
    cr_assert(alive(keeper), "the keeper waits for a new daemon");
    /* the keeper is killed hard: it removes nothing itself */
    kill(keeper, SIGKILL);
    for (double end = h_now() + 30; alive(keeper) && h_now() < end;)
        usleep(50000);
    cr_assert(!alive(keeper));

    launch(NULL, NULL);
    r = run(dead, "python", "import os\n(os.path.exists('f.txt'), 'x' in globals())");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert(c->fresh_sandbox, "its owner is told the sandbox is new");
    cr_assert(c->fresh_interpreter);
    cr_assert_str_eq(c->value, "(False, False)");
    cr_assert_str_eq(c->record->previous_digest, digest, "the record chain still continues");
    cr_assert_eq(c->record->cell, 2);
    FREE(r);
    r = run(kept, "python", "x");
    c = ok(r);
    cr_assert_str_eq(c->value, "2");
    cr_assert(!c->fresh_sandbox);
    FREE(r);
    Resp *sr;
    Bulkhead__Control__StatsResult *st = stats(&sr);
    cr_assert_eq(st->adopted_sessions, 1);
    cr_assert_eq(st->adopted_fresh, 1);
    FREE(sr);
    cr_assert(!cgroup_exists(sandbox), "the dead keeper's cgroup %s is left", sandbox);
    free(dead);
    free(kept);
}

/* ---- kill -9 and no new daemon -------------------------------------------- */

Test(adoption, a_crash_without_a_new_daemon_leaves_nothing_after_the_grace_period)
{
    launch(NULL, "--adopt-grace 3000");
    pid_t keepers[2], sentries[2];
    char sandboxes[2][64];
    for (int i = 0; i < 2; i++) {
        char *id = open_session("alice");
        Resp *r = run(id, "python", "open('f.txt', 'w').write('a')");
        ok(r);
        FREE(r);
        r = run(id, "javascript", "1");
        ok(r);
        FREE(r);
        json_t *rec = keeper_record(id);
        keepers[i] = (pid_t)json_integer_value(json_object_get(rec, "keeper_pid"));
        sentries[i] = (pid_t)json_integer_value(json_object_get(rec, "sentry"));
        snprintf(sandboxes[i], sizeof(sandboxes[i]), "%s",
                 json_string_value(json_object_get(rec, "sandbox")));
        json_decref(rec);
        free(id);
    }
    double t0 = h_now();
    stop(SIGKILL);
    for (int i = 0; i < 2; i++)
        cr_assert(alive(keepers[i]) && alive(sentries[i]),
                  "within the grace period the sandbox is kept");
    bool gone = false;
    while (!gone && h_now() - t0 < 120) { /* a bound on a hang only */
        usleep(200000);
        gone = count_state_entries() == 0;
        for (int i = 0; i < 2; i++)
            gone =
                gone && !alive(keepers[i]) && !alive(sentries[i]) && !cgroup_exists(sandboxes[i]);
    }
    double took = h_now() - t0;
    cr_assert(gone, "after the grace period a keeper, sentry, cgroup or record is left");
    cr_assert_geq(took, 2.5, "the sandboxes ended before the grace period (%.1f s)", took);
    fprintf(stderr,
            "test_adoption: without a daemon, nothing left %.1f s after kill -9 (grace 3 s)\n",
            took);
    tier[0] = '\0'; /* nothing for teardown to adopt */
}

/* ---- cells in flight during a hand-over ------------------------------------ */

/* Sends a cell on a connection of its own and returns the connection. */
static int send_cell(const char *id, const char *code)
{
    int fd = h_connect(sock);
    cr_assert(fd >= 0);
    Req req;
    Bulkhead__Control__RunCell c;
    h_cell_req(&req, &c, id, "python", code, 60000, NULL, 0);
    cr_assert_eq(h_send(fd, &req), 0);
    return fd;
}

/* Until the session's keeper has heard that its cell number `cell` is out
 * (its record on disk says busy, with that many calls: an earlier busy
 * record may still be there): the cell was dispatched, which no fixed sleep
 * promises on a slow machine. Bounded, not timed. */
static void wait_cell_out(const char *id, json_int_t cell)
{
    char fp[BH_SHA256_HEX], path[256];
    bh_sha256_hex(id, strlen(id), fp);
    snprintf(path, sizeof(path), "%s/%s.json", state, fp);
    for (double end = h_now() + 60; h_now() < end; usleep(20000)) {
        json_t *j = json_load_file(path, 0, NULL);
        bool busy = j != NULL && json_is_true(json_object_get(j, "busy")) &&
                    json_integer_value(json_object_get(j, "calls")) == cell;
        json_decref(j);
        if (busy)
            return;
    }
    cr_assert_fail("cell %lld of the session was not out after 60 s (keeper record %s)",
                   (long long)cell, path);
}

Test(adoption, a_cell_running_during_a_handover_gets_its_result)
{
    launch(NULL, NULL);
    char *id = open_session("alice");
    Resp *r = run(id, "python", "n = 0");
    ok(r);
    FREE(r);
    /* it appends to a file, so what ran can be counted afterwards */
    int fd = send_cell(id, "import time\ntime.sleep(2)\nopen('ran.txt', 'a').write('x')\nn += 1\n"
                           "'done'");
    wait_cell_out(id, 2);
    kill(daemon_pid, SIGUSR2);
    struct bh_error err = {0};
    r = h_recv(fd, 60000, &err);
    close(fd);
    cr_assert_not_null(r, "the cell in flight got no answer: %s", err.msg);
    cr_assert_str_eq(ok(r)->value, "'done'", "the hand-over waited for the cell");
    FREE(r);
    cr_assert(WIFEXITED(stop(0)));
    launch(NULL, NULL);
    r = run(id, "python", "(open('ran.txt').read(), n)");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_str_eq(c->value, "('x', 1)", "the cell ran exactly once");
    cr_assert(!c->fresh_sandbox && !c->fresh_interpreter);
    FREE(r);
    free(id);
}

Test(adoption, a_cell_cut_by_a_handover_is_answered_may_have_run)
{
    launch(NULL, "--handover-wait 500");
    char *id = open_session("alice");
    Resp *r = run(id, "python", "1");
    char digest[BH_SHA256_HEX];
    snprintf(digest, sizeof(digest), "%s", ok(r)->record->digest);
    FREE(r);
    int fd = send_cell(id, "open('ran.txt', 'a').write('x')\nimport time\ntime.sleep(30)");
    wait_cell_out(id, 2);
    kill(daemon_pid, SIGUSR2);
    struct bh_error err = {0};
    r = h_recv(fd, 60000, &err);
    close(fd);
    cr_assert_not_null(r, "the cut cell got no answer: %s", err.msg);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_ERROR, "expected an error");
    cr_assert(!r->error->not_dispatched, "it was dispatched: it may have run");
    cr_assert(strstr(r->error->message, "may have run") != NULL, "%s", r->error->message);
    FREE(r);
    cr_assert(WIFEXITED(stop(0)));
    launch(NULL, NULL);
    /* the session goes on, fresh; the cut cell is not run again */
    r = run(id, "python", "import os\nos.path.exists('ran.txt')");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert(c->fresh_sandbox && c->fresh_interpreter);
    cr_assert_str_eq(c->value, "False", "the cut cell ran again on the new sandbox");
    cr_assert_str_eq(c->record->previous_digest, digest);
    FREE(r);
    free(id);
}

/* ---- a keeper the daemon does not understand ------------------------------- */

/* Plays a keeper of protocol version 99 for fp: returns what the daemon
 * answered ('A', 'X', or 0) as the exit status of a child. */
static pid_t fake_keeper(const char *fp)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s.sock", state, fp);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    cr_assert_lt(strlen(path), sizeof(addr.sun_path));
    memcpy(addr.sun_path, path, strlen(path) + 1);
    int l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert(l >= 0);
    cr_assert_eq(bind(l, (struct sockaddr *)&addr, sizeof(addr)), 0, "bind %s", path);
    cr_assert_eq(listen(l, 4), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid > 0) {
        close(l);
        return pid;
    }
    alarm(120);
    int c = accept(l, NULL, NULL);
    int sp[2];
    socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
    bh_send_fds(c, "K", 1, &sp[0], 1, NULL);
    char hello[512];
    snprintf(hello, sizeof(hello),
             "{\"keeper\":99,\"fp\":\"%s\",\"keeper_pid\":%d,\"sandbox\":\"x\",\"sentry\":1}", fp,
             (int)getpid());
    bh_frame_write(c, hello, strlen(hello), NULL);
    void *ans = NULL;
    size_t len = 0;
    int rc = bh_frame_read(c, 16, bh_now_ms() + 60000, &ans, &len, NULL);
    int code = rc == 1 && len > 0 ? ((char *)ans)[0] : 0;
    /* as a keeper does on 'X': its files go with it */
    unlink(path);
    _exit(code);
}

Test(adoption, a_keeper_of_another_protocol_version_is_refused_and_its_session_goes_on_fresh)
{
    /* find the tier first, then plant the keeper before the daemon that
     * adopts starts */
    launch(NULL, NULL);
    stop(SIGTERM);
    char id[33] = "0123456789abcdef0123456789abcdef";
    char fp[BH_SHA256_HEX];
    bh_sha256_hex(id, 32, fp);
    char digest[BH_SHA256_HEX];
    bh_sha256_hex("an earlier record", 17, digest);
    char path[256];
    snprintf(path, sizeof(path), "%s/%s.json", state, fp);
    json_t *rec = json_pack(
        "{s:s, s:s, s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:s, s:b, s:b, s:s, s:i, s:s}",
        "fp", fp, "owner", "alice", "owner_fp", "-", "uid", (int)geteuid(), "conversation", "",
        "opened_unix", (json_int_t)1, "opened_ms", (json_int_t)bh_now_ms(), "last_used_ms",
        (json_int_t)bh_now_ms(), "expires_ms", (json_int_t)(bh_now_ms() + 600000), "idle_ms",
        (json_int_t)600000, "calls", (json_int_t)7, "last_digest", digest, "fresh_pending", 0,
        "busy", 0, "tier", tier, "keeper", 99, "sandbox", "bhd-none");
    cr_assert_eq(json_dump_file(rec, path, 0), 0);
    json_decref(rec);
    pid_t fk = fake_keeper(fp);
    launch(NULL, NULL);
    int st = 0;
    cr_assert_eq(waitpid(fk, &st, 0), fk);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 'X', "the daemon did not refuse it (%d)",
              WEXITSTATUS(st));
    Resp *r = run(id, "python", "1 + 1");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_str_eq(c->value, "2");
    cr_assert(c->fresh_sandbox, "its owner hears the sandbox is new");
    cr_assert_str_eq(c->record->previous_digest, digest);
    cr_assert_eq(c->record->cell, 8);
    FREE(r);
}

/* ---- measured: adoption time, and a restart under load --------------------- */

struct client {
    const char *id;
    atomic_bool *stop;
    int results, may_have_run, retried, no_answer, other;
    char other_msg[256];
};

static void *client_main(void *arg)
{
    struct client *cl = arg;
    while (!atomic_load(cl->stop)) {
        int fd = h_connect(sock);
        if (fd < 0) {
            /* nothing sent: between two daemons */
            usleep(20000);
            continue;
        }
        Req req;
        Bulkhead__Control__RunCell c;
        h_cell_req(&req, &c, cl->id, "python", "open('n.txt', 'a').write('x')\nc += 1\nc", 60000,
                   NULL, 0);
        if (h_send(fd, &req) < 0) {
            close(fd);
            usleep(20000);
            continue;
        }
        struct bh_error err = {0};
        Resp *r = h_recv(fd, 120000, &err);
        close(fd);
        if (r == NULL) {
            cl->no_answer++; /* sent, and never answered: a lost cell */
            continue;
        }
        if (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL &&
            r->run_cell->exit_code == 0) {
            cl->results++;
        } else if (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR &&
                   r->error->not_dispatched && r->error->retryable) {
            cl->retried++;
            usleep(20000);
        } else if (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR &&
                   !r->error->not_dispatched && strstr(r->error->message, "may have run")) {
            cl->may_have_run++;
        } else {
            cl->other++;
            snprintf(cl->other_msg, sizeof(cl->other_msg), "%s",
                     r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR
                         ? r->error->message
                         : (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL
                                ? r->run_cell->stderr
                                : "?"));
        }
        FREE(r);
    }
    return NULL;
}

Test(adoption, measured_adoption_time_and_a_restart_under_load)
{
    bool big = getenv("BULKHEAD_LOAD") != NULL && strcmp(getenv("BULKHEAD_LOAD"), "1") == 0;
    int n = big ? 100 : 10, n_clients = big ? 16 : 4;
    const char *flags = "--max-sessions 200 --max-sessions-per-owner 200 --max-calls-per-owner 64 "
                        "--memory 134217728";
    launch(NULL, flags);
    char **ids = calloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        ids[i] = open_session("load");
        Resp *r = run(ids[i], "python", "c = 0");
        ok(r);
        FREE(r);
    }

    /* 1. from the new daemon's start to the first adopted cell's answer */
    cr_assert(WIFEXITED(stop(SIGUSR2)));
    double t0 = h_now();
    launch(NULL, flags);
    double t_listen = h_now() - t0;
    Resp *r = run(ids[n - 1], "python", "c");
    cr_assert_str_eq(ok(r)->value, "0");
    cr_assert(!r->run_cell->fresh_sandbox);
    double t_first = h_now() - t0;
    FREE(r);
    Resp *sr;
    cr_assert_eq(stats(&sr)->adopted_sessions, (uint32_t)n);
    FREE(sr);

    /* 2. a hand-over while n_clients clients send cells without pause */
    atomic_bool stop_flag = false;
    struct client *cls = calloc((size_t)n_clients, sizeof(*cls));
    pthread_t *th = calloc((size_t)n_clients, sizeof(pthread_t));
    for (int i = 0; i < n_clients; i++) {
        cls[i].id = ids[i];
        cls[i].stop = &stop_flag;
        pthread_create(&th[i], NULL, client_main, &cls[i]);
    }
    sleep(3);
    cr_assert(WIFEXITED(stop(SIGUSR2)));
    double t1 = h_now();
    launch(NULL, flags);
    double gap = h_now() - t1;
    sleep(3);
    atomic_store(&stop_flag, true);
    int results = 0, may = 0, retried = 0, lost = 0, other = 0, twice = 0;
    for (int i = 0; i < n_clients; i++) {
        pthread_join(th[i], NULL);
        results += cls[i].results;
        may += cls[i].may_have_run;
        retried += cls[i].retried;
        lost += cls[i].no_answer;
        other += cls[i].other;
        cr_assert_eq(cls[i].other, 0, "client %d: %s", i, cls[i].other_msg);
        /* what ran, counted in the sandbox: every answered cell once, a cell
         * answered "may have run" at most once, nothing twice */
        r = run(ids[i], "python",
                "open('n.txt').read().count('x') if __import__('os').path."
                "exists('n.txt') else 0");
        Bulkhead__Control__CellResult *c = ok(r);
        int ran = atoi(c->value);
        bool fresh = c->fresh_sandbox;
        FREE(r);
        if (!fresh && cls[i].may_have_run == 0) {
            if (ran != cls[i].results)
                twice++;
            cr_assert_eq(ran, cls[i].results, "client %d: %d answered, %d ran", i, cls[i].results,
                         ran);
        }
    }
    fprintf(stderr,
            "test_adoption: %d sessions: the new daemon listened %.2f s after its start, the first "
            "adopted cell answered at %.2f s; a hand-over under %d clients: %d cells answered, %d "
            "\"may have run\", %d held back and retried, %d lost, %d run twice (new daemon "
            "serving %.2f s after the old one left)\n",
            n, t_listen, t_first, n_clients, results, may, retried, lost, twice, gap);
    cr_assert_eq(lost, 0, "%d cells sent and never answered", lost);
    cr_assert_eq(other, 0);
    cr_assert_gt(results, 0);
    for (int i = 0; i < n; i++)
        free(ids[i]);
    free(ids);
    free(cls);
    free(th);
}

/* ---- a crash with a cell out ----------------------------------------------- */

Test(adoption, a_session_with_a_cell_out_at_a_crash_goes_on_fresh_and_never_reruns_it)
{
    launch(NULL, NULL);
    char *id = open_session("alice");
    char *idle = open_session("alice");
    Resp *r = run(id, "python", "1");
    char digest[BH_SHA256_HEX];
    snprintf(digest, sizeof(digest), "%s", ok(r)->record->digest);
    FREE(r);
    r = run(idle, "python", "z = 5");
    ok(r);
    FREE(r);
    int fd = send_cell(id, "open('ran.txt', 'a').write('x')\nimport time\ntime.sleep(30)");
    wait_cell_out(id, 2);
    stop(SIGKILL);
    struct bh_error err = {0};
    r = h_recv(fd, 5000, &err);
    close(fd);
    /* the caller's connection ended without an answer: it knows the cell
     * may have run */
    cr_assert_null(r, "an answer came from a killed daemon");
    launch(NULL, NULL);
    /* the channel may hold half an answer: the sandbox is not trusted with
     * another cell, and the cell is not run again */
    r = run(id, "python", "import os\nos.path.exists('ran.txt')");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert(c->fresh_sandbox && c->fresh_interpreter);
    cr_assert_str_eq(c->value, "False");
    cr_assert_str_eq(c->record->previous_digest, digest);
    FREE(r);
    r = run(idle, "python", "z");
    c = ok(r);
    cr_assert_str_eq(c->value, "5");
    cr_assert(!c->fresh_sandbox, "an idle session keeps its sandbox");
    FREE(r);
    Resp *sr;
    Bulkhead__Control__StatsResult *st = stats(&sr);
    cr_assert_eq(st->adopted_sessions, 1);
    cr_assert_eq(st->adopted_fresh, 1);
    FREE(sr);
    free(id);
    free(idle);
}

/* Clients that keep their connection between calls, sending without pause
 * through a hand-over: every request that left the client (its send
 * succeeded) is answered; a request the ending daemon will not read fails
 * to send (EPIPE), so its client knows nothing was sent. Never a reset or
 * end of stream after a send: that would leave the caller guessing. */
#define PERSISTENT_CLIENTS 8

struct persistent {
    int fd;
    atomic_bool *stop;
    long answered, send_failed, lost; /* lost: sent, then no answer */
};

static void *persistent_client(void *arg)
{
    struct persistent *p = arg;
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Stats st = BULKHEAD__CONTROL__STATS__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_STATS;
    req.stats = &st;
    while (!atomic_load(p->stop)) {
        if (h_send(p->fd, &req) < 0) {
            p->send_failed++;
            return NULL;
        }
        struct bh_error err = {0};
        Resp *r = h_recv(p->fd, 60000, &err);
        if (r == NULL) {
            p->lost++;
            return NULL;
        }
        p->answered++;
        FREE(r);
    }
    return NULL;
}

Test(adoption, a_connection_kept_open_through_a_handover_never_loses_a_request)
{
    signal(SIGPIPE, SIG_IGN);
    launch(NULL, NULL);
    atomic_bool stop_flag = false;
    struct persistent ps[PERSISTENT_CLIENTS];
    pthread_t ts[PERSISTENT_CLIENTS];
    for (int i = 0; i < PERSISTENT_CLIENTS; i++) {
        ps[i] = (struct persistent){.fd = h_connect(sock), .stop = &stop_flag};
        cr_assert_geq(ps[i].fd, 0);
        cr_assert_eq(pthread_create(&ts[i], NULL, persistent_client, &ps[i]), 0);
    }
    usleep(300000);
    cr_assert(WIFEXITED(stop(SIGUSR2)));
    usleep(200000);
    atomic_store(&stop_flag, true);
    long answered = 0, failed = 0, lost = 0;
    for (int i = 0; i < PERSISTENT_CLIENTS; i++) {
        pthread_join(ts[i], NULL);
        close(ps[i].fd);
        answered += ps[i].answered;
        failed += ps[i].send_failed;
        lost += ps[i].lost;
    }
    fprintf(stderr,
            "test_adoption: %d connections kept open through a hand-over: %ld requests "
            "answered, %ld refused at send, %ld lost\n",
            PERSISTENT_CLIENTS, answered, failed, lost);
    cr_assert_gt(answered, 0);
    cr_assert_eq(lost, 0, "%ld requests were sent and never answered (reset or end of stream)",
                 lost);
}
