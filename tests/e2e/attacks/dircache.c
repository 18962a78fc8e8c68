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
 * sandbox. argv: SECRET_PATH SECRET_TEXT TOKEN [SECONDS [ROLE [BASE]]]:
 * ROLE "both" (default: this process calls, a child flips), "work" or
 * "flip" alone (for two processes of an OCI container, each with its own
 * seccomp listener and so its own broker worker), BASE the directory to
 * work in (default /tmp/c). */
#include <fcntl.h>
#include <stdbool.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "attack.h"

static char base[256] = "/tmp/c", dir[300], moved[300], base_moved[300];

static const char *const targets[] = {
    "/", "/proc/1/root", "/proc/1/cwd", "/proc/self/root", "../../../../../../../..", NULL};

/* The flipper: it changes what dir and base are, round after round. */
static void flip(atomic_long *flips, atomic_int *stop)
{
    while (!atomic_load(stop)) {
        for (int i = 0; targets[i] != NULL; i++) {
            if (rename(dir, moved) == 0) {
                if (symlink(targets[i], dir) == 0)
                    unlink(dir);
                rename(moved, dir);
            }
        }
        /* Removed outright, a symlink in its place, then a new directory. */
        if (rename(dir, moved) == 0) {
            if (mkdir(dir, 0755) == 0 && rmdir(dir) == 0 && symlink("/", dir) == 0)
                unlink(dir);
            rename(moved, dir);
        }
        /* Its parent moved away and replaced by a symlink to "/". */
        if (rename(base, base_moved) == 0) {
            if (symlink("/", base) == 0)
                unlink(base);
            rename(base_moved, base);
        }
        /* Its mode: fchmod of a held fd reaches the broker too. */
        int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            fchmod(dfd, 0700);
            fchmod(dfd, 0755);
            close(dfd);
        }
        atomic_fetch_add(flips, 1);
    }
}

/* Polls for path (stat, a brokered call) for up to 5 s. */
static bool appears(const char *path)
{
    struct stat st;
    for (int i = 0; i < 500; i++) {
        if (stat(path, &st) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

static void touch(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
}

/* Two processes in turn, each served by its own broker worker (an OCI
 * container's process and one `exec`'d into it): the worker fills its cache
 * with dir, the flipper renames dir away and makes its name a symlink to
 * x; the worker's next calls by the old name must follow the symlink. Only
 * names_gen tells a worker of another worker's rename. */
static void in_turn_flip(void)
{
    char p[512], x[400], away[400];
    snprintf(x, sizeof(x), "%s/x", base);
    snprintf(away, sizeof(away), "%s/away", base);
    snprintf(p, sizeof(p), "%s/ready", dir);
    if (!appears(p) || mkdir(x, 0755) < 0 || rename(dir, away) < 0 || symlink("x", dir) < 0)
        return;
    snprintf(p, sizeof(p), "%s/go", x);
    touch(p);
    snprintf(p, sizeof(p), "%s/done", x);
    appears(p);
    unlink(dir);
    rename(away, dir);
}

static void in_turn_work(void)
{
    char p[400];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof(p), "%s/fill-%d", dir, i);
        touch(p);
    }
    snprintf(p, sizeof(p), "%s/ready", dir);
    touch(p);
    snprintf(p, sizeof(p), "%s/go", dir);
    bool seen = appears(p);
    snprintf(p, sizeof(p), "%s/after", dir);
    touch(p);
    snprintf(p, sizeof(p), "%s/done", dir);
    touch(p);
    char x_after[400];
    snprintf(x_after, sizeof(x_after), "%s/x/after", base);
    struct stat st;
    if (!seen)
        attack_line("dircache_other_worker", "ESCAPED",
                    "%s/go never appeared: the renamed directory answered for its old name", dir);
    else if (stat(x_after, &st) < 0)
        attack_line("dircache_other_worker", "ESCAPED",
                    "%s went to the renamed directory, not through the symlink", x_after);
    else
        attack_line("dircache_other_worker", "refused",
                    "after another worker's rename the old name followed its symlink");
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
    const char *role = argc > 5 ? argv[5] : "both";
    if (argc > 6)
        snprintf(base, sizeof(base), "%s", argv[6]);
    snprintf(dir, sizeof(dir), "%s/d", base);
    snprintf(moved, sizeof(moved), "%s/moved", base);
    snprintf(base_moved, sizeof(base_moved), "%s-moved", base);
    /* Either role may come first. */
    if ((mkdir(base, 0755) < 0 && errno != EEXIST) || (mkdir(dir, 0755) < 0 && errno != EEXIST)) {
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
    if (strcmp(role, "flip") == 0) {
        in_turn_flip();
        /* Alone: until the time is up, then a line of its own. */
        pid_t timer = fork();
        if (timer == 0) {
            sleep((unsigned)seconds);
            atomic_store(&sh->stop, 1);
            _exit(0);
        }
        flip(&sh->flips, &sh->stop);
        waitpid(timer, NULL, 0);
        printf("flipped %ld times\n", atomic_load(&sh->flips));
        attack_done();
        return 0;
    }
    if (strcmp(role, "work") == 0)
        in_turn_work();
    pid_t child = -1;
    if (strcmp(role, "work") != 0 && (child = fork()) == 0) {
        flip(&sh->flips, &sh->stop);
        _exit(0);
    }
    char via_dir[1024];
    snprintf(via_dir, sizeof(via_dir), "%s/%s", dir, secret[0] == '/' ? secret + 1 : secret);
    long rounds = 0, created = 0, reopened = 0, stated = 0, removed = 0, read_secret = 0, other = 0;
    time_t end = time(NULL) + seconds;
    while (time(NULL) < end) {
        char name[512];
        snprintf(name, sizeof(name), "%s/%s-%ld", dir, token, rounds++);
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
    if (child > 0)
        waitpid(child, NULL, 0);
    /* Working alone, the flips are another process's: count what this one
     * saw change instead (names that could not be made or removed). */
    long flips = child > 0 ? atomic_load(&sh->flips) : (rounds - created) + (created - removed);
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
