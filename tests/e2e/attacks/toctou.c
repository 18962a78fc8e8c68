/* TOCTOU: a second thread rewrites the path buffer between the broker's read
 * and any later use. The first path is an ordinary file of ours, the second
 * one the broker refuses but the kernel alone would allow (/proc/1/cmdline,
 * the sentry's). Every successful open must be of the first file. */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "attack.h"

#define GOOD "/tmp/bh-toctou-ok"
#define BAD "/proc/1/cmdline"

static char path[64];
static atomic_int stop;

static void *flipper(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        memcpy(path, BAD, sizeof(BAD));
        memcpy(path, GOOD, sizeof(GOOD));
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int seconds = argc > 1 ? atoi(argv[1]) : 2;
    int fd = open(GOOD, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "ok", 2) != 2) {
        attack_line("toctou_open", "inconclusive", "cannot create %s: %s", GOOD,
                    attack_errname(errno));
        attack_done();
        return 0;
    }
    close(fd);

    /* The race only proves something if the second path alone is refused. */
    errno = 0;
    fd = open(BAD, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        close(fd);
        attack_line("toctou_precondition", "ESCAPED", "%s opens without any race", BAD);
    } else {
        attack_result("toctou_precondition", -1, errno);
    }

    memcpy(path, GOOD, sizeof(GOOD));
    pthread_t t;
    pthread_create(&t, NULL, flipper, NULL);
    long opened = 0, refused = 0, bad = 0;
    time_t end = time(NULL) + seconds;
    while (time(NULL) < end) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            refused++;
            continue;
        }
        opened++;
        char buf[64] = "";
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n != 2 || memcmp(buf, "ok", 2) != 0)
            bad++;
    }
    atomic_store(&stop, 1);
    pthread_join(t, NULL);
    unlink(GOOD);
    if (bad > 0)
        attack_line("toctou_open", "ESCAPED", "%ld of %ld opens read the second path", bad, opened);
    else if (opened == 0)
        attack_line("toctou_open", "inconclusive", "no open succeeded (%ld refused)", refused);
    else
        attack_line("toctou_open", "refused", "%ld opens, all of the first path (%ld refused)",
                    opened, refused);
    attack_done();
    return 0;
}
