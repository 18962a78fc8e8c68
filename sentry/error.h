/* Errors that carry their reason up to whoever reports them once. */
#ifndef BH_ERROR_H
#define BH_ERROR_H

#include <stdarg.h>

#define BH_ERROR_MSG_MAX 1024

/* What failed, where the status a front end returns depends on it. */
enum bh_error_kind {
    BH_ERROR_SETUP = 0, /* a refusal or a failed step: the command never started */
    BH_ERROR_EXEC,      /* the command itself could not be executed; code says why */
    BH_ERROR_LIMIT,     /* the kernel refused a resource value (a cgroup write) */
};

/* Exit statuses of the front ends' own failures, in the meanings the shell,
 * runc, docker run and timeout(1) give them; anything else is the command's. */
#define BH_EXIT_TIMEOUT 124     /* killed after its time limit (bulkhead do --timeout) */
#define BH_EXIT_REFUSED 125     /* refused or failed before the command ran */
#define BH_EXIT_CANNOT_EXEC 126 /* the command was found but could not be executed */
#define BH_EXIT_NOT_FOUND 127   /* the command was not found */
#define BH_EXIT_SIGNAL_BASE 128 /* 128+N: the command was killed by signal N */
#define BH_EXIT_FAILED 255      /* runc's status for an exec that never ran its process */

/* code is an errno value (0 when the failure has none). */
struct bh_error {
    int code;
    enum bh_error_kind kind;
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

/* Says what kind of failure err (already filled) is; returns -1. The code
 * that sees the failure marks it, so no caller reads the kind from the text. */
int bh_error_mark(struct bh_error *err, enum bh_error_kind kind);

/* Copies src (message, code and kind) into dst; returns -1. */
int bh_error_copy(struct bh_error *dst, const struct bh_error *src);

/* The status a front end exits with for err: 127 for a command not found,
 * 126 for one that could not be executed, 125 for everything else. */
int bh_error_exit_code(const struct bh_error *err);

#endif
