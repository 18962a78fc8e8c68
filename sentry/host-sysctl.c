/* The host's sysctl numbers: see host-sysctl.h. */
#include "host-sysctl.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "cleanup.h"

int bh_host_sysctl_read(const char *path, const char *pool, const char *name, uint64_t *out,
                        struct bh_error *err)
{
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "%s: read %s (`%s`)", pool, name, path);
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    if (n < 0)
        return bh_error_errno(err, errno, "%s: read %s (`%s`)", pool, name, path);
    buf[n] = '\0';
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (errno != 0 || end == buf || (*end != '\0' && *end != '\n') || buf[0] == '-')
        return bh_error_set(err, EINVAL, "%s: %s (`%s`) holds no number: `%.20s`", pool, name, path,
                            buf);
    *out = v;
    return 0;
}

#ifdef BH_TEST_HOOKS
const char *bh_host_sysctl_hooked(const char *env, const char *path)
{
    const char *p = getenv(env);
    return p != NULL && *p != '\0' ? p : path;
}
#endif

/* Through sysinfo(2): one syscall, where /proc/meminfo costs the kernel a
 * walk of every counter (85 us a check here). */
int bh_host_mem_total(const char *pool, uint64_t *out, struct bh_error *err)
{
    struct sysinfo si;
    if (sysinfo(&si) < 0)
        return bh_error_errno(err, errno, "%s: sysinfo", pool);
    uint64_t unit = si.mem_unit != 0 ? si.mem_unit : 1;
    *out = (uint64_t)si.totalram * unit;
    if (*out == 0)
        return bh_error_set(err, EINVAL, "%s: sysinfo gives no memory size", pool);
    return 0;
}

int bh_host_mem_pool(const char *path, const char *pool, const char *name, uint64_t unit_bytes,
                     uint64_t *value, uint64_t *mem, uint64_t *needed, struct bh_error *err)
{
    if (bh_host_sysctl_read(path, pool, name, value, err) < 0 ||
        bh_host_mem_total(pool, mem, err) < 0)
        return -1;
    *needed = *mem / unit_bytes;
    return 0;
}

int bh_host_sysctl_write(const char *path, uint64_t value, struct bh_error *err)
{
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "write `%s`", path);
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%" PRIu64 "\n", value);
    ssize_t w = write(fd, buf, (size_t)n);
    if (w != n)
        return bh_error_errno(err, w < 0 ? errno : EIO, "write `%s`", path);
    return 0;
}

int bh_host_sysctl_ensure(const char *path, const char *name, uint64_t now, uint64_t needed,
                          uint64_t raised, const char *keep, const char *harm, struct bh_error *why)
{
    if (now >= needed)
        return 0;
    const char *v = getenv(keep);
    if (v != NULL && strcmp(v, "1") == 0)
        return bh_error_set(why, EPERM, "%s=1 forbids raising it", keep);
    if (bh_host_sysctl_write(path, raised, why) < 0)
        return -1;
    bh_host_sysctl_log("raised %s (%s) from %" PRIu64 " (below the %" PRIu64
                       " this host needs) to %" PRIu64 ": %s (%s=1 keeps it and refuses "
                       "sandboxes instead)",
                       name, path, now, needed, raised, harm, keep);
    return 0;
}

int bh_host_mem_pool_ensure(const struct bh_mem_pool *p, struct bh_error *err)
{
    uint64_t value = 0, mem = 0, needed = 0;
    if (bh_host_mem_pool(p->path, p->pool, p->name, p->unit_bytes, &value, &mem, &needed, err) < 0)
        return -1;
    uint64_t raised = p->raised != 0 ? p->raised : needed;
    struct bh_error why = {0};
    if (bh_host_sysctl_ensure(p->path, p->name, value, needed, raised, p->keep, p->harm, &why) == 0)
        return 0;
    return bh_error_set(err, why.code,
                        "%s: %s is %" PRIu64 ", below the %" PRIu64
                        " %s this host's memory (%" PRIu64 " MiB at %" PRIu64
                        " bytes each) can hold, so %s; refused: %s. Raise it "
                        "(`sysctl %s=%" PRIu64 "`) or run as root in the host's user namespace",
                        p->pool, p->name, value, needed, p->units, mem >> 20, p->unit_bytes,
                        p->effect, why.msg, p->name, raised);
}

void bh_host_sysctl_log(const char *fmt, ...)
{
    cleanup_close int fd = open("/dev/kmsg", O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char msg[512];
    int n = snprintf(msg, sizeof(msg), "<5>bulkhead[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    size_t len = (size_t)n + (size_t)m;
    if (len > sizeof(msg) - 2)
        len = sizeof(msg) - 2;
    msg[len++] = '\n';
    if (write(fd, msg, len) < 0)
        return;
}
