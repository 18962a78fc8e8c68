/* Private to the core: what the front end's half (sandbox.c) hands the
 * sentry program (sentry-main.c) besides the spec: its parameters and the
 * compiled seccomp programs. */
#ifndef BH_SENTRY_PARAMS_INTERNAL_H
#define BH_SENTRY_PARAMS_INTERNAL_H

#include <linux/filter.h>
#include <stdbool.h>
#include <stdint.h>

#include "error.h"

/* What only the core adds when handing the spec to the sentry. */
struct bh_sentry_params {
    bool detached;
    char *state_dir;                 /* detached: where sentry.sock goes */
    bool has_extra_policy;           /* a third BPF program (the caller's) was sent */
    bool has_console;                /* a connected console socket was sent */
    uint32_t sentry_uid, sentry_gid; /* inside ids the sentry drops to */
    bool made_netns, made_utsns;
    /* The pid namespace is a pod's, joined: the sentry is not pid 1 there. */
    bool joined_pidns;
    /* Stop before pivot_root for the front end's hooks (bh_create_opts.mounted). */
    bool pause_mounted;
};
void bh_sentry_params_free(struct bh_sentry_params *p);

/* Reads a compiled program sent by the front end (a sealed memfd: magic,
 * notify flag, BPF); prog->filter is malloc'd. */
int bh_bpf_blob_read(int fd, bool *has_notify, struct sock_fprog *prog, struct bh_error *err);

#endif
