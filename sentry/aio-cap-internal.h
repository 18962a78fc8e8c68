/* Private to the core: the container tier's per-sandbox cap on Linux AIO
 * (aio-cap.c, served by the sentry's main loop). Used by sentry-main.c. */
#ifndef BH_AIO_CAP_INTERNAL_H
#define BH_AIO_CAP_INTERNAL_H

#include <stddef.h>

#include "socket-cap-internal.h"

/* fs.aio-max-nr is 65536 events for the whole host: 16 full sandboxes drain
 * it, as 48 drain the pty pool (sentry/README.md, "Global pools"). InnoDB
 * asks 256 events per I/O thread (8 by default), ScyllaDB one context per
 * shard. */
#define BH_AIO_CAP_EVENTS 4096u
/* Each held context costs the sentry one fd (below). */
#define BH_AIO_CAP_CONTEXTS 64u

struct bh_aio_cap {
    int proc_fd; /* the sandbox's own /proc, -1: nothing can be counted */
    unsigned max_events, max_contexts;
    unsigned events; /* reserved by live address spaces */
    size_t n;
    struct {
        int mem_fd; /* /proc/TID/mem of the caller: pins its mm, not its pages */
        unsigned events;
    } held[BH_AIO_CAP_CONTEXTS];
    /* The same listener serves NETLINK_ROUTE and ping sockets (socket-cap.c). */
    struct bh_socket_cap sockets;
};

/* proc_fd: an O_PATH fd of a procfs whose pid namespace is the caller's own
 * (checked: else -1 is kept and every io_setup fails with ENOSYS). */
void bh_aio_cap_init(struct bh_aio_cap *cap, int proc_fd, unsigned max_events,
                     unsigned max_contexts);
void bh_aio_cap_free(struct bh_aio_cap *cap);

/* Takes mem_fd (an fd of /proc/TID/mem of the caller, opened while its
 * io_setup waits) and reserves nr_events against the cap: 0 when they fit,
 * -EAGAIN (mem_fd closed) when they do not, as the kernel answers when the
 * host's pool is out. Reservations of address spaces that are gone are
 * dropped first. */
int bh_aio_cap_hold(struct bh_aio_cap *cap, int mem_fd, unsigned nr_events);

/* Drops every reservation whose address space is gone (exit, exec). */
void bh_aio_cap_release_dead(struct bh_aio_cap *cap);

/* Receives one notification on listener and answers it: io_setup within the
 * cap continues, past it fails with EAGAIN; socket and setsockopt go to
 * socket-cap.c; anything else (a policy that
 * notifies more than this serves) fails with ENOSYS. -1 when the listener is
 * dead (no guest left on its filter). */
int bh_aio_cap_serve(struct bh_aio_cap *cap, int listener);

#endif
