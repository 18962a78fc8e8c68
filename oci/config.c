/* Owns reading an OCI bundle's config.json into a struct bh_sandbox_spec:
 * every field bulkhead uses is type-checked and validated here, with errors
 * that name the field, so nothing malformed reaches the sandbox core.
 * Unknown properties are ignored, as the runtime spec requires. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/capability.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cleanup.h"
#include "cgroup.h"
#include "kernel-compat.h"
#include "oci-internal.h"
#include "policy.h"

/* ---- small typed getters ------------------------------------------------ */

/* Returns the member or NULL; a member present with JSON null counts as absent. */
static json_t *member(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static int want_object(json_t *v, const char *where, struct bh_error *err)
{
    if (!json_is_object(v))
        return bh_error_set(err, EINVAL, "config.json: `%s` must be an object", where);
    return 0;
}

static int get_string(json_t *obj, const char *key, const char *where, bool required,
                      const char **out, struct bh_error *err)
{
    json_t *v = member(obj, key);
    *out = NULL;
    if (v == NULL) {
        if (required)
            return bh_error_set(err, EINVAL, "config.json: `%s.%s` is required", where, key);
        return 0;
    }
    if (!json_is_string(v))
        return bh_error_set(err, EINVAL, "config.json: `%s.%s` must be a string", where, key);
    *out = json_string_value(v);
    if (strlen(*out) != json_string_length(v))
        return bh_error_set(err, EINVAL, "config.json: `%s.%s` contains a NUL byte", where, key);
    return 0;
}

static int get_bool(json_t *obj, const char *key, const char *where, bool *out,
                    struct bh_error *err)
{
    json_t *v = member(obj, key);
    if (v == NULL)
        return 0;
    if (!json_is_boolean(v))
        return bh_error_set(err, EINVAL, "config.json: `%s.%s` must be true or false", where, key);
    *out = json_is_true(v);
    return 0;
}

/* Integer in [min, max]; *present tells whether it was given. */
static int get_int(json_t *obj, const char *key, const char *where, long long min, long long max,
                   long long *out, bool *present, struct bh_error *err)
{
    json_t *v = member(obj, key);
    if (present)
        *present = false;
    if (v == NULL)
        return 0;
    if (!json_is_integer(v))
        return bh_error_set(err, EINVAL, "config.json: `%s.%s` must be an integer", where, key);
    long long x = json_integer_value(v);
    if (x < min || x > max)
        return bh_error_set(err, ERANGE, "config.json: `%s.%s` is %lld, outside %lld..%lld", where,
                            key, x, min, max);
    *out = x;
    if (present)
        *present = true;
    return 0;
}

/* Unsigned 64-bit value (rlimits use the full range). */
static int get_u64(json_t *obj, const char *key, const char *where, bool required, uint64_t *out,
                   struct bh_error *err)
{
    json_t *v = member(obj, key);
    if (v == NULL) {
        if (required)
            return bh_error_set(err, EINVAL, "config.json: `%s.%s` is required", where, key);
        return 0;
    }
    if (json_is_integer(v) && json_integer_value(v) >= 0) {
        *out = (uint64_t)json_integer_value(v);
        return 0;
    }
    /* jansson stores integers as long long: 2^64-1 (RLIM_INFINITY) arrives as a real. */
    if (json_is_real(v) && json_real_value(v) >= 1.8e19) {
        *out = UINT64_MAX;
        return 0;
    }
    return bh_error_set(err, EINVAL, "config.json: `%s.%s` must be a non-negative integer", where,
                        key);
}

/* A NULL-terminated malloc'd copy of an array of strings. */
static int get_string_array(json_t *obj, const char *key, const char *where, bool required,
                            char ***out, size_t *n_out, struct bh_error *err)
{
    json_t *v = member(obj, key);
    *out = NULL;
    if (n_out)
        *n_out = 0;
    if (v == NULL) {
        if (required)
            return bh_error_set(err, EINVAL, "config.json: `%s.%s` is required", where, key);
        return 0;
    }
    if (!json_is_array(v))
        return bh_error_set(err, EINVAL, "config.json: `%s.%s` must be an array of strings", where,
                            key);
    size_t n = json_array_size(v);
    char **arr = calloc(n + 1, sizeof(char *));
    if (arr == NULL)
        return bh_error_errno(err, ENOMEM, "config.json: `%s.%s`", where, key);
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(v, i);
        if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
            for (size_t j = 0; j < i; j++)
                free(arr[j]);
            free(arr);
            return bh_error_set(err, EINVAL, "config.json: `%s.%s[%zu]` must be a string", where,
                                key, i);
        }
        arr[i] = strdup(json_string_value(s));
    }
    *out = arr;
    if (n_out)
        *n_out = n;
    return 0;
}

static void strv_free(char **v)
{
    if (v == NULL)
        return;
    for (char **p = v; *p; p++)
        free(*p);
    free(v);
}

static int add_warning(struct oci_config *cfg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int add_warning(struct oci_config *cfg, const char *fmt, ...)
{
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (r < 0)
        return 0;
    char **w = realloc(cfg->warnings, (cfg->n_warnings + 1) * sizeof(char *));
    if (w == NULL) {
        free(msg);
        return 0;
    }
    cfg->warnings = w;
    cfg->warnings[cfg->n_warnings++] = msg;
    return 0;
}

/* ---- ociVersion --------------------------------------------------------- */

int oci_version_check(const char *v, struct bh_error *err)
{
    unsigned major, minor, patch;
    int used = 0;
    if (v == NULL || sscanf(v, "%u.%u.%u%n", &major, &minor, &patch, &used) != 3 ||
        (v[used] != '\0' && v[used] != '-' && v[used] != '+'))
        return bh_error_set(err, EINVAL,
                            "config.json: `ociVersion` `%s` is not a version (MAJOR.MINOR.PATCH)",
                            v ? v : "");
    bool ok = major == 1 && (minor <= 2 || (minor == 3 && patch == 0));
    if (!ok)
        return bh_error_set(err, ENOTSUP,
                            "config.json: `ociVersion` %s is not supported: bulkhead accepts "
                            "1.0.x to 1.3.0",
                            v);
    return 0;
}

/* ---- paths -------------------------------------------------------------- */

static int check_abs_clean(const char *path, const char *where, struct bh_error *err)
{
    if (path[0] != '/')
        return bh_error_set(err, EINVAL, "config.json: `%s` `%s` must be an absolute path", where,
                            path);
    for (const char *p = path; *p;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return bh_error_set(err, EINVAL,
                                "config.json: `%s` `%s` must not contain `..` components", where,
                                path);
        p += len;
        while (*p == '/')
            p++;
    }
    return 0;
}

/* A path relative to the bundle, resolved and checked to stay inside it. */
static int resolve_in_bundle(const char *bundle, const char *path, const char *where, char **out,
                             struct bh_error *err)
{
    cleanup_free char *joined = NULL;
    if (path[0] == '\0')
        return bh_error_set(err, EINVAL, "config.json: `%s` is empty", where);
    if (path[0] == '/') {
        joined = strdup(path);
    } else if (asprintf(&joined, "%s/%s", bundle, path) < 0) {
        joined = NULL;
    }
    if (joined == NULL)
        return bh_error_errno(err, ENOMEM, "config.json: `%s`", where);
    char *real = realpath(joined, NULL);
    if (real == NULL)
        return bh_error_errno(err, errno, "config.json: `%s` `%s` cannot be resolved", where, path);
    if (path[0] != '/') {
        size_t bl = strlen(bundle);
        bool inside = strncmp(real, bundle, bl) == 0 && (real[bl] == '/' || real[bl] == '\0') &&
                      strcmp(bundle, "/") != 0;
        if (strcmp(bundle, "/") == 0)
            inside = true;
        if (!inside) {
            bh_error_set(err, EINVAL,
                         "config.json: `%s` `%s` escapes the bundle `%s` (it resolves to `%s`); "
                         "use a path inside the bundle or an absolute path",
                         where, path, bundle, real);
            free(real);
            return -1;
        }
    }
    *out = real;
    return 0;
}

/* ---- mounts ------------------------------------------------------------- */

struct mount_opt {
    const char *name;
    bool clear;
    unsigned long flag;
};

static const struct mount_opt mount_opts[] = {
    {"ro", false, MS_RDONLY},
    {"rw", true, MS_RDONLY},
    {"nosuid", false, MS_NOSUID},
    {"suid", true, MS_NOSUID},
    {"nodev", false, MS_NODEV},
    {"dev", true, MS_NODEV},
    {"noexec", false, MS_NOEXEC},
    {"exec", true, MS_NOEXEC},
    {"sync", false, MS_SYNCHRONOUS},
    {"async", true, MS_SYNCHRONOUS},
    {"dirsync", false, MS_DIRSYNC},
    {"mand", false, MS_MANDLOCK},
    {"nomand", true, MS_MANDLOCK},
    {"atime", true, MS_NOATIME},
    {"noatime", false, MS_NOATIME},
    {"diratime", true, MS_NODIRATIME},
    {"nodiratime", false, MS_NODIRATIME},
    {"relatime", false, MS_RELATIME},
    {"norelatime", true, MS_RELATIME},
    {"strictatime", false, MS_STRICTATIME},
    {"nostrictatime", true, MS_STRICTATIME},
    {"nosymfollow", false, MS_NOSYMFOLLOW},
    {"symfollow", true, MS_NOSYMFOLLOW},
    {"bind", false, MS_BIND},
    {"rbind", false, MS_BIND | MS_REC},
};

struct prop_opt {
    const char *name;
    unsigned long flags;
};

static const struct prop_opt prop_opts[] = {
    {"private", MS_PRIVATE},       {"rprivate", MS_PRIVATE | MS_REC},
    {"shared", MS_SHARED},         {"rshared", MS_SHARED | MS_REC},
    {"slave", MS_SLAVE},           {"rslave", MS_SLAVE | MS_REC},
    {"unbindable", MS_UNBINDABLE}, {"runbindable", MS_UNBINDABLE | MS_REC},
};

/* The recursive forms (mount_setattr(AT_RECURSIVE), as runc 1.1 has them):
 * "rro" makes an rbind read-only all the way down, where "ro" leaves the
 * mounts below it as they are. */
static const struct mount_opt rec_mount_opts[] = {
    {"rro", false, MS_RDONLY},
    {"rrw", true, MS_RDONLY},
    {"rnosuid", false, MS_NOSUID},
    {"rsuid", true, MS_NOSUID},
    {"rnodev", false, MS_NODEV},
    {"rdev", true, MS_NODEV},
    {"rnoexec", false, MS_NOEXEC},
    {"rexec", true, MS_NOEXEC},
    {"rnodiratime", false, MS_NODIRATIME},
    {"rdiratime", true, MS_NODIRATIME},
    {"rnoatime", false, MS_NOATIME},
    {"rstrictatime", false, MS_STRICTATIME},
    {"rnosymfollow", false, MS_NOSYMFOLLOW},
    {"rsymfollow", true, MS_NOSYMFOLLOW},
};

static bool rec_mount_opt(const char *o, unsigned long *set, unsigned long *clear)
{
    for (size_t k = 0; k < BH_ARRAY_SIZE(rec_mount_opts); k++) {
        if (strcmp(o, rec_mount_opts[k].name) != 0)
            continue;
        unsigned long f = rec_mount_opts[k].flag;
        if (rec_mount_opts[k].clear) {
            *set &= ~f;
            *clear |= f;
        } else {
            *set |= f;
            *clear &= ~f;
        }
        return true;
    }
    return false;
}

static int parse_propagation(const char *s, unsigned long *out)
{
    for (size_t i = 0; i < BH_ARRAY_SIZE(prop_opts); i++) {
        if (strcmp(s, prop_opts[i].name) == 0) {
            *out = prop_opts[i].flags;
            return 0;
        }
    }
    return -1;
}

static const char *const mount_types[] = {
    "bind", "tmpfs", "proc", "sysfs", "devpts", "mqueue", "cgroup", "cgroup2", "none",
};

static int append_data(char **data, const char *opt)
{
    char *n = NULL;
    if (*data == NULL)
        n = strdup(opt);
    else if (asprintf(&n, "%s,%s", *data, opt) < 0)
        n = NULL;
    if (n == NULL)
        return -1;
    free(*data);
    *data = n;
    return 0;
}

static int parse_mount(struct oci_config *cfg, json_t *m, size_t idx, struct bh_mount *out,
                       struct bh_error *err)
{
    char where[64];
    snprintf(where, sizeof(where), "mounts[%zu]", idx);
    if (want_object(m, where, err) < 0)
        return -1;
    const char *dest, *src, *type;
    if (get_string(m, "destination", where, true, &dest, err) < 0 ||
        get_string(m, "source", where, false, &src, err) < 0 ||
        get_string(m, "type", where, false, &type, err) < 0)
        return -1;
    char dwhere[96];
    snprintf(dwhere, sizeof(dwhere), "%s.destination", where);
    if (check_abs_clean(dest, dwhere, err) < 0)
        return -1;
    if (member(m, "uidMappings") || member(m, "gidMappings"))
        return bh_error_set(err, ENOTSUP,
                            "config.json: `%s` has uidMappings/gidMappings: per-mount id "
                            "mappings are not supported by bulkhead; remove them",
                            where);
    cleanup_free char **opts = NULL;
    size_t n_opts = 0;
    if (get_string_array(m, "options", where, false, (char ***)&opts, &n_opts, err) < 0)
        return -1;
    unsigned long flags = 0, prop = 0, rec_set = 0, rec_clear = 0;
    char *data = NULL;
    int rc = 0;
    for (size_t i = 0; i < n_opts && rc == 0; i++) {
        const char *o = opts[i];
        bool known = false;
        for (size_t k = 0; k < BH_ARRAY_SIZE(mount_opts); k++) {
            if (strcmp(o, mount_opts[k].name) == 0) {
                if (mount_opts[k].clear)
                    flags &= ~mount_opts[k].flag;
                else
                    flags |= mount_opts[k].flag;
                known = true;
                break;
            }
        }
        if (!known && parse_propagation(o, &prop) == 0)
            known = true;
        if (!known && rec_mount_opt(o, &rec_set, &rec_clear))
            known = true;
        if (!known && (strcmp(o, "tmpcopyup") == 0 || strcmp(o, "remount") == 0))
            known = true; /* accepted: nothing to copy up from an image here */
        if (!known && (strcmp(o, "idmap") == 0 || strcmp(o, "ridmap") == 0))
            rc = bh_error_set(err, ENOTSUP,
                              "config.json: `%s.options` `%s` is not supported by bulkhead", where,
                              o);
        else if (!known && append_data(&data, o) < 0)
            rc = bh_error_errno(err, ENOMEM, "config.json: `%s.options`", where);
    }
    for (size_t i = 0; i < n_opts; i++)
        free(opts[i]);
    if (rc < 0) {
        free(data);
        return -1;
    }
    if (type == NULL || type[0] == '\0')
        type = (flags & MS_BIND) ? "bind" : NULL;
    if (type == NULL) {
        free(data);
        return bh_error_set(err, EINVAL,
                            "config.json: `%s.type` is required unless options hold bind or rbind",
                            where);
    }
    bool type_ok = false;
    for (size_t k = 0; k < BH_ARRAY_SIZE(mount_types); k++)
        type_ok = type_ok || strcmp(type, mount_types[k]) == 0;
    if (!type_ok) {
        free(data);
        return bh_error_set(err, ENOTSUP,
                            "config.json: `%s.type` `%s` is not supported: bulkhead mounts bind, "
                            "tmpfs, proc, sysfs, devpts, mqueue and cgroup",
                            where, type);
    }
    if ((strcmp(type, "cgroup") == 0 || strcmp(type, "cgroup2") == 0) && !(flags & MS_RDONLY))
        add_warning(cfg,
                    "%s: the cgroup mount on `%s` is made read-only although the config asks "
                    "read-write: the container's cgroups are not delegated to it, since "
                    "nothing bounds the cgroups it would make (v1 has no "
                    "cgroup.max.descendants, and memcg ids are one host-wide pool of 65535 "
                    "that dying cgroups keep while their page cache is charged)",
                    where, dest);
    bool is_bind = strcmp(type, "bind") == 0 || (flags & MS_BIND);
    if (strcmp(type, "none") == 0 && !is_bind) {
        free(data);
        return bh_error_set(err, EINVAL, "config.json: `%s` of type none needs bind or rbind",
                            where);
    }
    char *source = NULL;
    if (is_bind) {
        flags |= MS_BIND;
        type = "bind";
        if (src == NULL || src[0] == '\0') {
            free(data);
            return bh_error_set(err, EINVAL, "config.json: `%s.source` is required for a bind",
                                where);
        }
        char swhere[96];
        snprintf(swhere, sizeof(swhere), "%s.source", where);
        if (resolve_in_bundle(cfg->bundle, src, swhere, &source, err) < 0) {
            free(data);
            return -1;
        }
    } else {
        source = strdup(src && src[0] ? src : type);
        /* A fresh mount has nothing below it: "rro" is "ro" there. */
        flags = (flags | rec_set) & ~rec_clear;
        rec_set = rec_clear = 0;
    }
    out->source = source;
    out->destination = strdup(dest);
    out->type = strdup(type);
    out->flags = flags;
    out->propagation = prop;
    out->rec_set = rec_set;
    out->rec_clear = rec_clear;
    out->data = data;
    return 0;
}

/* ---- process ------------------------------------------------------------ */

static int parse_caps(json_t *caps, const char *key, uint64_t *mask, struct bh_error *err)
{
    json_t *v = member(caps, key);
    *mask = 0;
    if (v == NULL)
        return 0;
    if (!json_is_array(v))
        return bh_error_set(
            err, EINVAL, "config.json: `process.capabilities.%s` must be an array of strings", key);
    size_t i;
    json_t *s;
    json_array_foreach(v, i, s)
    {
        const char *name = json_string_value(s);
        cap_value_t cap;
        if (name == NULL || strncasecmp(name, "CAP_", 4) != 0 || cap_from_name(name, &cap) < 0 ||
            cap < 0 || cap > 63)
            return bh_error_set(err, EINVAL,
                                "config.json: `process.capabilities.%s[%zu]` `%s` is not a "
                                "capability this kernel knows",
                                key, i, name ? name : "(not a string)");
        *mask |= 1ULL << cap;
    }
    return 0;
}

static const struct {
    const char *name;
    int resource;
} rlimit_names[] = {
    {"RLIMIT_AS", RLIMIT_AS},
    {"RLIMIT_CORE", RLIMIT_CORE},
    {"RLIMIT_CPU", RLIMIT_CPU},
    {"RLIMIT_DATA", RLIMIT_DATA},
    {"RLIMIT_FSIZE", RLIMIT_FSIZE},
    {"RLIMIT_LOCKS", RLIMIT_LOCKS},
    {"RLIMIT_MEMLOCK", RLIMIT_MEMLOCK},
    {"RLIMIT_MSGQUEUE", RLIMIT_MSGQUEUE},
    {"RLIMIT_NICE", RLIMIT_NICE},
    {"RLIMIT_NOFILE", RLIMIT_NOFILE},
    {"RLIMIT_NPROC", RLIMIT_NPROC},
    {"RLIMIT_RSS", RLIMIT_RSS},
    {"RLIMIT_RTPRIO", RLIMIT_RTPRIO},
    {"RLIMIT_RTTIME", RLIMIT_RTTIME},
    {"RLIMIT_SIGPENDING", RLIMIT_SIGPENDING},
    {"RLIMIT_STACK", RLIMIT_STACK},
};

void oci_process_free(struct bh_process *p)
{
    strv_free(p->argv);
    strv_free(p->env);
    free(p->cwd);
    free(p->additional_gids);
    free(p->rlimits);
    memset(p, 0, sizeof(*p));
}

static int parse_process(json_t *proc, const char *where, struct bh_process *p, bool *nnp,
                         const char **apparmor, struct bh_error *err)
{
    if (want_object(proc, where, err) < 0)
        return -1;
    size_t n_args = 0;
    if (get_string_array(proc, "args", where, true, &p->argv, &n_args, err) < 0)
        return -1;
    if (n_args == 0 || p->argv[0][0] == '\0')
        return bh_error_set(err, EINVAL, "config.json: `%s.args` must name a program", where);
    if (get_string_array(proc, "env", where, false, &p->env, NULL, err) < 0)
        return -1;
    if (p->env == NULL)
        p->env = calloc(1, sizeof(char *));
    for (size_t i = 0; p->env[i]; i++) {
        const char *eq = strchr(p->env[i], '=');
        if (eq == NULL || eq == p->env[i])
            return bh_error_set(err, EINVAL, "config.json: `%s.env[%zu]` `%s` is not NAME=VALUE",
                                where, i, p->env[i]);
    }
    const char *cwd;
    if (get_string(proc, "cwd", where, true, &cwd, err) < 0)
        return -1;
    char cwhere[64];
    snprintf(cwhere, sizeof(cwhere), "%s.cwd", where);
    if (check_abs_clean(cwd, cwhere, err) < 0)
        return -1;
    p->cwd = strdup(cwd);

    json_t *user = member(proc, "user");
    char uwhere[64];
    snprintf(uwhere, sizeof(uwhere), "%s.user", where);
    if (user == NULL)
        return bh_error_set(err, EINVAL, "config.json: `%s` is required", uwhere);
    if (want_object(user, uwhere, err) < 0)
        return -1;
    long long uid = 0, gid = 0, umask_v = -1;
    bool has_uid, has_gid, has_umask;
    if (get_int(user, "uid", uwhere, 0, UINT32_MAX - 1, &uid, &has_uid, err) < 0 ||
        get_int(user, "gid", uwhere, 0, UINT32_MAX - 1, &gid, &has_gid, err) < 0 ||
        get_int(user, "umask", uwhere, 0, 0777, &umask_v, &has_umask, err) < 0)
        return -1;
    if (!has_uid || !has_gid)
        return bh_error_set(err, EINVAL, "config.json: `%s.uid` and `%s.gid` are required", uwhere,
                            uwhere);
    p->uid = (uint32_t)uid;
    p->gid = (uint32_t)gid;
    p->umask = has_umask ? (int)umask_v : -1;
    json_t *ag = member(user, "additionalGids");
    if (ag != NULL) {
        if (!json_is_array(ag))
            return bh_error_set(err, EINVAL,
                                "config.json: `%s.additionalGids` must be an array of integers",
                                uwhere);
        p->additional_gids = calloc(json_array_size(ag) + 1, sizeof(uint32_t));
        size_t i;
        json_t *x;
        json_array_foreach(ag, i, x)
        {
            if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                json_integer_value(x) >= UINT32_MAX)
                return bh_error_set(
                    err, EINVAL, "config.json: `%s.additionalGids[%zu]` must be a gid", uwhere, i);
            p->additional_gids[p->n_additional_gids++] = (uint32_t)json_integer_value(x);
        }
    }

    json_t *caps = member(proc, "capabilities");
    if (caps != NULL) {
        char capwhere[80];
        snprintf(capwhere, sizeof(capwhere), "%s.capabilities", where);
        if (want_object(caps, capwhere, err) < 0 ||
            parse_caps(caps, "bounding", &p->cap_bounding, err) < 0 ||
            parse_caps(caps, "effective", &p->cap_effective, err) < 0 ||
            parse_caps(caps, "permitted", &p->cap_permitted, err) < 0 ||
            parse_caps(caps, "inheritable", &p->cap_inheritable, err) < 0 ||
            parse_caps(caps, "ambient", &p->cap_ambient, err) < 0)
            return -1;
    }

    json_t *rl = member(proc, "rlimits");
    if (rl != NULL) {
        if (!json_is_array(rl))
            return bh_error_set(err, EINVAL, "config.json: `%s.rlimits` must be an array", where);
        p->rlimits = calloc(json_array_size(rl) + 1, sizeof(struct bh_rlimit));
        size_t i;
        json_t *r;
        json_array_foreach(rl, i, r)
        {
            char rwhere[64];
            snprintf(rwhere, sizeof(rwhere), "%s.rlimits[%zu]", where, i);
            const char *type;
            uint64_t soft = 0, hard = 0;
            if (want_object(r, rwhere, err) < 0 ||
                get_string(r, "type", rwhere, true, &type, err) < 0 ||
                get_u64(r, "soft", rwhere, true, &soft, err) < 0 ||
                get_u64(r, "hard", rwhere, true, &hard, err) < 0)
                return -1;
            int res = -1;
            for (size_t k = 0; k < BH_ARRAY_SIZE(rlimit_names); k++)
                if (strcmp(type, rlimit_names[k].name) == 0)
                    res = rlimit_names[k].resource;
            if (res < 0)
                return bh_error_set(err, EINVAL, "config.json: `%s.type` `%s` is not an rlimit",
                                    rwhere, type);
            for (size_t k = 0; k < p->n_rlimits; k++)
                if (p->rlimits[k].resource == res)
                    return bh_error_set(err, EINVAL, "config.json: `%s.type` `%s` is given twice",
                                        rwhere, type);
            if (soft > hard)
                return bh_error_set(
                    err, EINVAL, "config.json: `%s`: soft limit is above the hard limit", rwhere);
            p->rlimits[p->n_rlimits++] = (struct bh_rlimit){res, soft, hard};
        }
    }

    bool nnp_v = false;
    if (get_bool(proc, "noNewPrivileges", where, &nnp_v, err) < 0 ||
        get_bool(proc, "terminal", where, &p->terminal, err) < 0)
        return -1;
    if (nnp)
        *nnp = nnp_v;
    json_t *cs = member(proc, "consoleSize");
    if (cs != NULL) {
        char cswhere[64];
        snprintf(cswhere, sizeof(cswhere), "%s.consoleSize", where);
        long long h = 0, w = 0;
        if (want_object(cs, cswhere, err) < 0 ||
            get_int(cs, "height", cswhere, 0, USHRT_MAX, &h, NULL, err) < 0 ||
            get_int(cs, "width", cswhere, 0, USHRT_MAX, &w, NULL, err) < 0)
            return -1;
        p->console_rows = (unsigned short)h;
        p->console_cols = (unsigned short)w;
    }
    long long oom = 0;
    if (get_int(proc, "oomScoreAdj", where, -1000, 1000, &oom, &p->has_oom_score_adj, err) < 0)
        return -1;
    p->oom_score_adj = (int)oom;
    const char *aa = NULL;
    if (get_string(proc, "apparmorProfile", where, false, &aa, err) < 0)
        return -1;
    if (apparmor)
        *apparmor = aa;
    return 0;
}

json_t *oci_bundle_process(const char *bundle, struct bh_error *err)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", bundle);
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (doc == NULL) {
        bh_error_set(err, EINVAL, "%s line %d: %s", path, jerr.line, jerr.text);
        return NULL;
    }
    json_t *p = json_object_get(doc, "process");
    json_t *copy = json_is_object(p) ? json_deep_copy(p) : NULL;
    json_decref(doc);
    if (copy == NULL)
        bh_error_set(err, EINVAL, "%s has no process object to start from", path);
    return copy;
}

int oci_process_parse(json_t *obj, const char *where, struct bh_process *p, bool *nnp,
                      struct bh_error *err)
{
    memset(p, 0, sizeof(*p));
    p->umask = -1;
    if (parse_process(obj, where, p, nnp, NULL, err) < 0) {
        oci_process_free(p);
        return -1;
    }
    return 0;
}

/* ---- linux -------------------------------------------------------------- */

static const struct {
    const char *name;
    enum bh_ns ns;
} ns_names[] = {
    {"user", BH_NS_USER}, {"pid", BH_NS_PID}, {"mount", BH_NS_MOUNT},   {"network", BH_NS_NET},
    {"ipc", BH_NS_IPC},   {"uts", BH_NS_UTS}, {"cgroup", BH_NS_CGROUP}, {"time", BH_NS_TIME},
};

static int parse_idmaps(json_t *linux_, const char *key, struct bh_idmap **out, size_t *n,
                        struct bh_error *err)
{
    json_t *v = member(linux_, key);
    if (v == NULL)
        return 0;
    if (!json_is_array(v))
        return bh_error_set(err, EINVAL, "config.json: `linux.%s` must be an array", key);
    *out = calloc(json_array_size(v) + 1, sizeof(struct bh_idmap));
    size_t i;
    json_t *m;
    json_array_foreach(v, i, m)
    {
        char where[64];
        snprintf(where, sizeof(where), "linux.%s[%zu]", key, i);
        long long c = 0, h = 0, s = 0;
        bool pc, ph, ps;
        if (want_object(m, where, err) < 0 ||
            get_int(m, "containerID", where, 0, UINT32_MAX - 1, &c, &pc, err) < 0 ||
            get_int(m, "hostID", where, 0, UINT32_MAX - 1, &h, &ph, err) < 0 ||
            get_int(m, "size", where, 1, UINT32_MAX, &s, &ps, err) < 0)
            return -1;
        if (!pc || !ph || !ps)
            return bh_error_set(err, EINVAL, "config.json: `%s` needs containerID, hostID and size",
                                where);
        if (h == 0)
            return bh_error_set(err, EPERM,
                                "config.json: `%s` maps to host id 0: bulkhead never maps "
                                "anything to host root; map to an unprivileged range",
                                where);
        if (h + s > (long long)UINT32_MAX || c + s > (long long)UINT32_MAX)
            return bh_error_set(err, ERANGE, "config.json: `%s` overflows the id range", where);
        (*out)[(*n)++] = (struct bh_idmap){(uint32_t)c, (uint32_t)h, (uint32_t)s};
    }
    return 0;
}

int oci_resources_parse(json_t *res, const char *where, struct bh_limits *l, struct bh_error *err)
{
    if (want_object(res, where, err) < 0)
        return -1;
    char w[96];
    json_t *mem = member(res, "memory");
    if (mem != NULL) {
        snprintf(w, sizeof(w), "%s.memory", where);
        long long limit = 0, swap = 0, reservation = 0;
        bool has_limit, has_swap, has_res;
        if (want_object(mem, w, err) < 0 ||
            get_int(mem, "limit", w, -1, INT64_MAX, &limit, &has_limit, err) < 0 ||
            get_int(mem, "swap", w, -1, INT64_MAX, &swap, &has_swap, err) < 0 ||
            get_int(mem, "reservation", w, -1, INT64_MAX, &reservation, &has_res, err) < 0)
            return -1;
        if (has_res && reservation > 0)
            l->memory_reservation_bytes = reservation;
        if (has_limit && limit > 0)
            l->memory_bytes = limit;
        if (has_swap && swap > 0) {
            if (has_limit && limit > 0 && swap < limit)
                return bh_error_set(err, EINVAL,
                                    "config.json: `%s.swap` (memory+swap, %lld) is below "
                                    "`%s.limit` (%lld)",
                                    w, swap, w, limit);
            l->memory_swap_bytes = swap;
        }
    }
    json_t *cpu = member(res, "cpu");
    if (cpu != NULL) {
        snprintf(w, sizeof(w), "%s.cpu", where);
        long long quota = 0, period = 0, shares = 0, rt_period = 0, rt_runtime = 0;
        bool hq, hp, hs;
        if (want_object(cpu, w, err) < 0 ||
            get_int(cpu, "quota", w, -1, INT64_MAX, &quota, &hq, err) < 0 ||
            get_int(cpu, "period", w, 0, INT64_MAX, &period, &hp, err) < 0 ||
            get_int(cpu, "shares", w, 0, INT64_MAX, &shares, &hs, err) < 0 ||
            get_int(cpu, "realtimePeriod", w, 0, INT64_MAX, &rt_period, NULL, err) < 0 ||
            get_int(cpu, "realtimeRuntime", w, -1, INT64_MAX, &rt_runtime, NULL, err) < 0)
            return -1;
        l->cpu_rt_period_us = rt_period;
        l->cpu_rt_runtime_us = rt_runtime;
        /* One without the other keeps the cgroup's value (runc's update;
         * a new cgroup's period is the kernel's 100 ms). -1 (no quota) is
         * what a new cgroup has: left unset, as limits parsed here never go
         * negative (`update --cpu-quota -1` lifts one). */
        if (hq && quota > 0)
            l->cpu_quota_us = quota;
        if (hp && period > 0)
            l->cpu_period_us = period;
        if (hs && shares > 0)
            l->cpu_shares = shares;
        static const char *const sets[] = {"cpus", "mems"};
        for (size_t k = 0; k < BH_ARRAY_SIZE(sets); k++) {
            json_t *v = member(cpu, sets[k]);
            if (v == NULL || json_is_null(v))
                continue;
            const char *t = json_string_value(v);
            char *dst = k == 0 ? l->cpuset_cpus : l->cpuset_mems;
            if (t == NULL || strlen(t) >= sizeof(l->cpuset_cpus) ||
                strspn(t, "0123456789,-") != strlen(t))
                return bh_error_set(err, EINVAL,
                                    "config.json: `%s.%s` must be a cpu list such as `0-3,6`", w,
                                    sets[k]);
            snprintf(dst, sizeof(l->cpuset_cpus), "%s", t);
        }
    }
    json_t *pids = member(res, "pids");
    if (pids != NULL) {
        snprintf(w, sizeof(w), "%s.pids", where);
        long long limit = 0;
        bool has;
        if (want_object(pids, w, err) < 0 ||
            get_int(pids, "limit", w, -1, INT64_MAX, &limit, &has, err) < 0)
            return -1;
        if (has && limit > 0)
            l->pids = limit;
    }
    if (oci_device_rules_parse(member(res, "devices"), where, l, err) < 0)
        return -1;
    if (oci_blockio_parse(member(res, "blockIO"), where, l, err) < 0)
        return -1;
    json_t *unified = member(res, "unified");
    if (unified != NULL) {
        if (!json_is_object(unified))
            return bh_error_set(err, EINVAL, "config.json: `%s.unified` must be an object", where);
        enum bh_cgroup_layout layout = bh_cgroup_detect();
        /* runc's words ("invalid configuration"): v2 files have no place on v1. */
        if (json_object_size(unified) > 0 && layout != BH_CGROUP_V2)
            return bh_error_set(err, EINVAL,
                                "invalid configuration: `%s.unified` names cgroup v2 files, but "
                                "this host's cgroups are %s",
                                where, bh_cgroup_layout_name(layout));
        if (json_object_size(unified) > 0)
            return bh_error_set(err, ENOTSUP,
                                "config.json: `%s.unified` is not applied by bulkhead; use the "
                                "memory, cpu and pids fields",
                                where);
    }
    return 0;
}

/* linux.namespaces: the type of each, and the path of one to join. */
static int parse_namespaces(struct oci_config *cfg, json_t *lx, struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    json_t *nss = member(lx, "namespaces");
    if (nss != NULL) {
        if (!json_is_array(nss))
            return bh_error_set(err, EINVAL, "config.json: `linux.namespaces` must be an array");
        bool seen[BH_NS_COUNT] = {false};
        size_t i;
        json_t *n;
        json_array_foreach(nss, i, n)
        {
            char where[64];
            snprintf(where, sizeof(where), "linux.namespaces[%zu]", i);
            const char *type, *path;
            if (want_object(n, where, err) < 0 ||
                get_string(n, "type", where, true, &type, err) < 0 ||
                get_string(n, "path", where, false, &path, err) < 0)
                return -1;
            int ns = -1;
            for (size_t k = 0; k < BH_ARRAY_SIZE(ns_names); k++)
                if (strcmp(type, ns_names[k].name) == 0)
                    ns = (int)ns_names[k].ns;
            if (ns < 0)
                return bh_error_set(err, EINVAL,
                                    "config.json: `%s.type` `%s` is not a namespace: use pid, "
                                    "network, mount, ipc, uts, user, cgroup or time",
                                    where, type);
            if (seen[ns])
                return bh_error_set(err, EINVAL, "config.json: namespace `%s` is given twice",
                                    type);
            seen[ns] = true;
            cfg->ns_listed[ns] = true;
            if (path != NULL && path[0] != '\0') {
                if (path[0] != '/')
                    return bh_error_set(err, EINVAL, "config.json: `%s.path` `%s` must be absolute",
                                        where, path);
                if (ns == BH_NS_USER || ns == BH_NS_MOUNT)
                    return bh_error_set(err, ENOTSUP,
                                        "config.json: joining an existing %s namespace (`%s`) "
                                        "is not supported: each bulkhead sandbox has its own",
                                        type, path);
                spec->ns_paths[ns] = strdup(path);
            }
        }
    }
    return 0;
}

/* linux.devices (checked now, applied at create) and linux.resources. */
static int parse_linux_resources(struct oci_config *cfg, json_t *lx, struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    json_t *devs = member(lx, "devices");
    if (oci_devices_validate(devs, err) < 0)
        return -1;
    /* Applied once the tier is final (oci_devices_apply, at create). */
    cfg->devices = devs;
    json_t *res = member(lx, "resources");
    if (res != NULL) {
        if (oci_resources_parse(res, "linux.resources", &spec->limits, err) < 0)
            return -1;
    }
    return 0;
}

/* linux.cgroupsPath, in cgroupfs or systemd form. */
static int parse_cgroups_path(struct bh_sandbox_spec *spec, json_t *lx, struct bh_error *err)
{
    const char *cg;
    if (get_string(lx, "cgroupsPath", "linux", false, &cg, err) < 0)
        return -1;
    if (cg != NULL && cg[0] != '\0') {
        cleanup_free char *path = NULL;
        /* systemd form "slice:prefix:name": bulkhead uses cgroupfs, so it becomes
         * slice/prefix-name.scope, where systemd would have put it. */
        const char *c1 = strchr(cg, ':');
        const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c1 && c2 && cg[0] != '/') {
            if (asprintf(&path, "%.*s/%.*s-%s.scope", (int)(c1 - cg), cg, (int)(c2 - c1 - 1),
                         c1 + 1, c2 + 1) < 0)
                path = NULL;
        } else {
            while (*cg == '/')
                cg++;
            path = strdup(cg);
        }
        if (path == NULL || path[0] == '\0')
            return bh_error_set(err, EINVAL, "config.json: `linux.cgroupsPath` is empty");
        char abs[PATH_MAX + 2];
        snprintf(abs, sizeof(abs), "/%s", path);
        if (check_abs_clean(abs, "linux.cgroupsPath", err) < 0)
            return -1;
        spec->cgroup_path = steal_pointer(&path);
    }
    return 0;
}

/* linux.sysctl, with ping_group_range clamped to the sandbox's gids. */
static int parse_sysctls(struct oci_config *cfg, json_t *lx, struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    json_t *sys = member(lx, "sysctl");
    if (sys != NULL) {
        if (want_object(sys, "linux.sysctl", err) < 0)
            return -1;
        spec->sysctls = calloc(json_object_size(sys) + 1, sizeof(struct bh_sysctl));
        const char *k;
        json_t *v;
        json_object_foreach(sys, k, v)
        {
            if (!json_is_string(v))
                return bh_error_set(err, EINVAL, "config.json: `linux.sysctl.%s` must be a string",
                                    k);
            if (k[0] == '\0' || strstr(k, "..") || strchr(k, '/') || k[0] == '.')
                return bh_error_set(err, EINVAL, "config.json: sysctl `%s` is not a valid key", k);
            const char *val = json_string_value(v);
            char clamped[64];
            if (strcmp(k, "net.ipv4.ping_group_range") == 0) {
                /* Docker asks for "0 2147483647"; inside a user namespace the kernel
                 * accepts only gids mapped there, so the range is clamped to them:
                 * without maps in the config, the slot's 0..65536, whose top is the
                 * sentry's own gid, which must be in range for it to make the
                 * guests' ping sockets (sentry/socket-cap.c). */
                unsigned long lo, hi, top = 65536;
                for (size_t m = 0; m < spec->n_gid_maps; m++)
                    top = m == 0 || spec->gid_maps[m].inside + spec->gid_maps[m].count - 1 > top
                              ? spec->gid_maps[m].inside + spec->gid_maps[m].count - 1
                              : top;
                if (sscanf(val, "%lu %lu", &lo, &hi) != 2)
                    return bh_error_set(
                        err, EINVAL, "config.json: sysctl `%s` `%s` is not \"LOW HIGH\"", k, val);
                if (hi > top) {
                    hi = top;
                    add_warning(cfg, "sysctl %s clamped to the sandbox's gids: %lu %lu", k, lo, hi);
                }
                if (lo > hi)
                    continue;
                snprintf(clamped, sizeof(clamped), "%lu %lu", lo, hi);
                val = clamped;
            }
            spec->sysctls[spec->n_sysctls].key = strdup(k);
            spec->sysctls[spec->n_sysctls].value = strdup(val);
            spec->n_sysctls++;
        }
    }
    return 0;
}

/* linux.maskedPaths, linux.readonlyPaths and linux.rootfsPropagation. */
static int parse_rootfs_paths(struct bh_sandbox_spec *spec, json_t *lx, struct bh_error *err)
{
    size_t n = 0;
    if (get_string_array(lx, "maskedPaths", "linux", false, &spec->masked_paths, &n, err) < 0 ||
        get_string_array(lx, "readonlyPaths", "linux", false, &spec->readonly_paths, &n, err) < 0)
        return -1;
    for (char **p = spec->masked_paths; p && *p; p++)
        if (check_abs_clean(*p, "linux.maskedPaths", err) < 0)
            return -1;
    for (char **p = spec->readonly_paths; p && *p; p++)
        if (check_abs_clean(*p, "linux.readonlyPaths", err) < 0)
            return -1;
    const char *prop;
    if (get_string(lx, "rootfsPropagation", "linux", false, &prop, err) < 0)
        return -1;
    if (prop != NULL && prop[0] != '\0' && parse_propagation(prop, &spec->rootfs_propagation) < 0)
        return bh_error_set(err, EINVAL,
                            "config.json: `linux.rootfsPropagation` `%s` is not a propagation "
                            "(private, rprivate, slave, rslave, shared, rshared, unbindable)",
                            prop);
    return 0;
}

static int parse_linux(struct oci_config *cfg, json_t *lx, struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    if (want_object(lx, "linux", err) < 0)
        return -1;
    if (parse_namespaces(cfg, lx, err) < 0)
        return -1;
    if (parse_idmaps(lx, "uidMappings", &spec->uid_maps, &spec->n_uid_maps, err) < 0 ||
        parse_idmaps(lx, "gidMappings", &spec->gid_maps, &spec->n_gid_maps, err) < 0)
        return -1;
    if (parse_linux_resources(cfg, lx, err) < 0 || parse_cgroups_path(spec, lx, err) < 0 ||
        parse_sysctls(cfg, lx, err) < 0 || parse_rootfs_paths(spec, lx, err) < 0)
        return -1;
    json_t *sc = member(lx, "seccomp");
    if (sc != NULL) {
        if (want_object(sc, "linux.seccomp", err) < 0)
            return -1;
        cfg->seccomp = sc;
    }
    const char *label;
    if (get_string(lx, "mountLabel", "linux", false, &label, err) < 0)
        return -1;
    if (label && label[0])
        add_warning(cfg, "linux.mountLabel (SELinux) is not supported and is ignored");
    if (member(lx, "intelRdt"))
        add_warning(cfg, "linux.intelRdt is not supported and is ignored");
    return 0;
}

/* ---- hooks -------------------------------------------------------------- */

static const char *const hook_names[OCI_HOOK_COUNT] = {
    "prestart", "createRuntime", "createContainer", "startContainer", "poststart", "poststop",
};

int oci_hooks_validate(json_t *hooks, struct bh_error *err)
{
    if (want_object(hooks, "hooks", err) < 0)
        return -1;
    for (int k = 0; k < OCI_HOOK_COUNT; k++) {
        json_t *list = member(hooks, hook_names[k]);
        if (list == NULL)
            continue;
        if (!json_is_array(list))
            return bh_error_set(err, EINVAL, "config.json: `hooks.%s` must be an array",
                                hook_names[k]);
        size_t i;
        json_t *h;
        json_array_foreach(list, i, h)
        {
            char where[64];
            snprintf(where, sizeof(where), "hooks.%s[%zu]", hook_names[k], i);
            const char *path;
            char **args = NULL, **env = NULL;
            long long timeout = 0;
            bool has_t;
            if (want_object(h, where, err) < 0 ||
                get_string(h, "path", where, true, &path, err) < 0 ||
                get_string_array(h, "args", where, false, &args, NULL, err) < 0)
                return -1;
            strv_free(args);
            if (get_string_array(h, "env", where, false, &env, NULL, err) < 0)
                return -1;
            strv_free(env);
            if (get_int(h, "timeout", where, 1, INT_MAX, &timeout, &has_t, err) < 0)
                return -1;
            if (path[0] != '/')
                return bh_error_set(err, EINVAL,
                                    "config.json: `%s.path` `%s` must be an absolute path", where,
                                    path);
        }
    }
    return 0;
}

/* ---- the document -------------------------------------------------------- */

void oci_config_free(struct oci_config *cfg)
{
    bh_sandbox_spec_free(&cfg->spec);
    free(cfg->oci_version);
    free(cfg->bundle);
    free(cfg->report_socket);
    for (size_t i = 0; i < cfg->n_warnings; i++)
        free(cfg->warnings[i]);
    free(cfg->warnings);
    if (cfg->doc)
        json_decref(cfg->doc);
    memset(cfg, 0, sizeof(*cfg));
}

/* ---- default limits ----------------------------------------------------------
 * A container whose config.json sets no memory, pids, open-files or file-size
 * limit gets these (issue 10, finding 8: with none, one container could take
 * the host's memory, every pid, and its disk). The runtime's global flags
 * --default-memory, --default-pids, --default-nofile and --default-file-size
 * (usable in daemon.json runtimeArgs; cli.c hands them over in the
 * environment, as --default-tier) replace the values, never remove the
 * floor. Each one applied is listed in annotation dev.bulkhead.default-limits,
 * which `bulkhead state` shows: memory=BYTES, tasks=N (the pids default, held
 * by the user namespace's RLIMIT_NPROC ceiling with pids.max left at "max"),
 * nofile=SOFT:HARD, file-size=BYTES. */
#define OCI_DEFAULT_MEMORY (2LL << 30)
#define OCI_DEFAULT_PIDS 1024
#define OCI_DEFAULT_NOFILE 4096 /* hard; soft stays 1024, as select() needs */
#define OCI_DEFAULT_FSIZE (2LL << 30)

static int default_value(const char *env, const char *flag, bool size, long long min, long long def,
                         long long *out, struct bh_error *err)
{
    const char *v = getenv(env);
    *out = def;
    if (v == NULL || *v == '\0')
        return 0;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    long long mult = 1;
    if (size && end != NULL && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'k':
        case 'K':
            mult = 1LL << 10;
            end++;
            break;
        case 'm':
        case 'M':
            mult = 1LL << 20;
            end++;
            break;
        case 'g':
        case 'G':
            mult = 1LL << 30;
            end++;
            break;
        case 't':
        case 'T':
            mult = 1LL << 40;
            end++;
            break;
        }
    }
    if (end == v || *end != '\0' || errno != 0 || n < 1 || n > LLONG_MAX / mult || n * mult < min)
        return bh_error_set(err, EINVAL,
                            "%s `%s` (%s) is not a valid default: give a %s of at least %lld; "
                            "there is no way to turn the floor off, a container that needs more "
                            "sets its own limit",
                            flag, v, env, size ? "size (bytes, or with k, m, g, t)" : "number",
                            min);
    *out = n * mult;
    return 0;
}

static int apply_default_limits(struct oci_config *cfg, struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    long long mem, pids, nofile, fsize;
    if (default_value("BULKHEAD_DEFAULT_MEMORY", "--default-memory", true, 32LL << 20,
                      OCI_DEFAULT_MEMORY, &mem, err) < 0 ||
        default_value("BULKHEAD_DEFAULT_PIDS", "--default-pids", false, 16, OCI_DEFAULT_PIDS, &pids,
                      err) < 0 ||
        default_value("BULKHEAD_DEFAULT_NOFILE", "--default-nofile", false, 64, OCI_DEFAULT_NOFILE,
                      &nofile, err) < 0 ||
        default_value("BULKHEAD_DEFAULT_FILE_SIZE", "--default-file-size", true, 1LL << 20,
                      OCI_DEFAULT_FSIZE, &fsize, err) < 0)
        return -1;
    char applied[256] = "";
    size_t used = 0;
    if (spec->limits.memory_bytes <= 0) {
        spec->limits.memory_bytes = mem;
        /* No swap either: with memory capped and swap not, a bomb swaps. */
        if (spec->limits.memory_swap_bytes <= 0)
            spec->limits.memory_swap_bytes = mem;
        used += (size_t)snprintf(applied + used, sizeof(applied) - used, "memory=%lld", mem);
    }
    if (spec->limits.pids <= 0) {
        /* runc leaves pids.max at "max" (callers such as runc's own tests
         * read it back), so the floor is the user namespace's RLIMIT_NPROC
         * ceiling instead, which caps every task of the sandbox together
         * (sentry/README.md, "Per-user counters"). The pids cgroup is still
         * made, at "max", so that `update --pids-limit` finds it. */
        spec->limits.pids = -1;
        spec->limits.tasks = pids;
        used += (size_t)snprintf(applied + used, sizeof(applied) - used, "%stasks=%lld",
                                 used ? "," : "", pids);
    }
    struct bh_process *p = &spec->process;
    bool have_nofile = false, have_fsize = false;
    for (size_t i = 0; i < p->n_rlimits; i++) {
        have_nofile = have_nofile || p->rlimits[i].resource == RLIMIT_NOFILE;
        have_fsize = have_fsize || p->rlimits[i].resource == RLIMIT_FSIZE;
    }
    if (!have_nofile || !have_fsize) {
        struct bh_rlimit *rl = realloc(p->rlimits, (p->n_rlimits + 2) * sizeof(*rl));
        if (rl == NULL)
            return bh_error_errno(err, ENOMEM, "default rlimits");
        p->rlimits = rl;
    }
    if (!have_nofile) {
        uint64_t soft = nofile < 1024 ? (uint64_t)nofile : 1024;
        p->rlimits[p->n_rlimits++] = (struct bh_rlimit){RLIMIT_NOFILE, soft, (uint64_t)nofile};
        used += (size_t)snprintf(applied + used, sizeof(applied) - used, "%snofile=%llu:%lld",
                                 used ? "," : "", (unsigned long long)soft, nofile);
    }
    if (!have_fsize) {
        p->rlimits[p->n_rlimits++] =
            (struct bh_rlimit){RLIMIT_FSIZE, (uint64_t)fsize, (uint64_t)fsize};
        used += (size_t)snprintf(applied + used, sizeof(applied) - used, "%sfile-size=%lld",
                                 used ? "," : "", fsize);
    }
    if (used > 0)
        json_object_set_new(cfg->annotations, OCI_ANNOTATION_DEFAULT_LIMITS, json_string(applied));
    return 0;
}

void oci_limits_as_created(json_t *annotations, struct bh_limits *l)
{
    /* The defaults of the create that made the container, which may have had
     * other --default-* flags than the command reading the config now. */
    const char *a = json_string_value(json_object_get(annotations, OCI_ANNOTATION_DEFAULT_LIMITS));
    for (const char *p = a; p != NULL && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        long long v = 0;
        if (sscanf(p, "memory=%lld", &v) == 1 && v > 0)
            l->memory_bytes = l->memory_swap_bytes = v;
        else if (sscanf(p, "pids=%lld", &v) == 1 && v > 0) /* made before tasks= existed */
            l->pids = v;
        else if (sscanf(p, "tasks=%lld", &v) == 1 && v > 0) {
            l->pids = -1;
            l->tasks = v;
        }
    }
}

static int config_from_doc(struct oci_config *cfg, struct bh_error *err)
{
    json_t *doc = cfg->doc;
    struct bh_sandbox_spec *spec = &cfg->spec;
    if (!json_is_object(doc))
        return bh_error_set(err, EINVAL, "config.json: the top level must be an object");
    const char *ver;
    if (get_string(doc, "ociVersion", "(top)", true, &ver, err) < 0)
        return bh_error_set(err, EINVAL,
                            "config.json: `ociVersion` is required and must be a "
                            "string such as \"1.0.2\"");
    if (oci_version_check(ver, err) < 0)
        return -1;
    cfg->oci_version = strdup(ver);

    json_t *ann = member(doc, "annotations");
    if (ann != NULL) {
        if (want_object(ann, "annotations", err) < 0)
            return -1;
        const char *k;
        json_t *v;
        json_object_foreach(ann, k, v)
        {
            if (!json_is_string(v))
                return bh_error_set(err, EINVAL, "config.json: `annotations.%s` must be a string",
                                    k);
        }
        cfg->annotations = ann;
    } else {
        cfg->annotations = json_object();
        json_object_set_new(doc, "annotations", cfg->annotations);
    }
    spec->tier = BH_TIER_KERNEL;
    const char *tier = json_string_value(json_object_get(cfg->annotations, OCI_ANNOTATION_TIER));
    /* Engines that cannot pass annotations (dockerd before 24) register a
     * wrapper that sets the default tier in the runtime's environment. */
    const char *env_tier = getenv("BULKHEAD_DEFAULT_TIER");
    if (tier == NULL && env_tier != NULL && env_tier[0] != '\0') {
        if (strcmp(env_tier, "kernel") != 0 && strcmp(env_tier, "container") != 0)
            return bh_error_set(err, EINVAL,
                                "BULKHEAD_DEFAULT_TIER is `%s`: use `container` or `kernel`",
                                env_tier);
        /* Not written into the annotations: hooks see the config's own. */
        tier = env_tier;
    }
    if (tier != NULL) {
        if (strcmp(tier, "kernel") == 0)
            spec->tier = BH_TIER_KERNEL;
        else if (strcmp(tier, "container") == 0)
            spec->tier = BH_TIER_CONTAINER;
        else
            return bh_error_set(err, EINVAL, "annotation `%s` is `%s`: use `container` or `kernel`",
                                OCI_ANNOTATION_TIER, tier);
    }
    const char *rs =
        json_string_value(json_object_get(cfg->annotations, OCI_ANNOTATION_REPORT_SOCKET));
    if (rs != NULL) {
        if (rs[0] != '/')
            return bh_error_set(err, EINVAL,
                                "annotation `%s` `%s` must be an absolute path to a unix socket",
                                OCI_ANNOTATION_REPORT_SOCKET, rs);
        cfg->report_socket = strdup(rs);
    }

    json_t *root = member(doc, "root");
    if (root == NULL)
        return bh_error_set(err, EINVAL,
                            "config.json: `root` is required (root.path names the "
                            "container's root filesystem)");
    if (want_object(root, "root", err) < 0)
        return -1;
    const char *rpath;
    if (get_string(root, "path", "root", true, &rpath, err) < 0 ||
        get_bool(root, "readonly", "root", &spec->rootfs_readonly, err) < 0)
        return -1;
    if (resolve_in_bundle(cfg->bundle, rpath, "root.path", &spec->rootfs, err) < 0)
        return -1;
    struct stat st;
    if (stat(spec->rootfs, &st) < 0 || !S_ISDIR(st.st_mode))
        return bh_error_set(err, ENOTDIR, "config.json: `root.path` `%s` is not a directory",
                            spec->rootfs);
    if (strcmp(spec->rootfs, "/") == 0)
        return bh_error_set(err, EPERM,
                            "config.json: `root.path` is the host's `/`: bulkhead refuses to use "
                            "the host's root as a container's root filesystem");

    json_t *mounts = member(doc, "mounts");
    if (mounts != NULL) {
        if (!json_is_array(mounts))
            return bh_error_set(err, EINVAL, "config.json: `mounts` must be an array");
        spec->mounts = calloc(json_array_size(mounts) + 1, sizeof(struct bh_mount));
        size_t i;
        json_t *m;
        json_array_foreach(mounts, i, m)
        {
            if (parse_mount(cfg, m, i, &spec->mounts[spec->n_mounts], err) < 0)
                return -1;
            spec->n_mounts++;
        }
    }

    json_t *proc = member(doc, "process");
    if (proc == NULL)
        return bh_error_set(err, EINVAL,
                            "config.json: `process` is required (bulkhead runs "
                            "the process it describes)");
    const char *apparmor = NULL;
    if (parse_process(proc, "process", &spec->process, &cfg->no_new_privileges, &apparmor, err) < 0)
        return -1;
    if (apparmor && apparmor[0])
        add_warning(cfg,
                    "process.apparmorProfile `%s` is unsupported and not applied (bulkhead "
                    "confines with seccomp, Landlock and namespaces instead)",
                    apparmor);
    const char *selinux;
    if (get_string(proc, "selinuxLabel", "process", false, &selinux, err) < 0)
        return -1;
    if (selinux && selinux[0])
        add_warning(cfg, "process.selinuxLabel is unsupported and not applied");

    const char *hostname;
    if (get_string(doc, "hostname", "(top)", false, &hostname, err) < 0)
        return -1;
    if (hostname && hostname[0]) {
        if (strlen(hostname) > 64)
            return bh_error_set(err, EINVAL, "config.json: `hostname` is longer than 64 bytes");
        spec->hostname = strdup(hostname);
    }
    const char *domain;
    if (get_string(doc, "domainname", "(top)", false, &domain, err) < 0)
        return -1;
    if (domain && domain[0])
        add_warning(cfg, "domainname is not set (unsupported)");

    json_t *lx = member(doc, "linux");
    if (lx != NULL && parse_linux(cfg, lx, err) < 0)
        return -1;
    /* Both tiers run the container in a user namespace of its own, where
     * these two capabilities cannot reach what runc's callers grant them
     * for; saying so beats a bare EPERM inside (runc's bats 51 and 52).
     * CAP_MKNOD only with a rule for a named block device: docker grants
     * it to every container, with `m` rules for its standard char nodes. */
    if (spec->process.cap_effective & (1ULL << CAP_SYSLOG))
        add_warning(cfg, "process.capabilities grants CAP_SYSLOG in the container's user "
                         "namespace only: reading the host's kernel log (/dev/kmsg, syslog(2)) "
                         "needs it in the host's while kernel.dmesg_restrict is 1, so those "
                         "reads fail with EPERM");
    bool mknod_rule = false;
    for (size_t i = 0; i < spec->limits.n_device_rules; i++) {
        const struct bh_device_rule *r = &spec->limits.device_rules[i];
        mknod_rule =
            mknod_rule || (r->allow && r->type == 'b' && r->major >= 0 && strchr(r->access, 'm'));
    }
    if (mknod_rule && (spec->process.cap_effective & (1ULL << CAP_MKNOD)))
        add_warning(cfg, "process.capabilities grants CAP_MKNOD in the container's user "
                         "namespace only: the kernel refuses mknod of a device node there "
                         "(EPERM) whatever the device rules allow; list the node in "
                         "linux.devices to have it made at create");
    /* As runc: no cgroup namespace unless the config lists one; a cgroup
     * namespace of its own is part of the kernel tier (README, "Tiers"). */
    spec->inherit_cgroup_ns = spec->tier == BH_TIER_CONTAINER && !cfg->ns_listed[BH_NS_CGROUP];
    if (spec->n_uid_maps == 0 && spec->ns_paths[BH_NS_USER] == NULL) {
        /* No ids chosen by the caller: the container's root is an unprivileged
         * host id of the sandbox's slot, and docker's image and binds belong to
         * host root. The core idmaps the rootfs and every bind (read-only ones
         * too: root-only files are readable by the container's root, as under
         * runc) with the sandbox's user namespace, so their files keep the
         * owners they have on the host. */
        spec->idmap_rootfs = true;
        for (size_t i = 0; i < spec->n_mounts; i++)
            if (spec->mounts[i].flags & MS_BIND)
                spec->mounts[i].idmap = true;
    }
    json_t *hooks = member(doc, "hooks");
    if (hooks != NULL) {
        if (oci_hooks_validate(hooks, err) < 0)
            return -1;
        cfg->hooks = hooks;
    }
    if (cfg->seccomp != NULL && oci_seccomp_to_policy(cfg->seccomp, &spec->extra_policy_text,
                                                      &spec->extra_policy_listener, err) < 0)
        return bh_error_prefix(err, "config.json: `linux.seccomp`");
    if (spec->extra_policy_text != NULL) {
        /* Checked now so a profile the grammar cannot hold fails here, named. */
        struct bh_policy *pol = NULL;
        if (bh_policy_parse_stacked(spec->extra_policy_text, "linux.seccomp", &pol, err) < 0)
            return bh_error_prefix(err, "config.json: `linux.seccomp` as a bulkhead policy");
        bh_policy_free(pol);
    }
    return apply_default_limits(cfg, err);
}

int oci_config_parse(const char *text, const char *bundle, struct oci_config *cfg,
                     struct bh_error *err)
{
    memset(cfg, 0, sizeof(*cfg));
    bh_sandbox_spec_init(&cfg->spec);
    cfg->bundle = strdup(bundle);
    json_error_t jerr;
    cfg->doc = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
    if (cfg->doc == NULL) {
        bh_error_set(err, EINVAL, "config.json line %d column %d: %s", jerr.line, jerr.column,
                     jerr.text);
        oci_config_free(cfg);
        return -1;
    }
    if (config_from_doc(cfg, err) < 0) {
        oci_config_free(cfg);
        return -1;
    }
    return 0;
}

int oci_config_load(const char *bundle, struct oci_config *cfg, struct bh_error *err)
{
    memset(cfg, 0, sizeof(*cfg));
    char *real = realpath(bundle, NULL);
    if (real == NULL)
        return bh_error_errno(err, errno, "bundle `%s` cannot be opened", bundle);
    cleanup_free char *bundle_real = real;
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%s/config.json", bundle_real) < 0)
        return bh_error_errno(err, ENOMEM, "bundle `%s`", bundle);
    cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return bh_error_errno(err, errno, "open `%s`", path);
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return bh_error_set(err, EINVAL, "`%s` is not a regular file", path);
    if (st.st_size > 16 * 1024 * 1024)
        return bh_error_set(err, EFBIG, "`%s` is larger than 16 MiB", path);
    cleanup_free char *text = malloc((size_t)st.st_size + 1);
    if (text == NULL)
        return bh_error_errno(err, ENOMEM, "read `%s`", path);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, text + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return bh_error_errno(err, errno, "read `%s`", path);
        if (r == 0)
            break;
        got += (size_t)r;
    }
    text[got] = '\0';
    if (strlen(text) != got)
        return bh_error_set(err, EINVAL, "`%s` contains a NUL byte", path);
    return oci_config_parse(text, bundle_real, cfg, err);
}

/* Whether dest, resolved inside the rootfs (RESOLVE_IN_ROOT), is a symlink. */
static bool mount_point_is_symlink(int root, const char *dest)
{
    while (*dest == '/')
        dest++;
    struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                           .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS};
    cleanup_close int fd = (int)syscall(SYS_openat2, root, dest[0] ? dest : ".", &how, sizeof(how));
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && S_ISLNK(st.st_mode);
}

int oci_mount_points_check(const struct bh_sandbox_spec *spec, struct bh_error *err)
{
    if (spec->rootfs == NULL)
        return 0;
    cleanup_close int root = open(spec->rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return 0; /* reported, with its reason, where the rootfs is opened */
    /* The base /proc and /sys unless the config mounts its own there. */
    const char *base[] = {"/proc", "/sys"}, *base_type[] = {"proc", "sysfs"};
    bool listed[2] = {false, false};
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const struct bh_mount *m = &spec->mounts[i];
        const char *type = m->type ? m->type : "";
        for (size_t k = 0; k < 2; k++)
            if (m->destination != NULL && strcmp(m->destination, base[k]) == 0)
                listed[k] = true;
        if ((strcmp(type, "proc") == 0 || strcmp(type, "sysfs") == 0) && m->destination != NULL &&
            mount_point_is_symlink(root, m->destination))
            return bh_error_set(err, ELOOP,
                                "%s must be mounted on ordinary directory: `%s` in the rootfs "
                                "`%s` is a symlink, which would let the image choose where the "
                                "kernel's files land; make it a directory",
                                type, m->destination, spec->rootfs);
    }
    for (size_t k = 0; k < 2; k++)
        if (!listed[k] && mount_point_is_symlink(root, base[k]))
            return bh_error_set(err, ELOOP,
                                "%s must be mounted on ordinary directory: `%s` in the rootfs "
                                "`%s` is a symlink; make it a directory",
                                base_type[k], base[k], spec->rootfs);
    return 0;
}
