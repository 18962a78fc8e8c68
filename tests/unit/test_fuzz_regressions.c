/* Fuzzing's findings kept: every committed seed corpus replayed through the
 * same entry points the libFuzzer targets use (tests/fuzz/fuzz_*.c, linked
 * from libfuzz-replay.a), and every crash, hang or oracle failure the
 * fuzzers found, minimised, as a test of its own that names the owner of the
 * code at fault. A test here that fails is an open finding: see the note on
 * it and fix the code, never the test. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bulkheadd.h"
#include "frame.h"
#include "fuzz.h"

#ifndef BH_FUZZ_CORPUS_DIR
#define BH_FUZZ_CORPUS_DIR "tests/fuzz/corpus"
#endif

typedef int (*fuzz_fn)(const uint8_t *, size_t);

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rbe");
    cr_assert_not_null(f, "open %s", path);
    uint8_t *buf = NULL;
    size_t cap = 0;
    *len = 0;
    for (;;) {
        if (cap - *len < 4096) {
            cap = cap * 2 + 8192;
            buf = realloc(buf, cap);
            cr_assert_not_null(buf);
        }
        size_t n = fread(buf + *len, 1, cap - *len, f);
        if (n == 0)
            break;
        *len += n;
    }
    fclose(f);
    return buf;
}

/* Replays every file of DIR/NAME (DIR: corpus or regressions); it must not be
 * empty. */
static void replay_dir(const char *top, const char *name, fuzz_fn fn)
{
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/%s", top, name);
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "seed corpus %s is missing", dir);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[8192];
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        size_t len;
        uint8_t *data = slurp(path, &len);
        fprintf(stderr, "replay %s/%s (%zu bytes)\n", name, e->d_name, len);
        fn(data, len);
        free(data);
        n++;
    }
    closedir(d);
    cr_assert_gt(n, 0, "seed corpus %s is empty", dir);
}

static void replay_corpus(const char *name, fuzz_fn fn)
{
    replay_dir(BH_FUZZ_CORPUS_DIR, name, fn);
}

/* The seeds include the known NUL finding below; the replay of seeds checks
 * everything else, as `make fuzz` does. */
static void tolerate_known(void)
{
    setenv("BH_FUZZ_TOLERATE", "nul-truncation", 1);
}

TestSuite(fuzz_seeds, .timeout = 120);

Test(fuzz_seeds, control)
{
    replay_corpus("control", bh_fuzz_control);
}

Test(fuzz_seeds, cell_files, .init = tolerate_known)
{
    replay_corpus("cell_files", bh_fuzz_cell_files);
}

Test(fuzz_seeds, agent_reply)
{
    replay_corpus("agent_reply", bh_fuzz_agent_reply);
}

Test(fuzz_seeds, oci_config)
{
    replay_corpus("oci_config", bh_fuzz_oci_config);
}

Test(fuzz_seeds, oci_process)
{
    replay_corpus("oci_process", bh_fuzz_oci_process);
}

Test(fuzz_seeds, policy)
{
    replay_corpus("policy", bh_fuzz_policy);
}

/* ---- findings -------------------------------------------------------------
 * Each: the minimised input as found, replayed through its target, and the
 * same defect stated as a readable assertion. */

TestSuite(fuzz_findings, .timeout = 60);

/* Sends one RunCell (hand-encoded protobuf, so NUL bytes survive) with one
 * file and returns the daemon's error code (-1: not an error). */
static void code_of(const Bulkhead__Control__Response *r, void *ctx)
{
    *(int *)ctx =
        r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? (int)r->error->code : -1;
}

static size_t pb_bytes(uint8_t *out, unsigned field, const void *data, size_t len)
{
    /* lengths below 128 only: one-byte varints */
    out[0] = (uint8_t)(field << 3 | 2);
    out[1] = (uint8_t)len;
    memcpy(out + 2, data, len);
    return len + 2;
}

static int run_cell_with_file(const char *path, size_t plen, const char *content, size_t clen)
{
    uint8_t file[256], cell[512], req[600], framed[700];
    size_t fl = pb_bytes(file, 1, path, plen);
    fl += pb_bytes(file + fl, 2, content, clen);
    size_t cl = pb_bytes(cell, 1, "0123456789abcdef0123456789abcdef", 32);
    cl += pb_bytes(cell + cl, 2, "python", 6);
    cl += pb_bytes(cell + cl, 3, "1", 1);
    cl += pb_bytes(cell + cl, 4, file, fl);
    size_t rl = 0;
    req[rl++] = 1 << 3;
    req[rl++] = BHD_PROTOCOL;
    req[rl++] = 12 << 3 | 2;
    cr_assert_lt(cl, 128);
    req[rl++] = (uint8_t)cl;
    memcpy(req + rl, cell, cl);
    rl += cl;
    bh_frame_header_encode(framed, (uint32_t)rl);
    memcpy(framed + BH_FRAME_HEADER, req, rl);
    int code = -2;
    cr_assert_eq(bh_fuzz_serve(framed, rl + BH_FRAME_HEADER, code_of, &code), 1);
    return code;
}

/* Finding 1 (fuzz_cell_files, 2026-11-29). Owner: supervisor.
 * supervisor/server.c, check_cell(): the file path and content are checked
 * with strlen(), and protobuf-c hands over strings with embedded NUL bytes,
 * so "notes.txt\0../../etc/passwd" is checked (and later written, through
 * json_pack "s" in box.c bhd_box_run) as "notes.txt", and content after a
 * NUL is dropped without a word. Not an escape (the cut path is what gets
 * written), but a silent change of what the caller sent, where the design
 * asks for a clear error. Fixed in f5b90fe: bhd_serve_connection walks the
 * raw message and refuses any string field holding a NUL before unpacking. */
Test(fuzz_findings, cell_files_nul_minimised)
{
    /* language python; one file, path "`\0", no content */
    static const uint8_t crash[] = {0x7c, 0x45, 0x03, 0x00, 0x40, 0x60, 0x00};
    unsetenv("BH_FUZZ_TOLERATE");
    bh_fuzz_cell_files(crash, sizeof(crash));
}

Test(fuzz_findings, cell_files_nul_in_path_is_refused)
{
    static const char path[] = "notes.txt\0../../etc/passwd";
    int code = run_cell_with_file(path, sizeof(path) - 1, "x", 1);
    cr_assert_eq(code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST,
                 "a path with a NUL byte got answer %d (NOT_FOUND=%d: it passed the checks); "
                 "owner: supervisor, supervisor/server.c check_cell",
                 code, BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND);
}

Test(fuzz_findings, cell_files_nul_in_content_is_refused)
{
    static const char content[] = "abc\0def";
    int code = run_cell_with_file("a.txt", 5, content, sizeof(content) - 1);
    cr_assert_eq(code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST,
                 "content with a NUL byte got answer %d (NOT_FOUND=%d: it passed the checks and "
                 "would be cut at the NUL); owner: supervisor, supervisor/server.c check_cell",
                 code, BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND);
}

/* The checks that hold today, kept so they keep holding. */
Test(fuzz_findings, cell_files_bad_paths_are_refused)
{
    static const char *const bad[] = {"../x", "a/../../b", "/etc/passwd", "./a",     "a//b",
                                      "dir/", "",          "a\xff",       "\xc0\xae"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int code = run_cell_with_file(bad[i], strlen(bad[i]), "x", 1);
        cr_assert_eq(code, BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST, "path `%s`: answer %d",
                     bad[i], code);
    }
    cr_assert_eq(run_cell_with_file("ok/file.txt", 11, "x", 1),
                 BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND);
}

/* A frame's bytes appended to buf. */
static size_t frame_of(uint8_t *buf, size_t off, const char *json)
{
    size_t len = strlen(json);
    bh_frame_header_encode(buf + off, (uint32_t)len);
    memcpy(buf + off + BH_FRAME_HEADER, json, len);
    return off + BH_FRAME_HEADER + len;
}

/* Finding 2 (tests/e2e/test_bad_input.c, the symlink cases, 2026-11-29).
 * Owner: supervisor. supervisor/box.c, bhd_box_run(): when the agent's
 * header carries files_error it returns at once, but the agent
 * (supervisor/runners/agent.py, serve) always sends the header, then the
 * stdout and stderr frames. The two frames stay in the channel, the next
 * call reads the empty stdout frame as its header ("agent sent no result
 * header"), marks the box dead, and the session ends as sandbox_died: one
 * refused file (a guest's symlink, a read-only path, a full disk) kills the
 * session on the next call. Fixed in f5b90fe (the files_error branch drops
 * the two frames). */
Test(fuzz_findings, files_error_keeps_the_agent_channel_in_step)
{
    bh_fuzz_supervisor_init();
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    /* what agent.py sends for a refused file, then for a good cell */
    static uint8_t first[512], second[512];
    size_t n1 = frame_of(first, 0,
                         "{\"exit\": 0, \"files_error\": \"cannot write file `flink`: Too "
                         "many levels of symbolic links\"}");
    n1 = frame_of(first, n1, "");
    n1 = frame_of(first, n1, "");
    size_t n2 = frame_of(second, 0,
                         "{\"exit\": 0, \"n_images\": 0, \"has_value\": true, \"value\": \"2\"}");
    n2 = frame_of(second, n2, "");
    n2 = frame_of(second, n2, "");
    struct bh_fuzz_reply replies[] = {{first, n1}, {second, n2}};
    struct bh_fuzz_agent agent;
    bh_fuzz_agent_start(&agent, sv[1], replies, 2);
    struct bhd_box box = {.keeper = -1, .keeper_fd = -1, .chan = sv[0], .sentry = -1};
    Bulkhead__Control__RunCell req = BULKHEAD__CONTROL__RUN_CELL__INIT;
    req.language = "python";
    req.code = "1+1";
    struct bhd_cell_out out;
    struct bh_error err = {0};
    cr_assert_eq(bhd_box_run(&box, &req, 1000, &out, &err), 0, "%s", err.msg);
    cr_assert_not_null(out.files_error);
    bhd_cell_out_free(&out);
    int rc = bhd_box_run(&box, &req, 1000, &out, &err);
    cr_expect_eq(rc, 0,
                 "the call after a files_error failed (%s): the channel is out of step; owner: "
                 "supervisor, supervisor/box.c bhd_box_run files_error branch",
                 err.msg);
    cr_expect(!box.dead, "the box was marked dead after a refused file");
    if (rc == 0)
        cr_expect_str_eq(out.value, "2");
    bhd_cell_out_free(&out);
    close(sv[0]);
    bh_fuzz_agent_join(&agent);
    close(sv[1]);
}

/* Finding 3 (fuzz_policy, LeakSanitizer, 2026-11-29). Owner: policy; fixed
 * in 1b56b23. With sentry/policy.c of 51eba23, bh_policy_compile of this
 * input (kernel.policy, mutated so a syscall gets a repeated or covered
 * rule) leaked 7296 bytes in 76 allocations inside libseccomp 2.5.4's
 * seccomp_rule_add_array (called from build_ctx): libseccomp leaks the rules
 * it prunes. policy.c now never hands it such rules. The leak shows only
 * under a sanitizer: this test replays the input so a SANITIZE=address build
 * of the unit tests (and `make fuzz-replay`) keeps watching it; plain builds
 * check that it parses and compiles without a crash. */
Test(fuzz_findings, policy_compile_leak_b1e458e8)
{
    replay_dir(BH_FUZZ_CORPUS_DIR "/../regressions", "policy", bh_fuzz_policy);
}
