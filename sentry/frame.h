/* Length-prefixed frames over stream sockets and pipes, and passing fds
 * with SCM_RIGHTS. A frame is a 4-byte big-endian length and that many bytes;
 * the reader states the largest frame it accepts, so a peer can never make it
 * allocate more. Used by bulkheadd's control socket, its channel to the
 * in-sandbox agent, and the OCI front end's tier report. */
#ifndef BH_FRAME_H
#define BH_FRAME_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

#define BH_FRAME_HEADER 4
/* A default cap for control messages. */
#define BH_FRAME_MAX_DEFAULT (8u * 1024 * 1024)

void bh_frame_header_encode(uint8_t out[BH_FRAME_HEADER], uint32_t len);
uint32_t bh_frame_header_decode(const uint8_t in[BH_FRAME_HEADER]);

/* Writes the header and the payload (all of it, retrying short writes and
 * EINTR; MSG_NOSIGNAL on sockets so a closed peer is EPIPE, not SIGPIPE). */
int bh_frame_write(int fd, const void *buf, size_t len, struct bh_error *err);

/* Reads one frame into a malloc'd buffer (*buf, *len; one extra NUL byte is
 * allocated after the payload). Returns 1 with a frame, 0 on a clean end of
 * stream before any byte of a frame, -1 with err filled otherwise:
 * EMSGSIZE when the announced length is above max (nothing more is read),
 * EPROTO when the stream ends inside a frame, ETIMEDOUT when deadline_ms
 * (CLOCK_MONOTONIC milliseconds, bh_now_ms; negative: none) passes. */
int bh_frame_read(int fd, size_t max, int64_t deadline_ms, void **buf, size_t *len,
                  struct bh_error *err);

/* Reads or writes exactly len bytes (same deadline and end rules). */
int bh_read_full(int fd, void *buf, size_t len, int64_t deadline_ms, struct bh_error *err);
int bh_write_full(int fd, const void *buf, size_t len, struct bh_error *err);

/* Connects to bulkheadd's control socket at path (a new O_CLOEXEC fd);
 * hint ("" for none) ends the message of a failed connect. */
int bh_control_connect(const char *path, const char *hint, struct bh_error *err);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t bh_now_ms(void);

/* The most fds one message carries: the spec message's fixed slots and
 * prepared mount trees (spec-fds.h) are the largest user; the kernel allows
 * 253 (SCM_MAX_FD). */
#define BH_FDS_PER_MSG 64

/* Sends data (at least one byte; len 0 sends one zero byte) with n fds
 * (at most BH_FDS_PER_MSG). */
int bh_send_fds(int sock, const void *data, size_t len, const int *fds, size_t n,
                struct bh_error *err);
/* Receives up to len bytes and up to max_fds fds (made O_CLOEXEC); *n_fds
 * says how many came; extra fds beyond max_fds are closed, never leaked.
 * Returns the number of bytes read (0: end of stream) or -1. */
ssize_t bh_recv_fds(int sock, void *data, size_t len, int *fds, size_t max_fds, size_t *n_fds,
                    struct bh_error *err);

#endif
