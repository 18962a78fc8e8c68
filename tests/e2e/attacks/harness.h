/* Host side of the tier and escape suites: run a built binary with a
 * timeout and capture its output, compile an attack program statically, and
 * read attack verdicts. Header-only so each e2e file stays one file. */
#ifndef BH_E2E_HARNESS_H
#define BH_E2E_HARNESS_H

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct run_result {
    int status; /* exit code, 128+signal, or -1 when it timed out */
    char *out;
    char *err;
    double seconds;
};

static inline double h_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline const char *h_build(void)
{
    const char *b = getenv("BULKHEAD_BUILD");
    if (b == NULL || *b == '\0')
        cr_skip_test("BULKHEAD_BUILD is not set: run through `make e2e` or export it");
    return b;
}

static inline char *h_path(const char *name)
{
    char *p = NULL;
    cr_assert_geq(asprintf(&p, "%s/%s", h_build(), name), 0);
    return p;
}

static inline char *h_read_fd(int fd)
{
    off_t size = lseek(fd, 0, SEEK_END);
    if (size < 0)
        size = 0;
    char *buf = calloc(1, (size_t)size + 1);
    if (pread(fd, buf, (size_t)size, 0) < 0)
        buf[0] = '\0';
    return buf;
}

/* Runs argv with extra environment entries (NULL-terminated, may be NULL)
 * and stdin from stdin_path (NULL: /dev/null). Output goes to memfds so a
 * chatty child never blocks. On timeout the child (ours) is killed. */
static inline struct run_result h_run(char *const argv[], char *const extra_env[],
                                      const char *stdin_path, int timeout_s)
{
    struct run_result r = {0};
    int out = memfd_create("out", MFD_CLOEXEC), err = memfd_create("err", MFD_CLOEXEC);
    cr_assert(out >= 0 && err >= 0);
    double start = h_now();
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        if (in < 0 || dup2(in, 0) < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
            _exit(126);
        for (size_t i = 0; extra_env && extra_env[i]; i++)
            putenv(extra_env[i]);
        execv(argv[0], argv);
        _exit(127);
    }
    int st = 0;
    bool done = false;
    for (double deadline = start + timeout_s; h_now() < deadline;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            done = true;
            break;
        }
        usleep(5000);
    }
    if (!done) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        r.status = -1;
    } else {
        r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    r.seconds = h_now() - start;
    r.out = h_read_fd(out);
    r.err = h_read_fd(err);
    close(out);
    close(err);
    return r;
}

static inline void h_free(struct run_result *r)
{
    free(r->out);
    free(r->err);
}

/* Source directory of the attack programs: next to this file when the tests
 * run from the source tree, else found above BULKHEAD_BUILD. */
static inline char *h_attack_dir(void)
{
    char *p = NULL;
    if (access("tests/e2e/attacks/attack.h", R_OK) == 0)
        return realpath("tests/e2e/attacks", NULL);
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", h_build());
    for (int up = 0; up < 4; up++) {
        char *slash = strrchr(dir, '/');
        if (slash == NULL || slash == dir)
            break;
        *slash = '\0';
        free(p);
        cr_assert_geq(asprintf(&p, "%s/tests/e2e/attacks", dir), 0);
        if (access(p, R_OK) == 0)
            return p;
    }
    free(p);
    cr_skip_test("tests/e2e/attacks not found from the cwd or above BULKHEAD_BUILD");
    return NULL;
}

/* Compiles attacks/NAME.c statically (system cc) into dir/NAME. */
static inline char *h_compile_attack(const char *dir, const char *name)
{
    char *src_dir = h_attack_dir();
    char *src = NULL, *bin = NULL, *inc = NULL;
    cr_assert_geq(asprintf(&src, "%s/%s.c", src_dir, name), 0);
    cr_assert_geq(asprintf(&bin, "%s/%s", dir, name), 0);
    cr_assert_geq(asprintf(&inc, "-I%s", src_dir), 0);
    char *argv[] = {"/usr/bin/cc", "-static", "-O2", "-D_GNU_SOURCE", "-pthread", inc, "-o",
                    bin,           src,       NULL};
    struct run_result r = h_run(argv, NULL, NULL, 120);
    cr_assert_eq(r.status, 0, "compiling %s failed: %s", src, r.err);
    h_free(&r);
    chmod(bin, 0755);
    free(src);
    free(inc);
    free(src_dir);
    return bin;
}

/* The verdict word of "attempt NAME VERDICT ..." in out, or NULL. */
static inline const char *h_verdict(const char *out, const char *name, char *line, size_t size)
{
    char key[128];
    snprintf(key, sizeof(key), "attempt %s ", name);
    const char *p = out;
    while ((p = strstr(p, key)) != NULL) {
        if (p == out || p[-1] == '\n') {
            size_t n = strcspn(p, "\n");
            if (n >= size)
                n = size - 1;
            memcpy(line, p, n);
            line[n] = '\0';
            return line + strlen(key);
        }
        p += strlen(key);
    }
    return NULL;
}

#endif
