/* Owns linux.devices: which device nodes a container gets, per tier.
 *
 * A user namespace cannot mknod, so a node the config lists is the host's
 * own node bind-mounted at the path (as runc does for rootless containers).
 * By class:
 * - null, zero, full, random, urandom, tty and ptmx are every sandbox's
 *   own /dev (ptmx: its private devpts instance): listed with their real
 *   numbers, they are accepted at both tiers and nothing more is done;
 * - any other char or block device: at the container tier the host's node
 *   with that type and major:minor (found through /dev/char and /dev/block)
 *   is bound at the path; at the kernel tier it is refused, since the
 *   sentry brokers every open and a host device (a disk, the kernel log, a
 *   loop device) is host state no broker rule confines;
 * - fifos ("p") and unbuffered ("u") entries are refused: there is no host
 *   node to bind for them.
 * fileMode, uid and gid cannot be set on a bound host node; they are kept
 * as the host's (a warning says so).
 *
 * Also linux.resources.devices, the device cgroup: the rules in order, then
 * the devices every container needs, as runc appends them; a node bound
 * above is usable only when a rule allows it (runc's `device cgroup deny`
 * test). v1 applies them (sentry/cgroup-v1.c); v2 needs a BPF program,
 * not generated yet. */
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cleanup.h"
#include "oci-internal.h"

static const struct {
    const char *path;
    unsigned major, minor;
} own_nodes[] = {
    {"/dev/null", 1, 3},    {"/dev/zero", 1, 5}, {"/dev/full", 1, 7}, {"/dev/random", 1, 8},
    {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},  {"/dev/ptmx", 5, 2},
};

int oci_devices_validate(json_t *devs, struct bh_error *err)
{
    if (devs == NULL)
        return 0;
    if (!json_is_array(devs))
        return bh_error_set(err, EINVAL, "config.json: `linux.devices` must be an array");
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d)
    {
        const char *path = json_string_value(json_object_get(d, "path"));
        const char *type = json_string_value(json_object_get(d, "type"));
        json_t *maj = json_object_get(d, "major"), *min = json_object_get(d, "minor");
        if (!json_is_object(d) || path == NULL || type == NULL)
            return bh_error_set(err, EINVAL,
                                "config.json: `linux.devices[%zu]` needs a string `path` and "
                                "`type`",
                                i);
        if (path[0] != '/' || strstr(path, "/../") || strlen(path) >= PATH_MAX)
            return bh_error_set(err, EINVAL,
                                "config.json: `linux.devices[%zu].path` `%s` must be an absolute "
                                "path without `..`",
                                i, path);
        if (strcmp(type, "c") != 0 && strcmp(type, "b") != 0 && strcmp(type, "u") != 0 &&
            strcmp(type, "p") != 0)
            return bh_error_set(err, EINVAL,
                                "config.json: `linux.devices[%zu].type` `%s` is not c, b, u or p",
                                i, type);
        if (strcmp(type, "p") != 0 &&
            (!json_is_integer(maj) || !json_is_integer(min) || json_integer_value(maj) < 0 ||
             json_integer_value(min) < 0 || json_integer_value(maj) > 0xfff ||
             json_integer_value(min) > 0xfffff))
            return bh_error_set(err, EINVAL,
                                "config.json: `linux.devices[%zu]` (`%s`) needs a major and a "
                                "minor number",
                                i, path);
    }
    return 0;
}

static bool is_node(const char *p, bool block, unsigned major, unsigned minor)
{
    struct stat st;
    return lstat(p, &st) == 0 && (block ? S_ISBLK(st.st_mode) : S_ISCHR(st.st_mode)) &&
           major(st.st_rdev) == major && minor(st.st_rdev) == minor;
}

/* The host's node of that type and number under /dev: the config's own path
 * when the host's is that device, else udev's /dev/char or /dev/block link,
 * else the first such node directly in /dev. Never a symlink's target
 * outside /dev. */
static int host_node(const char *path, bool block, unsigned major, unsigned minor, char *out,
                     size_t len)
{
    if (strncmp(path, "/dev/", 5) == 0 && is_node(path, block, major, minor)) {
        snprintf(out, len, "%s", path);
        return 0;
    }
    char link[64];
    snprintf(link, sizeof(link), "/dev/%s/%u:%u", block ? "block" : "char", major, minor);
    cleanup_free char *real = realpath(link, NULL);
    if (real != NULL && strncmp(real, "/dev/", 5) == 0 && is_node(real, block, major, minor)) {
        snprintf(out, len, "%s", real);
        return 0;
    }
    DIR *d = opendir("/dev");
    struct dirent *de;
    int rc = -1;
    while (d != NULL && rc < 0 && (de = readdir(d)) != NULL) {
        char p[300];
        snprintf(p, sizeof(p), "/dev/%s", de->d_name);
        if (de->d_name[0] != '.' && is_node(p, block, major, minor)) {
            snprintf(out, len, "%s", p);
            rc = 0;
        }
    }
    if (d != NULL)
        closedir(d);
    return rc;
}

int oci_devices_apply(struct oci_config *cfg, struct bh_error *err)
{
    json_t *devs = cfg->devices;
    if (devs == NULL || json_array_size(devs) == 0)
        return 0;
    struct bh_sandbox_spec *spec = &cfg->spec;
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d)
    {
        const char *path = json_string_value(json_object_get(d, "path"));
        const char *type = json_string_value(json_object_get(d, "type"));
        unsigned major = (unsigned)json_integer_value(json_object_get(d, "major"));
        unsigned minor = (unsigned)json_integer_value(json_object_get(d, "minor"));
        bool own = false;
        for (size_t k = 0; k < BH_ARRAY_SIZE(own_nodes); k++) {
            if (strcmp(path, own_nodes[k].path) != 0)
                continue;
            if (strcmp(type, "c") != 0 || major != own_nodes[k].major ||
                minor != own_nodes[k].minor)
                return bh_error_set(err, EINVAL,
                                    "config.json: device `%s` is listed as %s %u:%u, but every "
                                    "sandbox's %s is c %u:%u",
                                    path, type, major, minor, path, own_nodes[k].major,
                                    own_nodes[k].minor);
            own = true;
        }
        if (own)
            continue;
        if (strcmp(type, "p") == 0 || strcmp(type, "u") == 0)
            return bh_error_set(err, ENOTSUP,
                                "config.json: device `%s` of type `%s` is not supported: a "
                                "sandbox's user namespace cannot mknod, and there is no host "
                                "node of that kind to bind",
                                path, type);
        bool block = strcmp(type, "b") == 0;
        if (spec->tier >= BH_TIER_KERNEL)
            return bh_error_set(err, EPERM,
                                "config.json: device `%s` (%s %u:%u) is refused at the kernel "
                                "tier: the sentry brokers every open and exposes only null, "
                                "zero, full, random, urandom, tty and ptmx; a host %s device is "
                                "host state no broker rule confines. Run the container at the "
                                "container tier (annotation dev.bulkhead.tier=container) to "
                                "bind the host's node",
                                path, type, major, minor, block ? "block" : "character");
        char src[PATH_MAX];
        if (host_node(path, block, major, minor, src, sizeof(src)) < 0)
            return bh_error_set(err, ENOENT,
                                "config.json: device `%s` (%s %u:%u): the host has no such "
                                "node to bind (a user namespace cannot mknod one)",
                                path, type, major, minor);
        struct bh_mount *mounts = realloc(spec->mounts, (spec->n_mounts + 1) * sizeof(*mounts));
        if (mounts == NULL)
            return bh_error_errno(err, ENOMEM, "device `%s`", path);
        spec->mounts = mounts;
        struct bh_mount *m = &spec->mounts[spec->n_mounts];
        memset(m, 0, sizeof(*m));
        m->source = strdup(src);
        m->destination = strdup(path);
        m->type = strdup("bind");
        m->flags = MS_BIND | MS_NOSUID | MS_NOEXEC;
        if (m->source == NULL || m->destination == NULL || m->type == NULL)
            return bh_error_errno(err, ENOMEM, "device `%s`", path);
        spec->n_mounts++;
    }
    return 0;
}

/* What runc allows after the config's rules (libcontainer's
 * AllowedDevices): mknod of anything (a user namespace refuses it anyway),
 * the standard nodes, the pty pair, and tun. */
static const struct bh_device_rule default_rules[] = {
    {true, 'c', -1, -1, "m"}, {true, 'b', -1, -1, "m"},    {true, 'c', 1, 3, "rwm"},
    {true, 'c', 1, 8, "rwm"}, {true, 'c', 1, 7, "rwm"},    {true, 'c', 5, 0, "rwm"},
    {true, 'c', 1, 5, "rwm"}, {true, 'c', 1, 9, "rwm"},    {true, 'c', 136, -1, "rwm"},
    {true, 'c', 5, 2, "rwm"}, {true, 'c', 10, 200, "rwm"},
};

static int rule_number(json_t *v, const char *what, const char *where, size_t i, int32_t *out,
                       struct bh_error *err)
{
    if (v == NULL || json_is_null(v)) {
        *out = -1;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < -1 || json_integer_value(v) > 0xfffff)
        return bh_error_set(err, EINVAL,
                            "config.json: `%s.devices[%zu].%s` must be a device number or -1",
                            where, i, what);
    *out = (int32_t)json_integer_value(v);
    return 0;
}

int oci_device_rules_parse(json_t *rules, const char *where, struct bh_limits *l,
                           struct bh_error *err)
{
    if (rules == NULL || json_is_null(rules))
        return 0;
    if (!json_is_array(rules))
        return bh_error_set(err, EINVAL, "config.json: `%s.devices` must be an array", where);
    if (json_array_size(rules) == 0)
        return 0;
    if (json_array_size(rules) + BH_ARRAY_SIZE(default_rules) > BH_MAX_DEVICE_RULES)
        return bh_error_set(err, E2BIG,
                            "config.json: `%s.devices` has %zu rules; bulkhead takes at most %zu",
                            where, json_array_size(rules),
                            (size_t)BH_MAX_DEVICE_RULES - BH_ARRAY_SIZE(default_rules));
    size_t n = 0;
    size_t i;
    json_t *d;
    json_array_foreach(rules, i, d)
    {
        json_t *allow = json_object_get(d, "allow");
        if (!json_is_object(d) || !json_is_boolean(allow))
            return bh_error_set(err, EINVAL,
                                "config.json: `%s.devices[%zu]` needs a boolean `allow`", where, i);
        struct bh_device_rule *r = &l->device_rules[n];
        memset(r, 0, sizeof(*r));
        r->allow = json_is_true(allow);
        json_t *type = json_object_get(d, "type"), *access = json_object_get(d, "access");
        const char *t = type == NULL || json_is_null(type) ? "a" : json_string_value(type);
        if (t == NULL || strlen(t) != 1 || strchr("acb", t[0]) == NULL)
            return bh_error_set(err, EINVAL,
                                "config.json: `%s.devices[%zu].type` must be `a`, `c` or `b`",
                                where, i);
        r->type = t[0];
        if (rule_number(json_object_get(d, "major"), "major", where, i, &r->major, err) < 0 ||
            rule_number(json_object_get(d, "minor"), "minor", where, i, &r->minor, err) < 0)
            return -1;
        const char *a = access == NULL || json_is_null(access) ? "rwm" : json_string_value(access);
        /* Letters other than r, w and m are dropped, as the kernel's parser
         * stops at them (runc's own tests write "rwa"); a rule left with no
         * access at all is refused. */
        size_t k = 0;
        for (const char *c = a; c != NULL && *c != '\0' && strlen(a) <= 8; c++)
            if (strchr("rwm", *c) != NULL && strchr(r->access, *c) == NULL && k < 3)
                r->access[k++] = *c;
        if (k == 0)
            return bh_error_set(err, EINVAL,
                                "config.json: `%s.devices[%zu].access` `%s` must hold letters of "
                                "`rwm`",
                                where, i, a ? a : "");
        n++;
    }
    for (size_t k = 0; k < BH_ARRAY_SIZE(default_rules); k++)
        l->device_rules[n++] = default_rules[k];
    l->n_device_rules = n;
    return 0;
}
