/* Owns the broker's file syscalls and the confined path resolution they
 * share.
 *
 * Resolution: a guest path becomes an absolute path in the guest's view
 * (relative ones are prefixed with the guest's cwd or dirfd path, read from
 * /proc/TID/{cwd,fd/N} and checked to lie inside the root), then opened with
 * openat2(root_fd, path, RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS): "/" and
 * ".." stop at the guest's root, absolute symlinks resolve inside it, magic
 * links are refused. Limits: the joined path must fit PATH_MAX; a cwd whose
 * directory was renamed between the readlink and the open resolves to
 * whatever now has the old name (still inside the root); "/dev/tty" means the
 * broker's terminal (none: ENXIO).
 *
 * /proc and /sys: the broker's own /proc/self is not the guest's, and the
 * guest's magic links must not be followed blindly. A path that starts in
 * /proc or /sys, or that lands on procfs/sysfs/cgroupfs through a symlink
 * (detected with fstatfs after the fast open), is walked component by
 * component instead (walk()): /proc/self and /proc/thread-self become the
 * guest's pid, the guest's own magic links are answered through the guest
 * (fd/N reopens the guest's own file via pidfd_getfd; cwd, root and exe
 * become their paths inside the root, refused when outside), and every
 * symlink is expanded by the broker so that the final open can forbid them
 * all (RESOLVE_NO_SYMLINKS): a symlink swapped in meanwhile fails, never
 * redirects. Refused: anything of the sentry but its comm (EACCES); another
 * process's
 * entries beyond a short list of harmless ones (stat, status, cmdline, ...:
 * the broker holds CAP_SYS_PTRACE, the guest does not); writing the guest's
 * own mem or exe (EACCES); writes under /proc/sys, /sys and cgroupfs (EROFS);
 * any other write under /proc (EACCES, as the guest's Landlock domain, which
 * the broker does not run in, would answer). Which process a path names is
 * decided from the whole symlink-free path after every step, so ".." can
 * never make /proc/P/task/P/../P/mem look like no process's; a pid whose
 * thread group cannot be read, and a procfs reached anywhere but at /proc,
 * are refused.
 *
 * Landlock: the broker runs outside the guest's Landlock domain, so beyond
 * /proc it enforces the root, the mounts' read-only flags and the guest's
 * ids, not Landlock's write rules. For Landlock to bind brokered calls too,
 * the sentry must enter the guests' ruleset itself before it starts the
 * broker and spawns guests (their domains then nest under the sentry's,
 * which Landlock's ptrace scoping requires for the broker to read them).
 *
 * Every call runs with the guest thread's fs ids (bh_req_become_guest), so
 * the kernel's permission checks are the guest's own. */
#include "broker-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

#include "cleanup.h"
#include "kernel-compat.h"
#include "proc-status.h"

#define RES_TEXT (-200000) /* resolve(): the answer is link text, no fd */
#define WRITE_FLAGS (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND)
#define VALID_OPEN_FLAGS                                                                           \
    (O_ACCMODE | O_CREAT | O_EXCL | O_NOCTTY | O_TRUNC | O_APPEND | O_NONBLOCK | O_DSYNC |         \
     FASYNC | O_DIRECT | O_LARGEFILE | O_DIRECTORY | O_NOFOLLOW | O_NOATIME | O_CLOEXEC | O_SYNC | \
     O_PATH | O_TMPFILE)

static long sys_openat2_raw(int dirfd, const char *path, struct open_how *how)
{
    long fd = syscall(SYS_openat2, dirfd, path, how, sizeof(*how));
    return fd < 0 ? -errno : fd;
}

/* O_NOCTTY: a terminal opened for a guest never becomes the sentry's
 * controlling terminal (openat2 refuses it next to O_PATH). */
static uint64_t how_flags(uint64_t flags)
{
    flags |= O_CLOEXEC;
    if (!(flags & O_PATH))
        flags |= O_NOCTTY;
    return flags;
}

/* O_TMPFILE contains O_DIRECTORY's bit: test it whole. */
static bool creates(uint64_t flags)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE;
}

static bool is_write_open(uint64_t flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND)) != 0 ||
           (flags & O_TMPFILE) == O_TMPFILE;
}

/* ---- paths in the guest's view ---------------------------------------- */

/* Turns a path the kernel printed for the broker into the guest's view;
 * -EACCES when it lies outside the guest's root. */
static int to_guest_view(struct bh_broker *b, char *p)
{
    if (p[0] != '/')
        return strncmp(p, "(unreachable)", 13) == 0 ? -EACCES : -ENOTDIR;
    if (b->root_len == 0)
        return 0;
    if (strncmp(p, b->root_path, b->root_len) != 0 ||
        (p[b->root_len] != '/' && p[b->root_len] != '\0'))
        return -EACCES;
    size_t rest = strlen(p + b->root_len);
    memmove(p, p + b->root_len, rest + 1);
    if (p[0] == '\0')
        strcpy(p, "/");
    return 0;
}

/* Reads a magic link of a guest thread (cwd, fd/N, exe) as a guest path. */
static int guest_link_path(struct bh_req *r, const char *proc_rel, char *out, size_t cap,
                           bool dir_expected)
{
    char link[64];
    snprintf(link, sizeof(link), "/proc/%d/%s", r->n->pid, proc_rel);
    ssize_t n = readlink(link, out, cap - 1);
    if (n < 0)
        return errno == ENOENT && strncmp(proc_rel, "fd/", 3) == 0 ? -EBADF : -errno;
    out[n] = '\0';
    static const char deleted[] = " (deleted)";
    size_t dl = sizeof(deleted) - 1;
    if ((size_t)n > dl && strcmp(out + n - dl, deleted) == 0) {
        struct stat st;
        if (stat(link, &st) == 0 && st.st_nlink == 0)
            return -ENOENT;
    }
    int rc = to_guest_view(r->b, out);
    if (rc == -ENOTDIR && !dir_expected)
        return 0; /* pipe:[N], socket:[N]: returned as they are */
    return rc;
}

/* The guest-view absolute form of (dirfd, path). */
static int guest_abs_path(struct bh_req *r, int dirfd, const char *path, char *out, size_t cap)
{
    if (path[0] == '/') {
        if (strlen(path) >= cap)
            return -ENAMETOOLONG;
        strcpy(out, path);
        return 0;
    }
    char rel[32];
    if (dirfd == AT_FDCWD)
        strcpy(rel, "cwd");
    else if (dirfd < 0)
        return -EBADF;
    else
        snprintf(rel, sizeof(rel), "fd/%d", dirfd);
    int rc = guest_link_path(r, rel, out, cap, true);
    if (rc < 0)
        return rc;
    size_t len = strlen(out);
    if (len + 1 + strlen(path) + 1 > cap)
        return -ENAMETOOLONG;
    if (len > 1)
        out[len++] = '/';
    strcpy(out + len, path);
    return 0;
}

/* First component of an absolute path, ignoring "//" and "/./". */
static bool starts_with_dir(const char *p, const char *dir)
{
    size_t dl = strlen(dir);
    for (;;) {
        while (*p == '/')
            p++;
        if (p[0] == '.' && (p[1] == '/' || p[1] == '\0')) {
            p++;
            continue;
        }
        break;
    }
    return strncmp(p, dir, dl) == 0 && (p[dl] == '/' || p[dl] == '\0');
}

static bool special_fs(int fd, long *type)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0)
        return true; /* unknown: take the careful road */
    *type = sf.f_type;
    return sf.f_type == PROC_SUPER_MAGIC || sf.f_type == SYSFS_MAGIC ||
           sf.f_type == CGROUP_SUPER_MAGIC || sf.f_type == CGROUP2_SUPER_MAGIC;
}

/* ---- the /proc-aware walk ---------------------------------------------- */

struct walk {
    char canon[PATH_MAX]; /* guest view, no symlinks left (but a kept last one) */
    int guest_fd;         /* >= 0: the answer is the guest's own fd N */
    char text[PATH_MAX];  /* RES_TEXT: a link the guest reads itself */
    bool has_text;
    pid_t proc_pid;               /* canon is under /proc/N: N */
    bool proc_own;                /* N belongs to the guest's thread group */
    bool proc_sentry;             /* N is the sentry: only its comm may be read */
    int proc_depth;               /* components after /proc/N, task/T counted out */
    char proc_file[NAME_MAX + 1]; /* first component after /proc/N[/task/T] */
};

static pid_t tgid_of(pid_t pid)
{
    char buf[512]; /* Tgid is on the fourth line */
    cleanup_close int fd = bh_status_open(AT_FDCWD, pid);
    if (fd < 0 || bh_status_read(fd, buf, sizeof(buf)) < 0)
        return -1;
    char *t = strstr(buf, "\nTgid:");
    return t ? (pid_t)strtol(t + 6, NULL, 10) : -1;
}

static bool all_digits(const char *s)
{
    if (*s == '\0')
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* Number of components and the i-th one of canon (0-based). */
static int canon_split(const char *canon, const char *parts[], size_t lens[], int max)
{
    int n = 0;
    for (const char *p = canon; *p;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (n < max) {
            parts[n] = p;
            lens[n] = l;
        }
        n++;
        p += l;
    }
    return n;
}

static bool part_is(const char *p, size_t l, const char *s)
{
    return strlen(s) == l && memcmp(p, s, l) == 0;
}

/* Which guest magic link canon names: 0 none, else its kind. */
enum magic { M_NONE, M_FD, M_CWD, M_ROOT, M_EXE, M_OTHER };

static enum magic classify_magic(struct walk *w, int *fdnum)
{
    const char *parts[8];
    size_t lens[8];
    int n = canon_split(w->canon, parts, lens, 8);
    if (n < 3 || !part_is(parts[0], lens[0], "proc") || w->proc_pid <= 0)
        return M_NONE;
    int i = 2;
    if (n >= 4 && part_is(parts[2], lens[2], "task"))
        i = 4;
    if (i >= n || i >= 8)
        return M_NONE;
    int left = n - i;
    const char *p = parts[i];
    size_t l = lens[i];
    if (left == 1) {
        if (part_is(p, l, "cwd"))
            return M_CWD;
        if (part_is(p, l, "root"))
            return M_ROOT;
        if (part_is(p, l, "exe"))
            return M_EXE;
    } else if (left == 2 && i + 1 < 8) {
        if (part_is(p, l, "fd")) {
            char num[16];
            if (lens[i + 1] >= sizeof(num))
                return M_OTHER;
            memcpy(num, parts[i + 1], lens[i + 1]);
            num[lens[i + 1]] = '\0';
            if (!all_digits(num))
                return M_NONE;
            *fdnum = atoi(num);
            return M_FD;
        }
        if (part_is(p, l, "ns") || part_is(p, l, "map_files"))
            return M_OTHER;
    }
    return M_NONE;
}

static void canon_pop(struct walk *w)
{
    char *s = strrchr(w->canon, '/');
    if (s != NULL)
        *s = '\0';
}

static int canon_push(struct walk *w, const char *name)
{
    size_t len = strlen(w->canon), nl = strlen(name);
    if (len + 1 + nl + 1 > sizeof(w->canon))
        return -ENAMETOOLONG;
    w->canon[len] = '/';
    memcpy(w->canon + len + 1, name, nl + 1);
    return 0;
}

/* Which process the walk is under, decided again from the whole canonical
 * path after every step (push, "..", a link restarting it): canon holds no
 * symlink, so its text names exactly the directory reached. State kept
 * across steps would be wrong after "..": /proc/P/task/P/.. is /proc/P/task,
 * still P's, and the next component must still count as P's. A task
 * directory counts too: /proc/P/task/T is T's, and is the guest's own only
 * when both P and T are in its thread group. A pid whose thread group cannot
 * be read (it ended, or never existed) is a refusal, never "no process". */
static int note_proc(struct bh_req *r, struct walk *w)
{
    w->proc_pid = 0;
    w->proc_own = false;
    w->proc_sentry = false;
    const char *parts[4];
    size_t lens[4];
    int n = canon_split(w->canon, parts, lens, 4);
    if (n < 2 || !part_is(parts[0], lens[0], "proc"))
        return 0;
    pid_t ids[2];
    int nids = 0;
    for (int i = 1; i < n && i < 4 && nids < 2; i += 2) {
        char num[16];
        if (i == 3 && !part_is(parts[2], lens[2], "task"))
            break;
        if (lens[i] >= sizeof(num))
            return i == 1 ? 0 : -ENOENT;
        memcpy(num, parts[i], lens[i]);
        num[lens[i]] = '\0';
        if (!all_digits(num))
            return i == 1 ? 0 : -ENOENT; /* /proc/meminfo; /proc/P/task/x: none */
        ids[nids++] = (pid_t)atoi(num);
    }
    if (nids == 0)
        return 0;
    bool own = true, sentry = false;
    for (int i = 0; i < nids; i++) {
        pid_t pid = ids[i];
        pid_t tgid = pid == r->g->tid || pid == r->g->tgid ? r->g->tgid : tgid_of(pid);
        if (tgid <= 0) {
            bh_debug(r, "refused: no process behind %s", w->canon);
            return -ENOENT;
        }
        if (tgid == r->b->self_pid ||
            (r->b->cfg.sentry_pid > 0 &&
             (pid == r->b->cfg.sentry_pid || tgid == r->b->cfg.sentry_pid) &&
             r->b->cfg.sentry_pid != r->g->tgid))
            sentry = true;
        if (tgid != r->g->tgid)
            own = false;
    }
    w->proc_pid = ids[0];
    w->proc_own = own;
    w->proc_sentry = sentry;
    return 0;
}

/* Of the sentry's /proc entries only its comm and status may be read: its
 * name is no secret and lets a guest tell it runs under bulkhead, and
 * container tools read the container's umask and state from pid 1's status
 * (the confinement it shows is the documented one); the walk may pass
 * through /proc/N to get there. Everything else: EACCES. */
static bool sentry_entry_ok(struct bh_req *r, const struct walk *w, bool final)
{
    const char *parts[4];
    size_t lens[4];
    int n = canon_split(w->canon, parts, lens, 4);
    if ((n == 2 && !final) ||
        (n == 3 && (part_is(parts[2], lens[2], "comm") || part_is(parts[2], lens[2], "status"))))
        return true;
    bh_debug(r, "refused: %s belongs to the sentry", w->canon);
    return false;
}

/* A task's entries another process may read (no ptrace access needed). */
static bool harmless_for_others(const char *name)
{
    static const char *const ok[] = {"stat", "status",   "statm",     "cmdline",
                                     "comm", "cgroup",   "oom_score", "oom_score_adj",
                                     "task", "loginuid", "sessionid", NULL};
    for (int i = 0; ok[i]; i++)
        if (strcmp(name, ok[i]) == 0)
            return true;
    return false;
}

/* Refusals decided on the final canonical path. */
static int check_canon(struct bh_req *r, struct walk *w, uint64_t flags)
{
    const char *parts[6];
    size_t lens[6];
    int n = canon_split(w->canon, parts, lens, 6);
    bool write = is_write_open(flags);
    int rc = note_proc(r, w); /* from the final path alone */
    if (rc < 0)
        return rc;
    if (w->proc_sentry && (write || !sentry_entry_ok(r, w, true)))
        return -EACCES;
    if (n >= 1 && part_is(parts[0], lens[0], "sys") && write)
        return -EROFS;
    if (n < 1 || !part_is(parts[0], lens[0], "proc"))
        return 0;
    if (n >= 2 && part_is(parts[1], lens[1], "sys") && write)
        return -EROFS;
    if (write) {
        /* The guest's Landlock domain grants no write under /proc; the
         * broker, outside that domain, refuses the same (reopening the
         * guest's own fd through /proc/self/fd/N is not a /proc write). */
        bh_debug(r, "refused: writing %s", w->canon);
        return -EACCES;
    }
    if (w->proc_pid <= 0 || n < 3)
        return 0;
    int i = 2;
    if (n >= 4 && part_is(parts[2], lens[2], "task")) {
        if (n == 4)
            return 0; /* the task directory itself: a listing */
        i = 4;
    }
    if (i >= n || i >= 6)
        return 0;
    char name[NAME_MAX + 1];
    size_t l = lens[i] < NAME_MAX ? lens[i] : NAME_MAX;
    memcpy(name, parts[i], l);
    name[l] = '\0';
    if (!w->proc_own) {
        if (!harmless_for_others(name)) {
            bh_debug(r, "refused: /proc/%d/%s of another process", w->proc_pid, name);
            return -EACCES;
        }
        return write ? -EACCES : 0;
    }
    if (strcmp(name, "mem") == 0 && (flags & O_ACCMODE) != O_RDONLY) {
        bh_debug(r, "refused: writing its own /proc/PID/mem bypasses page protections");
        return -EACCES;
    }
    return 0;
}

/* rest = target "/" remaining (tmp: scratch of the same 2*PATH_MAX size). */
static int restart_from(char *rest, char *tmp, const char *target, const char *remaining)
{
    size_t tl = strlen(target), rl = strlen(remaining);
    if (tl + 1 + rl + 1 > 2 * PATH_MAX)
        return -ENAMETOOLONG;
    memcpy(tmp, target, tl);
    tmp[tl] = '/';
    memcpy(tmp + tl + 1, remaining, rl + 1);
    memcpy(rest, tmp, tl + rl + 2);
    return 0;
}

/* Walks abs (guest view) as the guest's kernel would, from the broker. */
static int walk(struct bh_req *r, const char *abs, bool follow_last, uint64_t flags, struct walk *w)
{
    struct bh_broker *b = r->b;
    cleanup_free char *rest = malloc(2 * PATH_MAX);
    cleanup_free char *tmp = malloc(2 * PATH_MAX);
    char link[PATH_MAX];
    if (rest == NULL || tmp == NULL)
        return -ENOMEM;
    /* rest and tmp are freed by cleanup_free, which cppcheck cannot see. */
    if (strlen(abs) >= 2 * PATH_MAX)
        return -ENAMETOOLONG; // cppcheck-suppress memleak
    strcpy(rest, abs);
    w->canon[0] = '\0';
    w->guest_fd = -1;
    w->has_text = false;
    w->proc_pid = 0;
    w->proc_sentry = false;
    w->proc_own = false;
    int links = 0;
    char *p = rest;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > NAME_MAX)
            return -ENAMETOOLONG;
        char name[NAME_MAX + 1];
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        const char *q = p;
        while (*q == '/')
            q++;
        bool last = *q == '\0';
        if (strcmp(name, ".") == 0)
            continue;
        if (strcmp(name, "..") == 0) {
            canon_pop(w);
            int rc = note_proc(r, w);
            if (rc < 0)
                return rc;
            continue;
        }
        if (strcmp(w->canon, "/proc") == 0 &&
            (strcmp(name, "self") == 0 || strcmp(name, "thread-self") == 0)) {
            bool thread = name[0] == 't';
            if (last && !follow_last) {
                if (thread)
                    snprintf(w->text, sizeof(w->text), "%d/task/%d", r->g->tgid, r->g->tid);
                else
                    snprintf(w->text, sizeof(w->text), "%d", r->g->tgid);
                w->has_text = true;
                return canon_push(w, name);
            }
            snprintf(name, sizeof(name), "%d", r->g->tgid);
            int rc = canon_push(w, name);
            if (rc == 0 && thread) {
                snprintf(name, sizeof(name), "%d", r->g->tid);
                rc = canon_push(w, "task");
                if (rc == 0)
                    rc = canon_push(w, name);
            }
            if (rc == 0)
                rc = note_proc(r, w);
            if (rc < 0)
                return rc;
            continue;
        }
        int rc = canon_push(w, name);
        if (rc == 0)
            rc = note_proc(r, w);
        if (rc < 0)
            return rc;
        if (w->proc_sentry && !sentry_entry_ok(r, w, false))
            return -EACCES;

        int fdnum = -1;
        enum magic m = classify_magic(w, &fdnum);
        if (m != M_NONE) {
            if (!w->proc_own || m == M_OTHER) {
                bh_debug(r, "refused: magic link %s", w->canon);
                return -EACCES;
            }
            /* The guest's own link, seen through the guest's thread. */
            const char *after = strrchr(w->canon, '/') + 1;
            char rel[32];
            if (m == M_FD)
                snprintf(rel, sizeof(rel), "fd/%d", fdnum);
            else
                snprintf(rel, sizeof(rel), "%s", after);
            if (last && !follow_last) {
                rc = guest_link_path(r, rel, w->text, sizeof(w->text), false);
                if (rc < 0)
                    return rc;
                w->has_text = true;
                return 0;
            }
            if (m == M_FD && last) {
                w->guest_fd = fdnum;
                return 0;
            }
            if (m == M_ROOT) {
                strcpy(link, "/");
            } else {
                rc = guest_link_path(r, rel, link, sizeof(link), true);
                if (rc < 0)
                    return rc;
            }
            if (m == M_EXE && !last)
                return -ENOTDIR;
            if (m == M_EXE && is_write_open(flags)) {
                bh_debug(r, "refused: writing the running program through /proc/PID/exe");
                return -EACCES;
            }
            /* Continue from the link's target (an absolute guest path). */
            if ((rc = restart_from(rest, tmp, link, p)) < 0)
                return rc;
            p = rest;
            w->canon[0] = '\0';
            if ((rc = note_proc(r, w)) < 0)
                return rc;
            if (++links > 40)
                return -ELOOP;
            continue;
        }

        ssize_t n = readlinkat(b->root_fd, w->canon + 1, link, sizeof(link) - 1);
        if (n < 0) {
            if (errno == EINVAL)
                continue; /* not a symlink */
            if (errno == ENOENT && last)
                return 0; /* to be created, or ENOENT from the open */
            return -errno;
        }
        if (last && !follow_last)
            return 0;
        link[n] = '\0';
        if (++links > 40)
            return -ELOOP;
        canon_pop(w);
        if (link[0] == '/')
            w->canon[0] = '\0';
        if ((rc = restart_from(rest, tmp, link, p)) < 0)
            return rc;
        p = rest;
        if ((rc = note_proc(r, w)) < 0)
            return rc;
    }
    if (w->canon[0] == '\0')
        strcpy(w->canon, "/");
    return 0;
}

/* Reopens the guest's own fd N with new flags, as /proc/self/fd/N does. */
static int reopen_guest_fd(struct bh_req *r, int guest_fd, uint64_t flags)
{
    cleanup_close int copy = bh_req_getfd(r, guest_fd);
    if (copy < 0)
        return copy;
    if ((flags & O_NOFOLLOW) && !(flags & O_PATH))
        return -ELOOP;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", copy);
    bh_blocking_begin();
    int fd = open(path, (int)((flags & ~(uint64_t)O_NOFOLLOW) | O_CLOEXEC | O_NOCTTY));
    bh_blocking_end();
    return fd < 0 ? -errno : fd;
}

static int slow_open(struct bh_req *r, const char *abs, uint64_t flags, uint64_t mode,
                     char *text_out)
{
    struct walk *w = malloc(sizeof(*w));
    if (w == NULL)
        return -ENOMEM;
    bool follow = !(flags & O_NOFOLLOW);
    int rc = walk(r, abs, follow, flags, w);
    if (rc == 0 && w->has_text) {
        if (text_out != NULL) {
            strcpy(text_out, w->text);
            rc = RES_TEXT;
        } else if (!(flags & O_PATH)) {
            rc = -ELOOP;
        }
    }
    if (rc == 0 && w->guest_fd >= 0) {
        rc = reopen_guest_fd(r, w->guest_fd, flags);
        free(w);
        return rc;
    }
    if (rc == 0)
        rc = check_canon(r, w, flags);
    if (rc == 0) {
        struct open_how how = {
            .flags = how_flags(flags),
            .mode = creates(flags) ? mode : 0,
            .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
        };
        bh_blocking_begin();
        rc = (int)sys_openat2_raw(r->b->root_fd, w->canon, &how);
        bh_blocking_end();
        long type = 0;
        bool special = rc >= 0 && special_fs(rc, &type);
        if (special && type == PROC_SUPER_MAGIC && !starts_with_dir(w->canon, "proc")) {
            /* A procfs somewhere else (a spec's mount) would escape every
             * per-process check above, which reads /proc/N from the path. */
            bh_debug(r, "refused: %s is a procfs outside /proc", w->canon);
            close(rc);
            rc = -EACCES;
        } else if (special && is_write_open(flags) && type != PROC_SUPER_MAGIC) {
            close(rc);
            rc = -EROFS;
        }
    }
    free(w);
    return rc;
}

/* ---- the parent-directory cache ---------------------------------------- */

static bool has_dotdot(const char *p)
{
    for (const char *c = p; (c = strstr(c, "..")) != NULL; c += 2)
        if ((c == p || c[-1] == '/') && (c[2] == '/' || c[2] == '\0'))
            return true;
    return false;
}

/* Each worker keeps an O_PATH fd of the directory its last plain lookups
 * resolved in, so that the next create, open, stat or unlink there walks
 * one component instead of the whole path (sentry/README.md, "The
 * parent-directory cache", has the reasoning). An entry is used only while
 *  - its path string is the parent of the call's path, which like the
 *    entry's is plain: absolute in the guest's view after the cwd is
 *    joined, no "..", not under /proc or /sys, and the broker saw no special
 *    filesystem mounted elsewhere (plain_paths): the same conditions under
 *    which a fresh walk's result is taken as landing where the path says;
 *  - no brokered call has since changed which directory a path names or
 *    who may search it (names_gen, bumped by the dispatch around every call
 *    whose table entry says BH_NAMES_DIRS: rename, rmdir, mkdir, chmod,
 *    chown, all brokered at the kernel tier, fchmod and fchown included);
 *    the guest has no other way to change them (mount, bind mounts and the
 *    xattr calls that set ACLs are refused);
 *  - the worker runs under the ids it was filled under (bh_worker_ids_epoch):
 *    the walk it skips checked search permission on every ancestor for them;
 *  - the directory lies on a tmpfs the sandbox made (config.own_tmpfs),
 *    mounted whole (mount root = the filesystem's root) at or below the
 *    guest's root, so that no rename by anyone can take it anywhere the
 *    guest's root does not reach, and no rename the broker does not see
 *    (the host's, in a tmpfs it shares in) can make a name stale: a tree
 *    shared with the host or bound from a part of a filesystem is never
 *    cached.
 * An entry is filled only for a parent seen twice in a row with nothing
 * changed in between, so a call in a new directory pays no extra syscall. */
struct dir_cache {
    char path[PATH_MAX]; /* the parent, as the guest's path spelled it */
    size_t len;          /* 0: empty */
    int fd;              /* O_PATH on it; -1: seen once, not opened */
    bool unusable;       /* not cacheable (not a whole tmpfs in the root) */
    uint64_t gen, epoch;
    uint64_t mnt_id; /* the last mount judged, and the verdict */
    bool mnt_ok;
};
static __thread struct dir_cache dcache = {.fd = -1};

void bh_dir_cache_drop(void)
{
    if (dcache.fd >= 0)
        close(dcache.fd);
    dcache.fd = -1;
    dcache.len = 0;
}

static bool is_own_tmpfs(const struct bh_broker *b, dev_t dev)
{
    for (size_t i = 0; i < b->n_own_tmpfs; i++)
        if (b->own_tmpfs[i] == dev)
            return true;
    return false;
}

/* The mount of fd shows a whole tmpfs the sandbox made itself, mounted at or
 * below the root. */
static bool whole_tmpfs_in_root(struct bh_broker *b, int fd)
{
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC)
        return false;
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_MNT_ID_UNIQUE, &stx) < 0 ||
        !(stx.stx_mask & STATX_MNT_ID_UNIQUE))
        return false;
    if (stx.stx_mnt_id == dcache.mnt_id && dcache.mnt_id != 0)
        return dcache.mnt_ok;
    /* A tmpfs the host shares (a bind of its /dev/shm) shows whole too,
     * but the host's renames there reach no broker: only superblocks made
     * for this sandbox, whose names only its guests change. */
    if (!is_own_tmpfs(b, makedev(stx.stx_dev_major, stx.stx_dev_minor))) {
        dcache.mnt_id = stx.stx_mnt_id;
        dcache.mnt_ok = false;
        return false;
    }
    union {
        struct statmount sm;
        char buf[sizeof(struct statmount) + 2 * PATH_MAX];
    } u;
    struct mnt_id_req req = {.size = sizeof(req),
                             .mnt_id = stx.stx_mnt_id,
                             .param = STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT};
    bool ok = false;
    if (syscall(SYS_statmount, &req, &u.sm, sizeof(u), 0) == 0 &&
        (u.sm.mask & (STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT)) ==
            (STATMOUNT_MNT_ROOT | STATMOUNT_MNT_POINT)) {
        const char *root = u.sm.str + u.sm.mnt_root, *point = u.sm.str + u.sm.mnt_point;
        ok = strcmp(root, "/") == 0 &&
             (b->root_len == 0 || (strncmp(point, b->root_path, b->root_len) == 0 &&
                                   (point[b->root_len] == '/' || point[b->root_len] == '\0')));
    }
    dcache.mnt_id = stx.stx_mnt_id;
    dcache.mnt_ok = ok;
    return ok;
}

/* Where abs's last component starts, or 0 when abs does not qualify (not a
 * plain absolute path, or its last name is empty, "." or ".."). */
static size_t last_name_at(struct bh_req *r, const char *abs)
{
    if (!r->b->plain_paths || abs[0] != '/' || starts_with_dir(abs, "proc") ||
        starts_with_dir(abs, "sys") || has_dotdot(abs))
        return 0;
    const char *slash = strrchr(abs, '/');
    const char *last = slash + 1;
    if (last[0] == '\0' || strcmp(last, ".") == 0)
        return 0;
    return (size_t)(last - abs);
}

/* The cached fd of the directory dir[0, len) names (a plain absolute path),
 * or -1: the caller walks from the root. */
static int dir_cache_get(struct bh_req *r, const char *dir, size_t len)
{
    struct bh_broker *b = r->b;
    if (len >= sizeof(dcache.path))
        return -1;
    uint64_t gen = atomic_load(&b->names_gen);
    uint64_t epoch = bh_worker_ids_epoch();
    bool same = dcache.len == len && memcmp(dcache.path, dir, len) == 0;
    bool current = same && dcache.gen == gen && dcache.epoch == epoch;
    if (current && dcache.fd >= 0)
        return dcache.fd;
    if (!current || dcache.unusable) {
        if (!current) {
            if (dcache.fd >= 0)
                close(dcache.fd);
            dcache.fd = -1;
            memcpy(dcache.path, dir, len);
            dcache.path[len] = '\0';
            dcache.len = len;
            dcache.unusable = false;
            dcache.gen = gen;
            dcache.epoch = epoch;
        }
        return -1;
    }
    /* Seen twice with nothing changed since: open it, as a walk from the
     * root under the caller's ids. */
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
    };
    int fd = (int)sys_openat2_raw(b->root_fd, dcache.path, &how);
    if (fd < 0 || !whole_tmpfs_in_root(b, fd)) {
        if (fd >= 0)
            close(fd);
        dcache.unusable = true;
        return -1;
    }
    dcache.fd = fd;
    return fd;
}

/* The last name of abs opened from the cached parent: an fd, -errno (the
 * answer), or -EAGAIN when the cache cannot answer (no entry; a symlink,
 * which the walk from the root handles). */
static int dir_cache_open(struct bh_req *r, const char *abs, uint64_t flags, uint64_t mode)
{
    size_t at = last_name_at(r, abs);
    if (at == 0)
        return -EAGAIN;
    int dfd = dir_cache_get(r, abs, at > 1 ? at - 1 : 1); /* "/tmp/f": "/tmp"; "/f": "/" */
    if (dfd < 0)
        return -EAGAIN;
    struct open_how how = {
        .flags = how_flags(flags),
        .mode = creates(flags) ? mode : 0,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS,
    };
    bh_blocking_begin();
    int fd = (int)sys_openat2_raw(dfd, abs + at, &how);
    bh_blocking_end();
    if (fd == -ELOOP || fd == -EAGAIN)
        return -EAGAIN;
    atomic_fetch_add(&r->b->n_dir_cache_hits, 1);
    return fd;
}

/* The core: (dirfd, path) with open flags to an fd, confined (see above).
 * With text_out, a final own magic link not to be followed is answered as
 * its text (RES_TEXT). */
static int resolve(struct bh_req *r, int dirfd, const char *path, uint64_t flags, uint64_t mode,
                   uint64_t extra_resolve, char *text_out, struct stat *st_out);

/* With st_out (O_PATH only), the fd's stat comes back too: for a stat the
 * check for /proc is then a comparison with /proc's device, not a syscall. */
static int resolve_st(struct bh_req *r, int dirfd, const char *path, uint64_t flags, uint64_t mode,
                      uint64_t extra_resolve, char *text_out, struct stat *st_out)
{
    int fd = resolve(r, dirfd, path, flags, mode, extra_resolve, text_out, st_out);
    if (fd >= 0 && st_out != NULL && st_out->st_ino == 0 && fstat(fd, st_out) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* Whether the last resolve() on this thread took the plain path: no
 * symlink followed, no "..", not under /proc or /sys, and the broker knows
 * no special filesystem is mounted elsewhere: so it did not land on one. */
static __thread bool resolved_plain;

static int resolve(struct bh_req *r, int dirfd, const char *path, uint64_t flags, uint64_t mode,
                   uint64_t extra_resolve, char *text_out, struct stat *st_out)
{
    resolved_plain = false;
    if (st_out != NULL)
        st_out->st_ino = 0; /* not filled yet */
    if (path[0] == '\0')
        return -ENOENT;
    char abs[PATH_MAX * 2];
    int rc = guest_abs_path(r, dirfd, path, abs, sizeof(abs));
    if (rc < 0)
        return rc;
    if (starts_with_dir(abs, "proc") || starts_with_dir(abs, "sys"))
        return slow_open(r, abs, flags, mode, text_out);
    if (extra_resolve == 0) {
        int cached = dir_cache_open(r, abs, flags, mode);
        if (cached != -EAGAIN) {
            resolved_plain = cached >= 0;
            return cached;
        }
    }
    /* First without following any symlink: most paths have none. */
    struct open_how how = {
        .flags = how_flags(flags),
        .mode = creates(flags) ? mode : 0,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS | extra_resolve,
    };
    bh_blocking_begin();
    int fd = (int)sys_openat2_raw(r->b->root_fd, abs, &how);
    bh_blocking_end();
    if (fd >= 0 && r->b->plain_paths && !has_dotdot(abs)) {
        /* No symlink, no "..": it landed where the path says, and no
         * procfs, sysfs or cgroupfs is mounted there (plain_paths). */
        resolved_plain = true;
        return fd;
    }
    if (fd < 0 && fd != -ELOOP)
        return fd; /* failed before any symlink: the guest's own walk fails there too */
    if (fd == -ELOOP) {
        if (extra_resolve & RESOLVE_NO_SYMLINKS)
            return fd; /* the guest's own restriction said no */
        /* A symlink on the way (or a loop, or O_NOFOLLOW on one): again,
         * following symlinks in the root, but no magic link. */
        how.resolve &= ~(uint64_t)RESOLVE_NO_SYMLINKS;
        bh_blocking_begin();
        fd = (int)sys_openat2_raw(r->b->root_fd, abs, &how);
        bh_blocking_end();
        if (fd < 0 && extra_resolve != 0)
            return fd; /* the guest's own restriction said no: no second try */
        if (fd == -ELOOP)
            return slow_open(r, abs, flags, mode, text_out); /* a magic link on the way */
        /* Another failure than without symlinks: it came after a symlink,
         * which may have led into the broker's own /proc (/proc/self/fd/N:
         * no such fd here): the walk decides. */
        if (fd < 0 && fd != -ENOMEM && fd != -EMFILE && fd != -ENFILE && fd != -EINTR)
            return slow_open(r, abs, flags, mode, text_out);
        if (fd < 0)
            return fd;
    }
    if (st_out != NULL && (flags & O_PATH) && r->b->proc_dev != 0) {
        /* An O_PATH fd writes nothing, so only /proc (whose "self" is not
         * the guest's) needs the walk. */
        if (fstat(fd, st_out) < 0 || st_out->st_dev == r->b->proc_dev) {
            close(fd);
            st_out->st_ino = 0;
            return slow_open(r, abs, flags, mode, text_out);
        }
        return fd;
    }
    long type = 0;
    if (special_fs(fd, &type)) {
        /* Reached /proc, /sys or a cgroupfs through a symlink: walk it. */
        close(fd);
        return slow_open(r, abs, flags, mode, text_out);
    }
    return fd;
}

int bh_resolve_open(struct bh_req *r, int dirfd, const char *path, uint64_t flags, uint64_t mode)
{
    int rc = resolve(r, dirfd, path, flags, mode, 0, NULL, NULL);
    return rc == RES_TEXT ? -ELOOP : rc;
}

static int resolve_parent(struct bh_req *r, int dirfd, const char *path, char *last,
                          bool *borrowed);

int bh_resolve_parent(struct bh_req *r, int dirfd, const char *path, char *last)
{
    bool borrowed = false;
    int fd = resolve_parent(r, dirfd, path, last, &borrowed);
    if (fd >= 0 && borrowed) {
        fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
        return fd < 0 ? -errno : fd;
    }
    return fd;
}

/* As bh_resolve_parent, but the parent may be the worker's cached fd
 * (*borrowed): the caller must not close it. */
static int resolve_parent(struct bh_req *r, int dirfd, const char *path, char *last, bool *borrowed)
{
    *borrowed = false;
    size_t len = strlen(path);
    if (len == 0)
        return -ENOENT;
    /* Keep one trailing slash on the last name: the kernel then refuses a
     * non-directory as the guest's own call would. */
    size_t end = len;
    while (end > 1 && path[end - 1] == '/')
        end--;
    bool slash = end < len;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t nl = end - start;
    if (nl == 0) /* "/" itself */
        nl = 1, start = 0, slash = false;
    if (nl > NAME_MAX)
        return -ENAMETOOLONG;
    memcpy(last, path + start, nl);
    last[nl] = '\0';
    if (slash)
        strcat(last, "/");
    char parent[PATH_MAX];
    if (start == 0) {
        strcpy(parent, path[0] == '/' ? "/" : ".");
        if (path[0] == '/' && nl == 1 && last[0] == '/')
            strcpy(last, ".");
    } else {
        memcpy(parent, path, start);
        parent[start] = '\0';
    }
    /* The guest's view once (a relative path reads the cwd's link), for
     * the cache and for the walk. */
    char abs[PATH_MAX * 2];
    int rc = guest_abs_path(r, dirfd, parent, abs, sizeof(abs));
    if (rc < 0)
        return rc;
    size_t al = strlen(abs);
    while (al > 1 && abs[al - 1] == '/')
        abs[--al] = '\0';
    if (r->b->plain_paths && !starts_with_dir(abs, "proc") && !starts_with_dir(abs, "sys") &&
        !has_dotdot(abs)) {
        int cached = dir_cache_get(r, abs, al);
        if (cached >= 0) {
            atomic_fetch_add(&r->b->n_dir_cache_hits, 1);
            *borrowed = true;
            return cached;
        }
    }
    int fd = bh_resolve_open(r, AT_FDCWD, abs, O_PATH | O_DIRECTORY, 0);
    if (fd < 0)
        return fd;
    long type = 0;
    if (!resolved_plain && special_fs(fd, &type)) {
        close(fd);
        return -EROFS; /* no names are made or removed in /proc, /sys, cgroupfs */
    }
    return fd;
}

/* ---- helpers for handlers ---------------------------------------------- */

#define ARG(i) (r->n->data.args[i])
#define ARG_FD(i) ((int)(int32_t)r->n->data.args[i])

/* Reads a path argument, then proves the caller still waits. */
static long read_path(struct bh_req *r, uint64_t addr, char *buf)
{
    long n = bh_mem_read_str(r, addr, buf, PATH_MAX);
    if (n < 0)
        return n;
    return 0;
}

static long validate_and_become(struct bh_req *r, bool real_ids)
{
    if (bh_req_valid(r) < 0)
        return -ESRCH;
    return bh_req_become_guest(r, real_ids);
}

static __thread struct {
    bool set;
    mode_t mask;
} worker_umask;

static int apply_guest_umask(struct bh_req *r)
{
    mode_t m;
    int rc = bh_req_umask(r, &m);
    if (rc < 0)
        return rc;
    if (!worker_umask.set || worker_umask.mask != m) {
        umask(m); /* this worker's own fs_struct (unshare(CLONE_FS)) */
        worker_umask.set = true;
        worker_umask.mask = m;
    }
    return 0;
}

/* ---- the open family --------------------------------------------------- */

/* SECCOMP_IOCTL_NOTIF_ADDFD cannot carry O_PATH files (the kernel's fget
 * refuses them), so an O_PATH open gets a read-only fd of the same file or
 * directory instead; for anything else (a symlink, a device, a FIFO) there is
 * no equivalent without side effects, and the guest gets EOPNOTSUPP. */
static int path_to_plain(int pfd)
{
    struct stat st;
    if (fstat(pfd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return -EOPNOTSUPP;
    char via[64];
    snprintf(via, sizeof(via), "/proc/self/fd/%d", pfd);
    int fd = open(via, O_RDONLY | O_CLOEXEC | O_NOCTTY | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0));
    return fd < 0 ? -errno : fd;
}

static long do_open(struct bh_req *r, int dirfd, uint64_t path_addr, uint64_t flags, uint64_t mode,
                    uint64_t resolve_extra)
{
    char path[PATH_MAX];
    long rc = read_path(r, path_addr, path);
    if (rc < 0)
        return rc;
    if ((rc = validate_and_become(r, false)) < 0)
        return rc;
    bool cloexec = flags & O_CLOEXEC;
    if (creates(flags)) {
        if ((rc = apply_guest_umask(r)) < 0)
            return rc;
    }
    int fd;
    if (resolve_extra & (RESOLVE_BENEATH | RESOLVE_IN_ROOT)) {
        /* The guest confines itself below dirfd: do the same from our copy
         * of its directory, itself checked to lie inside the root. */
        char dir[PATH_MAX * 2];
        if ((rc = guest_abs_path(r, dirfd, ".", dir, sizeof(dir))) < 0)
            return rc;
        cleanup_close_after_answer int dfd =
            bh_resolve_open(r, AT_FDCWD, dir, O_PATH | O_DIRECTORY, 0);
        if (dfd < 0)
            return dfd;
        struct open_how how = {
            .flags = how_flags(flags),
            .mode = creates(flags) ? mode : 0,
            .resolve = resolve_extra | RESOLVE_NO_MAGICLINKS,
        };
        bh_blocking_begin();
        fd = (int)sys_openat2_raw(dfd, path, &how);
        bh_blocking_end();
        long type;
        if (fd >= 0 && special_fs(fd, &type)) {
            close(fd);
            fd = -EACCES;
        }
    } else if (resolve_extra != 0) {
        /* NO_XDEV, NO_SYMLINKS, CACHED only restrict more: honoured on the
         * fast path (a /proc or /sys path is walked without them). */
        fd = resolve(r, dirfd, path, flags, mode, resolve_extra, NULL, NULL);
        if (fd == RES_TEXT)
            fd = -ELOOP;
    } else {
        fd = bh_resolve_open(r, dirfd, path, flags, mode);
    }
    if (fd < 0)
        return fd;
    if (flags & O_PATH) {
        int plain = path_to_plain(fd);
        close(fd);
        if (plain < 0)
            return plain;
        fd = plain;
    }
    bh_debug(r, "opened `%s` flags %#lx", path, (unsigned long)flags);
    long ret = bh_req_addfd(r, fd, cloexec);
    close(fd);
    return ret;
}

static uint64_t open_flags(uint64_t f)
{
    /* open(2) ignores unknown bits; openat2 would refuse them. */
    f &= VALID_OPEN_FLAGS;
    return f | O_LARGEFILE;
}

long bh_sys_open(struct bh_req *r)
{
    return do_open(r, AT_FDCWD, ARG(0), open_flags(ARG(1)), ARG(2) & 07777, 0);
}

long bh_sys_openat(struct bh_req *r)
{
    return do_open(r, ARG_FD(0), ARG(1), open_flags(ARG(2)), ARG(3) & 07777, 0);
}

long bh_sys_creat(struct bh_req *r)
{
    return do_open(r, AT_FDCWD, ARG(0), O_CREAT | O_WRONLY | O_TRUNC | O_LARGEFILE, ARG(1) & 07777,
                   0);
}

long bh_sys_openat2(struct bh_req *r)
{
    size_t size = ARG(3);
    if (size < sizeof(struct open_how))
        return -EINVAL;
    if (size > 4096)
        return -E2BIG;
    unsigned char buf[4096];
    int rc = bh_mem_read(r, ARG(2), buf, size);
    if (rc < 0)
        return rc;
    for (size_t i = sizeof(struct open_how); i < size; i++)
        if (buf[i] != 0)
            return -E2BIG;
    struct open_how how;
    memcpy(&how, buf, sizeof(how));
    uint64_t known = RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS |
                     RESOLVE_BENEATH | RESOLVE_IN_ROOT | RESOLVE_CACHED;
    if (how.resolve & ~known)
        return -EINVAL;
    if ((how.resolve & RESOLVE_BENEATH) && (how.resolve & RESOLVE_IN_ROOT))
        return -EINVAL;
    if (how.flags & ~(uint64_t)VALID_OPEN_FLAGS)
        return -EINVAL;
    if (how.mode != 0 && !creates(how.flags))
        return -EINVAL;
    if (how.mode & ~(uint64_t)07777)
        return -EINVAL;
    return do_open(r, ARG_FD(0), ARG(1), how.flags, how.mode,
                   how.resolve & ~(uint64_t)RESOLVE_NO_MAGICLINKS);
}

/* ---- stat, access, readlink -------------------------------------------- */

/* An O_PATH fd on what (dirfd, path, flags) names: the guest's own fd for
 * AT_EMPTY_PATH with an empty path (see path_fd_is_copy). */
static int path_fd(struct bh_req *r, int dirfd, const char *path, bool empty_ok, bool nofollow)
{
    if (path[0] == '\0') {
        if (!empty_ok)
            return -ENOENT;
        if (dirfd == AT_FDCWD)
            return bh_resolve_open(r, AT_FDCWD, ".", O_PATH, 0);
        return bh_req_getfd(r, dirfd);
    }
    return bh_resolve_open(r, dirfd, path, O_PATH | (nofollow ? O_NOFOLLOW : 0), 0);
}

/* Whether path_fd gave a copy of the guest's own fd (pidfd_getfd) rather
 * than a lookup of the broker's. A copy is closed before the answer: once
 * the guest closes its fd, another process may wait for the last close
 * (a pipe's EOF). A lookup waits until after it (bh_close_after_answer). */
static bool path_fd_is_copy(int dirfd, const char *path)
{
    return path[0] == '\0' && dirfd != AT_FDCWD;
}

static long do_fstatat(struct bh_req *r, int dirfd, uint64_t path_addr, uint64_t buf_addr,
                       int flags)
{
    if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT))
        return -EINVAL;
    char path[PATH_MAX] = "";
    long rc = 0;
    if (path_addr != 0 || !(flags & AT_EMPTY_PATH))
        rc = read_path(r, path_addr, path);
    if (rc < 0)
        return rc;
    if ((rc = validate_and_become(r, false)) < 0)
        return rc;
    struct stat st;
    cleanup_close int copy = -1;
    cleanup_close_after_answer int fd = -1;
    if (path[0] == '\0') {
        int got = path_fd(r, dirfd, path, flags & AT_EMPTY_PATH, false);
        if (got < 0)
            return got;
        *(path_fd_is_copy(dirfd, path) ? &copy : &fd) = got;
        if (fstat(got, &st) < 0)
            return -errno;
    } else {
        fd = resolve_st(r, dirfd, path, O_PATH | (flags & AT_SYMLINK_NOFOLLOW ? O_NOFOLLOW : 0), 0,
                        0, NULL, &st);
        if (fd == RES_TEXT)
            return -ELOOP;
        if (fd < 0)
            return fd;
    }
    return bh_mem_write(r, buf_addr, &st, sizeof(st));
}

long bh_sys_stat(struct bh_req *r)
{
    return do_fstatat(r, AT_FDCWD, ARG(0), ARG(1), 0);
}

long bh_sys_lstat(struct bh_req *r)
{
    return do_fstatat(r, AT_FDCWD, ARG(0), ARG(1), AT_SYMLINK_NOFOLLOW);
}

long bh_sys_newfstatat(struct bh_req *r)
{
    return do_fstatat(r, ARG_FD(0), ARG(1), ARG(2), (int)ARG(3));
}

long bh_sys_statx(struct bh_req *r)
{
    int flags = (int)ARG(2);
    if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH | AT_NO_AUTOMOUNT | AT_STATX_SYNC_TYPE))
        return -EINVAL;
    char path[PATH_MAX] = "";
    long rc = 0;
    if (ARG(1) != 0 || !(flags & AT_EMPTY_PATH))
        rc = read_path(r, ARG(1), path);
    if (rc < 0)
        return rc;
    if ((rc = validate_and_become(r, false)) < 0)
        return rc;
    int fd = path_fd(r, ARG_FD(0), path, flags & AT_EMPTY_PATH, flags & AT_SYMLINK_NOFOLLOW);
    if (fd < 0)
        return fd;
    bool copy = path_fd_is_copy(ARG_FD(0), path);
    cleanup_close int copy_fd = copy ? fd : -1;
    cleanup_close_after_answer int lookup_fd = copy ? -1 : fd;
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | (flags & AT_STATX_SYNC_TYPE), (unsigned)ARG(3), &stx) < 0)
        return -errno;
    return bh_mem_write(r, ARG(4), &stx, sizeof(stx));
}

long bh_sys_statfs(struct bh_req *r)
{
    char path[PATH_MAX];
    long rc = read_path(r, ARG(0), path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    cleanup_close_after_answer int fd = bh_resolve_open(r, AT_FDCWD, path, O_PATH, 0);
    if (fd < 0)
        return fd;
    struct statfs sf;
    if (fstatfs(fd, &sf) < 0)
        return -errno;
    return bh_mem_write(r, ARG(1), &sf, sizeof(sf));
}

/* inotify_add_watch(fd, path, mask): the path is resolved confined, like a
 * stat, and the watch is added by the broker on its copy of the guest's
 * inotify fd (the same instance) through /proc/self/fd of the O_PATH fd, so
 * the kernel's own walk only follows that one magic link to the confined
 * inode. The kernel checks read permission with the guest's fs ids.
 * Marks live on inodes: the host trees are the sandbox's own overlay inodes
 * (mounts.c), but device nodes are the host's (a read of /dev/urandom by
 * anyone would be an event), and /proc, /sys and cgroupfs are kernel state
 * shared with the host: watches there are refused (EACCES). */
long bh_sys_inotify_add_watch(struct bh_req *r)
{
    uint32_t mask = (uint32_t)ARG(2);
    char path[PATH_MAX];
    long rc = read_path(r, ARG(1), path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    if (path[0] == '\0')
        return -ENOENT;
    cleanup_close int ino = bh_req_getfd(r, ARG_FD(0));
    if (ino < 0)
        return ino;
    cleanup_close int fd =
        bh_resolve_open(r, AT_FDCWD, path, O_PATH | (mask & IN_DONT_FOLLOW ? O_NOFOLLOW : 0), 0);
    if (fd < 0)
        return fd;
    struct stat st;
    long type = 0;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode) || special_fs(fd, &type)) {
        bh_debug(r, "refused: a watch on `%s`, a device node or kernel state the host shares",
                 path);
        return -EACCES;
    }
    char via[64];
    snprintf(via, sizeof(via), "/proc/self/fd/%d", fd);
    int wd = inotify_add_watch(ino, via, mask & ~(uint32_t)IN_DONT_FOLLOW);
    return wd < 0 ? -errno : wd;
}

static long do_access(struct bh_req *r, int dirfd, uint64_t path_addr, int mode, int flags)
{
    if (mode & ~(R_OK | W_OK | X_OK))
        return -EINVAL;
    if (flags & ~(AT_EACCESS | AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
        return -EINVAL;
    char path[PATH_MAX] = "";
    long rc = read_path(r, path_addr, path);
    if (rc < 0)
        return rc;
    /* access(2) checks with the real ids unless AT_EACCESS. */
    if ((rc = validate_and_become(r, !(flags & AT_EACCESS))) < 0)
        return rc;
    int fd = path_fd(r, dirfd, path, flags & AT_EMPTY_PATH, flags & AT_SYMLINK_NOFOLLOW);
    if (fd < 0)
        return fd;
    bool copy = path_fd_is_copy(dirfd, path);
    cleanup_close int copy_fd = copy ? fd : -1;
    cleanup_close_after_answer int lookup_fd = copy ? -1 : fd;
    /* AT_EACCESS: check with the fs ids this worker now carries. */
    if (syscall(SYS_faccessat2, fd, "", mode, AT_EMPTY_PATH | AT_EACCESS) < 0)
        return -errno;
    return 0;
}

long bh_sys_access(struct bh_req *r)
{
    return do_access(r, AT_FDCWD, ARG(0), (int)ARG(1), 0);
}

long bh_sys_faccessat(struct bh_req *r)
{
    return do_access(r, ARG_FD(0), ARG(1), (int)ARG(2), 0);
}

long bh_sys_faccessat2(struct bh_req *r)
{
    return do_access(r, ARG_FD(0), ARG(1), (int)ARG(2), (int)ARG(3));
}

static long do_readlink(struct bh_req *r, int dirfd, uint64_t path_addr, uint64_t buf_addr,
                        long bufsiz)
{
    if (bufsiz <= 0)
        return -EINVAL;
    char path[PATH_MAX];
    long rc = read_path(r, path_addr, path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    char text[PATH_MAX];
    int fd = resolve(r, dirfd, path, O_PATH | O_NOFOLLOW, 0, 0, text, NULL);
    ssize_t n;
    if (fd == RES_TEXT) {
        n = (ssize_t)strlen(text);
    } else if (fd < 0) {
        return fd;
    } else {
        n = readlinkat(fd, "", text, sizeof(text));
        int e = errno;
        close(fd);
        if (n < 0)
            return e == ENOENT ? -EINVAL : -e; /* not a symlink */
    }
    if (n > bufsiz)
        n = bufsiz;
    if ((rc = bh_mem_write(r, buf_addr, text, (size_t)n)) < 0)
        return rc;
    return n;
}

long bh_sys_readlink(struct bh_req *r)
{
    return do_readlink(r, AT_FDCWD, ARG(0), ARG(1), (long)ARG(2));
}

long bh_sys_readlinkat(struct bh_req *r)
{
    return do_readlink(r, ARG_FD(0), ARG(1), ARG(2), (long)(int)ARG(3));
}

/* ---- names: mkdir, mknod, unlink, rename, symlink, link ------------------ */

long bh_sys_mkdirat(struct bh_req *r)
{
    char path[PATH_MAX], last[NAME_MAX + 2];
    long rc = read_path(r, ARG(1), path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    if ((rc = apply_guest_umask(r)) < 0)
        return rc;
    bool borrowed;
    int pfd = resolve_parent(r, ARG_FD(0), path, last, &borrowed);
    cleanup_close_after_answer int owned = borrowed ? -1 : pfd;
    if (pfd < 0)
        return pfd;
    return mkdirat(pfd, last, (mode_t)(ARG(2) & 07777)) < 0 ? -errno : 0;
}

long bh_sys_mkdir(struct bh_req *r)
{
    r->n->data.args[2] = r->n->data.args[1];
    r->n->data.args[1] = r->n->data.args[0];
    r->n->data.args[0] = (uint64_t)(int64_t)AT_FDCWD;
    return bh_sys_mkdirat(r);
}

long bh_sys_mknodat(struct bh_req *r)
{
    mode_t mode = (mode_t)ARG(2);
    mode_t type = mode & S_IFMT;
    if (type != 0 && type != S_IFREG && type != S_IFIFO && type != S_IFSOCK) {
        if (type == S_IFCHR || type == S_IFBLK)
            return -EPERM; /* devices: the guest holds no CAP_MKNOD */
        return -EINVAL;
    }
    char path[PATH_MAX], last[NAME_MAX + 2];
    long rc = read_path(r, ARG(1), path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    if ((rc = apply_guest_umask(r)) < 0)
        return rc;
    bool borrowed;
    int pfd = resolve_parent(r, ARG_FD(0), path, last, &borrowed);
    cleanup_close_after_answer int owned = borrowed ? -1 : pfd;
    if (pfd < 0)
        return pfd;
    return mknodat(pfd, last, mode & (S_IFMT | 07777), 0) < 0 ? -errno : 0;
}

long bh_sys_mknod(struct bh_req *r)
{
    r->n->data.args[3] = r->n->data.args[2];
    r->n->data.args[2] = r->n->data.args[1];
    r->n->data.args[1] = r->n->data.args[0];
    r->n->data.args[0] = (uint64_t)(int64_t)AT_FDCWD;
    return bh_sys_mknodat(r);
}

static long do_unlinkat(struct bh_req *r, int dirfd, uint64_t path_addr, int flags)
{
    if (flags & ~AT_REMOVEDIR)
        return -EINVAL;
    char path[PATH_MAX], last[NAME_MAX + 2];
    long rc = read_path(r, path_addr, path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    bool borrowed;
    int pfd = resolve_parent(r, dirfd, path, last, &borrowed);
    cleanup_close_after_answer int owned = borrowed ? -1 : pfd;
    if (pfd < 0)
        return pfd;
    int done = unlinkat(pfd, last, flags);
    if (done == 0)
        return 0;
    /* Linux checks the mount before the name, so removing a name that does
     * not exist under the read-only system trees says EROFS where a writable
     * host says ENOENT; programs that clean up optimistically (CPython's
     * import_helper.forget() tries every sys.path entry) expect ENOENT, which
     * POSIX allows too. Only the errno changes: the guest could stat it. */
    int e = errno;
    struct stat st;
    if (e == EROFS && fstatat(pfd, last, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
        return -ENOENT;
    return -e;
}

long bh_sys_unlinkat(struct bh_req *r)
{
    return do_unlinkat(r, ARG_FD(0), ARG(1), (int)ARG(2));
}

long bh_sys_unlink(struct bh_req *r)
{
    return do_unlinkat(r, AT_FDCWD, ARG(0), 0);
}

long bh_sys_rmdir(struct bh_req *r)
{
    return do_unlinkat(r, AT_FDCWD, ARG(0), AT_REMOVEDIR);
}

static long do_renameat2(struct bh_req *r, int odir, uint64_t oaddr, int ndir, uint64_t naddr,
                         unsigned flags)
{
    char opath[PATH_MAX], npath[PATH_MAX], olast[NAME_MAX + 2], nlast[NAME_MAX + 2];
    long rc = read_path(r, oaddr, opath);
    if (rc < 0 || (rc = read_path(r, naddr, npath)) < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    cleanup_close_after_answer int ofd = bh_resolve_parent(r, odir, opath, olast);
    if (ofd < 0)
        return ofd;
    cleanup_close_after_answer int nfd = bh_resolve_parent(r, ndir, npath, nlast);
    if (nfd < 0)
        return nfd;
    return renameat2(ofd, olast, nfd, nlast, flags) < 0 ? -errno : 0;
}

long bh_sys_rename(struct bh_req *r)
{
    return do_renameat2(r, AT_FDCWD, ARG(0), AT_FDCWD, ARG(1), 0);
}

long bh_sys_renameat(struct bh_req *r)
{
    return do_renameat2(r, ARG_FD(0), ARG(1), ARG_FD(2), ARG(3), 0);
}

long bh_sys_renameat2(struct bh_req *r)
{
    return do_renameat2(r, ARG_FD(0), ARG(1), ARG_FD(2), ARG(3), (unsigned)ARG(4));
}

static long do_symlinkat(struct bh_req *r, uint64_t taddr, int ndir, uint64_t naddr)
{
    char target[PATH_MAX], path[PATH_MAX], last[NAME_MAX + 2];
    long rc = read_path(r, taddr, target);
    if (rc < 0 || (rc = read_path(r, naddr, path)) < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    if (target[0] == '\0')
        return -ENOENT;
    cleanup_close_after_answer int pfd = bh_resolve_parent(r, ndir, path, last);
    if (pfd < 0)
        return pfd;
    /* The target is only text: it is resolved, confined, when used. */
    return symlinkat(target, pfd, last) < 0 ? -errno : 0;
}

long bh_sys_symlink(struct bh_req *r)
{
    return do_symlinkat(r, ARG(0), AT_FDCWD, ARG(1));
}

long bh_sys_symlinkat(struct bh_req *r)
{
    return do_symlinkat(r, ARG(0), ARG_FD(1), ARG(2));
}

static long do_linkat(struct bh_req *r, int odir, uint64_t oaddr, int ndir, uint64_t naddr,
                      int flags)
{
    if (flags & ~(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH))
        return -EINVAL;
    if (flags & AT_EMPTY_PATH)
        return -ENOENT; /* needs CAP_DAC_READ_SEARCH, which guests lack */
    char opath[PATH_MAX], npath[PATH_MAX], olast[NAME_MAX + 2], nlast[NAME_MAX + 2];
    long rc = read_path(r, oaddr, opath);
    if (rc < 0 || (rc = read_path(r, naddr, npath)) < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    cleanup_close_after_answer int nfd = bh_resolve_parent(r, ndir, npath, nlast);
    if (nfd < 0)
        return nfd;
    if (flags & AT_SYMLINK_FOLLOW) {
        cleanup_close_after_answer int ofd = bh_resolve_open(r, odir, opath, O_PATH, 0);
        if (ofd < 0)
            return ofd;
        char via[64];
        snprintf(via, sizeof(via), "/proc/self/fd/%d", ofd);
        return linkat(AT_FDCWD, via, nfd, nlast, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
    }
    cleanup_close_after_answer int ofd = bh_resolve_parent(r, odir, opath, olast);
    if (ofd < 0)
        return ofd;
    return linkat(ofd, olast, nfd, nlast, 0) < 0 ? -errno : 0;
}

long bh_sys_link(struct bh_req *r)
{
    return do_linkat(r, AT_FDCWD, ARG(0), AT_FDCWD, ARG(1), 0);
}

long bh_sys_linkat(struct bh_req *r)
{
    return do_linkat(r, ARG_FD(0), ARG(1), ARG_FD(2), ARG(3), (int)ARG(4));
}

/* ---- attributes: chmod, chown, utimensat, truncate ---------------------- */

static long attr_fd(struct bh_req *r, int dirfd, uint64_t path_addr, int flags, int *out)
{
    char path[PATH_MAX] = "";
    long rc = 0;
    if (path_addr != 0 || !(flags & AT_EMPTY_PATH))
        rc = read_path(r, path_addr, path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    int fd = path_fd(r, dirfd, path, flags & AT_EMPTY_PATH, flags & AT_SYMLINK_NOFOLLOW);
    if (fd < 0)
        return fd;
    long type = 0;
    if (special_fs(fd, &type)) {
        close(fd);
        return -EROFS;
    }
    *out = fd;
    return 0;
}

static long do_fchmodat(struct bh_req *r, int dirfd, uint64_t path_addr, mode_t mode, int flags)
{
    if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
        return -EINVAL;
    cleanup_close int fd = -1;
    long rc = attr_fd(r, dirfd, path_addr, flags, &fd);
    if (rc < 0)
        return rc;
    return syscall(SYS_fchmodat2, fd, "", mode & 07777, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

/* fchmod and fchown are brokered only so that the parent-directory cache
 * hears of every change of a directory's search rights. */
long bh_sys_fchmod(struct bh_req *r)
{
    return do_fchmodat(r, ARG_FD(0), 0, (mode_t)ARG(1), AT_EMPTY_PATH);
}

long bh_sys_chmod(struct bh_req *r)
{
    return do_fchmodat(r, AT_FDCWD, ARG(0), (mode_t)ARG(1), 0);
}

long bh_sys_fchmodat(struct bh_req *r)
{
    return do_fchmodat(r, ARG_FD(0), ARG(1), (mode_t)ARG(2), 0);
}

long bh_sys_fchmodat2(struct bh_req *r)
{
    return do_fchmodat(r, ARG_FD(0), ARG(1), (mode_t)ARG(2), (int)ARG(3));
}

static long do_fchownat(struct bh_req *r, int dirfd, uint64_t path_addr, uid_t uid, gid_t gid,
                        int flags)
{
    if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
        return -EINVAL;
    cleanup_close int fd = -1;
    long rc = attr_fd(r, dirfd, path_addr, flags, &fd);
    if (rc < 0)
        return rc;
    return fchownat(fd, "", uid, gid, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

long bh_sys_fchown(struct bh_req *r)
{
    return do_fchownat(r, ARG_FD(0), 0, (uid_t)ARG(1), (gid_t)ARG(2), AT_EMPTY_PATH);
}

long bh_sys_chown(struct bh_req *r)
{
    return do_fchownat(r, AT_FDCWD, ARG(0), (uid_t)ARG(1), (gid_t)ARG(2), 0);
}

long bh_sys_lchown(struct bh_req *r)
{
    return do_fchownat(r, AT_FDCWD, ARG(0), (uid_t)ARG(1), (gid_t)ARG(2), AT_SYMLINK_NOFOLLOW);
}

long bh_sys_fchownat(struct bh_req *r)
{
    return do_fchownat(r, ARG_FD(0), ARG(1), (uid_t)ARG(2), (gid_t)ARG(3), (int)ARG(4));
}

static long do_utimes(struct bh_req *r, int dirfd, uint64_t path_addr, const struct timespec *ts)
{
    cleanup_close int fd = -1;
    long rc = attr_fd(r, dirfd, path_addr, 0, &fd);
    if (rc < 0)
        return rc;
    return utimensat(fd, "", ts, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

/* utimes(path, tv[2]) and futimesat(dirfd, path, tv[2]): microseconds. */
static long timevals_at(struct bh_req *r, int dirfd, uint64_t path_addr, uint64_t tv_addr)
{
    struct timespec ts[2];
    if (tv_addr != 0) {
        struct timeval tv[2];
        int rc = bh_mem_read(r, tv_addr, tv, sizeof(tv));
        if (rc < 0)
            return rc;
        for (int i = 0; i < 2; i++) {
            if (tv[i].tv_usec < 0 || tv[i].tv_usec >= 1000000)
                return -EINVAL;
            ts[i].tv_sec = tv[i].tv_sec;
            ts[i].tv_nsec = tv[i].tv_usec * 1000;
        }
    }
    return do_utimes(r, dirfd, path_addr, tv_addr ? ts : NULL);
}

long bh_sys_utimes(struct bh_req *r)
{
    return timevals_at(r, AT_FDCWD, ARG(0), ARG(1));
}

long bh_sys_futimesat(struct bh_req *r)
{
    return timevals_at(r, ARG_FD(0), ARG(1), ARG(2));
}

long bh_sys_utime(struct bh_req *r)
{
    struct timespec ts[2];
    if (ARG(1) != 0) {
        struct {
            int64_t actime, modtime;
        } ub;
        int rc = bh_mem_read(r, ARG(1), &ub, sizeof(ub));
        if (rc < 0)
            return rc;
        ts[0] = (struct timespec){.tv_sec = ub.actime};
        ts[1] = (struct timespec){.tv_sec = ub.modtime};
    }
    return do_utimes(r, AT_FDCWD, ARG(0), ARG(1) ? ts : NULL);
}

long bh_sys_utimensat(struct bh_req *r)
{
    int flags = (int)ARG(3);
    if (flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH))
        return -EINVAL;
    struct timespec ts[2];
    bool have_times = ARG(2) != 0;
    if (have_times) {
        int rc = bh_mem_read(r, ARG(2), ts, sizeof(ts));
        if (rc < 0)
            return rc;
    }
    cleanup_close int fd = -1;
    long rc;
    if (ARG(1) == 0) {
        /* futimens(dirfd, times): the guest's own fd. */
        if ((rc = validate_and_become(r, false)) < 0)
            return rc;
        fd = bh_req_getfd(r, ARG_FD(0));
        if (fd < 0)
            return fd;
        return futimens(fd, have_times ? ts : NULL) < 0 ? -errno : 0;
    }
    if ((rc = attr_fd(r, ARG_FD(0), ARG(1), flags, &fd)) < 0)
        return rc;
    return utimensat(fd, "", have_times ? ts : NULL, AT_EMPTY_PATH) < 0 ? -errno : 0;
}

long bh_sys_truncate(struct bh_req *r)
{
    char path[PATH_MAX];
    long rc = read_path(r, ARG(0), path);
    if (rc < 0 || (rc = validate_and_become(r, false)) < 0)
        return rc;
    if ((int64_t)ARG(1) < 0)
        return -EINVAL;
    cleanup_close int fd =
        bh_resolve_open(r, AT_FDCWD, path, O_WRONLY | O_NONBLOCK | O_LARGEFILE, 0);
    if (fd < 0)
        return fd;
    return ftruncate(fd, (off_t)ARG(1)) < 0 ? -errno : 0;
}
