/* bh_pod_userns_find: which user namespace a sandbox joins with its joined
 * namespaces, and every refusal of it (userns.c, pods). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ids-internal.h"

static pid_t owner_child = -1;

static void stop_child(void)
{
    if (owner_child > 0) {
        kill(owner_child, SIGKILL);
        waitpid(owner_child, NULL, 0);
        owner_child = -1;
    }
}

/* A process in a fresh user, net and ipc namespace (as a pod's first sandbox
 * is), with uid_map and gid_map set to map (NULL: none). */
static pid_t pod_owner(const char *map)
{
    if (geteuid() != 0)
        cr_assert_fail("needs root on the host (it writes a child's id maps); run as root");
    int p[2];
    cr_assert_eq(pipe(p), 0);
    owner_child = fork();
    cr_assert_geq(owner_child, 0);
    if (owner_child == 0) {
        close(p[0]);
        char ok = unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    cr_assert_eq(read(p[0], &ok, 1), 1);
    close(p[0]);
    cr_assert_eq(ok, 'y', "unshare(CLONE_NEWUSER) failed in the owner_child");
    if (map != NULL) {
        const char *files[] = {"uid_map", "gid_map"};
        for (int i = 0; i < 2; i++) {
            char path[64];
            snprintf(path, sizeof(path), "/proc/%d/%s", (int)owner_child, files[i]);
            int fd = open(path, O_WRONLY | O_CLOEXEC);
            cr_assert_geq(fd, 0, "%s: %s", path, strerror(errno));
            cr_assert_eq(write(fd, map, strlen(map)), (ssize_t)strlen(map), "%s: %s", path,
                         strerror(errno));
            close(fd);
        }
    }
    return owner_child;
}

static int find(const char *net, const char *ipc, const char *pid, struct bh_pod_userns *pod,
                struct bh_error *err)
{
    struct bh_sandbox_spec s = {0};
    s.ns_paths[BH_NS_NET] = (char *)net;
    s.ns_paths[BH_NS_IPC] = (char *)ipc;
    s.ns_paths[BH_NS_PID] = (char *)pid;
    return bh_pod_userns_find(&s, pod, err);
}

Test(pods, host_owned_namespaces_need_no_pod, .fini = stop_child)
{
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    cr_assert_eq(find("/proc/self/ns/net", "/proc/self/ns/ipc", NULL, &pod, &err), 0, "%s",
                 err.msg);
    cr_expect_eq(pod.userns_fd, -1);
    bh_pod_userns_free(&pod);
}

Test(pods, host_pid_namespace_refused, .fini = stop_child)
{
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    cr_assert_eq(find(NULL, NULL, "/proc/self/ns/pid", &pod, &err), -1);
    cr_expect(strstr(err.msg, "only a pod's pid namespace") != NULL, "%s", err.msg);
}

Test(pods, joins_the_owner_with_its_maps, .fini = stop_child)
{
    pid_t pid = pod_owner("0 1500000000 10\n");
    char net[64], ipc[64];
    snprintf(net, sizeof(net), "/proc/%d/ns/net", (int)pid);
    snprintf(ipc, sizeof(ipc), "/proc/%d/ns/ipc", (int)pid);
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    cr_assert_eq(find(net, ipc, NULL, &pod, &err), 0, "%s", err.msg);
    cr_expect_geq(pod.userns_fd, 0);
    cr_expect_eq(pod.owner_pid, pid);
    cr_expect(pod.n_uid == 1 && pod.uid[0].inside == 0 && pod.uid[0].outside == 1500000000u &&
              pod.uid[0].count == 10);
    cr_expect_eq(pod.slot.lock_fd, -1, "a range that is no slot has no lock to hold");
    bh_pod_userns_free(&pod);
}

Test(pods, owner_mapping_host_root_refused, .fini = stop_child)
{
    pid_t pid = pod_owner("0 0 1\n");
    char net[64];
    snprintf(net, sizeof(net), "/proc/%d/ns/net", (int)pid);
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    cr_assert_eq(find(net, NULL, NULL, &pod, &err), -1);
    cr_expect(strstr(err.msg, "host root") != NULL, "%s", err.msg);
}

Test(pods, slot_range_without_its_lock_refused, .fini = stop_child)
{
    /* A slot's range whose owner holds no lock on fd 4: the range could be
     * handed out again while the joiner lives. */
    char map[64];
    snprintf(map, sizeof(map), "0 %u %u\n", BH_IDS_BASE + (BH_IDS_SLOTS - 1) * BH_IDS_SLOT_SIZE,
             BH_IDS_SLOT_SIZE);
    pid_t pid = pod_owner(map);
    char ipc[64];
    snprintf(ipc, sizeof(ipc), "/proc/%d/ns/ipc", (int)pid);
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    cr_assert_eq(find(NULL, ipc, NULL, &pod, &err), -1);
    cr_expect(strstr(err.msg, "could not hold the pod's id range") != NULL, "%s", err.msg);
}

Test(pods, two_owners_refused, .fini = stop_child)
{
    pid_t pid = pod_owner("0 1500000000 10\n");
    char net[64];
    snprintf(net, sizeof(net), "/proc/%d/ns/net", (int)pid);
    /* With a host-owned ipc namespace beside it: fine. With a second
     * owner's ipc namespace: refused. */
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    cr_assert_eq(find(net, "/proc/self/ns/ipc", NULL, &pod, &err), 0, "%s", err.msg);
    bh_pod_userns_free(&pod);
    pid_t first = owner_child;
    owner_child = -1;
    pid_t second = pod_owner("0 1500000100 10\n");
    char ipc[64];
    snprintf(ipc, sizeof(ipc), "/proc/%d/ns/ipc", (int)second);
    cr_expect_eq(find(net, ipc, NULL, &pod, &err), -1);
    cr_expect(strstr(err.msg, "two different sandboxes") != NULL, "%s", err.msg);
    kill(first, SIGKILL);
    waitpid(first, NULL, 0);
}

Test(pods, owner_not_named_by_proc_path_refused, .fini = stop_child)
{
    pid_t pid = pod_owner("0 1500000000 10\n");
    char link[64], target[64];
    snprintf(link, sizeof(link), "/tmp/bh-pods-test-%d", (int)getpid());
    snprintf(target, sizeof(target), "/proc/%d/ns/net", (int)pid);
    /* A path that is not /proc/PID/ns/...: a symlink to it. */
    cr_assert_eq(symlink(target, link), 0, "%s", strerror(errno));
    struct bh_pod_userns pod;
    struct bh_error err = {0};
    int rc = find(link, NULL, NULL, &pod, &err);
    unlink(link);
    cr_expect_eq(rc, -1);
    cr_expect(strstr(err.msg, "/proc/PID/ns") != NULL, "%s", err.msg);
}
