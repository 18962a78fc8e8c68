/* Id slots (userns.c): a release and a scan for a free slot never overlap,
 * so a slot's lock file is removed by the sandbox that held it, never left
 * to whoever locked it in the instant between the releaser's close and its
 * check (faults_daemon/killed_after_run_cell_with_a_warm_pool saw such a
 * file outlive its sandbox). Uses the real BH_IDS_DIR: needs root. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ids-internal.h"

/* Longer than a release or a scan takes, shorter than the bound past which
 * they go on without the directory's lock (IDS_DIR_LOCK_MS, 2 s). */
#define HELD_MS 300

static pid_t child = -1;

static void stop_child(void)
{
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        child = -1;
    }
}

static void need_root(void)
{
    if (geteuid() != 0)
        cr_assert_fail("needs root (it locks slots in %s); run as root", BH_IDS_DIR);
}

static int hold_dir(int how)
{
    int fd = open(BH_IDS_DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "open %s: %s", BH_IDS_DIR, strerror(errno));
    cr_assert_eq(flock(fd, how), 0, "lock %s: %s", BH_IDS_DIR, strerror(errno));
    return fd;
}

/* Whether the child has exited, without reaping it. */
static bool child_done(void)
{
    siginfo_t si = {0};
    cr_assert_eq(waitid(P_PID, (id_t)child, &si, WEXITED | WNOHANG | WNOWAIT), 0);
    return si.si_pid == child;
}

static int reap_child(void)
{
    int st = 0;
    cr_assert_eq(waitpid(child, &st, 0), child);
    child = -1;
    return st;
}

Test(id_slots, a_release_waits_for_a_scan_then_removes_the_file, .fini = stop_child)
{
    need_root();
    struct bh_id_slot s;
    struct bh_error err = {0};
    cr_assert_eq(bh_id_slot_acquire(&s, &err), 0, "%s", err.msg);
    struct stat held;
    cr_assert_eq(stat(s.path, &held), 0);
    int scan = hold_dir(LOCK_SH);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        bh_id_slot_release(&s);
        _exit(0);
    }
    /* the lock's open file is the child's alone now, as the front end's is
     * once its sentry is gone */
    close(s.lock_fd);
    nanosleep(&(struct timespec){0, HELD_MS * 1000000L}, NULL);
    struct stat now;
    cr_assert(stat(s.path, &now) == 0 && now.st_ino == held.st_ino,
              "%s was removed while a scan held %s", s.path, BH_IDS_DIR);
    cr_assert(!child_done(), "the release finished while a scan held %s", BH_IDS_DIR);
    close(scan);
    cr_assert_eq(reap_child(), 0);
    cr_assert(stat(s.path, &now) < 0 || now.st_ino != held.st_ino,
              "%s is still there after its only holder released it", s.path);
}

Test(id_slots, a_scan_waits_for_a_release_in_progress, .fini = stop_child)
{
    need_root();
    struct bh_id_slot s;
    struct bh_error err = {0};
    cr_assert_eq(bh_id_slot_acquire(&s, &err), 0, "%s", err.msg);
    int release = hold_dir(LOCK_EX);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        struct bh_id_slot t;
        struct bh_error e = {0};
        if (bh_id_slot_acquire(&t, &e) < 0)
            _exit(1);
        bh_id_slot_release(&t);
        _exit(0);
    }
    nanosleep(&(struct timespec){0, HELD_MS * 1000000L}, NULL);
    cr_assert(!child_done(), "a scan ran while a release held %s", BH_IDS_DIR);
    close(release);
    cr_assert_eq(reap_child(), 0, "the scan found no slot after the release ended");
    bh_id_slot_release(&s);
}

/* A holder stopped with the directory locked delays a scan by the bound,
 * never blocks it: the slot's own flock still decides. */
Test(id_slots, a_stuck_holder_of_the_directory_blocks_no_one, .fini = stop_child, .timeout = 60)
{
    need_root();
    int stuck = hold_dir(LOCK_EX);
    struct bh_id_slot s;
    struct bh_error err = {0};
    cr_assert_eq(bh_id_slot_acquire(&s, &err), 0, "%s", err.msg);
    int other = open(s.path, O_RDWR | O_CLOEXEC);
    cr_assert_geq(other, 0);
    cr_assert(flock(other, LOCK_EX | LOCK_NB) < 0 && errno == EWOULDBLOCK,
              "slot %s was handed out without its lock held", s.path);
    close(other);
    struct stat held, now;
    cr_assert_eq(fstat(s.lock_fd, &held), 0);
    bh_id_slot_release(&s);
    close(stuck);
    cr_assert(stat(s.path, &now) < 0 || now.st_ino != held.st_ino,
              "%s is still there after its only holder released it", s.path);
}
