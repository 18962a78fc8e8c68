/* Tier verification: runs bulkhead-probe as the guest of a probe sandbox,
 * adds the checks only the host can make (namespace inodes against the
 * host's, the guest's status from outside, the sentry as pid 1, cgroup
 * limits read back), and computes the tier that is *verified*, not claimed.
 * Front ends: `bulkhead tier`, `bulkhead do --tier kernel` (through the
 * per-boot cache), bulkheadd at start, `bulkhead tier --container ID`.
 *
 * Tier rule: kernel when every check required for kernel passes; container
 * when every check required for container passes; process when a seccomp
 * filter is at least in place; none otherwise. A skipped check counts as
 * not passed for the tier that requires it (fail closed); informational
 * checks (required for no tier) never change the result.
 *
 * Test hook, compiled into the test build only (BH_TEST_HOOKS, make test):
 * env BULKHEAD_TEST_BREAK=name[,name...] turns those checks into failures
 * after they ran (never the reverse), so it can only lower the tier; a report
 * so lowered is never written to the cache. */
#ifndef BH_PROBE_H
#define BH_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "error.h"
#include "sandbox-spec.h"

enum bh_check_result {
    BH_CHECK_PASS = 0,
    BH_CHECK_FAIL,
    BH_CHECK_SKIP,
};

struct bh_check {
    char *name; /* stable: see probe-report.h and probe.c */
    enum bh_check_result result;
    enum bh_tier required_for; /* lowest tier that needs it; BH_TIER_NONE: informational */
    char *detail;              /* what was seen, or why it failed */
};

struct bh_tier_report {
    char *subject;        /* "host" for a probe run, the container id live */
    enum bh_tier checked; /* the tier the checks were made for */
    enum bh_tier tier;    /* the verified tier (bh_tier_report_compute) */
    struct bh_check *checks;
    size_t n_checks;
    uint64_t verified_at_unix_ms;
    bool from_cache;
    /* A check could not be recorded (out of memory): the report verifies
     * no tier at all (fail closed). */
    bool incomplete;
};

struct bh_probe_opts {
    enum bh_tier tier; /* BH_TIER_CONTAINER or BH_TIER_KERNEL (default 0: kernel) */
    /* bulkhead-probe; NULL: where bh_path_find finds it (BULKHEAD_LIBEXEC,
     * next to the running binary, PREFIX/lib/bulkhead). */
    const char *probe_path;
    /* Limits of the probe sandbox, read back by the cgroup check; zeros:
     * 256 MiB of memory and 64 pids. */
    struct bh_limits limits;
    int timeout_ms; /* whole run; 0: 20 s */
};

/* Builds a probe sandbox of opts->tier, runs the probe in it, makes the
 * outside checks on the live guest, and computes the verified tier. The
 * sandbox is gone when it returns. -1 only when the verification itself
 * could not run (then nothing is verified: treat as BH_TIER_NONE). */
int bh_probe_run(const struct bh_probe_opts *opts, struct bh_tier_report **out,
                 struct bh_error *err);

/* The same, through a cache of the last verified report per boot, kernel
 * release and runtime binaries (bulkhead, bulkhead-sentry, bulkhead-probe,
 * the policies: device, inode, size and mtime of each) in cache_dir (NULL:
 * /run/bulkhead/tier-cache, root-only). A cache miss runs the probe and
 * stores its report. With BULKHEAD_TEST_BREAK set (test build) the cache is
 * bypassed. */
int bh_probe_run_cached(const struct bh_probe_opts *opts, const char *cache_dir,
                        struct bh_tier_report **out, struct bh_error *err);

/* The gate front ends put before running anything at a tier (`bulkhead do
 * --tier kernel`, bulkheadd at start): verifies through the cache and
 * returns 0 only when `tier` is verified; otherwise -1 with err naming every
 * failed check and what to do. *out (may be NULL) receives the report
 * either way when one was made. */
int bh_probe_require(enum bh_tier tier, struct bh_tier_report **out, struct bh_error *err);

/* What a live sandbox is expected to hold, for the outside checks. */
struct bh_live_target {
    pid_t sentry_pid;               /* host pid of the sandbox's pid 1 */
    enum bh_tier tier;              /* the tier it was created for */
    const struct bh_limits *limits; /* expected cgroup limits or NULL: only read them */
    /* The capabilities configured (CAP_* bits): CapEff, CapPrm, CapBnd and
     * CapAmb of every guest must hold nothing beyond them (0: none at all). */
    uint64_t caps;
};

/* Outside checks of a running sandbox (OCI containers, bulkheadd's own
 * sandboxes): the sentry alive and pid 1, and for every guest process
 * directly under it Seccomp, NoNewPrivs, capabilities, namespaces and
 * cgroup limits. Appends to r (made when *r is NULL) and computes the tier. */
int bh_probe_check_live(const struct bh_live_target *target, struct bh_tier_report **r,
                        struct bh_error *err);

/* ---- reports -------------------------------------------------------------- */

/* NULL when out of memory. */
struct bh_tier_report *bh_tier_report_new(const char *subject, enum bh_tier checked);
/* Adds a check; a second check of the same name merges into the first (a
 * failure wins, details are joined). */
void bh_tier_report_add(struct bh_tier_report *r, const char *name, enum bh_check_result result,
                        enum bh_tier required_for, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Reads the probe's text report (probe-report.h) into r; the checks the
 * probe must make but did not (a truncated report) are added as failures. */
int bh_tier_report_parse_probe(struct bh_tier_report *r, const char *text, struct bh_error *err);
/* Applies BULKHEAD_TEST_BREAK, then the tier rule; sets r->tier. */
void bh_tier_report_compute(struct bh_tier_report *r);
const struct bh_check *bh_tier_report_find(const struct bh_tier_report *r, const char *name);

/* {"subject","checked","tier","verified_at_unix_ms","from_cache","checks":[{"name","result",
 *  "required_for","detail"}]}; malloc'd, NULL on allocation failure. */
char *bh_tier_report_json(const struct bh_tier_report *r);
int bh_tier_report_from_json(const char *text, struct bh_tier_report **out, struct bh_error *err);
/* One line per check, then "tier: NAME". */
void bh_tier_report_print(const struct bh_tier_report *r, FILE *out);
void bh_tier_report_free(struct bh_tier_report *r);

const char *bh_check_result_name(enum bh_check_result result);

#endif
