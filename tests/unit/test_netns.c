/* Network namespace: loopback brought up through libnl in a fresh netns,
 * only `lo` there, and the host's namespace left alone. */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "netns.h"

static int lo_flags(void)
{
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (s < 0)
        return -1;
    struct ifreq ifr = {0};
    strcpy(ifr.ifr_name, "lo");
    int rc = ioctl(s, SIOCGIFFLAGS, &ifr);
    close(s);
    return rc < 0 ? -1 : ifr.ifr_flags;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Exit codes name the step that failed. */
static int child_in_new_netns(void)
{
    if (unshare(CLONE_NEWNET) < 0)
        return 10;
    int f = lo_flags();
    if (f < 0 || (f & IFF_UP))
        return 11; /* a new netns starts with lo down */
    struct bh_error err = {0};
    if (bh_netns_loopback_up(&err) < 0) {
        fprintf(stderr, "loopback_up: %s\n", err.msg);
        return 12;
    }
    f = lo_flags();
    if (f < 0 || !(f & IFF_UP))
        return 13;
    if (bh_netns_loopback_up(&err) < 0) /* idempotent */
        return 14;
    char **names = NULL;
    size_t n = 0;
    if (bh_netns_links(&names, &n, &err) < 0) {
        fprintf(stderr, "links: %s\n", err.msg);
        return 15;
    }
    int bad = n != 1 || strcmp(names[0], "lo") != 0;
    free_names(names, n);
    if (bad)
        return 16;
    /* Loopback carries traffic. */
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    if (ls < 0 || bind(ls, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(ls, 1) < 0 ||
        getsockname(ls, (struct sockaddr *)&a, &al) < 0)
        return 17;
    int cs = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (cs < 0 || connect(cs, (struct sockaddr *)&a, sizeof(a)) < 0)
        return 18;
    return 0;
}

Test(netns, loopback_up_in_a_fresh_netns_and_host_untouched)
{
    if (geteuid() != 0)
        cr_skip_test("needs root for unshare(CLONE_NEWNET)");
    char **before = NULL, **after = NULL;
    size_t nb = 0, na = 0;
    struct bh_error err = {0};
    cr_assert_eq(bh_netns_links(&before, &nb, &err), 0, "%s", err.msg);
    int host_lo = lo_flags();

    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0)
        _exit(child_in_new_netns());
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child died: %#x", status);
    cr_assert_eq(WEXITSTATUS(status), 0, "child failed at step %d", WEXITSTATUS(status));

    cr_assert_eq(bh_netns_links(&after, &na, &err), 0, "%s", err.msg);
    cr_assert_eq(na, nb);
    for (size_t i = 0; i < na; i++)
        cr_assert_str_eq(after[i], before[i]);
    cr_assert_eq(lo_flags(), host_lo);
    free_names(before, nb);
    free_names(after, na);
}

Test(netns, links_lists_every_link_of_the_host)
{
    char **names = NULL;
    size_t n = 0;
    struct bh_error err = {0};
    cr_assert_eq(bh_netns_links(&names, &n, &err), 0, "%s", err.msg);
    cr_assert_geq(n, 1);
    bool lo = false;
    for (size_t i = 0; i < n; i++) {
        cr_assert_not_null(names[i]);
        lo |= strcmp(names[i], "lo") == 0;
    }
    cr_assert_null(names[n]);
    cr_assert(lo, "no `lo` among %zu links", n);
    free_names(names, n);
}
