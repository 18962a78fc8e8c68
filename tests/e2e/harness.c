/* Owns the helpers the end-to-end suites share (see harness.h): one copy of
 * running a binary, finding it, and driving a bulkheadd, instead of one per
 * test file. */
#include "harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cgroup.h"
#include "frame.h"

double h_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

const char *h_build(void)
{
    const char *b = getenv("BULKHEAD_BUILD");
    if (b == NULL || *b == '\0')
        h_skip_kernel("BULKHEAD_BUILD is not set: run through `make e2e` or export it");
    return b;
}

char *h_path(const char *name)
{
    char *p = NULL;
    cr_assert_geq(asprintf(&p, "%s/%s", h_build(), name), 0);
    return p;
}

char *h_read_fd(int fd)
{
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0)
        size = 0;
    char *buf = calloc(1, (size_t)size + 1);
    if (pread(fd, buf, (size_t)size, 0) < 0)
        buf[0] = '\0';
    return buf;
}

bool h_pidns_differs(pid_t a, pid_t b)
{
    char pa[64], pb[64];
    struct stat sa, sb;
    snprintf(pa, sizeof(pa), "/proc/%d/ns/pid", (int)a);
    snprintf(pb, sizeof(pb), "/proc/%d/ns/pid", (int)b);
    return stat(pa, &sa) == 0 && stat(pb, &sb) == 0 && sa.st_ino != sb.st_ino;
}

void h_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return;
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                continue;
            char p[1024];
            snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
            h_remove_tree(p);
        }
        if (d)
            closedir(d);
        rmdir(path);
    } else {
        unlink(path);
    }
}

struct h_job h_spawn(char *const argv[], char *const extra_env[], const char *stdin_path,
                     const char *cwd)
{
    struct h_job j = {.out = memfd_create("out", MFD_CLOEXEC),
                      .err = memfd_create("err", MFD_CLOEXEC)};
    cr_assert(j.out >= 0 && j.err >= 0);
    j.pid = fork();
    cr_assert_geq(j.pid, 0);
    if (j.pid == 0) {
        int in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0 || dup2(j.out, 1) < 0 || dup2(j.err, 2) < 0)
            _exit(126);
        if (cwd && chdir(cwd) < 0)
            _exit(126);
        for (size_t i = 0; extra_env && extra_env[i]; i++)
            putenv(extra_env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    return j;
}

int h_finish(struct h_job *j, int timeout_s, char **out, char **err)
{
    int st = 0, rc = -1;
    for (double end = h_now() + timeout_s;;) {
        if (waitpid(j->pid, &st, WNOHANG) == j->pid) {
            rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        if (h_now() > end) {
            kill(j->pid, SIGKILL);
            waitpid(j->pid, &st, 0);
            break;
        }
        usleep(2000);
    }
    if (out)
        *out = h_read_fd(j->out);
    if (err)
        *err = h_read_fd(j->err);
    close(j->out);
    close(j->err);
    return rc;
}

int h_held_fifo(const char *path)
{
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s: %s", path, strerror(errno));
    int fd = open(path, O_RDWR | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open the FIFO %s: %s", path, strerror(errno));
    return fd;
}

struct run_result h_run(char *const argv[], char *const extra_env[], const char *stdin_path,
                        int timeout_s)
{
    struct run_result r = {0};
    double start = h_now();
    struct h_job j = h_spawn(argv, extra_env, stdin_path, NULL);
    r.status = h_finish(&j, timeout_s, &r.out, &r.err);
    r.seconds = h_now() - start;
    return r;
}

void h_free(struct run_result *r)
{
    free(r->out);
    free(r->err);
}

struct run_result h_do_va(const char *tier, char *const extra_env[], int timeout_s,
                          const char *const *pre, va_list ap)
{
    char *argv[64];
    size_t n = 0;
    argv[n++] = h_path("bulkhead");
    argv[n++] = "do";
    argv[n++] = "--tier";
    argv[n++] = (char *)tier;
    for (size_t i = 0; pre && pre[i] && n < 63; i++)
        argv[n++] = (char *)pre[i];
    for (char *a; n < 63 && (a = va_arg(ap, char *)) != NULL;)
        argv[n++] = a;
    argv[n] = NULL;
    struct run_result r = h_run(argv, extra_env, NULL, timeout_s);
    free(argv[0]);
    return r;
}

struct run_result h_do(const char *tier, int timeout_s, ...)
{
    va_list ap;
    va_start(ap, timeout_s);
    struct run_result r = h_do_va(tier, NULL, timeout_s, NULL, ap);
    va_end(ap);
    return r;
}

bool h_kernel_required(void)
{
    const char *v = getenv("BULKHEAD_REQUIRE_KERNEL");
    return v != NULL && strcmp(v, "1") == 0;
}

void h_require_kernel_tier(void)
{
    char *bh = h_path("bulkhead");
    char *argv[] = {bh, "do", "--tier", "kernel", "--", "/bin/true", NULL};
    struct run_result r = h_run(argv, NULL, NULL, 120);
    free(bh);
    if (r.status != 0)
        h_skip_kernel("the kernel tier does not run here: %.300s", r.err);
    h_free(&r);
}

/* ---- bulkheadd ----------------------------------------------------------- */

int h_connect(const char *sock_path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", sock_path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

int h_wait_listening(pid_t pid, const char *sock_path)
{
    for (double end = h_now() + H_LISTEN_BOUND_S; h_now() < end;) {
        int fd = h_connect(sock_path);
        if (fd >= 0) {
            close(fd);
            return 0;
        }
        if (waitpid(pid, NULL, WNOHANG) == pid)
            return -1;
        usleep(20000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    cr_assert_fail("bulkheadd %d did not listen on %s within %d s (a hang): killed", (int)pid,
                   sock_path, H_LISTEN_BOUND_S);
    return -1;
}

void h_daemon_stop(struct h_daemon *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        int polls = d->stop_ms / 10;
        for (int i = 0; i < polls; i++) {
            if (waitpid(d->pid, NULL, WNOHANG) == d->pid)
                break;
            if (i == polls - 1) {
                kill(d->pid, SIGKILL);
                waitpid(d->pid, NULL, 0);
            }
            usleep(10000);
        }
        d->pid = -1;
    }
    if (d->tmp[0]) {
        h_remove_tree(d->tmp);
        d->tmp[0] = '\0';
    }
    if (d->lock >= 0) {
        close(d->lock);
        d->lock = -1;
    }
}

int h_daemon_launch(struct h_daemon *d, const char *tmp_template, const char *tier,
                    const char *extra, char *msg, size_t msg_size)
{
    if (d->lock < 0) {
        d->lock = open(H_SUPERVISOR_TEST_LOCK, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (d->lock >= 0)
            flock(d->lock, d->lock_op);
    }
    const char *b = getenv("BULKHEAD_BUILD");
    snprintf(d->tmp, sizeof(d->tmp), "%s", tmp_template);
    cr_assert_not_null(mkdtemp(d->tmp));
    snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->tmp);
    char cmd[2048];
    snprintf(cmd, sizeof(cmd),
             "exec %s/bulkheadd --socket %s --tier %s --audit %s/audit.log %s 2>%s/err.log",
             b ? b : "build", d->sock, tier, d->tmp, extra ? extra : "", d->tmp);
    d->pid = fork();
    cr_assert_geq(d->pid, 0);
    if (d->pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    pid_t pid = d->pid;
    d->pid = -1; /* reaped by h_wait_listening unless it listens */
    if (h_wait_listening(pid, d->sock) == 0) {
        d->pid = pid;
        snprintf(d->tier, sizeof(d->tier), "%s", tier);
        return 0;
    }
    char path[128];
    snprintf(path, sizeof(path), "%s/err.log", d->tmp);
    msg[0] = '\0';
    FILE *f = fopen(path, "re");
    if (f) {
        msg[fread(msg, 1, msg_size - 1, f)] = '\0';
        fclose(f);
    }
    h_daemon_stop(d);
    return -1;
}

void h_daemon_start(struct h_daemon *d, const char *who, const char *tmp_template,
                    const char *extra)
{
    const char *tier = getenv("BULKHEADD_TEST_TIER");
    char msg[2048];
    if (tier != NULL) {
        if (h_daemon_launch(d, tmp_template, tier, extra, msg, sizeof(msg)) < 0)
            h_skip_kernel("bulkheadd did not start at tier %s: %s", tier, msg);
        return;
    }
    if (h_daemon_launch(d, tmp_template, "kernel", extra, msg, sizeof(msg)) == 0)
        return;
    if (h_kernel_required())
        cr_assert_fail("BULKHEAD_REQUIRE_KERNEL=1, and bulkheadd did not start at the kernel "
                       "tier (%s would fall back to the container tier): %s",
                       who, msg);
    fprintf(stderr,
            "%s: the kernel tier cannot be verified here, running at the container tier "
            "(kernel-only assertions skip): %s\n",
            who, msg);
    if (h_daemon_launch(d, tmp_template, "container", extra, msg, sizeof(msg)) < 0)
        h_skip_kernel("bulkheadd started neither at kernel nor at container tier: %s", msg);
}

int h_send(int fd, Bulkhead__Control__Request *req)
{
    if (req->version == 0)
        req->version = 1;
    size_t len = bulkhead__control__request__get_packed_size(req);
    uint8_t *buf = malloc(len + 1);
    bulkhead__control__request__pack(req, buf);
    int rc = bh_frame_write(fd, buf, len, NULL);
    free(buf);
    return rc;
}

Bulkhead__Control__Response *h_recv(int fd, int timeout_ms, struct bh_error *err)
{
    void *ans = NULL;
    size_t alen = 0;
    if (bh_frame_read(fd, 64u << 20, bh_now_ms() + timeout_ms, &ans, &alen, err) != 1)
        return NULL;
    Bulkhead__Control__Response *r = bulkhead__control__response__unpack(NULL, alen, ans);
    free(ans);
    return r;
}

void h_open_req(Bulkhead__Control__Request *req, Bulkhead__Control__OpenSession *o,
                const char *owner)
{
    bulkhead__control__request__init(req);
    bulkhead__control__open_session__init(o);
    o->owner = (char *)owner;
    req->body_case = BULKHEAD__CONTROL__REQUEST__BODY_OPEN_SESSION;
    req->open_session = o;
}

void h_cell_req(Bulkhead__Control__Request *req, Bulkhead__Control__RunCell *c, const char *id,
                const char *lang, const char *code, uint64_t timeout_ms,
                Bulkhead__Control__File **files, size_t n_files)
{
    bulkhead__control__request__init(req);
    bulkhead__control__run_cell__init(c);
    c->session_id = (char *)id;
    c->language = (char *)lang;
    c->code = (char *)code;
    c->timeout_ms = timeout_ms;
    c->files = files;
    c->n_files = n_files;
    req->body_case = BULKHEAD__CONTROL__REQUEST__BODY_RUN_CELL;
    req->run_cell = c;
}

void h_close_req(Bulkhead__Control__Request *req, Bulkhead__Control__CloseSession *c,
                 const char *id)
{
    bulkhead__control__request__init(req);
    bulkhead__control__close_session__init(c);
    c->session_id = (char *)id;
    req->body_case = BULKHEAD__CONTROL__REQUEST__BODY_CLOSE_SESSION;
    req->close_session = c;
}

char *h_session_id(const Bulkhead__Control__Response *r)
{
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_OPEN_SESSION, "open: %s",
                 r->body_case == BULKHEAD__CONTROL__RESPONSE__BODY_ERROR ? r->error->message : "?");
    return strdup(r->open_session->session_id);
}

void h_bundle_skeleton(const char *dir)
{
    static const char *const dirs[] = {"bundle",
                                       "bundle/rootfs",
                                       "bundle/rootfs/usr",
                                       "bundle/rootfs/etc",
                                       "bundle/rootfs/proc",
                                       "bundle/rootfs/dev",
                                       "bundle/rootfs/tmp",
                                       "bundle/rootfs/sys",
                                       "bundle/rootfs/root"};
    for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
        char p[512];
        snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
        cr_assert(mkdir(p, 0755) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
    }
    static const char *const links[] = {"bin", "sbin", "lib", "lib64"};
    for (size_t i = 0; i < sizeof(links) / sizeof(links[0]); i++) {
        char p[512], t[64];
        snprintf(p, sizeof(p), "%s/bundle/rootfs/%s", dir, links[i]);
        snprintf(t, sizeof(t), "usr/%s", links[i]);
        cr_assert_eq(symlink(t, p), 0, "symlink %s: %s", p, strerror(errno));
    }
}

void h_bulkhead_in(const char *dir, const char *const *args, int timeout_s, struct run_result *r)
{
    char root[300], log[300];
    snprintf(root, sizeof(root), "%s/root", dir);
    snprintf(log, sizeof(log), "%s/log.json", dir);
    char *argv[32] = {h_path("bulkhead"), "--root", root, "--log", log};
    int n = 5;
    for (int i = 0; args[i] != NULL && n < 31; i++)
        argv[n++] = (char *)args[i];
    argv[n] = NULL;
    *r = h_run(argv, NULL, NULL, timeout_s);
    free(argv[0]);
}

void *h_spec_config(const char *dir, const char *bundle)
{
    struct run_result r;
    h_bulkhead_in(dir, (const char *const[]){"spec", "--bundle", bundle, NULL}, 30, &r);
    cr_assert_eq(r.status, 0, "bulkhead spec: %s", r.err);
    h_free(&r);
    char config[PATH_MAX];
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    json_error_t je;
    json_t *c = json_load_file(config, 0, &je);
    cr_assert_not_null(c, "%s: %s", config, je.text);
    return c;
}

void h_write_file(const char *dir, const char *rel, const char *text)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f, "write %s: %s", p, strerror(errno));
    fputs(text, f);
    fclose(f);
}

void h_cgroup_dir(const char *controller, const char *rel, char *out, size_t size)
{
    struct bh_error err = {0};
    char hier[4096];
    cr_assert_eq(bh_cgroup_hierarchy(controller, hier, sizeof(hier), &err), 0,
                 "where do cgroups live? %s", err.msg);
    cr_assert_lt(snprintf(out, size, "%s/%s", hier, rel), (int)size, "cgroup path too long");
}
