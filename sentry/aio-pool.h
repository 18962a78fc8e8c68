/* The host's AIO pool (fs.aio-max-nr): one count of the events every
 * io_setup asked for, host-wide, that no cgroup counts. Past it io_setup
 * fails with EAGAIN for every process, root's databases included. The
 * container tier lets guests make AIO contexts (as Docker's default profile
 * does) and caps each sandbox (aio-cap.c: 4096 events), but at the default
 * 65536, 16 such sandboxes take the pool. What bounds all of them together
 * is memory: each event asked reserves at least two 32-byte slots of the
 * context's ring, page cache charged to the caller's memory cgroup. The
 * wall holds when the pool is at least what the host's memory can hold;
 * sentry/README.md, "The host's AIO pool". Checked for every tier, as
 * the other pools are, though only the container tier reaches it. */
#ifndef BH_AIO_POOL_H
#define BH_AIO_POOL_H

#include <stdint.h>

#include "error.h"

/* The least memory one event of fs.aio-nr holds: two io_event ring slots
 * (measured here: 4 contexts of 1024 events charged 256 KiB). */
#define BH_AIO_EVENT_MIN_BYTES 64

/* Events the host's memory could hold: mem_bytes / BH_AIO_EVENT_MIN_BYTES. */
uint64_t bh_aio_pool_needed(uint64_t mem_bytes);

/* Reads fs.aio-max-nr and what the host's memory can hold, changing nothing
 * (the tier report's check of a live sandbox). */
int bh_aio_pool_state(uint64_t *aio_max_nr, uint64_t *needed, struct bh_error *err);

/* Checks fs.aio-max-nr against the host's MemTotal and, when it is lower,
 * raises it to what memory can hold (never lowers it) and logs the change
 * to the kernel log. Fails closed, with the numbers in err, when the values
 * cannot be read, when the write fails, or when BULKHEAD_KEEP_AIO_MAX_NR=1
 * forbids it. */
int bh_aio_pool_ensure(struct bh_error *err);

#endif
