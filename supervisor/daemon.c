/* Owns what every part of bulkheadd shares, below box.c, server.c and
 * main.c so that none of them depends on another for it: the configuration
 * (filled in by main.c), the runners' sources, the daemon's log and its
 * wall clock. The log and the audit stream share one lock, so their lines
 * never interleave when both go to stderr. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "bulkheadd.h"

struct bhd_config bhd_cfg;
struct bhd_runners bhd_runners;
pthread_mutex_t bhd_output_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_long bhd_open_connections;

int64_t bhd_unix_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void bhd_log(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&bhd_output_lock);
    fprintf(stderr, "bulkheadd: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    pthread_mutex_unlock(&bhd_output_lock);
    va_end(ap);
}
