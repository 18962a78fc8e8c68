/* The host's file table (fs.file-max): a global pool that no cgroup counts.
 * Past it every process without CAP_SYS_ADMIN in the initial user namespace
 * gets ENFILE, the neighbours of a sandbox that took it and the host's own
 * unprivileged services alike. What bounds a sandbox's share is memory: each
 * struct file is slab memory (the filp cache, charged to the memory cgroup),
 * so no set of processes can hold more files than the host's memory fits.
 * The wall holds when fs.file-max is at least that many; sentry/README.md,
 * "The host's file table". */
#ifndef BH_FILE_TABLE_H
#define BH_FILE_TABLE_H

#include <stdint.h>

#include "error.h"

/* Fewer bytes than any kernel's struct file (192-byte slab objects on 6.18,
 * 256 on 5.x), so that MemTotal / this is more files than memory can hold. */
#define BH_FILE_MIN_BYTES 128

/* The value the runtime writes when it raises fs.file-max: the sysctl's own
 * maximum (LONG_MAX), what systemd >= 240 sets at boot. */
#define BH_FILE_MAX_RAISED 9223372036854775807ULL

/* Files the host's memory could hold: mem_bytes / BH_FILE_MIN_BYTES. */
uint64_t bh_file_table_needed(uint64_t mem_bytes);

/* Reads fs.file-max and what the host's memory can hold, changing nothing
 * (the tier report's check of a live sandbox). */
int bh_file_table_state(uint64_t *file_max, uint64_t *needed, struct bh_error *err);

/* Checks fs.file-max against the host's MemTotal and, when it is lower,
 * raises it to BH_FILE_MAX_RAISED (never lowers it) and logs the change to
 * the kernel log. Fails closed, with the numbers in err, when the values
 * cannot be read, when the write fails (no CAP_SYS_ADMIN in the host's user
 * namespace), or when BULKHEAD_KEEP_FILE_MAX=1 forbids the write. */
int bh_file_table_ensure(struct bh_error *err);

#endif
