/* sentry_mm's verdicts are kept per sentry process (probe.c): the check
 * forks, and bulkheadd verifies every session it opens. Kept per process,
 * not per pid: a process that took a verified sentry's pid after it died
 * must be checked again, and fail when its wall is missing. The pid is
 * reused for certain in a pid namespace of the test's own, where nothing
 * else forks and ns_last_pid picks the next pid. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

#define HOST_BASE 1610612800u /* far from any real user's ids */

static int write_maps(pid_t pid)
{
    char path[64], map[64];
    snprintf(map, sizeof(map), "0 %u 1\n", HOST_BASE);
    const char *files[] = {"uid_map", "setgroups", "gid_map"};
    const char *data[] = {map, "deny\n", map};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, files[i]);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
            return -1;
        ssize_t w = write(fd, data[i], strlen(data[i]));
        close(fd);
        if (w != (ssize_t)strlen(data[i]))
            return -1;
    }
    return 0;
}

/* A process in a new user namespace with a guest (sleep, exec'd inside)
 * under it. walled: its own mm is the host namespace's and it is
 * non-dumpable, as the sentry; else it execs inside the namespace too (a
 * shell), as the sentry was before the second wall. Returns once the guest
 * has exec'd. */
static pid_t start_fake_sentry(bool walled)
{
    int go[2], ready[2];
    if (pipe2(go, O_CLOEXEC) < 0 || pipe2(ready, O_CLOEXEC) < 0)
        return -1;
    struct clone_args ca = {.flags = CLONE_NEWUSER, .exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &ca, sizeof(ca));
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close(ready[0]);
        /* root of the new namespace once the maps are written */
        char b;
        bool mapped = read(go[0], &b, 1) == 1;
        if (!mapped || setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
            _exit(120);
        if (!walled) {
            /* the shell's child is the guest; the exec closes ready */
            execl("/bin/sh", "sh", "-c", "sleep 1000 & wait", (char *)NULL);
            _exit(121);
        }
        if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
            _exit(122);
        pid_t guest = fork();
        if (guest == 0) {
            execl("/bin/sleep", "sleep", "1000", (char *)NULL);
            _exit(123);
        }
        close(ready[1]);
        /* the guest's exec closes its copy: then EOF */
        while (read(go[0], &b, 1) < 0 && errno == EINTR)
            ;
        pause();
        _exit(0);
    }
    close(go[0]);
    close(ready[1]);
    if (write_maps((pid_t)pid) < 0 || write(go[1], "g", 1) != 1)
        return -1;
    /* EOF once every copy of the ready pipe is closed by an exec */
    char b;
    while (read(ready[0], &b, 1) > 0)
        ;
    close(ready[0]);
    if (walled)
        return (pid_t)pid; /* go[1] stays open: the fake sentry waits on it */
    /* the shell forks its guest after its exec: wait until it is there */
    char path[96];
    snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)pid);
    for (int i = 0; i < 60000; i++) {
        char kids[64] = "";
        FILE *f = fopen(path, "re");
        size_t n = f != NULL ? fread(kids, 1, sizeof(kids) - 1, f) : 0;
        if (f != NULL)
            fclose(f);
        kids[n] = '\0';
        if (atoi(kids) > 0) {
            char comm_path[64], comm[32] = "";
            snprintf(comm_path, sizeof(comm_path), "/proc/%d/comm", atoi(kids));
            FILE *c = fopen(comm_path, "re");
            if (c != NULL && fgets(comm, sizeof(comm), c) != NULL &&
                strncmp(comm, "sleep", 5) == 0) {
                fclose(c);
                return (pid_t)pid;
            }
            if (c != NULL)
                fclose(c);
        }
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    }
    return -1;
}

/* sentry_mm's result and detail for pid, as bulkheadd's verification sees. */
static int sentry_mm_of(pid_t pid, char *detail, size_t size)
{
    struct bh_tier_report *r = NULL;
    struct bh_error err = {0};
    struct bh_live_target t = {.sentry_pid = pid, .tier = BH_TIER_CONTAINER};
    if (bh_probe_check_live(&t, &r, &err) < 0) {
        snprintf(detail, size, "check_live: %.500s", err.msg);
        return -1;
    }
    int res = -1;
    for (size_t i = 0; i < r->n_checks; i++)
        if (strcmp(r->checks[i].name, "sentry_mm") == 0) {
            res = r->checks[i].result;
            snprintf(detail, size, "%s", r->checks[i].detail ? r->checks[i].detail : "");
        }
    bh_tier_report_free(r);
    return res;
}

static void end_all(void)
{
    kill(-1, SIGKILL); /* pid 1 of our own namespace: only its processes */
    while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
        ;
}

/* pid 1 of the test's pid namespace: writes what it saw to out, one line. */
static int scenario(FILE *out)
{
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
        fprintf(out, "mount a procfs for the new pid namespace: %s\n", strerror(errno));
        return 1;
    }
    pid_t sentry = start_fake_sentry(true);
    if (sentry < 0) {
        fprintf(out, "could not start the walled process: %s\n", strerror(errno));
        return 1;
    }
    char d1[1200], d2[1200], d3[1200];
    int r1 = sentry_mm_of(sentry, d1, sizeof(d1));
    int r2 = sentry_mm_of(sentry, d2, sizeof(d2));
    end_all();
    FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "we");
    if (f == NULL || fprintf(f, "%d", (int)sentry - 1) < 0 || fclose(f) != 0) {
        fprintf(out, "set ns_last_pid: %s\n", strerror(errno));
        return 1;
    }
    pid_t impostor = start_fake_sentry(false);
    if (impostor != sentry) {
        fprintf(out, "the pid was not reused: %d, then %d\n", (int)sentry, (int)impostor);
        end_all();
        return 1;
    }
    int r3 = sentry_mm_of(impostor, d3, sizeof(d3));
    end_all();
    fprintf(out, "%d %d %d\n%s\n%s\n%s\n", r1, r2, r3, d1, d2, d3);
    return 0;
}

Test(sentry_mm_cache, a_verified_sentry_is_known_and_a_reused_pid_is_checked_again, .timeout = 120)
{
    cr_assert_eq(geteuid(), 0,
                 "a pid namespace and id maps of its own need host root (CI runs "
                 "as root)");
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    pid_t w = fork();
    cr_assert_geq(w, 0);
    if (w == 0) {
        close(p[0]);
        FILE *out = fdopen(p[1], "w");
        if (out == NULL || unshare(CLONE_NEWPID | CLONE_NEWNS) < 0 ||
            mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
            if (out != NULL)
                fprintf(out, "new pid and mount namespaces: %s\n", strerror(errno));
            if (out != NULL)
                fflush(out);
            _exit(1);
        }
        fflush(out);
        pid_t g = fork();
        if (g == 0) {
            int rc = scenario(out);
            fflush(out);
            _exit(rc);
        }
        int st = 0;
        waitpid(g, &st, 0);
        _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 2);
    }
    close(p[1]);
    char buf[4096];
    ssize_t n;
    while ((n = read(p[0], buf, sizeof(buf))) > 0)
        fwrite(buf, 1, (size_t)n, mem);
    close(p[0]);
    fclose(mem);
    int st;
    cr_assert_eq(waitpid(w, &st, 0), w);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the scenario did not run: %s", text);
    int r1 = -9, r2 = -9, r3 = -9;
    cr_assert_eq(sscanf(text, "%d %d %d", &r1, &r2, &r3), 3, "%s", text);
    cr_assert_eq(r1, BH_CHECK_PASS, "the walled process failed sentry_mm: %s", text);
    cr_assert_eq(r2, BH_CHECK_PASS, "%s", text);
    cr_assert(strstr(text, "checked earlier on this very process") != NULL,
              "the second check of the same process forked again (no kept verdict): %s", text);
    cr_assert_eq(r3, BH_CHECK_FAIL,
                 "a process exec'd inside its user namespace took a verified sentry's pid and "
                 "passed sentry_mm: %s",
                 text);
    cr_assert(strstr(text, "opens its /proc/PID/mem") != NULL,
              "the impostor failed for another reason than the missing wall: %s", text);
    free(text);
}
