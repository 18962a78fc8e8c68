/* The broker keeps each worker's last parent directory open (broker-fs.c,
 * the parent-directory cache), so that the next call there walks one name.
 * A second process races what that directory, and its parent, are while
 * this one creates, opens, stats and removes names in it: the directory is
 * renamed away and its name becomes a symlink to "/", to the sentry's
 * /proc/1/root and /proc/1/cwd, to /proc/self/root, to ".." far above the
 * root; it is removed and a symlink takes its place; its parent is moved
 * and replaced by a symlink to "/". Every call must act where its path
 * names at that moment, inside the sandbox: the host secret (given by the
 * test, with the text it holds) is never read, and the test checks from
 * the host that no file named with the token appeared outside the
 * sandbox. argv: SECRET_PATH SECRET_TEXT TOKEN [SECONDS]. */
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attack.h"

#define BASE "/tmp/c"
#define DIR BASE "/d"

static const char *const targets[] = {
    "/", "/proc/1/root", "/proc/1/cwd", "/proc/self/root", "../../../../../../../..", NULL};

/* The second process: it changes what DIR and BASE are, round after round. */
static void flip(atomic_long *flips, atomic_int *stop)
{
    while (!atomic_load(stop)) {
        for (int i = 0; targets[i] != NULL; i++) {
            if (rename(DIR, BASE "/moved") == 0) {
                if (symlink(targets[i], DIR) == 0)
                    unlink(DIR);
                rename(BASE "/moved", DIR);
            }
        }
        /* Removed outright, a symlink in its place, then a new directory. */
        if (rename(DIR, BASE "/moved") == 0) {
            if (mkdir(DIR, 0755) == 0 && rmdir(DIR) == 0 && symlink("/", DIR) == 0)
                unlink(DIR);
            rename(BASE "/moved", DIR);
        }
        /* Its parent moved away and replaced by a symlink to "/". */
        if (rename(BASE, "/tmp/c-moved") == 0) {
            if (symlink("/", BASE) == 0)
                unlink(BASE);
            rename("/tmp/c-moved", BASE);
        }
        /* Its mode: fchmod of a held fd reaches the broker too. */
        int dfd = open(DIR, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fchmod(dfd, 0700);
            fchmod(dfd, 0755);
            close(dfd);
        }
        atomic_fetch_add(flips, 1);
    }
}

int main(int argc, char **argv)
{
    attack_require_sandbox();
    if (argc < 4) {
        attack_line("dircache_race", "inconclusive", "usage: SECRET TEXT TOKEN [SECONDS]");
        attack_done();
        return 0;
    }
    const char *secret = argv[1], *text = argv[2], *token = argv[3];
    int seconds = argc > 4 ? atoi(argv[4]) : 3;
    if (mkdir(BASE, 0755) < 0 || mkdir(DIR, 0755) < 0) {
        attack_line("dircache_race", "inconclusive", "mkdir: %s", attack_errname(errno));
        attack_done();
        return 0;
    }
    /* Shared with the flipper: its count, and the stop flag. */
    struct shared {
        atomic_long flips;
        atomic_int stop;
    } *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        attack_line("dircache_race", "inconclusive", "mmap: %s", attack_errname(errno));
        attack_done();
        return 0;
    }
    pid_t child = fork();
    if (child == 0) {
        flip(&sh->flips, &sh->stop);
        _exit(0);
    }
    char via_dir[1024];
    snprintf(via_dir, sizeof(via_dir), DIR "/%s", secret[0] == '/' ? secret + 1 : secret);
    long rounds = 0, created = 0, reopened = 0, stated = 0, removed = 0, read_secret = 0, other = 0;
    time_t end = time(NULL) + seconds;
    while (time(NULL) < end) {
        char name[256];
        snprintf(name, sizeof(name), DIR "/%s-%ld", token, rounds++);
        int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (fd >= 0) {
            created++;
            if (write(fd, "x", 1) != 1)
                other++;
            close(fd);
        }
        if ((fd = open(name, O_RDONLY | O_CLOEXEC)) >= 0) {
            reopened++;
            close(fd);
        }
        struct stat st;
        if (stat(name, &st) == 0)
            stated++;
        if (unlink(name) == 0)
            removed++;
        /* The host secret by the directory's name: "/" or "/proc/1/root"
         * in its place must still mean the sandbox's. */
        if ((fd = open(via_dir, O_RDONLY | O_CLOEXEC)) >= 0) {
            char buf[256] = "";
            ssize_t n = read(fd, buf, sizeof(buf) - 1);
            if (n > 0 && strstr(buf, text) != NULL)
                read_secret++;
            close(fd);
        }
    }
    atomic_store(&sh->stop, 1);
    int status;
    waitpid(child, &status, 0);
    long flips = atomic_load(&sh->flips);
    if (read_secret > 0)
        attack_line("dircache_race", "ESCAPED", "the host secret was read %ld times via %s",
                    read_secret, via_dir);
    else if (flips == 0 || created == 0)
        attack_line("dircache_race", "inconclusive", "%ld flips, %ld creates: no race", flips,
                    created);
    else
        attack_line("dircache_race", "refused",
                    "%ld rounds against %ld flips: %ld created, %ld reopened, %ld stat'ed, %ld "
                    "removed inside, the secret never read",
                    rounds, flips, created, reopened, stated, removed);
    attack_done();
    return 0;
}
