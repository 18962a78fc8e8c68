/* Attacks that pin what the host shares: the page cache of host files the
 * sandbox sees read-only (`bulkhead do`'s /usr, an OCI rootfs on the host's
 * disk) and the CPU.
 *   mlock_host_file        mlock 256 KiB of a mapped host file: pages the host
 *                          (or a finished sandbox) brought in stay charged to
 *                          them, so each process of the sandbox could make
 *                          RLIMIT_MEMLOCK of host memory unevictable outside
 *                          the sandbox's memory limit (measured: 512 processes
 *                          x 8 MiB locked 1.9 GB, 1.1 GB of it uncharged)
 *   map_locked_host_file   the same with mmap(MAP_LOCKED)
 *   mlock2_onfault         the same with mlock2(MLOCK_ONFAULT)
 *   mlockall_host_file     mlockall(MCL_CURRENT) with the file mapped
 * (each after raising its soft RLIMIT_MEMLOCK to the hard one, as any
 * process may)
 *   sched_fifo, sched_rr   a real-time class: a busy loop in one would take
 *                          95% of a CPU from the host (sched_rt_runtime_us)
 *   sched_deadline         the deadline class, through sched_setattr
 *   rlimit_rtprio_raise    raising RLIMIT_RTPRIO, which lets an unprivileged
 *                          process into SCHED_FIFO where no RT cgroup stops it
 *   nice_below_zero        a higher priority than the host's default
 * A small anonymous mlock (16 KiB) must still work: if it fails, the file
 * attempts prove nothing (inconclusive). */
#include <dirent.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attack.h"

#define LOCK (256 << 10) /* 4x the default limit; smaller than this static program */

/* A readable regular file of at least LOCK bytes that the sandbox shares with
 * the host: under /usr (bulkhead do), else this program (an OCI rootfs). */
static int host_file(const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        return -1;
    int fd = -1;
    struct dirent *e;
    while (fd < 0 && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[4096];
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(p, &st) < 0)
            continue;
        if (S_ISREG(st.st_mode) && st.st_size >= LOCK)
            fd = open(p, O_RDONLY | O_CLOEXEC);
        else if (S_ISDIR(st.st_mode) && depth < 4)
            fd = host_file(p, depth + 1);
    }
    closedir(d);
    return fd;
}

static void judge_lock(const char *name, int ret, int err)
{
    if (ret == 0)
        attack_line(name, "ESCAPED", "locked %d KiB of a host file's page cache", LOCK >> 10);
    else
        attack_line(name, "refused", "%s", attack_errname(err));
}

static void pin_page_cache(void)
{
    void *small = mmap(NULL, 16 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (small == MAP_FAILED || mlock(small, 16 << 10) < 0) {
        attack_line("mlock_small", "inconclusive", "16 KiB of own memory: %s",
                    attack_errname(errno));
        return;
    }
    munlock(small, 16 << 10);
    int fd = host_file("/usr", 0);
    if (fd < 0) {
        struct stat st;
        fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        if (fd >= 0 && (fstat(fd, &st) < 0 || st.st_size < LOCK)) {
            close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        attack_line("mlock_host_file", "inconclusive", "no host file of %d KiB", LOCK >> 10);
        return;
    }
    void *m = mmap(NULL, LOCK, PROT_READ, MAP_SHARED, fd, 0);
    if (m == MAP_FAILED) {
        attack_line("mlock_host_file", "inconclusive", "mmap: %s", attack_errname(errno));
        return;
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_MEMLOCK, &rl);
    }
    int r = mlock(m, LOCK);
    judge_lock("mlock_host_file", r, errno);
    munlock(m, LOCK);
    r = (int)syscall(SYS_mlock2, m, LOCK, 1 /* MLOCK_ONFAULT */);
    judge_lock("mlock2_onfault", r, errno);
    munlock(m, LOCK);
    r = mlockall(MCL_CURRENT);
    judge_lock("mlockall_host_file", r, errno);
    munlockall();
    munmap(m, LOCK);
    void *l = mmap(NULL, LOCK, PROT_READ, MAP_SHARED | MAP_LOCKED, fd, 0);
    judge_lock("map_locked_host_file", l == MAP_FAILED ? -1 : 0, errno);
    if (l != MAP_FAILED)
        munmap(l, LOCK);
    close(fd);
}

/* errno read after the call (a function argument's order is unspecified). */
static void judge(const char *name, long ret)
{
    int err = errno;
    attack_result(name, ret, err);
}

static void pin_cpu(void)
{
    struct sched_param sp = {.sched_priority = 1};
    judge("sched_fifo", sched_setscheduler(0, SCHED_FIFO, &sp));
    judge("sched_rr", sched_setscheduler(0, SCHED_RR, &sp));
    struct sched_attr {
        uint32_t size, policy;
        uint64_t flags;
        int32_t nice;
        uint32_t priority;
        uint64_t runtime, deadline, period;
    } attr = {.size = sizeof(attr),
              .policy = SCHED_DEADLINE,
              .runtime = 10 * 1000 * 1000,
              .deadline = 11 * 1000 * 1000,
              .period = 11 * 1000 * 1000};
    judge("sched_deadline", syscall(SYS_sched_setattr, 0, &attr, 0));
    struct rlimit rl = {1, 1};
    judge("rlimit_rtprio_raise", setrlimit(RLIMIT_RTPRIO, &rl));
    judge("nice_below_zero", setpriority(PRIO_PROCESS, 0, -1));
}

int main(void)
{
    attack_require_sandbox();
    pin_page_cache();
    pin_cpu();
    attack_done();
    return 0;
}
