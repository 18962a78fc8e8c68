/* Numbers in the host's sysctls (/proc/sys), read and raised by the checks
 * that keep a global pool larger than what memory lets sandboxes take
 * (file-table.c, pid-space.c): one reader, one writer, one log line. */
#ifndef BH_HOST_SYSCTL_H
#define BH_HOST_SYSCTL_H

#include <stdint.h>

#include "error.h"

/* Reads the unsigned number in path. pool and name only word the error:
 * "POOL: read NAME (`PATH`)", "POOL: NAME (`PATH`) holds no number". */
int bh_host_sysctl_read(const char *path, const char *pool, const char *name, uint64_t *out,
                        struct bh_error *err);

/* Writes value to path; err says `write PATH` and the kernel's errno. */
int bh_host_sysctl_write(const char *path, uint64_t value, struct bh_error *err);

/* A pool's sysctl (at path, named name) holds now and the host needs
 * needed: when now is lower, raises it to raised (never lowers it) and logs
 * why (harm: what sandboxes could take from whom) to the kernel log, unless
 * the environment variable keep is "1" (the operator keeps the value).
 * 0 when the value is now enough; else -1 and why says what stopped the
 * raise (keep, or the write's errno), for the caller's refusal. */
int bh_host_sysctl_ensure(const char *path, const char *name, uint64_t now, uint64_t needed,
                          uint64_t raised, const char *keep, const char *harm,
                          struct bh_error *why);

/* One notice line in the kernel log, where the host's operator sees a
 * sysctl change (as systemd's are). Best effort: the raise is what counts. */
void bh_host_sysctl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
