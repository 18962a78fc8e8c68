/* Tier names, in the order of the isolation they give. */
#include <errno.h>
#include <string.h>

#include "sandbox-spec.h"

static const char *const tier_names[] = {
    [BH_TIER_NONE] = "none",     [BH_TIER_PROCESS] = "process", [BH_TIER_CONTAINER] = "container",
    [BH_TIER_KERNEL] = "kernel", [BH_TIER_VM] = "vm",
};

const char *bh_tier_name(enum bh_tier tier)
{
    if ((unsigned)tier >= sizeof(tier_names) / sizeof(tier_names[0]))
        return "unknown";
    return tier_names[tier];
}

int bh_tier_parse(const char *name, enum bh_tier *tier, struct bh_error *err)
{
    for (unsigned i = 0; i < sizeof(tier_names) / sizeof(tier_names[0]); i++) {
        if (name != NULL && strcmp(name, tier_names[i]) == 0) {
            *tier = (enum bh_tier)i;
            return 0;
        }
    }
    return bh_error_set(err, EINVAL,
                        "tier `%s` is not known: use none, process, container, kernel or vm",
                        name ? name : "");
}
