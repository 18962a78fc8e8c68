/* Forcing the host's writeback: sync(2) writes back the dirty data of every
 * filesystem on the host, not the caller's, so a guest in a loop could push
 * the host's and the neighbours' writes to disk at its own pace (and make
 * each of them wait on it). On main one `sync` from a guest of either tier
 * of `bulkhead do` wrote back 8 MiB a host process had left dirty. The
 * verdict is the host's: the test reads that file's dirty pages
 * (cachestat) before and after. Attempts:
 *   sync_all       sync(): must be refused
 *   syncfs_mounts  syncfs() on every mount the guest sees: each is the
 *                  sandbox's own (tmpfs) or an overlay with no upper layer
 *                  on the host's disk, so it must leave the host's data
 *                  dirty (the call itself succeeds) */
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attack.h"

static void syncfs_mounts(void)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (f == NULL) {
        attack_line("syncfs_mounts", "inconclusive", "mountinfo: %s", attack_errname(errno));
        return;
    }
    char line[4096], point[4096];
    int n = 0, ok = 0;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%*s %*s %*s %*s %4095s", point) != 1)
            continue;
        int fd = open(point, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            continue;
        n++;
        ok += syncfs(fd) == 0;
        close(fd);
    }
    fclose(f);
    /* its result is not the verdict: a guest may sync its own filesystems */
    printf("attempt syncfs_mounts called %d of %d mounts synced\n", ok, n);
}

int main(int argc, char **argv)
{
    attack_require_sandbox();
    const char *name = argc > 1 ? argv[1] : "(none)";
    if (strcmp(name, "sync_all") == 0)
        attack_result(name, syscall(SYS_sync), errno);
    else if (strcmp(name, "syncfs_mounts") == 0)
        syncfs_mounts();
    else
        attack_line(name, "inconclusive", "unknown attempt");
    attack_done();
    return 0;
}
