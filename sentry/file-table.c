/* fs.file-max against the host's memory: see file-table.h. */
#include "file-table.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "cleanup.h"

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

static int read_file_max(const char *path, uint64_t *out, struct bh_error *err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "the host's file table: read fs.file-max (`%s`)", path);
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0)
        return bh_error_errno(err, errno, "the host's file table: read fs.file-max (`%s`)", path);
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno != 0 || end == buf || (*end != '\0' && *end != '\n') || buf[0] == '-')
        return bh_error_set(err, EINVAL,
                            "the host's file table: fs.file-max (`%s`) holds no number: `%.20s`",
                            path, buf);
    *out = v;
    return 0;
}

/* MemTotal, through sysinfo(2): one syscall, where /proc/meminfo costs the
 * kernel a walk of every counter (85 us a check here). */
static int read_mem_total(uint64_t *out, struct bh_error *err)
{
    struct sysinfo si;
    if (sysinfo(&si) < 0)
        return bh_error_errno(err, errno, "the host's file table: sysinfo");
    uint64_t unit = si.mem_unit != 0 ? si.mem_unit : 1;
    *out = (uint64_t)si.totalram * unit;
    if (*out == 0)
        return bh_error_set(err, EINVAL, "the host's file table: sysinfo gives no memory size");
    return 0;
}

/* The kernel log is where the host's operator sees a sysctl change (as
 * systemd's is); a front end's stderr belongs to its caller. Best effort:
 * the raise itself is what protects the host. */
static void log_raise(const char *path, uint64_t from, uint64_t needed)
{
    cleanup_close int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char msg[400];
    int n = snprintf(msg, sizeof(msg),
                     "<5>bulkhead[%d]: raised fs.file-max (%s) from %" PRIu64 " to %llu: below "
                     "the %" PRIu64 " files this host's memory can hold, sandboxes could take "
                     "the file table from every unprivileged process (BULKHEAD_KEEP_FILE_MAX=1 "
                     "keeps it and refuses sandboxes instead)\n",
                     (int)getpid(), path, from, BH_FILE_MAX_RAISED, needed);
    if (n > 0 && write(fd, msg, (size_t)n < sizeof(msg) ? (size_t)n : sizeof(msg) - 1) < 0)
        return;
}

static int write_file_max(const char *path, struct bh_error *err)
{
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "write `%s`", path);
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%llu\n", BH_FILE_MAX_RAISED);
    ssize_t w = write(fd, buf, (size_t)n);
    if (w != n)
        return bh_error_errno(err, w < 0 ? errno : EIO, "write `%s`", path);
    return 0;
}

int bh_file_table_state(uint64_t *file_max, uint64_t *needed, struct bh_error *err)
{
    uint64_t mem = 0;
    if (read_file_max(file_max_path(), file_max, err) < 0 || read_mem_total(&mem, err) < 0)
        return -1;
    *needed = bh_file_table_needed(mem);
    return 0;
}

int bh_file_table_ensure(struct bh_error *err)
{
    const char *path = file_max_path();
    uint64_t file_max = 0, mem = 0;
    if (read_file_max(path, &file_max, err) < 0 || read_mem_total(&mem, err) < 0)
        return -1;
    uint64_t needed = bh_file_table_needed(mem);
    if (file_max >= needed)
        return 0;
    const char *keep = getenv("BULKHEAD_KEEP_FILE_MAX");
    struct bh_error why = {0};
    if (keep != NULL && strcmp(keep, "1") == 0)
        bh_error_set(&why, EPERM, "BULKHEAD_KEEP_FILE_MAX=1 forbids raising it");
    else if (write_file_max(path, &why) == 0) {
        log_raise(path, file_max, needed);
        return 0;
    }
    return bh_error_set(err, why.code,
                        "the host's file table: fs.file-max is %" PRIu64 ", below the %" PRIu64
                        " files this host's memory (%" PRIu64 " MiB at %d bytes a file) can "
                        "hold, so sandboxes could take it from every unprivileged process of "
                        "the host (ENFILE); refused: %s. Raise it (`sysctl "
                        "fs.file-max=%llu`) or run as root in the host's user namespace",
                        file_max, needed, mem >> 20, BH_FILE_MIN_BYTES, why.msg,
                        BH_FILE_MAX_RAISED);
}
