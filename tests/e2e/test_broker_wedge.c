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
#include <dirent.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* The broker's threads run SCHED_BATCH, so the wake-up that ends each
 * brokered open (the guest installs the fd, then wakes the receiver) does
 * not preempt the guest (sentry/README.md, "The 10,000-files script"); the
 * sentry's main thread and the guest keep SCHED_OTHER. Read from the host,
 * while the guest waits on its stdin. */
/* The fields of a /proc stat file after the comm, from the state on (NULL
 * if it cannot be read); *comm_is tells whether the comm is `want`. */
static const char *stat_fields(const char *path, const char *want, bool *comm_is, char *buf,
                               size_t size)
{
    FILE *f = fopen(path, "re");
    if (f == NULL)
        return NULL;
    size_t n = fread(buf, 1, size - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *l = strchr(buf, '('), *r = strrchr(buf, ')');
    if (l == NULL || r == NULL || r[1] != ' ')
        return NULL;
    *comm_is = (size_t)(r - l - 1) == strlen(want) && strncmp(l + 1, want, strlen(want)) == 0;
    return r + 2;
}

/* Field 41 (policy) of a task, -1 if unreadable. */
static int task_policy(pid_t pid, const char *tid)
{
    char path[320], buf[1024];
    bool is_sentry;
    snprintf(path, sizeof(path), "/proc/%d/task/%s/stat", (int)pid, tid);
    const char *p = stat_fields(path, "bulkhead-sentry", &is_sentry, buf, sizeof(buf));
    for (int field = 3; p != NULL && field < 41; field++)
        if ((p = strchr(p, ' ')) != NULL)
            p++;
    return p != NULL ? atoi(p) : -1;
}

static pid_t sentry_of(pid_t front)
{
    DIR *d = opendir("/proc");
    cr_assert_not_null(d);
    pid_t found = -1;
    struct dirent *e;
    while (found < 0 && (e = readdir(d)) != NULL) {
        char path[300], buf[512];
        bool is_sentry = false;
        int ppid = 0;
        snprintf(path, sizeof(path), "/proc/%s/stat", e->d_name);
        const char *p = stat_fields(path, "bulkhead-sentry", &is_sentry, buf, sizeof(buf));
        if (p != NULL && is_sentry && sscanf(p, "%*c %d", &ppid) == 1 && ppid == front)
            found = atoi(e->d_name);
    }
    closedir(d);
    return found;
}

static const char ready_py[] = "import os, sys\nos.stat('/tmp')\n"
                               "print('ready', os.sched_getscheduler(0), flush=True)\n"
                               "sys.stdin.read()\n";

Test(broker_calls, the_brokers_threads_never_preempt_the_guest, .timeout = 120)
{
    char dir[] = "/tmp/bh-batch-XXXXXX", fifo[64];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(fifo, sizeof(fifo), "%s/in", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    char *bh = h_path("bulkhead");
    char *argv[] = {bh, "do", "--tier", "kernel", "--", PY, "-c", (char *)ready_py, NULL};
    struct h_job job = h_spawn(argv, NULL, fifo, NULL);
    free(bh);
    int wfd = open(fifo, O_WRONLY | O_CLOEXEC); /* the child opened its end */
    cr_assert_geq(wfd, 0);
    char buf[256] = "";
    int guest_policy = -1;
    for (double end = h_now() + 90; guest_policy < 0;) {
        ssize_t n = pread(job.out, buf, sizeof(buf) - 1, 0);
        buf[n > 0 ? n : 0] = '\0';
        if (sscanf(buf, "ready %d", &guest_policy) == 1)
            break;
        guest_policy = -1;
        int st;
        if (waitpid(job.pid, &st, WNOHANG) == job.pid) {
            char *err = h_read_fd(job.err);
            cr_assert_fail(
                "the kernel tier did not run the guest (nothing is shown): status %d\n%s", st, err);
        }
        cr_assert_lt(h_now(), end, "the guest never said it was ready: %s", buf);
        usleep(20000);
    }
    pid_t sentry = sentry_of(job.pid);
    int batch = 0, other = 0, main_policy = -1;
    if (sentry > 0) {
        char tdir[64];
        snprintf(tdir, sizeof(tdir), "/proc/%d/task", (int)sentry);
        DIR *d = opendir(tdir);
        struct dirent *e;
        while (d != NULL && (e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.')
                continue;
            int pol = task_policy(sentry, e->d_name);
            if (atoi(e->d_name) == sentry)
                main_policy = pol;
            else if (pol == SCHED_BATCH)
                batch++;
            else
                other++;
        }
        if (d != NULL)
            closedir(d);
    }
    close(wfd);
    char *out = NULL, *err = NULL;
    int rc = h_finish(&job, 60, &out, &err);
    unlink(fifo);
    rmdir(dir);
    cr_assert_gt(sentry, 0, "no bulkhead-sentry child of `bulkhead do` (pid %d)", (int)job.pid);
    cr_expect_eq(rc, 0, "the guest failed: %s", err);
    cr_expect_eq(guest_policy, SCHED_OTHER, "the guest runs under policy %d", guest_policy);
    cr_expect_eq(main_policy, SCHED_OTHER, "the sentry's main thread runs under policy %d",
                 main_policy);
    /* The receiver that answered the stat, at least. */
    cr_expect_geq(batch, 1, "%d of the sentry's other threads under SCHED_BATCH, %d not", batch,
                  other);
    free(out);
    free(err);
}
