/* Private to the core: the wire protocol between the front end, the sentry
 * and its guests (control.c), spoken by sandbox.c, control.c, guest.c and
 * sentry-main.c. */
#ifndef BH_MSG_INTERNAL_H
#define BH_MSG_INTERNAL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* SOCK_SEQPACKET: one JSON object per packet, fds by SCM_RIGHTS. Requests
 * carry "op", replies "re", unsolicited sentry events "ev". The spec travels
 * as a memfd attached to {"op":"spec"} so its size is not bounded by the
 * socket buffer. */
#define BH_MSG_MAX (64 * 1024)
#define BH_SPEC_MAX (16 * 1024 * 1024)

/* Sends obj (not stolen) with optional fds. */
int bh_msg_send(int sock, json_t *obj, const int *fds, size_t n_fds, struct bh_error *err);
/* Receives one message; returns 1, 0 at end of stream, -1 on error. fds
 * beyond max_fds are closed. deadline_ms < 0: none. */
int bh_msg_recv(int sock, int64_t deadline_ms, json_t **obj, int *fds, size_t max_fds,
                size_t *n_fds, struct bh_error *err);
/* Async-signal-safe error report for a child before exec (no malloc):
 * {"ev":"error","code":N,"msg":"..."} (with "kind":"exec" for an exec failure). */
void bh_msg_send_raw_error(int sock, enum bh_error_kind kind, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Fills err from an error message object. */
int bh_msg_to_error(json_t *obj, struct bh_error *err);
json_t *bh_msg_error(const struct bh_error *err, const char *kind);

#endif
