/* The fuzz harnesses' shared entry points (tests/fuzz/): each target is a
 * function bh_fuzz_NAME(data, size) that libFuzzer calls through
 * LLVMFuzzerTestOneInput (built with -DBH_LIBFUZZER) and the unit tests call
 * directly to replay seeds and reproducers. A harness never creates a
 * sandbox and writes files only under its own temporary directory. */
#ifndef BH_FUZZ_H
#define BH_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "control.pb-c.h"

int bh_fuzz_control(const uint8_t *data, size_t size);
int bh_fuzz_cell_files(const uint8_t *data, size_t size);
int bh_fuzz_agent_reply(const uint8_t *data, size_t size);
int bh_fuzz_oci_config(const uint8_t *data, size_t size);
int bh_fuzz_oci_process(const uint8_t *data, size_t size);
int bh_fuzz_policy(const uint8_t *data, size_t size);

/* Largest input a harness looks at (libFuzzer's -max_len in fuzz.mk). */
#define BH_FUZZ_MAX_INPUT (64 * 1024)

/* bulkheadd's globals set up once for in-process serving: no warm pool, no
 * session may open (max_sessions 0), small frame and output caps. */
void bh_fuzz_supervisor_init(void);

/* Feeds bytes to bhd_serve_connection over a socketpair (as a client that
 * sends them and then half-closes) and calls each_response for every
 * Response the daemon answered. Aborts when an answer is not a well-formed
 * frame holding a Response: the daemon must never send garbage. Returns the
 * number of responses. */
size_t bh_fuzz_serve(const uint8_t *data, size_t size,
                     void (*each_response)(const Bulkhead__Control__Response *r, void *ctx),
                     void *ctx);

/* Plays the session agent on fd, as agent.py does: for each reply in turn it
 * waits for one request frame, then sends the reply's bytes (raw: they may
 * be any frames or none); after the last it half-closes. bhd_box_run refuses
 * a box whose channel is readable before the call, so replies must not come
 * early. It runs on the harnesses' one helper thread; bh_fuzz_agent_join
 * waits for it (close the other end first, so an agent still waiting for a
 * request sees the end). */
struct bh_fuzz_reply {
    const uint8_t *data;
    size_t len;
};
struct bh_fuzz_agent {
    int fd;
    const struct bh_fuzz_reply *replies;
    size_t n;
};
void bh_fuzz_agent_start(struct bh_fuzz_agent *a, int fd, const struct bh_fuzz_reply *replies,
                         size_t n);
void bh_fuzz_agent_join(struct bh_fuzz_agent *a);

/* An independent UTF-8 check (RFC 3629: no overlongs, no surrogates, at most
 * U+10FFFF) the harnesses compare the daemon's against. */
int bh_fuzz_utf8_ok(const uint8_t *s, size_t len);

/* Dies with a message: a harness oracle found the code under test wrong. */
void bh_fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* A temporary directory made once per process and removed at exit. */
const char *bh_fuzz_tmpdir(void);

#endif
