/* Fuzz target: what the session agent inside a sandbox sends back for a
 * cell. The agent runs next to guest code, so its replies are outside input
 * too: bhd_box_run reads a JSON header frame, then stdout, stderr and image
 * frames. The harness gives bhd_box_run a box whose channel is a socketpair
 * to a thread playing the agent: it answers the cell with the fuzz bytes,
 * then ends the stream (no keeper, no sandbox).
 * Oracles: a reply that is accepted has UTF-8 output with no NUL, lengths
 * that match, at most 16 images; a reply that is refused marks the box dead. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bulkheadd.h"
#include "fuzz.h"

static void check_text(const char *what, const char *s, size_t len)
{
    if (s == NULL)
        return;
    if (strlen(s) != len)
        bh_fuzz_fail("%s: %zu bytes announced, NUL at %zu", what, len, strlen(s));
    if (!bh_fuzz_utf8_ok((const uint8_t *)s, len))
        bh_fuzz_fail("%s is not UTF-8 after sanitizing", what);
}

int bh_fuzz_agent_reply(const uint8_t *data, size_t size)
{
    if (size > BH_FUZZ_MAX_INPUT)
        return 0;
    bh_fuzz_supervisor_init();
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        bh_fuzz_fail("socketpair: %s", strerror(errno));
    struct bh_fuzz_reply reply = {data, size};
    struct bh_fuzz_agent agent;
    bh_fuzz_agent_start(&agent, sv[1], &reply, 1);

    struct bhd_box box = {.keeper = -1, .keeper_fd = -1, .chan = sv[0], .sentry = -1};
    Bulkhead__Control__File f = BULKHEAD__CONTROL__FILE__INIT;
    f.path = "data/in.txt";
    f.content = "hello";
    Bulkhead__Control__File *files[] = {&f};
    Bulkhead__Control__RunCell req = BULKHEAD__CONTROL__RUN_CELL__INIT;
    req.language = "python";
    req.code = "6*7";
    req.files = files;
    req.n_files = 1;
    struct bhd_cell_out out;
    struct bh_error err = {0};
    int rc = bhd_box_run(&box, &req, 100, &out, &err);
    if (rc == 0) {
        if (box.dead || out.box_died)
            bh_fuzz_fail("an accepted reply marked the box dead");
        if (out.files_error == NULL) {
            check_text("stdout", out.out, out.out_len);
            check_text("stderr", out.err, out.err_len);
            if (out.value)
                check_text("value", out.value, strlen(out.value));
            if (out.n_images > 16)
                bh_fuzz_fail("%zu images", out.n_images);
            if (out.exit_code < -1024 || out.exit_code > 1024)
                bh_fuzz_fail("exit code %d", out.exit_code);
        } else {
            check_text("files_error", out.files_error, strlen(out.files_error));
        }
    } else {
        if (!box.dead || !out.box_died)
            bh_fuzz_fail("a refused reply left the box usable");
        if (err.msg[0] == '\0')
            bh_fuzz_fail("a refused reply without a reason");
    }
    bhd_cell_out_free(&out);
    close(sv[0]);
    bh_fuzz_agent_join(&agent);
    close(sv[1]);
    return 0;
}

#ifdef BH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return bh_fuzz_agent_reply(data, size);
}
#endif
