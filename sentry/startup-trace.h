/* Start-up timestamps for profiling a sandbox's creation step by step
 * (sentry/README.md, "Speed"). Off unless the front end's environment has
 * BULKHEAD_STARTUP_TRACE=1; the sentry and its first guest follow the front
 * end's choice (a spec param). Each mark is one line on stderr:
 * "bulkhead-trace PID MICROSECONDS STEP", CLOCK_MONOTONIC, which the
 * sandbox's time namespace leaves unshifted, so the lines of all three
 * processes sort into one timeline. */
#ifndef BH_STARTUP_TRACE_H
#define BH_STARTUP_TRACE_H

#include <stdbool.h>

extern bool bh_startup_trace_on;
/* Where the marks go: fd 2, or the sentry's private copy of it once its
 * own stdio is /dev/null (so the tear-down is timed too). */
extern int bh_startup_trace_fd;

/* Reads BULKHEAD_STARTUP_TRACE (front ends). */
void bh_startup_trace_init(void);
/* One line on fd 2 when tracing; one write(2), no allocation, so it may be
 * called between a raw clone and exec. */
void bh_startup_mark(const char *step);
/* CLOCK_MONOTONIC in microseconds, and a mark for a moment taken earlier
 * (before the process knew whether tracing is on). */
long long bh_startup_now(void);
void bh_startup_mark_at(const char *step, long long us);

#endif
