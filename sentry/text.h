/* Reading a whole stream into memory: what the front ends send on as text
 * (cell code, handed-in files, the session runners' sources). */
#ifndef BH_TEXT_H
#define BH_TEXT_H

#include <stdio.h>

/* All of f, NUL-terminated (malloc'd; *len without the NUL, when len is not
 * NULL), or NULL with errno set when it could not be read or held. */
char *bh_read_stream(FILE *f, size_t *len);

#endif
