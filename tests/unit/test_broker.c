/* The syscall broker against real guests: each test forks a guest that
 * installs a small filter (libseccomp, SCMP_ACT_NOTIFY for the syscalls
 * under test), hands its listener to the test over a socketpair before any
 * notified call, and runs its part; the test runs a broker whose root is a
 * temporary directory. Guest checks report failures as text on the
 * socketpair, which the test prints. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <linux/openat2.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "broker-internal.h"
#include "cleanup.h"

/* ---- fixture: a root, a secret outside it ------------------------------ */

static char root[256];
static char outside[256];
static char secret[300];
static int root_fd = -1;
static bool proc_mounted;

static void put_file(const char *dir, const char *name, const char *content, mode_t mode)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    cr_assert(fd >= 0, "create %s: %s", p, strerror(errno));
    cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
    chmod(p, mode);
}

static void setup_root(void)
{
    strcpy(root, "/tmp/bh-broker-root-XXXXXX");
    strcpy(outside, "/tmp/bh-broker-out-XXXXXX");
    cr_assert(mkdtemp(root) != NULL);
    cr_assert(mkdtemp(outside) != NULL);
    snprintf(secret, sizeof(secret), "%s/secret", outside);
    put_file(outside, "secret", "SECRET", 0644);
    put_file(root, "inside.txt", "inside", 0644);
    char p[512];
    snprintf(p, sizeof(p), "%s/etc", root);
    mkdir(p, 0755);
    put_file(p, "passwd", "guest passwd", 0644);
    snprintf(p, sizeof(p), "%s/dir", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/dir/sub", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/etc_link", root);
    cr_assert_eq(symlink("/etc", p), 0);
    snprintf(p, sizeof(p), "%s/dir/up", root);
    cr_assert_eq(symlink("../../../../../../../etc", p), 0);
    snprintf(p, sizeof(p), "%s/secret_link", root);
    cr_assert_eq(symlink(secret, p), 0);
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(root_fd >= 0);
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)ftw;
    if (flag == FTW_DP)
        rmdir(p);
    else
        unlink(p);
    return 0;
}

static pid_t other_pid;

static void teardown_root(void)
{
    if (other_pid > 0) {
        kill(other_pid, SIGKILL);
        waitpid(other_pid, NULL, 0);
    }
    if (proc_mounted) {
        char p[512];
        snprintf(p, sizeof(p), "%s/proc", root);
        umount2(p, MNT_DETACH);
    }
    if (root_fd >= 0)
        close(root_fd);
    if (root[0])
        nftw(root, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
    if (outside[0])
        nftw(outside, rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* After unshare(CLONE_NEWNS) an fd opened before still walks the old
 * namespace's mounts. */
static void reopen_root(void)
{
    close(root_fd);
    root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(root_fd >= 0);
}

/* A /proc inside the root, in a mount namespace of this test process only. */
static void mount_proc_in_root(void)
{
    if (unshare(CLONE_NEWNS) < 0)
        cr_skip_test("cannot unshare a mount namespace: %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    char p[512];
    snprintf(p, sizeof(p), "%s/proc", root);
    mkdir(p, 0555);
    cr_assert_eq(mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), 0, "%s",
                 strerror(errno));
    proc_mounted = true;
    reopen_root();
}

TestSuite(broker, .init = setup_root, .fini = teardown_root, .timeout = 60);

/* ---- guests ------------------------------------------------------------ */

static int guest_sock = -1;

static void gsay(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof(buf) - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n > sizeof(buf) - 2)
        n = sizeof(buf) - 2;
    buf[n++] = '\n';
    ssize_t w = write(guest_sock, buf, (size_t)n);
    (void)w;
}

#define GCHECK(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            gsay("guest line %d: check `%s` failed (errno %s)", __LINE__, #cond, strerror(errno)); \
            _exit(1);                                                                              \
        }                                                                                          \
    } while (0)

typedef void (*guest_fn)(void *arg);

struct guest {
    pid_t pid;
    int sock;     /* parent's end: the guest's messages */
    int listener; /* received from the guest */
};

static int send_fd(int sock, int fd)
{
    char c = 'L';
    struct iovec iov = {&c, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *c0 = CMSG_FIRSTHDR(&mh);
    c0->cmsg_level = SOL_SOCKET;
    c0->cmsg_type = SCM_RIGHTS;
    c0->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c0), &fd, sizeof(int));
    return sendmsg(sock, &mh, 0) == 1 ? 0 : -1;
}

static int recv_fd(int sock)
{
    char c;
    struct iovec iov = {&c, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
        return -1;
    struct cmsghdr *c0 = CMSG_FIRSTHDR(&mh);
    if (c0 == NULL || c0->cmsg_type != SCM_RIGHTS)
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c0), sizeof(int));
    return fd;
}

/* Forks a guest: cwd in the root (unless keep_cwd), optional id drop, the
 * filter, the listener handed over, then fn. */
struct guest_opts {
    const int *notify;
    size_t n_notify;
    bool drop_ids; /* run as 65534:65534 with umask 027 */
};

static struct guest spawn_guest(const struct guest_opts *o, guest_fn fn, void *arg)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        guest_sock = sv[1];
        if (chdir(root) < 0)
            _exit(90);
        if (o->drop_ids) {
            umask(027);
            if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
                setresuid(65534, 65534, 65534) < 0)
                _exit(91);
        }
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        if (ctx == NULL)
            _exit(92);
        for (size_t i = 0; i < o->n_notify; i++) {
            /* sendmsg on the report socket stays direct: the listener goes
             * out through it before anyone serves notifications. */
            int rc = o->notify[i] == SCMP_SYS(sendmsg)
                         ? seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, o->notify[i], 1,
                                            SCMP_A0(SCMP_CMP_NE, (scmp_datum_t)guest_sock))
                         : seccomp_rule_add(ctx, SCMP_ACT_NOTIFY, o->notify[i], 0);
            if (rc < 0)
                _exit(93);
        }
        if (seccomp_load(ctx) < 0)
            _exit(94);
        int lfd = seccomp_notify_fd(ctx);
        if (lfd < 0 || send_fd(guest_sock, lfd) < 0)
            _exit(95);
        close(lfd);
        fn(arg);
        _exit(0);
    }
    close(sv[1]);
    struct guest g = {.pid = pid, .sock = sv[0]};
    g.listener = recv_fd(sv[0]);
    cr_assert(g.listener >= 0, "no listener from the guest");
    return g;
}

/* The tmpfs this test mounted as the sandbox's own (mount_tmpfs_root), as
 * mounts.c reports every tmpfs it makes; 0: none. */
static dev_t own_tmpfs_dev;

static struct bh_broker *start_broker(void)
{
    struct bh_broker_config cfg = {.root_fd = root_fd,
                                   .sentry_pid = 1,
                                   .own_tmpfs = &own_tmpfs_dev,
                                   .n_own_tmpfs = own_tmpfs_dev != 0};
    struct bh_broker *b = NULL;
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_new(&cfg, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_start(b, &err), 0, "%s", err.msg);
    return b;
}

/* Waits for the guest, prints what it said, asserts it passed. */
static void finish_guest(struct guest *g)
{
    int status;
    cr_assert_eq(waitpid(g->pid, &status, 0), g->pid);
    char buf[8192];
    ssize_t n, at = 0;
    while (at < (ssize_t)sizeof(buf) - 1 && (n = read(g->sock, buf + at, sizeof(buf) - 1 - at)) > 0)
        at += n;
    buf[at] = '\0';
    if (at > 0)
        fprintf(stderr, "%s", buf);
    close(g->sock);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "guest failed: status %#x: %s", status,
              buf);
}

/* The guest is forked before the broker's threads exist: a fork from a
 * multi-threaded process can leave an allocator lock held in the child
 * (seen as a deadlock under AddressSanitizer). Its notified calls simply
 * wait until the broker serves its listener. */
static void run_guest_stats(const struct guest_opts *o, guest_fn fn, void *arg,
                            struct bh_broker_stats *st)
{
    struct guest g = spawn_guest(o, fn, arg);
    struct bh_broker *b = start_broker();
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_add_listener(b, g.listener, &err), 0, "%s", err.msg);
    finish_guest(&g);
    if (st != NULL)
        bh_broker_get_stats(b, st);
    bh_broker_free(b);
}

static void run_guest(const struct guest_opts *o, guest_fn fn, void *arg)
{
    run_guest_stats(o, fn, arg, NULL);
}

static const int open_calls[] = {SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(openat2)};
static const struct guest_opts open_opts = {open_calls, 3, false};

/* Reads what path opens to: its content, or "" with errno. */
static const char *content_of(int dirfd, const char *path, int *err)
{
    static char buf[256];
    buf[0] = '\0';
    int fd = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *err = errno;
        return buf;
    }
    *err = 0;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    return buf;
}

/* ---- tests ------------------------------------------------------------- */

static void g_open_inside(void *arg)
{
    (void)arg;
    int e;
    GCHECK(strcmp(content_of(AT_FDCWD, "/inside.txt", &e), "inside") == 0);
    GCHECK(strcmp(content_of(AT_FDCWD, "inside.txt", &e), "inside") == 0);
    GCHECK(strcmp(content_of(AT_FDCWD, "dir/../inside.txt", &e), "inside") == 0);
    /* O_CLOEXEC is honoured through ADDFD. */
    int fd = open("/inside.txt", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0);
    GCHECK((fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0);
    close(fd);
    fd = open("/inside.txt", O_RDONLY);
    GCHECK(fd >= 0 && (fcntl(fd, F_GETFD) & FD_CLOEXEC) == 0);
    close(fd);
    /* Writes land inside the root. */
    fd = open("/new.txt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    GCHECK(fd >= 0);
    GCHECK(write(fd, "made", 4) == 4);
    close(fd);
    GCHECK(open("/new.txt", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600) < 0 && errno == EEXIST);
    GCHECK(open("/nope", O_RDONLY) < 0 && errno == ENOENT);
    GCHECK(open("/inside.txt", O_RDONLY | O_DIRECTORY) < 0 && errno == ENOTDIR);
    GCHECK(open("/etc_link", O_RDONLY | O_NOFOLLOW) < 0 && errno == ELOOP);
    /* O_PATH: ADDFD cannot carry it; a directory comes back readable. */
    fd = open("/etc_link", O_PATH | O_NOFOLLOW | O_CLOEXEC);
    GCHECK(fd < 0 && errno == EOPNOTSUPP);
    fd = open("/etc_link", O_PATH | O_CLOEXEC);
    GCHECK(fd >= 0);
    close(fd);
    /* The mode register is garbage without O_CREAT: never passed on. */
    fd = (int)syscall(SYS_openat, AT_FDCWD, "/dir", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0777);
    GCHECK(fd >= 0);
    close(fd);
    /* O_TMPFILE: an unnamed file in the root. */
    fd = open("/dir", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    GCHECK(fd >= 0);
    GCHECK(write(fd, "t", 1) == 1);
    close(fd);
    /* A dirfd the guest holds. */
    int dfd = open("/etc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    GCHECK(dfd >= 0);
    GCHECK(strcmp(content_of(dfd, "passwd", &e), "guest passwd") == 0);
    GCHECK(strcmp(content_of(dfd, "../inside.txt", &e), "inside") == 0);
    close(dfd);
    /* openat2 from the guest, with its own RESOLVE_BENEATH. */
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH};
    dfd = open("/dir", O_PATH | O_DIRECTORY | O_CLOEXEC);
    GCHECK(dfd >= 0);
    GCHECK(syscall(SYS_openat2, dfd, "../inside.txt", &how, sizeof(how)) < 0 && errno == EXDEV);
    close(dfd);
    how.resolve = RESOLVE_NO_SYMLINKS;
    GCHECK(syscall(SYS_openat2, AT_FDCWD, "/etc_link/passwd", &how, sizeof(how)) < 0 &&
           errno == ELOOP);
    how.resolve = RESOLVE_NO_XDEV;
    fd = (int)syscall(SYS_openat2, AT_FDCWD, "/inside.txt", &how, sizeof(how));
    GCHECK(fd >= 0);
    close(fd);
}

Test(broker, open_inside_works_and_returns_a_working_fd)
{
    run_guest(&open_opts, g_open_inside, NULL);
    char p[512];
    snprintf(p, sizeof(p), "%s/new.txt", root);
    int e;
    cr_assert_str_eq(content_of(AT_FDCWD, p, &e), "made");
}

static void g_escapes(void *arg)
{
    (void)arg;
    int e;
    const char *c;
    /* A symlink in the root pointing to /etc resolves to the root's /etc. */
    c = content_of(AT_FDCWD, "/etc_link/passwd", &e);
    GCHECK(strcmp(c, "guest passwd") == 0);
    c = content_of(AT_FDCWD, "../../../../etc/passwd", &e);
    GCHECK(strcmp(c, "guest passwd") == 0);
    c = content_of(AT_FDCWD, "dir/up/passwd", &e);
    GCHECK(strcmp(c, "guest passwd") == 0);
    c = content_of(AT_FDCWD, secret, &e);
    GCHECK(c[0] == '\0' && e == ENOENT);
    c = content_of(AT_FDCWD, "/secret_link", &e);
    GCHECK(c[0] == '\0' && e == ENOENT);
    /* The host's real /etc/passwd is never what comes back. */
    c = content_of(AT_FDCWD, "/etc/passwd", &e);
    GCHECK(strcmp(c, "guest passwd") == 0);
    char p[600];
    snprintf(p, sizeof(p), "../../../..%s", secret);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(c[0] == '\0' && e == ENOENT);
}

Test(broker, dotdot_absolute_and_symlink_escapes_stay_inside)
{
    run_guest(&open_opts, g_escapes, NULL);
}

static void g_proc(void *arg)
{
    pid_t broker_pid = *(pid_t *)arg;
    int e;
    char p[600];
    const char *c;
    /* Its own /proc works and means itself. */
    c = content_of(AT_FDCWD, "/proc/self/stat", &e);
    char want[32];
    snprintf(want, sizeof(want), "%d ", getpid());
    GCHECK(strncmp(c, want, strlen(want)) == 0);
    snprintf(p, sizeof(p), "/proc/%d/status", getpid());
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(strncmp(c, "Name:", 5) == 0);
    c = content_of(AT_FDCWD, "/proc/thread-self/comm", &e);
    GCHECK(c[0] != '\0');
    /* Magic links: root and cwd stay in the root. */
    c = content_of(AT_FDCWD, "/proc/self/root/etc/passwd", &e);
    GCHECK(strcmp(c, "guest passwd") == 0);
    c = content_of(AT_FDCWD, "/proc/self/cwd/inside.txt", &e);
    GCHECK(strcmp(c, "inside") == 0);
    snprintf(p, sizeof(p), "/proc/self/root%s", secret);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(c[0] == '\0' && e == ENOENT);
    /* fd/N reopens its own file. */
    int fd = open("/inside.txt", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0);
    snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(strcmp(c, "inside") == 0);
    close(fd);
    /* The sentry (the broker's pid, and pid 1) is out of reach. */
    snprintf(p, sizeof(p), "/proc/%d/environ", broker_pid);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(c[0] == '\0' && e == EACCES);
    c = content_of(AT_FDCWD, "/proc/1/cwd/etc/passwd", &e);
    GCHECK(e == EACCES);
    /* Only its name and status (pid 1's, which tools read) may be read. */
    snprintf(p, sizeof(p), "/proc/%d/status", broker_pid);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(e == 0 && strstr(c, "Umask:") != NULL);
    GCHECK(open(p, O_WRONLY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d/comm", broker_pid);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(e == 0 && c[0] != '\0');
    GCHECK(open(p, O_WRONLY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d", broker_pid);
    GCHECK(open(p, O_RDONLY | O_DIRECTORY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d/task/%d/environ", broker_pid, broker_pid);
    GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d/comm/../environ", broker_pid);
    GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
    GCHECK(open("/proc/1/mem", O_RDONLY) < 0 && errno == EACCES);
    /* Another process: mem and environ refused, harmless entries readable. */
    snprintf(p, sizeof(p), "/proc/%d/environ", other_pid);
    GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d/mem", other_pid);
    GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d/root/etc/passwd", other_pid);
    GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
    snprintf(p, sizeof(p), "/proc/%d/stat", other_pid);
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(e == 0 && c[0] != '\0');
    /* ".." never makes another process's entries look like no process's
     * (issue 10, finding 5): /proc/P/task/P/.. is still P's. */
    static const char *const dotdot[] = {
        "/proc/%d/task/%d/../%d/mem", "/proc/%d/task/%d/../%d/environ",
        "/proc/%d/task/%d/../../../%d/task/%d/../%d/maps", "/proc/%d/task/../task/%d/../%d/smaps"};
    for (size_t i = 0; i < sizeof(dotdot) / sizeof(dotdot[0]); i++) {
        snprintf(p, sizeof(p), dotdot[i], other_pid, other_pid, other_pid, other_pid, other_pid);
        GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
        snprintf(p, sizeof(p), dotdot[i], broker_pid, broker_pid, broker_pid, broker_pid,
                 broker_pid);
        GCHECK(open(p, O_RDONLY) < 0 && errno == EACCES);
    }
    snprintf(p, sizeof(p), "/proc/self/task/%d/../../%d/environ", getpid(), other_pid);
    GCHECK(open(p, O_RDONLY) < 0);
    snprintf(p, sizeof(p), "/proc/%d/task/%d/../%d/maps", getpid(), getpid(), getpid());
    c = content_of(AT_FDCWD, p, &e);
    GCHECK(e == 0 && c[0] != '\0'); /* its own, through "..": fine */
    /* Own mem: readable, never writable; exe never writable. */
    fd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0);
    close(fd);
    GCHECK(open("/proc/self/mem", O_RDWR) < 0 && errno == EACCES);
    GCHECK(open("/proc/self/exe", O_WRONLY) < 0 && errno == EACCES);
    GCHECK(open("/proc/1/exe", O_WRONLY) < 0 && errno == EACCES);
    /* No write under /proc (the guest's Landlock domain grants none). */
    GCHECK(open("/proc/self/comm", O_WRONLY) < 0 && errno == EACCES);
    GCHECK(open("/proc/self/oom_score_adj", O_WRONLY) < 0 && errno == EACCES);
    /* /proc/sys writes: read-only. */
    GCHECK(open("/proc/sys/kernel/hostname", O_WRONLY) < 0 && errno == EROFS);
    c = content_of(AT_FDCWD, "/proc/sys/kernel/ostype", &e);
    GCHECK(strncmp(c, "Linux", 5) == 0);
    /* Through a symlink to its own /proc/self/fd/N (like /dev/stdin). */
    fd = open("/inside.txt", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0 && dup2(fd, 50) == 50);
    close(fd);
    c = content_of(AT_FDCWD, "/fdlink", &e);
    GCHECK(strcmp(c, "inside") == 0);
    close(50);
    /* stat and readlink of /proc/self mean the guest too, also through a
     * symlink planted in the root. */
    struct stat a, b2;
    snprintf(p, sizeof(p), "/proc/%d", getpid());
    GCHECK(stat(p, &a) == 0 && stat("/proc/self", &b2) == 0 && a.st_ino == b2.st_ino);
    GCHECK(stat("/selflink", &b2) == 0 && a.st_ino == b2.st_ino);
    char lt[64];
    ssize_t ln = readlink("/proc/self", lt, sizeof(lt) - 1);
    GCHECK(ln > 0);
    lt[ln] = '\0';
    GCHECK(atoi(lt) == getpid());
    ln = readlink("/proc/self/cwd", lt, sizeof(lt) - 1);
    GCHECK(ln == 1 && lt[0] == '/'); /* its cwd is the root, in its own view */
    /* A symlink planted in the root pointing at /proc/self lands on the guest. */
    c = content_of(AT_FDCWD, "/mylink_status", &e);
    GCHECK(strncmp(c, "Name:", 5) == 0);
}

Test(broker, proc_self_works_and_the_sentry_and_others_are_refused)
{
    mount_proc_in_root();
    char p[512];
    snprintf(p, sizeof(p), "%s/mylink_status", root);
    cr_assert_eq(symlink("/proc/self/status", p), 0);
    snprintf(p, sizeof(p), "%s/fdlink", root);
    cr_assert_eq(symlink("/proc/self/fd/50", p), 0);
    snprintf(p, sizeof(p), "%s/selflink", root);
    cr_assert_eq(symlink("/proc/self", p), 0);
    other_pid = fork();
    cr_assert(other_pid >= 0);
    if (other_pid == 0) {
        pause();
        _exit(0);
    }
    pid_t me = getpid();
    static const int calls[] = {SCMP_SYS(open),       SCMP_SYS(openat), SCMP_SYS(openat2),
                                SCMP_SYS(newfstatat), SCMP_SYS(stat),   SCMP_SYS(readlink),
                                SCMP_SYS(readlinkat), SCMP_SYS(statx)};
    struct guest_opts o = {calls, sizeof(calls) / sizeof(calls[0]), false};
    run_guest(&o, g_proc, &me);
}

static void g_sys(void *arg)
{
    (void)arg;
    GCHECK(open("/sys/class/net/lo/mtu", O_WRONLY) < 0 && errno == EROFS);
    GCHECK(open("/sys/kernel/not-there", O_WRONLY | O_CREAT, 0600) < 0 && errno == EROFS);
    int fd = open("/sys/class/net/lo/mtu", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0);
    close(fd);
}

Test(broker, writes_under_sys_are_refused)
{
    if (unshare(CLONE_NEWNS) < 0)
        cr_skip_test("cannot unshare a mount namespace");
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    char p[512];
    snprintf(p, sizeof(p), "%s/sys", root);
    mkdir(p, 0555);
    cr_assert_eq(mount("/sys", p, NULL, MS_BIND | MS_REC, NULL), 0);
    reopen_root();
    run_guest(&open_opts, g_sys, NULL);
    umount2(p, MNT_DETACH);
}

/* A procfs mounted elsewhere than /proc (an OCI config may ask) is refused
 * whole: its per-process checks read /proc/N from the path. A path to it
 * has no symlink and no "..", so this also proves that the broker saw the
 * mount and does not take such a path as plain (broker.c,
 * special_mounts_only_at_proc_and_sys). */
static void g_odd_proc(void *arg)
{
    (void)arg;
    errno = 0;
    int fd = open("/odd/meminfo", O_RDONLY | O_CLOEXEC);
    GCHECK(fd < 0 && errno == EACCES);
    GCHECK(open("/inside.txt", O_RDONLY | O_CLOEXEC) >= 0);
}

Test(broker, a_procfs_mounted_elsewhere_is_refused)
{
    if (unshare(CLONE_NEWNS) < 0)
        cr_skip_test("cannot unshare a mount namespace");
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0);
    char p[512];
    snprintf(p, sizeof(p), "%s/odd", root);
    mkdir(p, 0555);
    cr_assert_eq(mount("proc", p, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL), 0, "%s",
                 strerror(errno));
    reopen_root();
    run_guest(&open_opts, g_odd_proc, NULL);
    umount2(p, MNT_DETACH);
}

/* ---- TOCTOU ------------------------------------------------------------ */

static char flip_buf[PATH_MAX];
static atomic_bool flip_stop;

static void *flipper(void *arg)
{
    (void)arg;
    size_t n = 0;
    while (!atomic_load(&flip_stop)) {
        /* The inside path, then the secret's absolute path in the guest's
         * own (host) view: what a CONTINUE answer would let the kernel open. */
        if (n++ & 1)
            memcpy(flip_buf, secret, strlen(secret) + 1);
        else
            memcpy(flip_buf, "/inside.txt", 12);
        /* Each state holds a little (far less than a brokered call), so
         * the broker's read is not nearly always torn between the two. */
        for (int spin = 0; spin < 256 && !atomic_load(&flip_stop); spin++)
            ;
    }
    return NULL;
}

static void g_toctou(void *arg)
{
    (void)arg;
    pthread_t t;
    strcpy(flip_buf, "/inside.txt");
    GCHECK(pthread_create(&t, NULL, flipper, NULL) == 0);
    int inside = 0, refused = 0, i;
    /* 3000 opens, and more (to 30000) until one got the inside file: on a
     * schedule where every read was torn or the secret's, the race ran but
     * the check that it also opened the inside path would fail. */
    for (i = 0; i < 30000 && (i < 3000 || inside == 0); i++) {
        int fd = open(flip_buf, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            refused++;
            continue;
        }
        char buf[64] = "";
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n > 0 ? n : 0] = '\0';
        GCHECK(strcmp(buf, "SECRET") != 0);
        if (strcmp(buf, "inside") == 0)
            inside++;
    }
    atomic_store(&flip_stop, true);
    pthread_join(t, NULL);
    gsay("toctou: %d opens while flipping: %d inside, %d refused, 0 secret", i, inside, refused);
    GCHECK(inside > 0);
}

Test(broker, toctou_flipping_path_never_opens_the_outside_file)
{
    run_guest(&open_opts, g_toctou, NULL);
}

/* ---- a slow call does not stall others ---------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *fifo_reader(void *arg)
{
    (void)arg;
    int fd = open("/fifo", O_RDONLY | O_CLOEXEC); /* no writer yet: blocks */
    if (fd >= 0)
        close(fd);
    return NULL;
}

static void g_slow(void *arg)
{
    (void)arg;
    /* More blocked calls than the broker starts workers with (2): the pool
     * must grow for the last open to go through. */
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        GCHECK(pthread_create(&t[i], NULL, fifo_reader, NULL) == 0);
    usleep(300 * 1000);
    double t0 = now_s();
    int fd = open("/inside.txt", O_RDONLY | O_CLOEXEC);
    double dt = now_s() - t0;
    GCHECK(fd >= 0);
    close(fd);
    gsay("slow: an open while 4 other threads block on a FIFO took %.3f ms", dt * 1e3);
    /* A stalled open never returns (the suite's timeout fails it): no bound
     * on dt, which a loaded machine stretches. */
    /* Release the readers: the writer's open completes theirs. */
    fd = open("/fifo", O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    GCHECK(fd >= 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    close(fd);
}

Test(broker, a_blocked_fifo_open_does_not_stall_other_threads)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/fifo", root);
    cr_assert_eq(mkfifo(p, 0666), 0);
    run_guest(&open_opts, g_slow, NULL);
}

/* ---- names and attributes ---------------------------------------------- */

/* Every file syscall the broker answers, from its own list. */
#define NOTIFY(name) SYS_##name,
#define NOTIFY_FILE(name, names) NOTIFY(name)
static const int fs_calls[] = {
#ifdef SYS_open
    BH_BROKER_FILE_SYSCALLS_LEGACY(NOTIFY_FILE)
#endif
        BH_BROKER_FILE_SYSCALLS(NOTIFY_FILE)};

static void g_names(void *arg)
{
    (void)arg;
    struct stat st;
    GCHECK(mkdir("/d1", 0777) == 0);
    GCHECK(mkdir("/d1", 0777) < 0 && errno == EEXIST);
    GCHECK(stat("/d1", &st) == 0 && S_ISDIR(st.st_mode));
    GCHECK((st.st_mode & 0777) == 0755); /* the guest's umask 022 */
    GCHECK(rename("/d1", "d2") == 0);
    GCHECK(stat("/d1", &st) < 0 && errno == ENOENT);
    GCHECK(stat("d2", &st) == 0 && S_ISDIR(st.st_mode));
    GCHECK(mkdir("/d2/x", 0700) == 0);
    GCHECK(rmdir("/d2") < 0 && errno == ENOTEMPTY);
    GCHECK(rmdir("/d2/x") == 0 && rmdir("/d2") == 0);
    GCHECK(unlink("/nope") < 0 && errno == ENOENT);
    GCHECK(unlink("/dir") < 0 && (errno == EISDIR || errno == EPERM));
    GCHECK(mkdir("/nope/x", 0700) < 0 && errno == ENOENT);
    /* stat follows, lstat does not; both stay in the root. */
    GCHECK(stat("/etc_link/passwd", &st) == 0 && st.st_size == 12);
    GCHECK(lstat("/etc_link", &st) == 0 && S_ISLNK(st.st_mode));
    GCHECK(stat("/secret_link", &st) < 0 && errno == ENOENT);
    struct statx stx;
    GCHECK(statx(AT_FDCWD, "inside.txt", 0, STATX_SIZE, &stx) == 0 && stx.stx_size == 6);
    int fd = open("/inside.txt", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0);
    GCHECK(fstatat(fd, "", &st, AT_EMPTY_PATH) == 0 && st.st_size == 6);
    close(fd);
    /* readlink gives the link's own text. */
    char buf[256];
    ssize_t n = readlink("/etc_link", buf, sizeof(buf));
    GCHECK(n == 4 && memcmp(buf, "/etc", 4) == 0);
    n = readlink("/etc_link", buf, 2);
    GCHECK(n == 2);
    GCHECK(readlink("/inside.txt", buf, sizeof(buf)) < 0 && errno == EINVAL);
    GCHECK(symlink("inside.txt", "/ln") == 0);
    n = readlinkat(AT_FDCWD, "ln", buf, sizeof(buf));
    GCHECK(n == 10 && memcmp(buf, "inside.txt", 10) == 0);
    GCHECK(link("/inside.txt", "/hard") == 0);
    GCHECK(stat("/hard", &st) == 0 && st.st_nlink == 2);
    GCHECK(unlink("/hard") == 0 && unlink("/ln") == 0);
    /* access and chmod. */
    GCHECK(access("/inside.txt", R_OK) == 0);
    GCHECK(access("/nope", F_OK) < 0 && errno == ENOENT);
    GCHECK(chmod("/inside.txt", 0600) == 0);
    GCHECK(stat("/inside.txt", &st) == 0 && (st.st_mode & 0777) == 0600);
    GCHECK(truncate("/inside.txt", 3) == 0);
    GCHECK(stat("/inside.txt", &st) == 0 && st.st_size == 3);
    struct timespec ts[2] = {{.tv_sec = 1000000}, {.tv_sec = 2000000}};
    GCHECK(utimensat(AT_FDCWD, "/inside.txt", ts, 0) == 0);
    GCHECK(stat("/inside.txt", &st) == 0 && st.st_mtime == 2000000);
    /* Mutators never reach outside. */
    GCHECK(unlink(secret) < 0 && errno == ENOENT);
    GCHECK(chmod("/secret_link", 0777) < 0 && errno == ENOENT);
    char p[600];
    snprintf(p, sizeof(p), "../../..%s", secret);
    GCHECK(rename(p, "/stolen") < 0 && errno == ENOENT);
}

Test(broker, mkdir_unlink_rename_stat_readlink_give_the_right_results)
{
    struct guest_opts o = {fs_calls, sizeof(fs_calls) / sizeof(fs_calls[0]), false};
    run_guest(&o, g_names, NULL);
    struct stat st;
    cr_assert_eq(stat(secret, &st), 0, "the secret outside is untouched");
    cr_assert_eq(st.st_mode & 0777, 0644);
    char p[512];
    snprintf(p, sizeof(p), "%s/inside.txt", root);
    cr_assert_eq(stat(p, &st), 0);
    cr_assert_eq(st.st_size, 3);
}

static void g_ids(void *arg)
{
    (void)arg;
    struct stat st;
    /* Permission checks are the guest's (65534), not the broker's (root). */
    GCHECK(open("/private", O_RDONLY) < 0 && errno == EACCES);
    GCHECK(access("/private", R_OK) < 0 && errno == EACCES);
    GCHECK(mkdir("/ro/x", 0777) < 0 && errno == EACCES);
    GCHECK(mkdir("/pub/mine", 0777) == 0);
    GCHECK(stat("/pub/mine", &st) == 0 && st.st_uid == 65534 && st.st_gid == 65534);
    GCHECK((st.st_mode & 0777) == 0750); /* umask 027 */
    int fd = open("/pub/file", O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    GCHECK(fd >= 0);
    close(fd);
    GCHECK(stat("/pub/file", &st) == 0 && st.st_uid == 65534 && (st.st_mode & 0777) == 0640);
    GCHECK(chmod("/inside.txt", 0777) < 0 && errno == EPERM);
}

Test(broker, requests_run_with_the_guests_ids_and_umask)
{
    chmod(root, 0755); /* mkdtemp's 0700 would deny the guest everything */
    put_file(root, "private", "private", 0600);
    char p[512];
    snprintf(p, sizeof(p), "%s/ro", root);
    mkdir(p, 0755);
    snprintf(p, sizeof(p), "%s/pub", root);
    mkdir(p, 0777);
    chmod(p, 0777);
    struct guest_opts o = {fs_calls, sizeof(fs_calls) / sizeof(fs_calls[0]), true};
    run_guest(&o, g_ids, NULL);
}

/* ---- a guest that dies mid-call ----------------------------------------- */

static void g_die_in_fifo(void *arg)
{
    (void)arg;
    open("/fifo", O_RDONLY | O_CLOEXEC); /* killed while the broker holds it */
    _exit(3);
}

static void g_plain_open(void *arg)
{
    (void)arg;
    int e;
    GCHECK(strcmp(content_of(AT_FDCWD, "/inside.txt", &e), "inside") == 0);
}

/* Whether a thread of this process (a broker worker) sleeps in a FIFO's
 * open, waiting for a writer: what the test below must kill the guest
 * during, however long a busy machine takes to get there. */
static bool a_worker_waits_in_a_fifo_open(void)
{
    DIR *d = opendir("/proc/self/task");
    bool found = false;
    for (struct dirent *e; d != NULL && !found && (e = readdir(d)) != NULL;) {
        char path[300], wchan[64] = "";
        snprintf(path, sizeof(path), "/proc/self/task/%s/wchan", e->d_name);
        FILE *f = fopen(path, "re");
        if (f != NULL && fgets(wchan, sizeof(wchan), f) != NULL)
            found = strcmp(wchan, "wait_for_partner") == 0 || strcmp(wchan, "fifo_open") == 0;
        if (f != NULL)
            fclose(f);
    }
    if (d != NULL)
        closedir(d);
    return found;
}

Test(broker, a_notification_from_a_dead_process_is_handled)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/fifo", root);
    cr_assert_eq(mkfifo(p, 0666), 0);
    struct guest g = spawn_guest(&open_opts, g_die_in_fifo, NULL);
    struct bh_broker *b = start_broker();
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_add_listener(b, g.listener, &err), 0, "%s", err.msg);
    for (double end = now_s() + 60; !a_worker_waits_in_a_fifo_open() && now_s() < end;)
        usleep(10 * 1000);
    cr_assert(a_worker_waits_in_a_fifo_open(), "no broker worker sat in the guest's FIFO open "
                                               "within 60 s (its wchan)");
    kill(g.pid, SIGKILL);
    int status;
    waitpid(g.pid, &status, 0);
    close(g.sock);
    /* The broker lets the open go by itself (its watchdog sees that no one
     * waits for it) and its answer finds no one. */
    struct bh_broker_stats st = {0};
    for (int i = 0; i < 300 && (st.dead == 0 || st.interrupted == 0); i++) {
        usleep(10 * 1000);
        bh_broker_get_stats(b, &st);
    }
    cr_assert_geq(st.interrupted, 1, "the FIFO open of a dead guest was not interrupted");
    cr_assert_geq(st.dead, 1, "the answer to a dead guest was not noticed");
    /* No reader is left in the FIFO on the dead guest's behalf. */
    int w = open(p, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    int e = errno;
    if (w >= 0)
        close(w);
    cr_assert(w < 0 && e == ENXIO, "the broker still holds the FIFO open for a dead guest");
    /* And the broker still serves the next guest. */
    struct guest g2 = spawn_guest(&open_opts, g_plain_open, NULL);
    cr_assert_eq(bh_broker_add_listener(b, g2.listener, &err), 0, "%s", err.msg);
    finish_guest(&g2);
    bh_broker_free(b);
}

/* ---- sockets ----------------------------------------------------------- */

static int tcp_port;

static void set_sun(struct sockaddr_un *ua, const char *path)
{
    size_t l = strlen(path);
    if (l >= sizeof(ua->sun_path))
        l = sizeof(ua->sun_path) - 1;
    memset(ua->sun_path, 0, sizeof(ua->sun_path));
    memcpy(ua->sun_path, path, l);
}
static char unix_path_inside[600];

static void g_net(void *arg)
{
    (void)arg;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    GCHECK(s >= 0);
    struct sockaddr_in far = {.sin_family = AF_INET, .sin_port = htons(80)};
    inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
    GCHECK(connect(s, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == ENETUNREACH);
    inet_pton(AF_INET, "10.0.0.1", &far.sin_addr);
    GCHECK(connect(s, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == ENETUNREACH);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
    inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
    GCHECK(connect(s, (struct sockaddr *)&lo, sizeof(lo)) == 0);
    GCHECK(write(s, "hi", 2) == 2);
    close(s);
    int s6 = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s6 >= 0) {
        struct sockaddr_in6 f6 = {.sin6_family = AF_INET6, .sin6_port = htons(80)};
        inet_pton(AF_INET6, "2001:db8::1", &f6.sin6_addr);
        GCHECK(connect(s6, (struct sockaddr *)&f6, sizeof(f6)) < 0 && errno == ENETUNREACH);
        close(s6);
    }
    /* Unix: a socket inside the root connects; a path outside does not. */
    int u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    strcpy(ua.sun_path, "/inside.sock");
    GCHECK(connect(u, (struct sockaddr *)&ua, sizeof(ua)) == 0);
    close(u);
    u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    set_sun(&ua, unix_path_inside);
    GCHECK(connect(u, (struct sockaddr *)&ua, sizeof(ua)) < 0 && errno == ENOENT);
    close(u);
    /* bind creates its socket inside the root. */
    u = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    strcpy(ua.sun_path, "/dir/bound.sock");
    GCHECK(bind(u, (struct sockaddr *)&ua, sizeof(ua)) == 0);
    close(u);
}

Test(broker, connect_only_to_loopback_and_unix_paths_inside)
{
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(bind(ls, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(listen(ls, 8), 0);
    socklen_t al = sizeof(a);
    getsockname(ls, (struct sockaddr *)&a, &al);
    tcp_port = ntohs(a.sin_port);
    int us = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un ua = {.sun_family = AF_UNIX};
    char sp[600];
    snprintf(sp, sizeof(sp), "%s/inside.sock", root);
    set_sun(&ua, sp);
    cr_assert_eq(bind(us, (struct sockaddr *)&ua, sizeof(ua)), 0);
    cr_assert_eq(listen(us, 8), 0);
    /* A socket outside the root, at a path the guest names absolutely. */
    int os = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    snprintf(unix_path_inside, sizeof(unix_path_inside), "%s/out.sock", outside);
    set_sun(&ua, unix_path_inside);
    cr_assert_eq(bind(os, (struct sockaddr *)&ua, sizeof(ua)), 0);
    cr_assert_eq(listen(os, 8), 0);

    static const int net_calls[] = {SCMP_SYS(connect), SCMP_SYS(bind)};
    struct guest_opts o = {net_calls, 2, false};
    run_guest(&o, g_net, NULL);

    int c = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    cr_assert(c >= 0, "the loopback connection did not arrive");
    char buf[8] = "";
    cr_assert_eq(read(c, buf, sizeof(buf)), 2);
    cr_assert_eq(memcmp(buf, "hi", 2), 0);
    close(c);
    fcntl(os, F_SETFL, O_NONBLOCK);
    c = accept4(os, NULL, NULL, SOCK_CLOEXEC);
    cr_assert(c < 0, "a socket outside the root was reached");
    char p[600];
    snprintf(p, sizeof(p), "%s/dir/bound.sock", root);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    cr_assert(S_ISSOCK(st.st_mode));
    close(ls);
    close(us);
    close(os);
}

static void g_sendmsg(void *arg)
{
    (void)arg;
    int sp[2];
    GCHECK(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, sp) == 0);
    int fd = open("/inside.txt", O_RDONLY | O_CLOEXEC);
    GCHECK(fd >= 0);
    /* SCM_RIGHTS carries the guest's own fd (translated by the broker). */
    char c = 'x';
    struct iovec iov = {&c, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    struct msghdr mh = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    GCHECK(sendmsg(sp[0], &mh, 0) == 1);
    close(fd);
    int got = recv_fd(sp[1]);
    GCHECK(got >= 0);
    char buf[16] = "";
    GCHECK(read(got, buf, sizeof(buf)) == 6 && memcmp(buf, "inside", 6) == 0);
    close(got);
    /* Credentials cannot be sent for someone else. */
    struct ucred cr = {.pid = getpid(), .uid = getuid(), .gid = getgid()};
    union {
        char buf[CMSG_SPACE(sizeof(struct ucred))];
        struct cmsghdr align;
    } u2;
    mh.msg_control = u2.buf;
    mh.msg_controllen = sizeof(u2.buf);
    cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_CREDENTIALS;
    cm->cmsg_len = CMSG_LEN(sizeof(cr));
    memcpy(CMSG_DATA(cm), &cr, sizeof(cr));
    GCHECK(sendmsg(sp[0], &mh, 0) < 0 && errno == EPERM);
    /* UDP: loopback only. */
    int u6 = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    GCHECK(u6 >= 0);
    struct sockaddr_in far = {.sin_family = AF_INET, .sin_port = htons(53)};
    inet_pton(AF_INET, "192.0.2.1", &far.sin_addr);
    GCHECK(sendto(u6, "q", 1, 0, (struct sockaddr *)&far, sizeof(far)) < 0 && errno == ENETUNREACH);
    struct msghdr m2 = {
        .msg_name = &far, .msg_namelen = sizeof(far), .msg_iov = &iov, .msg_iovlen = 1};
    GCHECK(sendmsg(u6, &m2, 0) < 0 && errno == ENETUNREACH);
    struct sockaddr_in lo = {.sin_family = AF_INET, .sin_port = htons((uint16_t)tcp_port)};
    inet_pton(AF_INET, "127.0.0.1", &lo.sin_addr);
    GCHECK(sendto(u6, "q", 1, 0, (struct sockaddr *)&lo, sizeof(lo)) == 1);
    close(u6);
    /* A broken pipe: EPIPE, and the guest's own SIGPIPE. */
    signal(SIGPIPE, SIG_IGN);
    int st[2];
    GCHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, st) == 0);
    close(st[1]);
    GCHECK(sendto(st[0], "z", 1, 0, NULL, 0) < 0 && errno == EPIPE);
    close(st[0]);
}

Test(broker, sendmsg_translates_fds_and_checks_addresses)
{
    int us = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    cr_assert_eq(bind(us, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    getsockname(us, (struct sockaddr *)&a, &al);
    tcp_port = ntohs(a.sin_port);
    static const int calls[] = {SCMP_SYS(open), SCMP_SYS(openat), SCMP_SYS(sendmsg),
                                SCMP_SYS(sendto)};
    struct guest_opts o = {calls, 4, false};
    run_guest(&o, g_sendmsg, NULL);
    char buf[4];
    cr_assert_eq(recv(us, buf, sizeof(buf), MSG_DONTWAIT), 1, "the loopback datagram is missing");
    close(us);
}

/* ---- unknown notified syscalls ------------------------------------------ */

static void g_unknown(void *arg)
{
    (void)arg;
    char buf[64];
    GCHECK(syscall(SYS_getcwd, buf, sizeof(buf)) < 0 && errno == ENOSYS);
}

Test(broker, an_unhandled_notified_syscall_gets_enosys)
{
    static const int calls[] = {SCMP_SYS(getcwd)};
    struct guest_opts o = {calls, 1, false};
    run_guest(&o, g_unknown, NULL);
}

/* ---- speed ----------------------------------------------------------- */

/* The best of several batches: the machine is shared, and the best batch is
 * the one least disturbed by others. */
#define BATCHES 10
#define PER_BATCH 300
#define MEASURE(expr)                                                                              \
    ({                                                                                             \
        double best_ = 1e9;                                                                        \
        for (int b_ = 0; b_ < BATCHES; b_++) {                                                     \
            double t0_ = now_s();                                                                  \
            for (int i_ = 0; i_ < PER_BATCH; i_++) {                                               \
                expr;                                                                              \
            }                                                                                      \
            double us_ = (now_s() - t0_) * 1e6 / PER_BATCH;                                        \
            if (us_ < best_)                                                                       \
                best_ = us_;                                                                       \
        }                                                                                          \
        best_;                                                                                     \
    })

static void open_close(const char *path)
{
    int fd = openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        gsay("open %s failed: %s", path, strerror(errno));
        _exit(1);
    }
    close(fd);
}

static void g_bench(void *arg)
{
    double *native = arg;
    char cwd[64];
    struct stat st;
    double open_us = MEASURE(open_close("/inside.txt"));
    double stat_us = MEASURE(stat("/inside.txt", &st));
    double ppid_us = MEASURE(syscall(SYS_getppid));
    double refused_us =
        MEASURE(syscall(SYS_mknodat, AT_FDCWD, "/dev-node", S_IFCHR | 0600, 0x0101));
    double rtt_us = MEASURE(syscall(SYS_getcwd, cwd, sizeof(cwd)));
    gsay("speed (best of %d batches of %d): openat+close brokered %.1f us vs native %.1f us "
         "(x%.1f); stat brokered %.1f us vs native %.1f us; getppid direct %.2f us vs native "
         "%.2f us; brokered refusal (mknodat of a device) %.1f us; bare round trip (notified, "
         "unbrokered: ENOSYS) %.1f us",
         BATCHES, PER_BATCH, open_us, native[0], open_us / native[0], stat_us, native[2], ppid_us,
         native[1], refused_us, rtt_us);
}

static void native_open_close(const char *p)
{
    int fd = openat(AT_FDCWD, p, O_RDONLY | O_CLOEXEC);
    cr_assert(fd >= 0);
    close(fd);
}

/* A guest thread seen alive keeps its tid for sure only for the broker's
 * alive window (at most 1 ms): a call that comes later is checked again
 * (pidfd poll) before the cached ids are used. Calls 3 ms apart: every call
 * after the first is rechecked, however fast or slow the machine. */
static void g_spaced_stats(void *arg)
{
    (void)arg;
    struct stat st;
    for (int i = 0; i < 6; i++) {
        GCHECK(stat("/inside.txt", &st) == 0 && st.st_size == 6);
        struct timespec ts = {0, 3 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

Test(broker, a_caller_seen_long_ago_is_checked_again)
{
    static const int calls[] = {SCMP_SYS(stat), SCMP_SYS(newfstatat)};
    struct guest_opts o = {calls, 2, true};
    chmod(root, 0755); /* the guest runs as 65534 */
    struct guest g = spawn_guest(&o, g_spaced_stats, NULL);
    struct bh_broker *b = start_broker();
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_add_listener(b, g.listener, &err), 0, "%s", err.msg);
    finish_guest(&g);
    struct bh_broker_stats st;
    bh_broker_get_stats(b, &st);
    bh_broker_free(b);
    cr_expect_eq(st.handled, 6, "handled %lu", st.handled);
    cr_expect_geq(st.rechecked, 5, "only %lu of the 5 later calls were checked again",
                  st.rechecked);
    /* Each later call proved its caller alive afresh: by a NOTIF_ID_VALID
     * when the receiver sat in NOTIF_RECV through the guest's 3 ms sleep
     * (longer than the window), or by its own NOTIF_RECV when a busy
     * machine kept the receiver from getting back to it until the call was
     * already queued. Never by the stale sighting of the guest. */
    cr_expect_geq(st.id_checks + st.recv_proofs, 6,
                  "only %lu NOTIF_ID_VALID and %lu fresh NOTIF_RECV proofs for 6 calls",
                  st.id_checks, st.recv_proofs);
}

static void g_stats(void *arg)
{
    int n = *(int *)arg;
    struct stat st;
    for (int i = 0; i < n; i++)
        GCHECK(stat("/inside.txt", &st) == 0 && st.st_size == 6);
}

/* Serves guest g with a broker made from cfg (its alive window replaced
 * by *window_ns before its threads start, unless NULL) until g ends, and
 * until the broker counted at least want_handled answers: the last one
 * reaches the guest before the receiver counts it. Its counters. */
static struct bh_broker_stats serve_guest(const struct bh_broker_config *cfg,
                                          const uint64_t *window_ns, struct guest *g,
                                          unsigned long want_handled)
{
    struct bh_broker *b = NULL;
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_new(cfg, &b, &err), 0, "%s", err.msg);
    if (window_ns != NULL)
        b->alive_window_ns = *window_ns;
    cr_assert_eq(bh_broker_start(b, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_add_listener(b, g->listener, &err), 0, "%s", err.msg);
    finish_guest(g);
    struct bh_broker_stats st;
    bh_broker_get_stats(b, &st);
    for (int i = 0; i < 500 && st.handled < want_handled; i++) {
        usleep(2000);
        bh_broker_get_stats(b, &st);
    }
    bh_broker_free(b);
    return st;
}

/* Runs n stats of a guest against a broker whose alive window is window_ns
 * and returns its counters. */
static struct bh_broker_stats stats_with_window(uint64_t window_ns, int n)
{
    static const int calls[] = {SCMP_SYS(stat), SCMP_SYS(newfstatat)};
    struct guest_opts o = {calls, 2, false};
    struct guest g = spawn_guest(&o, g_stats, &n);
    struct bh_broker_config cfg = {.root_fd = root_fd, .sentry_pid = 1};
    struct bh_broker_stats st = serve_guest(&cfg, &window_ns, &g, (unsigned long)n);
    cr_assert_eq(st.handled, (unsigned long)n, "handled %lu of %d", st.handled, n);
    return st;
}

/* NOTIF_RECV hands out a call only while its task waits, so it proves the
 * caller alive: within the alive window of it (here a minute, so however
 * slow the machine) no call needs a NOTIF_ID_VALID before acting. */
Test(broker, a_call_received_within_the_alive_window_makes_no_id_check)
{
    struct bh_broker_stats st = stats_with_window(60ull * 1000 * 1000 * 1000, 20);
    cr_expect_eq(st.id_checks, 0, "%lu NOTIF_ID_VALID for 20 fresh calls", st.id_checks);
    cr_expect_eq(st.rechecked, 0, "%lu rechecks for 20 fresh calls", st.rechecked);
}

/* No window (pid_max unknown): every call proves its caller with the ioctl. */
Test(broker, without_an_alive_window_every_call_makes_its_id_check)
{
    struct bh_broker_stats st = stats_with_window(0, 20);
    cr_expect_geq(st.id_checks, 20, "only %lu NOTIF_ID_VALID for 20 calls", st.id_checks);
}

/* ---- closes after the answer ---- */

static int count_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    cr_assert(d != NULL);
    int n = 0;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

static void g_lookups(void *arg)
{
    (void)arg;
    struct stat st;
    for (int i = 0; i < 10; i++) {
        GCHECK(stat("/inside.txt", &st) == 0 && st.st_size == 6);
        GCHECK(stat("/no-such-file", &st) < 0 && errno == ENOENT);
    }
    for (int i = 0; i < 5; i++) {
        GCHECK(mkdir("/lookup-dir", 0700) == 0);
        GCHECK(rmdir("/lookup-dir") == 0);
    }
}

/* The O_PATH fd of a stat and the parent directory of a mkdir or rmdir
 * are closed after the answer (the guest woken by SEND need not wait for
 * them), one each: 10 stats and 10 parents; a failed lookup has none.
 * Every one of them is closed in the end: the broker's process holds the
 * same fds after the broker is gone as before. */
Test(broker, lookups_are_closed_after_the_answer_and_none_leaks)
{
    static const int calls[] = {SCMP_SYS(stat),    SCMP_SYS(newfstatat), SCMP_SYS(mkdir),
                                SCMP_SYS(mkdirat), SCMP_SYS(rmdir),      SCMP_SYS(unlinkat)};
    struct guest_opts o = {calls, sizeof(calls) / sizeof(calls[0]), false};
    int before = count_fds();
    struct guest g = spawn_guest(&o, g_lookups, NULL);
    struct bh_broker_config cfg = {.root_fd = root_fd, .sentry_pid = 1};
    struct bh_broker *b = NULL;
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_new(&cfg, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_start(b, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_add_listener(b, g.listener, &err), 0, "%s", err.msg);
    finish_guest(&g);
    /* The last closes follow the last answer: wait for them. */
    struct bh_broker_stats st;
    bh_broker_get_stats(b, &st);
    for (int i = 0; i < 500 && st.closed_after_answer < 20; i++) {
        usleep(2000);
        bh_broker_get_stats(b, &st);
    }
    bh_broker_free(b);
    cr_expect_eq(st.handled, 30, "handled %lu of 30 calls", st.handled);
    cr_expect_eq(st.closed_after_answer, 20, "%lu fds closed after the answer, expected 20",
                 st.closed_after_answer);
    int after = count_fds();
    cr_expect_eq(after, before, "the test process held %d fds before the broker, %d after", before,
                 after);
}

static void g_copy_closed(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        int p[2];
        GCHECK(pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
        struct stat st;
        GCHECK(syscall(SYS_newfstatat, p[1], "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
               S_ISFIFO(st.st_mode));
        close(p[1]);
        char c;
        /* EOF at once: the broker's copy of the write end is gone too.
         * EAGAIN would mean a writer is still open somewhere. */
        GCHECK(read(p[0], &c, 1) == 0);
        close(p[0]);
    }
}

/* A copy of the guest's own fd (pidfd_getfd, for an empty path with
 * AT_EMPTY_PATH) is closed before the answer: once the guest closes its
 * fd, its reader sees EOF at once, as without a broker. */
Test(broker, a_copy_of_the_guests_fd_is_closed_before_the_answer)
{
    static const int calls[] = {SCMP_SYS(newfstatat)};
    struct guest_opts o = {calls, 1, false};
    struct guest g = spawn_guest(&o, g_copy_closed, NULL);
    struct bh_broker_config cfg = {.root_fd = root_fd, .sentry_pid = 1};
    struct bh_broker_stats st = serve_guest(&cfg, NULL, &g, 20);
    cr_expect_eq(st.handled, 20, "handled %lu of 20 calls", st.handled);
    cr_expect_eq(st.closed_after_answer, 0, "%lu copies closed after the answer",
                 st.closed_after_answer);
}

/* ---- synchronous wake-ups ---- */

static struct bh_broker_stats serve_stats(bool plain)
{
    static const int calls[] = {SCMP_SYS(stat), SCMP_SYS(newfstatat)};
    struct guest_opts o = {calls, 2, false};
    int n = 3;
    struct guest g = spawn_guest(&o, g_stats, &n);
    struct bh_broker_config cfg = {.root_fd = root_fd, .sentry_pid = 1, .plain_wake_up = plain};
    struct bh_broker_stats st = serve_guest(&cfg, NULL, &g, (unsigned long)n);
    cr_expect_eq(st.handled, (unsigned long)n, "handled %lu of %d", st.handled, n);
    return st;
}

/* Every listener gets SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (the kernels this
 * runs on have it: 6.6 and later), so a guest and its receiver share a CPU
 * (sentry/README.md, "CPU placement"); plain_wake_up leaves it off. */
Test(broker, listeners_wake_their_receiver_on_the_callers_cpu)
{
    unsigned long n = serve_stats(false).sync_listeners;
    cr_expect_eq(n, 1, "%lu of 1 listener with SYNC_WAKE_UP", n);
    n = serve_stats(true).sync_listeners;
    cr_expect_eq(n, 0, "%lu listeners with SYNC_WAKE_UP under plain_wake_up", n);
}

/* Every worker (the receiver and the parked ones) runs SCHED_BATCH, so the
 * wake-up that ends an ADDFD does not preempt the guest (broker.c,
 * worker_main); plain_wake_up leaves them SCHED_OTHER. */
Test(broker, workers_do_not_preempt_the_guest_they_answer)
{
    struct bh_broker_stats st = serve_stats(false);
    /* At least the receiver, which answered; the parked workers made at
     * start may not have run yet. */
    cr_expect_geq(st.batch_workers, 1, "%lu workers under SCHED_BATCH", st.batch_workers);
    st = serve_stats(true);
    cr_expect_eq(st.batch_workers, 0, "%lu workers under SCHED_BATCH with plain_wake_up",
                 st.batch_workers);
}

/* ---- the umask cache ---- */

static void *t_umask_077(void *arg)
{
    (void)arg;
    umask(077);
    return NULL;
}

static void g_umasks(void *arg)
{
    (void)arg;
    struct stat st;
    char p[64];
    umask(022);
    for (int i = 0; i < 5; i++) {
        snprintf(p, sizeof(p), "/um-a%d", i);
        int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
        GCHECK(fd >= 0);
        close(fd);
        GCHECK(stat(p, &st) == 0 && (st.st_mode & 0777) == 0644);
    }
    umask(027);
    int fd = open("/um-b", O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    GCHECK(fd >= 0);
    close(fd);
    GCHECK(stat("/um-b", &st) == 0 && (st.st_mode & 0777) == 0640);
    /* Another thread changes the umask this one shares (one fs_struct);
     * that thread makes no call afterwards. */
    pthread_t t;
    GCHECK(pthread_create(&t, NULL, t_umask_077, NULL) == 0);
    GCHECK(pthread_join(t, NULL) == 0);
    fd = open("/um-c", O_WRONLY | O_CREAT | O_CLOEXEC, 0666);
    GCHECK(fd >= 0);
    close(fd);
    GCHECK(stat("/um-c", &st) == 0 && (st.st_mode & 0777) == 0600);
    GCHECK(mkdir("/um-d", 0777) == 0);
    GCHECK(stat("/um-d", &st) == 0 && (st.st_mode & 0777) == 0700);
}

/* 8 creating calls under three umasks; the umask reads they needed. */
static unsigned long umask_reads(bool notified)
{
    static const int calls[] = {SCMP_SYS(openat),  SCMP_SYS(open),       SCMP_SYS(mkdir),
                                SCMP_SYS(mkdirat), SCMP_SYS(newfstatat), SCMP_SYS(stat),
                                SCMP_SYS(umask)};
    struct guest_opts o = {calls, sizeof(calls) / sizeof(calls[0]), false};
    struct guest g = spawn_guest(&o, g_umasks, NULL);
    struct bh_broker_config cfg = {.root_fd = root_fd, .sentry_pid = 1, .umask_notified = notified};
    struct bh_broker_stats st = serve_guest(&cfg, NULL, &g, 0);
    cr_expect_eq(st.continued, 3, "%lu umask calls answered CONTINUE, expected 3", st.continued);
    return st.umask_reads;
}

/* With umask notified, a thread's umask is read once per change: after
 * umask(022) once for five files, after umask(027) once, and while another
 * thread's umask(077) is unsettled (that thread made no call since) on
 * every creating call, each time right. */
Test(broker, a_threads_umask_is_read_once_per_change)
{
    unsigned long n = umask_reads(true);
    cr_expect_eq(n, 4, "%lu umask reads for 8 creating calls, expected 4", n);
}

/* A policy that lets umask run directly: every creating call reads it. */
Test(broker, without_umask_notified_every_creating_call_reads_the_umask)
{
    unsigned long n = umask_reads(false);
    cr_expect_eq(n, 8, "%lu umask reads for 8 creating calls", n);
}

enum bench_ids { IDS_READ_PER_CALL, IDS_NOTIFIED, IDS_FROZEN };

static void bench(enum bench_ids mode)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/inside.txt", root);
    struct stat st;
    double native[3];
    native[0] = MEASURE(native_open_close(p));
    native[1] = MEASURE(syscall(SYS_getppid));
    native[2] = MEASURE(stat(p, &st));
    static const int calls[] = {SCMP_SYS(openat), SCMP_SYS(mknodat),
                                SCMP_SYS(getcwd), SCMP_SYS(newfstatat),
                                SCMP_SYS(stat),   BH_BROKER_ID_SYSCALLS(NOTIFY)};
    /* A root guest holds capabilities (ids may change); one without them
     * (65534, no_new_privs) cannot change its ids. */
    struct guest_opts o = {calls, sizeof(calls) / sizeof(calls[0]), mode == IDS_FROZEN};
    struct bh_broker_config cfg = {
        .root_fd = root_fd, .sentry_pid = 1, .ids_notified = mode == IDS_NOTIFIED};
    struct bh_broker *b = NULL;
    struct bh_error err = {0};
    static const char *const label[] = {
        "root guest, ids read per call", "root guest, set*id notified (ids cached)",
        "capability-less guest (ids cached, as in the kernel tier)"};
    fprintf(stderr, "%s: ", label[mode]);
    struct guest g = spawn_guest(&o, g_bench, native);
    cr_assert_eq(bh_broker_new(&cfg, &b, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_start(b, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_add_listener(b, g.listener, &err), 0, "%s", err.msg);
    finish_guest(&g);
    bh_broker_free(b);
}

Test(broker, speed_of_brokered_and_direct_calls)
{
    chmod(root, 0755);
    bench(IDS_READ_PER_CALL);
    bench(IDS_NOTIFIED);
    bench(IDS_FROZEN);
}

/* ---- the parent-directory cache (broker-fs.c) ---------------------------- */

static bool root_overmounted;

/* In a mount namespace of this test process only: a whole tmpfs at the
 * root (what the cache serves), or with part a bind of a directory inside
 * a tmpfs mounted elsewhere (what it must not serve: a rename on the
 * tmpfs's other mount could take a cached directory out of the root). */
static void mount_tmpfs_root_noted(bool part, bool noted)
{
    if (unshare(CLONE_NEWNS) < 0)
        cr_skip_test("cannot unshare a mount namespace: %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
    if (part) {
        cr_assert_eq(mount("tmpfs", outside, "tmpfs", 0, "mode=0755"), 0, "%s", strerror(errno));
        char p[512];
        snprintf(p, sizeof(p), "%s/part", outside);
        cr_assert_eq(mkdir(p, 0755), 0);
        cr_assert_eq(mount(p, root, NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
    } else {
        cr_assert_eq(mount("tmpfs", root, "tmpfs", 0, "mode=0755"), 0, "%s", strerror(errno));
    }
    root_overmounted = true;
    struct stat st;
    cr_assert_eq(stat(root, &st), 0);
    if (noted)
        own_tmpfs_dev = st.st_dev;
    reopen_root();
    char p[512];
    snprintf(p, sizeof(p), "%s/d", root);
    cr_assert_eq(mkdir(p, 0755), 0);
}

static void mount_tmpfs_root(bool part)
{
    mount_tmpfs_root_noted(part, true);
}

/* Before the suite's teardown removes the trees. */
static void unmount_tmpfs_root(void)
{
    if (root_overmounted) {
        umount2(root, MNT_DETACH);
        umount2(outside, MNT_DETACH);
    }
}

static const int dir_cache_calls[] = {SCMP_SYS(open),    SCMP_SYS(openat),    SCMP_SYS(newfstatat),
                                      SCMP_SYS(stat),    SCMP_SYS(unlink),    SCMP_SYS(unlinkat),
                                      SCMP_SYS(rename),  SCMP_SYS(renameat),  SCMP_SYS(renameat2),
                                      SCMP_SYS(symlink), SCMP_SYS(symlinkat), SCMP_SYS(mkdir),
                                      SCMP_SYS(mkdirat), SCMP_SYS(rmdir),     SCMP_SYS(fchmod)};
static const struct guest_opts dir_cache_opts = {
    dir_cache_calls, sizeof(dir_cache_calls) / sizeof(dir_cache_calls[0]), false};

static void create_in(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    GCHECK(fd >= 0);
    GCHECK(write(fd, "x", 1) == 1);
    close(fd);
}

/* 20 names in /d, each created, opened, stat'ed and removed. */
static void g_dir_loop(void *arg)
{
    (void)arg;
    char p[64];
    struct stat st;
    for (int i = 0; i < 20; i++) {
        snprintf(p, sizeof(p), "/d/f%d", i);
        create_in(p);
    }
    for (int i = 0; i < 20; i++) {
        snprintf(p, sizeof(p), "/d/f%d", i);
        int fd = open(p, O_RDONLY | O_CLOEXEC);
        GCHECK(fd >= 0);
        close(fd);
        GCHECK(stat(p, &st) == 0 && st.st_size == 1);
    }
    for (int i = 0; i < 20; i++) {
        snprintf(p, sizeof(p), "/d/f%d", i);
        GCHECK(unlink(p) == 0);
        GCHECK(stat(p, &st) < 0 && errno == ENOENT);
    }
}

static unsigned long dir_loop_hits(void)
{
    struct bh_broker_stats st;
    run_guest_stats(&dir_cache_opts, g_dir_loop, NULL, &st);
    char p[512];
    snprintf(p, sizeof(p), "%s/d/f0", root);
    cr_expect(access(p, F_OK) < 0, "%s is left", p);
    return st.dir_cache_hits;
}

/* 100 calls in one directory of a whole tmpfs: all but the first (the
 * directory seen once; the second call opens it) come from the cached
 * parent. */
Test(broker, a_loop_in_one_directory_walks_one_name, .fini = unmount_tmpfs_root)
{
    mount_tmpfs_root(false);
    unsigned long hits = dir_loop_hits();
    cr_expect_eq(hits, 99, "%lu of 100 calls answered from the cached parent", hits);
}

/* The same loop where the root is a bind of a directory inside a tmpfs
 * mounted elsewhere: never cached. */
Test(broker, a_directory_of_a_partly_bound_tmpfs_is_not_cached, .fini = unmount_tmpfs_root)
{
    mount_tmpfs_root(true);
    unsigned long hits = dir_loop_hits();
    cr_expect_eq(hits, 0, "%lu calls answered from a cached parent", hits);
}

/* The same loop on a whole tmpfs the sandbox did not make (as a bind of
 * the host's /dev/shm is): the host's renames there reach no broker, so
 * nothing of it is cached. */
Test(broker, a_whole_tmpfs_the_sandbox_did_not_make_is_not_cached, .fini = unmount_tmpfs_root)
{
    mount_tmpfs_root_noted(false, false);
    unsigned long hits = dir_loop_hits();
    cr_expect_eq(hits, 0, "%lu calls answered from a cached parent", hits);
}

/* Two guests, each with its own listener and so its own receiver: the
 * first fills its cache with /d, the second renames /d to /e and makes /d
 * a symlink to x, then the first creates /d/c, which follows the symlink.
 * (A single receiver drops its entry by itself: the rename's own parent
 * lookups replace it. Across workers only names_gen tells.) */
static int turn_ab[2], turn_ba[2];

static void g_fill_then_create(void *arg)
{
    (void)arg;
    GCHECK(mkdir("/x", 0755) == 0);
    create_in("/d/a");
    create_in("/d/b");
    char c = 'a';
    GCHECK(write(turn_ab[1], &c, 1) == 1);
    GCHECK(read(turn_ba[0], &c, 1) == 1);
    create_in("/d/c");
    create_in("/d/c2");
}

static void g_rename_away(void *arg)
{
    (void)arg;
    char c;
    GCHECK(read(turn_ab[0], &c, 1) == 1);
    GCHECK(rename("/d", "/e") == 0);
    GCHECK(symlink("x", "/d") == 0);
    GCHECK(write(turn_ba[1], &c, 1) == 1);
}

Test(broker, a_directory_renamed_by_another_worker_is_not_used_under_its_old_name,
     .fini = unmount_tmpfs_root)
{
    mount_tmpfs_root(false);
    cr_assert_eq(pipe2(turn_ab, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(turn_ba, O_CLOEXEC), 0);
    struct guest a = spawn_guest(&dir_cache_opts, g_fill_then_create, NULL);
    struct guest r = spawn_guest(&dir_cache_opts, g_rename_away, NULL);
    struct bh_broker *b = start_broker();
    struct bh_error err = {0};
    cr_assert_eq(bh_broker_add_listener(b, a.listener, &err), 0, "%s", err.msg);
    cr_assert_eq(bh_broker_add_listener(b, r.listener, &err), 0, "%s", err.msg);
    finish_guest(&r);
    finish_guest(&a);
    struct bh_broker_stats st;
    bh_broker_get_stats(b, &st);
    bh_broker_free(b);
    for (int i = 0; i < 2; i++) {
        close(turn_ab[i]);
        close(turn_ba[i]);
    }
    cr_expect_geq(st.dir_cache_hits, 1, "the first guest's creates never used the cache");
    static const char *const there[] = {"x/c", "x/c2", "e/a", "e/b"};
    static const char *const not_there[] = {"e/c", "e/c2"};
    char p[512];
    for (size_t i = 0; i < sizeof(there) / sizeof(there[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root, there[i]);
        cr_expect(access(p, F_OK) == 0, "%s is missing", p);
    }
    for (size_t i = 0; i < sizeof(not_there) / sizeof(not_there[0]); i++) {
        snprintf(p, sizeof(p), "%s/%s", root, not_there[i]);
        cr_expect(access(p, F_OK) < 0, "%s exists: a create went to the renamed directory", p);
    }
}

/* fchmod of the cached directory (brokered for this) drops the cache: of
 * five creates, the one after it walks from the root again and the next
 * fills the cache anew. */
static void g_dir_fchmod(void *arg)
{
    (void)arg;
    int dfd = open("/d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    GCHECK(dfd >= 0);
    create_in("/d/1");
    create_in("/d/2");
    create_in("/d/3");
    GCHECK(fchmod(dfd, 0700) == 0);
    create_in("/d/4");
    create_in("/d/5");
    struct stat st;
    GCHECK(fstat(dfd, &st) == 0 && (st.st_mode & 07777) == 0700);
    close(dfd);
}

Test(broker, fchmod_of_a_directory_drops_the_cache, .fini = unmount_tmpfs_root)
{
    mount_tmpfs_root(false);
    struct bh_broker_stats st;
    run_guest_stats(&dir_cache_opts, g_dir_fchmod, NULL, &st);
    cr_expect_eq(st.dir_cache_hits, 3, "%lu creates answered from the cache, expected 3 (2, 3, 5)",
                 st.dir_cache_hits);
}

/* ---- which calls tell the cache (the call table's names effect) ---------- */

/* What each brokered file call may do to the tree, written here apart from
 * the table: a call added to the table without a line here fails, and so
 * does a line that disagrees with the table. */
static const struct {
    const char *name;
    enum bh_names_effect names;
} names_expected[] = {
    /* Reads, times, contents: no name made or removed, no mode or owner. */
    {"stat", BH_NAMES_KEPT},
    {"lstat", BH_NAMES_KEPT},
    {"newfstatat", BH_NAMES_KEPT},
    {"statx", BH_NAMES_KEPT},
    {"statfs", BH_NAMES_KEPT},
    {"access", BH_NAMES_KEPT},
    {"faccessat", BH_NAMES_KEPT},
    {"faccessat2", BH_NAMES_KEPT},
    {"readlink", BH_NAMES_KEPT},
    {"readlinkat", BH_NAMES_KEPT},
    {"utime", BH_NAMES_KEPT},
    {"utimes", BH_NAMES_KEPT},
    {"futimesat", BH_NAMES_KEPT},
    {"utimensat", BH_NAMES_KEPT},
    {"truncate", BH_NAMES_KEPT},
    {"inotify_add_watch", BH_NAMES_KEPT},
    /* Names of non-directories only: no directory a path walks through
     * appears, goes or moves. */
    {"open", BH_NAMES_FILES},
    {"creat", BH_NAMES_FILES},
    {"openat", BH_NAMES_FILES},
    {"openat2", BH_NAMES_FILES},
    {"mknod", BH_NAMES_FILES},
    {"mknodat", BH_NAMES_FILES},
    {"unlink", BH_NAMES_FILES},
    {"symlink", BH_NAMES_FILES},
    {"symlinkat", BH_NAMES_FILES},
    {"link", BH_NAMES_FILES},
    {"linkat", BH_NAMES_FILES},
    /* Directories' names, or search rights. */
    {"mkdir", BH_NAMES_DIRS},
    {"mkdirat", BH_NAMES_DIRS},
    {"rmdir", BH_NAMES_DIRS},
    {"unlinkat", BH_NAMES_DIRS_IF_AT_REMOVEDIR},
    {"rename", BH_NAMES_DIRS},
    {"renameat", BH_NAMES_DIRS},
    {"renameat2", BH_NAMES_DIRS},
    {"chmod", BH_NAMES_DIRS},
    {"fchmod", BH_NAMES_DIRS},
    {"fchmodat", BH_NAMES_DIRS},
    {"fchmodat2", BH_NAMES_DIRS},
    {"chown", BH_NAMES_DIRS},
    {"lchown", BH_NAMES_DIRS},
    {"fchown", BH_NAMES_DIRS},
    {"fchownat", BH_NAMES_DIRS},
};

Test(broker, names_effects_of_the_table)
{
    int checked = 0;
    for (long nr = 0; nr < 512; nr++) {
        if (bh_broker_group_of(nr) != BH_BROKER_FILES)
            continue;
        const char *name = bh_broker_syscall_name(nr);
        size_t i = 0;
        while (i < BH_ARRAY_SIZE(names_expected) && strcmp(names_expected[i].name, name) != 0)
            i++;
        if (i == BH_ARRAY_SIZE(names_expected)) {
            cr_expect_fail("brokered file call %s has no line in names_expected: say whether it "
                           "may change a directory's name or search rights",
                           name);
            continue;
        }
        cr_expect_eq(bh_broker_names_effect(nr), names_expected[i].names,
                     "%s: the table says %d, expected %d", name, bh_broker_names_effect(nr),
                     names_expected[i].names);
        checked++;
    }
    /* Every line names a call the table answers (where the architecture has it). */
    for (size_t i = 0; i < BH_ARRAY_SIZE(names_expected); i++) {
        int nr = seccomp_syscall_resolve_name(names_expected[i].name);
        if (nr >= 0)
            cr_expect_eq(bh_broker_group_of(nr), BH_BROKER_FILES, "%s is not brokered",
                         names_expected[i].name);
    }
    cr_expect_geq(checked, 30, "only %d file calls in the table", checked);
}

/* Each call the table marks as changing directories is bracketed by the
 * dispatch (14 here), and none of the others is: creates, links, symlinks,
 * a FIFO, unlinks and stats leave every worker's cache in place. */
static void g_names_changes(void *arg)
{
    (void)arg;
    struct stat st;
    /* Not counted. */
    create_in("/f1");
    GCHECK(link("/f1", "/f2") == 0);
    GCHECK(symlink("f1", "/f3") == 0);
    GCHECK(mknod("/f4", S_IFIFO | 0600, 0) == 0);
    GCHECK(stat("/f1", &st) == 0);
    GCHECK(unlink("/f2") == 0);
    GCHECK(unlinkat(AT_FDCWD, "/f3", 0) == 0);
    GCHECK(unlink("/f4") == 0);
    GCHECK(unlink("/f1") == 0);
    /* Counted: 14. */
    GCHECK(mkdir("/n1", 0755) == 0);
    GCHECK(mkdirat(AT_FDCWD, "/n2", 0755) == 0);
    GCHECK(rename("/n1", "/n3") == 0);
    GCHECK(renameat(AT_FDCWD, "/n3", AT_FDCWD, "/n1") == 0);
    GCHECK(syscall(SYS_renameat2, AT_FDCWD, "/n1", AT_FDCWD, "/n3", 0) == 0);
    GCHECK(chmod("/n3", 0700) == 0);
    GCHECK(fchmodat(AT_FDCWD, "/n3", 0755, 0) == 0);
    int dfd = open("/n3", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    GCHECK(dfd >= 0);
    GCHECK(fchmod(dfd, 0711) == 0);
    GCHECK(chown("/n3", getuid(), getgid()) == 0);
    GCHECK(lchown("/n3", getuid(), getgid()) == 0);
    GCHECK(fchownat(AT_FDCWD, "/n3", getuid(), getgid(), 0) == 0);
    GCHECK(fchown(dfd, getuid(), getgid()) == 0);
    close(dfd);
    GCHECK(rmdir("/n2") == 0);
    GCHECK(unlinkat(AT_FDCWD, "/n3", AT_REMOVEDIR) == 0);
}

Test(broker, the_dispatch_tells_the_cache_of_every_call_that_changes_directories)
{
    struct guest_opts o = {fs_calls, BH_ARRAY_SIZE(fs_calls), false};
    struct bh_broker_stats st;
    run_guest_stats(&o, g_names_changes, NULL, &st);
    cr_expect_eq(st.names_changes, 14, "%lu calls bracketed as changing directories, expected 14",
                 st.names_changes);
}
