/* Attacks on the host's one pool of Linux AIO events (fs.aio-max-nr) from a
 * container-tier guest, which may call io_setup (sentry/aio-cap.c). Each
 * attempt tries to hold more than the sandbox's cap, directly or by hiding
 * contexts from the count:
 *   aio_flood      io_setup(1000) until refused: more than the cap is ESCAPED
 *   aio_exit       a child fills the cap and exits: the parent must get it
 *                  all back (the cap is not a leak)
 *   aio_exec       a process fills the cap and execs itself: the new image
 *                  must get it all back (exec frees the old contexts)
 *   aio_vfork      a CLONE_VM child fills the cap and exits while its parent
 *                  keeps the address space (and the contexts): any more for
 *                  the parent is ESCAPED
 *   aio_thread     the same with a thread that exits
 *   aio_unmap      contexts whose rings were unmapped, then io_destroy of a
 *                  bogus id: still counted
 * Run with argument "exec-child" only by aio_exec itself; "wait" only waits
 * (a container's first process). */
#include <linux/aio_abi.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "attack.h"

/* What the sentry allows: sentry/aio-cap-internal.h. */
#define CAP_EVENTS 4096
#define ASK 1000
#define MOST (CAP_EVENTS / ASK) /* contexts of ASK events within the cap */

/* Contexts of n events made until the first refusal (or max); the errno of
 * that refusal in *err. */
static int grab(unsigned n, int max, int *err)
{
    int k = 0;
    *err = 0;
    for (; k < max; k++) {
        aio_context_t ctx = 0;
        if (syscall(SYS_io_setup, n, &ctx) < 0) {
            *err = errno;
            break;
        }
    }
    return k;
}

/* Within the cap and then refused with EAGAIN, as the kernel's own pool
 * refuses. */
static void judge_full(const char *name, int got, int want, int err)
{
    if (got > want)
        attack_line(name, "ESCAPED", "%d contexts of %d events, the cap allows %d", got, ASK, want);
    else if (got < want || err != EAGAIN)
        attack_line(name, "inconclusive", "%d contexts of %d events (want %d), then %s", got, ASK,
                    want, attack_errname(err));
    else
        attack_line(name, "refused", "%s after %d contexts", attack_errname(err), got);
}

static int child_fill(void *arg)
{
    int err;
    (void)arg;
    grab(ASK, MOST, &err);
    return 0;
}

static void *thread_fill(void *arg)
{
    int err;
    (void)arg;
    grab(ASK, MOST, &err);
    return NULL;
}

int main(int argc, char **argv)
{
    int err;
    /* An OCI container's first process, for the attack to run by exec. */
    if (argc > 1 && strcmp(argv[1], "wait") == 0) {
        pause();
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "exec-child") == 0) {
        int got = grab(ASK, 1000, &err);
        judge_full("aio_exec", got, MOST, err);
        return 0;
    }
    attack_require_sandbox();
    setvbuf(stdout, NULL, _IONBF, 0);

    /* A child holds what it got until it ends: the parent's own attempts
     * below start from an empty count. */
    pid_t p = fork();
    if (p == 0) {
        int got = grab(ASK, 1000, &err);
        judge_full("aio_flood", got, MOST, err);
        _exit(0);
    }
    waitpid(p, NULL, 0);

    p = fork();
    if (p == 0) {
        grab(ASK, MOST, &err);
        _exit(0);
    }
    waitpid(p, NULL, 0);
    p = fork();
    if (p == 0) {
        int got = grab(ASK, 1000, &err);
        judge_full("aio_exit", got, MOST, err);
        _exit(0);
    }
    waitpid(p, NULL, 0);

    p = fork();
    if (p == 0) {
        grab(ASK, MOST, &err);
        execl("/proc/self/exe", argv[0], "exec-child", (char *)NULL);
        attack_line("aio_exec", "inconclusive", "exec: %s", attack_errname(errno));
        _exit(0);
    }
    waitpid(p, NULL, 0);

    p = fork();
    if (p == 0) {
        static char stack[64 * 1024];
        pid_t c = clone(child_fill, stack + sizeof(stack), CLONE_VM | SIGCHLD, NULL);
        if (c < 0) {
            attack_line("aio_vfork", "inconclusive", "clone: %s", attack_errname(errno));
            _exit(0);
        }
        waitpid(c, NULL, 0);
        /* Our address space holds the child's contexts. */
        int got = grab(ASK, 1000, &err);
        if (got > 0)
            attack_line("aio_vfork", "ESCAPED", "%d more contexts past the cap", got);
        else
            attack_line("aio_vfork", err == EAGAIN ? "refused" : "inconclusive", "%s",
                        attack_errname(err));
        _exit(0);
    }
    waitpid(p, NULL, 0);

    p = fork();
    if (p == 0) {
        pthread_t t;
        if (pthread_create(&t, NULL, thread_fill, NULL) != 0) {
            attack_line("aio_thread", "inconclusive", "pthread_create failed");
            _exit(0);
        }
        pthread_join(t, NULL);
        int got = grab(ASK, 1000, &err);
        if (got > 0)
            attack_line("aio_thread", "ESCAPED", "%d more contexts past the cap", got);
        else
            attack_line("aio_thread", err == EAGAIN ? "refused" : "inconclusive", "%s",
                        attack_errname(err));
        _exit(0);
    }
    waitpid(p, NULL, 0);

    p = fork();
    if (p == 0) {
        /* Rings unmapped: the contexts live on, out of /proc/self/maps. */
        for (int i = 0; i < MOST; i++) {
            aio_context_t ctx = 0;
            if (syscall(SYS_io_setup, ASK, &ctx) == 0)
                munmap((void *)ctx, 4096);
            syscall(SYS_io_destroy, (aio_context_t)0x1000);
        }
        int got = grab(ASK, 1000, &err);
        if (got > 0)
            attack_line("aio_unmap", "ESCAPED", "%d more contexts past the cap", got);
        else
            attack_line("aio_unmap", err == EAGAIN ? "refused" : "inconclusive", "%s",
                        attack_errname(err));
        _exit(0);
    }
    waitpid(p, NULL, 0);
    attack_done();
    return 0;
}
