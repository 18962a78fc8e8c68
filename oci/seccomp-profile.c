/* Owns turning the OCI LinuxSeccomp object (docker's profile) into extra
 * policy text that the sandbox loads as one more filter on top of the tier's
 * own: filters stack, so the guest gets the intersection. Each OCI rule
 * becomes one line "NAME? ACTION if argN OP V && ..." of the policy grammar
 * (seccomp-policies/README.md), in the profile's order. A profile that
 * allows by default (a deny list) is parsed as a stacked policy
 * (bh_policy_parse_stacked): the tier's filter still applies beneath it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oci-internal.h"
#include "policy.h"

struct action_map {
    const char *oci;
    const char *policy; /* NULL: errno with errnoRet */
};

static const struct action_map actions[] = {
    {"SCMP_ACT_KILL", "kill"}, {"SCMP_ACT_KILL_PROCESS", "kill"}, {"SCMP_ACT_KILL_THREAD", "kill"},
    {"SCMP_ACT_TRAP", "trap"}, {"SCMP_ACT_ERRNO", NULL},          {"SCMP_ACT_ALLOW", "allow"},
    {"SCMP_ACT_LOG", "log"},
};

static const struct action_map *find_action(const char *a)
{
    for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
        if (a != NULL && strcmp(a, actions[i].oci) == 0)
            return &actions[i];
    return NULL;
}

/* "allow", "errno 1", ... for one OCI action. */
static int action_text(json_t *obj, const char *key, json_t *errno_default, const char *where,
                       char *out, size_t len, struct bh_error *err)
{
    const char *a = json_string_value(json_object_get(obj, key));
    const struct action_map *m = find_action(a);
    if (m == NULL) {
        if (a != NULL && (strcmp(a, "SCMP_ACT_NOTIFY") == 0 || strcmp(a, "SCMP_ACT_TRACE") == 0))
            return bh_error_set(err, ENOTSUP,
                                "`%s` %s is not supported: bulkhead's sentry is the only "
                                "tracer and notification listener",
                                where, a);
        return bh_error_set(err, EINVAL, "`%s` `%s` is not a seccomp action", where,
                            a ? a : "(none)");
    }
    if (m->policy != NULL) {
        snprintf(out, len, "%s", m->policy);
        return 0;
    }
    json_t *e = json_object_get(obj, "errnoRet");
    if (e == NULL || json_is_null(e))
        e = errno_default;
    long long v = 1; /* EPERM, as runc uses when no errnoRet is given */
    if (e != NULL && !json_is_null(e)) {
        if (!json_is_integer(e) || json_integer_value(e) < 1 || json_integer_value(e) > 4095)
            return bh_error_set(err, EINVAL, "`%s`: errnoRet must be 1..4095", where);
        v = json_integer_value(e);
    }
    snprintf(out, len, "errno %lld", v);
    return 0;
}

static const struct {
    const char *oci;
    const char *op;
} ops[] = {
    {"SCMP_CMP_EQ", "=="},        {"SCMP_CMP_NE", "!="}, {"SCMP_CMP_LT", "<"},
    {"SCMP_CMP_LE", "<="},        {"SCMP_CMP_GT", ">"},  {"SCMP_CMP_GE", ">="},
    {"SCMP_CMP_MASKED_EQ", NULL},
};

static int valid_name(const char *n)
{
    if (n == NULL || n[0] == '\0' || strlen(n) > 64)
        return 0;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return 0;
    return 1;
}

int oci_seccomp_to_policy(json_t *sc, char **text, struct bh_error *err)
{
    *text = NULL;
    json_t *errno_default = json_object_get(sc, "defaultErrnoRet");
    char def[64];
    if (action_text(sc, "defaultAction", errno_default, "defaultAction", def, sizeof(def), err) < 0)
        return -1;
    json_t *lp = json_object_get(sc, "listenerPath");
    if (json_is_string(lp) && json_string_length(lp) > 0)
        return bh_error_set(err, ENOTSUP,
                            "listenerPath (a seccomp agent) is not supported: bulkhead's sentry "
                            "is the only notification listener");
    json_t *calls = json_object_get(sc, "syscalls");
    if (calls != NULL && !json_is_null(calls) && !json_is_array(calls))
        return bh_error_set(err, EINVAL, "`syscalls` must be an array");
    char *buf = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&buf, &blen);
    if (f == NULL)
        return bh_error_errno(err, errno, "seccomp profile");
    bool default_allows = strcmp(def, "allow") == 0 || strcmp(def, "log") == 0;
    bool restricts = !default_allows;
    fprintf(f, "# from the container's OCI seccomp profile (loaded as one more filter)\n");
    fprintf(f, "@default %s\n", def);
    size_t i;
    json_t *r;
    int rc = 0;
    json_array_foreach(calls, i, r)
    {
        char where[64];
        snprintf(where, sizeof(where), "syscalls[%zu]", i);
        json_t *names = json_object_get(r, "names");
        if (!json_is_object(r) || !json_is_array(names)) {
            rc = bh_error_set(err, EINVAL, "`%s` needs an array `names`", where);
            break;
        }
        char act[64];
        char awhere[80];
        snprintf(awhere, sizeof(awhere), "%s.action", where);
        if (action_text(r, "action", errno_default, awhere, act, sizeof(act), err) < 0) {
            rc = -1;
            break;
        }
        if (strcmp(act, "allow") != 0 && strcmp(act, "log") != 0)
            restricts = true;
        /* The condition: every arg comparison must hold; but when one
         * argument is compared more than once, each comparison is a rule of
         * its own (either may hold), as runc hands them to libseccomp. */
        char cond[1024] = "";
        int per_index[6] = {0};
        bool any_of = false;
        size_t k0;
        json_t *a0;
        json_array_foreach(json_object_get(r, "args"), k0, a0)
        {
            json_t *idx = json_object_get(a0, "index");
            if (json_is_integer(idx) && json_integer_value(idx) >= 0 &&
                json_integer_value(idx) <= 5 && ++per_index[json_integer_value(idx)] > 1)
                any_of = true;
        }
        json_t *args = json_object_get(r, "args");
        size_t k;
        json_t *a;
        json_array_foreach(args, k, a)
        {
            json_t *idx = json_object_get(a, "index");
            json_t *val = json_object_get(a, "value");
            json_t *two = json_object_get(a, "valueTwo");
            const char *op = json_string_value(json_object_get(a, "op"));
            if (!json_is_integer(idx) || json_integer_value(idx) < 0 ||
                json_integer_value(idx) > 5 || !json_is_integer(val)) {
                rc = bh_error_set(err, EINVAL, "`%s.args[%zu]` needs index 0..5 and a value", where,
                                  k);
                break;
            }
            const char *sym = NULL;
            bool found = false;
            for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++)
                if (op && strcmp(op, ops[o].oci) == 0) {
                    sym = ops[o].op;
                    found = true;
                }
            if (!found) {
                rc = bh_error_set(err, EINVAL, "`%s.args[%zu].op` `%s` is not known", where, k,
                                  op ? op : "(none)");
                break;
            }
            size_t cl = strlen(cond);
            unsigned long long v = (unsigned long long)json_integer_value(val);
            const char *join = cl == 0 ? "" : any_of ? " || " : " && ";
            if (sym != NULL)
                snprintf(cond + cl, sizeof(cond) - cl, "%sarg%lld %s %llu", join,
                         (long long)json_integer_value(idx), sym, v);
            else
                snprintf(cond + cl, sizeof(cond) - cl, "%sarg%lld & %llu == %llu", join,
                         (long long)json_integer_value(idx), v,
                         (unsigned long long)json_integer_value(two));
        }
        if (rc < 0)
            break;
        json_t *n;
        json_array_foreach(names, k, n)
        {
            const char *name = json_string_value(n);
            if (!valid_name(name)) {
                rc = bh_error_set(err, EINVAL, "`%s.names[%zu]` is not a syscall name", where, k);
                break;
            }
            /* `?`: names of other architectures or newer kernels are skipped. */
            fprintf(f, "%s? %s%s%s\n", name, act, cond[0] ? " if " : "", cond);
        }
        if (rc < 0)
            break;
    }
    fclose(f);
    if (rc < 0) {
        free(buf);
        return -1;
    }
    if (!restricts) {
        /* Allows everything: nothing to stack on the tier's filter. */
        free(buf);
        return 0;
    }
    *text = buf;
    return 0;
}
