#include "alloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *bhd_alloc_checked(void *p, size_t bytes)
{
    if (p != NULL)
        return p;
    fprintf(stderr,
            "bulkheadd: out of memory (%zu bytes) while building a reply or a session record: "
            "the daemon ends so that no caller gets a partial answer; its sessions stay with "
            "their keepers for the next daemon to adopt\n",
            bytes);
    abort();
}

void *bhd_xcalloc(size_t n, size_t size)
{
    size_t bytes = size != 0 && n > SIZE_MAX / size ? SIZE_MAX : n * size;
    return bhd_alloc_checked(calloc(n, size), bytes);
}

char *bhd_xstrdup(const char *s)
{
    return bhd_alloc_checked(strdup(s), strlen(s) + 1);
}
