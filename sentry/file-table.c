/* fs.file-max against the host's memory: see file-table.h. */
#include "file-table.h"

#include "host-sysctl.h"

#define FILE_MAX_PATH "/proc/sys/fs/file-max"

uint64_t bh_file_table_needed(uint64_t mem_bytes)
{
    return mem_bytes / BH_FILE_MIN_BYTES;
}

static const char *file_max_path(void)
{
    return BH_HOST_SYSCTL_PATH("BULKHEAD_TEST_FILE_MAX", FILE_MAX_PATH);
}

#define POOL "the host's file table"

int bh_file_table_state(uint64_t *file_max, uint64_t *needed, struct bh_error *err)
{
    uint64_t mem = 0;
    return bh_host_mem_pool(file_max_path(), POOL, "fs.file-max", BH_FILE_MIN_BYTES, file_max, &mem,
                            needed, err);
}

int bh_file_table_ensure(struct bh_error *err)
{
    const struct bh_mem_pool pool = {
        .pool = POOL,
        .name = "fs.file-max",
        .path = file_max_path(),
        .unit_bytes = BH_FILE_MIN_BYTES,
        .units = "files",
        .raised = BH_FILE_MAX_RAISED,
        .keep = "BULKHEAD_KEEP_FILE_MAX",
        .harm = "sandboxes could take the file table from every unprivileged process",
        .effect = "sandboxes could take it from every unprivileged process of the host (ENFILE)",
    };
    return bh_host_mem_pool_ensure(&pool, err);
}
