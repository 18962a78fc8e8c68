/* Attacks on the page cache of a host file the sandbox shares read-only
 * (`bulkhead do`'s /usr): evicting it makes every host process and neighbour
 * that uses the file read it from disk again. On main one `bulkhead do` guest
 * walking /usr/lib with POSIX_FADV_DONTNEED dropped 1.8 GB of the host's page
 * cache. Arguments: the file, which the host side has cached and checks
 * afterwards (a guest cannot see residency itself: mincore reports every page
 * of a file it may not write as resident), and the attempt:
 *   fadvise_dontneed   posix_fadvise(DONTNEED) of the whole file
 *   madvise_pageout    the file mapped privately and faulted in, MADV_PAGEOUT
 *                      (the kernel reclaims file pages only for a caller that
 *                      may write the file, and answers 0 either way: the host
 *                      side's check is the verdict) */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attack.h"

int main(int argc, char **argv)
{
    attack_require_sandbox();
    const char *name = argc > 2 ? argv[2] : "(none)";
    struct stat st;
    int fd = argc > 1 ? open(argv[1], O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 4096) {
        attack_line(name, "inconclusive", "cannot open %s: %s", argc > 1 ? argv[1] : "(none)",
                    attack_errname(errno));
    } else if (strcmp(name, "fadvise_dontneed") == 0) {
        int r = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        /* posix_fadvise returns the error number rather than setting errno */
        attack_result(name, r ? -1 : 0, r);
    } else if (strcmp(name, "madvise_pageout") == 0) {
        size_t len = (size_t)st.st_size & ~(size_t)4095;
        const char *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            attack_line(name, "inconclusive", "mmap: %s", attack_errname(errno));
        } else {
            volatile char sum = 0;
            for (size_t off = 0; off < len; off += 4096)
                sum += m[off];
            (void)sum;
            long r = madvise((void *)m, len, 21 /* MADV_PAGEOUT */);
            attack_line(name, "called", "returned %ld (%s)", r, attack_errname(r < 0 ? errno : 0));
            munmap((void *)m, len);
        }
    } else {
        attack_line(name, "inconclusive", "no such attempt");
    }
    attack_done();
    return 0;
}
