/* Owns linux.devices: which device nodes a container gets, per tier.
 *
 * By class:
 * - null, zero, full, random, urandom, tty and ptmx are every sandbox's
 *   own /dev (ptmx: its private devpts instance), owned by the sandbox's
 *   root: listed with their real numbers, they are accepted at both tiers
 *   and nothing more is done;
 * - any other char ("c", or "u", unbuffered, which is a char device too),
 *   block ("b") or fifo ("p") node: at the container tier a node of the
 *   container's own, made here as host root (a user namespace cannot mknod)
 *   in a tmpfs of its own, with the config's fileMode, uid and gid (0666,
 *   0:0 by default, as runc), and bound at the path; the host's /dev is
 *   never touched. At the kernel tier it is refused, naming the device:
 *   the sentry brokers every open and exposes only the standard nodes; a
 *   host device (a disk, the kernel log, a loop device) is host state no
 *   broker rule confines, and a fifo's open would block the broker.
 *
 * Also linux.resources.devices, the device cgroup: the rules in order, then
 * the devices every container needs, as runc appends them; default deny,
 * also when the config has no rules (runc's emulator starts from deny). A
 * node made above is usable only when a rule allows it (runc's `device
 * cgroup deny` test): v1 applies them (sentry/cgroup-v1.c), v2 as a BPF
 * program (sentry/cgroup-devices.c). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "cleanup.h"
#include "mounts.h"
#include "oci-internal.h"

/* Every sandbox's own nodes (sentry/mounts.c's table), matched by path. */
static const struct bh_dev_node *own_node(const char *path)
{
    if (strncmp(path, "/dev/", 5) != 0)
        return NULL;
    for (size_t k = 0; k < BH_N_DEV_NODES; k++)
        if (strcmp(path + 5, bh_dev_nodes[k].name) == 0)
            return &bh_dev_nodes[k];
    return NULL;
}

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

/* The host id that the container's id `id` is (its maps, or the slot's
 * identity with an idmapped node), or -1 when the maps leave it out. */
static int64_t host_id(const struct bh_idmap *m, size_t n, bool idmapped, uint32_t id)
{
    if (idmapped || n == 0)
        return id;
    for (size_t i = 0; i < n; i++)
        if (id >= m[i].inside && id - m[i].inside < m[i].count)
            return (int64_t)m[i].outside + (id - m[i].inside);
    return -1;
}

static int number_or(json_t *d, const char *key, uint32_t dflt, uint32_t *out)
{
    json_t *v = json_object_get(d, key);
    if (v == NULL || json_is_null(v)) {
        *out = dflt;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT32_MAX)
        return -1;
    *out = (uint32_t)json_integer_value(v);
    return 0;
}

/* A detached tmpfs of the container's own nodes, made as host root in the
 * initial user namespace (the only place mknod works), not nodev. */
static int node_tree(size_t n, struct bh_error *err)
{
    cleanup_close int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    char inodes[32];
    snprintf(inodes, sizeof(inodes), "%zu", n + 1);
    if (fs < 0 || fsconfig(fs, FSCONFIG_SET_STRING, "size", "4k", 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "nr_inodes", inodes, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0700", 0) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return bh_error_errno(err, errno, "linux.devices: a tmpfs for the container's nodes");
    int tree = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC);
    if (tree < 0)
        return bh_error_errno(err, errno, "linux.devices: mount the container's node tmpfs");
    return tree;
}

static void default_device_rules(struct bh_limits *l);

int oci_devices_apply(struct oci_config *cfg, struct bh_error *err)
{
    struct bh_sandbox_spec *spec = &cfg->spec;
    /* No rules in the config still means runc's: default deny, then the
     * devices every container needs. */
    if (spec->limits.n_device_rules == 0)
        default_device_rules(&spec->limits);
    json_t *devs = cfg->devices;
    if (devs == NULL || json_array_size(devs) == 0)
        return 0;
    /* With no maps of the caller's, the node is idmapped with the sandbox's
     * user namespace like the rootfs (config.c): host 0 shows as its 0. */
    bool idmapped = spec->n_uid_maps == 0 && spec->ns_paths[BH_NS_USER] == NULL;
    cleanup_close int tree = -1;
    size_t i;
    json_t *d;
    json_array_foreach(devs, i, d)
    {
        const char *path = json_string_value(json_object_get(d, "path"));
        const char *type = json_string_value(json_object_get(d, "type"));
        unsigned major = (unsigned)json_integer_value(json_object_get(d, "major"));
        unsigned minor = (unsigned)json_integer_value(json_object_get(d, "minor"));
        const struct bh_dev_node *own = own_node(path);
        if (own != NULL) {
            if (strcmp(type, "c") != 0 || major != own->major || minor != own->minor)
                return bh_error_set(err, EINVAL,
                                    "config.json: device `%s` is listed as %s %u:%u, but every "
                                    "sandbox's %s is c %u:%u",
                                    path, type, major, minor, path, own->major, own->minor);
            continue;
        }
        bool block = strcmp(type, "b") == 0, fifo = strcmp(type, "p") == 0;
        if (spec->tier >= BH_TIER_KERNEL && fifo)
            return bh_error_set(err, EPERM,
                                "config.json: fifo `%s` is refused at the kernel tier: the "
                                "sentry brokers every open and exposes only null, zero, full, "
                                "random, urandom, tty and ptmx, and a fifo's open would block "
                                "it. Run the container at the container tier (annotation "
                                "dev.bulkhead.tier=container) to get the node",
                                path);
        if (spec->tier >= BH_TIER_KERNEL)
            return bh_error_set(err, EPERM,
                                "config.json: device `%s` (%s %u:%u) is refused at the kernel "
                                "tier: the sentry brokers every open and exposes only null, "
                                "zero, full, random, urandom, tty and ptmx; a host %s device is "
                                "host state no broker rule confines. Run the container at the "
                                "container tier (annotation dev.bulkhead.tier=container) to "
                                "get the node",
                                path, type, major, minor, block ? "block" : "character");
        uint32_t mode, uid, gid;
        if (number_or(d, "fileMode", 0666, &mode) < 0 || number_or(d, "uid", 0, &uid) < 0 ||
            number_or(d, "gid", 0, &gid) < 0)
            return bh_error_set(err, EINVAL,
                                "config.json: device `%s`: `fileMode`, `uid` and `gid` must be "
                                "non-negative integers",
                                path);
        int64_t huid = host_id(spec->uid_maps, spec->n_uid_maps, idmapped, uid);
        int64_t hgid = host_id(spec->gid_maps, spec->n_gid_maps, idmapped, gid);
        if (huid < 0 || hgid < 0)
            return bh_error_set(err, EINVAL,
                                "config.json: device `%s` belongs to %u:%u, which the "
                                "container's uid/gid mappings leave out",
                                path, uid, gid);
        if (tree < 0 && (tree = node_tree(json_array_size(devs), err)) < 0)
            return -1;
        /* The container's own node, never the host's: its owner and mode
         * are the config's, and the host's /dev stays as it is. What the
         * container may do with it is the device cgroup's to say. */
        char name[32];
        snprintf(name, sizeof(name), "%zu", i);
        mode_t kind = fifo ? S_IFIFO : block ? S_IFBLK : S_IFCHR;
        if (mknodat(tree, name, kind | (mode & 0777), fifo ? 0 : makedev(major, minor)) < 0 ||
            fchmodat(tree, name, mode & 07777 & ~(mode_t)(S_ISUID | S_ISGID), 0) < 0 ||
            fchownat(tree, name, (uid_t)huid, (gid_t)hgid, AT_SYMLINK_NOFOLLOW) < 0)
            return bh_error_errno(err, errno, "linux.devices: make `%s` (%s %u:%u)", path, type,
                                  major, minor);
        cleanup_close int node =
            open_tree(tree, name, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (node < 0)
            return bh_error_errno(err, errno, "linux.devices: detach `%s`", path);
        struct bh_mount *mounts = realloc(spec->mounts, (spec->n_mounts + 1) * sizeof(*mounts));
        if (mounts == NULL)
            return bh_error_errno(err, ENOMEM, "device `%s`", path);
        spec->mounts = mounts;
        struct bh_mount *m = &spec->mounts[spec->n_mounts];
        memset(m, 0, sizeof(*m));
        m->source = strdup(path);
        m->destination = strdup(path);
        m->type = strdup("bind");
        m->flags = MS_BIND | MS_NOSUID | MS_NOEXEC;
        m->idmap = idmapped;
        m->has_tree_fd = true;
        m->tree_fd = -1;
        spec->n_mounts++;
        if (m->source == NULL || m->destination == NULL || m->type == NULL)
            return bh_error_errno(err, ENOMEM, "device `%s`", path);
        m->tree_fd = steal_fd(&node);
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

static void default_device_rules(struct bh_limits *l)
{
    for (size_t k = 0; k < BH_ARRAY_SIZE(default_rules); k++)
        l->device_rules[k] = default_rules[k];
    l->n_device_rules = BH_ARRAY_SIZE(default_rules);
}

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
