/* sentry/aio-cap.c: the container tier's per-sandbox AIO reservations, held
 * by /proc/TID/mem fds of real processes and released only when their
 * address space is gone (the end-to-end attack is
 * escape/aio_contexts_are_capped_per_container). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "aio-cap-internal.h"

static struct bh_aio_cap cap;

static void init_cap(unsigned events, unsigned contexts)
{
    int proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert_geq(proc, 0);
    bh_aio_cap_init(&cap, proc, events, contexts);
    cr_assert_geq(cap.proc_fd, 0, "the host's /proc is ours: self names our pid");
}

static int mem_of(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/mem", (int)pid);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s", p);
    return fd;
}

/* A child that waits until we write to (or close) *go, then runs then(). */
static pid_t child_waiting(int *go, void (*then)(void))
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        char c;
        close(p[1]);
        if (read(p[0], &c, 1) < 0)
            _exit(1);
        if (then)
            then();
        _exit(0);
    }
    close(p[0]);
    *go = p[1];
    return pid;
}

static void fini(void)
{
    bh_aio_cap_free(&cap);
}

TestSuite(aio_cap, .fini = fini);

Test(aio_cap, events_and_contexts_are_capped)
{
    init_cap(4096, 5);
    for (int i = 0; i < 4; i++)
        cr_assert_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 1000), 0);
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 97), -EAGAIN, "4097 events");
    cr_assert_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 96), 0);
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 0), -EAGAIN, "a sixth context");
    cr_expect_eq(cap.events, 4096u);
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 5000), -EAGAIN);
}

Test(aio_cap, a_process_that_exits_gives_its_events_back)
{
    init_cap(4096, 64);
    int go;
    pid_t c = child_waiting(&go, NULL);
    cr_assert_eq(bh_aio_cap_hold(&cap, mem_of(c), 4096), 0);
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 1), -EAGAIN);
    close(go);
    waitpid(c, NULL, 0);
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 4096), 0, "the child's mm is gone");
}

static void exec_sleep(void)
{
    execl("/bin/sleep", "sleep", "30", (char *)NULL);
}

Test(aio_cap, exec_gives_the_old_address_space_back)
{
    init_cap(4096, 64);
    int go;
    pid_t c = child_waiting(&go, exec_sleep);
    cr_assert_eq(bh_aio_cap_hold(&cap, mem_of(c), 4096), 0);
    close(go);
    /* exec is done when the process's image is sleep's. */
    char p[64], comm[32] = "";
    snprintf(p, sizeof(p), "/proc/%d/comm", (int)c);
    for (int i = 0; i < 500 && strncmp(comm, "sleep", 5) != 0; i++) {
        FILE *f = fopen(p, "re");
        if (f && !fgets(comm, sizeof(comm), f))
            comm[0] = '\0';
        if (f)
            fclose(f);
        usleep(10000);
    }
    cr_assert_eq(strncmp(comm, "sleep", 5), 0);
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 4096), 0, "exec freed the old mm");
    kill(c, SIGKILL);
    waitpid(c, NULL, 0);
}

/* Without CLONE_FILES the child has its own copy of the write end. */
static int wait_on_pipe(void *arg)
{
    int *p = arg;
    char ch;
    close(p[1]);
    return read(p[0], &ch, 1) < 0;
}

Test(aio_cap, a_clone_vm_child_that_exits_keeps_its_events_counted)
{
    init_cap(4096, 64);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    static char stack[64 * 1024];
    pid_t c = clone(wait_on_pipe, stack + sizeof(stack), CLONE_VM | SIGCHLD, p);
    cr_assert_geq(c, 0);
    cr_assert_eq(bh_aio_cap_hold(&cap, mem_of(c), 4096), 0);
    close(p[1]);
    waitpid(c, NULL, 0);
    /* Our own address space is the one it made its contexts in. */
    cr_expect_eq(bh_aio_cap_hold(&cap, mem_of(getpid()), 1), -EAGAIN);
    close(p[0]);
}

Test(aio_cap, a_procfs_of_another_pid_namespace_counts_nothing)
{
    /* Not a procfs at all: refused, every io_setup would be ENOSYS. */
    int notproc = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert_geq(notproc, 0);
    bh_aio_cap_init(&cap, notproc, 4096, 64);
    cr_expect_eq(cap.proc_fd, -1);
}
