/* fs.aio-max-nr against the host's memory: see aio-pool.h. */
#include "aio-pool.h"

#include <inttypes.h>

#include "host-sysctl.h"

#define POOL "the host's AIO pool"

uint64_t bh_aio_pool_needed(uint64_t mem_bytes)
{
    return mem_bytes / BH_AIO_EVENT_MIN_BYTES;
}

static const char *aio_max_nr_path(void)
{
    return BH_HOST_SYSCTL_PATH("BULKHEAD_TEST_AIO_MAX_NR", "/proc/sys/fs/aio-max-nr");
}

int bh_aio_pool_state(uint64_t *aio_max_nr, uint64_t *needed, struct bh_error *err)
{
    uint64_t mem = 0;
    return bh_host_mem_pool(aio_max_nr_path(), POOL, "fs.aio-max-nr", BH_AIO_EVENT_MIN_BYTES,
                            aio_max_nr, &mem, needed, err);
}

int bh_aio_pool_ensure(struct bh_error *err)
{
    const char *path = aio_max_nr_path();
    uint64_t max_nr = 0, mem = 0, needed = 0;
    if (bh_host_mem_pool(path, POOL, "fs.aio-max-nr", BH_AIO_EVENT_MIN_BYTES, &max_nr, &mem,
                         &needed, err) < 0)
        return -1;
    struct bh_error why = {0};
    /* Raised to exactly what memory can hold: the least value that makes
     * memory the bound (no distribution sets one, as systemd does for the
     * file table and the pid space). */
    if (bh_host_sysctl_ensure(path, "fs.aio-max-nr", max_nr, needed, needed,
                              "BULKHEAD_KEEP_AIO_MAX_NR",
                              "container-tier sandboxes could take every AIO event and leave "
                              "the host's databases without io_setup",
                              &why) == 0)
        return 0;
    return bh_error_set(err, why.code,
                        POOL
                        ": fs.aio-max-nr is %" PRIu64 ", below the %" PRIu64
                        " events this host's memory (%" PRIu64 " MiB at %d bytes an event) can "
                        "hold, so container-tier sandboxes at their AIO cap could take every "
                        "event and leave the host's own io_setup failing (EAGAIN); refused: %s. "
                        "Raise it (`sysctl fs.aio-max-nr=%" PRIu64 "`) or run as root in the "
                        "host's user namespace",
                        max_nr, needed, mem >> 20, BH_AIO_EVENT_MIN_BYTES, why.msg, needed);
}
