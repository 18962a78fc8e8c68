/* Landlock: each restriction happens in a forked child (it cannot be undone),
 * which reports the first check that failed through its exit code and a
 * line on stderr. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "landlock.h"

static char tmp[128];

static void setup(void)
{
    snprintf(tmp, sizeof(tmp), "/tmp/bh-landlock-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
}

static void teardown(void)
{
    if (tmp[0] != '\0') {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
        if (system(cmd) != 0)
            fprintf(stderr, "cleanup of %s failed\n", tmp);
    }
}

static void need_landlock(void)
{
    if (bh_landlock_abi() < 1)
        cr_skip_test("Landlock is not available on this kernel");
}

static int fail(int step, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "step %d: ", step);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (errno %d: %s)\n", errno, strerror(errno));
    va_end(ap);
    return step;
}

/* Runs fn in a child and asserts it returned 0. */
static void in_child(int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(fn(arg));
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child died: %#x", status);
    cr_assert_eq(WEXITSTATUS(status), 0, "child failed at step %d (see stderr)",
                 WEXITSTATUS(status));
}

static int expect_eacces_open(const char *path, int flags)
{
    int fd = open(path, flags | O_CLOEXEC, 0644);
    if (fd >= 0) {
        close(fd);
        errno = 0;
        return -1;
    }
    return errno == EACCES ? 0 : -1;
}

static int run_status(const char *prog)
{
    pid_t p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        char *argv[] = {(char *)prog, NULL};
        char *envp[] = {NULL};
        execve(prog, argv, envp);
        _exit(errno == EACCES ? 126 : 127);
    }
    int status;
    if (waitpid(p, &status, 0) != p || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static void copy_file(const char *from, const char *to, mode_t mode)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(in, 0);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    cr_assert_geq(out, 0);
    char buf[65536];
    ssize_t r;
    while ((r = read(in, buf, sizeof(buf))) > 0)
        cr_assert_eq(write(out, buf, (size_t)r), r);
    close(in);
    close(out);
}

TestSuite(landlock, .init = setup, .fini = teardown, .timeout = 30);

Test(landlock, abi_is_reported)
{
    need_landlock();
    cr_assert_geq(bh_landlock_abi(), 1);
}

struct fs_case {
    int listener_pid; /* a process outside the domain */
    char abstract[64];
};

static int fs_child(void *arg)
{
    struct fs_case *c = arg;
    char p[256], q[256];
    struct bh_landlock_rule rules[] = {
        {.path = "/usr", .fd = -1, .access = BH_LL_READ | BH_LL_EXECUTE},
        {.path = tmp, .fd = -1, .access = BH_LL_READ | BH_LL_WRITE},
    };
    struct bh_error err = {0};
    if (bh_landlock_restrict(rules, 2, &err) < 0)
        return fail(1, "restrict: %s", err.msg);
    if (prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1)
        return fail(2, "no_new_privs not set");

    /* Reading what a rule grants works. */
    int fd = open("/usr/bin/env", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(3, "read /usr/bin/env");
    close(fd);
    fd = open("/usr", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return fail(4, "list /usr");
    close(fd);

    /* Everything outside the rules is denied. */
    if (expect_eacces_open("/etc/passwd", O_RDONLY) < 0)
        return fail(5, "read /etc/passwd was not EACCES");
    snprintf(p, sizeof(p), "/tmp/bh-landlock-outside-%d", (int)getpid());
    if (expect_eacces_open(p, O_WRONLY | O_CREAT) < 0) {
        unlink(p);
        return fail(6, "create %s was not EACCES", p);
    }
    if (expect_eacces_open("/usr/bin/env", O_WRONLY) < 0)
        return fail(7, "write /usr/bin/env was not EACCES");
    if (mkdir("/var/tmp/bh-landlock-nope", 0755) == 0 || errno != EACCES) {
        rmdir("/var/tmp/bh-landlock-nope");
        return fail(8, "mkdir outside was not EACCES");
    }

    /* The writable tree: create, truncate, rename, remove. */
    snprintf(p, sizeof(p), "%s/f", tmp);
    snprintf(q, sizeof(q), "%s/g", tmp);
    fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "hello", 5) != 5)
        return fail(9, "write in the writable dir");
    close(fd);
    if (truncate(p, 1) < 0)
        return fail(10, "truncate in the writable dir");
    if (rename(p, q) < 0 || unlink(q) < 0)
        return fail(11, "rename/unlink in the writable dir");
    snprintf(p, sizeof(p), "%s/d", tmp);
    if (mkdir(p, 0755) < 0 || rmdir(p) < 0)
        return fail(12, "mkdir/rmdir in the writable dir");

    /* Execute: allowed from /usr, not from the writable dir. */
    if (run_status("/usr/bin/true") != 0)
        return fail(13, "exec /usr/bin/true");
    snprintf(p, sizeof(p), "%s/true", tmp);
    int rs = run_status(p);
    if (rs != 126)
        return fail(14, "exec from the writable dir gave %d, not EACCES", rs);

    if (bh_landlock_abi() >= 6) {
        /* Signals to a process outside the domain are refused... */
        if (kill(c->listener_pid, 0) == 0 || errno != EPERM)
            return fail(15, "signal to pid %d outside the domain", c->listener_pid);
        /* ...but not to ourselves. */
        if (kill(getpid(), 0) < 0)
            return fail(16, "signal to self");
        /* Abstract unix sockets outside the domain are unreachable. */
        int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un a = {.sun_family = AF_UNIX};
        memcpy(a.sun_path + 1, c->abstract, strlen(c->abstract));
        socklen_t al =
            (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(c->abstract));
        if (s < 0 || connect(s, (struct sockaddr *)&a, al) == 0 || errno != EPERM)
            return fail(17, "abstract connect outside the domain");
        close(s);
        /* Inside the domain both still work: a listener and a process of
         * our own. */
        int l2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        memcpy(a.sun_path + 1, "inner", 5);
        al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + 5 + 1);
        a.sun_path[6] = (char)('0' + getpid() % 10);
        s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (l2 < 0 || bind(l2, (struct sockaddr *)&a, al) < 0 || listen(l2, 1) < 0 || s < 0 ||
            connect(s, (struct sockaddr *)&a, al) < 0)
            return fail(18, "abstract socket inside the domain");
        close(s);
        close(l2);
        pid_t kid = fork();
        if (kid == 0) {
            pause();
            _exit(0);
        }
        int st;
        if (kid < 0 || kill(kid, SIGKILL) < 0 || waitpid(kid, &st, 0) != kid)
            return fail(19, "signal a child inside the domain");
    }
    /* Network ports are not restricted: loopback TCP works. */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in in = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t il = sizeof(in);
    int cs = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (ls < 0 || bind(ls, (struct sockaddr *)&in, il) < 0 || listen(ls, 1) < 0 ||
        getsockname(ls, (struct sockaddr *)&in, &il) < 0 || cs < 0 ||
        connect(cs, (struct sockaddr *)&in, il) < 0)
        return fail(20, "loopback TCP");
    close(cs);
    close(ls);
    return 0;
}

Test(landlock, confines_read_write_execute_signals_and_abstract_sockets)
{
    need_landlock();
    char p[256];
    snprintf(p, sizeof(p), "%s/true", tmp);
    copy_file("/usr/bin/true", p, 0755);

    struct fs_case c = {0};
    snprintf(c.abstract, sizeof(c.abstract), "bh-landlock-test-%d", (int)getpid());
    /* A listener outside the domain: this test process. */
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cr_assert_geq(ls, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path + 1, c.abstract, strlen(c.abstract));
    socklen_t al = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + strlen(c.abstract));
    cr_assert_eq(bind(ls, (struct sockaddr *)&a, al), 0, "%s", strerror(errno));
    cr_assert_eq(listen(ls, 1), 0);
    c.listener_pid = getpid();

    if (bh_landlock_abi() < 6)
        fprintf(stderr, "landlock ABI %d < 6: signal and socket scoping not checked\n",
                bh_landlock_abi());
    in_child(fs_child, &c);
    /* Nothing got through to the listener. */
    int fl = fcntl(ls, F_GETFL);
    fcntl(ls, F_SETFL, fl | O_NONBLOCK);
    cr_assert_eq(accept(ls, NULL, NULL), -1);
    close(ls);
}

static int empty_child(void *arg)
{
    (void)arg;
    struct bh_error err = {0};
    if (bh_landlock_restrict(NULL, 0, &err) < 0)
        return fail(1, "restrict: %s", err.msg);
    if (expect_eacces_open("/usr/bin/env", O_RDONLY) < 0)
        return fail(2, "read with no rule was not EACCES");
    if (expect_eacces_open(tmp, O_RDONLY | O_DIRECTORY) < 0)
        return fail(3, "list with no rule was not EACCES");
    return 0;
}

Test(landlock, no_rule_denies_everything)
{
    need_landlock();
    in_child(empty_child, NULL);
}

static int file_rule_child(void *arg)
{
    (void)arg;
    char p[256];
    snprintf(p, sizeof(p), "%s/only", tmp);
    /* A rule on a file covers that file, not its directory. */
    struct bh_landlock_rule rules[] = {{.path = p, .fd = -1, .access = BH_LL_READ}};
    struct bh_error err = {0};
    if (bh_landlock_restrict(rules, 1, &err) < 0)
        return fail(1, "restrict: %s", err.msg);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(2, "read the granted file");
    close(fd);
    if (expect_eacces_open(p, O_WRONLY) < 0)
        return fail(3, "write to a read-only file rule was not EACCES");
    if (expect_eacces_open(tmp, O_RDONLY | O_DIRECTORY) < 0)
        return fail(4, "listing the file's directory was not EACCES");
    return 0;
}

Test(landlock, rule_on_a_file_grants_only_that_file)
{
    need_landlock();
    char p[256];
    snprintf(p, sizeof(p), "%s/only", tmp);
    int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    cr_assert_geq(fd, 0);
    close(fd);
    in_child(file_rule_child, NULL);
}

static int fd_rule_child(void *arg)
{
    (void)arg;
    int fd = open(tmp, O_PATH | O_CLOEXEC);
    if (fd < 0)
        return fail(1, "open tmp");
    struct bh_landlock_rule rules[] = {{.path = NULL, .fd = fd, .access = BH_LL_READ}};
    struct bh_error err = {0};
    if (bh_landlock_restrict(rules, 1, &err) < 0)
        return fail(2, "restrict: %s", err.msg);
    int d = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return fail(3, "list a dir granted by fd");
    close(d);
    char p[256];
    snprintf(p, sizeof(p), "%s/new", tmp);
    if (expect_eacces_open(p, O_WRONLY | O_CREAT) < 0)
        return fail(4, "create in a read-only dir was not EACCES");
    return 0;
}

Test(landlock, rule_by_fd)
{
    need_landlock();
    in_child(fd_rule_child, NULL);
}

static int missing_child(void *arg)
{
    (void)arg;
    struct bh_landlock_rule rules[] = {
        {.path = "/nonexistent/bh-landlock", .fd = -1, .access = BH_LL_READ}};
    struct bh_error err = {0};
    if (bh_landlock_restrict(rules, 1, &err) == 0)
        return fail(1, "a rule on a missing path was accepted");
    if (err.code != ENOENT || strstr(err.msg, "/nonexistent/bh-landlock") == NULL)
        return fail(2, "unclear error: %s", err.msg);
    /* Refused before restricting: still unconfined. */
    int fd = open("/etc/passwd", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(3, "restricted after a failed call");
    close(fd);
    return 0;
}

Test(landlock, missing_rule_path_is_a_clear_error)
{
    need_landlock();
    in_child(missing_child, NULL);
}

/* A kernel without Landlock, simulated with a seccomp filter that answers
 * ENOSYS: the call must refuse, not carry on unconfined. */
static int unavailable_child(void *arg)
{
    (void)arg;
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (ctx == NULL ||
        seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(landlock_create_ruleset), 0) < 0 ||
        seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 1) < 0 || seccomp_load(ctx) < 0)
        return fail(1, "seccomp");
    seccomp_release(ctx);
    if (bh_landlock_abi() != 0)
        return fail(2, "abi not 0 without Landlock");
    struct bh_landlock_rule rules[] = {{.path = "/usr", .fd = -1, .access = BH_LL_READ}};
    struct bh_error err = {0};
    if (bh_landlock_restrict(rules, 1, &err) == 0)
        return fail(3, "restrict succeeded without Landlock");
    if (err.code != ENOSYS || strstr(err.msg, "Landlock is not available") == NULL ||
        strstr(err.msg, "tiers need it") == NULL)
        return fail(4, "unclear error: %s", err.msg);
    return 0;
}

Test(landlock, unavailable_landlock_fails_closed)
{
    in_child(unavailable_child, NULL);
}
