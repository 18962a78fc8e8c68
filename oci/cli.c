/* Global flags and error reporting for the bulkhead command line. The --log
 * file gets one JSON object per line, {"level","msg","time"}, because
 * containerd's shim shows the last "error" line to the user. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cleanup.h"

int cli_parse_globals(int argc, char **argv, struct cli_globals *g, struct bh_error *err)
{
    memset(g, 0, sizeof(*g));
    g->root = "/run/bulkhead";
    int i = 1;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0')
            break;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0 || strcmp(a, "--version") == 0 ||
            strcmp(a, "-v") == 0)
            break;
        /* Accept both "--flag value" and "--flag=value", as runc (urfave/cli) does. */
        const char *eq = strchr(a, '=');
        size_t name_len = eq ? (size_t)(eq - a) : strlen(a);
        const char *value = eq ? eq + 1 : NULL;
#define FLAG_IS(s) (name_len == strlen(s) && strncmp(a, s, name_len) == 0)
        if (FLAG_IS("--debug")) {
            g->debug = true;
            continue;
        }
        if (FLAG_IS("--systemd-cgroup")) {
            g->systemd_cgroup = true;
            continue;
        }
        if (FLAG_IS("--root") || FLAG_IS("--log") || FLAG_IS("--log-format") || FLAG_IS("--criu") ||
            FLAG_IS("--rootless") || FLAG_IS("--default-tier") || FLAG_IS("--default-memory") ||
            FLAG_IS("--default-pids") || FLAG_IS("--default-nofile") ||
            FLAG_IS("--default-file-size")) {
            if (value == NULL) {
                if (i + 1 >= argc)
                    return bh_error_set(err, EINVAL, "flag `%s` needs a value", a);
                value = argv[++i];
            }
            if (FLAG_IS("--root")) {
                g->root = value;
            } else if (FLAG_IS("--log")) {
                g->log_path = value;
            } else if (FLAG_IS("--log-format")) {
                if (strcmp(value, "json") == 0)
                    g->log_json = true;
                else if (strcmp(value, "text") == 0)
                    g->log_json = false;
                else
                    return bh_error_set(err, EINVAL,
                                        "--log-format `%s` is not known: use text or json", value);
            } else if (FLAG_IS("--default-tier")) {
                /* For engines that cannot pass annotations (dockerd 20.10): a
                 * runtime registered with runtimeArgs ["--default-tier=container"]
                 * runs its containers at that tier unless their annotation says. */
                if (strcmp(value, "kernel") != 0 && strcmp(value, "container") != 0)
                    return bh_error_set(err, EINVAL,
                                        "--default-tier `%s` is not known: use kernel or container",
                                        value);
                setenv("BULKHEAD_DEFAULT_TIER", value, 1);
            } else if (strncmp(a, "--default-", 10) == 0) {
                /* Floors for containers whose config sets none; checked
                 * where they are applied (oci/config.c). */
                char env[64] = "BULKHEAD_DEFAULT_";
                for (size_t k = 10, e = strlen(env); k < name_len && e < sizeof(env) - 1; k++)
                    env[e++] = a[k] == '-' ? '_' : (char)(a[k] - 'a' + 'A');
                setenv(env, value, 1);
            }
            /* --criu and --rootless are runc flags bulkhead accepts and ignores:
             * there is no checkpointing, and the sandbox is always in a user namespace. */
            continue;
        }
#undef FLAG_IS
        return bh_error_set(err, EINVAL, "unknown global flag `%s`", a);
    }
    return i;
}

static void json_escape(FILE *f, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p == '\n')
            fputs("\\n", f);
        else if (*p == '\t')
            fputs("\\t", f);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
}

/* One line in the --log format to fd (the log file, or stderr for --debug
 * without --log, as runc writes them). */
static void format_line(int fd, const struct cli_globals *g, const char *level, const char *msg)
{
    char stamp[64];
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof(stamp), "%Y-%m-%dT%H:%M:%S", &tm);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (f == NULL)
        return;
    if (g->log_json) {
        fprintf(f, "{\"level\":\"%s\",\"msg\":\"", level);
        json_escape(f, msg);
        fprintf(f, "\",\"time\":\"%s.%09ldZ\"}\n", stamp, ts.tv_nsec);
    } else {
        fprintf(f, "time=\"%sZ\" level=%s msg=\"", stamp, level);
        json_escape(f, msg);
        fprintf(f, "\"\n");
    }
    fclose(f);
    /* One write per line so concurrent writers never interleave inside it. */
    ssize_t w = write(fd, buf, len);
    (void)w;
    free(buf);
}

static void log_line(const struct cli_globals *g, const char *level, const char *msg)
{
    if (g == NULL || g->log_path == NULL)
        return;
    cleanup_close int fd =
        open(g->log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0644);
    if (fd >= 0)
        format_line(fd, g, level, msg);
}

void cli_report_error(const struct cli_globals *g, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "bulkhead: %s\n", msg);
    log_line(g, "error", msg);
}

void cli_log(const struct cli_globals *g, const char *level, const char *fmt, ...)
{
    if (g == NULL)
        return;
    if (strcmp(level, "debug") == 0 && !g->debug)
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    /* As runc: with --log the lines go there only; without, to stderr. */
    if (g->log_path == NULL && g->debug)
        format_line(2, g, level, msg);
    log_line(g, level, msg);
}
