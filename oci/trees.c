/* Owns preparing the rootfs and bind mounts on the host side, and making
 * missing mount points in the rootfs (as runc does, as root: docker's image
 * files belong to host root, which the sandbox's root is not): the sandbox's
 * own uid cannot reach paths under docker's root-only directories
 * (/var/lib/docker is 0710), so `bulkhead create`, still host root, clones
 * the rootfs and each bind source as a detached tree (open_tree(OPEN_TREE_CLONE)), sets its flags
 * on the detached copy (mount_setattr), and hands it over as bh_mount.tree_fd; the sandbox only
 * moves it into place. The idmap of these trees (the sandbox's ids) is the core's step
 * (bh_mount.idmap, bh_sandbox_spec.idmap_rootfs, set by config.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sched.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel-compat.h"
#include "oci-internal.h"

struct oci_mount_attr {
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};

/* mount_setattr's form of MS_* flags: set, and cleared (clear). */
static struct oci_mount_attr attr_of(unsigned long set, unsigned long clear)
{
    static const struct {
        unsigned long ms;
        uint64_t attr;
    } map[] = {
        {MS_RDONLY, MOUNT_ATTR_RDONLY},
        {MS_NOSUID, MOUNT_ATTR_NOSUID},
        {MS_NODEV, MOUNT_ATTR_NODEV},
        {MS_NOEXEC, MOUNT_ATTR_NOEXEC},
        {MS_NOSYMFOLLOW, MOUNT_ATTR_NOSYMFOLLOW},
        {MS_NODIRATIME, MOUNT_ATTR_NODIRATIME},
    };
    struct oci_mount_attr a = {0};
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
        if (set & map[i].ms)
            a.attr_set |= map[i].attr;
        else if (clear & map[i].ms)
            a.attr_clr |= map[i].attr;
    }
    if (set & MS_NOATIME) {
        a.attr_clr |= MOUNT_ATTR__ATIME;
        a.attr_set |= MOUNT_ATTR_NOATIME;
    } else if (set & MS_STRICTATIME) {
        a.attr_clr |= MOUNT_ATTR__ATIME;
        a.attr_set |= MOUNT_ATTR_STRICTATIME;
    }
    return a;
}

int oci_prepare_bind_trees(struct bh_sandbox_spec *spec, struct bh_error *err)
{
    if (spec->rootfs != NULL && !spec->has_rootfs_tree_fd) {
        int fd = (int)syscall(SYS_open_tree, AT_FDCWD, spec->rootfs,
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0)
            return bh_error_errno(err, errno, "rootfs `%s`", spec->rootfs);
        struct oci_mount_attr a = {.propagation = MS_PRIVATE};
        if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0) {
            int e = errno;
            close(fd);
            return bh_error_errno(err, e, "make the rootfs `%s` private", spec->rootfs);
        }
        spec->has_rootfs_tree_fd = true;
        spec->rootfs_tree_fd = fd;
    }
    for (size_t i = 0; i < spec->n_mounts; i++) {
        struct bh_mount *m = &spec->mounts[i];
        if (!(m->flags & MS_BIND) || m->has_tree_fd)
            continue;
        bool rec = (m->flags & MS_REC) != 0;
        int fd = (int)syscall(SYS_open_tree, AT_FDCWD, m->source,
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (rec ? AT_RECURSIVE : 0));
        if (fd < 0) {
            int e = errno;
            oci_close_bind_trees(spec);
            return bh_error_errno(err, e, "bind mount source `%s` (for `%s`)", m->source,
                                  m->destination);
        }
        /* Whatever the spec asks, nothing propagates between host and sandbox:
         * private all the way down. The flags then go on the top mount only,
         * as runc applies an rbind's options; the recursive forms (rro, ...)
         * on every mount of the tree. */
        struct oci_mount_attr priv = {.propagation = MS_PRIVATE};
        struct oci_mount_attr top = attr_of(m->flags, 0);
        struct oci_mount_attr all = attr_of(m->rec_set, m->rec_clear);
        if (syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | (rec ? AT_RECURSIVE : 0), &priv,
                    sizeof(priv)) < 0 ||
            syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH, &top, sizeof(top)) < 0 ||
            ((all.attr_set | all.attr_clr) != 0 &&
             syscall(SYS_mount_setattr, fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &all, sizeof(all)) <
                 0)) {
            int e = errno;
            close(fd);
            oci_close_bind_trees(spec);
            return bh_error_errno(err, e, "set the flags of bind mount `%s` on `%s`", m->source,
                                  m->destination);
        }
        m->has_tree_fd = true;
        m->tree_fd = fd;
    }
    return 0;
}

void oci_close_bind_trees(struct bh_sandbox_spec *spec)
{
    if (spec->has_rootfs_tree_fd && spec->rootfs_tree_fd >= 0)
        close(spec->rootfs_tree_fd);
    spec->has_rootfs_tree_fd = false;
    spec->rootfs_tree_fd = -1;
    for (size_t i = 0; i < spec->n_mounts; i++) {
        struct bh_mount *m = &spec->mounts[i];
        if (m->has_tree_fd && m->tree_fd >= 0)
            close(m->tree_fd);
        m->has_tree_fd = false;
        m->tree_fd = -1;
    }
}

/* Resolves rel (no leading '/') inside root as the sandbox would see it. */
static int open_in_root(int root, const char *rel, int flags)
{
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    return (int)syscall(SYS_openat2, root, rel[0] ? rel : ".", &how, sizeof(how));
}

/* Makes dest (and its parents) inside root: a directory, or an empty file
 * when as_file. Every component is resolved with RESOLVE_IN_ROOT, so a
 * symlink in the image can never lead outside the rootfs. */
static int make_in_root(int root, const char *dest, bool as_file, struct bh_error *err)
{
    char rel[4096];
    const char *d = dest;
    while (*d == '/')
        d++;
    if (snprintf(rel, sizeof(rel), "%s", d) >= (int)sizeof(rel))
        return bh_error_set(err, ENAMETOOLONG, "mount point `%s` is too long", dest);
    if (rel[0] == '\0')
        return 0;
    int fd = open_in_root(root, rel, O_PATH);
    if (fd >= 0) {
        close(fd);
        return 0;
    }
    if (errno != ENOENT)
        return bh_error_errno(err, errno, "mount point `%s` in the rootfs", dest);
    char *slash = strrchr(rel, '/');
    const char *name = rel;
    int parent;
    if (slash != NULL) {
        *slash = '\0';
        if (make_in_root(root, rel, false, err) < 0)
            return -1;
        parent = open_in_root(root, rel, O_PATH | O_DIRECTORY);
        name = slash + 1;
    } else {
        parent = open_in_root(root, "", O_PATH | O_DIRECTORY);
    }
    if (parent < 0)
        return bh_error_errno(err, errno, "parent of mount point `%s` in the rootfs", dest);
    int r;
    if (as_file) {
        r = openat(parent, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (r >= 0)
            close(r);
    } else {
        r = mkdirat(parent, name, 0755);
    }
    int e = errno;
    close(parent);
    if (r < 0 && e != EEXIST)
        return bh_error_errno(err, e, "make mount point `%s` in the rootfs", dest);
    return 0;
}

int oci_make_mount_points(const struct bh_sandbox_spec *spec, struct bh_error *err)
{
    if (spec->rootfs == NULL)
        return 0;
    int root = open(spec->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return bh_error_errno(err, errno, "rootfs `%s`", spec->rootfs);
    int rc = 0;
    for (size_t i = 0; i < spec->n_mounts && rc == 0; i++) {
        const struct bh_mount *m = &spec->mounts[i];
        bool as_file = false;
        if (m->flags & MS_BIND) {
            struct stat st;
            as_file = stat(m->source, &st) == 0 && !S_ISDIR(st.st_mode);
        }
        rc = make_in_root(root, m->destination, as_file, err);
    }
    close(root);
    return rc;
}
