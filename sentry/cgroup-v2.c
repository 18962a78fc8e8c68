/* Owns the cgroup v2 backend: one unified directory, controllers enabled
 * down the tree through cgroup.subtree_control, cpu.max/cpu.weight,
 * cgroup.freeze and cgroup.kill. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cgroup-internal.h"
#include "cleanup.h"

/* Controllers named in a space- (kernel) or '+'-separated (fake tree) list. */
static unsigned ctls_in(char *list)
{
    unsigned m = 0;
    for (char *save = NULL, *t = strtok_r(list, " \n+", &save); t != NULL;
         t = strtok_r(NULL, " \n+", &save))
        m |= cg_ctls_from_list(t);
    return m;
}

/* v1's blkio is v2's io. */
static const char *v2_ctl_name(enum ctl c)
{
    return c == CTL_BLKIO ? "io" : cg_ctl_names[c];
}

/* Enables memory, pids, cpu (and io when asked) from the root down to the leaf's parent. A
 * level offers what its parent has enabled; a write that is refused (say, a
 * delegated root we may not change) is fine when the controller is already
 * on, and an error only when a requested limit needs it. */
static int v2_prepare(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    const struct hier *h = &cg->h[cg->unified_h];
    bool required[CTL_N] = {0};
    required[CTL_MEMORY] =
        l->memory_bytes != 0 || l->memory_swap_bytes != 0 || l->memory_reservation_bytes != 0;
    required[CTL_PIDS] = l->pids != 0;
    required[CTL_CPU] = l->cpu_quota_us != 0 || l->cpu_period_us != 0 || l->cpu_shares != 0;
    required[CTL_BLKIO] = cg_wants_blkio(l);
    static const enum ctl wanted[] = {CTL_MEMORY, CTL_PIDS, CTL_CPU, CTL_BLKIO};

    cleanup_free char *avail_s = NULL;
    if (cg_read(h->mount, "cgroup.controllers", &avail_s, err) < 0)
        return -1;
    unsigned avail = ctls_in(avail_s);

    size_t levels = cg_rel_levels(cg);
    for (size_t k = 0; k < levels; k++) {
        char p[PATH_MAX];
        cg_level_path(cg, h, k, p);
        struct bh_error werr[CTL_N];
        for (size_t i = 0; i < BH_ARRAY_SIZE(wanted); i++) {
            enum ctl c = wanted[i];
            char op[32];
            snprintf(op, sizeof(op), "+%s", v2_ctl_name(c));
            bh_error_clear(&werr[c]);
            if (avail & (1u << c))
                cg_write(cg, p, "cgroup.subtree_control", op, &werr[c]);
        }
        cleanup_free char *on_s = NULL;
        unsigned on = cg_read(p, "cgroup.subtree_control", &on_s, NULL) == 0 ? ctls_in(on_s) : 0;
        for (size_t i = 0; i < BH_ARRAY_SIZE(wanted); i++) {
            enum ctl c = wanted[i];
            if (!required[c] || (on & (1u << c)))
                continue;
            if (avail & (1u << c)) {
                if (err != NULL)
                    *err = werr[c];
                return bh_error_prefix(err, "enable the `%s` controller for the limit",
                                       v2_ctl_name(c));
            }
            return bh_error_set(err, ENOTSUP,
                                "%s limit refused: the `%s` controller is not available at `%s` "
                                "(see its cgroup.controllers); enable it in the parents' "
                                "cgroup.subtree_control or run without the limit",
                                v2_ctl_name(c), v2_ctl_name(c), p);
        }
        avail = on;
    }
    return 0;
}

static const char *const v2_throttle_keys[BH_THROTTLE_N] = {"rbps", "wbps", "riops", "wiops"};

/* blkio on v2, as runc maps it: io.bfq.weight where BFQ is the scheduler
 * (its per-device lines too), else io.weight on its 1..10000 scale;
 * throttles are io.max lines. Needs the io controller enabled (prepare). */
static int v2_apply_io(struct bh_cgroup *cg, const char *d, const struct bh_limits *l,
                       struct bh_error *err)
{
    char line[128];
    if (l->blkio_leaf_weight != 0)
        return bh_error_set(err, ENOTSUP,
                            "blkio leaf weight refused: cgroup v2 has no leaf weights; drop "
                            "leafWeight");
    bool bfq = cg_file_exists(d, "io.bfq.weight");
    if (l->blkio_weight != 0) {
        int rc = bfq ? cg_write_i64(cg, d, "io.bfq.weight", l->blkio_weight, err)
                     : cg_write_i64(cg, d, "io.weight",
                                    1 + ((int64_t)l->blkio_weight - 10) * 9999 / 990, err);
        if (rc < 0)
            return bh_error_prefix(err, "blkio weight");
    }
    for (size_t i = 0; i < l->n_blkio_weight_devices && i < BH_MAX_BLKIO_DEVICES; i++) {
        const struct bh_blkio_device *wd = &l->blkio_weight_devices[i];
        if (wd->leaf_weight != 0)
            return bh_error_set(err, ENOTSUP,
                                "blkio leaf weight refused: cgroup v2 has no leaf weights");
        if (wd->weight == 0)
            continue;
        if (!bfq)
            return bh_error_set(err, ENOTSUP,
                                "per-device blkio weight refused: `%s` has no io.bfq.weight "
                                "(the BFQ scheduler is not in use)",
                                d);
        snprintf(line, sizeof(line), "%" PRId64 ":%" PRId64 " %u", wd->major, wd->minor,
                 wd->weight);
        if (cg_write(cg, d, "io.bfq.weight", line, err) < 0)
            return bh_error_prefix(err, "blkio weight of device");
    }
    for (int t = 0; t < BH_THROTTLE_N; t++)
        for (size_t i = 0; i < l->n_blkio_throttle[t] && i < BH_MAX_BLKIO_DEVICES; i++) {
            const struct bh_blkio_device *td = &l->blkio_throttle[t][i];
            snprintf(line, sizeof(line), "%" PRId64 ":%" PRId64 " %s=%" PRIu64, td->major,
                     td->minor, v2_throttle_keys[t], td->rate);
            if (cg_write(cg, d, "io.max", line, err) < 0)
                return bh_error_prefix(err, "blkio throttle");
        }
    return 0;
}

static int v2_apply(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (l->memory_bytes != 0 || l->memory_swap_bytes != 0) {
        int64_t memsw;
        /* v2 keeps swap apart from memory, so a total means nothing without
         * the memory limit it adds to (runc refuses it alike). */
        if (l->memory_swap_bytes > 0 && l->memory_bytes == 0)
            return bh_error_set(err, EINVAL,
                                "a memory+swap limit needs a memory limit too on cgroup v2 (set "
                                "--memory with --memory-swap)");
        if (cg_memsw_total(l, &memsw, err) < 0)
            return -1;
        /* memory_bytes 0: only swap is lifted; the memory limit stays. */
        int rc = l->memory_bytes > 0   ? cg_write_i64(cg, d, "memory.max", l->memory_bytes, err)
                 : l->memory_bytes < 0 ? cg_write(cg, d, "memory.max", "max", err)
                                       : 0;
        if (rc < 0)
            return bh_error_prefix(err, "memory limit");
        /* v2 counts swap alone. Without the file the kernel has no swap
         * accounting, and only an explicit swap limit is refused. */
        if (cg_file_exists(d, "memory.swap.max") || cg->fake) {
            rc = memsw < 0 ? cg_write(cg, d, "memory.swap.max", "max", err)
                           : cg_write_i64(cg, d, "memory.swap.max", memsw - l->memory_bytes, err);
            if (rc < 0)
                return bh_error_prefix(err, "swap limit");
        } else if (l->memory_swap_bytes > 0 && l->memory_swap_bytes != l->memory_bytes) {
            return bh_error_set(err, ENOTSUP,
                                "memory+swap limit refused: no memory.swap.max in `%s` (swap "
                                "accounting is off); drop the swap limit",
                                d);
        }
    }
    /* The cpuset controller is not enabled down the v2 tree (prepare):
     * refuse rather than run without the asked pinning. */
    if (l->cpuset_cpus[0] != '\0' || l->cpuset_mems[0] != '\0')
        return bh_error_set(err, ENOTSUP,
                            "cpuset limits refused: bulkhead applies cpuset cpus/mems on cgroup "
                            "v1 and hybrid hosts only; drop them on this v2 host");
    if (l->cpu_rt_period_us != 0 || l->cpu_rt_runtime_us != 0)
        return bh_error_set(err, ENOTSUP,
                            "realtime cpu limits refused: cgroup v2 has no cpu.rt_* files (the "
                            "kernel's v2 cpu controller has no realtime budget); drop "
                            "realtimePeriod/realtimeRuntime");
    if (v2_apply_io(cg, d, l, err) < 0)
        return -1;
    if (l->memory_reservation_bytes != 0) {
        int rc = l->memory_reservation_bytes > 0
                     ? cg_write_i64(cg, d, "memory.low", l->memory_reservation_bytes, err)
                     : cg_write(cg, d, "memory.low", "0", err);
        if (rc < 0)
            return bh_error_prefix(err, "memory reservation as memory.low");
    }
    if (l->pids != 0) {
        int rc = l->pids > 0 ? cg_write_i64(cg, d, "pids.max", l->pids, err)
                             : cg_write(cg, d, "pids.max", "max", err);
        if (rc < 0)
            return bh_error_prefix(err, "pids limit");
    }
    if (l->cpu_shares > 0) {
        int64_t s = l->cpu_shares < 2 ? 2 : l->cpu_shares > 262144 ? 262144 : l->cpu_shares;
        /* The conversion runc and crun use: shares 2..262144 onto 1..10000. */
        if (cg_write_i64(cg, d, "cpu.weight", 1 + ((s - 2) * 9999) / 262142, err) < 0)
            return bh_error_prefix(err, "cpu shares as cpu.weight");
    }
    if (l->cpu_quota_us != 0 || l->cpu_period_us != 0) {
        char quota[32] = "max";
        int64_t period = 100000;
        /* Keep what the request leaves out (an update may set only one). */
        cleanup_free char *cur = NULL;
        if (cg_read(d, "cpu.max", &cur, NULL) == 0) {
            char q[32];
            long long p;
            if (sscanf(cur, "%31s %lld", q, &p) == 2) {
                snprintf(quota, sizeof(quota), "%s", q);
                period = p;
            }
        }
        if (l->cpu_quota_us > 0)
            snprintf(quota, sizeof(quota), "%" PRId64, l->cpu_quota_us);
        else if (l->cpu_quota_us < 0)
            snprintf(quota, sizeof(quota), "max");
        if (l->cpu_period_us > 0)
            period = l->cpu_period_us;
        char v[80];
        snprintf(v, sizeof(v), "%s %" PRId64, quota, period);
        if (cg_write(cg, d, "cpu.max", v, err) < 0)
            return bh_error_prefix(err, "cpu quota");
    }
    return 0;
}

static int v2_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (cg_write(cg, d, "cgroup.freeze", frozen ? "1" : "0", err) < 0)
        return -1;
    if (cg->fake)
        return 0;
    int64_t deadline = cg_now_ms() + WAIT_MS;
    int64_t refreeze_at = cg_now_ms() + REFREEZE_MS;
    long wait_us = 0;
    for (;;) {
        uint64_t v = 0;
        if (cg_read_key(d, "cgroup.events", "frozen", &v, err) < 0)
            return -1;
        if ((v != 0) == frozen)
            return 0;
        if (cg_now_ms() > deadline) {
            if (frozen)
                cg_write(cg, d, "cgroup.freeze", "0", NULL);
            return bh_error_set(err, ETIMEDOUT, "cgroup `%s` did not %s within %d ms", d,
                                frozen ? "freeze" : "thaw", WAIT_MS);
        }
        if (frozen && cg_now_ms() > refreeze_at) {
            /* Thawed for one backoff step, then frozen again (REFREEZE_MS). */
            if (cg_write(cg, d, "cgroup.freeze", "0", err) < 0)
                return -1;
            wait_us = 0;
            cg_backoff(&wait_us);
            if (cg_write(cg, d, "cgroup.freeze", "1", err) < 0)
                return -1;
            refreeze_at = cg_now_ms() + REFREEZE_MS;
        }
        cg_backoff(&wait_us);
    }
}

static int v2_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (!cg->fake && cg_file_exists(d, "cgroup.kill")) {
        if (cg_write(cg, d, "cgroup.kill", "1", err) < 0)
            return -1;
        return cg_wait_empty(cg, cg_now_ms() + WAIT_MS, false, err);
    }
    /* Before 5.14: freeze, kill each, thaw. */
    int64_t deadline = cg_now_ms() + WAIT_MS;
    bool frozen = v2_freeze(cg, true, NULL) == 0;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    int rc = cg_list_pids(d, &pids, &n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        kill(pids[i], SIGKILL);
    if (frozen && v2_freeze(cg, false, err) < 0)
        return -1;
    if (rc < 0)
        return -1;
    return cg_wait_empty(cg, deadline, true, err);
}

/* io.stat ("MAJ:MIN rbytes=N wbytes=N rios=N wios=N ...") as runc maps it
 * onto v1's Read/Write entries. */
static void v2_io_stats(const char *d, struct bh_cgroup_stats *st)
{
    cleanup_free char *s = NULL;
    if (cg_read(d, "io.stat", &s, NULL) < 0)
        return;
    static const struct {
        const char *key, *op;
        bool bytes;
    } keys[] = {{"rbytes=", "Read", true},
                {"wbytes=", "Write", true},
                {"rios=", "Read", false},
                {"wios=", "Write", false}};
    for (char *save = NULL, *line = strtok_r(s, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        unsigned maj, min;
        if (sscanf(line, "%u:%u", &maj, &min) != 2)
            continue;
        for (size_t k = 0; k < BH_ARRAY_SIZE(keys); k++) {
            const char *at = strstr(line, keys[k].key);
            size_t *n = keys[k].bytes ? &st->n_io_bytes : &st->n_io_ops;
            struct bh_cgroup_blkio_entry *out = keys[k].bytes ? st->io_bytes : st->io_ops;
            if (at == NULL || *n >= BH_CGROUP_BLKIO_MAX)
                continue;
            struct bh_cgroup_blkio_entry *e = &out[(*n)++];
            e->major = maj;
            e->minor = min;
            snprintf(e->op, sizeof(e->op), "%s", keys[k].op);
            e->value = strtoull(at + strlen(keys[k].key), NULL, 10);
        }
    }
}

static int v2_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err)
{
    const char *d = cg->h[cg->unified_h].dir;
    if (cg_file_exists(d, "memory.current")) {
        if (cg_read_u64(d, "memory.current", &st->memory_usage, err) < 0 ||
            cg_read_u64(d, "memory.max", &st->memory_limit, err) < 0)
            return -1;
        cg_read_u64(d, "memory.peak", &st->memory_max_usage, NULL);
        cg_read_key(d, "memory.events", "oom_kill", &st->oom_kills, NULL);
        cg_read_key(d, "memory.events", "max", &st->memory_failcnt, NULL);
        cg_read_key(d, "memory.stat", "file", &st->memory_cache, NULL);
        st->swap_limit = UINT64_MAX;
        if (cg_file_exists(d, "memory.swap.current")) {
            cg_read_u64(d, "memory.swap.current", &st->swap_usage, NULL);
            cg_read_u64(d, "memory.swap.max", &st->swap_limit, NULL);
        }
    }
    if (cg_file_exists(d, "pids.current") &&
        (cg_read_u64(d, "pids.current", &st->pids_current, err) < 0 ||
         cg_read_u64(d, "pids.max", &st->pids_limit, err) < 0))
        return -1;
    uint64_t usec = 0;
    if (cg_read_key(d, "cpu.stat", "usage_usec", &usec, NULL) == 0)
        st->cpu_usage_ns = usec * 1000;
    if (cg_read_key(d, "cpu.stat", "user_usec", &usec, NULL) == 0)
        st->cpu_user_ns = usec * 1000;
    if (cg_read_key(d, "cpu.stat", "system_usec", &usec, NULL) == 0)
        st->cpu_kernel_ns = usec * 1000;
    cg_read_key(d, "cpu.stat", "nr_periods", &st->cpu_periods, NULL);
    cg_read_key(d, "cpu.stat", "nr_throttled", &st->cpu_throttled_periods, NULL);
    if (cg_read_key(d, "cpu.stat", "throttled_usec", &usec, NULL) == 0)
        st->cpu_throttled_ns = usec * 1000;
    v2_io_stats(d, st);
    return 0;
}
const struct backend cg_v2_backend = {
    .name = "v2",
    .prepare = v2_prepare,
    .apply = v2_apply,
    .freeze = v2_freeze,
    .kill = v2_kill,
    .stats = v2_stats,
    /* v2 has no device files: the rules are a BPF program (cgroup-devices.c). */
    .devices = cg_v2_devices,
};
