/* Owns linux.resources.blockIO of a config (and of `update -r`): the
 * weights, per-device weights and throttles runc writes to the blkio (v1) or
 * io (v2) cgroup, checked here and applied by the core's cgroup backends. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "oci-internal.h"

/* An integer member in min..max; absent leaves *out alone. */
static int blkio_int(json_t *o, const char *key, const char *where, long long min, long long max,
                     long long *out, struct bh_error *err)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return bh_error_set(err, EINVAL, "config.json: `%s.%s` must be an integer in %lld..%lld",
                            where, key, min, max);
    *out = json_integer_value(v);
    return 0;
}

/* One device list: {major, minor} plus weight/leafWeight or rate. */
static int blkio_devices(json_t *list, const char *where, bool weights, struct bh_blkio_device *out,
                         size_t *n, struct bh_error *err)
{
    if (list == NULL || json_is_null(list))
        return 0;
    if (!json_is_array(list))
        return bh_error_set(err, EINVAL, "config.json: `%s` must be an array", where);
    if (json_array_size(list) > BH_MAX_BLKIO_DEVICES)
        return bh_error_set(err, E2BIG, "config.json: `%s` lists %zu devices; at most %d", where,
                            json_array_size(list), BH_MAX_BLKIO_DEVICES);
    size_t i;
    json_t *d;
    json_array_foreach(list, i, d)
    {
        char w[128];
        snprintf(w, sizeof(w), "%s[%zu]", where, i);
        if (!json_is_object(d))
            return bh_error_set(err, EINVAL, "config.json: `%s` must be an object", w);
        long long major = -1, minor = -1, weight = 0, leaf = 0, rate = -1;
        if (blkio_int(d, "major", w, 0, UINT32_MAX, &major, err) < 0 ||
            blkio_int(d, "minor", w, 0, UINT32_MAX, &minor, err) < 0)
            return -1;
        if (major < 0 || minor < 0)
            return bh_error_set(err, EINVAL, "config.json: `%s` needs `major` and `minor`", w);
        struct bh_blkio_device *o = &out[*n];
        memset(o, 0, sizeof(*o));
        o->major = major;
        o->minor = minor;
        if (weights) {
            /* 0 leaves the kernel's value, as runc skips it. */
            if (blkio_int(d, "weight", w, 0, 1000, &weight, err) < 0 ||
                blkio_int(d, "leafWeight", w, 0, 1000, &leaf, err) < 0)
                return -1;
            o->weight = (uint16_t)weight;
            o->leaf_weight = (uint16_t)leaf;
        } else {
            if (blkio_int(d, "rate", w, 0, INT64_MAX, &rate, err) < 0)
                return -1;
            if (rate < 0)
                return bh_error_set(err, EINVAL, "config.json: `%s` needs `rate`", w);
            o->rate = (uint64_t)rate;
        }
        (*n)++;
    }
    return 0;
}

int oci_blockio_parse(json_t *bio, const char *where, struct bh_limits *l, struct bh_error *err)
{
    if (bio == NULL || json_is_null(bio))
        return 0;
    char w[96];
    snprintf(w, sizeof(w), "%s.blockIO", where);
    if (!json_is_object(bio))
        return bh_error_set(err, EINVAL, "config.json: `%s` must be an object", w);
    long long weight = 0, leaf = 0;
    /* The kernel takes 10..1000; 0 is "not set" (runc skips it). */
    if (blkio_int(bio, "weight", w, 0, 1000, &weight, err) < 0 ||
        blkio_int(bio, "leafWeight", w, 0, 1000, &leaf, err) < 0)
        return -1;
    l->blkio_weight = (uint16_t)weight;
    l->blkio_leaf_weight = (uint16_t)leaf;
    char lw[128];
    snprintf(lw, sizeof(lw), "%s.weightDevice", w);
    l->n_blkio_weight_devices = 0;
    if (blkio_devices(json_object_get(bio, "weightDevice"), lw, true, l->blkio_weight_devices,
                      &l->n_blkio_weight_devices, err) < 0)
        return -1;
    static const char *const lists[BH_THROTTLE_N] = {
        "throttleReadBpsDevice", "throttleWriteBpsDevice", "throttleReadIOPSDevice",
        "throttleWriteIOPSDevice"};
    for (int t = 0; t < BH_THROTTLE_N; t++) {
        snprintf(lw, sizeof(lw), "%s.%s", w, lists[t]);
        l->n_blkio_throttle[t] = 0;
        if (blkio_devices(json_object_get(bio, lists[t]), lw, false, l->blkio_throttle[t],
                          &l->n_blkio_throttle[t], err) < 0)
            return -1;
    }
    return 0;
}
