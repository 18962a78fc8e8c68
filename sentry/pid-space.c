/* kernel.pid_max against kernel.threads-max: see pid-space.h. */
#include "pid-space.h"

#include <errno.h>
#include <inttypes.h>

#include "host-sysctl.h"

#define POOL "the host's pid space"

uint64_t bh_pid_space_needed(uint64_t threads_max)
{
    uint64_t n = threads_max + BH_PID_RESERVED;
    return n < BH_PID_MAX_RAISED ? n : BH_PID_MAX_RAISED;
}

static const char *pid_max_path(void)
{
    return BH_HOST_SYSCTL_PATH("BULKHEAD_TEST_PID_MAX", "/proc/sys/kernel/pid_max");
}

static int read_both(const char *path, uint64_t *pid_max, uint64_t *needed, struct bh_error *err)
{
    uint64_t threads = 0;
    if (bh_host_sysctl_read(path, POOL, "kernel.pid_max", pid_max, err) < 0 ||
        bh_host_sysctl_read(
            BH_HOST_SYSCTL_PATH("BULKHEAD_TEST_THREADS_MAX", "/proc/sys/kernel/threads-max"), POOL,
            "kernel.threads-max", &threads, err) < 0)
        return -1;
    *needed = bh_pid_space_needed(threads);
    return 0;
}

int bh_pid_space_state(uint64_t *pid_max, uint64_t *needed, struct bh_error *err)
{
    return read_both(pid_max_path(), pid_max, needed, err);
}

int bh_pid_space_ensure(struct bh_error *err)
{
    const char *path = pid_max_path();
    uint64_t pid_max = 0, needed = 0;
    if (read_both(path, &pid_max, &needed, err) < 0)
        return -1;
    struct bh_error why = {0};
    if (bh_host_sysctl_ensure(
            path, "kernel.pid_max", pid_max, needed, BH_PID_MAX_RAISED, "BULKHEAD_KEEP_PID_MAX",
            "sandboxes could take every pid and leave the host unable to fork", &why) == 0)
        return 0;
    return bh_error_set(err, why.code,
                        POOL
                        ": kernel.pid_max is %" PRIu64 ", below the %" PRIu64
                        " pids this host's thread pool (kernel.threads-max, plus the %llu the "
                        "kernel reserves) can hold, so sandboxes at their default pids limits "
                        "could take every pid and leave the host and its other sandboxes unable "
                        "to fork (EAGAIN); refused: %s. Raise it (`sysctl kernel.pid_max=%llu`) "
                        "or run as root in the host's user namespace",
                        pid_max, needed, BH_PID_RESERVED, why.msg, BH_PID_MAX_RAISED);
}
