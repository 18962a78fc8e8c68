/* Errors that carry their reason up to whoever reports them once. */
#ifndef BH_ERROR_H
#define BH_ERROR_H

#include <stdarg.h>

#define BH_ERROR_MSG_MAX 1024

/* code is an errno value (0 when the failure has none). */
struct bh_error {
    int code;
    char msg[BH_ERROR_MSG_MAX];
};

/* Fill err (if not NULL) and return -1, so callers write
 *   return bh_error_set(err, errno, "open `%s`", path); */
int bh_error_set(struct bh_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Same, with strerror(code) appended as ": reason". */
int bh_error_errno(struct bh_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Put context in front of an existing message: "ctx: old message". */
int bh_error_prefix(struct bh_error *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void bh_error_clear(struct bh_error *err);

#endif
