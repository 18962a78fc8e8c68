/* Reading one field of /proc/PID/status ("Key:<tabs>value"). Header only:
 * the static probe (probe-main.c), which links nothing of the core, and the
 * host side's checks (probe.c) read the same format the same way. */
#ifndef BH_PROC_STATUS_H
#define BH_PROC_STATUS_H

#include <stddef.h>
#include <string.h>

/* Copies the value of key (without leading blanks, cut at out's size) into
 * out and returns out; NULL when status has no such line. */
static inline const char *bh_status_field(const char *status, const char *key, char *out,
                                          size_t size)
{
    size_t klen = strlen(key);
    for (const char *line = status; line != NULL && *line != '\0'; line = strchr(line, '\n')) {
        if (*line == '\n')
            line++;
        if (strncmp(line, key, klen) == 0 && line[klen] == ':') {
            const char *v = line + klen + 1;
            v += strspn(v, " \t");
            size_t n = strcspn(v, "\n");
            if (n >= size)
                n = size - 1;
            memcpy(out, v, n);
            out[n] = '\0';
            return out;
        }
    }
    return NULL;
}

#endif
