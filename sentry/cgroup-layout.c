/* Owns finding the cgroup layout (v1, v2, hybrid; BULKHEAD_CGROUP_LAYOUT
 * forces one) and the hierarchies a sandbox lives in. A root that is not a
 * cgroup filesystem is a fake tree: its layout comes from markers
 * (cgroup.controllers at the root: v2; a `unified` directory: hybrid; else
 * v1), its v1 controllers from directory names (split on ',' so
 * "cpu,cpuacct" is one combined hierarchy); on a real host the v1
 * controllers come from /proc/self/mountinfo. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>

#include "cgroup-internal.h"
#include "cleanup.h"
#include "kernel-compat.h"
#include "mountinfo.h"

static long fs_magic(const char *path)
{
    struct statfs sfs;
    if (statfs(path, &sfs) < 0)
        return 0;
    return (long)sfs.f_type;
}

/* ---- layout and hierarchies --------------------------------------------- */

static enum bh_cgroup_layout layout_from_markers(const char *root)
{
    char p[PATH_MAX];
    if (cg_file_exists(root, "cgroup.controllers"))
        return BH_CGROUP_V2;
    snprintf(p, sizeof(p), "%s/unified", root);
    if (cg_is_dir(p))
        return BH_CGROUP_HYBRID;
    return cg_is_dir(root) ? BH_CGROUP_V1 : BH_CGROUP_UNKNOWN;
}

static bool root_is_fake(const char *root)
{
    long m = fs_magic(root);
    if (m == CGROUP2_SUPER_MAGIC)
        return false;
    /* v1 roots are a tmpfs holding cgroupfs mounts: real when the memory,
     * pids or unified child is one. */
    static const char *const probes[] = {"unified", "memory", "pids", "cpu", "freezer"};
    for (size_t i = 0; i < BH_ARRAY_SIZE(probes); i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", root, probes[i]);
        long cm = fs_magic(p);
        if (cm == CGROUP_SUPER_MAGIC || cm == CGROUP2_SUPER_MAGIC)
            return false;
    }
    return true;
}

enum bh_cgroup_layout bh_cgroup_detect(void)
{
    const char *forced = getenv("BULKHEAD_CGROUP_LAYOUT");
    if (forced != NULL && forced[0] != '\0') {
        if (strcmp(forced, "v1") == 0)
            return BH_CGROUP_V1;
        if (strcmp(forced, "v2") == 0)
            return BH_CGROUP_V2;
        if (strcmp(forced, "hybrid") == 0)
            return BH_CGROUP_HYBRID;
        return BH_CGROUP_UNKNOWN;
    }
    const char *root = cg_root();
    if (fs_magic(root) == CGROUP2_SUPER_MAGIC)
        return BH_CGROUP_V2;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/unified", root);
    if (fs_magic(p) == CGROUP2_SUPER_MAGIC)
        return BH_CGROUP_HYBRID;
    if (!root_is_fake(root))
        return BH_CGROUP_V1;
    return layout_from_markers(root);
}

const char *bh_cgroup_layout_name(enum bh_cgroup_layout layout)
{
    switch (layout) {
    case BH_CGROUP_V1:
        return "v1";
    case BH_CGROUP_V2:
        return "v2";
    case BH_CGROUP_HYBRID:
        return "hybrid";
    default:
        return "unknown";
    }
}

unsigned cg_ctls_from_list(const char *list)
{
    unsigned m = 0;
    cleanup_free char *copy = strdup(list);
    if (copy == NULL)
        return 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
        for (int c = 0; c < CTL_N; c++)
            if (strcmp(t, cg_ctl_names[c]) == 0)
                m |= 1u << c;
        /* v2 names v1's blkio `io`; no v1 hierarchy is called that. */
        if (strcmp(t, "io") == 0)
            m |= 1u << CTL_BLKIO;
    }
    return m;
}

static int add_hier(struct bh_cgroup *cg, const char *mount, unsigned ctls, bool unified,
                    struct bh_error *err)
{
    for (size_t i = 0; i < cg->nh; i++)
        if (strcmp(cg->h[i].mount, mount) == 0) {
            cg->h[i].ctls |= ctls;
            return 0;
        }
    if (cg->nh == MAX_HIER)
        return bh_error_set(err, E2BIG, "too many cgroup hierarchies under `%s`", mount);
    struct hier *h = &cg->h[cg->nh];
    h->mount = strdup(mount);
    if (h->mount == NULL || asprintf(&h->dir, "%s/%s", mount, cg->rel) < 0) {
        free(h->mount);
        h->mount = NULL;
        h->dir = NULL;
        return bh_error_errno(err, ENOMEM, "cgroup hierarchy `%s`", mount);
    }
    h->ctls = ctls;
    h->unified = unified;
    cg->nh++;
    return 0;
}

/* v1 hierarchies from /proc/self/mountinfo: cgroup mounts below the root,
 * controllers from the super options, so combined mounts ("cpu,cpuacct")
 * and any directory name work. */
static int v1_from_mountinfo(struct bh_cgroup *cg, const char *root, struct bh_error *err)
{
    struct bh_mountinfo mi;
    if (bh_mountinfo_open(&mi, err) < 0)
        return -1;
    size_t rl = strlen(root);
    struct bh_mount_entry e;
    int rc;
    while ((rc = bh_mountinfo_next(&mi, &e, err)) == 1) {
        if (strcmp(e.fstype, "cgroup") != 0)
            continue;
        if (strncmp(e.point, root, rl) != 0 || e.point[rl] != '/')
            continue;
        /* Named hierarchies (name=systemd) hold no controller but track
         * processes; runc joins them too. */
        unsigned ctls = cg_ctls_from_list(e.super_options);
        if ((ctls != 0 || strstr(e.super_options, "name=") != NULL) &&
            add_hier(cg, e.point, ctls, false, err) < 0) {
            rc = -1;
            break;
        }
    }
    bh_mountinfo_close(&mi);
    return rc < 0 ? -1 : 0;
}

static int v1_from_dirnames(struct bh_cgroup *cg, const char *root, struct bh_error *err)
{
    DIR *d = opendir(root);
    if (d == NULL)
        return bh_error_errno(err, errno, "open cgroup root `%s`", root);
    struct dirent *de;
    int rc = 0;
    while (rc == 0 && (de = readdir(d)) != NULL) {
        if (de->d_type != DT_DIR || de->d_name[0] == '.')
            continue;
        unsigned ctls = cg_ctls_from_list(de->d_name);
        if (ctls == 0)
            continue;
        char mnt[PATH_MAX];
        snprintf(mnt, sizeof(mnt), "%s/%s", root, de->d_name);
        rc = add_hier(cg, mnt, ctls, false, err);
    }
    closedir(d);
    return rc;
}

void cg_index_hiers(struct bh_cgroup *cg)
{
    for (int c = 0; c < CTL_N; c++)
        cg->ctl_h[c] = -1;
    cg->unified_h = -1;
    for (size_t i = 0; i < cg->nh; i++) {
        if (cg->h[i].unified)
            cg->unified_h = (int)i;
        for (int c = 0; c < CTL_N; c++)
            if (cg->h[i].ctls & (1u << c))
                cg->ctl_h[c] = (int)i;
    }
    if (cg->layout == BH_CGROUP_V2)
        for (int c = 0; c < CTL_N; c++)
            cg->ctl_h[c] = cg->unified_h;
}

/* Builds cg (without touching the kernel) for rel under the current root. */
int cg_new(const char *path, struct bh_cgroup **out, struct bh_error *err)
{
    struct bh_cgroup *cg = calloc(1, sizeof(*cg));
    if (cg == NULL)
        return bh_error_errno(err, ENOMEM, "cgroup");
    for (int c = 0; c < CTL_N; c++)
        cg->ctl_h[c] = -1;
    cg->unified_h = -1;
    if (cg_normalize_path(path, &cg->rel, err) < 0)
        goto fail;
    const char *root = cg_root();
    cg->layout = bh_cgroup_detect();
    cg->fake = root_is_fake(root);
    switch (cg->layout) {
    case BH_CGROUP_V2:
        cg->be = &cg_v2_backend;
        if (add_hier(cg, root, 0, true, err) < 0)
            goto fail;
        break;
    case BH_CGROUP_V1:
    case BH_CGROUP_HYBRID:
        cg->be = cg->layout == BH_CGROUP_V1 ? &cg_v1_backend : &cg_hybrid_backend;
        if ((cg->fake ? v1_from_dirnames(cg, root, err) : v1_from_mountinfo(cg, root, err)) < 0)
            goto fail;
        if (cg->layout == BH_CGROUP_HYBRID) {
            char u[PATH_MAX];
            snprintf(u, sizeof(u), "%s/unified", root);
            if (add_hier(cg, u, 0, true, err) < 0)
                goto fail;
        }
        break;
    default:
        bh_error_set(err, ENOTSUP,
                     "cgroup layout under `%s` not recognised (neither cgroup2 nor v1 "
                     "controllers); mount cgroups there or set BULKHEAD_CGROUP_ROOT",
                     root);
        goto fail;
    }
    cg_index_hiers(cg);
    if (cg->nh == 0) {
        bh_error_set(err, ENOTSUP, "no cgroup hierarchy found under `%s`", root);
        goto fail;
    }
    *out = cg;
    return 0;
fail:
    bh_cgroup_free(cg);
    return -1;
}
