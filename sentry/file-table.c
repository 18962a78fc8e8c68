/* fs.file-max against the host's memory: see file-table.h. */
#include "file-table.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cleanup.h"
#include "host-sysctl.h"

#define FILE_MAX_PATH "/proc/sys/fs/file-max"

uint64_t bh_file_table_needed(uint64_t mem_bytes)
{
    return mem_bytes / BH_FILE_MIN_BYTES;
}

/* The sysctl's path: the test build can point it at a file of its own, so
 * the refusal and the raise are tested without touching the host's. */
static const char *file_max_path(void)
{
#ifdef BH_TEST_HOOKS
    const char *p = getenv("BULKHEAD_TEST_FILE_MAX");
    if (p != NULL && *p != '\0')
        return p;
#endif
    return FILE_MAX_PATH;
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
    const char *path = file_max_path();
    uint64_t file_max = 0, mem = 0, needed = 0;
    if (bh_host_mem_pool(path, POOL, "fs.file-max", BH_FILE_MIN_BYTES, &file_max, &mem, &needed,
                         err) < 0)
        return -1;
    struct bh_error why = {0};
    if (bh_host_sysctl_ensure(path, "fs.file-max", file_max, needed, BH_FILE_MAX_RAISED,
                              "BULKHEAD_KEEP_FILE_MAX",
                              "sandboxes could take the file table from every unprivileged "
                              "process",
                              &why) == 0)
        return 0;
    return bh_error_set(err, why.code,
                        "the host's file table: fs.file-max is %" PRIu64 ", below the %" PRIu64
                        " files this host's memory (%" PRIu64 " MiB at %d bytes a file) can "
                        "hold, so sandboxes could take it from every unprivileged process of "
                        "the host (ENFILE); refused: %s. Raise it (`sysctl "
                        "fs.file-max=%llu`) or run as root in the host's user namespace",
                        file_max, needed, mem >> 20, BH_FILE_MIN_BYTES, why.msg,
                        BH_FILE_MAX_RAISED);
}
