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

/* A sysctl's path: the test build reads the file named by the environment
 * variable env instead when it is set, so refusals and raises are tested
 * without touching the host's; the production build holds not even the
 * hook's name. */
#ifdef BH_TEST_HOOKS
const char *bh_host_sysctl_hooked(const char *env, const char *path);
#define BH_HOST_SYSCTL_PATH(env, path) bh_host_sysctl_hooked(env, path)
#else
#define BH_HOST_SYSCTL_PATH(env, path) (path)
#endif

/* MemTotal in bytes (sysinfo(2)); pool words the error. */
int bh_host_mem_total(const char *pool, uint64_t *out, struct bh_error *err);

/* A pool that memory bounds: reads its sysctl (at path, named name) and
 * MemTotal; *needed is MemTotal / unit_bytes (the least memory one unit of
 * the pool holds). pool words the errors. */
int bh_host_mem_pool(const char *path, const char *pool, const char *name, uint64_t unit_bytes,
                     uint64_t *value, uint64_t *mem, uint64_t *needed, struct bh_error *err);

/* A pool's sysctl (at path, named name) holds now and the host needs
 * needed: when now is lower, raises it to raised (never lowers it) and logs
 * why (harm: what sandboxes could take from whom) to the kernel log, unless
 * the environment variable keep is "1" (the operator keeps the value).
 * 0 when the value is now enough; else -1 and why says what stopped the
 * raise (keep, or the write's errno), for the caller's refusal. */
int bh_host_sysctl_ensure(const char *path, const char *name, uint64_t now, uint64_t needed,
                          uint64_t raised, const char *keep, const char *harm,
                          struct bh_error *why);

/* A global pool that memory bounds, as every create keeps it (the file
 * table, the AIO pool): its sysctl must hold at least what MemTotal /
 * unit_bytes units need, or it is raised (to raised, or to exactly that
 * when raised is 0) unless the operator keeps it, or the create is refused. */
struct bh_mem_pool {
    const char *pool;    /* "the host's file table": words the errors */
    const char *name;    /* the sysctl, "fs.file-max" */
    const char *path;    /* where it is read and written */
    uint64_t unit_bytes; /* the least memory one unit holds */
    const char *units;   /* "files" */
    uint64_t raised;     /* the value a raise writes; 0: exactly what is needed */
    const char *keep;    /* the environment variable that keeps the value */
    const char *harm;    /* for the log: what sandboxes could take from whom */
    const char *effect;  /* for the refusal: the same, with the errno they would see */
};

/* 0 when the pool's sysctl is (now) enough; else -1 and err says the value,
 * what this host needs, why, and the fix. */
int bh_host_mem_pool_ensure(const struct bh_mem_pool *p, struct bh_error *err);

/* One notice line in the kernel log, where the host's operator sees a
 * sysctl change (as systemd's are). Best effort: the raise is what counts. */
void bh_host_sysctl_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
