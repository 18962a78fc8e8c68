/* The host's pid space (kernel.pid_max): a global pool that no cgroup
 * counts. Every task of every pid namespace also takes a number in the
 * host's namespace; once they are all taken, fork and clone fail with
 * EAGAIN for every process of the host, root's and the neighbours' alike.
 * Each sandbox's pids are capped (512 for `do`, 1024 for an OCI container)
 * but 32768, many hosts' value, is 32 such containers. What bounds the
 * tasks of all sandboxes together is the thread pool (kernel.threads-max,
 * which the kernel sizes so the threads' stacks fit in an eighth of the
 * host's memory, and each stack is charged to its task's memory cgroup).
 * The wall holds when the pid space outlasts that pool; sentry/README.md,
 * "The host's pid space". */
#ifndef BH_PID_SPACE_H
#define BH_PID_SPACE_H

#include <stdint.h>

#include "error.h"

/* The value the runtime writes when it raises kernel.pid_max: the kernel's
 * limit on 64-bit (PID_MAX_LIMIT), what systemd >= 243 sets at boot. */
#define BH_PID_MAX_RAISED 4194304ULL

/* Pids below 300 are not handed out again once the allocator wrapped
 * (the kernel's RESERVED_PIDS), and pid 0 is nobody's. */
#define BH_PID_RESERVED 301ULL

/* The pid_max under which the pid space runs out before the thread pool:
 * threads_max + BH_PID_RESERVED, at most BH_PID_MAX_RAISED. */
uint64_t bh_pid_space_needed(uint64_t threads_max);

/* Reads kernel.pid_max and what the thread pool needs, changing nothing
 * (the tier report's check of a live sandbox). */
int bh_pid_space_state(uint64_t *pid_max, uint64_t *needed, struct bh_error *err);

/* Checks kernel.pid_max against kernel.threads-max and, when it is lower,
 * raises it to BH_PID_MAX_RAISED (never lowers it) and logs the change to
 * the kernel log. Fails closed, with the numbers in err, when the values
 * cannot be read, when the write fails (no CAP_SYS_ADMIN over the pid
 * namespace, or a kernel whose limit is lower), or when
 * BULKHEAD_KEEP_PID_MAX=1 forbids the write. */
int bh_pid_space_ensure(struct bh_error *err);

#endif
