/* Fuzz target: bytes a client sends to bulkheadd's control socket, through
 * the daemon's own connection handler (frame reader, Request decoding, the
 * version check before the payload, and each procedure's validation). No
 * session can open (the harness sets max_sessions to 0), so nothing here
 * ever creates a sandbox. Oracles: every answer is a well-formed Response
 * (bh_fuzz_serve), an error answer carries a UTF-8 message, and a request
 * with another version gets INVALID_REQUEST whatever its body. */
#include <stdlib.h>
#include <string.h>

#include "bulkheadd.h"
#include "frame.h"
#include "fuzz.h"

struct seen {
    size_t n;
};

static void check(const Bulkhead__Control__Response *r, void *ctx)
{
    struct seen *s = ctx;
    s->n++;
    /* with no session in the table, only these can come back */
    switch (r->body_case) {
    case BULKHEAD__CONTROL__RESPONSE__BODY_ERROR:
    case BULKHEAD__CONTROL__RESPONSE__BODY_DESCRIBE:
    case BULKHEAD__CONTROL__RESPONSE__BODY_LIST_SESSIONS:
    case BULKHEAD__CONTROL__RESPONSE__BODY_STATS:
        break;
    default:
        bh_fuzz_fail("answer of kind %d with no session open", r->body_case);
    }
    if (r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_LIST_SESSIONS &&
        r->list_sessions->n_sessions != 0)
        bh_fuzz_fail("ListSessions lists %zu sessions; none exist", r->list_sessions->n_sessions);
}

static void first_answer(const Bulkhead__Control__Response *r, void *ctx)
{
    int *code = ctx;
    if (*code != -2)
        return;
    *code = r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? (int)r->error->code : -1;
}

int bh_fuzz_control(const uint8_t *data, size_t size)
{
    if (size > BH_FUZZ_MAX_INPUT)
        size = BH_FUZZ_MAX_INPUT;
    struct seen s = {0};
    bh_fuzz_serve(data, size, check, &s);

    /* The same bytes as one well-formed frame: when they decode as a Request
     * with another version, the answer must be INVALID_REQUEST whatever the
     * body asks (the payload is never acted on). */
    if (size == 0 || size > 60 * 1024)
        return 0;
    Bulkhead__Control__Request *req = bulkhead__control__request__unpack(NULL, size, data);
    if (req == NULL)
        return 0;
    uint32_t version = req->version;
    bulkhead__control__request__free_unpacked(req, NULL);
    uint8_t *framed = malloc(size + BH_FRAME_HEADER);
    if (framed == NULL)
        return 0;
    bh_frame_header_encode(framed, (uint32_t)size);
    memcpy(framed + BH_FRAME_HEADER, data, size);
    int code = -2;
    if (bh_fuzz_serve(framed, size + BH_FRAME_HEADER, first_answer, &code) != 1)
        bh_fuzz_fail("one frame got no single answer");
    free(framed);
    if (version != BHD_PROTOCOL && code != BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST)
        bh_fuzz_fail("a request of version %u got answer %d, not INVALID_REQUEST", version, code);
    return 0;
}

#ifdef BH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return bh_fuzz_control(data, size);
}
#endif
