/* fs.aio-max-nr against the host's memory: see aio-pool.h. */
#include "aio-pool.h"

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
    /* Raised to exactly what memory can hold: the least value that makes
     * memory the bound (no distribution sets one, as systemd does for the
     * file table and the pid space). */
    const struct bh_mem_pool pool = {
        .pool = POOL,
        .name = "fs.aio-max-nr",
        .path = aio_max_nr_path(),
        .unit_bytes = BH_AIO_EVENT_MIN_BYTES,
        .units = "events",
        .raised = 0,
        .keep = "BULKHEAD_KEEP_AIO_MAX_NR",
        .harm = "container-tier sandboxes could take every AIO event and leave the host's "
                "databases without io_setup",
        .effect = "container-tier sandboxes at their AIO cap could take every event and leave "
                  "the host's own io_setup failing (EAGAIN)",
    };
    return bh_host_mem_pool_ensure(&pool, err);
}
