/* Owns the cgroup v1 backend: one directory per controller hierarchy,
 * cpusets filled from their parents, memory+swap through memsw, freezing
 * through freezer.state, and kill by freeze, SIGKILL each, thaw. */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cgroup-internal.h"
#include "cleanup.h"

/* A new v1 cpuset has empty cpus and mems (attaching then fails with
 * ENOSPC): fill each level from its parent, top down. */
static int v1_fill_cpuset(struct bh_cgroup *cg, struct bh_error *err)
{
    int hi = cg->ctl_h[CTL_CPUSET];
    if (hi < 0)
        return 0;
    const struct hier *h = &cg->h[hi];
    size_t levels = cg_rel_levels(cg);
    for (size_t k = 1; k <= levels; k++) {
        char p[PATH_MAX], parent[PATH_MAX];
        cg_level_path(cg, h, k, p);
        cg_level_path(cg, h, k - 1, parent);
        static const char *const files[] = {"cpuset.cpus", "cpuset.mems"};
        for (size_t f = 0; f < BH_ARRAY_SIZE(files); f++) {
            cleanup_free char *mine = NULL;
            cleanup_free char *theirs = NULL;
            if (!cg->fake || cg_file_exists(p, files[f])) {
                if (cg_read(p, files[f], &mine, err) < 0)
                    return -1;
                if (strspn(mine, " \n") != strlen(mine))
                    continue;
            }
            if (cg_read(parent, files[f], &theirs, err) < 0 ||
                cg_write(cg, p, files[f], theirs, err) < 0)
                return bh_error_prefix(err, "fill cpuset of `%s` from its parent", p);
        }
    }
    return 0;
}

int cg_v1_prepare(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    (void)l;
    return v1_fill_cpuset(cg, err);
}

/* memory.limit_in_bytes <= memory.memsw.limit_in_bytes at every moment:
 * try one order, and the other when the kernel refuses. */
static int v1_write_memory(struct bh_cgroup *cg, const char *dir, int64_t mem, int64_t memsw,
                           bool has_memsw, struct bh_error *err)
{
    if (!has_memsw)
        return cg_write_i64(cg, dir, "memory.limit_in_bytes", mem, err);
    if (cg_write_i64(cg, dir, "memory.limit_in_bytes", mem, NULL) == 0)
        return cg_write_i64(cg, dir, "memory.memsw.limit_in_bytes", memsw, err);
    if (cg_write_i64(cg, dir, "memory.memsw.limit_in_bytes", memsw, err) < 0)
        return -1;
    return cg_write_i64(cg, dir, "memory.limit_in_bytes", mem, err);
}

/* The host's TCP buffer pool (net.ipv4.tcp_mem, pages) is one for every
 * network namespace, and a v1 memory cgroup charges nothing to it unless
 * its kmem.tcp limit is set: one sandbox under a 64 MB limit queued 559 MB
 * on its own loopback, a quarter of the pool, past which every TCP socket of
 * the host stalls (the limit counts every socket's memory: UDP's 794 MB of
 * the host's udp_mem too). So each sandbox may take at most 1/TCP_POOL_SHARE
 * of the pool, and never more than its memory limit (mem, or none when
 * <= 0). */
#define TCP_POOL_SHARE 32

static int v1_tcp_cap(int64_t mem, int64_t *cap, struct bh_error *err)
{
    cleanup_free char *s = NULL;
    if (cg_read("/proc/sys/net/ipv4", "tcp_mem", &s, err) < 0)
        return bh_error_prefix(err, "the host's TCP buffer pool");
    unsigned long long low, pressure, max;
    if (sscanf(s, "%llu %llu %llu", &low, &pressure, &max) != 3 || max == 0)
        return bh_error_set(err, EINVAL, "cannot read the host's TCP buffer pool from `%s`",
                            "/proc/sys/net/ipv4/tcp_mem");
    int64_t share = (int64_t)(max / TCP_POOL_SHARE) * (int64_t)sysconf(_SC_PAGESIZE);
    *cap = mem > 0 && mem < share ? mem : share;
    return 0;
}

static int v1_apply_cpuset(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->cpuset_cpus[0] == '\0' && l->cpuset_mems[0] == '\0')
        return 0;
    if (cg_need_ctl(cg, CTL_CPUSET, "cpuset", err) < 0)
        return -1;
    const char *d = cg_ctl_dir(cg, CTL_CPUSET);
    if (l->cpuset_cpus[0] != '\0' && cg_write(cg, d, "cpuset.cpus", l->cpuset_cpus, err) < 0)
        return bh_error_prefix(err, "cpuset cpus `%s`", l->cpuset_cpus);
    if (l->cpuset_mems[0] != '\0' && cg_write(cg, d, "cpuset.mems", l->cpuset_mems, err) < 0)
        return bh_error_prefix(err, "cpuset mems `%s`", l->cpuset_mems);
    return 0;
}

static int v1_apply_memory(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->memory_bytes != 0 || l->memory_swap_bytes != 0) {
        int64_t memsw;
        if (cg_memsw_total(l, &memsw, err) < 0 || cg_need_ctl(cg, CTL_MEMORY, "memory", err) < 0)
            return -1;
        const struct hier *h = &cg->h[cg->ctl_h[CTL_MEMORY]];
        bool has_memsw = cg_file_exists(h->mount, "memory.memsw.limit_in_bytes");
        int64_t mem = l->memory_bytes > 0 ? l->memory_bytes : -1;
        if (!has_memsw && l->memory_swap_bytes > 0 && l->memory_swap_bytes != l->memory_bytes)
            return bh_error_set(err, ENOTSUP,
                                "memory+swap limit refused: swap accounting is off on this host "
                                "(no memory.memsw.limit_in_bytes); boot with swapaccount=1 or "
                                "drop the swap limit");
        if (l->memory_bytes == 0) {
            /* Only swap changes (runc's `update --memory-swap N` alone): the
             * memory limit stays, and the kernel refuses a total below it. */
            if (has_memsw &&
                cg_write_i64(cg, h->dir, "memory.memsw.limit_in_bytes", memsw, err) < 0)
                return bh_error_prefix(err, "swap limit");
        } else if (v1_write_memory(cg, h->dir, mem, memsw, has_memsw, err) < 0) {
            return bh_error_prefix(err, "memory limit");
        }
        int64_t tcp = 0;
        if (l->memory_bytes != 0 &&
            (v1_tcp_cap(mem, &tcp, err) < 0 ||
             cg_write_i64(cg, h->dir, "memory.kmem.tcp.limit_in_bytes", tcp, err) < 0))
            return bh_error_prefix(err, "cap of the sandbox's TCP buffers");
    }
    if (l->memory_reservation_bytes != 0) {
        if (cg_need_ctl(cg, CTL_MEMORY, "memory reservation", err) < 0)
            return -1;
        if (cg_write_i64(cg, cg_ctl_dir(cg, CTL_MEMORY), "memory.soft_limit_in_bytes",
                         l->memory_reservation_bytes > 0 ? l->memory_reservation_bytes : -1,
                         err) < 0)
            return bh_error_prefix(err, "memory reservation");
    }
    return 0;
}

/* The realtime budget: period first, as runc writes it; when the kernel
 * refuses (the runtime would exceed the new period) the runtime goes first. */
static int v1_apply_rt(struct bh_cgroup *cg, const char *d, const struct bh_limits *l,
                       struct bh_error *err)
{
    if (l->cpu_rt_period_us > 0 &&
        cg_write_i64(cg, d, "cpu.rt_period_us", l->cpu_rt_period_us, NULL) < 0) {
        if (l->cpu_rt_runtime_us == 0 ||
            cg_write_i64(cg, d, "cpu.rt_runtime_us", l->cpu_rt_runtime_us, err) < 0 ||
            cg_write_i64(cg, d, "cpu.rt_period_us", l->cpu_rt_period_us, err) < 0)
            return bh_error_prefix(err, "cpu realtime period");
        return 0;
    }
    if (l->cpu_rt_runtime_us != 0 &&
        cg_write_i64(cg, d, "cpu.rt_runtime_us", l->cpu_rt_runtime_us, err) < 0)
        return bh_error_prefix(err, "cpu realtime runtime (the parents' runtime bounds it: "
                                    "give the parent cgroups a realtime budget first)");
    return 0;
}

static int v1_apply_cpu(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->cpu_shares == 0 && l->cpu_quota_us == 0 && l->cpu_period_us == 0 &&
        l->cpu_rt_period_us == 0 && l->cpu_rt_runtime_us == 0)
        return 0;
    if (cg_need_ctl(cg, CTL_CPU, "cpu", err) < 0)
        return -1;
    const char *d = cg_ctl_dir(cg, CTL_CPU);
    if (l->cpu_shares > 0) {
        if (cg_write_i64(cg, d, "cpu.shares", l->cpu_shares, err) < 0)
            return bh_error_prefix(err, "cpu shares");
        /* The kernel clamps shares silently: say so, as runc does. */
        uint64_t got = 0;
        if (!cg->fake && cg_read_u64(d, "cpu.shares", &got, err) < 0)
            return -1;
        if (!cg->fake && got != (uint64_t)l->cpu_shares) {
            bh_error_set(err, ERANGE, "cpu shares %" PRId64 " refused: the %s allowed is %" PRIu64,
                         l->cpu_shares, (uint64_t)l->cpu_shares > got ? "maximum" : "minimum", got);
            return bh_error_mark(err, BH_ERROR_LIMIT);
        }
    }
    int64_t quota = l->cpu_quota_us > 0 ? l->cpu_quota_us : -1;
    /* The kernel checks quota against period: when the period write is
     * refused and a quota comes too, set the quota first. */
    if (l->cpu_period_us > 0 &&
        cg_write_i64(cg, d, "cpu.cfs_period_us", l->cpu_period_us, err) < 0) {
        if ((err != NULL && err->code != EINVAL) || l->cpu_quota_us == 0)
            return bh_error_prefix(err,
                                   "cpu period %" PRId64 " (the kernel takes 1000 to 1000000 us)",
                                   l->cpu_period_us);
        if (cg_write_i64(cg, d, "cpu.cfs_quota_us", quota, err) < 0 ||
            cg_write_i64(cg, d, "cpu.cfs_period_us", l->cpu_period_us, err) < 0)
            return bh_error_prefix(err, "cpu period %" PRId64, l->cpu_period_us);
    }
    if (l->cpu_quota_us != 0 && cg_write_i64(cg, d, "cpu.cfs_quota_us", quota, err) < 0)
        return bh_error_prefix(err, "cpu quota");
    return v1_apply_rt(cg, d, l, err);
}

static int v1_apply_pids(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->pids == 0)
        return 0;
    if (cg_need_ctl(cg, CTL_PIDS, "pids", err) < 0)
        return -1;
    const char *d = cg_ctl_dir(cg, CTL_PIDS);
    int rc = l->pids > 0 ? cg_write_i64(cg, d, "pids.max", l->pids, err)
                         : cg_write(cg, d, "pids.max", "max", err);
    return rc < 0 ? bh_error_prefix(err, "pids limit") : 0;
}

static const char *const v1_throttle_files[BH_THROTTLE_N] = {
    "blkio.throttle.read_bps_device", "blkio.throttle.write_bps_device",
    "blkio.throttle.read_iops_device", "blkio.throttle.write_iops_device"};

/* blkio as runc writes it: blkio.weight where CFQ's files exist, else
 * BFQ's (blkio.bfq.weight, per device blkio.bfq.weight_device). */
static int v1_apply_blkio(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (!cg_wants_blkio(l))
        return 0;
    if (cg_need_ctl(cg, CTL_BLKIO, "blkio", err) < 0)
        return -1;
    const char *d = cg_ctl_dir(cg, CTL_BLKIO);
    bool cfq = cg_file_exists(d, "blkio.weight");
    const char *wfile = cfq ? "blkio.weight" : "blkio.bfq.weight";
    const char *wdfile = cfq ? "blkio.weight_device" : "blkio.bfq.weight_device";
    if (l->blkio_weight != 0 && cg_write_i64(cg, d, wfile, l->blkio_weight, err) < 0)
        return bh_error_prefix(err, "blkio weight");
    if (l->blkio_leaf_weight != 0 &&
        cg_write_i64(cg, d, "blkio.leaf_weight", l->blkio_leaf_weight, err) < 0)
        return bh_error_prefix(err, "blkio leaf weight");
    char line[96];
    for (size_t i = 0; i < l->n_blkio_weight_devices && i < BH_MAX_BLKIO_DEVICES; i++) {
        const struct bh_blkio_device *wd = &l->blkio_weight_devices[i];
        if (wd->weight != 0) {
            snprintf(line, sizeof(line), "%" PRId64 ":%" PRId64 " %u", wd->major, wd->minor,
                     wd->weight);
            if (cg_write(cg, d, wdfile, line, err) < 0)
                return bh_error_prefix(err, "blkio weight of device %s", line);
        }
        if (wd->leaf_weight != 0) {
            snprintf(line, sizeof(line), "%" PRId64 ":%" PRId64 " %u", wd->major, wd->minor,
                     wd->leaf_weight);
            if (cg_write(cg, d, "blkio.leaf_weight_device", line, err) < 0)
                return bh_error_prefix(err, "blkio leaf weight of device %s", line);
        }
    }
    for (int t = 0; t < BH_THROTTLE_N; t++)
        for (size_t i = 0; i < l->n_blkio_throttle[t] && i < BH_MAX_BLKIO_DEVICES; i++) {
            const struct bh_blkio_device *td = &l->blkio_throttle[t][i];
            snprintf(line, sizeof(line), "%" PRId64 ":%" PRId64 " %" PRIu64, td->major, td->minor,
                     td->rate);
            if (cg_write(cg, d, v1_throttle_files[t], line, err) < 0)
                return bh_error_prefix(err, "blkio throttle %s", line);
        }
    return 0;
}

/* In runc's order (its v1 subsystems: cpuset, memory, cpu, pids, blkio), so
 * a value the kernel checks against another meets the same state. */
int cg_v1_apply(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (v1_apply_cpuset(cg, l, err) < 0 || v1_apply_memory(cg, l, err) < 0 ||
        v1_apply_cpu(cg, l, err) < 0 || v1_apply_pids(cg, l, err) < 0 ||
        v1_apply_blkio(cg, l, err) < 0)
        return -1;
    return 0;
}

int cg_v1_freeze(struct bh_cgroup *cg, bool frozen, struct bh_error *err)
{
    const char *d = cg_ctl_dir(cg, CTL_FREEZER);
    if (d == NULL)
        return bh_error_set(err, ENOTSUP,
                            "freeze refused: the `freezer` cgroup controller is not mounted under "
                            "`%s`",
                            cg_root());
    const char *want = frozen ? "FROZEN" : "THAWED";
    int64_t deadline = cg_now_ms() + WAIT_MS;
    int64_t refreeze_at = cg_now_ms() + REFREEZE_MS;
    long wait_us = 0;
    /* FREEZING can stall while a task is in an uninterruptible sleep: write
     * again until the state reads back, thawing now and then (REFREEZE_MS). */
    for (;;) {
        if (cg_write(cg, d, "freezer.state", want, err) < 0)
            return -1;
        cleanup_free char *s = NULL;
        if (cg_read(d, "freezer.state", &s, err) < 0)
            return -1;
        if (strncmp(s, want, strlen(want)) == 0)
            return 0;
        if (cg_now_ms() > deadline) {
            if (frozen)
                cg_write(cg, d, "freezer.state", "THAWED", NULL);
            return bh_error_set(err, ETIMEDOUT, "cgroup `%s` did not reach %s within %d ms", d,
                                want, WAIT_MS);
        }
        if (frozen && cg_now_ms() > refreeze_at) {
            if (cg_write(cg, d, "freezer.state", "THAWED", err) < 0)
                return -1;
            refreeze_at = cg_now_ms() + REFREEZE_MS;
            wait_us = 0;
        }
        cg_backoff(&wait_us);
    }
}

/* Freeze so nothing forks between listing and killing, SIGKILL each
 * process, thaw so the signals are delivered, then wait for empty. */
int cg_v1_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    int64_t deadline = cg_now_ms() + WAIT_MS;
    bool frozen = cg_ctl_dir(cg, CTL_FREEZER) != NULL && cg_v1_freeze(cg, true, NULL) == 0;
    cleanup_free pid_t *pids = NULL;
    size_t n = 0;
    int rc = cg_list_pids(cg_primary_dir(cg), &pids, &n, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        kill(pids[i], SIGKILL);
    if (frozen && cg_v1_freeze(cg, false, err) < 0)
        return -1;
    if (rc < 0)
        return -1;
    return cg_wait_empty(cg, deadline, true, err);
}

/* "MAJ:MIN Op VALUE" lines (the "Total" line left out); a missing or
 * unreadable file is no entries. */
static void cg_v1_blkio_entries(const char *dir, const char *file,
                                struct bh_cgroup_blkio_entry *out, size_t *n)
{
    cleanup_free char *s = NULL;
    *n = 0;
    if (cg_read(dir, file, &s, NULL) < 0)
        return;
    for (char *save = NULL, *line = strtok_r(s, "\n", &save);
         line != NULL && *n < BH_CGROUP_BLKIO_MAX; line = strtok_r(NULL, "\n", &save)) {
        struct bh_cgroup_blkio_entry e = {0};
        unsigned long long v;
        if (sscanf(line, "%u:%u %7s %llu", &e.major, &e.minor, e.op, &v) != 4)
            continue;
        e.value = v;
        out[(*n)++] = e;
    }
}

int cg_v1_stats(struct bh_cgroup *cg, struct bh_cgroup_stats *st, struct bh_error *err)
{
    const char *d;
    if ((d = cg_ctl_dir(cg, CTL_MEMORY)) != NULL) {
        if (cg_read_u64(d, "memory.usage_in_bytes", &st->memory_usage, err) < 0 ||
            cg_read_u64(d, "memory.limit_in_bytes", &st->memory_limit, err) < 0 ||
            cg_read_u64(d, "memory.max_usage_in_bytes", &st->memory_max_usage, err) < 0)
            return -1;
        cg_read_key(d, "memory.oom_control", "oom_kill", &st->oom_kills, NULL);
        cg_read_u64(d, "memory.failcnt", &st->memory_failcnt, NULL);
        cg_read_key(d, "memory.stat", "cache", &st->memory_cache, NULL);
        st->swap_limit = UINT64_MAX;
        if (cg_file_exists(d, "memory.memsw.usage_in_bytes")) {
            cg_read_u64(d, "memory.memsw.usage_in_bytes", &st->swap_usage, NULL);
            cg_read_u64(d, "memory.memsw.limit_in_bytes", &st->swap_limit, NULL);
        }
    }
    if ((d = cg_ctl_dir(cg, CTL_PIDS)) != NULL &&
        (cg_read_u64(d, "pids.current", &st->pids_current, err) < 0 ||
         cg_read_u64(d, "pids.max", &st->pids_limit, err) < 0))
        return -1;
    if ((d = cg_ctl_dir(cg, CTL_CPUACCT)) != NULL) {
        if (cg_read_u64(d, "cpuacct.usage", &st->cpu_usage_ns, err) < 0)
            return -1;
        /* USER_HZ ticks, converted as runc does. */
        uint64_t user = 0, sys = 0;
        long hz = sysconf(_SC_CLK_TCK);
        if (hz > 0 && cg_read_key(d, "cpuacct.stat", "user", &user, NULL) == 0 &&
            cg_read_key(d, "cpuacct.stat", "system", &sys, NULL) == 0) {
            st->cpu_user_ns = user * 1000000000ULL / (uint64_t)hz;
            st->cpu_kernel_ns = sys * 1000000000ULL / (uint64_t)hz;
        }
    }
    if ((d = cg_ctl_dir(cg, CTL_CPU)) != NULL) {
        cg_read_key(d, "cpu.stat", "nr_periods", &st->cpu_periods, NULL);
        cg_read_key(d, "cpu.stat", "nr_throttled", &st->cpu_throttled_periods, NULL);
        cg_read_key(d, "cpu.stat", "throttled_time", &st->cpu_throttled_ns, NULL);
    }
    if ((d = cg_ctl_dir(cg, CTL_BLKIO)) != NULL) {
        /* CFQ's files where the kernel has them, else the throttle ones
         * (always there), as runc falls back. */
        bool cfq = cg_file_exists(d, "blkio.io_service_bytes_recursive");
        cg_v1_blkio_entries(d,
                            cfq ? "blkio.io_service_bytes_recursive"
                                : "blkio.throttle.io_service_bytes_recursive",
                            st->io_bytes, &st->n_io_bytes);
        cg_v1_blkio_entries(
            d, cfq ? "blkio.io_serviced_recursive" : "blkio.throttle.io_serviced_recursive",
            st->io_ops, &st->n_io_ops);
    }
    return 0;
}
int bh_cgroup_device_line(const struct bh_device_rule *r, char *out, size_t size)
{
    if (r->type == 'a')
        return snprintf(out, size, "a") < (int)size ? 0 : -1;
    if ((r->type != 'c' && r->type != 'b') || r->access[0] == '\0' ||
        strspn(r->access, "rwm") != strlen(r->access) || r->major < -1 || r->minor < -1)
        return -1;
    char maj[16] = "*", min[16] = "*";
    if (r->major >= 0)
        snprintf(maj, sizeof(maj), "%d", (int)r->major);
    if (r->minor >= 0)
        snprintf(min, sizeof(min), "%d", (int)r->minor);
    return snprintf(out, size, "%c %s:%s %s", r->type, maj, min, r->access) < (int)size ? 0 : -1;
}

/* Each rule in order on devices.allow or devices.deny: the kernel keeps a
 * default (all allowed or all denied, set by an `a` rule) and exceptions,
 * which is how the OCI list reads, so writing the rules one by one leaves
 * the same state. First `a` on devices.deny: a new cgroup inherits its
 * parent's default (all allowed), and the rules' default is deny, as
 * runc's and the v2 program's (cgroup-devices.c). */
int cg_v1_devices(struct bh_cgroup *cg, const struct bh_limits *l, struct bh_error *err)
{
    if (l->n_device_rules == 0)
        return 0;
    const char *d = cg_ctl_dir(cg, CTL_DEVICES);
    if (d == NULL)
        return bh_error_set(err, ENOTSUP,
                            "device rules refused: the `devices` cgroup controller is not "
                            "mounted under `%s`, so they could not be enforced",
                            cg_root());
    if (cg_write(cg, d, "devices.deny", "a\n", err) < 0)
        return bh_error_prefix(err, "device cgroup: deny all before the rules");
    for (size_t i = 0; i < l->n_device_rules && i < BH_MAX_DEVICE_RULES; i++) {
        const struct bh_device_rule *r = &l->device_rules[i];
        char line[64];
        if (bh_cgroup_device_line(r, line, sizeof(line) - 1) < 0)
            return bh_error_set(err, EINVAL,
                                "device rule %zu (type `%c`, access `%s`) is malformed", i, r->type,
                                r->access);
        strcat(line, "\n");
        if (cg_write(cg, d, r->allow ? "devices.allow" : "devices.deny", line, err) < 0)
            return bh_error_prefix(err, "device rule %zu", i);
    }
    return 0;
}

const struct backend cg_v1_backend = {
    .name = "v1",
    .prepare = cg_v1_prepare,
    .apply = cg_v1_apply,
    .freeze = cg_v1_freeze,
    .kill = cg_v1_kill,
    .stats = cg_v1_stats,
    .devices = cg_v1_devices,
};
