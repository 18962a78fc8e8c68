/* The broker cannot be wedged by its own guest (issue 10, finding 6),
 * written as the attack: inside `bulkhead do --tier kernel`, many threads
 * open a FIFO that has no writer, so each brokered open blocks in the
 * sentry. Afterwards a brokered call of the same sandbox (a stat from
 * another thread, then from another process) must still be answered, and
 * the blocked opens must still complete once a writer comes. On a broker
 * whose workers the blocked opens all hold, the stat never returns and the
 * run ends by its timeout. Also: the umask the sentry caches for the files
 * it creates follows every umask call. */
#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attacks/harness.h"

#define PY "/usr/bin/python3"

/* More threads than the broker's default bound of blocked calls (64). */
static const char wedge_py[] =
    "import os, sys, threading, time\n"
    "os.mkfifo('/tmp/wedge')\n"
    "N = int(sys.argv[1])\n"
    "opened = []\n"
    "def reader():\n"
    "    fd = os.open('/tmp/wedge', os.O_RDONLY)\n" /* blocks: no writer yet */
    "    opened.append(fd)\n"
    "ts = [threading.Thread(target=reader, daemon=True) for _ in range(N)]\n"
    "for t in ts: t.start()\n"
    "time.sleep(2)\n"
    "print('blocked', N - len(opened), flush=True)\n"
    "t0 = time.monotonic(); os.stat('/tmp'); d1 = time.monotonic() - t0\n"
    "print('stat %.3f' % d1, flush=True)\n"
    "t0 = time.monotonic()\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    os.stat('/tmp'); os.open('/tmp/other', os.O_CREAT | os.O_WRONLY, 0o600); os._exit(0)\n"
    "_, st = os.waitpid(pid, 0)\n"
    "print('child %.3f %d' % (time.monotonic() - t0, st), flush=True)\n"
    "w = os.open('/tmp/wedge', os.O_WRONLY | os.O_NONBLOCK)\n"
    "for t in ts: t.join(30)\n"
    "print('opened', len(opened), 'of', N, flush=True)\n";

/* h_do_va takes its arguments as a va_list: wrap it. */
static struct run_result kernel_do(int timeout_s, ...)
{
    static const char *const pre[] = {"--pids", "1024", "--memory", "1g", "--", NULL};
    va_list ap;
    va_start(ap, timeout_s);
    struct run_result r = h_do_va("kernel", NULL, timeout_s, pre, ap);
    va_end(ap);
    return r;
}

static double field(const char *out, const char *key)
{
    const char *at = strstr(out, key);
    cr_assert_not_null(at, "no `%s` line in the guest's output:\n%s", key, out);
    return strtod(at + strlen(key), NULL);
}

Test(broker_wedge, blocked_fifo_opens_do_not_stop_the_sentry, .timeout = 240)
{
    /* A kernel tier that does not run here fails the test: the attack
     * cannot be tried, so nothing would be shown. */
    char *bh = h_path("bulkhead");
    char *probe[] = {bh, "do", "--tier", "kernel", "--", "/bin/true", NULL};
    struct run_result p = h_run(probe, NULL, NULL, 120);
    cr_assert_eq(p.status, 0, "the kernel tier does not run here, so the wedge cannot be tried: %s",
                 p.err);
    h_free(&p);
    free(bh);

    struct run_result r = kernel_do(90, PY, "-c", wedge_py, "70", NULL);
    cr_assert_neq(r.status, -1,
                  "the sandbox hung: a brokered call after 70 blocked FIFO opens was never "
                  "answered (took %.1f s)\nstdout: %s\nstderr: %s",
                  r.seconds, r.out, r.err);
    cr_assert_eq(r.status, 0, "exit %d\nstdout: %s\nstderr: %s", r.status, r.out, r.err);
    /* The attack really held the opens. */
    cr_expect_gt(field(r.out, "blocked "), 60, "%s", r.out);
    /* Answered, not merely eventually: generous bounds for a loaded machine,
     * far below the hang this guards against. */
    double d1 = field(r.out, "stat ");
    cr_expect_lt(d1, 10.0, "a stat took %.3f s behind the blocked opens", d1);
    double d2 = field(r.out, "child ");
    cr_expect_lt(d2, 20.0, "a fork + stat + open took %.3f s behind the blocked opens", d2);
    cr_expect(strstr(r.out, "child") && strstr(strstr(r.out, "child "), " 0\n"),
              "the child's brokered calls failed: %s", r.out);
    /* Every blocked open completed once a writer came (interrupted ones
     * were retried by Python, as after a signal). */
    cr_expect(strstr(r.out, "opened 70 of 70") != NULL, "%s", r.out);
    h_free(&r);
}

/* Blocked calls of a process that was killed are let go: four children in
 * turn start 20 threads each that open the FIFO, and are killed while the
 * sentry performs those opens. Nobody waits for the 80 opens any more; a
 * broker that kept performing them would hold 80 workers (more than its 64)
 * and the parent's stat afterwards would never be answered. */
static const char killed_py[] =
    "import os, signal, threading, time\n"
    "os.mkfifo('/tmp/wedge')\n"
    "def child():\n"
    "    def reader():\n"
    "        os.open('/tmp/wedge', os.O_RDONLY)\n"
    "    for _ in range(20):\n"
    "        threading.Thread(target=reader, daemon=True).start()\n"
    "    time.sleep(120)\n"
    "    os._exit(0)\n"
    "for _ in range(4):\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        child()\n"
    "    time.sleep(1.5)\n"
    "    os.kill(pid, signal.SIGKILL)\n"
    "    os.waitpid(pid, 0)\n"
    "t0 = time.monotonic(); os.stat('/tmp'); d = time.monotonic() - t0\n"
    "print('stat %.3f' % d, flush=True)\n";

Test(broker_wedge, blocked_calls_of_killed_processes_are_let_go, .timeout = 240)
{
    char *bh = h_path("bulkhead");
    char *probe[] = {bh, "do", "--tier", "kernel", "--", "/bin/true", NULL};
    struct run_result p = h_run(probe, NULL, NULL, 120);
    cr_assert_eq(p.status, 0,
                 "the kernel tier does not run here, so the attack cannot be tried: %s", p.err);
    h_free(&p);
    free(bh);

    struct run_result r = kernel_do(90, PY, "-c", killed_py, NULL);
    cr_assert_neq(r.status, -1,
                  "the sandbox hung: after 80 blocked FIFO opens of killed processes a stat was "
                  "never answered (took %.1f s)\nstdout: %s\nstderr: %s",
                  r.seconds, r.out, r.err);
    cr_assert_eq(r.status, 0, "exit %d\nstdout: %s\nstderr: %s", r.status, r.out, r.err);
    double d = field(r.out, "stat ");
    cr_expect_lt(d, 10.0, "a stat took %.3f s after the killed processes' opens", d);
    h_free(&r);
}

/* The sentry caches each guest thread's umask for the files it creates and
 * forgets it at any umask call (kernel.policy notifies umask for that): a
 * shell's and a Python thread's umask changes must reach every file, and a
 * change by one thread the files of another that shares it. */
static const char umask_sh[] =
    "umask 077; : > /tmp/a; umask 022; : > /tmp/b; mkdir /tmp/d; umask 027\n"
    "python3 -c '\n"
    "import os, threading\n"
    "open(\"/tmp/c\", \"w\").close()\n"
    "t = threading.Thread(target=os.umask, args=(0o002,)); t.start(); t.join()\n"
    "open(\"/tmp/e\", \"w\").close(); os.mkdir(\"/tmp/f\")\n"
    "'\n"
    "stat -c '%n %a' /tmp/a /tmp/b /tmp/c /tmp/d /tmp/e /tmp/f\n";

Test(broker_calls, umask_changes_reach_the_files_the_sentry_creates, .timeout = 120)
{
    struct run_result r = kernel_do(60, "/bin/sh", "-c", umask_sh, NULL);
    cr_assert_eq(r.status, 0,
                 "the kernel tier did not run the script (without it nothing is shown): exit "
                 "%d\nstdout: %s\nstderr: %s",
                 r.status, r.out, r.err);
    cr_expect_str_eq(r.out,
                     "/tmp/a 600\n/tmp/b 644\n/tmp/c 640\n/tmp/d 755\n/tmp/e 664\n/tmp/f 775\n",
                     "%s", r.err);
    h_free(&r);
}
