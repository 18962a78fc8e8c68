/* fstat of a held fd runs directly (kernel.policy: newfstatat and statx with
 * exactly AT_EMPTY_PATH on a non-negative fd), and the filter cannot see
 * the string: a second thread turns "" into paths that lead out of the
 * sandbox (the host secret's own path, the sentry's /proc/1/root and cwd,
 * ".." far above the root) while the first one calls newfstatat and statx
 * with AT_EMPTY_PATH. Whatever the race makes the kernel walk, it walks in
 * the guest's root and mount namespace with the guest's credentials: the
 * host secret (its device and inode given by the test) must never be the
 * answer. argv: SECRET_PATH DEV INO [SECONDS]. */
#include <fcntl.h>
#include <linux/stat.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "attack.h"

static char buf[4096];
static const char *paths[4];
static atomic_int stop;

static void *flipper(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 4; i++) {
            /* Written in place, so the kernel may even read a torn mix. */
            strcpy(buf, paths[i]);
            buf[0] = '\0';
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    attack_require_sandbox();
    if (argc < 4) {
        attack_line("fstat_path_race", "inconclusive", "usage: SECRET DEV INO [SECONDS]");
        attack_done();
        return 0;
    }
    const char *secret = argv[1];
    dev_t sdev = (dev_t)strtoull(argv[2], NULL, 0);
    ino_t sino = (ino_t)strtoull(argv[3], NULL, 0);
    int seconds = argc > 4 ? atoi(argv[4]) : 2;
    static char p0[1024], p1[1024], p2[1024], p3[1024];
    snprintf(p0, sizeof(p0), "%s", secret);
    snprintf(p1, sizeof(p1), "/proc/1/root%s", secret);
    snprintf(p2, sizeof(p2), "/proc/1/cwd/../../../../../../..%s", secret);
    snprintf(p3, sizeof(p3), "../../../../../../../../../../..%s", secret);
    paths[0] = p0, paths[1] = p1, paths[2] = p2, paths[3] = p3;

    /* The fd the calls name: a directory, so a relative path has a base. */
    int dfd = open("/tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat own;
    if (dfd < 0 || fstat(dfd, &own) < 0) {
        attack_line("fstat_path_race", "inconclusive", "open /tmp: %s", attack_errname(errno));
        attack_done();
        return 0;
    }
    /* Without a race: each path alone, through the direct call. */
    for (int i = 0; i < 4; i++) {
        struct stat st;
        char name[32];
        snprintf(name, sizeof(name), "fstat_path_%d", i);
        long rc = syscall(SYS_newfstatat, dfd, paths[i], &st, AT_EMPTY_PATH);
        if (rc == 0 && st.st_dev == sdev && st.st_ino == sino)
            attack_line(name, "ESCAPED", "%s is the host secret", paths[i]);
        else if (rc == 0)
            attack_line(name, "refused", "%s is something of the sandbox's own", paths[i]);
        else
            attack_result(name, rc, errno);
    }

    pthread_t t;
    pthread_create(&t, NULL, flipper, NULL);
    long calls = 0, own_fd = 0, walked = 0, failed = 0, bad = 0;
    time_t end = time(NULL) + seconds;
    while (time(NULL) < end) {
        struct stat st;
        struct statx stx;
        long rc;
        dev_t dev;
        ino_t ino;
        if (calls++ % 2 == 0) {
            rc = syscall(SYS_newfstatat, dfd, buf, &st, AT_EMPTY_PATH);
            dev = st.st_dev, ino = st.st_ino;
        } else {
            rc = syscall(SYS_statx, dfd, buf, AT_EMPTY_PATH, STATX_BASIC_STATS, &stx);
            dev = makedev(stx.stx_dev_major, stx.stx_dev_minor), ino = stx.stx_ino;
        }
        if (rc != 0)
            failed++;
        else if (dev == sdev && ino == sino)
            bad++;
        else if (dev == own.st_dev && ino == own.st_ino)
            own_fd++;
        else
            walked++;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    if (bad > 0)
        attack_line("fstat_path_race", "ESCAPED", "%ld of %ld calls stat'ed the host secret", bad,
                    calls);
    else if (failed + walked == 0)
        attack_line("fstat_path_race", "inconclusive",
                    "the race never changed the string (%ld calls, all of the fd)", calls);
    else
        attack_line("fstat_path_race", "refused",
                    "%ld calls: %ld of the fd, %ld walked a raced path inside, %ld failed", calls,
                    own_fd, walked, failed);
    attack_done();
    return 0;
}
