/* The sandbox's network namespace: only loopback, brought up through libnl. */
#ifndef BH_NETNS_H
#define BH_NETNS_H

#include <stddef.h>

#include "error.h"

/* Brings lo up in the current network namespace. */
int bh_netns_loopback_up(struct bh_error *err);
/* Names of every link in the current netns; *names is malloc'd, each name too. */
int bh_netns_links(char ***names, size_t *n, struct bh_error *err);

#endif
