/* Owns the sandbox's network namespace setup: bringing loopback up and
 * listing links, both through libnl-route (no `ip` binary, no shell). */
#include "netns.h"

#include <errno.h>
#include <net/if.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/netlink.h>
#include <netlink/route/link.h>

#include "cleanup.h"

static int nl_to_errno(int nlerr)
{
    switch (nlerr < 0 ? -nlerr : nlerr) {
    case NLE_PERM:
        return EPERM;
    case NLE_NOMEM:
        return ENOMEM;
    case NLE_OBJ_NOTFOUND:
    case NLE_NODEV:
        return ENODEV;
    case NLE_NOACCESS:
        return EACCES;
    case NLE_BUSY:
        return EBUSY;
    default:
        return EIO;
    }
}

static int nl_error(struct bh_error *err, int nlerr, const char *what)
{
    return bh_error_set(err, nl_to_errno(nlerr), "%s: %s", what, nl_geterror(nlerr));
}

static void sock_freep(struct nl_sock **sk)
{
    if (*sk != NULL)
        nl_socket_free(*sk); /* closes the socket too */
}

static void link_putp(struct rtnl_link **l)
{
    if (*l != NULL)
        rtnl_link_put(*l);
}

static void cache_freep(struct nl_cache **c)
{
    if (*c != NULL)
        nl_cache_free(*c);
}

static int route_socket(struct nl_sock **out, struct bh_error *err)
{
    struct nl_sock *sk = nl_socket_alloc();
    if (sk == NULL)
        return bh_error_set(err, ENOMEM, "allocate a netlink socket");
    /* libnl opens it with SOCK_CLOEXEC. */
    int rc = nl_connect(sk, NETLINK_ROUTE);
    if (rc < 0) {
        nl_socket_free(sk);
        return nl_error(err, rc, "connect to rtnetlink");
    }
    *out = sk;
    return 0;
}

int bh_netns_loopback_up(struct bh_error *err)
{
    __attribute__((cleanup(sock_freep))) struct nl_sock *sk = NULL;
    __attribute__((cleanup(link_putp))) struct rtnl_link *lo = NULL;
    __attribute__((cleanup(link_putp))) struct rtnl_link *change = NULL;
    if (route_socket(&sk, err) < 0)
        return bh_error_prefix(err, "bring loopback up");
    int rc = rtnl_link_get_kernel(sk, 0, "lo", &lo);
    if (rc < 0)
        return nl_error(err, rc, "bring loopback up: look up `lo`");
    if (rtnl_link_get_flags(lo) & IFF_UP)
        return 0;
    change = rtnl_link_alloc();
    if (change == NULL)
        return bh_error_set(err, ENOMEM, "bring loopback up");
    rtnl_link_set_flags(change, IFF_UP);
    rc = rtnl_link_change(sk, lo, change, 0);
    if (rc < 0)
        return nl_error(err, rc, "bring loopback up: set IFF_UP on `lo`");
    return 0;
}

int bh_netns_links(char ***names, size_t *n, struct bh_error *err)
{
    __attribute__((cleanup(sock_freep))) struct nl_sock *sk = NULL;
    __attribute__((cleanup(cache_freep))) struct nl_cache *cache = NULL;
    if (route_socket(&sk, err) < 0)
        return bh_error_prefix(err, "list links");
    int rc = rtnl_link_alloc_cache(sk, AF_UNSPEC, &cache);
    if (rc < 0)
        return nl_error(err, rc, "list links");
    size_t count = (size_t)nl_cache_nitems(cache);
    char **out = calloc(count + 1, sizeof(*out));
    if (out == NULL)
        return bh_error_set(err, ENOMEM, "list links");
    size_t i = 0;
    for (struct nl_object *o = nl_cache_get_first(cache); o != NULL && i < count;
         o = nl_cache_get_next(o)) {
        const char *name = rtnl_link_get_name((struct rtnl_link *)o);
        out[i] = strdup(name != NULL ? name : "");
        if (out[i] == NULL) {
            for (size_t j = 0; j < i; j++)
                free(out[j]);
            free(out);
            return bh_error_set(err, ENOMEM, "list links");
        }
        i++;
    }
    *names = out;
    *n = i;
    return 0;
}
