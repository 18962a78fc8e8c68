/* Syscall microbenchmark run *inside* each system compared (native,
 * bubblewrap, bulkhead's tiers, runsc): a direct syscall, I/O on a pipe, a
 * brokered open+close and stat, and a refused syscall. Static, so it runs in
 * any rootfs. Prints one JSON object: nanoseconds per operation. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int pipe_fds[2];
static const char *open_path = "/etc/hosts";

/* 0 when the process is a pid namespace's init (runc runs it so). */
static int op_getppid(void)
{
    return getppid() >= 0 ? 0 : -1;
}

static int op_pipe(void)
{
    char c = 'x';
    if (write(pipe_fds[1], &c, 1) != 1 || read(pipe_fds[0], &c, 1) != 1)
        return -1;
    return 0;
}

static int op_open_close(void)
{
    int fd = openat(AT_FDCWD, open_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

static int op_stat(void)
{
    struct stat st;
    return stat(open_path, &st);
}

/* kexec_load with invalid flags: EINVAL natively, refused by every sandbox
 * policy; no side effect either way. */
static int op_refused(void)
{
    long r = syscall(SYS_kexec_load, 0UL, 0UL, NULL, 0xffffffffUL);
    return r == -1 ? 0 : -1;
}

struct bench_op {
    const char *name;
    int (*fn)(void);
};

static double measure(const struct bench_op *op, double budget_ns)
{
    /* Calibrate to the budget, then take the best of three runs: the
     * fastest run is the least disturbed by the noisy machine. */
    long iters = 64;
    for (;;) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
            if (op->fn() != 0)
                return -1;
        double dt = now_ns() - t0;
        if (dt > budget_ns / 4 || iters > (1L << 26))
            break;
        iters *= 2;
    }
    double best = -1;
    for (int run = 0; run < 3; run++) {
        double t0 = now_ns();
        for (long i = 0; i < iters; i++)
            op->fn();
        double per = (now_ns() - t0) / (double)iters;
        if (best < 0 || per < best)
            best = per;
    }
    return best;
}

int main(int argc, char **argv)
{
    double budget_ms = 100;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--budget-ms") == 0 && i + 1 < argc)
            budget_ms = atof(argv[++i]);
        else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc)
            open_path = argv[++i];
    }
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
        perror("pipe2");
        return 1;
    }
    static const struct bench_op ops[] = {
        {"getppid", op_getppid}, {"pipe_write_read", op_pipe}, {"openat_close", op_open_close},
        {"stat", op_stat},       {"refused", op_refused},
    };
    printf("{");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
        double ns = measure(&ops[i], budget_ms * 1e6);
        if (ns < 0)
            printf("%s\"%s\":null", i ? "," : "", ops[i].name);
        else
            printf("%s\"%s\":%.1f", i ? "," : "", ops[i].name, ns);
    }
    printf("}\n");
    return 0;
}
