/* Owns struct bh_sandbox_spec's life (init, free, validation) and its
 * serialisation to JSON, which is how the spec travels from the front end to
 * the sentry program (and a process to an exec). The peer is trusted, but
 * every field is still type-checked and bounded: a malformed spec is an
 * error with the field's name, never a crash. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cleanup.h"
#include "sandbox-spec.h"
#include "sentry-params-internal.h"
#include "spec-json-internal.h"

void bh_sandbox_spec_init(struct bh_sandbox_spec *spec)
{
    memset(spec, 0, sizeof(*spec));
    spec->tier = BH_TIER_CONTAINER;
    spec->process.umask = -1;
    spec->stdio[0] = spec->stdio[1] = spec->stdio[2] = -1;
}

static void strv_free(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p != NULL; p++)
        free(*p);
    free(v);
}

void bh_process_free(struct bh_process *p)
{
    strv_free(p->argv);
    strv_free(p->env);
    free(p->cwd);
    free(p->additional_gids);
    free(p->rlimits);
    memset(p, 0, sizeof(*p));
    p->umask = -1;
}

void bh_sandbox_spec_free(struct bh_sandbox_spec *spec)
{
    if (spec == NULL)
        return;
    free(spec->id);
    free(spec->rootfs);
    for (size_t i = 0; i < spec->n_mounts; i++) {
        free(spec->mounts[i].source);
        free(spec->mounts[i].destination);
        free(spec->mounts[i].type);
        free(spec->mounts[i].data);
    }
    free(spec->mounts);
    strv_free(spec->masked_paths);
    strv_free(spec->readonly_paths);
    free(spec->hostname);
    free(spec->workdir);
    free(spec->uid_maps);
    free(spec->gid_maps);
    for (int i = 0; i < BH_NS_COUNT; i++)
        free(spec->ns_paths[i]);
    bh_process_free(&spec->process);
    for (size_t i = 0; i < spec->n_sysctls; i++) {
        free(spec->sysctls[i].key);
        free(spec->sysctls[i].value);
    }
    free(spec->sysctls);
    free(spec->cgroup_path);
    free(spec->seccomp_policy);
    free(spec->extra_policy_text);
    free(spec->console_socket);
    /* stdio fds belong to the caller. */
    int stdio[3] = {spec->stdio[0], spec->stdio[1], spec->stdio[2]};
    memset(spec, 0, sizeof(*spec));
    memcpy(spec->stdio, stdio, sizeof(stdio));
    spec->process.umask = -1;
}

void bh_sentry_params_free(struct bh_sentry_params *p)
{
    free(p->state_dir);
    memset(p, 0, sizeof(*p));
}

/* ---- to JSON ------------------------------------------------------------ */

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *strv_to_json(char **v)
{
    if (v == NULL)
        return json_null();
    json_t *a = json_array();
    for (char **p = v; *p != NULL; p++)
        json_array_append_new(a, json_string(*p));
    return a;
}

static json_t *idmaps_to_json(const struct bh_idmap *m, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_pack("[I,I,I]", (json_int_t)m[i].inside,
                                           (json_int_t)m[i].outside, (json_int_t)m[i].count));
    return a;
}

/* u64 values (rlimits, caps) do not fit json_int_t's sign: send them as strings. */
static json_t *u64_json(uint64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)v);
    return json_string(buf);
}

json_t *bh_process_to_json(const struct bh_process *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "argv", strv_to_json(p->argv));
    json_object_set_new(o, "env", strv_to_json(p->env));
    json_object_set_new(o, "cwd", str_or_null(p->cwd));
    json_object_set_new(o, "uid", json_integer(p->uid));
    json_object_set_new(o, "gid", json_integer(p->gid));
    json_t *g = json_array();
    for (size_t i = 0; i < p->n_additional_gids; i++)
        json_array_append_new(g, json_integer(p->additional_gids[i]));
    json_object_set_new(o, "gids", g);
    json_object_set_new(o, "umask", json_integer(p->umask));
    json_t *r = json_array();
    for (size_t i = 0; i < p->n_rlimits; i++)
        json_array_append_new(r, json_pack("[i,o,o]", p->rlimits[i].resource,
                                           u64_json(p->rlimits[i].soft),
                                           u64_json(p->rlimits[i].hard)));
    json_object_set_new(o, "rlimits", r);
    json_object_set_new(o, "cap_bounding", u64_json(p->cap_bounding));
    json_object_set_new(o, "cap_effective", u64_json(p->cap_effective));
    json_object_set_new(o, "cap_permitted", u64_json(p->cap_permitted));
    json_object_set_new(o, "cap_inheritable", u64_json(p->cap_inheritable));
    json_object_set_new(o, "cap_ambient", u64_json(p->cap_ambient));
    json_object_set_new(o, "terminal", json_boolean(p->terminal));
    json_object_set_new(o, "allow_new_privs", json_boolean(p->allow_new_privs));
    json_object_set_new(o, "rows", json_integer(p->console_rows));
    json_object_set_new(o, "cols", json_integer(p->console_cols));
    if (p->has_oom_score_adj)
        json_object_set_new(o, "oom_score_adj", json_integer(p->oom_score_adj));
    return o;
}

json_t *bh_spec_to_json(const struct bh_sandbox_spec *s)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", str_or_null(s->id));
    json_object_set_new(o, "tier", json_integer(s->tier));
    json_object_set_new(o, "rootfs", str_or_null(s->rootfs));
    json_object_set_new(o, "rootfs_readonly", json_boolean(s->rootfs_readonly));
    json_object_set_new(o, "rootfs_overlay", json_boolean(s->rootfs_overlay));
    json_object_set_new(o, "inherit_cgroup_ns", json_boolean(s->inherit_cgroup_ns));
    json_object_set_new(o, "no_pivot", json_boolean(s->no_pivot));
    json_t *m = json_array();
    for (size_t i = 0; i < s->n_mounts; i++) {
        const struct bh_mount *x = &s->mounts[i];
        json_array_append_new(
            m, json_pack("{s:o,s:o,s:o,s:I,s:I,s:o}", "source", str_or_null(x->source),
                         "destination", str_or_null(x->destination), "type", str_or_null(x->type),
                         "flags", (json_int_t)x->flags, "propagation", (json_int_t)x->propagation,
                         "data", str_or_null(x->data)));
    }
    json_object_set_new(o, "mounts", m);
    json_object_set_new(o, "masked_paths", strv_to_json(s->masked_paths));
    json_object_set_new(o, "readonly_paths", strv_to_json(s->readonly_paths));
    json_object_set_new(o, "rootfs_propagation", json_integer((json_int_t)s->rootfs_propagation));
    json_object_set_new(o, "hostname", str_or_null(s->hostname));
    json_object_set_new(o, "workdir", str_or_null(s->workdir));
    json_object_set_new(o, "uid_maps", idmaps_to_json(s->uid_maps, s->n_uid_maps));
    json_object_set_new(o, "gid_maps", idmaps_to_json(s->gid_maps, s->n_gid_maps));
    json_t *ns = json_array();
    for (int i = 0; i < BH_NS_COUNT; i++)
        json_array_append_new(ns, str_or_null(s->ns_paths[i]));
    json_object_set_new(o, "ns_paths", ns);
    json_object_set_new(o, "process", bh_process_to_json(&s->process));
    const struct bh_limits *l = &s->limits;
    json_object_set_new(o, "limits",
                        json_pack("[I,I,I,I,I,I,I]", (json_int_t)l->memory_bytes,
                                  (json_int_t)l->memory_swap_bytes, (json_int_t)l->pids,
                                  (json_int_t)l->cpu_quota_us, (json_int_t)l->cpu_period_us,
                                  (json_int_t)l->cpu_shares, (json_int_t)l->tmpfs_bytes));
    json_t *sc = json_array();
    for (size_t i = 0; i < s->n_sysctls; i++)
        json_array_append_new(sc, json_pack("[s,s]", s->sysctls[i].key, s->sysctls[i].value));
    json_object_set_new(o, "sysctls", sc);
    json_object_set_new(o, "cgroup_path", str_or_null(s->cgroup_path));
    json_object_set_new(o, "seccomp_policy", str_or_null(s->seccomp_policy));
    json_object_set_new(o, "extra_policy_text", str_or_null(s->extra_policy_text));
    json_object_set_new(o, "extra_policy_listener", json_boolean(s->extra_policy_listener));
    json_object_set_new(o, "console_socket", str_or_null(s->console_socket));
    return o;
}

/* ---- from JSON ---------------------------------------------------------- */

static int get_str(json_t *o, const char *key, char **out, struct bh_error *err)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return bh_error_set(err, EINVAL, "spec field `%s` must be a string", key);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return bh_error_set(err, EINVAL, "spec field `%s` holds a NUL byte", key);
    *out = strdup(json_string_value(v));
    return *out ? 0 : bh_error_errno(err, ENOMEM, "spec field `%s`", key);
}

static int get_int(json_t *o, const char *key, int64_t min, int64_t max, int64_t *out,
                   struct bh_error *err)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL) {
        *out = 0;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return bh_error_set(err, EINVAL, "spec field `%s` must be an integer in [%lld, %lld]", key,
                            (long long)min, (long long)max);
    *out = json_integer_value(v);
    return 0;
}

static int get_bool(json_t *o, const char *key, bool *out, struct bh_error *err)
{
    json_t *v = json_object_get(o, key);
    *out = false;
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return bh_error_set(err, EINVAL, "spec field `%s` must be a boolean", key);
    *out = json_is_true(v);
    return 0;
}

static int u64_from(json_t *v, const char *key, uint64_t *out, struct bh_error *err)
{
    if (v == NULL) {
        *out = 0;
        return 0;
    }
    const char *s = json_string_value(v);
    char *end = NULL;
    errno = 0;
    unsigned long long x = s ? strtoull(s, &end, 10) : 0;
    if (s == NULL || *s == '\0' || *end != '\0' || errno != 0)
        return bh_error_set(err, EINVAL, "spec field `%s` must be a decimal string", key);
    *out = x;
    return 0;
}

static int get_strv(json_t *o, const char *key, char ***out, struct bh_error *err)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > 65536)
        return bh_error_set(err, EINVAL, "spec field `%s` must be an array of strings", key);
    char **a = calloc(json_array_size(v) + 1, sizeof(char *));
    if (a == NULL)
        return bh_error_errno(err, ENOMEM, "spec field `%s`", key);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        if (!json_is_string(e) || strlen(json_string_value(e)) != json_string_length(e) ||
            (a[i] = strdup(json_string_value(e))) == NULL) {
            strv_free(a);
            return bh_error_set(err, EINVAL, "spec field `%s`[%zu] must be a string", key, i);
        }
    }
    *out = a;
    return 0;
}

static int get_idmaps(json_t *o, const char *key, struct bh_idmap **out, size_t *n,
                      struct bh_error *err)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    *n = 0;
    if (v == NULL || json_array_size(v) == 0)
        return 0;
    if (!json_is_array(v) || json_array_size(v) > 340)
        return bh_error_set(err, EINVAL, "spec field `%s` must be an array of at most 340 maps",
                            key);
    struct bh_idmap *m = calloc(json_array_size(v), sizeof(*m));
    if (m == NULL)
        return bh_error_errno(err, ENOMEM, "spec field `%s`", key);
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e)
    {
        json_int_t a, b, c;
        if (json_unpack(e, "[III]", &a, &b, &c) < 0 || a < 0 || b < 0 || c < 1 || a > UINT32_MAX ||
            b > UINT32_MAX || c > UINT32_MAX) {
            free(m);
            return bh_error_set(err, EINVAL, "spec field `%s`[%zu] must be [inside,outside,count]",
                                key, i);
        }
        m[i] = (struct bh_idmap){(uint32_t)a, (uint32_t)b, (uint32_t)c};
    }
    *out = m;
    *n = json_array_size(v);
    return 0;
}

int bh_process_from_json(json_t *o, struct bh_process *p, struct bh_error *err)
{
    memset(p, 0, sizeof(*p));
    p->umask = -1;
    if (!json_is_object(o))
        return bh_error_set(err, EINVAL, "process must be an object");
    int64_t x;
    if (get_strv(o, "argv", &p->argv, err) < 0 || get_strv(o, "env", &p->env, err) < 0 ||
        get_str(o, "cwd", &p->cwd, err) < 0)
        goto fail;
    if (get_int(o, "uid", 0, UINT32_MAX, &x, err) < 0)
        goto fail;
    p->uid = (uint32_t)x;
    if (get_int(o, "gid", 0, UINT32_MAX, &x, err) < 0)
        goto fail;
    p->gid = (uint32_t)x;
    json_t *g = json_object_get(o, "gids");
    if (g != NULL && (!json_is_array(g) || json_array_size(g) > 65536)) {
        bh_error_set(err, EINVAL, "process field `gids` must be an array");
        goto fail;
    }
    if (json_array_size(g) > 0) {
        p->additional_gids = calloc(json_array_size(g), sizeof(uint32_t));
        if (p->additional_gids == NULL)
            goto oom;
        size_t i;
        json_t *e;
        json_array_foreach(g, i, e)
        {
            if (!json_is_integer(e) || json_integer_value(e) < 0 ||
                json_integer_value(e) > UINT32_MAX) {
                bh_error_set(err, EINVAL, "process field `gids`[%zu] is not a gid", i);
                goto fail;
            }
            p->additional_gids[p->n_additional_gids++] = (uint32_t)json_integer_value(e);
        }
    }
    if (get_int(o, "umask", -1, 0777, &x, err) < 0)
        goto fail;
    p->umask = json_object_get(o, "umask") ? (int)x : -1;
    json_t *r = json_object_get(o, "rlimits");
    if (r != NULL && (!json_is_array(r) || json_array_size(r) > 64)) {
        bh_error_set(err, EINVAL, "process field `rlimits` must be an array");
        goto fail;
    }
    if (json_array_size(r) > 0) {
        p->rlimits = calloc(json_array_size(r), sizeof(*p->rlimits));
        if (p->rlimits == NULL)
            goto oom;
        size_t i;
        json_t *e;
        json_array_foreach(r, i, e)
        {
            int res;
            json_t *soft, *hard;
            struct bh_rlimit *rl = &p->rlimits[p->n_rlimits];
            if (json_unpack(e, "[ioo]", &res, &soft, &hard) < 0 || res < 0 || res >= RLIM_NLIMITS ||
                u64_from(soft, "rlimit", &rl->soft, err) < 0 ||
                u64_from(hard, "rlimit", &rl->hard, err) < 0) {
                bh_error_set(err, EINVAL, "process field `rlimits`[%zu] is malformed", i);
                goto fail;
            }
            rl->resource = res;
            p->n_rlimits++;
        }
    }
    if (u64_from(json_object_get(o, "cap_bounding"), "cap_bounding", &p->cap_bounding, err) < 0 ||
        u64_from(json_object_get(o, "cap_effective"), "cap_effective", &p->cap_effective, err) <
            0 ||
        u64_from(json_object_get(o, "cap_permitted"), "cap_permitted", &p->cap_permitted, err) <
            0 ||
        u64_from(json_object_get(o, "cap_inheritable"), "cap_inheritable", &p->cap_inheritable,
                 err) < 0 ||
        u64_from(json_object_get(o, "cap_ambient"), "cap_ambient", &p->cap_ambient, err) < 0)
        goto fail;
    if (get_bool(o, "terminal", &p->terminal, err) < 0 ||
        get_bool(o, "allow_new_privs", &p->allow_new_privs, err) < 0)
        goto fail;
    if (get_int(o, "rows", 0, 65535, &x, err) < 0)
        goto fail;
    p->console_rows = (unsigned short)x;
    if (get_int(o, "cols", 0, 65535, &x, err) < 0)
        goto fail;
    p->console_cols = (unsigned short)x;
    if (json_object_get(o, "oom_score_adj") != NULL) {
        if (get_int(o, "oom_score_adj", -1000, 1000, &x, err) < 0)
            goto fail;
        p->has_oom_score_adj = true;
        p->oom_score_adj = (int)x;
    }
    return 0;
oom:
    bh_error_errno(err, ENOMEM, "process");
fail:
    bh_process_free(p);
    return -1;
}

int bh_spec_from_json(json_t *o, struct bh_sandbox_spec *s, struct bh_error *err)
{
    bh_sandbox_spec_init(s);
    if (!json_is_object(o))
        return bh_error_set(err, EINVAL, "spec must be a JSON object");
    int64_t x;
    if (get_str(o, "id", &s->id, err) < 0 || get_int(o, "tier", 0, BH_TIER_VM, &x, err) < 0)
        goto fail;
    s->tier = (enum bh_tier)x;
    if (get_str(o, "rootfs", &s->rootfs, err) < 0 ||
        get_bool(o, "rootfs_readonly", &s->rootfs_readonly, err) < 0 ||
        get_bool(o, "rootfs_overlay", &s->rootfs_overlay, err) < 0 ||
        get_bool(o, "inherit_cgroup_ns", &s->inherit_cgroup_ns, err) < 0 ||
        get_bool(o, "no_pivot", &s->no_pivot, err) < 0)
        goto fail;
    json_t *m = json_object_get(o, "mounts");
    if (m != NULL && (!json_is_array(m) || json_array_size(m) > 4096)) {
        bh_error_set(err, EINVAL, "spec field `mounts` must be an array");
        goto fail;
    }
    if (json_array_size(m) > 0) {
        s->mounts = calloc(json_array_size(m), sizeof(*s->mounts));
        if (s->mounts == NULL) {
            bh_error_errno(err, ENOMEM, "spec mounts");
            goto fail;
        }
        size_t i;
        json_t *e;
        json_array_foreach(m, i, e)
        {
            struct bh_mount *mt = &s->mounts[s->n_mounts++];
            int64_t fl, pr;
            if (!json_is_object(e) || get_str(e, "source", &mt->source, err) < 0 ||
                get_str(e, "destination", &mt->destination, err) < 0 ||
                get_str(e, "type", &mt->type, err) < 0 || get_str(e, "data", &mt->data, err) < 0 ||
                get_int(e, "flags", 0, INT64_MAX, &fl, err) < 0 ||
                get_int(e, "propagation", 0, INT64_MAX, &pr, err) < 0) {
                bh_error_prefix(err, "mount %zu", i);
                goto fail;
            }
            mt->flags = (unsigned long)fl;
            mt->propagation = (unsigned long)pr;
        }
    }
    if (get_strv(o, "masked_paths", &s->masked_paths, err) < 0 ||
        get_strv(o, "readonly_paths", &s->readonly_paths, err) < 0 ||
        get_int(o, "rootfs_propagation", 0, INT64_MAX, &x, err) < 0)
        goto fail;
    s->rootfs_propagation = (unsigned long)x;
    if (get_str(o, "hostname", &s->hostname, err) < 0 ||
        get_str(o, "workdir", &s->workdir, err) < 0 ||
        get_idmaps(o, "uid_maps", &s->uid_maps, &s->n_uid_maps, err) < 0 ||
        get_idmaps(o, "gid_maps", &s->gid_maps, &s->n_gid_maps, err) < 0)
        goto fail;
    json_t *ns = json_object_get(o, "ns_paths");
    if (ns != NULL && (!json_is_array(ns) || json_array_size(ns) > BH_NS_COUNT)) {
        bh_error_set(err, EINVAL, "spec field `ns_paths` must be an array");
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(ns); i++) {
        json_t *e = json_array_get(ns, i);
        if (json_is_null(e))
            continue;
        if (!json_is_string(e) || (s->ns_paths[i] = strdup(json_string_value(e))) == NULL) {
            bh_error_set(err, EINVAL, "spec field `ns_paths`[%zu] must be a path", i);
            goto fail;
        }
    }
    if (bh_process_from_json(json_object_get(o, "process"), &s->process, err) < 0) {
        bh_error_prefix(err, "spec field `process`");
        goto fail;
    }
    json_int_t l[7];
    if (json_unpack(json_object_get(o, "limits"), "[IIIIIII]", &l[0], &l[1], &l[2], &l[3], &l[4],
                    &l[5], &l[6]) < 0) {
        bh_error_set(err, EINVAL, "spec field `limits` must be 7 integers");
        goto fail;
    }
    /* Device rules stay with the front end, which makes the cgroup. */
    s->limits = (struct bh_limits){.memory_bytes = l[0],
                                   .memory_swap_bytes = l[1],
                                   .pids = l[2],
                                   .cpu_quota_us = l[3],
                                   .cpu_period_us = l[4],
                                   .cpu_shares = l[5],
                                   .tmpfs_bytes = l[6]};
    json_t *sc = json_object_get(o, "sysctls");
    if (sc != NULL && (!json_is_array(sc) || json_array_size(sc) > 1024)) {
        bh_error_set(err, EINVAL, "spec field `sysctls` must be an array");
        goto fail;
    }
    if (json_array_size(sc) > 0) {
        s->sysctls = calloc(json_array_size(sc), sizeof(*s->sysctls));
        if (s->sysctls == NULL) {
            bh_error_errno(err, ENOMEM, "spec sysctls");
            goto fail;
        }
        size_t i;
        json_t *e;
        json_array_foreach(sc, i, e)
        {
            const char *k, *v;
            if (json_unpack(e, "[ss]", &k, &v) < 0) {
                bh_error_set(err, EINVAL, "spec field `sysctls`[%zu] must be [key,value]", i);
                goto fail;
            }
            s->sysctls[s->n_sysctls].key = strdup(k);
            s->sysctls[s->n_sysctls].value = strdup(v);
            s->n_sysctls++;
            if (!s->sysctls[i].key || !s->sysctls[i].value) {
                bh_error_errno(err, ENOMEM, "spec sysctls");
                goto fail;
            }
        }
    }
    if (get_str(o, "cgroup_path", &s->cgroup_path, err) < 0 ||
        get_str(o, "seccomp_policy", &s->seccomp_policy, err) < 0 ||
        get_str(o, "extra_policy_text", &s->extra_policy_text, err) < 0 ||
        get_bool(o, "extra_policy_listener", &s->extra_policy_listener, err) < 0 ||
        get_str(o, "console_socket", &s->console_socket, err) < 0)
        goto fail;
    return bh_spec_validate(s, err) < 0 ? (bh_sandbox_spec_free(s), -1) : 0;
fail:
    bh_sandbox_spec_free(s);
    return -1;
}

int bh_spec_validate(const struct bh_sandbox_spec *s, struct bh_error *err)
{
    if (s->tier != BH_TIER_CONTAINER && s->tier != BH_TIER_KERNEL)
        return bh_error_set(err, EINVAL,
                            "tier `%s` cannot be built by the sandbox core: use container or "
                            "kernel",
                            bh_tier_name(s->tier));
    if (s->inherit_cgroup_ns && s->tier >= BH_TIER_KERNEL)
        return bh_error_set(err, EPERM,
                            "sharing the creator's cgroup namespace is refused at the kernel "
                            "tier: a kernel-tier sandbox always has its own, so its guests never "
                            "see host cgroup paths; use the container tier");
    if (s->no_pivot && s->tier >= BH_TIER_KERNEL)
        return bh_error_set(err, EPERM,
                            "--no-pivot is refused at the kernel tier: pivot_root takes the "
                            "host's tree out of the sandbox's mount namespace, and the kernel "
                            "tier keeps it that way; use the container tier");
    if (s->process.argv == NULL || s->process.argv[0] == NULL || s->process.argv[0][0] == '\0')
        return bh_error_set(err, EINVAL, "no command to run: the process needs argv[0]");
    if (s->process.cwd != NULL && s->process.cwd[0] != '/')
        return bh_error_set(err, EINVAL, "working directory `%s` must be absolute", s->process.cwd);
    if (s->workdir != NULL && s->workdir[0] != '/')
        return bh_error_set(err, EINVAL, "workdir `%s` must be absolute", s->workdir);
    if (s->rootfs != NULL && s->rootfs[0] != '/')
        return bh_error_set(err, EINVAL, "rootfs `%s` must be an absolute path", s->rootfs);
    if (s->id != NULL && (s->id[0] == '\0' || strchr(s->id, '/') != NULL ||
                          strcmp(s->id, ".") == 0 || strcmp(s->id, "..") == 0))
        return bh_error_set(err, EINVAL, "sandbox id `%s` must be a non-empty name without `/`",
                            s->id);
    for (size_t i = 0; i < s->n_sysctls; i++)
        if (strchr(s->sysctls[i].key, '/') != NULL || strstr(s->sysctls[i].key, "..") != NULL)
            return bh_error_set(err, EINVAL, "sysctl `%s` is not a sysctl name", s->sysctls[i].key);
    return 0;
}
