/* A pod made with `bulkhead create` the way containerd's CRI makes one: a
 * pause container in a network namespace the host owns, and a container
 * that joins the pause container's network, ipc, uts and pid namespaces by
 * /proc/PID/ns paths. (tests/e2e/cri/run does the same through containerd.)
 * Checks: the joiner starts at the kernel tier with the mqueue and sysfs
 * mounts a CRI config has, shares the pause sandbox's user namespace, sees
 * no host interface in /sys, dies with its sentry (which is not pid 1), and
 * delete leaves nothing. */
#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char tmp[256];
static char ids[2][64];
static int n_ids;
static pid_t netns_holder = -1;

static void bh(const char *const *args, int timeout_s, struct run_result *r)
{
    h_bulkhead_in(tmp, args, timeout_s, r);
}

static void setup(void)
{
    h_build();
    h_require_kernel_tier();
    snprintf(tmp, sizeof(tmp), "/tmp/bh-pods-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    chmod(tmp, 0711);
    h_bundle_skeleton(tmp);
    n_ids = 0;
}

static void teardown(void)
{
    for (int i = n_ids - 1; i >= 0; i--) {
        struct run_result r;
        bh((const char *const[]){"delete", "--force", ids[i], NULL}, 30, &r);
        h_free(&r);
    }
    if (netns_holder > 0) {
        kill(netns_holder, SIGKILL);
        waitpid(netns_holder, NULL, 0);
        netns_holder = -1;
    }
    h_remove_tree(tmp);
}

TestSuite(pods, .init = setup, .fini = teardown, .timeout = 120);

/* The pod's network namespace, owned by the host (as containerd's CNI netns
 * is): held by a child of ours that only waits. Only lo in it. */
static void make_pod_netns(char *path, size_t len)
{
    int p[2];
    cr_assert_eq(pipe(p), 0);
    netns_holder = fork();
    cr_assert_geq(netns_holder, 0);
    if (netns_holder == 0) {
        close(p[0]);
        char ok = unshare(CLONE_NEWNET) == 0 ? 'y' : 'n';
        if (write(p[1], &ok, 1) != 1)
            _exit(1);
        for (;;)
            pause();
    }
    close(p[1]);
    char ok = 0;
    cr_assert_eq(read(p[0], &ok, 1), 1);
    close(p[0]);
    cr_assert_eq(ok, 'y', "unshare(CLONE_NEWNET)");
    snprintf(path, len, "/proc/%d/ns/net", (int)netns_holder);
}

/* A config as a CRI writes it (mqueue, sysfs, proc mounts), running args,
 * with namespaces given as JSON. */
static void config(const char *args, const char *namespaces)
{
    char cfg[6144];
    snprintf(cfg, sizeof(cfg),
             "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true},"
             " \"annotations\": {\"dev.bulkhead.tier\": \"kernel\"},"
             " \"process\": {\"args\": %s, \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0},"
             " \"env\": [\"PATH=/usr/bin\"]},"
             " \"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\","
             " \"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": \"proc\","
             " \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", \"source\":"
             " \"tmpfs\"}, {\"destination\": \"/dev/mqueue\", \"type\": \"mqueue\", \"source\":"
             " \"mqueue\", \"options\": [\"nosuid\", \"noexec\", \"nodev\"]}, {\"destination\":"
             " \"/sys\", \"type\": \"sysfs\", \"source\": \"sysfs\", \"options\": [\"nosuid\","
             " \"noexec\", \"nodev\", \"ro\"]}], \"linux\": {\"namespaces\": %s}}",
             args, namespaces);
    char p[512];
    snprintf(p, sizeof(p), "%s/bundle/config.json", tmp);
    FILE *f = fopen(p, "w");
    cr_assert_not_null(f);
    fputs(cfg, f);
    fclose(f);
}

static pid_t run_container(const char *name)
{
    snprintf(ids[n_ids], sizeof(ids[0]), "%s-%d", name, (int)getpid());
    const char *id = ids[n_ids++];
    char bundle[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    bh((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "create %s: %s", name, r.err);
    h_free(&r);
    bh((const char *const[]){"start", id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "start %s: %s", name, r.err);
    h_free(&r);
    bh((const char *const[]){"state", id, NULL}, 30, &r);
    cr_assert_eq(r.status, 0, "state: %s", r.err);
    const char *p = strstr(r.out, "\"pid\":");
    cr_assert_not_null(p, "%s", r.out);
    pid_t pid = (pid_t)atoi(p + 6 + strspn(p + 6, " "));
    h_free(&r);
    return pid;
}

/* The sentry's first child: the container's process, host pid. */
static pid_t guest_of(pid_t sentry)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)sentry, (int)sentry);
    /* 120 s bounds a hang only: 2 s was a speed limit under load */
    for (double end = h_now() + 120; h_now() < end;) {
        FILE *f = fopen(p, "r");
        int g = 0;
        if (f != NULL) {
            if (fscanf(f, "%d", &g) != 1)
                g = 0;
            fclose(f);
        }
        if (g > 0)
            return g;
        usleep(10000);
    }
    cr_assert_fail("sentry %d has no guest", (int)sentry);
    return -1;
}

static void ns_of(pid_t pid, const char *ns, char *out, size_t len)
{
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/ns/%s", (int)pid, ns);
    ssize_t n = readlink(p, out, len - 1);
    cr_assert_gt(n, 0, "readlink %s: %s", p, strerror(errno));
    out[n] = '\0';
}

static bool gone(pid_t pid)
{
    char p[64], buf[4096];
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "r");
    if (f == NULL)
        return true;
    bool zombie = false;
    while (fgets(buf, sizeof(buf), f) != NULL)
        if (strncmp(buf, "State:", 6) == 0 && strchr(buf, 'Z') != NULL)
            zombie = true;
    fclose(f);
    return zombie;
}

/* A pod as a CRI makes it: a pause container in a host-owned netns, then
 * a container running joiner_args that joins its pid, network, ipc and uts
 * namespaces (ids[0], ids[1]). Returns the joiner's sentry. */
static pid_t run_pod(const char *joiner_args, pid_t *pause_sentry)
{
    char netns[64], ns[400];
    make_pod_netns(netns, sizeof(netns));
    snprintf(ns, sizeof(ns),
             "[{\"type\": \"pid\"}, {\"type\": \"mount\"}, {\"type\": \"network\", \"path\": "
             "\"%s\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}]",
             netns);
    config("[\"/usr/bin/sleep\", \"1000\"]", ns);
    *pause_sentry = run_container("pause");

    char join[1024];
    snprintf(join, sizeof(join),
             "[{\"type\": \"pid\", \"path\": \"/proc/%d/ns/pid\"}, {\"type\": \"mount\"},"
             " {\"type\": \"network\", \"path\": \"%s\"}, {\"type\": \"ipc\", \"path\":"
             " \"/proc/%d/ns/ipc\"}, {\"type\": \"uts\", \"path\": \"/proc/%d/ns/uts\"}]",
             (int)*pause_sentry, netns, (int)*pause_sentry, (int)*pause_sentry);
    config(joiner_args, join);
    return run_container("joiner");
}

Test(pods, joiner_shares_the_pause_sandbox_user_namespace)
{
    pid_t pause_sentry;
    pid_t sentry = run_pod("[\"/usr/bin/sh\", \"-c\", \"sleep 1000 & sleep 1000\"]", &pause_sentry);
    pid_t pause = guest_of(pause_sentry);
    pid_t guest = guest_of(sentry);

    /* One user namespace for the pod, not the host's; shared net, ipc, uts, pid. */
    const char *names[] = {"user", "net", "ipc", "uts", "pid"};
    for (size_t i = 0; i < 5; i++) {
        char a[128], b[128];
        ns_of(guest, names[i], a, sizeof(a));
        ns_of(pause, names[i], b, sizeof(b));
        cr_expect_str_eq(a, b, "%s namespace not shared with the pause sandbox", names[i]);
    }
    char host_user[128], user[128];
    ns_of(getpid(), "user", host_user, sizeof(host_user));
    ns_of(guest, "user", user, sizeof(user));
    cr_expect_str_neq(user, host_user);

    /* /sys is the pod netns's sysfs: lo, none of the host's interfaces. */
    struct run_result r;
    bh((const char *const[]){"exec", ids[1], "/usr/bin/ls", "/sys/class/net", NULL}, 30, &r);
    cr_expect_eq(r.status, 0, "%s", r.err);
    cr_expect_str_eq(r.out, "lo\n", "/sys/class/net in the joiner: %s", r.out);
    h_free(&r);

    /* The live check accepts the joiner's sentry (not pid 1) at the kernel tier. */
    bh((const char *const[]){"tier", "--container", ids[1], NULL}, 60, &r);
    cr_expect_eq(r.status, 0, "tier: %s%s", r.out, r.err);
    h_free(&r);

    /* The sentry is not pid 1: its guest and the guest's child still die with it. */
    char p[64];
    snprintf(p, sizeof(p), "/proc/%d/task/%d/children", (int)guest, (int)guest);
    int grandchild = 0;
    for (int i = 0; i < 200 && grandchild == 0; i++) {
        FILE *f = fopen(p, "r");
        if (f != NULL) {
            if (fscanf(f, "%d", &grandchild) != 1)
                grandchild = 0;
            fclose(f);
        }
        if (grandchild == 0)
            usleep(10000);
    }
    cr_assert_gt(grandchild, 0, "the guest has no child");
    cr_assert_eq(kill(sentry, SIGKILL), 0);
    for (double end = h_now() + 30; !gone(guest) && h_now() < end;)
        usleep(10000);
    cr_expect(gone(guest), "guest %d outlived its sentry %d", (int)guest, (int)sentry);
    /* What the shim does when that container's first process is gone. */
    bh((const char *const[]){"kill", "--all", ids[1], "KILL", NULL}, 30, &r);
    cr_expect_eq(r.status, 0, "kill --all of the stopped joiner: %s", r.err);
    h_free(&r);
    for (double end = h_now() + 30; !gone(grandchild) && h_now() < end;)
        usleep(10000);
    cr_expect(gone(grandchild), "the guest's child %d outlived the sentry", grandchild);
    cr_expect(!gone(pause), "the pause sandbox died with the joiner");
}

Test(pods, host_pid_namespace_refused)
{
    config("[\"/usr/bin/true\"]",
           "[{\"type\": \"pid\", \"path\": \"/proc/self/ns/pid\"}, {\"type\": \"mount\"}]");
    snprintf(ids[n_ids], sizeof(ids[0]), "nopid-%d", (int)getpid());
    const char *id = ids[n_ids++];
    char bundle[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    bh((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "only a pod's pid namespace") != NULL, "%s", r.err);
    h_free(&r);
}

/* Red team (session 7, branch redteam4): a container of a pod shares the
 * pause sandbox's user and pid namespaces, so both sentries are processes
 * it can name. A sentry holds host descriptors (the broker's), so its
 * memory, descriptors and root must stay out of reach of every container of
 * the pod, its own sentry included. Each target is tried through
 * /proc/PID/{mem,environ,fd,root}, pidfd_getfd and process_vm_readv; the
 * probe's own child is the control (its descriptors must be readable, or
 * the probe could not show anything). */
static const char pod_probe_py[] =
    "import ctypes, os, subprocess, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "def probe(p):\n"
    "    got, no = [], []\n"
    "    for what, f in (('mem', lambda: open(f'/proc/{p}/mem', 'rb').read(1)),\n"
    "                    ('environ', lambda: open(f'/proc/{p}/environ', 'rb').read(1)),\n"
    "                    ('fd', lambda: os.listdir(f'/proc/{p}/fd')),\n"
    "                    ('root', lambda: os.listdir(f'/proc/{p}/root/'))):\n"
    "        try: f(); got.append(what)\n"
    "        except OSError as e: no.append('%s:%d' % (what, e.errno))\n"
    "    pfd = libc.syscall(434, p, 0)\n" /* pidfd_open */
    "    if pfd < 0: no.append('pidfd:%d' % ctypes.get_errno())\n"
    "    if pfd >= 0:\n"
    "        for n in range(64):\n"
    "            if libc.syscall(438, pfd, n, 0) >= 0:\n" /* pidfd_getfd */
    "                got.append('getfd'); break\n"
    "        else: no.append('getfd:%d' % ctypes.get_errno())\n"
    "    buf = ctypes.create_string_buffer(8)\n"
    "    local = (ctypes.c_void_p * 2)(ctypes.cast(buf, ctypes.c_void_p), 8)\n"
    "    remote = (ctypes.c_void_p * 2)(0x1000, 8)\n"
    "    if libc.syscall(310, p, local, 1, remote, 1, 0) >= 0 or ctypes.get_errno() == 14:\n"
    "        got.append('vm')\n" /* EFAULT: the access check let it through */
    "    else: no.append('vm:%d' % ctypes.get_errno())\n"
    "    return 'reached=%s refused=%s' % (','.join(got) or '-', ','.join(no))\n"
    "print('control', probe(os.getpid()))\n"
    "for p in sys.argv[1:]: print(p, probe(int(p)))\n";

/* The pid of host pid in its innermost pid namespace (NSpid's last). */
static int ns_pid(pid_t pid)
{
    char p[64], line[256];
    snprintf(p, sizeof(p), "/proc/%d/status", (int)pid);
    FILE *f = fopen(p, "re");
    cr_assert_not_null(f, "%s", p);
    int last = -1;
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, "NSpid:", 6) == 0) {
            char *s = line + 6, *end;
            for (long v; (v = strtol(s, &end, 10)), end != s; s = end)
                last = (int)v;
        }
    fclose(f);
    return last;
}

Test(pods, a_container_reaches_no_sentry_of_its_pod)
{
    pid_t pause_sentry;
    pid_t sentry = run_pod("[\"/usr/bin/sleep\", \"1000\"]", &pause_sentry);
    char a[16], b[16];
    snprintf(a, sizeof(a), "%d", ns_pid(pause_sentry));
    snprintf(b, sizeof(b), "%d", ns_pid(sentry));
    struct run_result r;
    bh((const char *const[]){"exec", ids[1], "/usr/bin/python3", "-c", pod_probe_py, a, b, NULL},
       60, &r);
    cr_assert_eq(r.status, 0, "the probe did not run: %s%s", r.out, r.err);
    cr_assert(strstr(r.out, "control reached=") && strstr(r.out, "control reached=-") == NULL,
              "the probe reaches nothing even of its own child: it could not show an escape\n%s",
              r.out);
    char want[64];
    snprintf(want, sizeof(want), "\n%s reached=- ", a);
    cr_expect(strstr(r.out, want) != NULL,
              "the pause sandbox's sentry (pod pid %s) was reached:\n%s", a, r.out);
    snprintf(want, sizeof(want), "\n%s reached=- ", b);
    cr_expect(strstr(r.out, want) != NULL,
              "the container's own sentry (pod pid %s) was reached:\n%s", b, r.out);
    fprintf(stderr, "pod probe:\n%s", r.out);
    h_free(&r);
}

static long host_low_port_start(void)
{
    FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "re");
    cr_assert_not_null(f, "%s", strerror(errno));
    long v = -1;
    cr_assert_eq(fscanf(f, "%ld", &v), 1);
    fclose(f);
    return v;
}

/* A pod's network namespace is host-owned, so the runtime lets a config
 * granting CAP_NET_BIND_SERVICE bind low ports there by lowering that
 * namespace's own ip_unprivileged_port_start. A config naming the *host's*
 * network namespace must not get that: the sysctl would open ports below
 * 1024 to every user of the host. On the first version of that grant the
 * host's value became 0 although the create was then refused. */
static void host_netns_keeps_its_low_ports(const char *tier)
{
    long before = host_low_port_start();
    cr_assert_neq(before, 0,
                  "the host's ip_unprivileged_port_start is already 0: the test cannot show "
                  "that a create leaves it alone");
    char netns[64];
    snprintf(netns, sizeof(netns), "/proc/%d/ns/net", (int)getpid());
    char nss[256];
    snprintf(nss, sizeof(nss), "[{\"type\": \"network\", \"path\": \"%s\"}, {\"type\": \"mount\"}]",
             netns);
    config("[\"/usr/bin/true\"]", nss);
    char path[512];
    snprintf(path, sizeof(path), "%s/bundle/config.json", tmp);
    json_t *c = json_load_file(path, 0, NULL);
    cr_assert_not_null(c);
    json_object_set_new(json_object_get(c, "annotations"), "dev.bulkhead.tier", json_string(tier));
    json_t *caps = json_object();
    static const char *const sets[] = {"bounding", "effective", "permitted"};
    for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++)
        json_object_set_new(caps, sets[i], json_pack("[s]", "CAP_NET_BIND_SERVICE"));
    json_object_set_new(json_object_get(c, "process"), "capabilities", caps);
    cr_assert_eq(json_dump_file(c, path, 0), 0);
    json_decref(c);
    snprintf(ids[n_ids], sizeof(ids[0]), "hostnet-%s-%d", tier, (int)getpid());
    const char *id = ids[n_ids++];
    char bundle[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    bh((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    long after = host_low_port_start();
    if (after != before) {
        FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "we");
        if (f != NULL) {
            fprintf(f, "%ld\n", before);
            fclose(f);
        }
    }
    cr_assert_eq(after, before,
                 "a %s-tier create naming the host's network namespace changed the host's "
                 "ip_unprivileged_port_start from %ld to %ld (create: exit %d, %s)",
                 tier, before, after, r.status, r.err);
    h_free(&r);
}

Test(pods, a_config_naming_the_hosts_netns_leaves_its_low_ports_closed_container)
{
    host_netns_keeps_its_low_ports("container");
}

Test(pods, a_config_naming_the_hosts_netns_leaves_its_low_ports_closed_kernel)
{
    host_netns_keeps_its_low_ports("kernel");
}
