/* aio-cap.c: owns the container tier's per-sandbox cap on Linux AIO.
 *
 * fs.aio-max-nr (65536 events) is one pool for the whole host, and io_setup
 * draws on it with no per-user, per-namespace or per-cgroup charge: one
 * container asking io_setup(1000) 66 times left every other process on the
 * host with EAGAIN (measured). Docker's default profile allows io_setup, and
 * databases use it, so the container tier keeps it, counted here: the tier's
 * policy notifies io_setup, and the sentry answers CONTINUE while the
 * sandbox's reservations stay within the cap, EAGAIN past it. CONTINUE is
 * safe for this call: the decision rests on a number, and the one pointer
 * (where the context id goes) is only written by the kernel.
 *
 * What the kernel charges is the nr_events asked (measured: 1 per context of
 * 1 event, 1000 per context of 1000), and it gives it back when the context
 * is destroyed: by io_destroy, or when the last user of the address space
 * that made it goes (exit, or exec: exit_aio). The sentry cannot see the
 * first (a failed io_destroy and a successful one look the same, and a guest
 * can unmap a context's ring so that /proc/PID/maps no longer shows it), so
 * a reservation is released only by the second: each one holds an fd of the
 * caller's /proc/TID/mem, which pins the mm_struct but not the address space,
 * and a read of it returns 0 bytes once the last user is gone (EIO or data
 * while one lives, whatever the guest maps). Threads and processes that share
 * the address space (CLONE_VM, vfork) keep it alive, and so the reservation.
 * io_destroy therefore gives nothing back until the process exits or execs:
 * a process that makes and destroys contexts over and over meets the cap
 * sooner than the kernel's own count would say (fail closed). */
#include "aio-cap-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernel-compat.h"

#if defined(__x86_64__)
#define AIO_NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define AIO_NATIVE_ARCH AUDIT_ARCH_AARCH64
#else
#error "aio-cap.c: unsupported architecture"
#endif

/* A procfs of our own pid namespace: its "self" names our pid there. */
static bool proc_is_ours(int proc_fd)
{
    struct statfs sf;
    if (proc_fd < 0 || fstatfs(proc_fd, &sf) < 0 || sf.f_type != PROC_SUPER_MAGIC)
        return false;
    char self[32], want[32];
    ssize_t n = readlinkat(proc_fd, "self", self, sizeof(self) - 1);
    if (n <= 0)
        return false;
    self[n] = '\0';
    snprintf(want, sizeof(want), "%d", getpid());
    return strcmp(self, want) == 0;
}

void bh_aio_cap_init(struct bh_aio_cap *cap, int proc_fd, unsigned max_events,
                     unsigned max_contexts)
{
    memset(cap, 0, sizeof(*cap));
    cap->proc_fd = proc_is_ours(proc_fd) ? proc_fd : -1;
    if (cap->proc_fd < 0 && proc_fd >= 0)
        close(proc_fd);
    cap->max_events = max_events;
    cap->max_contexts = max_contexts < BH_AIO_CAP_CONTEXTS ? max_contexts : BH_AIO_CAP_CONTEXTS;
    bh_socket_cap_init(&cap->sockets, cap->proc_fd, BH_NETLINK_CAP_SOCKETS);
}

void bh_aio_cap_free(struct bh_aio_cap *cap)
{
    for (size_t i = 0; i < cap->n; i++)
        close(cap->held[i].mem_fd);
    cap->n = 0;
    cap->events = 0;
    bh_socket_cap_free(&cap->sockets);
    if (cap->proc_fd >= 0)
        close(cap->proc_fd);
    cap->proc_fd = -1;
}

/* 0 bytes: the mm has no user left. Any error but that keeps it (fail
 * closed): EIO is what a live address space answers at address 0. */
static bool mm_gone(int mem_fd)
{
    char b;
    return pread(mem_fd, &b, 1, 0) == 0;
}

void bh_aio_cap_release_dead(struct bh_aio_cap *cap)
{
    for (size_t i = 0; i < cap->n;) {
        if (mm_gone(cap->held[i].mem_fd)) {
            close(cap->held[i].mem_fd);
            cap->events -= cap->held[i].events;
            cap->held[i] = cap->held[--cap->n];
        } else {
            i++;
        }
    }
}

int bh_aio_cap_hold(struct bh_aio_cap *cap, int mem_fd, unsigned nr_events)
{
    /* The kernel refuses 0 events (EINVAL); it still costs a slot here. */
    unsigned charge = nr_events ? nr_events : 1;
    bh_aio_cap_release_dead(cap);
    if (cap->n >= cap->max_contexts || charge > cap->max_events ||
        cap->events > cap->max_events - charge) {
        close(mem_fd);
        return -EAGAIN;
    }
    cap->held[cap->n].mem_fd = mem_fd;
    cap->held[cap->n].events = charge;
    cap->n++;
    cap->events += charge;
    return 0;
}

/* The caller's /proc/TID/mem, through our own procfs only. The file is mode
 * 0600 of the guest's euid and the sentry holds no DAC override (nor should
 * it), so it opens it with the file's owner as its fs ids; ptrace access is
 * then the sentry's CAP_SYS_PTRACE. An owner that changes meanwhile makes the
 * open fail (ENOSYS for the guest: fail closed). */
static int open_mem(const struct bh_aio_cap *cap, pid_t tid)
{
    char path[32];
    snprintf(path, sizeof(path), "%d/mem", tid);
    struct stat st;
    if (fstatat(cap->proc_fd, path, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS};
    int old_gid = setfsgid(st.st_gid);
    int old_uid = setfsuid(st.st_uid);
    int fd = (int)syscall(SYS_openat2, cap->proc_fd, path, &how, sizeof(how));
    int e = errno;
    setfsuid((uid_t)old_uid);
    setfsgid((gid_t)old_gid);
    errno = e;
    return fd;
}

static int answer(const struct seccomp_notif *req, struct bh_aio_cap *cap, int listener)
{
    if (req->data.nr != __NR_io_setup || req->data.arch != AIO_NATIVE_ARCH)
        return -ENOSYS;
    /* Nothing to count with: refused as a kernel without AIO would, so
     * that programs take their fallback. */
    if (cap->proc_fd < 0)
        return -ENOSYS;
    int mem_fd = open_mem(cap, (pid_t)req->pid);
    if (mem_fd < 0)
        return -ENOSYS;
    /* Still waiting in this call: the pid was not reused, and the mm is the
     * one the context will be made in (a thread's mm changes only by its
     * own exec). */
    uint64_t id = req->id;
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) < 0) {
        close(mem_fd);
        return -ENOSYS;
    }
    return bh_aio_cap_hold(cap, mem_fd, (unsigned)req->data.args[0]);
}

int bh_aio_cap_serve(struct bh_aio_cap *cap, int listener)
{
    struct seccomp_notif req;
    memset(&req, 0, sizeof(req));
    if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0)
        /* ENOENT: the caller died before we took it. */
        return errno == ENOENT || errno == EINTR ? 0 : -1;
    struct seccomp_notif_resp resp = {.id = req.id};
    if (bh_socket_cap_wants(&req)) {
        if (bh_socket_cap_answer(&cap->sockets, &req, listener, &resp) == 0)
            ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
        return 0;
    }
    int r = answer(&req, cap, listener);
    if (r == 0)
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    else
        resp.error = r;
    /* ENOENT: the caller was killed meanwhile; its reservation goes with its
     * mm. */
    ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    return 0;
}
