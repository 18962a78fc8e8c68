/* Dirtying the host's page cache from a container whose rootfs is a
 * directory of the host's disk.
 *
 * The host's writeback thresholds (vm.dirty_ratio, dirty_background_ratio)
 * are global: past them every writer of the host is throttled, and on a
 * cgroup v1 host nothing divides them per cgroup. A guest that writes
 * without fsync leaves its data dirty in the host's page cache; what bounds
 * how much is its memory cgroup, which charges each page cache page and
 * must write back or wait before it can reclaim a dirty one.
 *
 *   dirty MIB PATH [RELEASE]   attempt dirty_pages: writes MIB MiB to PATH,
 *                    1 MiB at a time, never fsync, and keeps the file; then
 *                    waits (up to 10 minutes) until RELEASE exists, so that
 *                    the host measures while the sandbox still holds it
 *
 * Reports "wrote N" (MiB written); the host judges by the file's dirty
 * pages (cachestat), which the guest cannot see from inside. */
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "attack.h"

int main(int argc, char **argv)
{
    attack_require_sandbox();
    long mib = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    const char *path = argc > 2 ? argv[2] : "/dirty.out";
    static char chunk[1 << 20];
    memset(chunk, 'd', sizeof(chunk));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        attack_line("dirty_pages", "inconclusive", "open %s: %s", path, attack_errname(errno));
        attack_done();
        return 0;
    }
    long done = 0;
    int err = 0;
    while (done < mib) {
        size_t off = 0;
        while (off < sizeof(chunk)) {
            ssize_t n = write(fd, chunk + off, sizeof(chunk) - off);
            if (n <= 0) {
                err = n < 0 ? errno : ENOSPC;
                break;
            }
            off += (size_t)n;
        }
        if (err)
            break;
        done++;
    }
    close(fd);
    attack_line("dirty_pages", "wrote", "%ld MiB, stopped by %s", done,
                err ? attack_errname(err) : "nothing");
    if (argc > 3) {
        /* Bounds only a lost host: the host's release ends the wait. */
        struct timespec tick = {0, 20 * 1000 * 1000};
        for (int i = 0; i < 30000 && access(argv[3], F_OK) != 0; i++)
            nanosleep(&tick, NULL);
    }
    attack_done();
    return 0;
}
