/* Owns reading a whole stream into memory (text.h). */
#include "text.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

char *bh_read_stream(FILE *f, size_t *len)
{
    char *buf = NULL;
    size_t n_buf = 0;
    FILE *m = open_memstream(&buf, &n_buf);
    if (m == NULL)
        return NULL;
    char chunk[8192];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        ok = fwrite(chunk, 1, n, m) == n;
    int e = ferror(f) ? (errno ? errno : EIO) : ENOMEM;
    ok = ok && !ferror(f);
    if (fclose(m) != 0 || !ok) {
        free(buf);
        errno = e;
        return NULL;
    }
    if (len != NULL)
        *len = n_buf;
    return buf;
}
