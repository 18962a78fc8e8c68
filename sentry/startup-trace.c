/* Owns the start-up timestamps (startup-trace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "startup-trace.h"

bool bh_startup_trace_on;
int bh_startup_trace_fd = 2;

void bh_startup_trace_init(void)
{
    const char *v = getenv("BULKHEAD_STARTUP_TRACE");
    bh_startup_trace_on = v != NULL && strcmp(v, "1") == 0;
}

long long bh_startup_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void bh_startup_mark(const char *step)
{
    if (bh_startup_trace_on)
        bh_startup_mark_at(step, bh_startup_now());
}

void bh_startup_mark_at(const char *step, long long us)
{
    if (!bh_startup_trace_on)
        return;
    char line[160];
    int n = snprintf(line, sizeof(line), "bulkhead-trace %ld %lld %s\n", (long)syscall(SYS_getpid),
                     us, step);
    if (n > 0)
        (void)!write(bh_startup_trace_fd, line,
                     (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
