/* Scope-bound resources: a function with five exits still frees once. */
#ifndef BH_CLEANUP_H
#define BH_CLEANUP_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static inline void bh_freep(void *p)
{
    free(*(void **)p);
}

static inline void bh_closep(int *fd)
{
    if (*fd >= 0) {
        int saved = errno;
        close(*fd);
        errno = saved;
    }
}

static inline void bh_fclosep(FILE **f)
{
    if (*f != NULL)
        fclose(*f);
}

#define cleanup_free __attribute__((cleanup(bh_freep)))
#define cleanup_close __attribute__((cleanup(bh_closep)))
#define cleanup_fclose __attribute__((cleanup(bh_fclosep)))

/* Ownership moves out of the scope: the cleanup sees NULL / -1. */
#define steal_pointer(pp)                                                                          \
    ({                                                                                             \
        __typeof__(*(pp)) stolen_ = *(pp);                                                         \
        *(pp) = NULL;                                                                              \
        stolen_;                                                                                   \
    })

static inline int steal_fd(int *fd)
{
    int stolen = *fd;
    *fd = -1;
    return stolen;
}

#define BH_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#endif
