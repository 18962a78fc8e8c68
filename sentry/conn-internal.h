/* Private to the core: the host side of a channel to a sentry (control.c),
 * whose public face is control.h. Used by control.c and sandbox.c. */
#ifndef BH_CONN_INTERNAL_H
#define BH_CONN_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "error.h"

struct bh_sentry_conn {
    int fd;
    pid_t sentry_pid; /* host pid of the sentry */
    bool owned;       /* the channel made at create: freed with the sandbox */
    bool have_exit;   /* the sentry reported the first guest's end */
    int exit_status;
    bool have_error; /* the sentry reported a fatal error */
    struct bh_error error;
    /* Host -> inner pids of processes exec'd on this channel, so a wait
     * still names them after they ended (their /proc entry is gone). */
    struct {
        pid_t host, inner;
    } execd[32];
    unsigned n_execd;
};

/* Sends req, returns the reply (events met on the way are recorded in conn).
 * An {"re":"error"} reply becomes -1 with err filled. */
int bh_conn_request(struct bh_sentry_conn *conn, json_t *req, const int *fds, size_t n_fds,
                    json_t **reply, int *rfds, size_t max_rfds, size_t *n_rfds,
                    struct bh_error *err);
/* Reads until the sentry reports an event (ready, exit or error), or the
 * stream ends; returns 1 with an event, 0 at the end, -1 on error. */
int bh_conn_next_event(struct bh_sentry_conn *conn, int64_t deadline_ms, json_t **ev,
                       struct bh_error *err);
/* The pid of a pidfd's process in this process's pid namespace, or -1. */
pid_t bh_pidfd_pid(int pidfd);

#endif
