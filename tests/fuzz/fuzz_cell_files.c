/* Fuzz target: a cell's file list, the part of RunCell bulkheadd must check
 * before anything reaches a sandbox (paths relative, no `.`/`..`/empty
 * component, no trailing `/`, UTF-8 paths and contents, at most 200 files
 * and 4 MiB together). The input is decoded into files and encoded by hand
 * as a protobuf RunCell, so NUL bytes and invalid UTF-8 reach the daemon
 * exactly as a hostile client would send them.
 *
 * Input: byte 0 picks the language; then records of
 *   u8 path_len, u8 repeat, u16 content_len (LE), path, content
 * where content is repeated (repeat * 256 + 1) times (capped at 5 MiB in
 * all) so the size limit is reachable.
 *
 * Oracle: the daemon's verdict (NOT_FOUND: the checks passed and it looked
 * for the session; INVALID_REQUEST: refused) must equal a reference
 * written from the rules above on the bytes as sent.
 *
 * Known finding (tests/unit/test_fuzz_regressions.c, cell_files_nul_*):
 * check_cell in supervisor/server.c reads path and content as C strings, so
 * a NUL byte silently cuts them instead of being refused. While it stands,
 * BH_FUZZ_TOLERATE=nul-truncation (make fuzz FUZZ_TOLERATE=...) leaves lists
 * holding a NUL byte unjudged (either answer is taken), so fuzzing can go on
 * past it on a tree without the fix (server.c now refuses NUL bytes before
 * unpacking). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bulkheadd.h"
#include "frame.h"
#include "fuzz.h"

#define MAX_TOTAL (5u * 1024 * 1024)

struct buf {
    uint8_t *p;
    size_t len, cap;
};

static void put(struct buf *b, const void *d, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (b->p == NULL)
            abort();
    }
    memcpy(b->p + b->len, d, n);
    b->len += n;
}

static void put_varint(struct buf *b, uint64_t v)
{
    uint8_t tmp[10];
    size_t n = 0;
    do {
        tmp[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            tmp[n] |= 0x80;
        n++;
    } while (v);
    put(b, tmp, n);
}

static void put_bytes(struct buf *b, unsigned field, const void *d, size_t n)
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, n);
    put(b, d, n);
}

/* The rules as the design states them, on the raw bytes. */
static bool path_ok(const uint8_t *p, size_t n)
{
    if (n == 0 || n > 4096 || memchr(p, 0, n) || !bh_fuzz_utf8_ok(p, n) || p[0] == '/')
        return false;
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - start;
            if (len == 0 || (len == 1 && p[start] == '.') ||
                (len == 2 && p[start] == '.' && p[start + 1] == '.'))
                return false;
            start = i + 1;
        }
    }
    return true;
}

static void verdict(const Bulkhead__Control__Response *r, void *ctx)
{
    int *code = ctx;
    *code = r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? (int)r->error->code : -1;
    if (*code > 0 && getenv("BH_FUZZ_DEBUG") != NULL)
        fprintf(stderr, "bh_fuzz: the daemon answered %d: %s\n", *code, r->error->message);
}

int bh_fuzz_cell_files(const uint8_t *data, size_t size)
{
    if (size < 1 || size > BH_FUZZ_MAX_INPUT)
        return 0;
    static const char *const langs[] = {"python", "javascript", "ruby", ""};
    const char *lang = langs[data[0] & 3];
    bool good_lang = (data[0] & 3) < 2;
    size_t off = 1;
    const char *tol = getenv("BH_FUZZ_TOLERATE");
    bool tolerate_nul = tol != NULL && strstr(tol, "nul-truncation") != NULL;

    struct buf cell = {0}, file = {0};
    put_bytes(&cell, 1, "0123456789abcdef0123456789abcdef", 32); /* no such session */
    put_bytes(&cell, 2, lang, strlen(lang));
    put_bytes(&cell, 3, "1+1", 3);
    size_t n_files = 0, total = 0;
    bool has_nul = false;
    bool all_ok = true;
    while (off + 4 <= size) {
        size_t plen = data[off], rep = (size_t)data[off + 1] * 256 + 1;
        size_t clen = (size_t)data[off + 2] | (size_t)data[off + 3] << 8;
        off += 4;
        if (plen > size - off)
            plen = size - off;
        const uint8_t *path = data + off;
        off += plen;
        if (clen > size - off)
            clen = size - off;
        const uint8_t *content = data + off;
        off += clen;
        if (clen == 0 || total + clen * rep > MAX_TOTAL)
            rep = 1;
        file.len = 0;
        put_bytes(&file, 1, path, plen);
        put_varint(&file, 2 << 3 | 2);
        put_varint(&file, clen * rep);
        for (size_t k = 0; k < rep; k++)
            put(&file, content, clen);
        put_bytes(&cell, 4, file.p, file.len);
        n_files++;
        total += clen * rep;
        if (memchr(path, 0, plen) || memchr(content, 0, clen))
            has_nul = true;
        bool content_ok = !memchr(content, 0, clen) && bh_fuzz_utf8_ok(content, clen);
        if (!path_ok(path, plen) || !content_ok)
            all_ok = false;
    }
    put_varint(&cell, 5 << 3 | 0);
    put_varint(&cell, 1000);

    struct buf req = {0};
    put_varint(&req, 1 << 3 | 0);
    put_varint(&req, BHD_PROTOCOL);
    put_bytes(&req, 12, cell.p, cell.len);
    struct buf framed = {0};
    uint8_t hdr[BH_FRAME_HEADER];
    bh_frame_header_encode(hdr, (uint32_t)req.len);
    put(&framed, hdr, sizeof(hdr));
    put(&framed, req.p, req.len);

    /* large cells need a larger frame limit than the control target's */
    bh_fuzz_supervisor_init();
    bhd_cfg.max_frame = 16 * 1024 * 1024;
    int code = -2;
    size_t answers = bh_fuzz_serve(framed.p, framed.len, verdict, &code);
    free(cell.p);
    free(file.p);
    free(req.p);
    free(framed.p);
    if (answers != 1)
        bh_fuzz_fail("a RunCell got %zu answers", answers);

    if (tolerate_nul && has_nul) {
        /* refused or passed, the daemon answered and did not fall over */
        if (code != BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND &&
            code != BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST &&
            code != BULKHEAD__CONTROL__ERROR__CODE__UNSUPPORTED)
            bh_fuzz_fail("a file list with a NUL byte got answer %d", code);
        return 0;
    }
    bool expect_ok = good_lang && all_ok && n_files <= 200 && total <= 4u * 1024 * 1024;
    bool passed = code == BULKHEAD__CONTROL__ERROR__CODE__NOT_FOUND;
    if (expect_ok && !passed)
        bh_fuzz_fail("a valid file list was refused (answer %d)", code);
    if (!expect_ok && passed)
        bh_fuzz_fail("an invalid file list passed the checks (language `%s`, %zu files, "
                     "%zu bytes, every path and content valid: %d)",
                     lang, n_files, total, all_ok);
    if (!expect_ok && code != BULKHEAD__CONTROL__ERROR__CODE__INVALID_REQUEST &&
        code != BULKHEAD__CONTROL__ERROR__CODE__UNSUPPORTED)
        bh_fuzz_fail("an invalid file list got answer %d", code);
    return 0;
}

#ifdef BH_LIBFUZZER
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return bh_fuzz_cell_files(data, size);
}
#endif
