/* Faults in the sentry's two-stage start-up (sentry/README.md, "The
 * sentry's second wall"): the exec'd first stage forks the sentry into the
 * sandbox's namespaces as the creator's child (CLONE_PARENT) and hands its
 * pidfd over the sync socket. A create that fails in between must still
 * end and reap that child, or it stays a zombie of a long-lived creator
 * (bulkheadd's verification). The fault hook exists in the test build
 * only (BH_TEST_HOOKS). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

/* Every child we hold (our own and orphans re-parented to us), named, then
 * ended and reaped, so a failing run leaves nothing behind. */
static void end_children(char *names, size_t size)
{
    names[0] = '\0';
    size_t used = 0;
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/task", (int)getpid());
    DIR *d = opendir(path);
    cr_assert_not_null(d, "%s: %s", path, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char kids_path[384], kids[4096] = "";
        snprintf(kids_path, sizeof(kids_path), "%s/%s/children", path, e->d_name);
        FILE *f = fopen(kids_path, "re");
        if (f == NULL)
            continue;
        size_t n = fread(kids, 1, sizeof(kids) - 1, f);
        kids[n] = '\0';
        fclose(f);
        for (char *tok = strtok(kids, " \n"); tok != NULL; tok = strtok(NULL, " \n")) {
            pid_t pid = (pid_t)atoi(tok);
            char comm_path[64], comm[32] = "?";
            snprintf(comm_path, sizeof(comm_path), "/proc/%d/comm", (int)pid);
            FILE *c = fopen(comm_path, "re");
            if (c != NULL) {
                if (fgets(comm, sizeof(comm), c) != NULL)
                    comm[strcspn(comm, "\n")] = '\0';
                fclose(c);
            }
            if (used < size)
                used += (size_t)snprintf(names + used, size - used, "%s%d (%s)", used ? ", " : "",
                                         (int)pid, comm);
            kill(pid, SIGKILL);
        }
    }
    closedir(d);
    while (waitpid(-1, NULL, __WALL) > 0 || errno == EINTR)
        ;
}

static void create_fails_after_the_fork(const char *tier, const char *fault)
{
    if (strcmp(tier, "kernel") == 0)
        h_require_kernel_tier();
    /* Orphans of `bulkhead do` come to us: what it leaves unreaped, alive
     * or a zombie, is then our child. */
    cr_assert_eq(prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    char *bh = h_path("bulkhead");
    char *argv[] = {bh, "do", "--tier", (char *)tier, "--", "/bin/true", NULL};
    char fault_env[64];
    snprintf(fault_env, sizeof(fault_env), "BULKHEAD_TEST_FAULT=%s", fault);
    char *env[] = {fault_env, NULL};
    struct run_result r = h_run(argv, env, NULL, 120);
    free(bh);
    /* h_run reaped `bulkhead do` itself: its orphans were ours before */
    char left[1024];
    end_children(left, sizeof(left));
    cr_assert_neq(r.status, 0, "bulkhead do --tier %s ran although its create was failed", tier);
    cr_assert(strstr(r.err, "test fault after the sentry's fork") != NULL,
              "the fault hook did not fire (a build without BH_TEST_HOOKS?): exit %d, `%.400s`",
              r.status, r.err);
    /* the short-lived first stage has a name of its own (ps, tests) */
    cr_assert(strstr(r.err, "the first stage, `bulkhead-stage1`,") != NULL,
              "the sentry's first stage is not named bulkhead-stage1: `%.400s`", r.err);
    cr_assert_str_eq(left, "",
                     "a create failed after the sentry's fork (tier %s, %s) left process(es) of "
                     "bulkhead do behind: %s",
                     tier, fault, left);
    h_free(&r);
}

/* The first stage's message with the child's pidfd is still unread: the
 * front end takes the pidfd from it. */
Test(faults_fork, a_create_failing_after_the_sentrys_fork_leaves_no_process_kernel_tier,
     .timeout = 240)
{
    create_fails_after_the_fork("kernel", "after-sentry-fork");
}

Test(faults_fork, a_create_failing_after_the_sentrys_fork_leaves_no_process_container_tier,
     .timeout = 240)
{
    create_fails_after_the_fork("container", "after-sentry-fork");
}

/* The message is lost (as when the first stage dies before it sends): the
 * child itself answers "abort" with its own pidfd. */
Test(faults_fork, a_lost_pidfd_of_the_sentrys_fork_leaves_no_process_kernel_tier, .timeout = 240)
{
    create_fails_after_the_fork("kernel", "after-sentry-fork-lost");
}

Test(faults_fork, a_lost_pidfd_of_the_sentrys_fork_leaves_no_process_container_tier, .timeout = 240)
{
    create_fails_after_the_fork("container", "after-sentry-fork-lost");
}
