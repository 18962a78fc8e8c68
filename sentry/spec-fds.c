/* Owns the layout of the fds that travel with the spec message (spec-fds.h):
 * one packer for the front end, one unpacker for the sentry. */
#include <errno.h>

#include "frame.h"
#include "spec-fds.h"

_Static_assert(BH_SPEC_FDS_MAX <= BH_FDS_PER_MSG, "the spec message's fds must fit one message");

void bh_spec_fds_init(struct bh_spec_fds *f)
{
    for (int i = 0; i < BH_SPEC_FD_N_SLOTS; i++)
        f->slot[i] = -1;
    for (int i = 0; i < BH_SPEC_MAX_TREES; i++)
        f->tree[i] = -1;
    f->n_trees = 0;
}

int bh_spec_fds_add_tree(struct bh_spec_fds *f, int fd, struct bh_error *err)
{
    if (f->n_trees >= BH_SPEC_MAX_TREES)
        return bh_error_set(err, E2BIG,
                            "at most %d prepared mounts (binds, the device tree, sysfs, the "
                            "rootfs) are supported: each travels to the sentry as one fd of the "
                            "spec message, whose fds are bounded",
                            BH_SPEC_MAX_TREES);
    f->tree[f->n_trees] = fd;
    return (int)f->n_trees++;
}

size_t bh_spec_fds_pack(const struct bh_spec_fds *f, int out[BH_SPEC_FDS_MAX])
{
    size_t n = 0;
    for (int i = 0; i < BH_SPEC_FD_N_SLOTS; i++)
        if (f->slot[i] >= 0)
            out[n++] = f->slot[i];
    for (size_t i = 0; i < f->n_trees; i++)
        out[n++] = f->tree[i];
    return n;
}

int bh_spec_fds_unpack(const int *fds, size_t n, bool extra, bool listen, bool console,
                       struct bh_spec_fds *f, struct bh_error *err)
{
    bool present[BH_SPEC_FD_N_SLOTS] = {
        [BH_SPEC_FD_SPEC] = true,       [BH_SPEC_FD_GUEST_BPF] = true,
        [BH_SPEC_FD_SENTRY_BPF] = true, [BH_SPEC_FD_EXTRA_BPF] = extra,
        [BH_SPEC_FD_LISTEN] = listen,   [BH_SPEC_FD_CONSOLE] = console,
    };
    bh_spec_fds_init(f);
    size_t k = 0;
    for (int i = 0; i < BH_SPEC_FD_N_SLOTS; i++) {
        if (!present[i])
            continue;
        if (k >= n)
            return bh_error_set(err, EPROTO, "the seccomp programs were not sent");
        f->slot[i] = fds[k++];
    }
    if (n - k > BH_SPEC_MAX_TREES)
        return bh_error_set(err, EPROTO, "more prepared trees than the sentry takes");
    for (; k < n; k++)
        f->tree[f->n_trees++] = fds[k];
    return 0;
}

int bh_spec_fds_tree(const struct bh_spec_fds *f, long long k)
{
    if (k < 0 || (unsigned long long)k >= f->n_trees)
        return -1;
    return f->tree[k];
}
