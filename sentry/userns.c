/* Owns the user namespace's identity: reserving a host id range per sandbox
 * and writing the id maps (the parent half; the child half, switching to
 * inside root, is a few raw syscalls in sandbox.c's child).
 *
 * Slots: inside 0..65536 maps to host BH_IDS_BASE + slot * 65537. A slot is
 * taken by flock'ing BH_IDS_DIR/<slot>; the front end passes the locked fd to
 * the sentry, so the slot stays taken exactly as long as some process of the
 * sandbox lives. A releaser unlinks the file while it holds the lock, so an
 * acquirer that locked a file already unlinked retries. Slots are taken
 * lowest first, so a file left by a sandbox that died unreleased is reused. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"
#include "ids-internal.h"
#include "kernel-compat.h"

static int mkdir_p(const char *path)
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0700) < 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

/* Scans and releases of slots take a lock on the directory: shared for a
 * scan, exclusive for a release. Without it a scan could lock a slot's file
 * in the instant between a releaser's close of its lock and its check that
 * the lock is free: the releaser then left the file, and the next owner
 * took over the file of the one before, so a sandbox that ended cleanly
 * still left its lock file behind once that next owner died unreleased.
 * Bounded (a holder stopped mid-scan): past the bound each side goes on
 * without it, as before; the slot's own flock alone decides who owns a
 * range, so the worst a missed directory lock costs is a leftover file. */
#define IDS_DIR_LOCK_MS 2000

static int lock_ids_dir(int how)
{
    int fd = open(BH_IDS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct timespec t0, now;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        if (flock(fd, how | LOCK_NB) == 0)
            return fd;
        if (errno != EWOULDBLOCK && errno != EINTR)
            break;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if ((now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000 >
            IDS_DIR_LOCK_MS)
            break;
        nanosleep(&(struct timespec){0, 500000}, NULL);
    }
    close(fd);
    return -1;
}

int bh_id_slot_acquire(struct bh_id_slot *s, struct bh_error *err)
{
    s->lock_fd = -1;
    if (mkdir_p(BH_IDS_DIR) < 0)
        return bh_error_errno(err, errno, "create `%s` for id range locks", BH_IDS_DIR);
    cleanup_close int scan = lock_ids_dir(LOCK_SH);
    /* Lowest free slot first: the lock files that exist are bounded by the
     * most sandboxes ever alive at once, even when a dead sandbox's file was
     * never unlinked (a detached sentry or a killed front end). */
    for (unsigned i = 0; i < BH_IDS_SLOTS; i++) {
        unsigned slot = i;
        char path[64];
        snprintf(path, sizeof(path), BH_IDS_DIR "/%u", slot);
        cleanup_close int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
            return bh_error_errno(err, errno, "open id range lock `%s`", path);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
            if (errno == EWOULDBLOCK)
                continue;
            return bh_error_errno(err, errno, "lock `%s`", path);
        }
        struct stat a, b;
        if (fstat(fd, &a) < 0 || stat(path, &b) < 0 || a.st_ino != b.st_ino ||
            a.st_dev != b.st_dev) {
            i--; /* released under us: this slot is free, try it again */
            continue;
        }
        s->lock_fd = steal_fd(&fd);
        s->slot = slot;
        memcpy(s->path, path, sizeof(path));
        return 0;
    }
    return bh_error_set(err, EAGAIN,
                        "every one of the %u host id ranges is in use by a live sandbox: end "
                        "some sandboxes and retry",
                        BH_IDS_SLOTS);
}

void bh_id_slot_release(struct bh_id_slot *s)
{
    if (s->lock_fd < 0)
        return;
    /* The sentry shares this open file (and so the lock): unlink only when the
     * lock is ours alone, i.e. a fresh open of the path can take it. */
    cleanup_close int no_scan = lock_ids_dir(LOCK_EX);
    int probe = open(s->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (probe >= 0) {
        close(s->lock_fd);
        s->lock_fd = -1;
        if (flock(probe, LOCK_EX | LOCK_NB) == 0)
            unlink(s->path);
        close(probe);
        return;
    }
    close(s->lock_fd);
    s->lock_fd = -1;
}

static int check_maps(const char *kind, const struct bh_idmap *m, size_t n, struct bh_error *err)
{
    for (size_t i = 0; i < n; i++) {
        if (m[i].count == 0 || (uint64_t)m[i].inside + m[i].count > UINT32_MAX ||
            (uint64_t)m[i].outside + m[i].count > UINT32_MAX)
            return bh_error_set(err, EINVAL, "%s map %u %u %u overflows", kind, m[i].inside,
                                m[i].outside, m[i].count);
        if (m[i].outside == 0)
            return bh_error_set(err, EPERM,
                                "%s map %u %u %u would map host root into the sandbox: refused; "
                                "map an unprivileged host range",
                                kind, m[i].inside, m[i].outside, m[i].count);
    }
    return 0;
}

static int dup_maps(const struct bh_idmap *m, size_t n, struct bh_idmap **out, size_t *n_out)
{
    *out = calloc(n ? n : 1, sizeof(*m));
    if (*out == NULL)
        return -1;
    memcpy(*out, m, n * sizeof(*m));
    *n_out = n;
    return 0;
}

int bh_idmaps_resolve(const struct bh_sandbox_spec *spec, const struct bh_id_slot *slot,
                      struct bh_idmap **uid, size_t *n_uid, struct bh_idmap **gid, size_t *n_gid,
                      struct bh_error *err)
{
    *uid = *gid = NULL;
    if (spec->n_uid_maps > 0 || spec->n_gid_maps > 0) {
        if (spec->n_uid_maps == 0 || spec->n_gid_maps == 0)
            return bh_error_set(err, EINVAL, "give both uid and gid maps, or neither");
        if (check_maps("uid", spec->uid_maps, spec->n_uid_maps, err) < 0 ||
            check_maps("gid", spec->gid_maps, spec->n_gid_maps, err) < 0)
            return -1;
        if (dup_maps(spec->uid_maps, spec->n_uid_maps, uid, n_uid) < 0 ||
            dup_maps(spec->gid_maps, spec->n_gid_maps, gid, n_gid) < 0) {
            free(*uid);
            *uid = NULL;
            return bh_error_errno(err, ENOMEM, "id maps");
        }
        return 0;
    }
    if (slot == NULL || slot->lock_fd < 0)
        return bh_error_set(err, EINVAL, "no id range reserved for the sandbox");
    struct bh_idmap m = {0, BH_IDS_BASE + slot->slot * BH_IDS_SLOT_SIZE, BH_IDS_SLOT_SIZE};
    if (dup_maps(&m, 1, uid, n_uid) < 0 || dup_maps(&m, 1, gid, n_gid) < 0) {
        free(*uid);
        *uid = NULL;
        return bh_error_errno(err, ENOMEM, "id maps");
    }
    return 0;
}

static int write_map(pid_t pid, const char *file, const struct bh_idmap *m, size_t n,
                     struct bh_error *err)
{
    char buf[340 * 36];
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof(buf) - 40; i++)
        len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%u %u %u\n", m[i].inside,
                                m[i].outside, m[i].count);
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
    cleanup_close int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "open `%s`", path);
    /* The kernel takes the whole map in one write, or nothing. */
    if (write(fd, buf, len) != (ssize_t)len)
        return bh_error_errno(err, errno, "write `%s`", path);
    return 0;
}

int bh_idmaps_write(pid_t pid, const struct bh_idmap *uid, size_t n_uid, const struct bh_idmap *gid,
                    size_t n_gid, struct bh_error *err)
{
    if (write_map(pid, "uid_map", uid, n_uid, err) < 0 ||
        write_map(pid, "gid_map", gid, n_gid, err) < 0)
        return bh_error_prefix(err, "id maps of the sandbox");
    return 0;
}

uint32_t bh_idmaps_sentry_id(const struct bh_idmap *m, size_t n)
{
    uint32_t best = 0;
    for (size_t i = 0; i < n; i++) {
        if (m[i].inside <= BH_SENTRY_ID && BH_SENTRY_ID - m[i].inside < m[i].count)
            return BH_SENTRY_ID;
        uint32_t top = m[i].inside + m[i].count - 1;
        if (top > best)
            best = top;
    }
    return best;
}

/* ---- pods: joining the user namespace that owns joined namespaces ---------
 * A pod's containers join the ipc, uts (and perhaps pid) namespaces of its
 * first sandbox (the pause container), which that sandbox's user namespace
 * owns. Only a process with CAP_SYS_ADMIN over that user namespace may mount
 * mqueue for the ipc namespace or proc for the pid namespace, so a sandbox
 * that joins them must live in that same user namespace: it joins it instead
 * of making its own, shares the pod's id range, and holds the range's lock
 * (the owner sentry's open lock file, taken with pidfd_getfd) so the range
 * stays reserved until the last sandbox of the pod is gone. */
/* Where the sentry keeps its id slot's lock (sandbox.c's SENTRY_SLOT_FD). */
#define POD_OWNER_SLOT_FD 4

static int read_proc_map(pid_t pid, const char *file, struct bh_idmap **out, size_t *n,
                         struct bh_error *err)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", pid, file);
    cleanup_fclose FILE *f = fopen(path, "re");
    if (f == NULL)
        return bh_error_errno(err, errno, "read `%s`", path);
    struct bh_idmap m[340];
    size_t k = 0;
    unsigned a, b, c;
    while (k < BH_ARRAY_SIZE(m) && fscanf(f, "%u %u %u", &a, &b, &c) == 3)
        m[k++] = (struct bh_idmap){a, b, c};
    if (k == 0)
        return bh_error_set(err, EINVAL, "`%s` maps no id", path);
    if (dup_maps(m, k, out, n) < 0)
        return bh_error_errno(err, ENOMEM, "id maps");
    return 0;
}

/* PID of a /proc/PID/ns/NAME path (how CRI and docker name another
 * container's namespaces), or -1. */
static pid_t proc_ns_path_pid(const char *path)
{
    if (strncmp(path, "/proc/", 6) != 0)
        return -1;
    char *end = NULL;
    long pid = strtol(path + 6, &end, 10);
    if (end == path + 6 || pid <= 0 || pid > INT32_MAX || strncmp(end, "/ns/", 4) != 0)
        return -1;
    return (pid_t)pid;
}

static bool same_file(const struct stat *a, const struct stat *b)
{
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

void bh_pod_userns_free(struct bh_pod_userns *p)
{
    if (p->userns_fd >= 0)
        close(p->userns_fd);
    p->userns_fd = -1;
    if (p->slot.lock_fd >= 0)
        close(p->slot.lock_fd);
    p->slot.lock_fd = -1;
    free(p->uid);
    free(p->gid);
    p->uid = p->gid = NULL;
}

int bh_pod_userns_find(const struct bh_sandbox_spec *spec, struct bh_pod_userns *out,
                       struct bh_error *err)
{
    *out = (struct bh_pod_userns){.userns_fd = -1, .slot = {.lock_fd = -1}, .owner_pid = -1};
    struct stat host_user, owner = {0};
    if (stat("/proc/self/ns/user", &host_user) < 0)
        return bh_error_errno(err, errno, "stat `/proc/self/ns/user`");
    const char *owner_path = NULL;
    pid_t pid = -1;
    for (int i = 0; i < BH_NS_COUNT; i++) {
        const char *path = spec->ns_paths[i];
        if (path == NULL || i == BH_NS_USER || i == BH_NS_MOUNT)
            continue;
        cleanup_close int ns = open(path, O_RDONLY | O_CLOEXEC);
        if (ns < 0)
            return bh_error_errno(err, errno, "open namespace `%s`", path);
        cleanup_close int user = ioctl(ns, NS_GET_USERNS);
        struct stat st;
        if (user < 0 || fstat(user, &st) < 0)
            return bh_error_errno(err, errno, "the user namespace that owns `%s`", path);
        if (same_file(&st, &host_user))
            continue; /* host-owned (a CRI's pod netns): host root joins it */
        if (owner_path != NULL && !same_file(&st, &owner))
            return bh_error_set(err, EINVAL,
                                "namespaces `%s` and `%s` belong to two different sandboxes: "
                                "refused, a sandbox can join the namespaces of one pod only",
                                owner_path, path);
        if (owner_path == NULL) {
            uid_t creator = (uid_t)-1;
            if (ioctl(user, NS_GET_OWNER_UID, &creator) < 0)
                return bh_error_errno(err, errno, "the creator of the user namespace of `%s`",
                                      path);
            /* A sandbox's user namespace is made by its slot's base id (the
             * owner its ucounts are charged to); host root made older ones. */
            bool slot_owner =
                creator >= BH_IDS_BASE && (creator - BH_IDS_BASE) % BH_IDS_SLOT_SIZE == 0;
            if (creator != 0 && !slot_owner)
                return bh_error_set(err, EPERM,
                                    "namespace `%s` belongs to a user namespace that host uid "
                                    "%u made, not a runtime: refused, joining it would run the "
                                    "sandbox as that user's ids",
                                    path, (unsigned)creator);
            out->creator = creator;
            owner = st;
            owner_path = path;
            out->userns_fd = steal_fd(&user);
        }
        if (pid < 0)
            pid = proc_ns_path_pid(path);
    }
    if (owner_path == NULL) {
        if (spec->ns_paths[BH_NS_PID] != NULL)
            return bh_error_set(err, EINVAL,
                                "joining pid namespace `%s` is refused: only a pod's pid "
                                "namespace (one a bulkhead sandbox made) can be joined, so that "
                                "the sandbox can mount its /proc",
                                spec->ns_paths[BH_NS_PID]);
        return 0;
    }
    int rc = -1;
    cleanup_close int pidfd = -1;
    if (pid < 0) {
        bh_error_set(err, EINVAL,
                     "namespace `%s` belongs to another sandbox's user namespace: name it as "
                     "/proc/PID/ns/... of that sandbox's process, so its id range can be held",
                     owner_path);
        goto out;
    }
    /* The owner's sentry: the pid's user namespace must be the owner, checked
     * again after the pidfd pins it (the pid cannot be reused under us). */
    char upath[64];
    snprintf(upath, sizeof(upath), "/proc/%d/ns/user", pid);
    pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    struct stat ust;
    if (pidfd < 0 || stat(upath, &ust) < 0 || !same_file(&ust, &owner)) {
        bh_error_set(err, ESRCH,
                     "process %d, named by `%s`, is gone or is not in the namespace's owning "
                     "user namespace: refused",
                     pid, owner_path);
        goto out;
    }
    out->owner_pid = pid;
    if (read_proc_map(pid, "uid_map", &out->uid, &out->n_uid, err) < 0 ||
        read_proc_map(pid, "gid_map", &out->gid, &out->n_gid, err) < 0 ||
        check_maps("uid", out->uid, out->n_uid, err) < 0 ||
        check_maps("gid", out->gid, out->n_gid, err) < 0) {
        bh_error_prefix(err, "the pod's user namespace (of `%s`)", owner_path);
        goto out;
    }
    if (out->creator != 0 && bh_idmaps_owner(out->uid, out->n_uid) != out->creator) {
        bh_error_set(err, EPERM,
                     "the user namespace of `%s` was made by host uid %u, which is not its own "
                     "root: refused, it is no sandbox's namespace",
                     owner_path, (unsigned)out->creator);
        goto out;
    }
    /* A slot's range: hold the owner's lock, so the range outlives neither
     * the owner's sentry nor ours. */
    const struct bh_idmap *u = &out->uid[0];
    if (out->n_uid == 1 && u->count == BH_IDS_SLOT_SIZE && u->outside >= BH_IDS_BASE &&
        (u->outside - BH_IDS_BASE) % BH_IDS_SLOT_SIZE == 0) {
        unsigned slot = (u->outside - BH_IDS_BASE) / BH_IDS_SLOT_SIZE;
        snprintf(out->slot.path, sizeof(out->slot.path), BH_IDS_DIR "/%u", slot);
        out->slot.slot = slot;
        out->slot.lock_fd = (int)syscall(SYS_pidfd_getfd, pidfd, POD_OWNER_SLOT_FD, 0);
        struct stat a, b;
        if (out->slot.lock_fd < 0 || fstat(out->slot.lock_fd, &a) < 0 ||
            stat(out->slot.path, &b) < 0 || !same_file(&a, &b)) {
            bh_error_set(err, EPERM,
                         "could not hold the pod's id range (`%s`, held by process %d): "
                         "refused, the range could otherwise be reused while this sandbox "
                         "lives",
                         out->slot.path, pid);
            goto out;
        }
    }
    rc = 0;
out:
    if (rc < 0)
        bh_pod_userns_free(out);
    return rc;
}

uint32_t bh_idmaps_owner(const struct bh_idmap *m, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (m[i].inside == 0)
            return m[i].outside;
    return n > 0 ? m[0].outside : 0;
}

void bh_userns_rlimits(const struct bh_sandbox_spec *spec,
                       struct bh_userns_rlimit out[BH_USERNS_N_RLIMITS])
{
    static const struct bh_userns_rlimit defaults[BH_USERNS_N_RLIMITS - 1] = {
        {RLIMIT_SIGPENDING, BH_USERNS_SIGPENDING, BH_USERNS_SIGPENDING},
        {RLIMIT_MSGQUEUE, BH_USERNS_MSGQUEUE, BH_USERNS_MSGQUEUE},
        {RLIMIT_MEMLOCK, BH_USERNS_MEMLOCK, BH_USERNS_MEMLOCK},
    };
    memcpy(out, defaults, sizeof(defaults));
    /* RLIMIT_NPROC starts as ours, so a spec without limits.tasks changes
     * nothing (raising a hard limit needs CAP_SYS_RESOURCE, which this host's
     * root may lack). With limits.tasks the soft limit is the cap: the
     * namespace copies it as the ceiling of all its tasks at the host level,
     * which no guest can raise later (it holds no capability in the initial
     * namespace), while its own per-uid limit may go up to the hard one. */
    struct bh_userns_rlimit *nproc = &out[BH_USERNS_N_RLIMITS - 1];
    struct rlimit cur = {RLIM_INFINITY, RLIM_INFINITY};
    getrlimit(RLIMIT_NPROC, &cur);
    *nproc = (struct bh_userns_rlimit){RLIMIT_NPROC, cur.rlim_cur, cur.rlim_max};
    bool capped = spec->limits.tasks > 0;
    if (capped)
        nproc->soft = (uint64_t)spec->limits.tasks < cur.rlim_max ? (uint64_t)spec->limits.tasks
                                                                  : cur.rlim_max;
    /* The caller's explicit rlimits are set by the sentry inside the user
     * namespace, which cannot raise a hard limit: lift the ceiling to them. */
    for (size_t i = 0; i < spec->process.n_rlimits; i++)
        for (int j = 0; j < BH_USERNS_N_RLIMITS; j++)
            if (spec->process.rlimits[i].resource == out[j].resource) {
                if (spec->process.rlimits[i].hard > out[j].hard)
                    out[j].hard = spec->process.rlimits[i].hard;
                if (spec->process.rlimits[i].soft > out[j].soft &&
                    !(capped && out[j].resource == RLIMIT_NPROC))
                    out[j].soft = spec->process.rlimits[i].soft;
            }
}
