/* Allocation for the daemon's replies and session records.
 *
 * A reply built with a NULL field would go out as a different answer (an
 * empty session id, a missing tier) or crash the packer, and a caller must
 * never get a wrong answer silently. So the daemon ends instead, on the spot
 * and with the reason on stderr: its sessions live on in their keepers and
 * the next daemon adopts them (README.md: "Restarts and upgrades keep sessions"). */
#ifndef BULKHEAD_SUPERVISOR_ALLOC_H
#define BULKHEAD_SUPERVISOR_ALLOC_H

#include <stddef.h>

/* p itself, or the end of the daemon when p is NULL (bytes: what was asked). */
void *bhd_alloc_checked(void *p, size_t bytes);
void *bhd_xcalloc(size_t n, size_t size);
char *bhd_xstrdup(const char *s);

#endif
