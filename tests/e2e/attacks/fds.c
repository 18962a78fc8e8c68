/* No host fd beyond 0, 1 and 2 may reach the guest: lists /proc/self/fd
 * (minus the fd the listing itself uses) and says what each extra one is. */
#include <dirent.h>
#include <stdlib.h>
#include <unistd.h>

#include "attack.h"

int main(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (d == NULL) {
        attack_line("fd_list", "inconclusive", "opendir: %s", attack_errname(errno));
        attack_done();
        return 0;
    }
    int own = dirfd(d), extra = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        int fd = atoi(de->d_name);
        if (fd <= 2 || fd == own)
            continue;
        char path[64], target[256] = "?";
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        target[n > 0 ? n : 0] = '\0';
        attack_line("leaked_fd", "ESCAPED", "fd %d -> %s", fd, target);
        extra++;
    }
    closedir(d);
    if (extra == 0)
        attack_line("leaked_fd", "refused", "only 0, 1 and 2 are open");
    attack_done();
    return 0;
}
