/* Owns turning the OCI LinuxSeccomp object (docker's profile) into extra
 * policy text that the sandbox loads as one more filter on top of the tier's
 * own: filters stack, so the guest gets the intersection. This file checks
 * the profile's shape; the translation into the policy grammar follows it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci-internal.h"

static const char *const actions[] = {
    "SCMP_ACT_KILL",  "SCMP_ACT_KILL_PROCESS", "SCMP_ACT_KILL_THREAD",
    "SCMP_ACT_TRAP",  "SCMP_ACT_ERRNO",        "SCMP_ACT_TRACE",
    "SCMP_ACT_ALLOW", "SCMP_ACT_LOG",          "SCMP_ACT_NOTIFY",
};

static int check_action(const char *a, const char *where, struct bh_error *err)
{
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (a != NULL && strcmp(a, actions[i]) == 0)
            return 0;
    return bh_error_set(err, EINVAL, "`%s` `%s` is not a seccomp action", where, a ? a : "(none)");
}

int oci_seccomp_to_policy(json_t *sc, char **text, struct bh_error *err)
{
    *text = NULL;
    if (check_action(json_string_value(json_object_get(sc, "defaultAction")), "defaultAction",
                     err) < 0)
        return -1;
    json_t *lp = json_object_get(sc, "listenerPath");
    if (json_is_string(lp) && json_string_length(lp) > 0)
        return bh_error_set(err, ENOTSUP,
                            "listenerPath (a seccomp agent) is not supported: bulkhead's sentry "
                            "is the only notification listener");
    json_t *calls = json_object_get(sc, "syscalls");
    if (calls != NULL && !json_is_null(calls)) {
        if (!json_is_array(calls))
            return bh_error_set(err, EINVAL, "`syscalls` must be an array");
        size_t i;
        json_t *r;
        json_array_foreach(calls, i, r)
        {
            char where[64];
            snprintf(where, sizeof(where), "syscalls[%zu].action", i);
            if (!json_is_object(r) || !json_is_array(json_object_get(r, "names")))
                return bh_error_set(err, EINVAL, "`syscalls[%zu]` needs an array `names`", i);
            if (check_action(json_string_value(json_object_get(r, "action")), where, err) < 0)
                return -1;
        }
    }
    return 0;
}
