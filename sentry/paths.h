/* Where bulkhead's helper files live: bulkhead-sentry, bulkhead-probe,
 * seccomp-policies/ and runners/. Looked up next to the running binary
 * (a build directory), then in PREFIX/lib/bulkhead; the environment
 * variable BULKHEAD_LIBEXEC names another directory and wins. */
#ifndef BH_PATHS_H
#define BH_PATHS_H

#include <stddef.h>

#include "error.h"

#ifndef BH_PREFIX
#define BH_PREFIX "/usr/local"
#endif

/* Fills buf with the absolute path of name (e.g. "bulkhead-sentry",
 * "seccomp-policies/kernel.policy") in the first directory that has it. */
int bh_path_find(const char *name, char *buf, size_t size, struct bh_error *err);

/* The policy file of a tier role ("container", "kernel", "sentry"). */
int bh_path_policy(const char *role, char *buf, size_t size, struct bh_error *err);

#endif
