/* bh_mounts_setup for real: each test forks a child that unshares user,
 * mount, pid, network and ipc namespaces (the parent, root on the host,
 * writes its id maps), which forks pid 1 of the new pid namespace; pid 1
 * builds the tree, checks it from inside and sends the results back over a
 * pipe, so Criterion's asserts run here. The mount table around the
 * sandbox and the planted escape targets are checked from the parent. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <grp.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "mounts.h"
#include "sandbox.h"

#define HOST_ID_BASE 3000000000u
#define ID_COUNT 65537u
#define GUEST_UID 1000u
#define GUEST_GID 1000u
#define MAX_CHECKS 64
#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202
#endif

struct check {
    char name[48];
    int ok;
    char detail[200];
};

struct report {
    int setup_rc;
    struct bh_error err;
    double setup_ms;
    int n;
    struct check checks[MAX_CHECKS];
};

typedef void (*inside_fn)(struct report *r, void *arg);

/* When set, run_sandboxed sets up with this pause (bh_mounts_setup_paused). */
static const struct bh_mounts_pause *setup_pause;
/* What a set-up with a pause reported, in the sandbox's pid 1. */
static struct bh_mounts_made made;

/* The namespaces the sentry has (minus uts and time, which mounts ignore). */
static int unshare_flags =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWCGROUP;

/* ---- inside helpers ------------------------------------------------------ */

static void check(struct report *r, const char *name, int ok, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check(struct report *r, const char *name, int ok, const char *fmt, ...)
{
    if (r->n >= MAX_CHECKS)
        return;
    struct check *c = &r->checks[r->n++];
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->ok = ok;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof(c->detail), fmt, ap);
    va_end(ap);
}

/* errno of creating a file at path (0 when it worked; the file is removed). */
static int create_errno(const char *path)
{
    int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return errno;
    close(fd);
    unlink(path);
    return 0;
}

static long fs_type(const char *path)
{
    struct statfs sf;
    if (statfs(path, &sf) < 0)
        return -errno;
    return (long)sf.f_type;
}

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n - 1; /* the directory's own fd */
}

/* ---- harness ------------------------------------------------------------- */

static void write_all(int fd, const void *buf, size_t len)
{
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            _exit(120);
        p += n;
        len -= (size_t)n;
    }
}

static void write_map(pid_t pid, const char *which)
{
    char path[64], line[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, which);
    snprintf(line, sizeof(line), "0 %u %u\n", HOST_ID_BASE, ID_COUNT);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s: %s", path, strerror(errno));
    cr_assert_eq(write(fd, line, strlen(line)), (ssize_t)strlen(line), "write %s: %s", path,
                 strerror(errno));
    close(fd);
}

static char *read_mountinfo(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    cr_assert_not_null(f);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    char line[4096];
    while (fgets(line, sizeof(line), f) != NULL)
        fputs(line, out);
    fclose(f);
    fclose(out);
    return buf;
}

/* The first line of a that b does not hold, into out ("" if none). */
static void first_line_missing(const char *a, const char *b, char *out, size_t size)
{
    out[0] = '\0';
    for (const char *l = a; *l != '\0';) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
        bool found = false;
        for (const char *m = b; *m != '\0' && !found;) {
            const char *ml = strchr(m, '\n');
            size_t mlen = ml ? (size_t)(ml - m) + 1 : strlen(m);
            found = mlen == len && memcmp(l, m, len) == 0;
            m += mlen;
        }
        if (!found) {
            snprintf(out, size, "%.*s", (int)(nl ? len - 1 : len), l);
            return;
        }
        l += len;
    }
}

static void skip_unless_able(void)
{
    if (geteuid() != 0)
        cr_skip_test("needs root on the host to write the sandbox's id maps");
    if (access("/proc/self/ns/user", F_OK) < 0)
        cr_skip_test("no user namespaces on this kernel");
}

/* When set, the parent hands the sandbox this rootfs as a tree idmapped to
 * the sandbox's user namespace (what the host side does for docker). */
static const char *idmap_rootfs;

static int idmapped_tree(pid_t child, const char *rootfs)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)child);
    int userns = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(userns, 0, "open %s: %s", path, strerror(errno));
    int tree = open_tree(AT_FDCWD, rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    cr_assert_geq(tree, 0, "open_tree %s: %s", rootfs, strerror(errno));
    struct mount_attr ma = {.attr_set = MOUNT_ATTR_IDMAP, .userns_fd = (uint64_t)userns};
    int rc = mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &ma, sizeof(ma));
    int e = errno;
    close(userns);
    if (rc < 0) {
        close(tree);
        cr_skip_test("idmapped mounts unavailable here: %s", strerror(e));
    }
    return tree;
}

/* One byte, with fd attached when fd >= 0. */
static void send_fd(int sock, int fd)
{
    char byte = 'g';
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    if (fd >= 0) {
        msg.msg_control = u.buf;
        msg.msg_controllen = sizeof(u.buf);
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
    }
    cr_assert_eq(sendmsg(sock, &msg, 0), 1, "sendmsg: %s", strerror(errno));
}

/* The fd sent along, -1 for none, -2 on failure. */
static int recv_fd(int sock)
{
    char byte;
    struct iovec iov = {.iov_base = &byte, .iov_len = 1};
    union {
        struct cmsghdr h;
        char buf[CMSG_SPACE(sizeof(int))];
    } u;
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) != 1)
        return -2;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS)
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
}

/* The test's own mount namespace, every mount in it shared in peer groups
 * of its own: a mount the setup lets propagate out of the sandbox still
 * shows in it (as it would in the host's, whose / is shared), while mounts
 * that docker, containerd or other tests make on the host meanwhile do not. */
static void own_mount_namespace(void)
{
    static bool done;
    if (done)
        return;
    cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare a mount namespace: %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0,
                 "cut the test's mounts from the host's: %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_SHARED, NULL), 0,
                 "share the test's mounts with the sandbox: %s", strerror(errno));
    done = true;
}

/* Runs setup and fn as pid 1 of fresh namespaces; the report comes back in r. */
static void run_sandboxed(const struct bh_sandbox_spec *spec, inside_fn fn, void *arg,
                          struct report *r)
{
    skip_unless_able();
    own_mount_namespace();
    char *before = read_mountinfo();
    int up[2], go[2], res[2];
    /* go: a socket, so the parent can hand over an idmapped tree with "go". */
    cr_assert_eq(pipe2(up, O_CLOEXEC), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, go), 0);
    cr_assert_eq(pipe2(res, O_CLOEXEC), 0);

    pid_t child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(up[0]);
        close(go[1]);
        close(res[0]);
        if (unshare(unshare_flags) < 0)
            _exit(101);
        char c = 'u';
        write_all(up[1], &c, 1);
        int handed = recv_fd(go[0]);
        if (handed == -2)
            _exit(102);
        if (handed >= 0) {
            /* Our own copy of the spec: only this sandbox sees the change. */
            struct bh_sandbox_spec *own = (struct bh_sandbox_spec *)spec;
            own->has_rootfs_tree_fd = true;
            own->rootfs_tree_fd = handed;
        }
        if (setgroups(0, NULL) < 0 || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
            _exit(103);
        pid_t init = fork();
        if (init < 0)
            _exit(104);
        if (init == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            close(up[1]);
            close(go[0]);
            struct report *rep = calloc(1, sizeof(*rep));
            if (rep == NULL)
                _exit(105);
            int fds_before = count_fds();
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            rep->setup_rc = setup_pause
                                ? bh_mounts_setup_paused(spec, -1, setup_pause, &made, &rep->err)
                                : bh_mounts_setup(spec, &rep->err);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            rep->setup_ms =
                (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
            if (rep->setup_rc == 0) {
                int fds_after = count_fds();
                check(rep, "no fd leaked by setup", fds_after == fds_before,
                      "%d fds before, %d after", fds_before, fds_after);
                check(rep, "pid 1", getpid() == 1, "getpid() = %d", (int)getpid());
                fn(rep, arg);
            }
            write_all(res[1], rep, sizeof(*rep));
            _exit(0);
        }
        close(res[1]);
        int status;
        while (waitpid(init, &status, 0) < 0 && errno == EINTR)
            ;
        _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 110);
    }
    close(up[1]);
    close(go[0]);
    close(res[1]);
    char c;
    cr_assert_eq(read(up[0], &c, 1), 1, "child failed to unshare its namespaces");
    write_map(child, "uid_map");
    write_map(child, "gid_map");
    int handed = idmap_rootfs != NULL ? idmapped_tree(child, idmap_rootfs) : -1;
    send_fd(go[1], handed);
    if (handed >= 0)
        close(handed);

    memset(r, 0, sizeof(*r));
    size_t got = 0;
    while (got < sizeof(*r)) {
        struct pollfd p = {.fd = res[0], .events = POLLIN};
        /* a bound on a hang only: a loaded machine can take seconds */
        if (poll(&p, 1, 120000) <= 0) {
            kill(child, SIGKILL);
            break;
        }
        ssize_t n = read(res[0], (char *)r + got, sizeof(*r) - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    int status;
    waitpid(child, &status, 0);
    close(up[0]);
    close(go[1]);
    close(res[0]);
    cr_assert_eq(got, sizeof(*r), "no report from the sandbox (child status %#x)", status);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "sandbox child status %#x", status);

    char *after = read_mountinfo();
    if (strcmp(after, before) != 0) {
        /* Name the lines: a change can be the sandbox's (a mount that
         * propagated out) or the host's (a remount changes a superblock's
         * options in every namespace); only the lines tell which. */
        char gone[1024] = "", came[1024] = "";
        first_line_missing(before, after, gone, sizeof(gone));
        first_line_missing(after, before, came, sizeof(came));
        cr_expect_fail("the mount table around the sandbox changed:\n  gone: %s\n  new:  %s", gone,
                       came);
    }
    free(before);
    free(after);
}

static void assert_checks(const struct report *r)
{
    cr_assert_eq(r->setup_rc, 0, "bh_mounts_setup failed: %s", r->err.msg);
    for (int i = 0; i < r->n; i++)
        cr_expect(r->checks[i].ok, "%s: %s", r->checks[i].name, r->checks[i].detail);
    cr_log_info("bh_mounts_setup took %.2f ms", r->setup_ms);
}

static void spec_base(struct bh_sandbox_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->process.uid = GUEST_UID;
    spec->process.gid = GUEST_GID;
    spec->stdio[0] = spec->stdio[1] = spec->stdio[2] = -1;
}

/* ---- temp trees ----------------------------------------------------------- */

static char tmp_dir[64];
/* Escape targets live outside /tmp: the staging root covers /tmp inside the
 * sandbox's namespace, which would hide an escape into it. */
static char host_dir[64];

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return flag == FTW_DP ? rmdir(path) : unlink(path);
}

static void tmp_cleanup(void)
{
    if (tmp_dir[0] != '\0')
        nftw(tmp_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    tmp_dir[0] = '\0';
    if (host_dir[0] != '\0')
        nftw(host_dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    host_dir[0] = '\0';
}

static void tmp_make(void)
{
    snprintf(tmp_dir, sizeof(tmp_dir), "/tmp/bh-mounts-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp_dir));
    chmod(tmp_dir, 0755);
}

static void pathf(char *buf, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void pathf(char *buf, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

static void put_file(const char *path, const char *content)
{
    FILE *f = fopen(path, "we");
    cr_assert_not_null(f, "create %s", path);
    fputs(content, f);
    fclose(f);
}

/* Everything under dir owned by the sandbox's root, as an image unpacked for
 * this id range would be. */
static int chown_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return lchown(path, HOST_ID_BASE, HOST_ID_BASE);
}

/* tmp/rootfs with a marker file and proc, dev, sys, tmp; the caller plants more. */
static void make_rootfs(char *rootfs, size_t size)
{
    pathf(rootfs, size, "%s/rootfs", tmp_dir);
    cr_assert_eq(mkdir(rootfs, 0755), 0);
    static const char *const dirs[] = {"proc", "dev", "sys", "tmp"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char p[512];
        pathf(p, sizeof(p), "%s/%s", rootfs, dirs[i]);
        cr_assert_eq(mkdir(p, 0755), 0);
    }
    char p[512];
    pathf(p, sizeof(p), "%s/marker", rootfs);
    put_file(p, "rootfs\n");
}

static bool dir_is_empty(const char *path)
{
    DIR *d = opendir(path);
    if (d == NULL)
        return false;
    struct dirent *e;
    bool empty = true;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            empty = false;
    closedir(d);
    return empty;
}

/* ---- the embedded default -------------------------------------------------- */

static void inside_embedded(struct report *r, void *arg)
{
    (void)arg;
    char buf[256];
    long t = fs_type("/");
    check(r, "root is the staging tmpfs", t == TMPFS_MAGIC, "statfs(/) type %#lx", t);
    check(r, "no host file at /", access("/.dockerenv", F_OK) < 0 && errno == ENOENT,
          "/.dockerenv visible");
    check(r, "/etc/shadow absent", access("/etc/shadow", F_OK) < 0 && errno == ENOENT, "access: %s",
          strerror(errno));
    check(r, "/etc/machine-id absent", access("/etc/machine-id", F_OK) < 0, "visible");
    check(r, "/etc/ssl/private absent", access("/etc/ssl/private", F_OK) < 0, "visible");
    check(r, "python3 exists", access("/usr/bin/python3", X_OK) == 0, "access: %s",
          strerror(errno));
    check(r, "/bin is a symlink into usr", readlink("/bin", buf, sizeof(buf)) > 0, "readlink: %s",
          strerror(errno));
    check(r, "/bin/sh reachable", access("/bin/sh", X_OK) == 0, "access: %s", strerror(errno));
    int e = create_errno("/usr/bh-mounts-test");
    check(r, "/usr is read-only", e == EROFS, "create under /usr: %s", strerror(e));
    e = create_errno("/etc/bh-mounts-test");
    check(r, "/etc is read-only", e == EROFS, "create under /etc: %s", strerror(e));
    e = mkdir("/newdir", 0755) < 0 ? errno : 0;
    check(r, "/ is read-only", e == EROFS, "mkdir /newdir: %s", strerror(e));
    check(r, "ld.so.cache present", access("/etc/ld.so.cache", R_OK) == 0, "%s", strerror(errno));
    check(r, "ca certificates present", access("/etc/ssl/certs", R_OK) == 0, "%s", strerror(errno));

    FILE *f = fopen("/etc/passwd", "re");
    bool guest = false, root = false;
    if (f != NULL) {
        char line[256];
        while (fgets(line, sizeof(line), f) != NULL) {
            guest |= strncmp(line, "sandbox:x:1000:1000:sandbox:/work:", 34) == 0;
            root |= strncmp(line, "root:x:0:0:", 11) == 0;
        }
        fclose(f);
    }
    check(r, "passwd made up for the sandbox", guest && root, "guest %d root %d", guest, root);
    f = fopen("/etc/hosts", "re");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    check(r, "hosts has localhost", strstr(buf, "127.0.0.1\tlocalhost") != NULL, "%s", buf);

    /* /tmp: writable, size-limited (1 MiB in this spec), sticky. */
    struct stat st = {0};
    check(r, "/tmp mode 1777", stat("/tmp", &st) == 0 && (st.st_mode & 07777) == 01777, "mode %o",
          st.st_mode & 07777);
    int fd = open("/tmp/big", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    check(r, "/tmp writable", fd >= 0, "open: %s", strerror(errno));
    int werr = 0;
    if (fd >= 0) {
        static char chunk[64 * 1024];
        for (int i = 0; i < 64 && werr == 0; i++)
            if (write(fd, chunk, sizeof(chunk)) < 0)
                werr = errno;
        close(fd);
        unlink("/tmp/big");
    }
    check(r, "/tmp size-limited", werr == ENOSPC, "writing 4 MiB: %s", strerror(werr));

    check(r, "/work owned by the guest",
          stat("/work", &st) == 0 && st.st_uid == GUEST_UID && st.st_gid == GUEST_GID,
          "uid %u gid %u", st.st_uid, st.st_gid);
    check(r, "/work is a tmpfs", fs_type("/work") == TMPFS_MAGIC, "type %#lx", fs_type("/work"));
    check(r, "/work is not /tmp", stat("/tmp", &st) == 0 && ({
                                      struct stat w;
                                      stat("/work", &w) == 0 && w.st_dev != st.st_dev;
                                  }),
          "same device");
    check(r, "cwd is the working directory", getcwd(buf, sizeof(buf)) && !strcmp(buf, "/work"),
          "cwd %s", buf);
    check(r, "/var/tmp -> /tmp",
          readlink("/var/tmp", buf, sizeof(buf)) == 4 && strncmp(buf, "/tmp", 4) == 0, "readlink");

    /* /proc: our own, masked and read-only paths. */
    n = (size_t)readlink("/proc/self", buf, sizeof(buf) - 1);
    buf[n < sizeof(buf) ? n : 0] = '\0';
    check(r, "/proc is the sandbox's", strcmp(buf, "1") == 0, "/proc/self -> %s", buf);
    /* Not every kernel has /proc/kcore; /proc/keys stands in where it lacks. */
    static const char *const masked[] = {"/proc/kcore", "/proc/keys", "/proc/timer_list"};
    for (size_t i = 0; i < sizeof(masked) / sizeof(masked[0]); i++) {
        int se = stat(masked[i], &st) < 0 ? errno : 0;
        check(r, masked[i],
              se == ENOENT || (se == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3)),
              "not masked: %s mode %o rdev %lx", strerror(se), st.st_mode,
              (unsigned long)st.st_rdev);
    }
    check(r, "a masked file exists", access("/proc/keys", F_OK) == 0, "no /proc/keys");
    /* A sysctl of the sandbox's own netns: writable but for the ro mount. */
    fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
    check(r, "/proc/sys read-only", fd < 0 && errno == EROFS, "open for writing: %s",
          fd < 0 ? strerror(errno) : "worked");
    if (fd >= 0)
        close(fd);
    if (access("/proc/scsi", F_OK) == 0)
        check(r, "/proc/scsi masked by tmpfs", fs_type("/proc/scsi") == TMPFS_MAGIC, "type %#lx",
              fs_type("/proc/scsi"));

    /* /sys: a fresh read-only sysfs (the test gives the sandbox its own netns). */
    t = fs_type("/sys");
    check(r, "/sys is sysfs", t == SYSFS_MAGIC, "type %#lx", t);
    e = create_errno("/sys/bh-mounts-test");
    check(r, "/sys read-only", e == EROFS, "create: %s", strerror(e));
    t = fs_type("/sys/fs/cgroup");
    check(r, "spec mount above the base /sys", t == TMPFS_MAGIC || t == CGROUP2_SUPER_MAGIC,
          "type %#lx", t);

    /* /dev */
    fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    check(r, "/dev/null opens", fd >= 0, "open: %s", strerror(errno));
    if (fd >= 0) {
        check(r, "/dev/null swallows", write(fd, "hello", 5) == 5 && read(fd, buf, 5) == 0,
              "write/read");
        close(fd);
    }
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    check(r, "/dev/urandom reads", fd >= 0 && read(fd, buf, 16) == 16, "%s", strerror(errno));
    if (fd >= 0)
        close(fd);
    check(r, "/dev/pts is a devpts", fs_type("/dev/pts") == DEVPTS_SUPER_MAGIC, "type %#lx",
          fs_type("/dev/pts"));
    fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    check(r, "/dev/ptmx gives a pty", fd >= 0, "open: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    check(r, "/dev/shm writable", create_errno("/dev/shm/x") == 0, "create");
    check(r, "/dev/fd link", readlink("/dev/fd", buf, sizeof(buf)) == 13, "readlink");
    e = create_errno("/dev/bh-mounts-test");
    check(r, "/dev tmpfs read-only", e == EROFS, "create: %s", strerror(e));

    /* Nothing of the old root left in the mount table. */
    f = fopen("/proc/self/mountinfo", "re");
    int lines = 0, root_lines = 0;
    if (f != NULL) {
        char line[1024];
        while (fgets(line, sizeof(line), f) != NULL) {
            lines++;
            char mp[512];
            if (sscanf(line, "%*s %*s %*s %*s %511s", mp) == 1 && strcmp(mp, "/") == 0)
                root_lines++;
        }
        fclose(f);
    }
    check(r, "one root mount", root_lines == 1, "%d mounts on /, %d mounts in all", root_lines,
          lines);
}

Test(mounts, embedded_default)
{
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.limits.tmpfs_bytes = 1 << 20;
    /* On top of the base /sys, not under it. */
    struct bh_mount mounts[] = {
        {.source = "cgroup", .destination = "/sys/fs/cgroup", .type = "cgroup"},
    };
    spec.mounts = mounts;
    spec.n_mounts = 1;
    struct report r;
    run_sandboxed(&spec, inside_embedded, NULL, &r);
    assert_checks(&r);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void nothing(struct report *r, void *arg);

/* Seven set-ups in a row each succeed; their times are logged for whoever
 * looks, never asserted (a shared machine's load decides them: bench/ has the
 * start-up figures, as ratios within one run). */
Test(mounts, embedded_default_sets_up_repeatedly)
{
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    double ms[7];
    for (int i = 0; i < 7; i++) {
        struct report r;
        run_sandboxed(&spec, nothing, NULL, &r);
        cr_assert_eq(r.setup_rc, 0, "%s", r.err.msg);
        ms[i] = r.setup_ms;
    }
    qsort(ms, 7, sizeof(ms[0]), cmp_double);
    cr_log_info("bh_mounts_setup: min %.2f ms, median %.2f ms, max %.2f ms", ms[0], ms[3], ms[6]);
}

/* ---- a rootfs with planted escape symlinks -------------------------------- */

struct escape_arg {
    char host_abs[256];
    char host_rel[256];
};

static void inside_escape(struct report *r, void *arg)
{
    struct escape_arg *a = arg;
    char buf[64] = "";
    int fd = open("/marker", O_RDONLY | O_CLOEXEC);
    check(r, "/ is the rootfs", fd >= 0 && read(fd, buf, 6) == 6 && !strncmp(buf, "rootfs", 6),
          "marker: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    long t = fs_type("/etc/foo");
    check(r, "tmpfs through the absolute link", t == TMPFS_MAGIC, "/etc/foo type %#lx", t);
    char p[512];
    snprintf(p, sizeof(p), "%s/foo", a->host_abs);
    t = fs_type(p);
    check(r, "absolute link target made inside the root", t == TMPFS_MAGIC, "%s type %#lx", p, t);
    check(r, "bind through the relative link", access("/etc2/bar/hello", R_OK) == 0, "%s",
          strerror(errno));
    int e = create_errno("/etc2/bar/new");
    check(r, "read-only bind", e == EROFS, "create: %s", strerror(e));
    check(r, "dangling link made inside", fs_type("/deep/x") == TMPFS_MAGIC, "type %#lx",
          fs_type("/deep/x"));
    check(r, "proc mounted", access("/proc/self/status", R_OK) == 0, "%s", strerror(errno));
    check(r, "cwd /", getcwd(buf, sizeof(buf)) && strcmp(buf, "/") == 0, "cwd %s", buf);
    e = create_errno("/written-by-guest");
    check(r, "rootfs writable without readonly", e == 0, "create: %s", strerror(e));
}

Test(mounts, rootfs_escape_symlinks_stay_inside, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256], p[512], src[256];
    make_rootfs(rootfs, sizeof(rootfs));
    struct escape_arg a;
    /* Host directories the links point at; writable by anyone, so a
     * mount point made through the link would really land there. */
    snprintf(host_dir, sizeof(host_dir), "/var/tmp/bh-mounts-host-XXXXXX");
    cr_assert_not_null(mkdtemp(host_dir));
    chmod(host_dir, 0755);
    pathf(a.host_abs, sizeof(a.host_abs), "%s/host-abs", host_dir);
    pathf(a.host_rel, sizeof(a.host_rel), "%s/host-rel", host_dir);
    cr_assert_eq(mkdir(a.host_abs, 0777), 0);
    cr_assert_eq(mkdir(a.host_rel, 0777), 0);
    chmod(a.host_abs, 0777);
    chmod(a.host_rel, 0777);
    pathf(p, sizeof(p), "%s/etc", rootfs);
    cr_assert_eq(symlink(a.host_abs, p), 0);
    pathf(p, sizeof(p), "%s/etc2", rootfs);
    char rel[512];
    pathf(rel, sizeof(rel), "../../../../../../..%s", a.host_rel);
    cr_assert_eq(symlink(rel, p), 0);
    pathf(p, sizeof(p), "%s/deep", rootfs);
    cr_assert_eq(symlink("/../../nonexistent/../../x/y", p), 0);
    pathf(src, sizeof(src), "%s/src", tmp_dir);
    cr_assert_eq(mkdir(src, 0755), 0);
    pathf(p, sizeof(p), "%s/hello", src);
    put_file(p, "hi\n");
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);

    struct bh_mount mounts[] = {
        {.source = "tmpfs", .destination = "/etc/foo", .type = "tmpfs", .data = "size=64k"},
        {.source = src, .destination = "etc2/bar", .type = "bind", .flags = MS_BIND | MS_RDONLY},
        {.source = "tmpfs", .destination = "/deep/x", .type = "tmpfs"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.mounts = mounts;
    spec.n_mounts = sizeof(mounts) / sizeof(mounts[0]);
    struct report r;
    run_sandboxed(&spec, inside_escape, &a, &r);
    /* Before anything else: even a failed setup must not have touched them. */
    cr_expect(dir_is_empty(a.host_abs), "the host directory %s got an entry", a.host_abs);
    cr_expect(dir_is_empty(a.host_rel), "the host directory %s got an entry", a.host_rel);
    assert_checks(&r);

    pathf(p, sizeof(p), "%s%s/foo", rootfs, a.host_abs);
    cr_expect_eq(access(p, F_OK), 0, "mount point not made inside the rootfs at %s", p);
    pathf(p, sizeof(p), "%s/x/y", rootfs);
    cr_expect_eq(access(p, F_OK), 0, "dangling link's mount point not made at %s", p);
}

/* ---- read-only rootfs and overlay ------------------------------------------ */

static void inside_readonly(struct report *r, void *arg)
{
    (void)arg;
    int e = create_errno("/new");
    check(r, "rootfs read-only", e == EROFS, "create /new: %s", strerror(e));
    e = create_errno("/tmp/new");
    check(r, "tmpfs mount still writable", e == 0, "create /tmp/new: %s", strerror(e));
    struct stat st;
    check(r, "default masks apply", stat("/proc/keys", &st) == 0 && S_ISCHR(st.st_mode),
          "/proc/keys is not /dev/null");
}

Test(mounts, rootfs_readonly, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256];
    make_rootfs(rootfs, sizeof(rootfs));
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    struct bh_mount mounts[] = {
        {.source = "tmpfs", .destination = "/tmp", .type = "tmpfs", .data = "size=64k"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.rootfs_readonly = true;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    struct report r;
    run_sandboxed(&spec, inside_readonly, NULL, &r);
    assert_checks(&r);
}

static void inside_overlay(struct report *r, void *arg)
{
    (void)arg;
    int fd = open("/marker", O_WRONLY | O_TRUNC | O_CLOEXEC);
    check(r, "rootfs file writable through the overlay", fd >= 0 && write(fd, "guest\n", 6) == 6,
          "%s", strerror(errno));
    if (fd >= 0)
        close(fd);
    fd = open("/new-file", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    check(r, "new file in the overlay", fd >= 0, "%s", strerror(errno));
    if (fd >= 0)
        close(fd);
    check(r, "mount point made in the upper layer", fs_type("/made/here") == TMPFS_MAGIC,
          "type %#lx", fs_type("/made/here"));
}

Test(mounts, rootfs_overlay_leaves_rootfs_alone, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256], p[512];
    make_rootfs(rootfs, sizeof(rootfs));
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    struct bh_mount mounts[] = {
        {.source = "tmpfs", .destination = "/made/here", .type = "tmpfs"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.rootfs_overlay = true;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    struct report r;
    run_sandboxed(&spec, inside_overlay, NULL, &r);
    assert_checks(&r);
    pathf(p, sizeof(p), "%s/new-file", rootfs);
    cr_expect_neq(access(p, F_OK), 0, "the guest's new file reached the rootfs");
    pathf(p, sizeof(p), "%s/made", rootfs);
    cr_expect_neq(access(p, F_OK), 0, "a mount point reached the rootfs");
    pathf(p, sizeof(p), "%s/marker", rootfs);
    FILE *f = fopen(p, "re");
    char buf[16] = "";
    cr_assert_not_null(f);
    cr_expect_not_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    cr_expect_str_eq(buf, "rootfs\n", "the rootfs's file was changed");
}

/* ---- the spec's own lists and mount types ----------------------------------- */

static void inside_custom(struct report *r, void *arg)
{
    (void)arg;
    struct stat st = {0};
    check(r, "custom masked file", stat("/proc/version", &st) == 0 && S_ISCHR(st.st_mode),
          "mode %o", st.st_mode);
    check(r, "default mask not applied with a custom list",
          stat("/proc/keys", &st) == 0 && S_ISREG(st.st_mode), "mode %o", st.st_mode);
    int fd = open("/proc/sys/net/ipv4/ip_forward", O_WRONLY | O_CLOEXEC);
    check(r, "/proc/sys writable in its own namespace without the default list", fd >= 0, "%s",
          strerror(errno));
    if (fd >= 0)
        close(fd);
    int e = create_errno("/data/x");
    check(r, "custom read-only path", e == EROFS, "create /data/x: %s", strerror(e));
    long t = fs_type("/dev/mqueue");
    check(r, "mqueue mounted", t == MQUEUE_MAGIC, "type %#lx", t);

    /* cgroup: v1 hierarchies under a tmpfs on v1/hybrid hosts, else cgroup2. */
    bool v1 = false;
    FILE *f = fopen("/proc/self/cgroup", "re");
    char line[512];
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        v1 |= strncmp(line, "0::", 3) != 0;
    if (f != NULL)
        fclose(f);
    t = fs_type("/sys/fs/cgroup");
    check(r, "cgroup mount type", t == (v1 ? TMPFS_MAGIC : CGROUP2_SUPER_MAGIC), "type %#lx", t);
    e = create_errno("/sys/fs/cgroup/x");
    check(r, "cgroup mount read-only", e == EROFS, "create: %s", strerror(e));
    if (v1) {
        t = fs_type("/sys/fs/cgroup/pids");
        check(r, "v1 pids hierarchy", t == CGROUP_SUPER_MAGIC, "type %#lx", t);
        check(r, "cgroup.procs readable", access("/sys/fs/cgroup/pids/cgroup.procs", R_OK) == 0,
              "%s", strerror(errno));
        struct statvfs sv = {0};
        check(r, "v1 hierarchy read-only",
              statvfs("/sys/fs/cgroup/pids", &sv) == 0 && (sv.f_flag & ST_RDONLY), "flags %#lx",
              sv.f_flag);
        t = fs_type("/sys/fs/cgroup/unified");
        check(r, "hybrid's unified hierarchy", t == CGROUP2_SUPER_MAGIC, "type %#lx", t);
    }
}

Test(mounts, custom_masks_and_mount_types, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256];
    make_rootfs(rootfs, sizeof(rootfs));
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    char *masked[] = {"/proc/version", "/does/not/exist", NULL};
    char *readonly[] = {"/data", NULL};
    struct bh_mount mounts[] = {
        {.source = "tmpfs", .destination = "/data", .type = "tmpfs"},
        {.source = "mqueue",
         .destination = "/dev/mqueue",
         .type = "mqueue",
         .flags = MS_NOSUID | MS_NODEV | MS_NOEXEC},
        {.source = "sysfs", .destination = "/sys", .type = "sysfs", .flags = MS_RDONLY},
        {.source = "cgroup", .destination = "/sys/fs/cgroup", .type = "cgroup"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.masked_paths = masked;
    spec.readonly_paths = readonly;
    spec.mounts = mounts;
    spec.n_mounts = sizeof(mounts) / sizeof(mounts[0]);
    struct report r;
    run_sandboxed(&spec, inside_custom, NULL, &r);
    assert_checks(&r);
}

/* ---- refusals --------------------------------------------------------------- */

static void nothing(struct report *r, void *arg)
{
    (void)r;
    (void)arg;
}

Test(mounts, missing_rootfs_is_a_clear_error)
{
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = "/nonexistent/bh-mounts-rootfs";
    struct report r;
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(strstr(r.err.msg, "/nonexistent/bh-mounts-rootfs") != NULL, "%s", r.err.msg);
    cr_expect(strstr(r.err.msg, "not an existing directory") != NULL, "%s", r.err.msg);
    cr_expect_eq(r.err.code, ENOENT);
}

Test(mounts, relative_rootfs_is_a_clear_error)
{
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = "relative/rootfs";
    struct report r;
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(strstr(r.err.msg, "relative/rootfs") != NULL, "%s", r.err.msg);
    cr_expect(strstr(r.err.msg, "not an absolute path") != NULL, "%s", r.err.msg);
}

Test(mounts, failing_mount_names_source_and_destination, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256];
    make_rootfs(rootfs, sizeof(rootfs));
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    struct bh_mount mounts[] = {
        {.source = "/nonexistent/bh-src", .destination = "/x", .type = "bind", .flags = MS_BIND},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    struct report r;
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(strstr(r.err.msg, "/nonexistent/bh-src") != NULL, "%s", r.err.msg);
    cr_expect(strstr(r.err.msg, "/x") != NULL, "%s", r.err.msg);
    cr_expect(strstr(r.err.msg, "No such file") != NULL, "%s", r.err.msg);

    mounts[0] = (struct bh_mount){.source = "x", .destination = "/y", .type = "nfs"};
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(strstr(r.err.msg, "nfs") != NULL && strstr(r.err.msg, "not supported") != NULL, "%s",
              r.err.msg);

    /* The host's /dev has mounts beneath it: only an rbind may take them. */
    mounts[0] = (struct bh_mount){
        .source = "/dev", .destination = "/hostdev", .type = "bind", .flags = MS_BIND};
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(strstr(r.err.msg, "rbind") != NULL && strstr(r.err.msg, "/hostdev") != NULL, "%s",
              r.err.msg);

    /* A symlink loop and a file in the middle of the path. */
    char p[512];
    pathf(p, sizeof(p), "%s/loop1", rootfs);
    cr_assert_eq(symlink("loop2", p), 0);
    pathf(p, sizeof(p), "%s/loop2", rootfs);
    cr_assert_eq(symlink("/loop1", p), 0);
    mounts[0] = (struct bh_mount){.source = "tmpfs", .destination = "/loop1/x", .type = "tmpfs"};
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(r.err.code == ELOOP && strstr(r.err.msg, "/loop1/x") != NULL, "%s", r.err.msg);
    mounts[0] = (struct bh_mount){.source = "tmpfs", .destination = "/marker/x", .type = "tmpfs"};
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(r.err.code == ENOTDIR && strstr(r.err.msg, "/marker/x") != NULL, "%s", r.err.msg);
}

/* ---- without a network namespace of its own ---------------------------------- */

static void inside_no_netns(struct report *r, void *arg)
{
    (void)arg;
    long t = fs_type("/sys");
    check(r, "embedded /sys left empty", t == TMPFS_MAGIC && access("/sys/kernel", F_OK) < 0,
          "type %#lx", t);
    /* Never the host's /sys (it would list the host's interfaces). */
    t = fs_type("/hostsys");
    check(r, "spec sysfs falls back to an empty read-only tmpfs",
          t == TMPFS_MAGIC && access("/hostsys/class", F_OK) < 0 &&
              create_errno("/hostsys/x") == EROFS,
          "type %#lx", t);
}

Test(mounts, no_netns_sysfs_fallbacks)
{
    unshare_flags &= ~CLONE_NEWNET;
    char *masked[] = {"/hostsys/firmware", NULL};
    struct bh_mount mounts[] = {
        {.source = "sysfs", .destination = "/hostsys", .type = "sysfs", .flags = MS_RDONLY},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.masked_paths = masked;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    struct report r;
    run_sandboxed(&spec, inside_no_netns, NULL, &r);
    assert_checks(&r);
}

/* ---- docker's mount list, with binds prepared by the host side -------------- */

static void read_small(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, size - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
}

static void inside_docker(struct report *r, void *arg)
{
    (void)arg;
    char buf[128];
    read_small("/etc/resolv.conf", buf, sizeof(buf));
    check(r, "resolv.conf from a prepared tree", strcmp(buf, "nameserver 192.0.2.1\n") == 0,
          "content `%s`", buf);
    read_small("/etc/hostname", buf, sizeof(buf));
    check(r, "hostname bind", strcmp(buf, "box\n") == 0, "content `%s`", buf);
    struct statvfs sv = {0};
    check(r, "read-only prepared bind",
          statvfs("/etc/hostname", &sv) == 0 && (sv.f_flag & ST_RDONLY) != 0, "flags %#lx",
          sv.f_flag);
    check(r, "writable prepared bind",
          statvfs("/etc/resolv.conf", &sv) == 0 && (sv.f_flag & ST_RDONLY) == 0, "flags %#lx",
          sv.f_flag);
    struct stat st = {0};
    check(r, "/dev/null in the spec's /dev",
          stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3),
          "mode %o", st.st_mode);
    int fd = open("/dev/zero", O_RDONLY | O_CLOEXEC);
    check(r, "/dev/zero reads zeros", fd >= 0 && read(fd, buf, 4) == 4 && buf[0] == 0, "%s",
          strerror(errno));
    if (fd >= 0)
        close(fd);
    check(r, "spec's /dev is writable like docker's", create_errno("/dev/x") == 0, "create");
    fd = open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC);
    check(r, "/dev/ptmx gives a pty", fd >= 0, "open: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    check(r, "/dev/shm", fs_type("/dev/shm") == TMPFS_MAGIC, "type %#lx", fs_type("/dev/shm"));
    check(r, "/dev/mqueue", fs_type("/dev/mqueue") == MQUEUE_MAGIC, "type %#lx",
          fs_type("/dev/mqueue"));
    check(r, "/sys read-only sysfs",
          fs_type("/sys") == SYSFS_MAGIC && create_errno("/sys/x") == EROFS, "type %#lx",
          fs_type("/sys"));
    check(r, "/proc/keys masked", stat("/proc/keys", &st) == 0 && S_ISCHR(st.st_mode), "mode %o",
          st.st_mode);
}

Test(mounts, docker_mount_list_with_prepared_trees, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256], p[512], resolv[256], hostname[256], planted[256];
    make_rootfs(rootfs, sizeof(rootfs));
    snprintf(host_dir, sizeof(host_dir), "/var/tmp/bh-mounts-host-XXXXXX");
    cr_assert_not_null(mkdtemp(host_dir));
    chmod(host_dir, 0755);
    /* rootfs/etc/resolv.conf points at a host file: the bind must not land on it. */
    pathf(planted, sizeof(planted), "%s/host-resolv.conf", host_dir);
    put_file(planted, "host\n");
    chmod(planted, 0666);
    pathf(p, sizeof(p), "%s/etc", rootfs);
    cr_assert_eq(mkdir(p, 0755), 0);
    pathf(p, sizeof(p), "%s/etc/resolv.conf", rootfs);
    cr_assert_eq(symlink(planted, p), 0);
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    pathf(resolv, sizeof(resolv), "%s/resolv.conf", tmp_dir);
    put_file(resolv, "nameserver 192.0.2.1\n");
    pathf(hostname, sizeof(hostname), "%s/hostname", tmp_dir);
    put_file(hostname, "box\n");

    /* What the host side does (oci/trees.c): clone as host root, set flags. */
    int trees[2];
    const char *srcs[2] = {resolv, hostname};
    for (int i = 0; i < 2; i++) {
        trees[i] = open_tree(AT_FDCWD, srcs[i], OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        cr_assert_geq(trees[i], 0, "open_tree %s: %s", srcs[i], strerror(errno));
        struct mount_attr ma = {.attr_set = i == 1 ? MOUNT_ATTR_RDONLY : 0,
                                .propagation = MS_PRIVATE};
        cr_assert_eq(mount_setattr(trees[i], "", AT_EMPTY_PATH, &ma, sizeof(ma)), 0, "%s",
                     strerror(errno));
    }
    unsigned long dflt = MS_NOSUID | MS_NOEXEC | MS_NODEV;
    struct bh_mount mounts[] = {
        {.source = "proc", .destination = "/proc", .type = "proc", .flags = dflt},
        {.source = "tmpfs",
         .destination = "/dev",
         .type = "tmpfs",
         .flags = MS_NOSUID | MS_STRICTATIME,
         .data = "mode=755,size=65536k"},
        {.source = "devpts",
         .destination = "/dev/pts",
         .type = "devpts",
         .flags = MS_NOSUID | MS_NOEXEC,
         .data = "newinstance,ptmxmode=0666,mode=0620,gid=5"},
        {.source = "sysfs", .destination = "/sys", .type = "sysfs", .flags = dflt | MS_RDONLY},
        {.source = "cgroup",
         .destination = "/sys/fs/cgroup",
         .type = "cgroup",
         .flags = dflt | MS_RDONLY},
        {.source = "mqueue", .destination = "/dev/mqueue", .type = "mqueue", .flags = dflt},
        {.source = "shm",
         .destination = "/dev/shm",
         .type = "tmpfs",
         .flags = dflt,
         .data = "mode=1777,size=67108864"},
        {.source = resolv,
         .destination = "/etc/resolv.conf",
         .type = "bind",
         .flags = MS_BIND | MS_REC,
         .has_tree_fd = true,
         .tree_fd = trees[0]},
        {.source = hostname,
         .destination = "/etc/hostname",
         .type = "bind",
         .flags = MS_BIND | MS_REC | MS_RDONLY,
         .has_tree_fd = true,
         .tree_fd = trees[1]},
    };
    /* The rootfs too, under a directory the sandbox's ids cannot enter (as
     * docker's /var/lib/docker is 0710): only the prepared tree reaches it. */
    int root_tree = open_tree(AT_FDCWD, rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    cr_assert_geq(root_tree, 0, "open_tree %s: %s", rootfs, strerror(errno));
    cr_assert_eq(chmod(tmp_dir, 0700), 0);
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.has_rootfs_tree_fd = true;
    spec.rootfs_tree_fd = root_tree;
    spec.mounts = mounts;
    spec.n_mounts = sizeof(mounts) / sizeof(mounts[0]);
    struct report r;
    run_sandboxed(&spec, inside_docker, NULL, &r);
    close(trees[0]);
    close(trees[1]);
    close(root_tree);

    FILE *f = fopen(planted, "re");
    char buf[32] = "";
    cr_assert_not_null(f);
    cr_expect_not_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    cr_expect_str_eq(buf, "host\n", "the planted host file changed");
    assert_checks(&r);
    pathf(p, sizeof(p), "%s%s", rootfs, planted);
    cr_expect_eq(access(p, F_OK), 0, "the symlinked mount point was not made inside the rootfs");
}

Test(mounts, host_root_as_rootfs_is_refused)
{
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = "/";
    struct report r;
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(strstr(r.err.msg, "host's root") != NULL, "%s", r.err.msg);
}

Test(mounts, prepared_rootfs_tree_with_overlay, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256], p[512];
    make_rootfs(rootfs, sizeof(rootfs));
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    int root_tree = open_tree(AT_FDCWD, rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
    cr_assert_geq(root_tree, 0, "open_tree %s: %s", rootfs, strerror(errno));
    cr_assert_eq(chmod(tmp_dir, 0700), 0);
    struct bh_mount mounts[] = {
        {.source = "tmpfs", .destination = "/made/here", .type = "tmpfs"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.has_rootfs_tree_fd = true;
    spec.rootfs_tree_fd = root_tree;
    spec.rootfs_overlay = true;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    struct report r;
    run_sandboxed(&spec, inside_overlay, NULL, &r);
    close(root_tree);
    assert_checks(&r);
    pathf(p, sizeof(p), "%s/new-file", rootfs);
    cr_expect_neq(access(p, F_OK), 0, "the guest's new file reached the rootfs");
}

Test(mounts, unreachable_rootfs_path_is_a_clear_error, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256];
    make_rootfs(rootfs, sizeof(rootfs));
    cr_assert_eq(chmod(tmp_dir, 0700), 0);
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    struct report r;
    run_sandboxed(&spec, nothing, NULL, &r);
    cr_assert_eq(r.setup_rc, -1);
    cr_expect(r.err.code == EACCES && strstr(r.err.msg, rootfs) != NULL, "%s", r.err.msg);
}

static void inside_idmapped(struct report *r, void *arg)
{
    (void)arg;
    struct stat st = {0};
    check(r, "host root's files are root's inside",
          stat("/marker", &st) == 0 && st.st_uid == 0 && st.st_gid == 0, "uid %u gid %u", st.st_uid,
          st.st_gid);
    check(r, "mount point made through the idmapped root", fs_type("/made/here") == TMPFS_MAGIC,
          "type %#lx", fs_type("/made/here"));
    int fd = open("/guest-file", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    check(r, "root writable by the sandbox's root", fd >= 0, "create: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
}

/* The rootfs stays owned by host root, as docker's is: without the idmap
 * the sandbox's root could not even make its mount points. */
Test(mounts, idmapped_rootfs_tree, .fini = tmp_cleanup)
{
    skip_unless_able();
    tmp_make();
    char rootfs[256], p[512];
    make_rootfs(rootfs, sizeof(rootfs));
    struct bh_mount mounts[] = {
        {.source = "tmpfs", .destination = "/made/here", .type = "tmpfs"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    idmap_rootfs = rootfs;
    struct report r;
    run_sandboxed(&spec, inside_idmapped, NULL, &r);
    idmap_rootfs = NULL;
    assert_checks(&r);
    struct stat st;
    pathf(p, sizeof(p), "%s/guest-file", rootfs);
    cr_assert_eq(stat(p, &st), 0);
    cr_expect_eq(st.st_uid, 0, "the guest's root wrote as host uid %u, not host root's mapping",
                 st.st_uid);
}

/* ---- the pause before pivot_root (OCI hooks) ---------------------------------- */

enum pause_mode {
    PAUSE_TMPFS,
    PAUSE_PROC_OUTSIDE,
    PAUSE_SHARED,
    PAUSE_OWN_PROC_BIND,
    PAUSE_OWN_PROC_OUTSIDE,
    PAUSE_SHARED_UNDER_PROC,
};

struct pause_arg {
    enum pause_mode mode;
    const char *rootfs; /* where the root should be */
    bool root_seen;     /* the pause was told that path (pid 1's copy) */
};

/* Mounts as a hook would, by the root's path, in pid 1 before the pivot. */
static int pause_mount(void *arg, const char *root, struct bh_error *err)
{
    struct pause_arg *a = arg;
    a->root_seen = strcmp(root, a->rootfs) == 0;
    char at[600], from[600];
    pathf(at, sizeof(at), "%s/srv", root);
    int rc = 0;
    switch (a->mode) {
    case PAUSE_TMPFS:
        rc = mount("tmpfs", at, "tmpfs", 0, "size=64k");
        break;
    case PAUSE_PROC_OUTSIDE:
        rc = mount("proc", at, "proc", 0, NULL);
        break;
    case PAUSE_SHARED:
        rc = mount("tmpfs", at, "tmpfs", 0, "size=64k");
        if (rc == 0)
            rc = mount(NULL, at, NULL, MS_SHARED, NULL);
        break;
    case PAUSE_OWN_PROC_BIND:
        pathf(from, sizeof(from), "%s/proc/sys", root);
        rc = mount(from, from, NULL, MS_BIND, NULL);
        break;
    case PAUSE_OWN_PROC_OUTSIDE:
        pathf(from, sizeof(from), "%s/proc", root);
        rc = mount(from, at, NULL, MS_BIND, NULL);
        break;
    case PAUSE_SHARED_UNDER_PROC:
        pathf(from, sizeof(from), "%s/proc/sys", root);
        rc = mount(from, from, NULL, MS_BIND, NULL);
        if (rc == 0)
            rc = mount(NULL, from, NULL, MS_SHARED, NULL);
        break;
    }
    return rc < 0 ? bh_error_errno(err, errno, "the test's hook mount on %s", at) : 0;
}

static void inside_paused(struct report *r, void *arg)
{
    struct pause_arg *a = arg;
    check(r, "the pause was told the rootfs's own path", a->root_seen, "another path");
    if (a->mode == PAUSE_TMPFS)
        check(r, "the hook's mount moved with the pivot", fs_type("/srv") == TMPFS_MAGIC,
              "type %#lx", fs_type("/srv"));
    if (a->mode == PAUSE_OWN_PROC_BIND)
        check(r, "the hook's bind of the sandbox's own /proc/sys is there",
              fs_type("/proc/sys") == PROC_SUPER_MAGIC, "type %#lx", fs_type("/proc/sys"));
}

static void run_paused(enum pause_mode mode, enum bh_tier tier, struct report *r)
{
    tmp_make();
    char rootfs[256], p[512];
    make_rootfs(rootfs, sizeof(rootfs));
    pathf(p, sizeof(p), "%s/srv", rootfs);
    cr_assert_eq(mkdir(p, 0755), 0);
    cr_assert_eq(nftw(rootfs, chown_entry, 16, FTW_PHYS), 0);
    struct bh_mount mounts[] = {
        {.source = "proc", .destination = "/proc", .type = "proc"},
    };
    struct bh_sandbox_spec spec;
    spec_base(&spec);
    spec.rootfs = rootfs;
    spec.mounts = mounts;
    spec.n_mounts = 1;
    spec.tier = tier;
    struct pause_arg a = {.mode = mode, .rootfs = rootfs};
    struct bh_mounts_pause pause = {.fn = pause_mount, .arg = &a};
    setup_pause = &pause;
    run_sandboxed(&spec, inside_paused, &a, r);
    setup_pause = NULL;
}

/* The pause comes with the root at the rootfs's own path, and what is
 * mounted below it then is in the sandbox after pivot_root; the host's
 * mount table is untouched (run_sandboxed checks). */
Test(mounts, pause_before_pivot_root_at_the_rootfs_path, .fini = tmp_cleanup)
{
    skip_unless_able();
    struct report r;
    run_paused(PAUSE_TMPFS, BH_TIER_KERNEL, &r);
    assert_checks(&r);
}

/* At the kernel tier the pause's mounts follow the one rule for every
 * mount in the root (sentry/README.md): a procfs the sandbox did not make
 * (a new one: the sentry cannot prove its pid namespace) and propagation
 * under /proc fail the setup with the reason; the sandbox's own procfs
 * bound under /proc or elsewhere, and a shared mount outside /proc and
 * /sys, pass (the broker refuses a path through a procfs outside /proc and
 * takes its slow path for propagation); the container tier takes what runc
 * takes. */
Test(mounts, kernel_tier_checks_the_pauses_mounts, .fini = tmp_cleanup)
{
    skip_unless_able();
    struct report r;
    run_paused(PAUSE_PROC_OUTSIDE, BH_TIER_KERNEL, &r);
    cr_expect_eq(r.setup_rc, -1, "a new procfs on /srv was taken");
    cr_expect(strstr(r.err.msg, "a hook's proc on `/srv` is not one bulkhead made") != NULL, "%s",
              r.err.msg);
    tmp_cleanup();

    run_paused(PAUSE_SHARED_UNDER_PROC, BH_TIER_KERNEL, &r);
    cr_expect_eq(r.setup_rc, -1, "a shared mount on /proc/sys was taken");
    cr_expect(strstr(r.err.msg, "`/proc/sys`") != NULL && strstr(r.err.msg, "propagation") != NULL,
              "%s", r.err.msg);
    tmp_cleanup();

    run_paused(PAUSE_SHARED, BH_TIER_KERNEL, &r);
    assert_checks(&r);
    tmp_cleanup();

    run_paused(PAUSE_OWN_PROC_OUTSIDE, BH_TIER_KERNEL, &r);
    assert_checks(&r);
    tmp_cleanup();

    run_paused(PAUSE_OWN_PROC_BIND, BH_TIER_KERNEL, &r);
    assert_checks(&r);
    tmp_cleanup();

    run_paused(PAUSE_PROC_OUTSIDE, BH_TIER_CONTAINER, &r);
    cr_expect_eq(r.setup_rc, 0, "container tier: %s", r.err.msg);
}

/* The one table of every sandbox's own nodes: its numbers are the host's
 * (the nodes are copied and bound from there, and a mismatch fails the
 * set-up), and the kernel tier's extra-fd check finds by number only the
 * stateless ones. */
static bool made_has(dev_t dev)
{
    for (size_t i = 0; i < made.n_own_tmpfs; i++)
        if (made.own_tmpfs[i] == dev)
            return true;
    return false;
}

static int no_pause(void *arg, const char *root, struct bh_error *err)
{
    (void)arg;
    (void)root;
    (void)err;
    return 0;
}

/* The broker's parent-directory cache serves only the tmpfs the set-up
 * reports: at the kernel tier /tmp and the working directory, which it
 * mounted, and never the host's /usr (bound in) or a procfs; below the
 * kernel tier nothing (no broker). */
static void inside_made(struct report *r, void *arg)
{
    bool kernel = *(const bool *)arg;
    struct stat tmp, work, usr, proc;
    bool ok = stat("/tmp", &tmp) == 0 && stat("/work", &work) == 0 && stat("/usr", &usr) == 0 &&
              stat("/proc", &proc) == 0;
    check(r, "stat /tmp, the workdir, /usr, /proc", ok, "%s", strerror(errno));
    if (!ok)
        return;
    if (kernel) {
        check(r, "/tmp reported", made_has(tmp.st_dev), "%zu reported, not %lx", made.n_own_tmpfs,
              (unsigned long)tmp.st_dev);
        check(r, "the workdir reported", made_has(work.st_dev), "%zu reported, not %lx",
              made.n_own_tmpfs, (unsigned long)work.st_dev);
    } else {
        check(r, "nothing reported", made.n_own_tmpfs == 0, "%zu reported", made.n_own_tmpfs);
    }
    check(r, "/usr not reported", !made_has(usr.st_dev), "%lx reported", (unsigned long)usr.st_dev);
    check(r, "/proc not reported", !made_has(proc.st_dev), "%lx reported",
          (unsigned long)proc.st_dev);
}

Test(mounts, the_tmpfs_it_made_are_reported_at_the_kernel_tier)
{
    static const struct bh_mounts_pause pause = {.fn = no_pause};
    for (int k = 0; k < 2; k++) {
        bool kernel = k == 1;
        struct bh_sandbox_spec spec;
        spec_base(&spec);
        spec.limits.tmpfs_bytes = 1 << 20;
        spec.tier = kernel ? BH_TIER_KERNEL : BH_TIER_CONTAINER;
        struct report r;
        setup_pause = &pause;
        run_sandboxed(&spec, inside_made, &kernel, &r);
        setup_pause = NULL;
        cr_log_info("%s tier", kernel ? "kernel" : "container");
        assert_checks(&r);
    }
}

Test(dev_nodes, the_table_carries_the_hosts_numbers)
{
    for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
        const struct bh_dev_node *n = &bh_dev_nodes[i];
        char path[64];
        struct stat st;
        snprintf(path, sizeof(path), "/dev/%s", n->name);
        cr_assert_eq(stat(path, &st), 0, "stat %s: %s", path, strerror(errno));
        cr_expect(S_ISCHR(st.st_mode), "%s is not a character device", path);
        cr_expect(major(st.st_rdev) == n->major && minor(st.st_rdev) == n->minor,
                  "%s is %u:%u on this host, the table says %u:%u", path, major(st.st_rdev),
                  minor(st.st_rdev), n->major, n->minor);
        cr_expect_eq(bh_dev_node_by_rdev(st.st_rdev), n, "%s not found by its numbers", path);
    }
}

Test(dev_nodes, only_the_stateless_nodes_are_stateless)
{
    static const char *const stateless[] = {"null", "zero", "full", "random", "urandom"};
    size_t found = 0;
    for (size_t i = 0; i < BH_N_DEV_NODES; i++) {
        bool want = false;
        for (size_t k = 0; k < sizeof(stateless) / sizeof(stateless[0]); k++)
            want |= strcmp(bh_dev_nodes[i].name, stateless[k]) == 0;
        cr_expect_eq(bh_dev_nodes[i].stateless, want, "/dev/%s", bh_dev_nodes[i].name);
        found += want;
    }
    cr_expect_eq(found, 5);
    /* tty is the caller's terminal, ptmx a devpts instance's: not stateless. */
    cr_expect(!bh_dev_node_by_rdev(makedev(5, 0))->stateless);
    cr_expect(!bh_dev_node_by_rdev(makedev(5, 2))->stateless);
    /* /dev/mem (1:1), /dev/kmsg (1:11), a disk (8:0): not every sandbox's. */
    cr_expect_null(bh_dev_node_by_rdev(makedev(1, 1)));
    cr_expect_null(bh_dev_node_by_rdev(makedev(1, 11)));
    cr_expect_null(bh_dev_node_by_rdev(makedev(8, 0)));
}
