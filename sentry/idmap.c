/* Owns the idmapped trees of a sandbox (bh_mount.idmap,
 * bh_sandbox_spec.idmap_rootfs): once the sandbox's user namespace exists
 * and its maps are written, the host side (root) idmaps each flagged
 * detached tree with that namespace, so host ids 0..N of the tree's files
 * appear inside as 0..N, as they would under runc, while the sandbox's own
 * ids stay an unprivileged host range.
 *
 * overlayfs refuses to be idmapped itself, and docker's rootfs is an
 * overlay mount; its layers (ext4, xfs, tmpfs, ...) can be. So an overlay
 * rootfs is mounted afresh from the layers the kernel lists for it in
 * mountinfo, each layer an idmapped clone, by a helper whose fs ids are the
 * sandbox root's host ids: overlayfs works on its layers with its mounter's
 * credentials, and host root (id 0) has no id in the idmapped layers.
 * The new overlay shares docker's upper directory (docker's own mount of it
 * stays, unused by the container) and has a work directory of its own,
 * UPPER/../bulkhead-work, as two overlays must never share one. */
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "frame.h"
#include "idmap-internal.h"
#include "kernel-compat.h"
#include "mountinfo.h"

#define MAX_LAYERS 500
#define WORK_NAME "bulkhead-work"

struct idmap_attr {
    uint64_t attr_set;
    uint64_t attr_clr;
    uint64_t propagation;
    uint64_t userns_fd;
};

static void warnf(const struct bh_create_opts *opts, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void warnf(const struct bh_create_opts *opts, const char *fmt, ...)
{
    if (opts == NULL || opts->warn == NULL)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    opts->warn(opts->warn_arg, msg);
}

int bh_idmap_userns_fd(int pidfd, pid_t pid, struct bh_error *err)
{
    int fd = ioctl(pidfd, PIDFD_GET_USER_NAMESPACE, 0);
    if (fd >= 0)
        return fd;
    /* Older kernels: through /proc, then make sure the pid was still ours
     * (the child waits for "go", so it can only have died, not moved on). */
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "open the sandbox's user namespace");
    if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0) {
        close(fd);
        return bh_error_errno(err, ESRCH, "the sandbox's first process ended during setup");
    }
    return fd;
}

static int set_idmap(int tree, int userns, bool recursive)
{
    struct idmap_attr a = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
    return (int)syscall(SYS_mount_setattr, tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0),
                        &a, sizeof(a));
}

/* ---- an overlay rootfs, mounted again from idmapped layers --------------- */

/* The super options of the mount with id mnt_id (malloc'd, escaped as
 * mountinfo writes them), with its root within its filesystem. */
static int mount_super_opts(uint64_t mnt_id, char **opts, char **root, struct bh_error *err)
{
    struct bh_mountinfo mi;
    if (bh_mountinfo_open(&mi, err) < 0)
        return -1;
    struct bh_mount_entry e;
    int rc;
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1 && e.id != mnt_id)
        ;
    if (rc == 1) {
        *opts = strdup(e.super_options);
        *root = strdup(e.root);
        rc = (*opts && *root) ? 0 : bh_error_errno(err, ENOMEM, "mount options");
    } else if (rc == 0) {
        rc = bh_error_set(err, ENOENT, "mount %llu is not in /proc/self/mountinfo",
                          (unsigned long long)mnt_id);
    }
    bh_mountinfo_close(&mi);
    return rc;
}

struct ovl_plan {
    char *lower[MAX_LAYERS];
    size_t n_lower;
    char *upper;
    char *extra[32]; /* other options, "key" or "key=value", passed through */
    size_t n_extra;
};

static void plan_free(struct ovl_plan *p)
{
    for (size_t i = 0; i < p->n_lower; i++)
        free(p->lower[i]);
    for (size_t i = 0; i < p->n_extra; i++)
        free(p->extra[i]);
    free(p->upper);
}

/* A layer path as the overlay's mounter gave it: docker gives paths
 * relative to its overlay2 home (the rootfs's grandparent) when the
 * absolute ones do not fit a page. */
static char *layer_path(const char *home, const char *p)
{
    char *out = NULL;
    if (p[0] == '/')
        return strdup(p);
    if (asprintf(&out, "%s/%s", home, p) < 0)
        return NULL;
    return out;
}

static int plan_overlay(const char *rootfs, char *super, struct ovl_plan *p, struct bh_error *err)
{
    char home[4096];
    snprintf(home, sizeof(home), "%s", rootfs);
    for (int k = 0; k < 2; k++) {
        char *s = strrchr(home, '/');
        if (s == NULL || s == home)
            return bh_error_set(err, EINVAL, "rootfs `%s` has no parent directory", rootfs);
        *s = '\0';
    }
    char *save = NULL;
    for (char *o = strtok_r(super, ",", &save); o != NULL; o = strtok_r(NULL, ",", &save)) {
        /* Overlay's own escapes of ':' and ',' in layer paths stay
         * backslashes after mountinfo's are undone: refused. */
        if (!bh_mountinfo_unescape(o) || strchr(o, '\\') != NULL)
            return bh_error_set(err, ENOTSUP,
                                "overlay option `%s` has escaped characters: not supported", o);
        if (strncmp(o, "lowerdir=", 9) == 0 || strncmp(o, "lowerdir+=", 10) == 0) {
            char *v = o + (o[8] == '=' ? 9 : 10);
            if (strstr(v, "::") != NULL)
                return bh_error_set(err, ENOTSUP, "overlay data-only layers are not supported");
            char *s2 = NULL;
            for (char *l = strtok_r(v, ":", &s2); l != NULL; l = strtok_r(NULL, ":", &s2)) {
                if (p->n_lower >= MAX_LAYERS)
                    return bh_error_set(err, E2BIG, "more than %d overlay layers", MAX_LAYERS);
                if ((p->lower[p->n_lower++] = layer_path(home, l)) == NULL)
                    return bh_error_errno(err, ENOMEM, "overlay layer");
            }
        } else if (strncmp(o, "upperdir=", 9) == 0) {
            free(p->upper);
            if ((p->upper = layer_path(home, o + 9)) == NULL)
                return bh_error_errno(err, ENOMEM, "overlay layer");
        } else if (strncmp(o, "workdir=", 8) == 0 || strcmp(o, "rw") == 0 || strcmp(o, "ro") == 0 ||
                   strncmp(o, "index=", 6) == 0 || strncmp(o, "uuid=", 5) == 0) {
            /* work directory: our own; index: off (the upper is shared);
             * uuid: the default; ro/rw: the mount's flags */
        } else if (strncmp(o, "datadir+=", 9) == 0) {
            return bh_error_set(err, ENOTSUP, "overlay data-only layers are not supported");
        } else {
            if (p->n_extra >= BH_ARRAY_SIZE(p->extra))
                return bh_error_set(err, E2BIG, "too many overlay options");
            if ((p->extra[p->n_extra++] = strdup(o)) == NULL)
                return bh_error_errno(err, ENOMEM, "overlay option");
        }
    }
    if (p->n_lower == 0)
        return bh_error_set(err, EINVAL, "the overlay rootfs `%s` lists no lower layer", rootfs);
    if (p->upper == NULL)
        return bh_error_set(err, EINVAL,
                            "the overlay rootfs `%s` has no upper directory: it is read-only, "
                            "nothing to idmap for writing",
                            rootfs);
    return 0;
}

/* A detached clone of dir, idmapped with userns. */
static int idmapped_clone(const char *dir, int userns, struct bh_error *err)
{
    int fd = (int)syscall(SYS_open_tree, AT_FDCWD, dir, OPEN_TREE_CLONE | O_CLOEXEC);
    if (fd < 0)
        return bh_error_errno(err, errno, "clone overlay layer `%s`", dir);
    if (set_idmap(fd, userns, false) < 0) {
        int e = errno;
        close(fd);
        return bh_error_errno(err, e, "idmap overlay layer `%s`", dir);
    }
    return fd;
}

struct mount_job {
    const struct ovl_plan *plan;
    uint32_t uid, gid; /* the sandbox root's host ids */
};

/* The helper, after fork: takes the sandbox root's host ids as its fs ids
 * (keeping its capabilities), mounts the overlay, sends the mount back. */
static __attribute__((noreturn)) void mount_helper(int sock, const struct mount_job *j,
                                                   char (*paths)[64], size_t n_paths)
{
    int e = 0;
    const char *step = "set the fs ids";
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    gid_t none[1];
    if (syscall(SYS_setgroups, 0, none) < 0 || syscall(SYS_setfsgid, j->gid) < 0 ||
        syscall(SYS_setfsuid, j->uid) < 0 || syscall(SYS_capget, &h, d) < 0)
        e = errno;
    else {
        /* Changing fsuid from 0 dropped the fs capabilities: raise them again. */
        d[0].effective = d[0].permitted;
        d[1].effective = d[1].permitted;
        if (syscall(SYS_capset, &h, d) < 0)
            e = errno;
    }
    int fs = -1, mnt = -1;
    if (e == 0) {
        step = "fsopen overlay";
        fs = (int)syscall(SYS_fsopen, "overlay", FSOPEN_CLOEXEC);
        if (fs < 0)
            e = errno;
    }
    for (size_t i = 0; e == 0 && i < n_paths; i++) {
        /* paths: lower layers, then upper, then work */
        const char *key = i < j->plan->n_lower    ? "lowerdir+"
                          : i == j->plan->n_lower ? "upperdir"
                                                  : "workdir";
        step = key;
        if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, key, paths[i], 0) < 0)
            e = errno;
    }
    if (e == 0) {
        step = "index=off";
        if (syscall(SYS_fsconfig, fs, FSCONFIG_SET_STRING, "index", "off", 0) < 0)
            e = errno;
    }
    for (size_t i = 0; e == 0 && i < j->plan->n_extra; i++) {
        char kv[512];
        snprintf(kv, sizeof(kv), "%s", j->plan->extra[i]);
        char *eq = strchr(kv, '=');
        step = j->plan->extra[i];
        if (eq != NULL)
            *eq = '\0';
        if (syscall(SYS_fsconfig, fs, eq ? FSCONFIG_SET_STRING : FSCONFIG_SET_FLAG, kv,
                    eq ? eq + 1 : NULL, 0) < 0)
            e = errno;
    }
    if (e == 0) {
        step = "create the overlay";
        if (syscall(SYS_fsconfig, fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
            e = errno;
    }
    if (e == 0) {
        step = "fsmount";
        mnt = (int)syscall(SYS_fsmount, fs, FSMOUNT_CLOEXEC, 0);
        if (mnt < 0)
            e = errno;
    }
    char msg[128];
    memset(msg, 0, sizeof(msg));
    memcpy(msg, &e, sizeof(e));
    strncpy(msg + sizeof(e), step, sizeof(msg) - sizeof(e) - 1);
    bh_send_fds(sock, msg, sizeof(msg), e == 0 ? &mnt : NULL, e == 0 ? 1 : 0, NULL);
    syscall(SYS_exit_group, e == 0 ? 0 : 1);
    __builtin_unreachable();
}

static int remount_overlay(const char *rootfs, int userns, uint32_t uid, uint32_t gid,
                           struct bh_error *err)
{
    struct statx stx;
    if (statx(AT_FDCWD, rootfs, 0, STATX_MNT_ID, &stx) < 0)
        return bh_error_errno(err, errno, "rootfs `%s`", rootfs);
    if (!(stx.stx_attributes & STATX_ATTR_MOUNT_ROOT))
        return bh_error_set(err, ENOTSUP,
                            "rootfs `%s` is a directory inside an overlay mount, not the mount "
                            "itself: only a whole overlay can be idmapped (from its layers)",
                            rootfs);
    cleanup_free char *super = NULL;
    cleanup_free char *root = NULL;
    if (mount_super_opts(stx.stx_mnt_id, &super, &root, err) < 0)
        return -1;
    if (strcmp(root, "/") != 0)
        return bh_error_set(err, ENOTSUP, "rootfs `%s` is a bind of part of an overlay", rootfs);
    struct ovl_plan plan = {0};
    int rc = -1;
    int lower_fds[MAX_LAYERS];
    size_t n_fds = 0;
    int up = -1, sv[2] = {-1, -1};
    char(*paths)[64] = NULL;
    if (plan_overlay(rootfs, super, &plan, err) < 0)
        goto out;
    for (; n_fds < plan.n_lower; n_fds++) {
        lower_fds[n_fds] = idmapped_clone(plan.lower[n_fds], userns, err);
        if (lower_fds[n_fds] < 0)
            goto out;
    }
    /* Upper and work must be reached through one mount: clone the upper's
     * parent, where the work directory of our own goes too. */
    char *slash = strrchr(plan.upper, '/');
    if (slash == NULL || slash == plan.upper || slash[1] == '\0') {
        bh_error_set(err, EINVAL, "overlay upper directory `%s` has no parent", plan.upper);
        goto out;
    }
    *slash = '\0';
    const char *upper_name = slash + 1;
    {
        cleanup_close int parent = open(plan.upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (parent < 0 || (mkdirat(parent, WORK_NAME, 0700) < 0 && errno != EEXIST)) {
            bh_error_errno(err, errno, "make the work directory `%s/" WORK_NAME "`", plan.upper);
            goto out;
        }
        struct stat st;
        if (fstatat(parent, WORK_NAME, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
            st.st_uid != 0) {
            bh_error_set(err, EPERM, "`%s/" WORK_NAME "` is not a directory of host root",
                         plan.upper);
            goto out;
        }
    }
    up = idmapped_clone(plan.upper, userns, err);
    if (up < 0)
        goto out;
    size_t n_paths = plan.n_lower + 2;
    paths = calloc(n_paths, sizeof(*paths));
    if (paths == NULL) {
        bh_error_errno(err, ENOMEM, "overlay layers");
        goto out;
    }
    for (size_t i = 0; i < plan.n_lower; i++)
        snprintf(paths[i], sizeof(paths[i]), "/proc/self/fd/%d", lower_fds[i]);
    if (snprintf(paths[plan.n_lower], 64, "/proc/self/fd/%d/%s", up, upper_name) >= 64) {
        bh_error_set(err, ENAMETOOLONG, "overlay upper directory `%s`", upper_name);
        goto out;
    }
    snprintf(paths[plan.n_lower + 1], 64, "/proc/self/fd/%d/" WORK_NAME, up);
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0) {
        bh_error_errno(err, errno, "socketpair");
        goto out;
    }
    struct mount_job job = {.plan = &plan, .uid = uid, .gid = gid};
    pid_t pid = fork();
    if (pid < 0) {
        bh_error_errno(err, errno, "fork");
        goto out;
    }
    if (pid == 0)
        mount_helper(sv[1], &job, paths, n_paths);
    close(steal_fd(&sv[1]));
    char msg[128] = {0};
    int mnt = -1;
    size_t n = 0;
    ssize_t r = bh_recv_fds(sv[0], msg, sizeof(msg), &mnt, 1, &n, err);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    int e = 0;
    memcpy(&e, msg, sizeof(e));
    if (r != (ssize_t)sizeof(msg) || (e == 0 && n != 1)) {
        if (n == 1)
            close(mnt);
        bh_error_set(err, EPROTO, "the overlay helper ended without a result");
        goto out;
    }
    if (e != 0) {
        msg[sizeof(msg) - 1] = '\0';
        bh_error_errno(err, e, "mount the rootfs overlay again from idmapped layers: %s",
                       msg + sizeof(e));
        goto out;
    }
    rc = mnt;
out:
    for (size_t i = 0; i < n_fds; i++)
        close(lower_fds[i]);
    if (up >= 0)
        close(up);
    if (sv[0] >= 0)
        close(sv[0]);
    if (sv[1] >= 0)
        close(sv[1]);
    free(paths);
    plan_free(&plan);
    return rc;
}

/* Idmaps the detached rbind tree of m mount by mount. Only the root of a
 * detached tree takes mount_setattr, so each mount the host has below
 * m->source (found by its mount point, reached through the tree's fd, never
 * by a host path) is cloned out of the tree alone, idmapped as a root of its
 * own, and mounted over its original, parents before children (the
 * original stays below it, unmapped). A mount whose filesystem refuses
 * stays as it is, named in a warning. */
#define IDMAP_EACH_MAX 256
static int idmap_each(const struct bh_mount *m, int userns, const struct bh_create_opts *opts,
                      struct bh_error *err)
{
    if (set_idmap(m->tree_fd, userns, false) < 0) {
        if (errno != EINVAL && errno != EOPNOTSUPP)
            return bh_error_errno(err, errno, "idmap bind mount `%s` on `%s`", m->source,
                                  m->destination);
        warnf(opts,
              "the top of bind mount `%s` on `%s` cannot be idmapped (%s): it stays as is, so "
              "files of host root in it are not the container root's",
              m->source, m->destination, strerror(errno));
    }
    cleanup_free char *src = realpath(m->source, NULL);
    if (src == NULL)
        return bh_error_errno(err, errno, "idmap bind mount `%s`: resolve its source", m->source);
    size_t len = strcmp(src, "/") == 0 ? 0 : strlen(src);
    struct bh_mountinfo mi;
    if (bh_mountinfo_open(&mi, err) < 0)
        return bh_error_prefix(err, "idmap bind mount `%s`", m->source);
    char *rel[IDMAP_EACH_MAX];
    int piece[IDMAP_EACH_MAX];
    size_t n = 0;
    struct bh_mount_entry e;
    int rc;
    /* Every piece is cloned before any is mounted back: a clone taken
     * through a piece already in place would be the piece. */
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1) {
        if (strncmp(e.point, src, len) != 0 || e.point[len] != '/' || e.point[len + 1] == '\0')
            continue;
        const char *r = e.point + len + 1;
        bool seen = false; /* stacked mounts: the path reaches the top one */
        for (size_t i = 0; i < n && !seen; i++)
            seen = strcmp(rel[i], r) == 0;
        if (seen)
            continue;
        if (n == IDMAP_EACH_MAX) {
            rc = bh_error_set(err, E2BIG, "idmap bind mount `%s`: more than %d mounts below it",
                              m->source, IDMAP_EACH_MAX);
            break;
        }
        int fd = (int)syscall(SYS_open_tree, m->tree_fd, r,
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (fd < 0 && errno == ENOENT)
            continue; /* unmounted from the host since the clone */
        if (fd < 0) {
            rc = bh_error_errno(err, errno, "idmap bind mount `%s`: clone `%s/%s` out of it",
                                m->source, src, r);
            break;
        }
        rel[n] = strdup(r);
        piece[n++] = fd;
        if (rel[n - 1] == NULL) {
            rc = bh_error_errno(err, ENOMEM, "idmap bind mount `%s`", m->source);
            break;
        }
        if (set_idmap(fd, userns, false) == 0)
            continue;
        /* Refused: the original below stays in place, so this clone goes. */
        int code = errno;
        free(rel[--n]);
        close(fd);
        if (code != EINVAL && code != EOPNOTSUPP) {
            rc = bh_error_errno(err, code, "idmap `%s/%s` of bind mount `%s`", src, r, m->source);
            break;
        }
        warnf(opts,
              "`%s/%s` (%s) in bind mount `%s` on `%s` cannot be idmapped (%s): it stays as is, "
              "so files of host root in it are not the container root's",
              src, r, e.fstype, m->source, m->destination, strerror(code));
    }
    bh_mountinfo_close(&mi);
    for (size_t i = 0; i < n; i++) {
        if (rc >= 0 &&
            syscall(SYS_move_mount, piece[i], "", m->tree_fd, rel[i], MOVE_MOUNT_F_EMPTY_PATH) < 0)
            rc = bh_error_errno(err, errno, "idmap bind mount `%s`: mount `%s/%s` back", m->source,
                                src, rel[i]);
        close(piece[i]);
        free(rel[i]);
    }
    return rc < 0 ? -1 : 0;
}

int bh_idmap_trees(const struct bh_sandbox_spec *spec, const struct bh_create_opts *opts,
                   int userns, const struct bh_idmap *uid, size_t n_uid, const struct bh_idmap *gid,
                   size_t n_gid, int *rootfs_fd, struct bh_error *err)
{
    *rootfs_fd = -1;
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const struct bh_mount *m = &spec->mounts[i];
        if (!m->idmap || !m->has_tree_fd)
            continue;
        /* A tree made with AT_RECURSIVE may hold submounts; idmap them all
         * (the call is all or nothing). */
        if (set_idmap(m->tree_fd, userns, true) == 0)
            continue;
        int e = errno;
        if ((m->flags & MS_REC) && (e == EINVAL || e == EOPNOTSUPP)) {
            /* One mount of the rbind refuses (e.g. a v1 cgroupfs below a
             * tmpfs): idmap the others one by one, so the tree keeps every
             * submount and only the refusing ones stay as they are. */
            if (idmap_each(m, userns, opts, err) < 0)
                return -1;
            continue;
        }
        if (e != EINVAL && e != EOPNOTSUPP && e != EPERM)
            return bh_error_errno(err, e, "idmap bind mount `%s` on `%s`", m->source,
                                  m->destination);
        warnf(opts,
              "bind mount `%s` on `%s` cannot be idmapped (its filesystem refuses: %s): it "
              "stays as is, so files of host root in it are not the container root's",
              m->source, m->destination, strerror(e));
    }
    if (!spec->idmap_rootfs || !spec->has_rootfs_tree_fd)
        return 0;
    if (set_idmap(spec->rootfs_tree_fd, userns, true) == 0)
        return 0;
    int e = errno;
    struct statfs sfs;
    if (e == EINVAL && fstatfs(spec->rootfs_tree_fd, &sfs) == 0 &&
        sfs.f_type == OVERLAYFS_SUPER_MAGIC && spec->rootfs != NULL) {
        /* The sandbox root's host ids: the overlay's mounter works on the
         * layers with these. */
        uint32_t ru = UINT32_MAX, rg = UINT32_MAX;
        for (size_t i = 0; i < n_uid; i++)
            if (uid[i].inside == 0)
                ru = uid[i].outside;
        for (size_t i = 0; i < n_gid; i++)
            if (gid[i].inside == 0)
                rg = gid[i].outside;
        if (ru == UINT32_MAX || rg == UINT32_MAX || ru == 0 || rg == 0)
            return bh_error_set(err, EINVAL,
                                "idmap the rootfs `%s`: the sandbox has no root id to map to",
                                spec->rootfs);
        int fd = remount_overlay(spec->rootfs, userns, ru, rg, err);
        if (fd < 0)
            return bh_error_prefix(err, "idmap the overlay rootfs `%s`", spec->rootfs);
        *rootfs_fd = fd;
        return 0;
    }
    if (e == EINVAL || e == EOPNOTSUPP) {
        warnf(opts,
              "the rootfs `%s` cannot be idmapped (its filesystem or a mount inside it "
              "refuses: %s): files of host root in it are not the container root's",
              spec->rootfs ? spec->rootfs : "?", strerror(e));
        return 0;
    }
    return bh_error_errno(err, e, "idmap the rootfs `%s`", spec->rootfs ? spec->rootfs : "?");
}
