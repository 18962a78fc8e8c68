/* Owns the start-up timestamps (startup-trace.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "startup-trace.h"

bool bh_startup_trace_on;

void bh_startup_trace_init(void)
{
    const char *v = getenv("BULKHEAD_STARTUP_TRACE");
    bh_startup_trace_on = v != NULL && strcmp(v, "1") == 0;
}

void bh_startup_mark(const char *step)
{
    if (!bh_startup_trace_on)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[160];
    int n = snprintf(line, sizeof(line), "bulkhead-trace %ld %lld %s\n", (long)syscall(SYS_getpid),
                     (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, step);
    if (n > 0)
        (void)!write(2, line, (size_t)n < sizeof(line) ? (size_t)n : sizeof(line) - 1);
}
