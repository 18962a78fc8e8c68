/* Owns struct bh_error: building messages with context as failures rise. */
#include "error.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static void error_vset(struct bh_error *err, int code, const char *fmt, va_list ap)
{
    err->code = code;
    err->kind = BH_ERROR_SETUP;
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
}

int bh_error_set(struct bh_error *err, int code, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, fmt, ap);
    va_end(ap);
    return -1;
}

int bh_error_errno(struct bh_error *err, int code, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    error_vset(err, code, fmt, ap);
    va_end(ap);
    size_t len = strlen(err->msg);
    if (code != 0 && len < sizeof(err->msg))
        snprintf(err->msg + len, sizeof(err->msg) - len, ": %s", strerror(code));
    return -1;
}

int bh_error_prefix(struct bh_error *err, const char *fmt, ...)
{
    if (err == NULL)
        return -1;
    char prefix[BH_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    char old[BH_ERROR_MSG_MAX];
    memcpy(old, err->msg, sizeof(old));
    /* Truncation keeps the front: the newest context and the start of the cause. */
    size_t plen = strnlen(prefix, sizeof(err->msg) - 1);
    memcpy(err->msg, prefix, plen);
    size_t at = plen;
    if (at + 2 < sizeof(err->msg)) {
        memcpy(err->msg + at, ": ", 2);
        at += 2;
    }
    size_t olen = strnlen(old, sizeof(old));
    if (olen > sizeof(err->msg) - 1 - at)
        olen = sizeof(err->msg) - 1 - at;
    memcpy(err->msg + at, old, olen);
    err->msg[at + olen] = '\0';
    return -1;
}

void bh_error_clear(struct bh_error *err)
{
    if (err == NULL)
        return;
    err->code = 0;
    err->kind = BH_ERROR_SETUP;
    err->msg[0] = '\0';
}

int bh_error_mark(struct bh_error *err, enum bh_error_kind kind)
{
    if (err != NULL)
        err->kind = kind;
    return -1;
}

int bh_error_copy(struct bh_error *dst, const struct bh_error *src)
{
    if (dst != NULL && dst != src)
        memcpy(dst, src, sizeof(*dst));
    return -1;
}

int bh_error_exit_code(const struct bh_error *err)
{
    if (err->kind != BH_ERROR_EXEC)
        return BH_EXIT_REFUSED;
    return err->code == ENOENT ? BH_EXIT_NOT_FOUND : BH_EXIT_CANNOT_EXEC;
}
