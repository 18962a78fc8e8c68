/* bulkheadd end to end: a real daemon on a temporary socket, driven through
 * the control protocol as an agent platform would, and ended by its pid.
 * The tier comes from BULKHEADD_TEST_TIER; by default kernel, and container
 * when this host cannot verify kernel (said on stderr, and the assertions
 * only the kernel tier can make skip with a message). When the host cannot
 * give the tier at all, the tests skip and say why. */
#include <criterion/criterion.h>
#include <jansson.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <grp.h>
#include <time.h>
#include <unistd.h>

#include "control.pb-c.h"
#include "frame.h"
#include "cleanup.h"
#include "harness.h"

typedef Bulkhead__Control__Request Req;
typedef Bulkhead__Control__Response Resp;

/* the daemon of the running test; holds H_SUPERVISOR_TEST_LOCK shared,
 * test_supervisor_load.c's abuse test takes it exclusively to measure
 * latency alone */
static struct h_daemon bhd = H_DAEMON_INIT(10000);

static int conn(void)
{
    return h_connect(bhd.sock);
}

static void stop_daemon(void)
{
    h_daemon_stop(&bhd);
}

/* Starts bulkheadd with extra args at the test tier (see the top). */
static void start_daemon(const char *extra)
{
    char args[1024];
    snprintf(args, sizeof(args), "--warm 0 %s", extra ? extra : "");
    h_daemon_start(&bhd, "test_supervisor", "/tmp/bhd-e2e-XXXXXX", args);
}

/* True when the daemon serves the kernel tier; otherwise says what is not
 * checked (a visible skip of one assertion, the test goes on). */
static bool kernel_only(const char *what)
{
    if (strcmp(bhd.tier, "kernel") == 0)
        return true;
    if (h_kernel_required())
        cr_assert_fail("BULKHEAD_REQUIRE_KERNEL=1, and the daemon serves tier %s: %s is not "
                       "checked",
                       bhd.tier, what);
    cr_log_warn("skipped at tier %s (kernel only): %s", bhd.tier, what);
    fprintf(stderr, "test_supervisor: skipped at tier %s (kernel only): %s\n", bhd.tier, what);
    return false;
}

static Resp *roundtrip_fd(int fd, Req *req)
{
    cr_assert_eq(h_send(fd, req), 0);
    struct bh_error err = {0};
    Resp *r = h_recv(fd, 120000, &err);
    cr_assert_not_null(r, "no answer to request case %d: %s", (int)req->body_case, err.msg);
    return r;
}

static Resp *roundtrip(Req *req)
{
    int fd = conn();
    cr_assert(fd >= 0);
    Resp *r = roundtrip_fd(fd, req);
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
    cr_assert_eq(strlen(id), 32);
    bulkhead__control__response__free_unpacked(r, NULL);
    return id;
}

static Resp *run_files(const char *id, const char *lang, const char *code, uint64_t timeout_ms,
                       Bulkhead__Control__File **files, size_t n_files)
{
    Req req;
    Bulkhead__Control__RunCell c;
    h_cell_req(&req, &c, id, lang, code, timeout_ms, files, n_files);
    return roundtrip(&req);
}

static Resp *run(const char *id, const char *lang, const char *code)
{
    return run_files(id, lang, code, 0, NULL, 0);
}

static Bulkhead__Control__CellResult *ok(Resp *r)
{
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL, "not a result: %s",
                 r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? r->error->message : "?");
    return r->run_cell;
}

static Bulkhead__Control__Error *error_of(Resp *r)
{
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_ERROR, "expected an error");
    return r->error;
}

/* How many live sessions owner has (ListSessions: not a use of any). */
static size_t sessions_of(const char *owner)
{
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__ListSessions ls = BULKHEAD__CONTROL__LIST_SESSIONS__INIT;
    ls.owner = (char *)owner;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_LIST_SESSIONS;
    req.list_sessions = &ls;
    Resp *r = roundtrip(&req);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_LIST_SESSIONS);
    size_t n = r->list_sessions->n_sessions;
    bulkhead__control__response__free_unpacked(r, NULL);
    return n;
}

static void close_session(const char *id)
{
    Req req;
    Bulkhead__Control__CloseSession c;
    h_close_req(&req, &c, id);
    Resp *r = roundtrip(&req);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_CLOSE_SESSION);
    bulkhead__control__response__free_unpacked(r, NULL);
}

#define FREE(r) bulkhead__control__response__free_unpacked((r), NULL)

/* 360 s bounds a hang only: at load 30+ a_cell_racing_its_close took 204 s
 * and a_recently_used_session_is_not_evicted_for_a_crowding_uid 160 s. */
TestSuite(supervisor, .fini = stop_daemon, .timeout = 360);

Test(supervisor, state_persists_between_cells_in_both_languages)
{
    start_daemon(NULL);
    char *id = open_session("alice");
    Resp *r = run(id, "python", "x = 41");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_eq(c->exit_code, 0, "stderr: %s", c->stderr);
    cr_assert(c->fresh_interpreter);
    cr_assert(c->fresh_sandbox);
    cr_assert_eq(c->record->cell, 1);
    char first_digest[65];
    snprintf(first_digest, sizeof(first_digest), "%s", c->record->digest);
    FREE(r);
    r = run(id, "python", "x + 1");
    c = ok(r);
    cr_assert_str_eq(c->value, "42");
    cr_assert_str_eq(c->stdout, "42\n");
    cr_assert(!c->fresh_interpreter);
    cr_assert(!c->fresh_sandbox);
    cr_assert(c->state_kept && c->files_persist);
    cr_assert_str_eq(c->record->previous_digest, first_digest, "records form a chain");
    FREE(r);
    r = run(id, "javascript", "let y = 5; const z = await Promise.resolve(2); y * z");
    c = ok(r);
    cr_assert_str_eq(c->value, "10", "stderr: %s", c->stderr);
    cr_assert(c->fresh_interpreter);
    FREE(r);
    r = run(id, "javascript", "let y = 7; y + z");
    c = ok(r);
    cr_assert_str_eq(c->value, "9", "redeclared let: %s", c->stderr);
    FREE(r);
    r = run(id, "python", "import asyncio\nawait asyncio.sleep(0)\n1/0");
    c = ok(r);
    cr_assert_eq(c->exit_code, 1);
    cr_assert(strstr(c->stderr, "ZeroDivisionError") != NULL);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, files_persist_and_handed_in_files_are_visible)
{
    start_daemon(NULL);
    char *id = open_session("alice");
    Resp *r = run(id, "python", "open('note.txt', 'w').write('kept')");
    ok(r);
    FREE(r);
    r = run(id, "javascript", "require('fs').readFileSync('note.txt', 'utf8')");
    cr_assert_str_eq(ok(r)->value, "'kept'");
    FREE(r);
    Bulkhead__Control__File f = BULKHEAD__CONTROL__FILE__INIT;
    f.path = "data/in.csv";
    f.content = "a,b\n1,2\n";
    Bulkhead__Control__File *fp[] = {&f};
    r = run_files(id, "python", "open('data/in.csv').read()", 0, fp, 1);
    cr_assert_str_eq(ok(r)->value, "'a,b\\n1,2\\n'");
    FREE(r);
    /* bad paths are refused before anything runs */
    const char *bad[] = {"../x", "/etc/x", "a/../../x", "a//b", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        f.path = (char *)bad[i];
        r = run_files(id, "python", "print('ran')", 0, fp, 1);
        Bulkhead__Control__Error *e = error_of(r);
        cr_assert_eq(e->code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, "%s", bad[i]);
        cr_assert(e->not_dispatched);
        FREE(r);
    }
    /* a symlink is never followed when writing */
    r = run(id, "python", "import os; os.symlink('/tmp', 'link')");
    ok(r);
    FREE(r);
    f.path = "link/owned";
    r = run_files(id, "python", "print('ran')", 0, fp, 1);
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, deadline_kills_the_interpreter_not_the_session)
{
    start_daemon(NULL);
    char *id = open_session("alice");
    Resp *r = run(id, "python", "open('f', 'w').write('x'); y = 1");
    ok(r);
    FREE(r);
    int64_t t0 = bh_now_ms();
    r = run_files(id, "python", "while True: pass", 500, NULL, 0);
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_eq(c->exit_code, 124);
    cr_assert(c->timed_out);
    cr_assert(!c->state_kept);
    cr_assert(c->files_persist);
    /* 124 is the agent's own deadline (the daemon's grace kill, 10 s later,
     * answers 137 and ends the session): the clock only bounds a hang */
    cr_assert_lt(bh_now_ms() - t0, 60000);
    FREE(r);
    r = run(id, "python", "import os; (os.path.exists('f'), 'y' in globals())");
    c = ok(r);
    cr_assert(c->fresh_interpreter);
    cr_assert(!c->fresh_sandbox);
    cr_assert_str_eq(c->value, "(True, False)");
    FREE(r);
    r = run_files(id, "javascript", "for(;;){}", 500, NULL, 0);
    cr_assert_eq(ok(r)->exit_code, 124);
    FREE(r);
    r = run(id, "javascript", "1");
    cr_assert(ok(r)->fresh_interpreter);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, endless_output_is_truncated_with_the_flag)
{
    start_daemon("--output 4096");
    char *id = open_session("alice");
    /* past the cap before anything else, so a loaded machine that runs the
     * loop only briefly before the deadline still truncates */
    Resp *r = run_files(id, "python",
                        "import sys\n"
                        "sys.stdout.write('spam' * 3000); sys.stdout.flush()\n"
                        "while True: print('spam' * 100)",
                        5000, NULL, 0);
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert(c->stdout_truncated);
    cr_assert_leq(strlen(c->stdout), 4096 * 3);
    cr_assert_gt(c->stdout_bytes, 4096);
    cr_assert(c->timed_out);
    FREE(r);
    r = run(id, "python", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok\\n')");
    c = ok(r);
    cr_assert(strstr(c->stdout, "ok") != NULL, "invalid UTF-8 is replaced, not passed on");
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, background_children_are_gone_after_the_call)
{
    start_daemon(NULL);
    char *id = open_session("alice");
    Resp *r = run(id, "python",
                  "import subprocess\n"
                  "subprocess.Popen(['sh', '-c', 'sleep 300 & setsid sleep 301 & sleep 302'])\n"
                  "subprocess.Popen(['sleep', '303'], start_new_session=True)\n"
                  "import time; time.sleep(0.3)\n");
    ok(r);
    FREE(r);
    r = run(id, "python",
            "import os\n"
            "n = 0\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit():\n"
            "      try:\n"
            "        st = open(f'/proc/{p}/stat', 'rb').read()\n"
            "        n += b'(sleep)' in st and st.split(b')')[-1].split()[0] != b'Z'\n"
            "      except OSError: pass\n"
            "n");
    cr_assert_str_eq(ok(r)->value, "0");
    FREE(r);
    /* a leftover holding the output pipe open does not hold the call */
    int64_t t0 = bh_now_ms();
    r = run(id, "python",
            "import os\nif os.fork() == 0:\n    os.setsid()\n    import time; "
            "time.sleep(60)\nprint('done')");
    cr_assert_str_eq(ok(r)->stdout, "done\n");
    /* held, it would end at the 30 s default timeout; 20 s leaves a slow
     * machine room without letting that pass */
    cr_assert(!ok(r)->timed_out, "the call waited for the leftover holding its output pipe");
    cr_assert_lt(bh_now_ms() - t0, 20000);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, idle_close_and_close_give_a_fresh_sandbox)
{
    start_daemon("--idle-timeout 500");
    char *id = open_session("alice");
    Resp *r = run(id, "python", "open('f', 'w').write('x')");
    ok(r);
    FREE(r);
    /* Wait for the maintenance thread to end it (a listing is not a use):
     * a call that arrived first would still be served. Bounded, not timed. */
    size_t listed = 1;
    for (int64_t end = bh_now_ms() + 60000; listed > 0 && bh_now_ms() < end;) {
        usleep(100 * 1000);
        listed = sessions_of("alice");
    }
    cr_assert_eq(listed, 0, "the session idle for 60 s (idle timeout 0.5 s) is still listed");
    r = run(id, "python", "1");
    Bulkhead__Control__Error *e = error_of(r);
    cr_assert_eq(e->code, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED);
    cr_assert_eq(e->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__IDLE);
    FREE(r);
    free(id);
    id = open_session("alice");
    r = run(id, "python", "import os; os.path.exists('f')");
    cr_assert_str_eq(ok(r)->value, "False");
    cr_assert(ok(r)->fresh_sandbox);
    FREE(r);
    close_session(id);
    r = run(id, "python", "1");
    cr_assert_eq(error_of(r)->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__CLOSED);
    FREE(r);
    free(id);
}

Test(supervisor, fourth_session_evicts_the_owners_lru)
{
    start_daemon(NULL);
    char *ids[4];
    for (int i = 0; i < 3; i++)
        ids[i] = open_session("bob");
    /* touch 0 and 2: 1 is the least recently used */
    Resp *r = run(ids[0], "python", "1");
    FREE(r);
    r = run(ids[2], "python", "1");
    FREE(r);
    ids[3] = open_session("bob");
    r = run(ids[1], "python", "1");
    Bulkhead__Control__Error *e = error_of(r);
    cr_assert_eq(e->code, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED);
    cr_assert_eq(e->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED);
    FREE(r);
    r = run(ids[0], "python", "2");
    cr_assert_str_eq(ok(r)->value, "2");
    FREE(r);
    for (int i = 0; i < 4; i++) {
        if (i != 1)
            close_session(ids[i]);
        free(ids[i]);
    }
}

Test(supervisor, owners_never_see_each_others_files_or_sessions)
{
    start_daemon(NULL);
    char *a = open_session("alice");
    char *b = open_session("mallory");
    Resp *r = run(a, "python", "open('secret', 'w').write('s3cret')");
    FREE(r);
    r = run(b, "python", "import os; os.listdir('.')");
    cr_assert(strstr(ok(r)->value, "secret") == NULL);
    FREE(r);
    cr_assert_eq(sessions_of("mallory"), 1);
    r = run("0123456789abcdef0123456789abcdef", "python", "1");
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND);
    FREE(r);
    close_session(a);
    close_session(b);
    free(a);
    free(b);
}

Test(supervisor, floor_above_the_tier_is_refused_with_nothing_run)
{
    start_daemon(NULL);
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__OpenSession o = BULKHEAD__CONTROL__OPEN_SESSION__INIT;
    o.owner = "alice";
    o.minimum_isolation = "vm";
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_OPEN_SESSION;
    req.open_session = &o;
    Resp *r = roundtrip(&req);
    Bulkhead__Control__Error *e = error_of(r);
    cr_assert_eq(e->code, BULKHEAD__CONTROL__ERROR__CODE__FLOOR_NOT_MET);
    cr_assert(e->not_dispatched);
    cr_assert(!e->retryable);
    FREE(r);
    /* a floor at the verified tier is met; above it (container host) refused */
    o.minimum_isolation = "kernel";
    r = roundtrip(&req);
    if (strcmp(bhd.tier, "kernel") == 0) {
        cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION);
        cr_assert_str_eq(r->open_session->tier, "kernel");
        char *kid = strdup(r->open_session->session_id);
        close_session(kid);
        free(kid);
    } else {
        cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__FLOOR_NOT_MET);
        cr_assert(r->error->not_dispatched);
    }
    FREE(r);
    /* nothing ran for the refused floors: only the kernel-floor session opened */
    char audit[128];
    snprintf(audit, sizeof(audit), "%s/audit.log", bhd.tmp);
    FILE *af = fopen(audit, "r");
    char line[2048];
    int cells = 0;
    while (af && fgets(line, sizeof(line), af))
        cells += strstr(line, "\"event\":\"cell\"") != NULL;
    if (af)
        fclose(af);
    cr_assert_eq(cells, 0, "a cell ran for a refused floor");
    /* unknown language: unsupported */
    char *id = open_session("alice");
    r = run(id, "cobol", "1");
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__UNSUPPORTED);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, bad_frames_get_an_error_or_a_close_never_a_crash)
{
    start_daemon("--max-frame 65536");
    /* wrong version: refused before the payload */
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Stats st = BULKHEAD__CONTROL__STATS__INIT;
    req.version = 99;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_STATS;
    req.stats = &st;
    Resp *r = roundtrip(&req);
    cr_assert(strstr(error_of(r)->message, "version") != NULL);
    FREE(r);
    /* garbage */
    int fd = conn();
    cr_assert_eq(bh_frame_write(fd, "\xff\xff\xff\xff\xff", 5, NULL), 0);
    void *ans;
    size_t len;
    int rc = bh_frame_read(fd, 1 << 20, bh_now_ms() + 5000, &ans, &len, NULL);
    if (rc == 1) {
        Resp *g = bulkhead__control__response__unpack(NULL, len, ans);
        cr_assert_not_null(g);
        cr_assert_eq(g->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_ERROR);
        FREE(g);
        free(ans);
    }
    close(fd);
    /* oversized: an error, then the connection closes */
    fd = conn();
    uint8_t h[4];
    bh_frame_header_encode(h, 1u << 30);
    cr_assert_eq(write(fd, h, 4), 4);
    rc = bh_frame_read(fd, 1 << 20, bh_now_ms() + 5000, &ans, &len, NULL);
    cr_assert_eq(rc, 1);
    free(ans);
    rc = bh_frame_read(fd, 1 << 20, bh_now_ms() + 5000, &ans, &len, NULL);
    cr_assert_eq(rc, 0, "the connection closes after an oversized frame");
    close(fd);
    /* unknown procedure (empty oneof), cut-short frame */
    Req empty = BULKHEAD__CONTROL__REQUEST__INIT;
    r = roundtrip(&empty);
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST);
    FREE(r);
    fd = conn();
    bh_frame_header_encode(h, 100);
    cr_assert_eq(write(fd, h, 4), 4);
    cr_assert_eq(write(fd, "ab", 2), 2);
    close(fd);
    /* still serving */
    r = roundtrip(&req);
    req.version = 1;
    FREE(r);
    r = roundtrip(&req);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_STATS);
    FREE(r);
    struct stat sst;
    cr_assert_eq(stat(bhd.sock, &sst), 0);
    cr_assert_eq(sst.st_mode & 0777, 0600);
}

Test(supervisor, describe_and_results_name_the_verified_tier_and_the_guest_is_unprivileged)
{
    start_daemon(NULL);
    Req req = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Describe d = BULKHEAD__CONTROL__DESCRIBE__INIT;
    req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE;
    req.describe = &d;
    Resp *r = roundtrip(&req);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE);
    Bulkhead__Control__DescribeResult *dr = r->describe;
    cr_assert_str_eq(dr->tier->tier, bhd.tier);
    cr_assert_gt(dr->tier->n_checks, 0);
    bool all_passed = true;
    for (size_t i = 0; i < dr->tier->n_checks; i++)
        if (!dr->tier->checks[i]->passed && strstr(dr->tier->checks[i]->detail, "required for") &&
            !strstr(dr->tier->checks[i]->detail, "required for none"))
            all_passed = false;
    if (kernel_only("Describe reports tier kernel with every required check passed")) {
        cr_assert_str_eq(dr->tier->tier, "kernel");
        cr_assert(all_passed, "a required check failed at the kernel tier");
    }
    cr_assert_eq(dr->n_languages, 2,
                 "both languages proven at start (javascript at the kernel "
                 "tier runs node --jitless)");
    cr_assert(dr->supports_sessions);
    FREE(r);
    char *id = open_session("alice");
    r = run(id, "python",
            "import os; (os.getuid(), os.getgid(), os.getcwd(), "
            "os.stat('.').st_uid, open('/proc/self/status').read().split('CapEff:')"
            "[1].split()[0])");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_str_eq(c->value, "(1000, 1000, '/work', 1000, '0000000000000000')", "%s", c->stderr);
    cr_assert_str_eq(c->tier, bhd.tier);
    FREE(r);
    r = run(id, "javascript", "[process.getuid(), process.cwd()]");
    cr_assert_str_eq(ok(r)->value, "[ 1000, '/work' ]", "stderr: %s", ok(r)->stderr);
    FREE(r);
    /* the guest's own view at the kernel tier: seccomp filter, no_new_privs */
    r = run(id, "python",
            "s = open('/proc/self/status').read(); "
            "[l.split()[1] for l in s.splitlines() if l.startswith(('Seccomp:', "
            "'NoNewPrivs:'))]");
    cr_assert_str_eq(ok(r)->value, "['1', '2']", "%s", ok(r)->stderr);
    FREE(r);
    close_session(id);
    free(id);
}

/* ---- limits for real ------------------------------------------------------ */

static bool has_limit(Bulkhead__Control__CellResult *c, const char *name)
{
    for (size_t i = 0; i < c->n_limits_hit; i++)
        if (strcmp(c->limits_hit[i], name) == 0)
            return true;
    return false;
}

Test(supervisor, memory_bomb_is_killed_and_the_session_says_so)
{
    start_daemon("--memory 134217728");
    char *id = open_session("alice");
    Resp *r = run(id, "python", "keep = 'still here'; open('f', 'w').write('x')");
    ok(r);
    FREE(r);
    r = run_files(id, "python", "a = []\nwhile True: a.append(bytearray(16 << 20))", 20000, NULL,
                  0);
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_eq(c->exit_code, 137, "exit %d stderr %s", c->exit_code, c->stderr);
    cr_assert(!c->timed_out);
    cr_assert(has_limit(c, "memory"), "the result names the memory limit");
    cr_assert(strstr(c->stderr, "memory") != NULL, "stderr says so: %s", c->stderr);
    cr_assert(!c->state_kept);
    FREE(r);
    r = run(id, "python", "import os; ('keep' in globals(), os.path.exists('f'))");
    c = ok(r);
    cr_assert(c->fresh_interpreter);
    cr_assert(!c->fresh_sandbox);
    cr_assert_str_eq(c->value, "(False, True)");
    FREE(r);
    /* the same in node: its heap grows until the cgroup says no */
    r = run_files(id, "javascript", "const a = []; for (;;) a.push(Buffer.alloc(16 << 20, 1));",
                  20000, NULL, 0);
    c = ok(r);
    cr_assert_neq(c->exit_code, 0);
    cr_assert(!c->state_kept);
    FREE(r);
    r = run(id, "javascript", "typeof a");
    cr_assert(ok(r)->fresh_interpreter);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, fork_bomb_is_contained)
{
    start_daemon("--pids 64");
    char *id = open_session("alice");
    Resp *r = run_files(id, "python",
                        "import os, time\n"
                        "n = 0\n"
                        "for i in range(10000):\n"
                        "    try:\n"
                        "        if os.fork() == 0:\n"
                        "            time.sleep(60); os._exit(0)\n"
                        "        n += 1\n"
                        "    except OSError:\n"
                        "        break\n"
                        "n",
                        20000, NULL, 0);
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_eq(c->exit_code, 0, "%s", c->stderr);
    cr_assert_lt(atoi(c->value), 64, "forks stopped below pids.max: %s", c->value);
    cr_assert(has_limit(c, "pids"), "the result names the pids limit");
    FREE(r);
    /* every child is gone and the session forks again */
    r = run(id, "python", "import subprocess; subprocess.run(['true']).returncode");
    cr_assert_str_eq(ok(r)->value, "0", "%s", ok(r)->stderr);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, cpu_quota_is_applied)
{
    start_daemon("--cpu 100");
    char *id = open_session("alice");
    Resp *r = run(id, "python",
                  "import time\nt0 = time.monotonic(); c0 = time.process_time()\n"
                  "while time.monotonic() - t0 < 1.0: pass\n"
                  "round(time.process_time() - c0, 2)");
    Bulkhead__Control__CellResult *c = ok(r);
    double used = atof(c->value);
    cr_assert_lt(used, 0.4, "a tenth of a core for 1 s used %.2f s of CPU", used);
    cr_assert_gt(used, 0.01);
    FREE(r);
    close_session(id);
    free(id);
}

Test(supervisor, disk_budget_ends_the_session_and_the_next_call_is_told)
{
    start_daemon("--disk 4194304");
    char *id = open_session("alice");
    Resp *r = run(id, "python", "open('small', 'w').write('x' * 1000); 1");
    cr_assert(ok(r)->files_persist);
    FREE(r);
    r = run(id, "python",
            "try:\n    open('big', 'wb').write(b'x' * (4 << 20) + b'y' * (512 << 10))\n"
            "except OSError as e:\n    print('refused', e)\n");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert(!c->files_persist, "the call that went over the budget ended the session");
    cr_assert(has_limit(c, "disk_budget"));
    FREE(r);
    r = run(id, "python", "1");
    Bulkhead__Control__Error *e = error_of(r);
    cr_assert_eq(e->code, BULKHEAD__CONTROL__ERROR__CODE__SESSION_ENDED);
    cr_assert_eq(e->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__DISK_BUDGET);
    cr_assert(e->not_dispatched);
    FREE(r);
    free(id);
}

/* Processes whose cmdline holds marker, outside this test process. */
static int count_procs(const char *marker)
{
    int n = 0;
    DIR *d = opendir("/proc");
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300], buf[4096];
        snprintf(path, sizeof(path), "/proc/%s/cmdline", e->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (len <= 0)
            continue;
        for (ssize_t i = 0; i < len; i++)
            if (buf[i] == '\0')
                buf[i] = ' ';
        buf[len] = '\0';
        if (strstr(buf, marker) != NULL)
            n++;
    }
    closedir(d);
    return n;
}

static int count_cgroups(pid_t daemon)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "ls -d /sys/fs/cgroup/*/bulkhead/bhd-%d-* /sys/fs/cgroup/unified/bulkhead/bhd-%d-* "
             "2>/dev/null | wc -l",
             (int)daemon, (int)daemon);
    FILE *p = popen(cmd, "r");
    int n = 0;
    if (fscanf(p, "%d", &n) != 1)
        n = -1;
    pclose(p);
    return n;
}

/* Every process below pid (keepers, sentries, agents, interpreters, cell
 * children) with its start time, so a reused pid is not mistaken for one. */
struct proc_id {
    pid_t pid;
    unsigned long long start;
};

static bool proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start, char *comm, size_t n)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return false;
    size_t len = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[len] = '\0';
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (l == NULL || r == NULL)
        return false;
    snprintf(comm, n, "%.*s", (int)(r - l - 1), l + 1);
    char state;
    int pp;
    unsigned long long st = 0;
    /* fields after comm: state ppid ... starttime is field 22 */
    if (sscanf(r + 2,
               "%c %d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
               "%llu",
               &state, &pp, &st) != 3)
        return false;
    *ppid = pp;
    *start = st;
    return state != 'Z' && state != 'X';
}

static size_t descendants(pid_t root, struct proc_id *out, size_t max)
{
    size_t n = 0;
    out[n++] = (struct proc_id){root, 0};
    for (bool grew = true; grew;) {
        grew = false;
        DIR *d = opendir("/proc");
        struct dirent *e;
        while ((e = readdir(d)) != NULL && n < max) {
            pid_t pid = atoi(e->d_name), pp;
            unsigned long long st;
            char comm[64];
            if (pid <= 0 || !proc_stat(pid, &pp, &st, comm, sizeof(comm)))
                continue;
            bool known = false, parent = false;
            for (size_t i = 0; i < n; i++) {
                known |= out[i].pid == pid;
                parent |= out[i].pid == pp;
            }
            if (!known && parent) {
                out[n++] = (struct proc_id){pid, st};
                grew = true;
            }
        }
        closedir(d);
    }
    return n;
}

static int still_alive(const struct proc_id *p, size_t n, char *which, size_t wn)
{
    int alive = 0;
    which[0] = '\0';
    for (size_t i = 1; i < n; i++) {
        pid_t pp;
        unsigned long long st;
        char comm[64];
        if (proc_stat(p[i].pid, &pp, &st, comm, sizeof(comm)) && st == p[i].start) {
            alive++;
            size_t l = strlen(which);
            snprintf(which + l, wn - l, " %d(%s)", (int)p[i].pid, comm);
        }
    }
    return alive;
}

/* Mounts of the host's mount namespace that name the daemon's sandboxes or
 * its temporary directory. */
static int count_mounts(pid_t daemon)
{
    char tag[32], line[4096];
    snprintf(tag, sizeof(tag), "bhd-%d-", (int)daemon);
    FILE *f = fopen("/proc/self/mountinfo", "re");
    int n = 0;
    while (f && fgets(line, sizeof(line), f))
        n += strstr(line, tag) != NULL || strstr(line, bhd.tmp) != NULL;
    if (f)
        fclose(f);
    return n;
}

static void leaves_nothing(int sig)
{
    /* after kill -9, sessions wait for a new daemon this long, then go */
    start_daemon("--warm 1 --adopt-grace 1000");
    pid_t dpid = bhd.pid;
    char *id = open_session("alice");
    Resp *r = run(id, "python",
                  "import subprocess; subprocess.Popen(['sleep', '4242'])\n"
                  "open('/tmp/bhd-marker-4243', 'w').write('x'); 1");
    FREE(r);
    r = run(id, "python",
            "import subprocess; subprocess.Popen(['sleep', '4244'], start_new_session=True); "
            "import time; time.sleep(0.2); 1");
    FREE(r);
    /* a call in flight when the daemon goes */
    int busy = conn();
    {
        Req req = BULKHEAD__CONTROL__REQUEST__INIT;
        Bulkhead__Control__RunCell c = BULKHEAD__CONTROL__RUN_CELL__INIT;
        c.session_id = id;
        c.language = "python";
        c.code = "import subprocess; subprocess.Popen(['sleep', '4245']); "
                 "import time; time.sleep(30)";
        req.version = 1;
        req.body_case = BULKHEAD__CONTROL__REQUEST__BODY_RUN_CELL;
        req.run_cell = &c;
        size_t len = bulkhead__control__request__get_packed_size(&req);
        uint8_t *buf = malloc(len);
        bulkhead__control__request__pack(&req, buf);
        cr_assert_eq(bh_frame_write(busy, buf, len, NULL), 0);
        free(buf);
    }
    usleep(500 * 1000);
    for (int i = 0; i < 50 && count_cgroups(dpid) < 2; i++)
        usleep(100000); /* the warm box too */
    cr_assert_gt(count_cgroups(dpid), 0, "session cgroups exist while it runs");
    static struct proc_id procs[4096];
    size_t n_procs = descendants(dpid, procs, sizeof(procs) / sizeof(procs[0]));
    cr_assert_gt(n_procs, 4, "keepers, sentries, agents and interpreters run (%zu)", n_procs);
    kill(dpid, sig);
    waitpid(dpid, NULL, 0);
    bhd.pid = -1;
    int alive = -1, cgs = -1, mounts = -1, named = -1;
    char which[1024] = "";
    /* The keepers clean up after the adoption grace: 120 s bounds a hang only
     * (100 polls, ~10 s, were a speed limit under load). */
    for (double end = h_now() + 120; h_now() < end;) {
        alive = still_alive(procs, n_procs, which, sizeof(which));
        /* by marker: only this test's cells run these (other daemons' agents
         * may run in parallel tests, so agents are checked by tree above) */
        named = count_procs("sleep 424");
        cgs = count_cgroups(dpid);
        mounts = count_mounts(dpid);
        if (alive == 0 && named == 0 && cgs == 0 && mounts == 0)
            break;
        usleep(100000);
    }
    close(busy);
    cr_assert_eq(alive, 0, "processes of the daemon remain:%s", which);
    cr_assert_eq(named, 0, "processes of the sessions remain");
    cr_assert_eq(cgs, 0, "cgroups of the sessions remain");
    cr_assert_eq(mounts, 0, "mounts of the sessions remain in the host's mount namespace");
    if (sig == SIGTERM)
        cr_assert(access(bhd.sock, F_OK) != 0, "the socket is removed");
    free(id);
}

Test(supervisor, sigterm_leaves_nothing_behind)
{
    leaves_nothing(SIGTERM);
}

Test(supervisor, kill_9_leaves_nothing_behind)
{
    leaves_nothing(SIGKILL);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static void pct(const char *what, int64_t *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_i64);
    printf("bulkheadd bench: %-50s p50 %6.2f ms  p99 %6.2f ms  (n=%zu)\n", what, v[n / 2] / 1000.0,
           v[(n * 99) / 100 >= n ? n - 1 : (n * 99) / 100] / 1000.0, n);
}

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static long long read_ll(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return -1;
    char line[256];
    long long v = -1;
    while (fgets(line, sizeof(line), f)) {
        if (key == NULL) {
            v = atoll(line);
            break;
        }
        if (strncmp(line, key, strlen(key)) == 0) {
            v = atoll(line + strlen(key));
            break;
        }
    }
    fclose(f);
    return v;
}

/* Memory of n idle sessions: PSS of every process below the daemon (shared
 * pages counted once, split among sharers) and what the sessions' memory
 * cgroups are charged (their processes, tmpfs files, kernel memory). */
static void measure_sessions(const char *what, int n, bool with_js)
{
    char **ids = calloc((size_t)n, sizeof(char *));
    for (int i = 0; i < n; i++) {
        ids[i] = open_session(i % 2 ? "bench-a" : "bench-b");
        Resp *r = run(ids[i], "python", "1");
        FREE(r);
        if (with_js) {
            r = run(ids[i], "javascript", "1");
            FREE(r);
        }
    }
    usleep(500 * 1000);
    static struct proc_id procs[8192];
    size_t np = descendants(bhd.pid, procs, sizeof(procs) / sizeof(procs[0]));
    long long pss_kb = 0, daemon_kb = 0;
    for (size_t i = 0; i < np; i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/smaps_rollup", (int)procs[i].pid);
        long long v = read_ll(path, "Pss:");
        if (v > 0) {
            pss_kb += v;
            if (i == 0)
                daemon_kb = v;
        }
    }
    long long cg_bytes = 0;
    char pat[128];
    snprintf(pat, sizeof(pat), "bhd-%d-", (int)bhd.pid);
    DIR *d = opendir("/sys/fs/cgroup/memory/bulkhead");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, pat, strlen(pat)) != 0)
            continue;
        char path[512];
        snprintf(path, sizeof(path), "/sys/fs/cgroup/memory/bulkhead/%s/memory.usage_in_bytes",
                 e->d_name);
        long long v = read_ll(path, NULL);
        if (v > 0)
            cg_bytes += v;
    }
    if (d)
        closedir(d);
    double per_pss = (pss_kb - daemon_kb) / 1024.0 / n;
    double per_cg = cg_bytes / 1048576.0 / n;
    printf("bulkheadd bench: %d idle %s sessions: PSS %.1f MiB per session (keeper + sentry + "
           "agent + interpreters; bulkheadd itself %.1f MiB), memory cgroup %.1f MiB per session; "
           "4 GiB holds about %d such sessions\n",
           n, what, per_pss, daemon_kb / 1024.0, per_cg,
           (int)(4096.0 / (per_pss > per_cg ? per_pss : per_cg)));
    for (int i = 0; i < n; i++) {
        close_session(ids[i]);
        free(ids[i]);
    }
    free(ids);
}

static void idle_memory(void)
{
    measure_sessions("Python", 20, false);
    measure_sessions("Python+JavaScript", 10, true);
}

/* Numbers for the note: open cold and warm, first and warm cells, idle RSS.
 * Runs only with BULKHEADD_BENCH=1 (it takes a while). */
Test(supervisor_bench, open_and_cell_latency, .timeout = 600)
{
    if (getenv("BULKHEADD_BENCH") == NULL)
        cr_skip_test("set BULKHEADD_BENCH=1 to measure");
    const char *langs[] = {"python", "javascript"};
    for (int warm = 0; warm < 2; warm++) {
        start_daemon(warm ? "--warm 2 --prestart python,javascript --max-sessions-per-owner 100"
                          : "--max-sessions-per-owner 100 --max-sessions 200");
        enum { N = 10 };
        int64_t open_us[N], first_us[2][N], cell_us[2][N * 20];
        size_t n_cell[2] = {0, 0};
        for (int i = 0; i < N; i++) {
            if (warm)
                usleep(600 * 1000); /* let the pool refill */
            int64_t t = now_us();
            char *id = open_session("bench");
            open_us[i] = now_us() - t;
            for (int l = 0; l < 2; l++) {
                t = now_us();
                Resp *r = run(id, langs[l], "1 + 1");
                first_us[l][i] = now_us() - t;
                ok(r);
                FREE(r);
                for (int k = 0; k < 20; k++) {
                    t = now_us();
                    r = run(id, langs[l], "1 + 1");
                    cell_us[l][n_cell[l]++] = now_us() - t;
                    FREE(r);
                }
            }
            close_session(id);
            free(id);
        }
        pct(warm ? "OpenSession (warm pool)" : "OpenSession (cold)", open_us, N);
        if (warm) {
            pct("first python cell (warm pool, both prestarted)", first_us[0], N);
            pct("first javascript cell (warm pool, both prestarted)", first_us[1], N);
        }
        if (!warm) {
            for (int l = 0; l < 2; l++) {
                char what[64];
                snprintf(what, sizeof(what), "first %s cell", langs[l]);
                pct(what, first_us[l], N);
                snprintf(what, sizeof(what), "warm %s cell", langs[l]);
                pct(what, cell_us[l], n_cell[l]);
            }
            idle_memory();
        }
        stop_daemon();
    }
}

/* ---- protocol version 2: sessions keyed by owner + conversation --------- */

/* OpenSession for owner + conversation at version (reuse as given); the
 * answer, on a connection of its own (another client, as far as the daemon
 * can tell). */
static Resp *open_keyed(const char *owner, const char *conversation, bool reuse, uint32_t version)
{
    Req req;
    Bulkhead__Control__OpenSession o;
    h_open_req(&req, &o, owner);
    o.conversation = (char *)conversation;
    o.reuse = reuse;
    req.version = version;
    return roundtrip(&req);
}

static char *open_reused(const char *owner, const char *conversation, bool *reused)
{
    Resp *r = open_keyed(owner, conversation, true, 2);
    char *id = h_session_id(r);
    *reused = r->open_session->reused;
    FREE(r);
    return id;
}

Test(supervisor, reuse_answers_the_open_session_of_a_key_across_clients)
{
    start_daemon(NULL);
    Req dreq = BULKHEAD__CONTROL__REQUEST__INIT;
    Bulkhead__Control__Describe d = BULKHEAD__CONTROL__DESCRIBE__INIT;
    dreq.body_case = BULKHEAD__CONTROL__REQUEST__BODY_DESCRIBE;
    dreq.describe = &d;
    Resp *r = roundtrip(&dreq);
    cr_assert_eq(r->describe->protocol_version, 2);
    FREE(r);

    bool reused;
    char *a = open_reused("alice", "thread-1", &reused);
    cr_assert_not(reused, "the first open of a key must open a session");
    r = run(a, "python", "rows = [1, 2, 3]");
    ok(r);
    FREE(r);
    char *again = open_reused("alice", "thread-1", &reused);
    cr_assert(reused, "the second open of a key must answer the open session");
    cr_assert_str_eq(again, a);
    r = run(again, "python", "sum(rows)");
    cr_assert_str_eq(ok(r)->value, "6");
    cr_assert_not(ok(r)->fresh_interpreter);
    FREE(r);

    /* another thread of the owner, and another owner with the same thread */
    char *other_thread = open_reused("alice", "thread-2", &reused);
    cr_assert_not(reused);
    cr_assert_str_neq(other_thread, a);
    char *other_owner = open_reused("mallory", "thread-1", &reused);
    cr_assert_not(reused);
    cr_assert_str_neq(other_owner, a);
    r = run(other_owner, "python", "'rows' in globals()");
    cr_assert_str_eq(ok(r)->value, "False");
    FREE(r);

    /* a version 1 client (no reuse field) still gets a session of its own */
    r = open_keyed("alice", "thread-1", false, 1);
    char *old = h_session_id(r);
    cr_assert_not(r->open_session->reused);
    cr_assert_str_neq(old, a);
    FREE(r);

    /* refusals: reuse without a conversation, reuse at version 1, version 3 */
    r = open_keyed("alice", "", true, 2);
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST);
    cr_assert(strstr(r->error->message, "conversation") != NULL, "%s", r->error->message);
    FREE(r);
    r = open_keyed("alice", "thread-1", true, 1);
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST);
    cr_assert(strstr(r->error->message, "version 2") != NULL, "%s", r->error->message);
    FREE(r);
    r = open_keyed("alice", "thread-1", false, 3);
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST);
    FREE(r);

    /* with a closed, the version 1 client's session is the key's; with
     * both closed, the key opens afresh */
    close_session(a);
    char *v1 = open_reused("alice", "thread-1", &reused);
    cr_assert(reused);
    cr_assert_str_eq(v1, old);
    free(v1);
    close_session(old);
    char *after = open_reused("alice", "thread-1", &reused);
    cr_assert_not(reused);
    cr_assert_str_neq(after, a);
    r = run(after, "python", "'rows' in globals()");
    cr_assert_str_eq(ok(r)->value, "False");
    cr_assert(ok(r)->fresh_sandbox);
    FREE(r);
    char *ids[] = {after, other_thread, other_owner};
    for (size_t i = 0; i < 3; i++) {
        close_session(ids[i]);
        free(ids[i]);
    }
    free(old);
    free(a);
    free(again);
}

Test(supervisor, reuse_keeps_the_owner_cap_and_a_reopen_counts_as_use)
{
    start_daemon("--max-sessions-per-owner 3");
    bool reused;
    char *t1 = open_reused("carol", "t1", &reused);
    char *t2 = open_reused("carol", "t2", &reused);
    char *t3 = open_reused("carol", "t3", &reused);
    Resp *r = run(t2, "python", "kept = 2");
    ok(r);
    FREE(r);
    /* reopening t1 and t3 (no cell) makes t2 the least recently used; the
     * pauses keep every use in a millisecond of its own (the LRU's clock) */
    usleep(20 * 1000);
    free(open_reused("carol", "t1", &reused));
    cr_assert(reused);
    usleep(20 * 1000);
    free(open_reused("carol", "t3", &reused));
    cr_assert(reused);
    usleep(20 * 1000);
    char *t4 = open_reused("carol", "t4", &reused);
    cr_assert_not(reused);
    r = run(t2, "python", "kept");
    cr_assert_eq(error_of(r)->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED);
    FREE(r);
    /* the evicted key opens afresh, and evicts the next LRU (t1) */
    char *t2b = open_reused("carol", "t2", &reused);
    cr_assert_not(reused);
    r = run(t2b, "python", "'kept' in globals()");
    cr_assert_str_eq(ok(r)->value, "False");
    cr_assert(ok(r)->fresh_sandbox);
    FREE(r);
    r = run(t1, "python", "1");
    cr_assert_eq(error_of(r)->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED);
    FREE(r);
    cr_assert_eq(sessions_of("carol"), 3);
    close_session(t3);
    close_session(t4);
    close_session(t2b);
    free(t1);
    free(t2);
    free(t3);
    free(t4);
    free(t2b);
}

/* ---- charts ------------------------------------------------------------- */

static int b64_digit(char c)
{
    const char *abc = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const char *p = c ? strchr(abc, c) : NULL;
    return p ? (int)(p - abc) : -1;
}

/* Decodes standard base64 (padding allowed) into a malloc'd buffer. */
static unsigned char *b64_decode(const char *in, size_t *len)
{
    size_t n = strlen(in);
    unsigned char *out = malloc(n / 4 * 3 + 3);
    cr_assert_not_null(out);
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n && in[i] != '='; i++) {
        int d = b64_digit(in[i]);
        cr_assert_geq(d, 0, "not base64 at %zu", i);
        acc = (acc << 6) | (unsigned)d;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    *len = o;
    return out;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Through the C CLI, as a shell user would: a cell that plots answers one
 * PNG of the figure's size (4 x 3 inches at 50 dpi). */
Test(supervisor, matplotlib_figure_comes_back_as_png_through_the_cli)
{
    char *bin = h_path("bulkhead"); /* first: its skip would leave a started daemon */
    start_daemon(NULL);
    char *open_argv[] = {bin, "session", "open", "--socket", bhd.sock, "--owner", "dana", NULL};
    struct run_result o = h_run(open_argv, NULL, NULL, 120);
    cr_assert_eq(o.status, 0, "session open: %s", o.err);
    json_error_t jerr;
    json_t *oj = json_loads(o.out, 0, &jerr);
    cr_assert_not_null(oj, "session open printed no JSON: %s", o.out);
    const char *sid =
        json_string_value(json_object_get(json_object_get(oj, "open_session"), "session_id"));
    cr_assert_not_null(sid, "no session_id in %s", o.out);
    char *id = strdup(sid);
    json_decref(oj);
    h_free(&o);

    char *code = "import matplotlib.pyplot as plt\n"
                 "fig = plt.figure(figsize=(4, 3), dpi=50)\n"
                 "plt.plot([1, 2, 3], [3, 1, 2])\n"
                 "'drawn'";
    char *run_argv[] = {bin,      "session", "run", "--socket",  bhd.sock, id,  "--lang",
                        "python", "-c",      code,  "--timeout", "60",     NULL};
    struct run_result r = h_run(run_argv, NULL, NULL, 120);
    cr_assert_eq(r.status, 0, "session run: %s %s", r.out, r.err);
    json_t *rj = json_loads(r.out, 0, &jerr);
    cr_assert_not_null(rj, "session run printed no JSON: %s", r.out);
    json_t *cell = json_object_get(rj, "run_cell");
    cr_assert_str_eq(json_string_value(json_object_get(cell, "value")), "'drawn'", "%s", r.out);
    json_t *images = json_object_get(cell, "images");
    cr_assert_eq(json_array_size(images), 1, "one figure, one image: %s", r.out);
    json_t *im = json_array_get(images, 0);
    cr_assert_str_eq(json_string_value(json_object_get(im, "mime")), "image/png");
    size_t len = 0;
    unsigned char *png = b64_decode(json_string_value(json_object_get(im, "data")), &len);
    cr_assert_gt(len, 33, "a PNG of %zu bytes", len);
    cr_assert_eq(memcmp(png, "\x89PNG\r\n\x1a\n", 8), 0, "no PNG signature");
    cr_assert_eq(memcmp(png + 12, "IHDR", 4), 0, "the first chunk is not IHDR");
    cr_assert_eq(be32(png + 16), 200, "width %u", be32(png + 16));
    cr_assert_eq(be32(png + 20), 150, "height %u", be32(png + 20));
    cr_assert(strstr(json_string_value(json_object_get(cell, "stderr")), "could not be rendered") ==
              NULL);
    free(png);
    json_decref(rj);
    h_free(&r);
    close_session(id);
    free(id);
    free(bin);
}

Test(supervisor, only_its_stdio_reaches_the_unisolated_agent)
{
    /* At tier none the keeper forks the agent itself: its /dev/null (for
     * stderr) must reach the agent as fd 2 only, not as a second, leaked fd.
     * The cell runs in the Python runner, a fork of the agent. */
    char msg[1024];
    cr_assert_eq(h_daemon_launch(&bhd, "/tmp/bhd-e2e-XXXXXX", "none", "--warm 0", msg, sizeof(msg)),
                 0, "bulkheadd --tier none did not start: %s", msg);
    char *id = open_session("alice");
    Resp *r = run(id, "python",
                  "import os\n"
                  "d = '/proc/%d/fd' % os.getppid()\n"
                  "print(sorted(int(f) for f in os.listdir(d)\n"
                  "             if os.readlink(d + '/' + f) == '/dev/null'))\n");
    Bulkhead__Control__CellResult *c = ok(r);
    cr_assert_eq(c->exit_code, 0, "%s", c->stderr);
    cr_assert_str_eq(c->stdout, "[2]\n", "the agent's /dev/null fds: %s", c->stdout);
    FREE(r);
    close_session(id);
    free(id);
}

/* Runs `bulkhead session ARGS...` (NULL-terminated); the caller frees. */
static struct run_result session_cli(const char *first, ...)
{
    char *argv[32];
    size_t n = 0;
    argv[n++] = h_path("bulkhead");
    argv[n++] = "session";
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a != NULL && n < BH_ARRAY_SIZE(argv) - 1;
         a = va_arg(ap, const char *))
        argv[n++] = (char *)a;
    va_end(ap);
    argv[n] = NULL;
    struct run_result r = h_run(argv, NULL, NULL, 120);
    free(argv[0]);
    return r;
}

/* Every refusal of the session CLI names what is wrong and exits 125 before
 * any daemon is asked (the socket does not exist). */
Test(session_cli, refusals_say_what_is_missing)
{
    static const struct {
        const char *args[12];
        const char *says;
    } cases[] = {
        {{"open", "--socket", "/nonexistent.sock", NULL}, "--owner is required"},
        {{"list", "--socket", "/nonexistent.sock", NULL}, "--owner is required"},
        {{"run", "--socket", "/nonexistent.sock", "ID", NULL}, "give the session ID and --lang"},
        {{"run", "--socket", "/nonexistent.sock", "ID", "--lang", "python", NULL},
         "give -c CODE or a FILE"},
        {{"run", "--socket", "/nonexistent.sock", "ID", "--lang", "python", "-c", "1", "--file",
          "nolocal", NULL},
         "give PATH=LOCAL"},
        {{"run", "--socket", "/nonexistent.sock", "ID", "--lang", "python", "/nonexistent.py",
          NULL},
         "read `/nonexistent.py`"},
        {{"close", "--socket", "/nonexistent.sock", NULL}, "give the session ID"},
        {{"open", "--lifetime", "soon", NULL}, "--lifetime `soon` is not a number"},
        {{"run", "--timeout", "-1", NULL}, "--timeout `-1` is not a number of seconds"},
        {{"bogus", NULL}, "unknown subcommand `bogus`"},
        {{"open", "--bogus", NULL}, "unknown or incomplete option `--bogus`"},
    };
    for (size_t i = 0; i < BH_ARRAY_SIZE(cases); i++) {
        const char *const *a = cases[i].args;
        struct run_result r =
            session_cli(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], NULL);
        cr_assert_eq(r.status, 125, "case %zu (%s): exit %d: %s", i, a[0], r.status, r.err);
        cr_assert(strstr(r.err, cases[i].says) != NULL, "case %zu: %s", i, r.err);
        cr_assert_str_eq(r.out, "", "case %zu", i);
        h_free(&r);
    }
    struct run_result r = session_cli("--help", NULL);
    cr_assert_eq(r.status, 0);
    cr_assert(strstr(r.out, "bulkhead session open") != NULL, "%s", r.out);
    h_free(&r);
    r = session_cli("stats", "--socket", "/nonexistent.sock", NULL);
    cr_assert_eq(r.status, 125, "%s", r.err);
    cr_assert(strstr(r.err, "is it running?") != NULL, "%s", r.err);
    h_free(&r);
}

/* open, run (code from a file, a handed-in --file), list, stats and close
 * through the CLI; an error answer exits 1. */
Test(supervisor, session_cli_round_trip)
{
    start_daemon(NULL);
    struct run_result r = session_cli("open", "--socket", bhd.sock, "--owner", "erin", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    json_t *j = json_loads(r.out, 0, NULL);
    cr_assert_not_null(j, "%s", r.out);
    char *id = strdup(
        json_string_value(json_object_get(json_object_get(j, "open_session"), "session_id")));
    json_decref(j);
    h_free(&r);

    char dir[] = "/tmp/bh-session-cli-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    h_write_file(dir, "cell.py", "print(open('in.txt').read().upper(), end='')\n");
    h_write_file(dir, "in.txt", "handed in");
    char cell[128], in[128];
    snprintf(cell, sizeof(cell), "%s/cell.py", dir);
    snprintf(in, sizeof(in), "in.txt=%s/in.txt", dir);
    r = session_cli("run", "--socket", bhd.sock, id, "--lang", "python", "--file", in, cell, NULL);
    h_remove_tree(dir);
    cr_assert_eq(r.status, 0, "%s %s", r.out, r.err);
    j = json_loads(r.out, 0, NULL);
    cr_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "run_cell"), "stdout")),
                     "HANDED IN", "%s", r.out);
    json_decref(j);
    h_free(&r);

    r = session_cli("list", "--socket", bhd.sock, "--owner", "erin", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "list_sessions") != NULL, "%s", r.out);
    h_free(&r);
    r = session_cli("stats", "--socket", bhd.sock, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert(strstr(r.out, "\"stats\"") != NULL, "%s", r.out);
    h_free(&r);
    r = session_cli("close", "--socket", bhd.sock, id, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    h_free(&r);
    /* an answer that is an error: printed, exit 1 */
    r = session_cli("run", "--socket", bhd.sock, id, "--lang", "python", "-c", "1", NULL);
    cr_assert_eq(r.status, 1, "%s %s", r.out, r.err);
    cr_assert(strstr(r.out, "\"error\"") != NULL, "%s", r.out);
    h_free(&r);
    free(id);
}

/* The agent's cleanup in a sandbox kills every process but the kept ones.
 * A pid it killed may be reaped and reused by a new process of the cell
 * within the same cleanup: that process must be killed too. Run in a pid
 * namespace of its own (the cleanup kills all it lists), where
 * ns_last_pid makes the kernel hand the freed pid to the new process. */
Test(agent, cleanup_kills_a_process_that_reuses_a_killed_pid, .timeout = 60)
{
    static const char script[] =
        "import os, signal, sys, time\n"
        "g = {'__name__': 'bh_agent_test'}\n"
        "exec(open(sys.argv[1]).read(), g)\n"
        "a = os.fork()\n"
        "if a == 0:\n"
        "    signal.pause(); os._exit(0)\n"
        "state = {}\n"
        "real_sleep = time.sleep\n"
        "def between_rounds(t):\n"
        "    if 'b' not in state:\n"
        "        os.waitpid(a, 0)\n"
        "        with open('/proc/sys/kernel/ns_last_pid', 'w') as f:\n"
        "            f.write(str(a - 1))\n"
        "        b = os.fork()\n"
        "        if b == 0:\n"
        "            signal.pause(); os._exit(0)\n"
        "        state['b'] = b\n"
        "    real_sleep(t)\n"
        "time.sleep = between_rounds\n"
        "g['Agent'].kill_all_but(None, {1})\n"
        "time.sleep = real_sleep\n"
        "b = state.get('b')\n"
        "if b != a:\n"
        "    print('the pid was not reused (%s after %d): nothing shown' % (b, a)); sys.exit(2)\n"
        "for _ in range(200):\n"
        "    pid, st = os.waitpid(b, os.WNOHANG)\n"
        "    if pid == b:\n"
        "        print('killed' if os.WIFSIGNALED(st) and os.WTERMSIG(st) == 9 else 'ended %d' % "
        "st)\n"
        "        sys.exit(0)\n"
        "    time.sleep(0.01)\n"
        "os.kill(b, 9); os.waitpid(b, 0)\n"
        "print('survived'); sys.exit(1)\n";
    cleanup_free char *agent = h_path("runners/agent.py");
    char *argv[] = {
        "/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "/usr/bin/python3", "-I", "-c",
        (char *)script,     agent,   NULL};
    struct run_result r = h_run(argv, NULL, NULL, 50);
    cr_assert_eq(r.status, 0, "exit %d: %s%s", r.status, r.out, r.err);
    cr_assert_str_eq(r.out, "killed\n", "the process on the reused pid: %s%s", r.out, r.err);
    h_free(&r);
}

/* Runs a test script that loads the in-sandbox agent outside any sandbox:
 * argv[1] the agent, argv[2] the Python runner, argv[3] a work directory
 * made and removed here, argv[4] arg (if not NULL). */
static struct run_result run_agent_script(const char *script, const char *arg, int timeout_s)
{
    cleanup_free char *agent = h_path("runners/agent.py");
    cleanup_free char *runner = h_path("runners/runner.py");
    char work[] = "/tmp/bh-agent-test-XXXXXX";
    cr_assert_not_null(mkdtemp(work));
    char *argv[] = {"/usr/bin/python3", "-I", "-c", (char *)script, agent, runner, work,
                    (char *)arg,        NULL};
    struct run_result r = h_run(argv, NULL, NULL, timeout_s);
    h_remove_tree(work);
    return r;
}

/* An interpreter killed between calls is on its way out once its main
 * thread is a zombie, but waitpid sees it only when its other threads are
 * gone too (node's take a moment under load). A cell sent then must run in
 * a fresh interpreter, not fail with the dead one's status: the race
 * faults_interp/node_killed_between_calls hit. Here the "interpreter" is a
 * fork whose main thread exits first and whose last thread exits 9 a second
 * later, so the state holds for as long as the agent needs to look. */
Test(agent, a_cell_after_an_interpreter_died_runs_fresh, .timeout = 60)
{
    static const char script[] =
        "import ctypes, os, socket, sys, threading, time\n"
        "g = {'__name__': 'bh_agent_test'}\n"
        "exec(open(sys.argv[1]).read(), g)\n"
        "work = sys.argv[3]\n"
        "a = g['Agent']({'workdir': work, 'sandboxed': False,\n"
        "                'python_runner': open(sys.argv[2]).read()})\n"
        "ctl, peer = socket.socketpair()\n"
        "out_r, out_w = os.pipe(); err_r, err_w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    threading.Thread(target=lambda: (time.sleep(1), os._exit(9))).start()\n"
        "    ctypes.CDLL(None).pthread_exit(None)\n"
        "    os._exit(3)\n"
        "peer.close(); os.close(out_w); os.close(err_w)\n"
        "while True:\n"
        "    s = open('/proc/%d/stat' % pid, 'rb').read()\n"
        "    if s[s.rfind(b')') + 2:][:1] == b'Z': break\n"
        "    time.sleep(0.01)\n"
        "if os.waitpid(pid, os.WNOHANG)[0] != 0:\n"
        "    print('the fake interpreter was reapable at once: nothing shown'); sys.exit(2)\n"
        "a.interps['python'] = g['Interp']('python', pid, ctl, out_r, err_r)\n"
        "a.used.add('python')\n"
        "hdr, out, err, _ = a.cell({'language': 'python', 'code': '6 * 7'})\n"
        "a.kill_interp('python')\n"
        "print(hdr['exit'], hdr.get('fresh_interpreter'), hdr['value'], err.decode()[-300:])\n";
    struct run_result r = run_agent_script(script, NULL, 50);
    cr_assert_eq(r.status, 0, "exit %d: %s%s", r.status, r.out, r.err);
    cr_assert_str_eq(r.out, "0 True 42 \n",
                     "the cell after the interpreter died (exit, fresh, value, stderr): %s%s",
                     r.out, r.err);
    h_free(&r);
}

/* An interpreter that stops serving and does not end: its main thread gone
 * while another thread lives on ("leader"), or its channel closed while it
 * runs on ("hangup"). Either cell's answer must come by the cell's own
 * deadline (a second here), never wait on the interpreter's end; the
 * interpreter is killed; a "leader" cell runs in a fresh one. The bound of
 * the run only catches the agent's old unbounded waitpid. */
static void agent_with_a_stuck_interpreter(const char *mode, const char *expect)
{
    static const char script[] =
        "import ctypes, os, signal, socket, sys, threading, time\n"
        "g = {'__name__': 'bh_agent_test'}\n"
        "exec(open(sys.argv[1]).read(), g)\n"
        "mode = sys.argv[4]\n"
        "a = g['Agent']({'workdir': sys.argv[3], 'sandboxed': False,\n"
        "                'python_runner': open(sys.argv[2]).read()})\n"
        "ctl, peer = socket.socketpair()\n"
        "out_r, out_w = os.pipe(); err_r, err_w = os.pipe()\n"
        "ready_r, ready_w = os.pipe()\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    ctypes.CDLL(None).prctl(1, 9)\n" /* PR_SET_PDEATHSIG: gone with a failed run */
        "    if mode == 'leader':\n"
        "        threading.Thread(target=signal.pause).start()\n"
        "        os.close(ready_w)\n"
        "        ctypes.CDLL(None).pthread_exit(None)\n"
        "    peer.close(); os.close(ready_w); signal.pause(); os._exit(3)\n"
        "peer.close(); os.close(out_w); os.close(err_w); os.close(ready_w)\n"
        "os.read(ready_r, 1)\n"
        "while mode == 'leader' and not g['leader_exited'](pid):\n"
        "    time.sleep(0.01)\n"
        "a.interps['python'] = g['Interp']('python', pid, ctl, out_r, err_r)\n"
        "a.used.add('python')\n"
        /* leader: a fresh interpreter starts within the cell's time, so 1 s
         * was a speed limit under load; hangup: the deadline is the point */
        "ms = 60000 if mode == 'leader' else 1000\n"
        "hdr, out, err, _ = a.cell({'language': 'python', 'code': '6 * 7', 'timeout_ms': ms})\n"
        "a.kill_interp('python')\n"
        "try: os.kill(pid, 0); print('the stuck interpreter lives on'); sys.exit(1)\n"
        "except ProcessLookupError: pass\n"
        "print(hdr['exit'], hdr['timed_out'], hdr.get('fresh_interpreter'), hdr['value'])\n";
    struct run_result r = run_agent_script(script, mode, 100);
    cr_assert_neq(r.status, -1,
                  "%s: the agent's cell did not come back (it waits on the stuck "
                  "interpreter): %s%s",
                  mode, r.out, r.err);
    cr_assert_eq(r.status, 0, "%s: exit %d: %s%s", mode, r.status, r.out, r.err);
    cr_assert_str_eq(r.out, expect, "%s: (exit, timed_out, fresh, value): %s%s", mode, r.out,
                     r.err);
    h_free(&r);
}

Test(agent, a_cell_after_the_interpreters_main_thread_exited_runs_fresh, .timeout = 120)
{
    agent_with_a_stuck_interpreter("leader", "0 False True 42\n");
}

Test(agent, a_cell_whose_interpreter_hung_up_ends_at_its_deadline, .timeout = 120)
{
    agent_with_a_stuck_interpreter("hangup", "124 True False \n");
}

/* Red team (session 7, branch redteam4): what one session's cell leaves
 * behind that another session's cell could reach. Each session must have a
 * network namespace (abstract unix sockets, loopback ports), an IPC
 * namespace (SysV keys), a pid namespace and a /tmp and /dev/shm of its own.
 * The same probe run in the session that made them is the control: it must
 * find each of them, so an empty answer in the other session means the wall
 * held, not that the probe is blind. */
static const char cross_make_py[] =
    "import socket, ctypes, os\n"
    "ctypes.CDLL(None).prctl(15, b'bhrt4mark')\n" /* PR_SET_NAME */
    "ab = socket.socket(socket.AF_UNIX); ab.bind('\\0bhrt4-abstract'); ab.listen(8)\n"
    "tc = socket.socket(); tc.bind(('127.0.0.1', 45123)); tc.listen(8)\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "shm = libc.shmget(0x5eed4, 4096, 0o1600)\n" /* IPC_CREAT | 0600 */
    "mq = libc.msgget(0x5eed4, 0o1600)\n"
    "for f in ('/dev/shm/bhrt4', '/tmp/bhrt4'):\n"
    "    try: open(f, 'w').write('a')\n"
    "    except OSError: pass\n"
    "(shm >= 0, mq >= 0)";

static const char cross_probe_py[] =
    "import socket, ctypes, os\n"
    "def probe():\n"
    "    got = []\n"
    "    s = socket.socket(socket.AF_UNIX)\n"
    "    try: s.connect('\\0bhrt4-abstract'); got.append('abstract')\n"
    "    except OSError: pass\n"
    "    s.close(); s = socket.socket()\n"
    "    try: s.connect(('127.0.0.1', 45123)); got.append('tcp')\n"
    "    except OSError: pass\n"
    "    s.close()\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    if libc.shmget(0x5eed4, 0, 0) >= 0: got.append('shm')\n"
    "    if libc.msgget(0x5eed4, 0) >= 0: got.append('msg')\n"
    "    for f in ('/dev/shm/bhrt4', '/tmp/bhrt4'):\n"
    "        if os.path.exists(f): got.append(f)\n"
    "    import glob\n"
    "    for c in glob.glob('/proc/[0-9]*/task/*/comm'):\n"
    "        try:\n"
    "            if open(c).read().strip() == 'bhrt4mark' and 'process' not in got:\n"
    "                got.append('process')\n"
    "        except OSError: pass\n"
    "    return ' '.join(got)\n"
    "probe()";

Test(supervisor, a_session_reaches_no_socket_ipc_key_tmp_file_or_process_of_another)
{
    start_daemon(NULL);
    char *a = open_session("alice");
    char *b = open_session("alice"); /* the same owner: the closest neighbour */
    Resp *r = run(a, "python", cross_make_py);
    cr_assert_str_eq(ok(r)->value, "(True, True)", "session A could not make its objects: %s",
                     ok(r)->stderr);
    FREE(r);
    r = run(a, "python", cross_probe_py);
    const char *own = ok(r)->value;
    /* the control: A's own probe finds every object it made */
    const char *need[] = {"abstract", "tcp", "shm", "msg", "process", "/tmp/bhrt4"};
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        cr_assert(strstr(own, need[i]) != NULL,
                  "the probe does not see A's own %s (%s): it could not show an escape", need[i],
                  own);
    FREE(r);
    r = run(b, "python", cross_probe_py);
    cr_assert_str_eq(ok(r)->value, "''",
                     "session B reached what session A made (abstract socket, loopback port, "
                     "SysV key, file or process): %s",
                     ok(r)->value);
    FREE(r);
    close_session(a);
    close_session(b);
    free(a);
    free(b);
}

/* Host threads (in every pid namespace) whose comm is name. */
static int host_count_comm(const char *name)
{
    glob_t g;
    int n = 0;
    if (glob("/proc/[0-9]*/task/*/comm", 0, NULL, &g) != 0)
        cr_assert_fail("no /proc/PID/task/TID/comm on the host");
    for (size_t i = 0; i < g.gl_pathc; i++) {
        char comm[64] = "";
        cleanup_fclose FILE *f = fopen(g.gl_pathv[i], "re");
        if (f && fgets(comm, sizeof(comm), f)) {
            comm[strcspn(comm, "\n")] = '\0';
            n += strcmp(comm, name) == 0;
        }
    }
    globfree(&g);
    return n;
}

/* A cell that tries to outlive its session, racing the close: while its
 * call still runs it has left a double-forked setsid daemon, a stopped
 * process and a thread parked in a brokered FIFO open (the sentry holds the
 * call), and the client closes the session from another connection. The
 * close must end all of them (read on the host, in every pid namespace),
 * and the call in flight must be answered, not left hanging. The names
 * carry this test's pid: the same test run elsewhere on the host (another
 * suite, ASan's) has processes of the same kind that are not ours. */
static const char outlive_py[] =
    "import ctypes, os, subprocess, threading, time\n"
    "if os.fork() == 0:\n"
    "    os.setsid()\n"
    "    if os.fork() == 0:\n"
    "        ctypes.CDLL(None).prctl(15, b'%s'); time.sleep(600)\n"
    "    os._exit(0)\n"
    "subprocess.Popen(['python3', '-c', \"import ctypes, os, signal; "
    "ctypes.CDLL(None).prctl(15, b'%s'); os.kill(os.getpid(), "
    "signal.SIGSTOP)\"], start_new_session=True)\n"
    "os.mkfifo('/tmp/bhrt4fifo')\n"
    "threading.Thread(target=lambda: os.open('/tmp/bhrt4fifo', os.O_RDONLY), daemon=True).start()\n"
    "ctypes.CDLL(None).prctl(15, b'%s')\n"
    "time.sleep(600)\n";

/* A close is ordered after the calls in flight, so it answers when the
 * cell's own deadline (45 s) ends the call: with 120 s it took 120.7 s even
 * on a quiet machine, and 131.7 s under load. The cell's set-up must finish
 * well inside that deadline (it takes a few seconds); the other deadlines
 * only bound a hang. */
Test(supervisor, a_cell_racing_its_close_leaves_no_process_behind, .timeout = 900)
{
    start_daemon(NULL);
    char *id = open_session("alice");
    Req req;
    Bulkhead__Control__RunCell c;
    char names_buf[3][16], code[sizeof(outlive_py) + 64];
    snprintf(names_buf[0], sizeof(names_buf[0]), "bh4o%d", (int)getpid());
    snprintf(names_buf[1], sizeof(names_buf[1]), "bh4s%d", (int)getpid());
    snprintf(names_buf[2], sizeof(names_buf[2]), "bh4c%d", (int)getpid());
    snprintf(code, sizeof(code), outlive_py, names_buf[0], names_buf[1], names_buf[2]);
    h_cell_req(&req, &c, id, "python", code, 45000, NULL, 0);
    int fd = conn();
    cr_assert(fd >= 0);
    cr_assert_eq(h_send(fd, &req), 0);
    const char *const names[] = {names_buf[0], names_buf[1], names_buf[2]};
    /* the attack is in place once the host sees all three */
    int64_t t0 = bh_now_ms();
    for (;;) {
        size_t seen = 0;
        for (size_t i = 0; i < 3; i++)
            seen += host_count_comm(names[i]) > 0;
        if (seen == 3)
            break;
        cr_assert_lt(bh_now_ms() - t0, 40000,
                     "the cell did not set up its processes within 40 s (its deadline is 45 s): "
                     "nothing to show");
        usleep(100 * 1000);
    }
    Req creq;
    Bulkhead__Control__CloseSession cc;
    h_close_req(&creq, &cc, id);
    int cfd = conn();
    cr_assert(cfd >= 0);
    cr_assert_eq(h_send(cfd, &creq), 0);
    struct bh_error err = {0};
    Resp *r = h_recv(cfd, 400000, &err);
    cr_assert_not_null(r, "the close was not answered: %s", err.msg);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_CLOSE_SESSION);
    FREE(r);
    close(cfd);
    r = h_recv(fd, 60000, &err);
    cr_assert_not_null(r, "the call in flight was not answered after its session closed: %s",
                       err.msg);
    FREE(r);
    close(fd);
    /* generous for a loaded machine; a survivor stays for 600 s */
    t0 = bh_now_ms();
    int left = 0;
    do {
        left = 0;
        for (size_t i = 0; i < 3; i++)
            left += host_count_comm(names[i]);
        if (left == 0)
            break;
        usleep(100 * 1000);
    } while (bh_now_ms() - t0 < 20000);
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(host_count_comm(names[i]), 0, "a process named %s outlived its closed session",
                     names[i]);
    free(id);
}

/* OpenSession as uid 65534: 0 opened, 1 at_capacity (its message in msg
 * when msg is not NULL), 2 another answer, 3 no answer. */
static int open_as_nobody_said(const char *owner, char *msg, size_t size)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(p[0]);
        if (setgroups(0, NULL) != 0 || setgid(65534) != 0 || setuid(65534) != 0)
            _exit(3);
        int fd = h_connect(bhd.sock);
        if (fd < 0)
            _exit(3);
        Req req;
        Bulkhead__Control__OpenSession o;
        h_open_req(&req, &o, owner);
        struct bh_error err = {0};
        Resp *r = h_send(fd, &req) == 0 ? h_recv(fd, 120000, &err) : NULL;
        if (r == NULL)
            _exit(3);
        if (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION)
            _exit(0);
        if (r->body_case != BULKHEAD__CONTROL__RESPONSE__BODY_ERROR)
            _exit(2);
        const char *m = r->error->message;
        if (write(p[1], m, strlen(m)) < 0)
            _exit(3);
        _exit(r->error->code == BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY ? 1 : 2);
    }
    close(p[1]);
    char buf[1024];
    size_t got = 0;
    ssize_t n;
    while (got < sizeof(buf) - 1 && (n = read(p[0], buf + got, sizeof(buf) - 1 - got)) > 0)
        got += (size_t)n;
    buf[got] = '\0';
    close(p[0]);
    if (msg != NULL)
        snprintf(msg, size, "%s", buf);
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "the nobody client died: %d", st);
    return WEXITSTATUS(st);
}

static int open_as_nobody(const char *owner)
{
    return open_as_nobody_said(owner, NULL, 0);
}

/* A socket directory uid 65534 can reach: the harness's is 0700. */
static void let_nobody_in(void)
{
    char dir[sizeof(bhd.sock)];
    snprintf(dir, sizeof(dir), "%s", bhd.sock);
    *strrchr(dir, '/') = '\0';
    cr_assert_eq(chmod(dir, 0711), 0, "%s: %s", dir, strerror(errno));
}

/* Red team (session 7, branch redteam4): owners are names the client
 * chooses, and the global cap counted every session alike, so one uid of
 * the socket's group naming --max-sessions owners kept every other uid out
 * ("bulkheadd has 3 sessions (limit 3): retry later") until its sessions
 * idled out (10 min by default). Now, at the cap, a uid holding two or more
 * fewer sessions than the largest holder takes that holder's least
 * recently used idle session; a uid at its fair share is refused as
 * before, and one uid alone is never evicted this way. */
Test(supervisor, one_uid_cannot_keep_another_out_with_many_owners)
{
    /* --evict-min-idle 300: a session may be evicted once it has been
     * idle that long, which the wait below guarantees */
    start_daemon("--socket-group nogroup --max-sessions 2 --evict-min-idle 300");
    let_nobody_in();
    char *m1 = open_session("mallory-1");
    char *m2 = open_session("mallory-2");
    /* root alone at the cap: its own sessions are not evicted for it */
    Req req;
    Bulkhead__Control__OpenSession o;
    h_open_req(&req, &o, "mallory-3");
    Resp *r = roundtrip(&req);
    cr_assert_eq(error_of(r)->code, BULKHEAD__CONTROL__ERROR__CODE__AT_CAPACITY);
    FREE(r);
    /* at least --evict-min-idle since either session's last call */
    nanosleep(&(struct timespec){.tv_nsec = 400 * 1000 * 1000}, NULL);
    cr_assert_eq(open_as_nobody("alice"), 0,
                 "a second uid was kept out by one uid holding every session under many owners");
    /* the room came from root's least recently used idle session */
    r = run(m1, "python", "1");
    cr_assert_eq(error_of(r)->ended_reason, BULKHEAD__CONTROL__ERROR__ENDED__EVICTED, "%s",
                 r->error->message);
    FREE(r);
    r = run(m2, "python", "2");
    cr_assert_str_eq(ok(r)->value, "2");
    FREE(r);
    /* one each now: a uid at its fair share keeps it */
    cr_assert_eq(open_as_nobody("alice-2"), 1, "nobody evicted a session of a uid at its share");
    close_session(m2);
    free(m1);
    free(m2);
}

/* The other side of the crowding eviction: a session that had a call
 * within --evict-min-idle is not ended for a crowding uid, however many the
 * largest holder has; the caller is refused at_capacity with a message that
 * names both limits, and the holder's sessions go on. */
Test(supervisor, a_recently_used_session_is_not_evicted_for_a_crowding_uid)
{
    start_daemon("--socket-group nogroup --max-sessions 2 --evict-min-idle 600000");
    let_nobody_in();
    char *m1 = open_session("mallory-1");
    char *m2 = open_session("mallory-2");
    char msg[1024];
    cr_assert_eq(open_as_nobody_said("alice", msg, sizeof(msg)), 1,
                 "a session used a moment ago was evicted for a crowding uid (answer: %s)", msg);
    cr_assert(strstr(msg, "--max-sessions 2") != NULL, "the refusal names no cap: %s", msg);
    cr_assert(strstr(msg, "--evict-min-idle") != NULL && strstr(msg, "600000 ms") != NULL,
              "the refusal does not say why no session was evicted: %s", msg);
    cr_assert(strstr(msg, "another uid holds 2") != NULL, "the refusal gives no count: %s", msg);
    cr_assert(strstr(msg, "uid 0") == NULL, "the refusal names another tenant's uid: %s", msg);
    /* both of the holder's sessions go on */
    char *held[] = {m1, m2};
    for (int i = 0; i < 2; i++) {
        const char *code = i == 0 ? "1" : "2";
        Resp *r = run(held[i], "python", code);
        cr_assert_str_eq(ok(r)->value, code);
        FREE(r);
        close_session(held[i]);
        free(held[i]);
    }
}
