/* Owns the sandbox's filesystem: the tree a sandbox sees (the embedded
 * default or a rootfs, fresh /proc with masked and read-only paths, a
 * minimal /dev, the spec's mounts), built inside the sandbox's own mount
 * namespace and entered with pivot_root.
 *
 * The caller is the sentry: pid 1 of fresh user, mount and pid namespaces
 * (net, ipc and cgroup ones too for /sys, mqueue and cgroup mounts), with a
 * mapped uid and gid (0 inside) so the files it makes have an owner.
 *
 * The steps, in order: open every host path needed; make the tree private;
 * attach the root (tmpfs, rootfs bind, prepared tree or overlay); build the
 * embedded default; base /proc, /dev, /sys (unless the spec mounts its own);
 * the spec's mounts; device nodes, /dev/pts, /dev/shm and links in whatever
 * /dev now is; masked and read-only paths; the working directory; read-only
 * flips; pivot_root; detach the old root; chdir. With spec->no_pivot (OCI
 * --no-pivot, container tier) the new root is moved over / and chrooted
 * into instead, the host's proc and sysfs mounts left below it hidden.
 *
 * How it is built, and why:
 * - The whole inherited tree is made MS_PRIVATE first, so nothing done here
 *   propagates anywhere (a mount namespace made with a user namespace turns
 *   shared mounts into slaves anyway; this closes the other direction too).
 *   spec->rootfs_propagation, if shared or slave, is applied to the new root
 *   after pivot_root, where it can only concern the sandbox's own mounts.
 * - Every host path we need (the rootfs, bind sources, host devices) is
 *   opened as an O_PATH fd before the staging root is attached, and binds are
 *   made from those fds with open_tree(OPEN_TREE_CLONE) + mount_setattr +
 *   move_mount: the flags (ro, nosuid, nodev, noexec) are set on the detached
 *   copy before it is visible, recursively for rbinds, and never need the
 *   bind-then-remount dance that must repeat the locked flags. Trees the
 *   host side prepared (bh_mount.tree_fd, bh_sandbox_spec.rootfs_tree_fd:
 *   sources the sandbox's ids cannot reach, idmapped rootfs) are only made
 *   private (a clone of a shared host mount is the host's peer) and moved.
 * - The staging root is attached on the host's /tmp inside this namespace
 *   only (any existing directory would do; sources are already open, so the
 *   shadowing is harmless) and later becomes / through pivot_root(".", "."),
 *   which needs no old-root directory that would have to be removed again.
 * - Every mount point is resolved with openat2(RESOLVE_IN_ROOT |
 *   RESOLVE_NO_MAGICLINKS) against the root fd, missing components are made
 *   one at a time with mkdirat/openat on the resolved parent, dangling
 *   symlinks are followed by hand, clamped to the root, and the mount lands
 *   on the opened fd (move_mount with an fd target, or mount(2) onto
 *   /proc/self/fd/N). A rootfs whose /etc points at a host directory gets the
 *   mount inside the rootfs, never on the host. OCI destinations are taken
 *   relative to the root whether or not they start with a slash.
 *
 * Decisions worth knowing:
 * - /sys: a fresh sysfs is mounted read-only when the kernel allows it (it
 *   does when the sandbox's user namespace owns its network namespace: its
 *   own, or a pod's). A joined host-owned netns gets the read-only sysfs the
 *   front end made inside it (spec->sysfs_tree_fd). Otherwise /sys is an
 *   empty read-only tmpfs: never the host's /sys, which would show the
 *   host's interfaces (runc's rootless fallback binds it; we do not).
 * - cgroup mounts from the spec are read-only views of the sandbox's own
 *   cgroups: one mount on v2 hosts; on v1 and hybrid hosts a tmpfs with one
 *   mount per v1 hierarchy (plus "unified"), as docker lays it out, so
 *   limits such as pids.max read back inside. With a cgroup namespace of its
 *   own each is a cgroupfs (rooted at the sandbox's cgroup); without one
 *   (spec->inherit_cgroup_ns) a bind of the sandbox's own cgroup directory,
 *   as runc does. What cannot be shown stays empty: less visibility, never
 *   more.
 * - The embedded default's root tmpfs (which holds /etc) and the base /dev
 *   tmpfs are read-only once populated: only /tmp, the working directory and
 *   /dev/shm are writable. A spec's own /dev (OCI) stays as the spec says.
 * - A rootfs overlay keeps its upper layer in a tmpfs of spec->limits.
 *   tmpfs_bytes; the rootfs on disk is never written.
 * - The embedded default's host directories are read-only overlays of the
 *   sandbox's own (overlay_fd), its host /etc files copies: no inode, and so
 *   no inotify mark and no lock, is shared with the host or another sandbox
 *   (sentry/README.md, "Shared inodes"). Device nodes are binds from a
 *   tmpfs of the sandbox's own that the front end made (bh_mounts_dev_tree:
 *   a user namespace cannot make device nodes).
 *
 * Cost: about 1 ms for the embedded default on this 2-core VM (median; see
 * the embedded_default_is_fast test). Under load the detach of the old root
 * sometimes waits several ms for an RCU grace period in the kernel.
 */
#include "mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/types.h>
#include <unistd.h>

#include "cleanup.h"
#include "kernel-compat.h"
#include "mountinfo.h"

#define MOUNTS_DEFAULT_TMPFS_BYTES (64LL << 20)
#define MOUNTS_DEFAULT_WORKDIR "/work"
#define MOUNTS_MAX_SYMLINKS 40
/* ptys one sandbox may hold at once (devpts max=): the non-host instances
 * share kernel.pty.max - kernel.pty.reserve (3072 by default). */
#define BH_PTY_MAX "64"
/* Where the staging root is attached before pivot_root; only this mount
 * namespace ever sees it. */
#define MOUNTS_STAGING "/tmp"

static const char *const default_masked_paths[] = {
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
};

static const char *const default_readonly_paths[] = {
    "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger",
};

/* Host directories of the embedded default; /usr is required. */
static const char *const system_dirs[] = {"usr", "bin", "lib", "lib32", "lib64", "libx32", "sbin"};

const struct bh_dev_node bh_dev_nodes[BH_N_DEV_NODES] = {
    {"null", 1, 3, true, true},   {"zero", 1, 5, true, true},    {"full", 1, 7, true, true},
    {"random", 1, 8, true, true}, {"urandom", 1, 9, true, true}, {"tty", 5, 0, true, false},
    {"ptmx", 5, 2, false, false},
};

const struct bh_dev_node *bh_dev_node_by_rdev(dev_t rdev)
{
    for (size_t i = 0; i < BH_N_DEV_NODES; i++)
        if (major(rdev) == bh_dev_nodes[i].major && minor(rdev) == bh_dev_nodes[i].minor)
            return &bh_dev_nodes[i];
    return NULL;
}

/* A host node bound or copied into a sandbox must be the device the table
 * names: a host whose /dev/null was replaced by a disk would otherwise give
 * every sandbox that disk. */
static int check_dev_node(const struct bh_dev_node *n, const struct stat *st, const char *where,
                          struct bh_error *err)
{
    if (!S_ISCHR(st->st_mode) || major(st->st_rdev) != n->major || minor(st->st_rdev) != n->minor)
        return bh_error_set(err, ENODEV,
                            "%s/dev/%s is not the character device %u:%u every sandbox's %s is "
                            "(found %s %u:%u): refusing to give it to the sandbox",
                            where, n->name, n->major, n->minor, n->name,
                            S_ISCHR(st->st_mode) ? "char" : "non-char", major(st->st_rdev),
                            minor(st->st_rdev));
    return 0;
}

/* Host files and directories of the embedded default's /etc, bound read-only
 * when the host has them. /etc/ssl/private is deliberately absent. */
/* Read-only, from the host; a missing one is skipped. services and
 * protocols serve getservbyname and friends; python3* hold the interpreter's
 * sitecustomize, which /usr links to. */
static const char *const etc_binds[] = {
    "ld.so.cache",          "alternatives", "ssl/certs", "ssl/openssl.cnf",
    "ca-certificates.conf", "services",     "protocols", "python3",
    "python3.11",           "mime.types",   "localtime", /* only when not a symlink (see write_etc)
                                                          */
    "matplotlibrc",         "fonts", /* matplotlib will not import without the first; fontconfig
                                        wants the second */
};

enum mp_kind {
    MP_EXISTING, /* must exist; nothing is created */
    MP_DIR,
    MP_FILE,
};

struct setup {
    const struct bh_sandbox_spec *spec;
    bool embedded;
    const char *workdir;
    long long tmpfs_bytes;
    int root_fd; /* the new root, attached at stage */
    /* Where the root is attached: MOUNTS_STAGING, or with a pause the
     * rootfs's own host path, where hooks look for it (mounts.h). */
    const char *stage;
    const struct bh_mounts_pause *pause; /* or NULL */
    int rootfs_fd;                       /* O_PATH of spec->rootfs or the prepared tree, or -1 */
    bool rootfs_fd_borrowed;
    int devnull_fd;              /* O_PATH of the host's /dev/null, for masking files */
    int *source_fds;             /* per spec mount: O_PATH of a bind source, else -1 */
    int dev_fds[BH_N_DEV_NODES]; /* -1 for the nodes not bound (ptmx) */
    int etc_fds[BH_ARRAY_SIZE(etc_binds)];
    int system_fds[BH_ARRAY_SIZE(system_dirs)];
    char system_links[BH_ARRAY_SIZE(system_dirs)][PATH_MAX];
    int empty_fd;         /* a detached, empty, read-only tmpfs: the overlays' bottom layer */
    int dev_tree;         /* the front end's tmpfs of device nodes (bh_mounts_dev_tree), or -1 */
    bool made_dev;        /* the base /dev tmpfs is ours (made read-only at the end) */
    bool spec_dev_ro;     /* the spec's /dev asks for ro: applied at the end, as runc does */
    bool sysfs_tree_used; /* spec->sysfs_tree_fd attached (it can be only once) */
    /* Kernel tier: mount ids of the procfs, sysfs and cgroupfs mounts made
     * here for the sandbox, the only ones its root may hold (check_root_mounts). */
    unsigned long *own_kfs;
    size_t n_own_kfs, cap_own_kfs;
    struct bh_mounts_made *made; /* or NULL */
};

static void fd_path(char buf[32], int fd)
{
    snprintf(buf, 32, "/proc/self/fd/%d", fd);
}

static const char *skip_slashes(const char *p)
{
    while (*p == '/')
        p++;
    return p;
}

/* Equal as paths inside the root: "/dev/", "dev" and "//dev" are one. */
static bool same_path(const char *a, const char *b)
{
    for (;;) {
        a = skip_slashes(a);
        b = skip_slashes(b);
        if (*a == '\0' || *b == '\0')
            return *a == *b;
        size_t la = strcspn(a, "/"), lb = strcspn(b, "/");
        if (la != lb || memcmp(a, b, la) != 0)
            return false;
        a += la;
        b += lb;
    }
}

static bool spec_mounts_at(const struct bh_sandbox_spec *spec, const char *dest)
{
    for (size_t i = 0; i < spec->n_mounts; i++)
        if (spec->mounts[i].destination != NULL && same_path(spec->mounts[i].destination, dest))
            return true;
    return false;
}

/* O_PATH fd of path inside the root; symlinks and ".." never leave it. */
static int open_in_root(int root_fd, const char *path, int flags)
{
    struct open_how how = {
        .flags = (uint64_t)(flags | O_PATH | O_CLOEXEC),
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    const char *rel = skip_slashes(path);
    if (*rel == '\0')
        rel = ".";
    int fd;
    /* EAGAIN: a concurrent rename made the kernel give up on safety; retry. */
    do
        fd = (int)syscall(SYS_openat2, root_fd, rel, &how, sizeof(how));
    while (fd < 0 && errno == EAGAIN);
    return fd;
}

static int check_kind(int fd, enum mp_kind kind, const char *dest, struct bh_error *err)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bh_error_errno(err, errno, "stat mount point `%s`", dest);
    if (kind == MP_DIR && !S_ISDIR(st.st_mode))
        return bh_error_set(err, ENOTDIR,
                            "mount point `%s` exists and is not a directory, but the source is one",
                            dest);
    if (kind == MP_FILE && S_ISDIR(st.st_mode))
        return bh_error_set(err, EISDIR,
                            "mount point `%s` is a directory, but the source is not one", dest);
    return 0;
}

/* Makes one missing component `name` in dirfd. */
static int create_component(int dirfd, const char *name, bool as_dir, struct bh_error *err,
                            const char *dest)
{
    int fd = -1;
    int rc = as_dir ? mkdirat(dirfd, name, 0755)
                    : (fd = openat(dirfd, name,
                                   O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644));
    if (fd >= 0)
        close(fd);
    if (rc >= 0 || errno == EEXIST)
        return 0;
    int e = errno;
    if (e == EACCES || e == EPERM || e == EROFS || e == EOVERFLOW)
        return bh_error_errno(err, e,
                              "create `%s` for mount point `%s` (the root is not writable by the "
                              "sandbox's root: create the mount point in the image, or use an "
                              "overlay or an idmapped rootfs)",
                              name, dest);
    return bh_error_errno(err, e, "create `%s` for mount point `%s`", name, dest);
}

/* Opens dest inside the root (O_PATH), creating what is missing as kind
 * says. A dangling symlink on the way is followed by hand, its target taken
 * relative to the root, so a planted link to a host path only ever creates
 * directories inside the root. */
static int resolve_target(int root_fd, const char *dest, enum mp_kind kind, struct bh_error *err)
{
    char cur[PATH_MAX];
    if (snprintf(cur, sizeof(cur), "%s", dest) >= (int)sizeof(cur))
        return bh_error_set(err, ENAMETOOLONG, "mount point `%.64s...` is too long", dest);

    int hops = 0;
    for (int round = 0; round < 2 * MOUNTS_MAX_SYMLINKS + 64; round++) {
        int fd = open_in_root(root_fd, cur, 0);
        if (fd >= 0) {
            if (check_kind(fd, kind, dest, err) < 0) {
                close(fd);
                return -1;
            }
            return fd;
        }
        if (errno != ENOENT || kind == MP_EXISTING)
            return bh_error_errno(err, errno, "resolve mount point `%s` inside the root", dest);

        /* Find the first missing component and make it (or follow it). */
        char prefix[PATH_MAX] = "";
        size_t plen = 0;
        cleanup_close int parent = -1;
        const char *p = cur;
        for (;;) {
            p = skip_slashes(p);
            if (*p == '\0')
                break;
            size_t clen = strcspn(p, "/");
            char name[NAME_MAX + 1];
            if (clen > NAME_MAX)
                return bh_error_set(err, ENAMETOOLONG,
                                    "a component of mount point `%s` is too long", dest);
            memcpy(name, p, clen);
            name[clen] = '\0';
            const char *rest = skip_slashes(p + clen);
            size_t before = plen;
            if (plen + clen + 2 > sizeof(prefix))
                return bh_error_set(err, ENAMETOOLONG, "mount point `%s` is too long", dest);
            prefix[plen++] = '/';
            memcpy(prefix + plen, name, clen + 1);
            plen += clen;
            p += clen;

            int child = open_in_root(root_fd, prefix, 0);
            if (child >= 0) {
                bh_closep(&parent);
                parent = child;
                continue;
            }
            if (errno != ENOENT)
                return bh_error_errno(
                    err, errno, "resolve `%s` of mount point `%s` inside the root", prefix, dest);
            int dirfd = parent >= 0 ? parent : root_fd;
            struct stat st;
            if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                if (!S_ISLNK(st.st_mode))
                    return bh_error_set(
                        err, ESTALE, "mount point `%s` changed while it was being resolved", dest);
                if (++hops > MOUNTS_MAX_SYMLINKS)
                    return bh_error_set(err, ELOOP, "too many symlinks in mount point `%s`", dest);
                char target[PATH_MAX];
                ssize_t n = readlinkat(dirfd, name, target, sizeof(target) - 1);
                if (n < 0)
                    return bh_error_errno(err, errno, "read symlink `%s` of mount point `%s`",
                                          prefix, dest);
                target[n] = '\0';
                char next[PATH_MAX];
                int len;
                /* No trailing slash when nothing follows: a file target must
                 * not be taken for a directory. */
                const char *sep = *rest != '\0' ? "/" : "";
                if (target[0] == '/')
                    len = snprintf(next, sizeof(next), "%s%s%s", target, sep, rest);
                else
                    len = snprintf(next, sizeof(next), "%.*s/%s%s%s", (int)before, prefix, target,
                                   sep, rest);
                if (len >= (int)sizeof(next))
                    return bh_error_set(err, ENAMETOOLONG, "mount point `%s` is too long", dest);
                memcpy(cur, next, (size_t)len + 1);
                break;
            }
            if (errno != ENOENT)
                return bh_error_errno(err, errno, "stat `%s` of mount point `%s`", prefix, dest);
            if (create_component(dirfd, name, *rest != '\0' || kind == MP_DIR, err, dest) < 0)
                return -1;
            child = open_in_root(root_fd, prefix, 0);
            if (child < 0)
                return bh_error_errno(err, errno, "open `%s` of mount point `%s` after creating it",
                                      prefix, dest);
            bh_closep(&parent);
            parent = child;
        }
    }
    return bh_error_set(err, ELOOP, "mount point `%s` could not be resolved", dest);
}

static uint64_t attr_from_flags(unsigned long flags)
{
    uint64_t attr = 0;
    if (flags & MS_RDONLY)
        attr |= MOUNT_ATTR_RDONLY;
    if (flags & MS_NOSUID)
        attr |= MOUNT_ATTR_NOSUID;
    if (flags & MS_NODEV)
        attr |= MOUNT_ATTR_NODEV;
    if (flags & MS_NOEXEC)
        attr |= MOUNT_ATTR_NOEXEC;
    if (flags & MS_NODIRATIME)
        attr |= MOUNT_ATTR_NODIRATIME;
    return attr;
}

/* Places a detached mount tree on dest. */
static int attach_tree(struct setup *s, int tree, const char *what, const char *dest,
                       enum mp_kind kind, struct bh_error *err)
{
    cleanup_close int target = resolve_target(s->root_fd, dest, kind, err);
    if (target < 0)
        return bh_error_prefix(err, "mount `%s` on `%s`", what, dest);
    if (move_mount(tree, "", target, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return bh_error_errno(err, errno, "mount `%s` on `%s`: attach", what, dest);
    return 0;
}

/* Mount ids order /proc/self/mountinfo (Linux 6.8 on), and a tree the front
 * end prepared got its ids before any of the sandbox's own mounts: it would
 * be listed before mounts the config puts ahead of it. Once attached (the
 * kernel clones only from the caller's own namespace), a fresh recursive
 * clone takes its place, in the config's order; flags, idmap and
 * propagation come along. Cosmetic where it cannot be done. */
static int attach_tree_in_order(struct setup *s, int tree, const char *what, const char *dest,
                                enum mp_kind kind, struct bh_error *err)
{
    if (attach_tree(s, tree, what, dest, kind, err) < 0)
        return -1;
    struct bh_error ignored = {0};
    cleanup_close int top = resolve_target(s->root_fd, dest, kind, &ignored);
    if (top < 0)
        return 0;
    cleanup_close int clone =
        open_tree(top, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    char self[64];
    snprintf(self, sizeof(self), "/proc/self/fd/%d", top);
    if (clone < 0 || umount2(self, MNT_DETACH) < 0)
        return 0;
    return attach_tree(s, clone, what, dest, kind, err);
}

/* Binds what src_fd names onto dest, with attr set on the copy before it is
 * visible (recursively for an rbind). */
static int bind_fd(struct setup *s, int src_fd, const char *what, const char *dest, bool recursive,
                   uint64_t attr, unsigned long propagation, struct bh_error *err)
{
    struct stat st;
    if (fstat(src_fd, &st) < 0)
        return bh_error_errno(err, errno, "bind `%s` on `%s`: stat source", what, dest);
    unsigned rec = recursive ? AT_RECURSIVE : 0;
    cleanup_close int tree =
        open_tree(src_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | rec);
    if (tree < 0 && errno == EINVAL && !recursive)
        return bh_error_errno(err, errno,
                              "bind `%s` on `%s`: clone the source (it has mounts of the host "
                              "beneath it, which only a recursive bind (rbind) may take along)",
                              what, dest);
    if (tree < 0)
        return bh_error_errno(err, errno, "bind `%s` on `%s`: clone the source", what, dest);
    if (attr != 0 || propagation != 0) {
        struct mount_attr ma = {.attr_set = attr, .propagation = propagation};
        if (mount_setattr(tree, "", AT_EMPTY_PATH | rec, &ma, sizeof(ma)) < 0)
            return bh_error_errno(err, errno, "bind `%s` on `%s`: set flags", what, dest);
    }
    return attach_tree(s, tree, what, dest, S_ISDIR(st.st_mode) ? MP_DIR : MP_FILE, err);
}

/* Appends what the fs context said about its failure, if anything. */
static int fs_error(struct bh_error *err, int fsfd, int code, const char *what, const char *dest)
{
    char log[256] = "";
    ssize_t n = fsfd >= 0 ? read(fsfd, log, sizeof(log) - 1) : -1;
    if (n > 0) {
        log[n] = '\0';
        log[strcspn(log, "\n")] = '\0';
    }
    return bh_error_errno(err, code, "%s of `%s`%s%s%s", what, dest, n > 0 ? " (" : "",
                          n > 0 ? log : "", n > 0 ? ")" : "");
}

/* The overlays' bottom layer: overlayfs wants two layers when it has no
 * upper one, and an empty tmpfs adds nothing to the merged view. Detached,
 * so no path of the sandbox ever shows it. */
static int empty_layer(struct setup *s, struct bh_error *err)
{
    if (s->empty_fd >= 0)
        return s->empty_fd;
    cleanup_close int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return bh_error_errno(err, errno, "create the empty layer of the per-sandbox overlays");
    if (fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "2", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0555", 0) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return fs_error(err, fs, errno, "create the empty tmpfs", "the overlays' bottom layer");
    s->empty_fd =
        fsmount(fs, FSMOUNT_CLOEXEC,
                MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    if (s->empty_fd < 0)
        return bh_error_errno(err, errno, "mount the empty layer of the per-sandbox overlays");
    return s->empty_fd;
}

/* Shows the host directory src_fd on dest through a read-only overlayfs of
 * the sandbox's own (the host tree its only content). A bind would share
 * the host's inodes, and with them everything the kernel keeps on an inode:
 * inotify and fanotify marks (a guest watching /usr/bin was told every
 * program the host ran) and flock/POSIX locks (a channel between sandboxes).
 * The overlay is a new superblock with inodes of its own, so marks and locks
 * stay inside this sandbox, while reads and mappings go to the host file and
 * its page cache, shared as before. */
static int overlay_fd(struct setup *s, int src_fd, const char *dest, uint64_t attr,
                      struct bh_error *err)
{
    int empty = empty_layer(s, err);
    if (empty < 0)
        return -1;
    cleanup_close int fs = fsopen("overlay", FSOPEN_CLOEXEC);
    if (fs < 0)
        return bh_error_errno(err, errno,
                              "read-only overlay of `%s`: overlayfs is needed so that the sandbox "
                              "shares no inode (watches, locks) with the host",
                              dest);
    if (fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, src_fd) < 0)
        return fs_error(err, fs, errno,
                        "read-only overlay (layers by fd, Linux 6.13 or later): add the host tree",
                        dest);
    if (fsconfig(fs, FSCONFIG_SET_FD, "lowerdir+", NULL, empty) < 0)
        return fs_error(err, fs, errno, "read-only overlay: add the empty layer", dest);
    if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return fs_error(err, fs, errno, "read-only overlay: create", dest);
    cleanup_close int tree = fsmount(fs, FSMOUNT_CLOEXEC, attr | MOUNT_ATTR_RDONLY);
    if (tree < 0)
        return bh_error_errno(err, errno, "read-only overlay of `%s`: mount", dest);
    return attach_tree(s, tree, dest, dest, MP_DIR, err);
}

/* Copies a small host file (etc_binds) into the sandbox's own /etc: a file
 * cannot be an overlay's root, and a bind would share its inode. */
static int copy_file_at(int src_fd, int dirfd, const char *name, struct bh_error *err)
{
    cleanup_close int out =
        openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0)
        return bh_error_errno(err, errno, "create /etc/%s", name);
    off_t off = 0;
    for (;;) {
        char buf[16384];
        ssize_t n = pread(src_fd, buf, sizeof(buf), off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return bh_error_errno(err, errno, "copy the host's /etc/%s: read", name);
        if (n == 0)
            return 0;
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, (size_t)(n - done));
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return bh_error_errno(err, w < 0 ? errno : EIO, "copy the host's /etc/%s: write",
                                      name);
            done += w;
        }
        off += n;
    }
}

static bool is_kernel_fs(const char *fstype)
{
    return strcmp(fstype, "proc") == 0 || strcmp(fstype, "sysfs") == 0 ||
           strcmp(fstype, "cgroup") == 0 || strcmp(fstype, "cgroup2") == 0;
}

/* Appends x to a growing array (first capacity `first`, then doubled). */
static int push_id(unsigned long **v, size_t *n, size_t *cap, size_t first, unsigned long x,
                   struct bh_error *err)
{
    if (*n == *cap) {
        size_t want = *cap ? 2 * *cap : first;
        unsigned long *grown = realloc(*v, want * sizeof(*grown));
        if (grown == NULL)
            return bh_error_errno(err, ENOMEM, "mount snapshot");
        *v = grown;
        *cap = want;
    }
    (*v)[(*n)++] = x;
    return 0;
}

/* Kernel tier: the mount now on dest (a procfs, sysfs or cgroupfs made here)
 * is one of the sandbox's own. */
static int note_own_kfs(struct setup *s, const char *dest, struct bh_error *err)
{
    if (s->spec->tier < BH_TIER_KERNEL)
        return 0;
    cleanup_close int fd = open_in_root(s->root_fd, dest, 0);
    struct statx stx;
    if (fd < 0 || statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0)
        return bh_error_errno(err, errno, "find the mount id of `%s`", dest);
    if (!(stx.stx_mask & STATX_MNT_ID))
        return bh_error_set(err, ENOTSUP, "the kernel gives no mount id of `%s`", dest);
    return push_id(&s->own_kfs, &s->n_own_kfs, &s->cap_own_kfs, 8, stx.stx_mnt_id, err);
}

/* A tmpfs made here is one whose names only the sandbox's guests change:
 * the broker's parent-directory cache serves its directories alone. */
static void note_own_tmpfs(struct setup *s, const char *dest)
{
    struct bh_mounts_made *m = s->made;
    if (s->spec->tier < BH_TIER_KERNEL || m == NULL)
        return;
    cleanup_close int fd = open_in_root(s->root_fd, dest, 0);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return; /* not cached: slower, never wrong */
    for (size_t i = 0; i < m->n_own_tmpfs; i++)
        if (m->own_tmpfs[i] == st.st_dev)
            return;
    if (m->n_own_tmpfs < BH_MOUNTS_OWN_TMPFS_MAX)
        m->own_tmpfs[m->n_own_tmpfs++] = st.st_dev;
}

static int mount_fs(struct setup *s, const char *type, const char *source, const char *dest,
                    unsigned long flags, const char *data, struct bh_error *err)
{
    cleanup_close int target = resolve_target(s->root_fd, dest, MP_DIR, err);
    if (target < 0)
        return bh_error_prefix(err, "mount %s `%s` on `%s`", type, source, dest);
    char path[32];
    fd_path(path, target);
    if (mount(source, path, type, flags, data) < 0)
        return bh_error_errno(err, errno, "mount %s `%s` on `%s`%s%s%s", type, source, dest,
                              data ? " (" : "", data ? data : "", data ? ")" : "");
    if (strcmp(type, "tmpfs") == 0)
        note_own_tmpfs(s, dest);
    return is_kernel_fs(type) ? note_own_kfs(s, dest, err) : 0;
}

/* Changes flags of the mount now at dest (only that mount). */
static int setattr_at(struct setup *s, const char *dest, uint64_t attr, unsigned long propagation,
                      struct bh_error *err)
{
    cleanup_close int fd = open_in_root(s->root_fd, dest, 0);
    if (fd < 0)
        return bh_error_errno(err, errno, "reopen `%s` to change its flags", dest);
    struct mount_attr ma = {.attr_set = attr, .propagation = propagation};
    if (mount_setattr(fd, "", AT_EMPTY_PATH, &ma, sizeof(ma)) < 0)
        return bh_error_errno(err, errno, "change flags of the mount on `%s`", dest);
    return 0;
}

static int write_file_at(int dirfd, const char *name, const char *content, struct bh_error *err)
{
    cleanup_close int fd =
        openat(dirfd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return bh_error_errno(err, errno, "create /etc/%s", name);
    size_t len = strlen(content);
    while (len > 0) {
        ssize_t n = write(fd, content, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return bh_error_errno(err, n < 0 ? errno : EIO, "write /etc/%s", name);
        content += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- before anything is covered: every host path we will need ---------- */

static int open_host(const char *path, int flags)
{
    return open(path, O_PATH | O_CLOEXEC | flags);
}

/* A tree the front end prepared was cloned in the host's namespace: where
 * its source was shared (a systemd host's /), the clone is a peer of the
 * host's mount, and every mount made on it here would appear on the host.
 * Private all the way down before it is attached, whatever the front end did. */
static int private_tree(int tree, const char *what, struct bh_error *err)
{
    struct mount_attr ma = {.propagation = MS_PRIVATE};
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof(ma)) < 0)
        return bh_error_errno(err, errno,
                              "make the prepared tree `%s` private (it could propagate mounts "
                              "to the host)",
                              what);
    return 0;
}

static int open_sources(struct setup *s, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = s->spec;

    if (spec->has_rootfs_tree_fd) {
        s->rootfs_fd = spec->rootfs_tree_fd;
        s->rootfs_fd_borrowed = true;
        const char *name = spec->rootfs ? spec->rootfs : "(prepared tree)";
        struct stat st, host;
        if (fstat(s->rootfs_fd, &st) < 0 || !S_ISDIR(st.st_mode))
            return bh_error_set(err, ENOTDIR, "prepared rootfs `%s` is not a directory tree", name);
        if (stat("/", &host) == 0 && st.st_dev == host.st_dev && st.st_ino == host.st_ino)
            return bh_error_set(err, EINVAL,
                                "prepared rootfs `%s` is the host's root directory: the sandbox "
                                "would see the whole host",
                                name);
        if (private_tree(s->rootfs_fd, name, err) < 0)
            return -1;
    } else if (spec->rootfs != NULL) {
        if (spec->rootfs[0] != '/')
            return bh_error_set(err, EINVAL,
                                "rootfs `%s` is not an absolute path: give the full path of the "
                                "root directory",
                                spec->rootfs);
        s->rootfs_fd = open_host(spec->rootfs, O_DIRECTORY);
        if (s->rootfs_fd < 0 && errno == EACCES)
            return bh_error_errno(err, errno,
                                  "rootfs `%s` is out of reach of the sandbox's ids (a directory "
                                  "on the way is not searchable by them): make it reachable, or "
                                  "hand it over as a prepared tree (rootfs_tree_fd)",
                                  spec->rootfs);
        if (s->rootfs_fd < 0)
            return bh_error_errno(err, errno, "rootfs `%s` is not an existing directory",
                                  spec->rootfs);
        struct stat st, host;
        if (fstat(s->rootfs_fd, &st) == 0 && stat("/", &host) == 0 && st.st_dev == host.st_dev &&
            st.st_ino == host.st_ino)
            return bh_error_set(err, EINVAL,
                                "rootfs `%s` is the host's root directory: the sandbox would see "
                                "the whole host; give an image's root, or no rootfs for the "
                                "embedded default",
                                spec->rootfs);
    }

    if (s->dev_tree >= 0) {
        /* The sandbox's own nodes (bh_mounts_dev_tree), not the host's. */
        s->devnull_fd = openat(s->dev_tree, "null", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (s->devnull_fd < 0)
            return bh_error_errno(err, errno, "open null in the sandbox's device tree");
        for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
            if (!bh_dev_nodes[i].bound)
                continue;
            s->dev_fds[i] =
                openat(s->dev_tree, bh_dev_nodes[i].name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
            if (s->dev_fds[i] < 0)
                return bh_error_errno(err, errno, "open %s in the sandbox's device tree",
                                      bh_dev_nodes[i].name);
        }
    } else {
        s->devnull_fd = open_host("/dev/null", 0);
        if (s->devnull_fd < 0)
            return bh_error_errno(err, errno, "open the host's /dev/null");
        for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
            if (!bh_dev_nodes[i].bound)
                continue;
            char path[64];
            snprintf(path, sizeof(path), "/dev/%s", bh_dev_nodes[i].name);
            s->dev_fds[i] = open_host(path, 0);
            if (s->dev_fds[i] < 0)
                return bh_error_errno(err, errno, "open the host's %s", path);
        }
    }
    for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
        struct stat st;
        if (s->dev_fds[i] < 0)
            continue;
        if (fstat(s->dev_fds[i], &st) < 0)
            return bh_error_errno(err, errno, "stat /dev/%s", bh_dev_nodes[i].name);
        if (check_dev_node(&bh_dev_nodes[i], &st,
                           s->dev_tree >= 0 ? "the device tree's " : "the host's ", err) < 0)
            return -1;
    }

    if (s->embedded) {
        for (size_t i = 0; i < BH_ARRAY_SIZE(system_dirs); i++) {
            char path[64];
            snprintf(path, sizeof(path), "/%s", system_dirs[i]);
            ssize_t n = readlink(path, s->system_links[i], PATH_MAX - 1);
            if (n >= 0) {
                s->system_links[i][n] = '\0';
                continue;
            }
            s->system_fds[i] = open_host(path, O_DIRECTORY);
            if (s->system_fds[i] < 0 && (errno != ENOENT || i == 0))
                return bh_error_errno(err, errno, "open the host's %s", path);
        }
        for (size_t i = 0; i < BH_ARRAY_SIZE(etc_binds); i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof(path), "/etc/%s", etc_binds[i]);
            char link[8];
            if (strcmp(etc_binds[i], "localtime") == 0 && readlink(path, link, sizeof(link)) >= 0)
                continue; /* recreated as the same symlink */
            /* Readable, not O_PATH: files are copied, directories overlaid.
             * One the sandbox's ids cannot read is left out, as the guest
             * could not have read it either. */
            s->etc_fds[i] = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
            if (s->etc_fds[i] < 0 && errno != ENOENT && errno != EACCES)
                return bh_error_errno(err, errno, "open the host's %s", path);
        }
    }

    for (size_t i = 0; i < spec->n_mounts; i++) {
        const struct bh_mount *m = &spec->mounts[i];
        if (m->destination == NULL)
            return bh_error_set(err, EINVAL, "mount %zu has no destination", i);
        if (*skip_slashes(m->destination) == '\0')
            return bh_error_set(err, EINVAL,
                                "mount %zu (`%s`): a mount on the sandbox's root is not allowed; "
                                "use the rootfs instead",
                                i, m->source ? m->source : "");
        bool bind =
            (m->flags & MS_BIND) ||
            (m->type != NULL && (strcmp(m->type, "bind") == 0 || strcmp(m->type, "rbind") == 0));
        if (!bind || m->has_tree_fd)
            continue;
        if (m->source == NULL || m->source[0] != '/')
            return bh_error_set(err, EINVAL,
                                "bind mount on `%s`: source `%s` is not an absolute host path",
                                m->destination, m->source ? m->source : "(none)");
        s->source_fds[i] = open_host(m->source, 0);
        if (s->source_fds[i] < 0)
            return bh_error_errno(err, errno, "bind mount `%s` on `%s`: open the source", m->source,
                                  m->destination);
    }
    return 0;
}

/* ---- the root ---------------------------------------------------------- */

static int attach_root(struct setup *s, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = s->spec;
    char opts[128];

    if (s->embedded) {
        if (mount("tmpfs", MOUNTS_STAGING, "tmpfs", MS_NOSUID | MS_NODEV,
                  "size=1m,nr_inodes=4096,mode=0755") < 0)
            return bh_error_errno(err, errno, "mount the staging root tmpfs on %s", MOUNTS_STAGING);
    } else if (spec->rootfs_overlay) {
        /* The upper layer and overlay's work dir live in a tmpfs of their own,
         * so writes never reach the rootfs; the merged tree is the root. */
        snprintf(opts, sizeof(opts), "size=%lld,mode=0755", s->tmpfs_bytes);
        if (mount("tmpfs", MOUNTS_STAGING, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
            return bh_error_errno(err, errno, "mount the overlay's upper tmpfs on %s",
                                  MOUNTS_STAGING);
        if (mkdir(MOUNTS_STAGING "/upper", 0755) < 0 || mkdir(MOUNTS_STAGING "/work", 0755) < 0 ||
            mkdir(MOUNTS_STAGING "/merged", 0755) < 0)
            return bh_error_errno(err, errno, "create the overlay's directories");
        char lower[32], data[256];
        fd_path(lower, s->rootfs_fd);
        if (spec->has_rootfs_tree_fd) {
            /* Older kernels take no detached mount as a layer: attach it. */
            if (mkdir(MOUNTS_STAGING "/lower", 0755) < 0 ||
                move_mount(s->rootfs_fd, "", AT_FDCWD, MOUNTS_STAGING "/lower",
                           MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return bh_error_errno(err, errno, "attach the prepared rootfs as the lower layer");
            snprintf(lower, sizeof(lower), "%s", MOUNTS_STAGING "/lower");
        }
        snprintf(data, sizeof(data),
                 "lowerdir=%s,upperdir=" MOUNTS_STAGING "/upper,workdir=" MOUNTS_STAGING
                 "/work,userxattr",
                 lower);
        if (mount("overlay", MOUNTS_STAGING "/merged", "overlay", 0, data) < 0)
            return bh_error_errno(err, errno, "mount overlay of rootfs `%s` with a tmpfs upper",
                                  spec->rootfs);
        s->root_fd = open_host(MOUNTS_STAGING "/merged", O_DIRECTORY);
        if (s->root_fd < 0)
            return bh_error_errno(err, errno, "open the overlay root");
        return 0;
    } else if (spec->has_rootfs_tree_fd) {
        if (move_mount(s->rootfs_fd, "", AT_FDCWD, s->stage, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return bh_error_errno(err, errno, "attach the prepared rootfs `%s` on %s",
                                  spec->rootfs ? spec->rootfs : "", s->stage);
    } else {
        cleanup_close int tree = open_tree(
            s->rootfs_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (tree < 0)
            return bh_error_errno(err, errno, "bind rootfs `%s`", spec->rootfs);
        if (move_mount(tree, "", AT_FDCWD, s->stage, MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return bh_error_errno(err, errno, "attach rootfs `%s` on %s", spec->rootfs, s->stage);
    }
    s->root_fd = open_host(s->stage, O_DIRECTORY);
    if (s->root_fd < 0)
        return bh_error_errno(err, errno, "open the staging root");
    return 0;
}

static void guest_ids(const struct bh_sandbox_spec *spec, uid_t *uid, gid_t *gid)
{
    *uid = spec->process.uid;
    *gid = spec->process.gid;
}

static int write_etc(struct setup *s, int etc, struct bh_error *err)
{
    uid_t uid;
    gid_t gid;
    guest_ids(s->spec, &uid, &gid);
    const char *hostname = s->spec->hostname ? s->spec->hostname : "bulkhead";
    char buf[1024];

    int n = snprintf(buf, sizeof(buf),
                     "root:x:0:0:root:/root:/bin/sh\n"
                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    if (uid != 0 && uid != 65534)
        snprintf(buf + n, sizeof(buf) - (size_t)n, "sandbox:x:%u:%u:sandbox:%s:/bin/sh\n",
                 (unsigned)uid, (unsigned)gid, s->workdir);
    if (write_file_at(etc, "passwd", buf, err) < 0)
        return -1;
    n = snprintf(buf, sizeof(buf), "root:x:0:\nnogroup:x:65534:\n");
    if (gid != 0 && gid != 65534)
        snprintf(buf + n, sizeof(buf) - (size_t)n, "sandbox:x:%u:\n", (unsigned)gid);
    if (write_file_at(etc, "group", buf, err) < 0)
        return -1;
    snprintf(buf, sizeof(buf), "127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t%.200s\n",
             hostname);
    if (write_file_at(etc, "hosts", buf, err) < 0)
        return -1;
    snprintf(buf, sizeof(buf), "%.200s\n", hostname);
    if (write_file_at(etc, "hostname", buf, err) < 0)
        return -1;
    if (write_file_at(etc, "resolv.conf", "# no network in this sandbox\n", err) < 0)
        return -1;
    if (write_file_at(etc, "nsswitch.conf",
                      "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                      "networks: files\nprotocols: files\nservices: files\n",
                      err) < 0)
        return -1;

    char link[PATH_MAX];
    ssize_t len = readlink("/etc/localtime", link, sizeof(link) - 1);
    if (len > 0) {
        link[len] = '\0';
        if (symlinkat(link, etc, "localtime") < 0)
            return bh_error_errno(err, errno, "create /etc/localtime");
    }
    if (mkdirat(etc, "ssl", 0755) < 0)
        return bh_error_errno(err, errno, "create /etc/ssl");
    return 0;
}

static int build_embedded(struct setup *s, struct bh_error *err)
{
    int root = s->root_fd;
    uid_t uid;
    gid_t gid;
    guest_ids(s->spec, &uid, &gid);

    for (size_t i = 0; i < BH_ARRAY_SIZE(system_dirs); i++) {
        char dest[64];
        snprintf(dest, sizeof(dest), "/%s", system_dirs[i]);
        if (s->system_links[i][0] != '\0') {
            if (symlinkat(s->system_links[i], root, system_dirs[i]) < 0)
                return bh_error_errno(err, errno, "create symlink %s -> %s", dest,
                                      s->system_links[i]);
        } else if (s->system_fds[i] >= 0) {
            if (overlay_fd(s, s->system_fds[i], dest, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, err) <
                0)
                return -1;
        }
    }

    static const char *const dirs[] = {"etc", "root", "home", "run", "var",
                                       "tmp", "proc", "sys",  "dev"};
    for (size_t i = 0; i < BH_ARRAY_SIZE(dirs); i++)
        if (mkdirat(root, dirs[i], 0755) < 0)
            return bh_error_errno(err, errno, "create /%s", dirs[i]);
    if (fchmodat(root, "root", 0700, 0) < 0)
        return bh_error_errno(err, errno, "chmod /root");
    if (symlinkat("/tmp", root, "var/tmp") < 0)
        return bh_error_errno(err, errno, "create symlink /var/tmp -> /tmp");

    {
        cleanup_close int etc = openat(root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (etc < 0)
            return bh_error_errno(err, errno, "open /etc");
        if (write_etc(s, etc, err) < 0)
            return -1;
    }
    for (size_t i = 0; i < BH_ARRAY_SIZE(etc_binds); i++) {
        if (s->etc_fds[i] < 0)
            continue;
        char dest[PATH_MAX];
        snprintf(dest, sizeof(dest), "/etc/%s", etc_binds[i]);
        struct stat st;
        if (fstat(s->etc_fds[i], &st) < 0)
            return bh_error_errno(err, errno, "stat the host's %s", dest);
        if (S_ISDIR(st.st_mode)) {
            if (overlay_fd(s, s->etc_fds[i], dest,
                           MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC, err) < 0)
                return -1;
        } else if (S_ISREG(st.st_mode)) {
            cleanup_close int etc =
                openat(root, "etc", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (etc < 0)
                return bh_error_errno(err, errno, "open /etc");
            if (copy_file_at(s->etc_fds[i], etc, etc_binds[i], err) < 0)
                return -1;
        }
    }

    char opts[128];
    snprintf(opts, sizeof(opts), "size=%lld,mode=1777", s->tmpfs_bytes);
    if (mount_fs(s, "tmpfs", "tmpfs", "/tmp", MS_NOSUID | MS_NODEV, opts, err) < 0)
        return -1;
    snprintf(opts, sizeof(opts), "size=%lld,mode=0755,uid=%u,gid=%u", s->tmpfs_bytes, (unsigned)uid,
             (unsigned)gid);
    if (mount_fs(s, "tmpfs", "tmpfs", s->workdir, MS_NOSUID | MS_NODEV, opts, err) < 0)
        return bh_error_prefix(err, "working directory (is uid %u/gid %u mapped?)", (unsigned)uid,
                               (unsigned)gid);
    return 0;
}

/* ---- /proc, /dev, /sys ------------------------------------------------- */

/* A proc or sysfs mount point that is a symlink in the rootfs is refused, as
 * runc refuses it: the image would choose where the kernel's own files land
 * (and the masked and read-only paths below it would then protect nothing). */
static int refuse_symlink_mount_point(struct setup *s, const char *fstype, const char *dest,
                                      struct bh_error *err)
{
    cleanup_close int fd = open_in_root(s->root_fd, dest, O_NOFOLLOW);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISLNK(st.st_mode))
        return 0;
    return bh_error_set(err, ELOOP,
                        "%s must be mounted on ordinary directory: `%s` in the rootfs is a "
                        "symlink, which would let the image choose where %s lands; make it a "
                        "directory",
                        fstype, dest, fstype);
}

static int mount_base_proc(struct setup *s, struct bh_error *err)
{
    if (spec_mounts_at(s->spec, "/proc"))
        return 0;
    if (refuse_symlink_mount_point(s, "proc", "/proc", err) < 0)
        return -1;
    if (mount_fs(s, "proc", "proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, err) < 0)
        return bh_error_prefix(err, "fresh /proc (needs the sandbox's own pid namespace)");
    return 0;
}

static int mount_base_dev(struct setup *s, struct bh_error *err)
{
    if (spec_mounts_at(s->spec, "/dev"))
        return 0;
    /* Device nodes are binds of the host's (mknod is refused in a user
     * namespace); each bind keeps its own flags, so the tmpfs can be nodev. */
    if (mount_fs(s, "tmpfs", "tmpfs", "/dev", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                 "size=64k,nr_inodes=256,mode=0755", err) < 0)
        return -1;
    s->made_dev = true;
    return 0;
}

static int dev_symlink(struct setup *s, const char *target, const char *name, struct bh_error *err)
{
    cleanup_close int dev = open_in_root(s->root_fd, "/dev", O_DIRECTORY);
    if (dev < 0)
        return bh_error_errno(err, errno, "open /dev");
    char have[PATH_MAX];
    ssize_t n = readlinkat(dev, name, have, sizeof(have) - 1);
    if (n >= 0) {
        have[n] = '\0';
        if (strcmp(have, target) == 0)
            return 0;
    }
    if (unlinkat(dev, name, 0) < 0 && errno != ENOENT)
        return bh_error_errno(err, errno, "replace /dev/%s with a symlink to %s", name, target);
    if (symlinkat(target, dev, name) < 0)
        return bh_error_errno(err, errno, "create symlink /dev/%s -> %s", name, target);
    return 0;
}

static int populate_dev(struct setup *s, struct bh_error *err)
{
    for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
        if (!bh_dev_nodes[i].bound)
            continue;
        char dest[64];
        snprintf(dest, sizeof(dest), "/dev/%s", bh_dev_nodes[i].name);
        if (bind_fd(s, s->dev_fds[i], dest, dest, false, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC, 0,
                    err) < 0)
            return -1;
    }
    if (!spec_mounts_at(s->spec, "/dev/pts") &&
        mount_fs(s, "devpts", "devpts", "/dev/pts", MS_NOSUID | MS_NOEXEC,
                 "newinstance,ptmxmode=0666,mode=0620,max=" BH_PTY_MAX, err) < 0)
        return -1;
    if (dev_symlink(s, "pts/ptmx", "ptmx", err) < 0)
        return -1;
    if (!spec_mounts_at(s->spec, "/dev/shm")) {
        char opts[64];
        snprintf(opts, sizeof(opts), "size=%lld,mode=1777", s->tmpfs_bytes);
        if (mount_fs(s, "tmpfs", "shm", "/dev/shm", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts, err) <
            0)
            return -1;
    }
    static const char *const links[][2] = {
        {"/proc/self/fd", "fd"},
        {"/proc/self/fd/0", "stdin"},
        {"/proc/self/fd/1", "stdout"},
        {"/proc/self/fd/2", "stderr"},
    };
    for (size_t i = 0; i < BH_ARRAY_SIZE(links); i++)
        if (dev_symlink(s, links[i][0], links[i][1], err) < 0)
            return -1;
    return 0;
}

/* A sysfs on dest, read-only. The kernel allows it only to whoever holds
 * CAP_SYS_ADMIN over the network namespace's owner: the sandbox's own netns,
 * or a pod's that it shares the user namespace of. For a joined host-owned
 * netns the front end made one there (spec->sysfs_tree_fd). Otherwise dest
 * gets an empty read-only tmpfs: the host's /sys would show the host's
 * interfaces and devices, so never that. */
static int mount_sysfs(struct setup *s, const char *dest, unsigned long flags, struct bh_error *err)
{
    flags |= MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    if (s->spec->has_sysfs_tree_fd && !s->sysfs_tree_used) {
        s->sysfs_tree_used = true;
        if (attach_tree(s, s->spec->sysfs_tree_fd, "sysfs", dest, MP_DIR, err) < 0)
            return -1;
        return note_own_kfs(s, dest, err);
    }
    struct bh_error first = {0};
    if (mount_fs(s, "sysfs", "sysfs", dest, flags, NULL, &first) == 0)
        return 0;
    if (first.code != EPERM) {
        *err = first;
        return -1;
    }
    return mount_fs(s, "tmpfs", "sysfs", dest, flags, "size=4k,nr_inodes=8,mode=0555", err);
}

static int mount_base_sys(struct setup *s, struct bh_error *err)
{
    if (spec_mounts_at(s->spec, "/sys"))
        return 0;
    if (refuse_symlink_mount_point(s, "sysfs", "/sys", err) < 0)
        return -1;
    return mount_sysfs(s, "/sys", 0, err);
}

/* ---- the spec's mounts ------------------------------------------------- */

/* The hierarchies this process is in, as /proc/self/cgroup names them
 * ("memory", "cpu,cpuacct", "name=systemd"; "" stands for the v2 one), with
 * the process's path in each. */
struct cgroup_hier {
    char name[64];
    char path[PATH_MAX];
};

static int cgroup_hierarchies(struct cgroup_hier *h, size_t max, size_t *n, bool *v1)
{
    cleanup_fclose FILE *f = fopen("/proc/self/cgroup", "re");
    if (f == NULL)
        return -1;
    char line[PATH_MAX + 128];
    *n = 0;
    *v1 = false;
    while (fgets(line, sizeof(line), f) != NULL && *n < max) {
        char *a = strchr(line, ':');
        char *b = a ? strchr(a + 1, ':') : NULL;
        if (b == NULL)
            continue;
        size_t len = (size_t)(b - a - 1);
        if (len >= sizeof(h->name))
            continue;
        memcpy(h[*n].name, a + 1, len);
        h[*n].name[len] = '\0';
        b[1 + strcspn(b + 1, "\n")] = '\0';
        snprintf(h[*n].path, sizeof(h->path), "%s", b + 1);
        if (len > 0)
            *v1 = true;
        (*n)++;
    }
    return 0;
}

/* Whether every comma-separated word of want is one of opts's. */
static bool options_include(const char *opts, const char *want)
{
    char copy[64];
    snprintf(copy, sizeof(copy), "%s", want);
    for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        size_t len = strlen(tok);
        const char *p = opts;
        bool found = false;
        while (!found && (p = strstr(p, tok)) != NULL) {
            found = (p == opts || p[-1] == ',') && (p[len] == ',' || p[len] == '\0');
            p += len;
        }
        if (!found)
            return false;
    }
    return true;
}

/* Opens (O_PATH) this process's own cgroup directory of hierarchy h where
 * the host mounts that hierarchy (/proc/self/mountinfo), or -1. The
 * hierarchy's root is never opened: a hierarchy the sandbox was not placed
 * in would show the host's whole tree. */
static int open_own_cgroup(const struct cgroup_hier *h)
{
    if (strcmp(h->path, "/") == 0 || h->path[0] != '/')
        return -1;
    struct bh_mountinfo mi;
    struct bh_error err = {0};
    if (bh_mountinfo_open(&mi, &err) < 0)
        return -1;
    struct bh_mount_entry e;
    int fd = -1;
    bool v2 = h->name[0] == '\0';
    while (fd < 0 && bh_mountinfo_next(&mi, &e, &err) == 1) {
        if (strcmp(e.fstype, v2 ? "cgroup2" : "cgroup") != 0 ||
            (!v2 && !options_include(e.super_options, h->name)))
            continue;
        size_t rlen = strcmp(e.root, "/") == 0 ? 0 : strlen(e.root);
        if (strncmp(h->path, e.root, rlen) != 0 || (h->path[rlen] != '/' && h->path[rlen] != '\0'))
            continue;
        cleanup_free char *dir = NULL;
        if (asprintf(&dir, "%s%s", e.point, h->path + rlen) < 0)
            break;
        fd = open_host(dir, O_DIRECTORY);
    }
    bh_mountinfo_close(&mi);
    return fd;
}

/* One hierarchy at sub: with a cgroup namespace of our own a cgroupfs
 * (its root is the namespace's, the sandbox's own cgroup); without one a
 * bind of the sandbox's own cgroup directory, as runc does. */
static int mount_cgroup_hier(struct setup *s, const struct cgroup_hier *h, const char *sub,
                             unsigned long flags, struct bh_error *err)
{
    if (s->spec->inherit_cgroup_ns) {
        cleanup_close int fd = open_own_cgroup(h);
        if (fd < 0)
            return bh_error_errno(err, ENOENT, "no cgroup of the sandbox's own in `%s`", h->name);
        if (bind_fd(s, fd, "cgroup", sub, false, attr_from_flags(flags), 0, err) < 0)
            return -1;
        return note_own_kfs(s, sub, err);
    }
    const char *fstype = h->name[0] == '\0' ? "cgroup2" : "cgroup";
    char data[96] = "";
    if (strncmp(h->name, "name=", 5) == 0)
        snprintf(data, sizeof(data), "none,%.63s", h->name);
    else if (h->name[0] != '\0')
        snprintf(data, sizeof(data), "%.63s", h->name);
    return mount_fs(s, fstype, "cgroup", sub, flags, data[0] ? data : NULL, err);
}

/* cgroup mounts show the sandbox's own cgroups, never more: one mount on v2
 * hosts; on v1 and hybrid hosts (where the limits live in v1 controllers) a
 * tmpfs holding one mount per hierarchy (plus "unified"), as docker and runc
 * lay it out, so limits such as pids.max read back inside. A hierarchy that
 * cannot be shown stays an empty directory (v2: an empty tmpfs): less
 * visibility, never more. Always read-only, whatever the config asks: the
 * sandbox's root does not own its cgroups (no delegation), so read-write
 * would only turn EACCES into a different error. */
static int mount_cgroup(struct setup *s, const char *dest, unsigned long flags,
                        struct bh_error *err)
{
    flags |= MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC;
    struct cgroup_hier hs[16];
    size_t n = 0;
    bool v1 = false;
    if (cgroup_hierarchies(hs, BH_ARRAY_SIZE(hs), &n, &v1) < 0)
        v1 = false;
    if (!v1) {
        struct bh_error first = {0};
        if (n > 0 && mount_cgroup_hier(s, &hs[0], dest, flags, &first) == 0)
            return 0;
        return mount_fs(s, "tmpfs", "cgroup", dest, flags, "size=4k,mode=0555", err);
    }
    if (mount_fs(s, "tmpfs", "cgroup", dest, flags & ~(unsigned long)MS_RDONLY,
                 "size=16k,nr_inodes=64,mode=0755", err) < 0)
        return -1;
    for (size_t i = 0; i < n; i++) {
        const char *dir = hs[i].name;
        char sub[PATH_MAX];
        if (hs[i].name[0] == '\0')
            dir = "unified";
        else if (strncmp(hs[i].name, "name=", 5) == 0)
            dir = hs[i].name + 5;
        if (snprintf(sub, sizeof(sub), "%s/%s", dest, dir) >= (int)sizeof(sub))
            continue;
        struct bh_error ignored = {0};
        if (mount_cgroup_hier(s, &hs[i], sub, flags, &ignored) < 0)
            continue;
        /* "cpu,cpuacct" is also reachable as cpu and cpuacct. */
        if (strchr(dir, ',') != NULL) {
            cleanup_close int dirfd = open_in_root(s->root_fd, dest, O_DIRECTORY);
            char copy[64];
            snprintf(copy, sizeof(copy), "%.63s", dir);
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); dirfd >= 0 && tok != NULL;
                 tok = strtok_r(NULL, ",", &save))
                (void)symlinkat(dir, dirfd, tok);
        }
    }
    return setattr_at(s, dest, MOUNT_ATTR_RDONLY, 0, err);
}

static int spec_mount(struct setup *s, size_t i, struct bh_error *err)
{
    const struct bh_mount *m = &s->spec->mounts[i];
    const char *type = m->type ? m->type : "";
    const char *src = m->source ? m->source : "";
    bool bind = (m->flags & MS_BIND) || strcmp(type, "bind") == 0 || strcmp(type, "rbind") == 0;
    const unsigned long prop_mask = MS_PRIVATE | MS_SHARED | MS_SLAVE | MS_UNBINDABLE;
    unsigned long prop = (m->propagation | m->flags) & prop_mask;

    if (m->has_tree_fd) {
        /* Prepared by the host side (e.g. idmapped): flags are already set. */
        struct stat st;
        if (fstat(m->tree_fd, &st) < 0)
            return bh_error_errno(err, errno, "prepared mount of `%s` on `%s`", src,
                                  m->destination);
        if (private_tree(m->tree_fd, src, err) < 0)
            return -1;
        return attach_tree_in_order(s, m->tree_fd, src, m->destination,
                                    S_ISDIR(st.st_mode) ? MP_DIR : MP_FILE, err);
    }
    if (bind) {
        bool rec = (m->flags & MS_REC) || strcmp(type, "rbind") == 0;
        return bind_fd(s, s->source_fds[i], src, m->destination, rec, attr_from_flags(m->flags),
                       prop, err);
    }

    unsigned long flags = m->flags & ~(MS_BIND | MS_REC | MS_REMOUNT | prop_mask);
    if ((strcmp(type, "proc") == 0 || strcmp(type, "sysfs") == 0) &&
        refuse_symlink_mount_point(s, type, m->destination, err) < 0)
        return -1;
    if (strcmp(type, "tmpfs") == 0 && strcmp(m->destination, "/dev") == 0 && (flags & MS_RDONLY)) {
        /* Its nodes, devpts and shm mount points are made in it first. */
        flags &= ~(unsigned long)MS_RDONLY;
        s->spec_dev_ro = true;
    }
    if (strcmp(type, "tmpfs") == 0 || strcmp(type, "proc") == 0 || strcmp(type, "devpts") == 0 ||
        strcmp(type, "mqueue") == 0) {
        /* Every devpts instance but the host's draws from one pool
         * (kernel.pty.max - pty.reserve): without max= one sandbox takes it all. */
        char pts_data[1024];
        const char *data = m->data;
        if (strcmp(type, "devpts") == 0 && (data == NULL || strstr(data, "max=") == NULL)) {
            if (snprintf(pts_data, sizeof(pts_data), "%s%smax=" BH_PTY_MAX, data ? data : "",
                         data && *data ? "," : "") >= (int)sizeof(pts_data))
                return bh_error_set(err, E2BIG, "devpts options on `%s` are too long",
                                    m->destination);
            data = pts_data;
        }
        if (mount_fs(s, type, m->source ? m->source : type, m->destination, flags, data, err) < 0)
            return -1;
    } else if (strcmp(type, "sysfs") == 0) {
        if (mount_sysfs(s, m->destination, flags, err) < 0)
            return -1;
    } else if (strcmp(type, "cgroup") == 0 || strcmp(type, "cgroup2") == 0) {
        if (mount_cgroup(s, m->destination, flags, err) < 0)
            return -1;
    } else {
        return bh_error_set(err, EINVAL,
                            "mount `%s` on `%s`: type `%s` is not supported (use bind, tmpfs, "
                            "proc, sysfs, devpts, mqueue or cgroup)",
                            src, m->destination, type);
    }
    if (prop != 0 && setattr_at(s, m->destination, 0, prop, err) < 0)
        return -1;
    return 0;
}

/* ---- masked and read-only paths ---------------------------------------- */

static int mask_path(struct setup *s, const char *path, struct bh_error *err)
{
    cleanup_close int fd = open_in_root(s->root_fd, path, 0);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return bh_error_errno(err, errno, "mask `%s`", path);
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return bh_error_errno(err, errno, "mask `%s`", path);
    if (S_ISDIR(st.st_mode)) {
        char p[32];
        fd_path(p, fd);
        if (mount("tmpfs", p, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,nr_inodes=1,mode=0555") < 0)
            return bh_error_errno(err, errno, "mask `%s` with an empty read-only tmpfs", path);
        return 0;
    }
    cleanup_close int tree =
        open_tree(s->devnull_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
    if (tree < 0)
        return bh_error_errno(err, errno, "mask `%s`: clone /dev/null", path);
    if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return bh_error_errno(err, errno, "mask `%s` with /dev/null", path);
    return 0;
}

static int readonly_path(struct setup *s, const char *path, struct bh_error *err)
{
    cleanup_close int fd = open_in_root(s->root_fd, path, 0);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        return bh_error_errno(err, errno, "make `%s` read-only", path);
    }
    cleanup_close int tree =
        open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0)
        return bh_error_errno(err, errno, "make `%s` read-only: clone", path);
    struct mount_attr ma = {
        .attr_set = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
    };
    if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof(ma)) < 0)
        return bh_error_errno(err, errno, "make `%s` read-only: set flags", path);
    if (move_mount(tree, "", fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return bh_error_errno(err, errno, "make `%s` read-only: attach", path);
    return 0;
}

static int protect_paths(struct setup *s, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = s->spec;
    if (spec->masked_paths != NULL) {
        for (char **p = spec->masked_paths; *p != NULL; p++)
            if (mask_path(s, *p, err) < 0)
                return -1;
    } else {
        for (size_t i = 0; i < BH_ARRAY_SIZE(default_masked_paths); i++)
            if (mask_path(s, default_masked_paths[i], err) < 0)
                return -1;
    }
    if (spec->readonly_paths != NULL) {
        for (char **p = spec->readonly_paths; *p != NULL; p++)
            if (readonly_path(s, *p, err) < 0)
                return -1;
    } else {
        for (size_t i = 0; i < BH_ARRAY_SIZE(default_readonly_paths); i++)
            if (readonly_path(s, default_readonly_paths[i], err) < 0)
                return -1;
    }
    return 0;
}

/* ---- finishing --------------------------------------------------------- */

static int prepare_cwd(struct setup *s, const char *cwd, struct bh_error *err)
{
    cleanup_close int fd = open_in_root(s->root_fd, cwd, O_DIRECTORY);
    if (fd >= 0)
        return 0;
    if (errno != ENOENT)
        return bh_error_errno(err, errno, "working directory `%s`", cwd);
    fd = resolve_target(s->root_fd, cwd, MP_DIR, err);
    if (fd < 0)
        return bh_error_prefix(err, "create the process's working directory `%s`", cwd);
    /* Made inside the guest's workdir tmpfs: the guest owns it. */
    if (s->embedded) {
        uid_t uid;
        gid_t gid;
        guest_ids(s->spec, &uid, &gid);
        if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0)
            return bh_error_errno(err, errno, "chown working directory `%s`", cwd);
    }
    return 0;
}

/* --no-pivot leaves the host's tree under the new root in this mount
 * namespace. A proc or sysfs mount there would count as "fully visible" and
 * let a nested user namespace mount a bare one (runc's CVE-2016-9962 class):
 * each is detached, or, where the kernel keeps it locked, covered with an
 * empty read-only tmpfs, which is locked in turn in any nested namespace.
 * Those under the stage go first (below_staging), before the staging
 * root covers them and no path reaches them; the rest (/proc, /sys) last,
 * once /proc/self is needed no more. */
static int hide_host_kernel_fs(const char *stage, bool below_staging, struct bh_error *err)
{
    char points[64][PATH_MAX / 4];
    size_t n = 0;
    struct bh_mountinfo mi;
    if (bh_mountinfo_open(&mi, err) < 0)
        return -1;
    struct bh_mount_entry e;
    int rc;
    size_t sl = strlen(stage);
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1) {
        if (strcmp(e.fstype, "proc") != 0 && strcmp(e.fstype, "sysfs") != 0)
            continue;
        if ((strncmp(e.point, stage, sl) == 0 && (e.point[sl] == '/' || e.point[sl] == '\0')) !=
            below_staging)
            continue;
        if (strlen(e.point) >= sizeof(points[0])) {
            rc = bh_error_set(err, ENAMETOOLONG,
                              "--no-pivot: cannot hide the host's %s mount at `%.64s...`: its "
                              "path is too long",
                              e.fstype, e.point);
            break;
        }
        if (n >= BH_ARRAY_SIZE(points)) {
            rc = bh_error_set(err, E2BIG, "--no-pivot: too many host proc/sysfs mounts");
            break;
        }
        snprintf(points[n++], sizeof(points[0]), "%s", e.point);
    }
    bh_mountinfo_close(&mi);
    if (rc < 0)
        return -1;
    /* Last mounted first: /proc/sys/fs/binfmt_misc before /proc. */
    for (size_t i = n; i-- > 0;) {
        if (umount2(points[i], MNT_DETACH) == 0)
            continue;
        if (mount("tmpfs", points[i], "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  "size=4k,nr_inodes=2,mode=0555") < 0)
            return bh_error_errno(err, errno, "--no-pivot: cover the host's mount at `%s`",
                                  points[i]);
    }
    return 0;
}

static int enter_root(struct setup *s, struct bh_error *err)
{
    if (s->spec->no_pivot) {
        /* As runc's --no-pivot, for a host root pivot_root refuses
         * (initramfs): the new root is moved over / and chrooted into. */
        if (hide_host_kernel_fs(s->stage, false, err) < 0)
            return -1;
        if (fchdir(s->root_fd) < 0)
            return bh_error_errno(err, errno, "enter the new root");
        if (move_mount(s->root_fd, "", AT_FDCWD, "/", MOVE_MOUNT_F_EMPTY_PATH) < 0)
            return bh_error_errno(err, errno, "move the new root over / (--no-pivot)");
        if (chroot(".") < 0)
            return bh_error_errno(err, errno, "chroot into the new root (--no-pivot)");
    } else {
        if (fchdir(s->root_fd) < 0)
            return bh_error_errno(err, errno, "enter the new root");
        /* The old root ends up stacked on the new one, then goes away. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
            return bh_error_errno(err, errno, "pivot_root into the new root");
        if (umount2(".", MNT_DETACH) < 0)
            return bh_error_errno(err, errno, "detach the old root");
    }
    if (chdir("/") < 0)
        return bh_error_errno(err, errno, "chdir / in the new root");
    unsigned long prop =
        s->spec->rootfs_propagation & (MS_SHARED | MS_SLAVE | MS_UNBINDABLE | MS_PRIVATE);
    if (prop != 0 && prop != MS_PRIVATE && mount(NULL, "/", NULL, MS_REC | prop, NULL) < 0)
        return bh_error_errno(err, errno, "set rootfs propagation");
    return 0;
}

/* ---- the pause for hooks ------------------------------------------------- */

/* The mount point as the guest will see it, or NULL when it is not in root. */
static const char *view_in(const char *root, const char *point)
{
    size_t rl = strcmp(root, "/") == 0 ? 0 : strlen(root);
    if (strncmp(point, root, rl) != 0 || (point[rl] != '/' && point[rl] != '\0'))
        return NULL;
    return point[rl] ? point + rl : "/";
}

static bool under(const char *view, const char *dir)
{
    size_t l = strlen(dir);
    return strncmp(view, dir, l) == 0 && (view[l] == '/' || view[l] == '\0');
}

static bool has(const unsigned long *v, size_t n, unsigned long x)
{
    for (size_t i = 0; i < n; i++)
        if (v[i] == x)
            return true;
    return false;
}

/* One line of mountinfo, kept until all are read. */
struct mnt_line {
    unsigned long id, parent;
    unsigned major, minor;
    bool propagates;
    char *root, *point, *fstype;
};

static void mnt_lines_free(struct mnt_line **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((*v)[i].root);
        free((*v)[i].point);
        free((*v)[i].fstype);
    }
    free(*v);
    *v = NULL;
}

static int read_mnt_lines(struct mnt_line **out, size_t *n_out, struct bh_error *err)
{
    struct bh_mountinfo mi;
    if (bh_mountinfo_open(&mi, err) < 0)
        return -1;
    struct mnt_line *v = NULL;
    size_t n = 0, cap = 0;
    struct bh_mount_entry e;
    int rc;
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1) {
        if (n == cap) {
            size_t want = cap ? 2 * cap : 64;
            struct mnt_line *grown = realloc(v, want * sizeof(*grown));
            if (grown == NULL) {
                rc = bh_error_errno(err, ENOMEM, "check the root's mounts");
                break;
            }
            v = grown;
            cap = want;
        }
        v[n++] = (struct mnt_line){
            .id = e.id,
            .parent = e.parent,
            .major = e.major,
            .minor = e.minor,
            .propagates = e.shared != 0 || e.master != 0,
            .root = strdup(e.root),
            .point = strdup(e.point),
            .fstype = strdup(e.fstype),
        };
        if (!v[n - 1].root || !v[n - 1].point || !v[n - 1].fstype) {
            rc = bh_error_errno(err, ENOMEM, "check the root's mounts");
            break;
        }
    }
    bh_mountinfo_close(&mi);
    if (rc < 0) {
        mnt_lines_free(&v, n);
        return -1;
    }
    *out = v;
    *n_out = n;
    return 0;
}

/* Whether mount i hangs below the root's mount (by parent ids, not paths:
 * the host's mounts under the staging place are listed with paths below it
 * but are covered, not in the root). */
static bool in_root(const struct mnt_line *v, size_t n, size_t i, unsigned long root_id)
{
    unsigned long id = v[i].id;
    for (size_t hops = 0; hops <= n; hops++) {
        if (id == root_id)
            return true;
        size_t j = 0;
        while (j < n && v[j].id != id)
            j++;
        if (j == n || v[j].parent == id)
            return false;
        id = v[j].parent;
    }
    return false;
}

/* Whether kernel filesystem m is one the sandbox made (own_kfs) or a bind
 * of part of one. */
static bool kfs_is_own(const struct setup *s, const struct mnt_line *v, size_t n,
                       const struct mnt_line *m)
{
    for (size_t i = 0; i < n; i++) {
        const struct mnt_line *o = &v[i];
        if (!has(s->own_kfs, s->n_own_kfs, o->id) || o->major != m->major || o->minor != m->minor)
            continue;
        /* A cgroupfs outside the reader's cgroup namespace shows its root
         * as "/.." (kernfs): never under the sandbox's own. */
        if (strstr(m->root, "/..") != NULL &&
            (strstr(m->root, "/../") != NULL || strcmp(strstr(m->root, "/.."), "/..") == 0))
            return false;
        if (strcmp(o->root, "/") == 0 || under(m->root, o->root))
            return true;
    }
    return false;
}

/* The kernel tier's one rule for every mount in the root, whoever made it
 * (the config's mounts, prestart, createRuntime or createContainer hooks),
 * checked once, after the pause (sentry/README.md, "One rule for every mount
 * in the root"): every procfs, sysfs and cgroupfs is one bulkhead made for
 * the sandbox or a bind of part of one, wherever it is; nothing at or below
 * /proc and /sys takes part in propagation. before: the mount ids present
 * before the hooks ran (they name the culprit), or NULL without hooks. */
static int check_root_mounts(const struct setup *s, const char *root, const unsigned long *before,
                             size_t n_before, struct bh_error *err)
{
    struct statx stx;
    if (statx(s->root_fd, "", AT_EMPTY_PATH, STATX_MNT_ID, &stx) < 0 ||
        !(stx.stx_mask & STATX_MNT_ID))
        return bh_error_errno(err, errno ? errno : ENOTSUP, "find the mount id of the new root");
    struct mnt_line *v = NULL;
    size_t n = 0;
    if (read_mnt_lines(&v, &n, err) < 0)
        return -1;
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        const char *view = view_in(root, v[i].point);
        if (view == NULL || !in_root(v, n, i, stx.stx_mnt_id))
            continue; /* in the old root, detached at pivot_root */
        const char *who =
            before == NULL || has(before, n_before, v[i].id) ? "the config's" : "a hook's";
        if (v[i].propagates && (under(view, "/proc") || under(view, "/sys")))
            rc = bh_error_set(err, EPERM,
                              "%s %s mount on `%s` takes part in mount propagation (shared or "
                              "slave): at the kernel tier nothing may be mounted under /proc "
                              "or /sys later (the broker's checks of both rely on it); make it "
                              "private",
                              who, v[i].fstype, view);
        else if (is_kernel_fs(v[i].fstype) && !kfs_is_own(s, v, n, &v[i]))
            rc = bh_error_set(err, EPERM,
                              "%s %s on `%s` is not one bulkhead made for this sandbox (device "
                              "%u:%u, root `%s`: e.g. the host's bound in, or a new one whose "
                              "namespace the sentry cannot prove): at the kernel tier every "
                              "procfs, sysfs and cgroupfs in the root must be the sandbox's own "
                              "or a bind of part of one (bind the root's own /proc or /sys "
                              "instead); refused",
                              who, v[i].fstype, view, v[i].major, v[i].minor, v[i].root);
    }
    mnt_lines_free(&v, n);
    return rc;
}

/* The mount ids in this namespace now: what the hooks found. */
static int mount_ids(unsigned long **ids, size_t *n, struct bh_error *err)
{
    struct bh_mountinfo mi;
    if (bh_mountinfo_open(&mi, err) < 0)
        return -1;
    size_t cap = 0;
    struct bh_mount_entry e;
    int rc;
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1)
        if (push_id(ids, n, &cap, 64, e.id, err) < 0) {
            rc = -1;
            break;
        }
    bh_mountinfo_close(&mi);
    return rc < 0 ? -1 : 0;
}

/* runc's procHooks point: the mounts are in place, pivot_root is next. At
 * the kernel tier the root's mounts are checked here, with hooks or
 * without. */
static int pause_for_hooks(struct setup *s, struct bh_error *err)
{
    bool check = s->spec->tier >= BH_TIER_KERNEL;
    if (s->pause == NULL && !check)
        return 0;
    char link[32], root[PATH_MAX];
    fd_path(link, s->root_fd);
    ssize_t n = readlink(link, root, sizeof(root) - 1);
    if (n <= 0)
        return bh_error_errno(err, n < 0 ? errno : EINVAL, "find the path of the new root");
    root[n] = '\0';
    if (s->pause == NULL)
        return check_root_mounts(s, root, NULL, 0, err);
    cleanup_free unsigned long *before = NULL;
    size_t n_before = 0;
    if (check && mount_ids(&before, &n_before, err) < 0)
        return bh_error_prefix(err, "before the hooks");
    if (s->pause->fn(s->pause->arg, root, err) < 0)
        return -1;
    if (check && check_root_mounts(s, root, before, n_before, err) < 0)
        return bh_error_prefix(err, "after the hooks");
    return 0;
}

static void setup_release(struct setup *s)
{
    bh_closep(&s->root_fd);
    if (!s->rootfs_fd_borrowed)
        bh_closep(&s->rootfs_fd);
    bh_closep(&s->devnull_fd);
    for (size_t i = 0; i < BH_ARRAY_SIZE(s->dev_fds); i++)
        bh_closep(&s->dev_fds[i]);
    for (size_t i = 0; i < BH_ARRAY_SIZE(s->etc_fds); i++)
        bh_closep(&s->etc_fds[i]);
    for (size_t i = 0; i < BH_ARRAY_SIZE(s->system_fds); i++)
        bh_closep(&s->system_fds[i]);
    bh_closep(&s->empty_fd);
    free(s->own_kfs);
    s->own_kfs = NULL;
    if (s->source_fds != NULL)
        for (size_t i = 0; i < s->spec->n_mounts; i++)
            bh_closep(&s->source_fds[i]);
    free(s->source_fds);
}

static int setup_run(struct setup *s, struct bh_error *err)
{
    const struct bh_sandbox_spec *spec = s->spec;
    const char *cwd = spec->process.cwd ? spec->process.cwd : s->embedded ? s->workdir : "/";
    if (cwd[0] != '/')
        return bh_error_set(err, EINVAL, "working directory `%s` is not an absolute path", cwd);
    if (s->workdir[0] != '/' || *skip_slashes(s->workdir) == '\0')
        return bh_error_set(err, EINVAL,
                            "sandbox working directory `%s` must be an absolute path below /",
                            s->workdir);

    if (open_sources(s, err) < 0)
        return -1;
    if (s->pause != NULL && !s->embedded && !spec->rootfs_overlay && spec->rootfs != NULL &&
        spec->rootfs[0] == '/') {
        /* The root where runc has it: hooks mount by its host path. A path
         * the sandbox's ids cannot reach keeps the staging place. */
        cleanup_close int at = open_host(spec->rootfs, O_DIRECTORY);
        if (at >= 0)
            s->stage = spec->rootfs;
    }
    /* Nothing below may propagate out of this namespace. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return bh_error_errno(err, errno, "make the mount tree private");
    if (spec->no_pivot && hide_host_kernel_fs(s->stage, true, err) < 0)
        return -1;
    if (attach_root(s, err) < 0)
        return -1;
    if (s->embedded && build_embedded(s, err) < 0)
        return bh_error_prefix(err, "embedded default root");
    /* Base /proc, /dev and /sys first, so the spec's mounts go on top. */
    if (mount_base_proc(s, err) < 0 || mount_base_dev(s, err) < 0 || mount_base_sys(s, err) < 0)
        return -1;
    for (size_t i = 0; i < spec->n_mounts; i++)
        if (spec_mount(s, i, err) < 0)
            return bh_error_prefix(err, "mount %zu of the spec", i);
    if (populate_dev(s, err) < 0)
        return bh_error_prefix(err, "populate /dev");
    if (pause_for_hooks(s, err) < 0)
        return -1;
    if (protect_paths(s, err) < 0)
        return -1;
    if (prepare_cwd(s, cwd, err) < 0)
        return -1;

    if ((s->made_dev || s->spec_dev_ro) && setattr_at(s, "/dev", MOUNT_ATTR_RDONLY, 0, err) < 0)
        return -1;
    if (s->embedded || spec->rootfs_readonly) {
        struct mount_attr ma = {.attr_set = MOUNT_ATTR_RDONLY};
        if (mount_setattr(s->root_fd, "", AT_EMPTY_PATH, &ma, sizeof(ma)) < 0)
            return bh_error_errno(err, errno, "make the root read-only");
    }
    if (enter_root(s, err) < 0)
        return -1;
    if (chdir(cwd) < 0)
        return bh_error_errno(err, errno, "chdir to the working directory `%s`", cwd);
    return 0;
}

int bh_mounts_setup(const struct bh_sandbox_spec *spec, struct bh_error *err)
{
    return bh_mounts_setup_with_dev(spec, -1, err);
}

int bh_mounts_dev_tree(int64_t uid, int64_t gid, struct bh_error *err)
{
    cleanup_close int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return bh_error_errno(err, errno, "device nodes of the sandbox's own: create a tmpfs");
    if (fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", "16", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return fs_error(err, fs, errno, "create the tmpfs", "the sandbox's device nodes");
    /* Not nodev: these nodes are what it is for. Bound one by one, nosuid
     * and noexec, into the sandbox's /dev. */
    cleanup_close int tree =
        fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOATIME);
    if (tree < 0)
        return bh_error_errno(err, errno, "device nodes of the sandbox's own: mount the tmpfs");
    for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
        const struct bh_dev_node *n = &bh_dev_nodes[i];
        if (!n->bound)
            continue;
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/dev/%s", n->name);
        if (stat(path, &st) < 0)
            return bh_error_errno(err, errno,
                                  "device nodes of the sandbox's own: stat the host's %s", path);
        if (check_dev_node(n, &st, "the host's ", err) < 0)
            return -1;
        if (mknodat(tree, n->name, S_IFCHR | (st.st_mode & 0777), makedev(n->major, n->minor)) <
                0 ||
            fchmodat(tree, n->name, st.st_mode & 0777, 0) < 0 ||
            fchownat(tree, n->name, uid >= 0 ? (uid_t)uid : st.st_uid,
                     gid >= 0 ? (gid_t)gid : st.st_gid, AT_SYMLINK_NOFOLLOW) < 0)
            return bh_error_errno(err, errno,
                                  "device nodes of the sandbox's own: make %s (needs "
                                  "host root, which may make device nodes)",
                                  n->name);
    }
    return steal_fd(&tree);
}

int bh_mounts_setup_with_dev(const struct bh_sandbox_spec *spec, int dev_tree, struct bh_error *err)
{
    return bh_mounts_setup_paused(spec, dev_tree, NULL, NULL, err);
}

int bh_mounts_setup_paused(const struct bh_sandbox_spec *spec, int dev_tree,
                           const struct bh_mounts_pause *pause, struct bh_mounts_made *made,
                           struct bh_error *err)
{
    struct setup s = {
        .spec = spec,
        .embedded = spec->rootfs == NULL && !spec->has_rootfs_tree_fd,
        .workdir = spec->workdir ? spec->workdir : MOUNTS_DEFAULT_WORKDIR,
        .tmpfs_bytes =
            spec->limits.tmpfs_bytes > 0 ? spec->limits.tmpfs_bytes : MOUNTS_DEFAULT_TMPFS_BYTES,
        .root_fd = -1,
        .rootfs_fd = -1,
        .devnull_fd = -1,
        .empty_fd = -1,
        .dev_tree = dev_tree,
        .stage = MOUNTS_STAGING,
        .pause = pause,
        .made = made,
    };
    if (made != NULL)
        made->n_own_tmpfs = 0;
    for (size_t i = 0; i < BH_ARRAY_SIZE(s.dev_fds); i++)
        s.dev_fds[i] = -1;
    for (size_t i = 0; i < BH_ARRAY_SIZE(s.etc_fds); i++)
        s.etc_fds[i] = -1;
    for (size_t i = 0; i < BH_ARRAY_SIZE(s.system_fds); i++)
        s.system_fds[i] = -1;
    if (spec->n_mounts > 0) {
        s.source_fds = malloc(spec->n_mounts * sizeof(int));
        if (s.source_fds == NULL)
            return bh_error_errno(err, ENOMEM, "mounts");
        for (size_t i = 0; i < spec->n_mounts; i++)
            s.source_fds[i] = -1;
    }
    int rc = setup_run(&s, err);
    setup_release(&s);
    return rc;
}
