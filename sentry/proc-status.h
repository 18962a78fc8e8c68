/* Reading /proc/PID/status: the file itself (bh_status_open, bh_status_read:
 * the broker's per-thread credentials and the sentry's socket caps read a
 * guest thread's alike) and one field of it ("Key:<tabs>value"). Header
 * only: the static probe (probe-main.c), which links nothing of the core,
 * and the host side's checks (probe.c) read the same format the same way. */
#ifndef BH_PROC_STATUS_H
#define BH_PROC_STATUS_H

#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* Opens tid's status file under proc_fd, a directory fd of a procfs
 * (AT_FDCWD: the one mounted at /proc); the fd, or -1 with errno. */
static inline int bh_status_open(int proc_fd, pid_t tid)
{
    char path[48];
    snprintf(path, sizeof(path), proc_fd == AT_FDCWD ? "/proc/%d/status" : "%d/status", (int)tid);
    return openat(proc_fd, path, O_RDONLY | O_CLOEXEC);
}

/* Reads the whole status file fd (cut at size - 1 bytes) into buf,
 * NUL-terminated, from offset 0, so that an fd kept open can be read again;
 * its length, or -1 (also once the task is gone: the read fails then, even
 * when its tid has been reused since). */
static inline ssize_t bh_status_read(int fd, char *buf, size_t size)
{
    ssize_t n = pread(fd, buf, size - 1, 0);
    if (n <= 0)
        return -1;
    buf[n] = '\0';
    return n;
}

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
