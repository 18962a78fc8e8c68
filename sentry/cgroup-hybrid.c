/* Owns the hybrid backend: v1 controllers plus a v2 hierarchy without
 * controllers. Limits, freezing and stats are v1's; only kill differs. */

#include "cgroup-internal.h"

/* Hybrid: the controller-less v2 hierarchy still has cgroup.kill, which
 * kills atomically; the v1 path covers kernels before 5.14. */
static int hybrid_kill(struct bh_cgroup *cg, struct bh_error *err)
{
    if (cg->unified_h >= 0 && !cg->fake &&
        cg_file_exists(cg->h[cg->unified_h].dir, "cgroup.kill") &&
        cg_write(cg, cg->h[cg->unified_h].dir, "cgroup.kill", "1", NULL) == 0)
        return cg_wait_empty(cg, cg_now_ms() + WAIT_MS, true, err);
    return cg_v1_kill(cg, err);
}

const struct backend cg_hybrid_backend = {
    .name = "hybrid",
    .prepare = cg_v1_prepare,
    .apply = cg_v1_apply,
    .freeze = cg_v1_freeze,
    .kill = hybrid_kill,
    .stats = cg_v1_stats,
    .devices = cg_v1_devices,
};
