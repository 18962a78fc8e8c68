/* `bulkhead checkpoint` and `restore` (oci/checkpoint.c): at either tier a
 * checkpoint of a running Python process is refused with the layer CRIU
 * would lose, and the process keeps running with its state, untouched;
 * restore is refused and creates nothing. The refusal's reason is checked
 * against the private CRIU 4.1.1 (tests/deps-criu): it dumps and restores a
 * host process here, and cannot dump a container-tier guest. Two more
 * measure the way forward (tests/README.md, "Branch criu"): CRIU inside a
 * sandbox's user namespace cannot trace a filtered task at all, and a
 * host-root CRIU in its target's own Landlock domain dumps it and restores
 * it with its filter and a domain. One more pins session 10's finding: run
 * the way runc runs it (host root, entered into the sandbox's namespaces),
 * CRIU gets past every other wall and stops only at the guests' scope. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static char tmp[256];
static char id[64];
static bool created;

static void bh(const char *const *args, int timeout_s, struct run_result *r)
{
    h_bulkhead_in(tmp, args, timeout_s, r);
}

static void setup(void)
{
    h_build();
    snprintf(tmp, sizeof(tmp), "/tmp/bh-ckpt-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    chmod(tmp, 0711);
    h_bundle_skeleton(tmp);
    created = false;
}

static void teardown(void)
{
    if (created) {
        struct run_result r;
        bh((const char *const[]){"delete", "--force", id, NULL}, 30, &r);
        h_free(&r);
    }
    h_remove_tree(tmp);
}

TestSuite(checkpoint, .init = setup, .fini = teardown, .timeout = 120);

/* A Python process whose state (a counter it keeps in memory and mirrors in
 * /tmp/n) must survive the refused checkpoint. */
static void start_counter(const char *tier)
{
    char cfg[4096];
    snprintf(
        cfg, sizeof(cfg),
        "{\"ociVersion\": \"1.0.2\", \"root\": {\"path\": \"rootfs\", \"readonly\": true},"
        " \"annotations\": {\"dev.bulkhead.tier\": \"%s\"},"
        " \"process\": {\"args\": [\"/usr/bin/python3\", \"-c\", \"import time\\nn = 0\\n"
        "while True:\\n    n += 1\\n    open('/tmp/n.new', 'w').write(str(n))\\n"
        "    __import__('os').rename('/tmp/n.new', '/tmp/n')\\n    time.sleep(0.02)\\n\"],"
        " \"cwd\": \"/\", \"user\": {\"uid\": 0, \"gid\": 0}, \"env\": [\"PATH=/usr/bin\"]},"
        " \"mounts\": [{\"destination\": \"/usr\", \"type\": \"bind\", \"source\": \"/usr\","
        " \"options\": [\"rbind\", \"ro\"]}, {\"destination\": \"/proc\", \"type\": \"proc\","
        " \"source\": \"proc\"}, {\"destination\": \"/tmp\", \"type\": \"tmpfs\", \"source\":"
        " \"tmpfs\"}], \"linux\": {\"namespaces\": [{\"type\": \"pid\"}, {\"type\": \"mount\"},"
        " {\"type\": \"network\"}, {\"type\": \"ipc\"}, {\"type\": \"uts\"}]}}",
        tier);
    h_write_file(tmp, "bundle/config.json", cfg);
    snprintf(id, sizeof(id), "ckpt-%s-%d", tier, (int)getpid());
    char bundle[300];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    struct run_result r;
    bh((const char *const[]){"create", "--bundle", bundle, id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "create at the %s tier: %s", tier, r.err);
    h_free(&r);
    created = true;
    bh((const char *const[]){"start", id, NULL}, 60, &r);
    cr_assert_eq(r.status, 0, "start: %s", r.err);
    h_free(&r);
}

/* The counter, read inside the container. */
static long counter(void)
{
    struct run_result r;
    for (int i = 0; i < 200; i++) {
        bh((const char *const[]){"exec", id, "/usr/bin/cat", "/tmp/n", NULL}, 30, &r);
        long n = r.status == 0 ? atol(r.out) : 0;
        h_free(&r);
        if (n > 0)
            return n;
        usleep(50000);
    }
    cr_assert_fail("the counter never appeared in /tmp/n");
    return 0;
}

static char *state_field(const char *field)
{
    struct run_result r;
    bh((const char *const[]){"state", id, NULL}, 30, &r);
    cr_assert_eq(r.status, 0, "state: %s", r.err);
    char *p = strstr(r.out, field);
    char *v = strdup(p ? p : "");
    char *end = strchr(v, ',');
    if (end)
        *end = '\0';
    h_free(&r);
    return v;
}

static void refused_and_untouched(const char *tier, const char *layer)
{
    start_counter(tier);
    long before = counter();
    char *pid = state_field("\"pid\"");
    char images[300];
    snprintf(images, sizeof(images), "%s/images", tmp);
    struct run_result r;
    bh((const char *const[]){"checkpoint", "--image-path", images, "--leave-running", id, NULL}, 60,
       &r);
    cr_expect_eq(r.status, 125, "checkpoint exit %d", r.status);
    cr_expect(strstr(r.err, "refused") != NULL && strstr(r.err, layer) != NULL &&
                  strstr(r.err, tier) != NULL,
              "the refusal does not name the %s tier and `%s`: %s", tier, layer, r.err);
    h_free(&r);
    cr_expect_neq(access(images, F_OK), 0, "an image directory was made");
    /* Same process, still counting from where it was. */
    char *pid_after = state_field("\"pid\"");
    cr_expect_str_eq(pid_after, pid);
    char *status = state_field("\"status\"");
    cr_expect(strstr(status, "running") != NULL, "%s", status);
    long after = 0;
    for (double end = h_now() + 30; (after = counter()) <= before && h_now() < end;)
        usleep(20000);
    cr_expect_gt(after, before, "the Python process's counter stopped at %ld", before);
    free(pid);
    free(pid_after);
    free(status);
}

Test(checkpoint, container_tier_refused_process_keeps_state)
{
    refused_and_untouched("container", "Landlock");
}

/* The container tier's filter notifies io_setup to the sentry (the AIO cap):
 * a checkpoint would lose that listener too, and the refusal says so. */
Test(checkpoint, container_tier_refusal_names_the_aio_listener)
{
    refused_and_untouched("container", "caps the sandbox's Linux AIO contexts");
}

Test(checkpoint, kernel_tier_refused_process_keeps_state)
{
    h_require_kernel_tier();
    refused_and_untouched("kernel", "notification listeners");
}

Test(checkpoint, stopped_or_missing_container)
{
    struct run_result r;
    bh((const char *const[]){"checkpoint", "no-such-container", NULL}, 30, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "no-such-container") != NULL, "%s", r.err);
    h_free(&r);
}

Test(checkpoint, restore_refused_creates_nothing)
{
    char bundle[300], images[300], p[400];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    snprintf(images, sizeof(images), "%s/images", tmp);
    cr_assert_eq(mkdir(images, 0700), 0);
    struct run_result r;
    bh((const char *const[]){"restore", "--detach", "--bundle", bundle, "--image-path", images,
                             "restored", NULL},
       30, &r);
    cr_expect_eq(r.status, 125, "restore exit %d", r.status);
    cr_expect(strstr(r.err, "refused") != NULL && strstr(r.err, "Landlock") != NULL &&
                  strstr(r.err, "notification listeners") != NULL,
              "%s", r.err);
    h_free(&r);
    snprintf(p, sizeof(p), "%s/root/restored", tmp);
    cr_expect_neq(access(p, F_OK), 0, "restore left state %s", p);
    bh((const char *const[]){"state", "restored", NULL}, 30, &r);
    cr_expect_neq(r.status, 0, "a container `restored` exists");
    h_free(&r);
}

/* runc's --parent-path checks come first and name the flag: an absolute
 * path, and one that is not a directory under --image-path, are refused. */
Test(checkpoint, parent_path_checked_as_runc_does)
{
    start_counter("container");
    char images[300], parent[400];
    snprintf(images, sizeof(images), "%s/images", tmp);
    snprintf(parent, sizeof(parent), "%s/parent-dir", tmp);
    cr_assert_eq(mkdir(images, 0700), 0);
    struct run_result r;
    bh((const char *const[]){"checkpoint", "--pre-dump", "--parent-path", parent, "--image-path",
                             images, id, NULL},
       30, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "--parent-path") != NULL && strstr(r.err, "relative") != NULL, "%s",
              r.err);
    h_free(&r);
    bh((const char *const[]){"checkpoint", "--parent-path", "./parent-dir", "--image-path", images,
                             id, NULL},
       30, &r);
    cr_expect_neq(r.status, 0);
    cr_expect(strstr(r.err, "invalid --parent-path") != NULL &&
                  strstr(r.err, "No such file or directory") != NULL,
              "%s", r.err);
    h_free(&r);
    /* A parent that is there passes the check: the refusal is then the tier's. */
    snprintf(parent, sizeof(parent), "%s/parent-dir", images);
    cr_assert_eq(mkdir(parent, 0700), 0);
    bh((const char *const[]){"checkpoint", "--parent-path", "parent-dir", "--image-path", images,
                             id, NULL},
       30, &r);
    cr_expect_eq(r.status, 125);
    cr_expect(strstr(r.err, "Landlock") != NULL, "%s", r.err);
    h_free(&r);
}

/* The CRIU the checkpoint facts were measured with; without it the tests
 * below fail (CI installs it through tests/deps-e2e). */
static const char *criu_path(void)
{
    const char *p = getenv("BULKHEAD_CRIU");
    if (p == NULL || *p == '\0')
        p = "/opt/bulkhead-criu/criu";
    cr_assert_eq(access(p, X_OK), 0,
                 "no CRIU at %s (%s): run tests/deps-criu, or point BULKHEAD_CRIU at CRIU 4.1.1", p,
                 strerror(errno));
    return p;
}

static long read_long(const char *path)
{
    FILE *f = fopen(path, "re");
    long n = 0;
    if (f != NULL) {
        if (fscanf(f, "%ld", &n) != 1)
            n = 0;
        fclose(f);
    }
    return n;
}

/* A Python counter on the host, in a session of its own (CRIU dumps a
 * session leader with its tree), mirroring its count in DIR/host-n. */
static pid_t start_host_counter(const char *counter_path)
{
    char code[1536];
    snprintf(code, sizeof(code),
             "import os, time\nd = {}\nn = 0\nwhile True:\n    n += 1\n    d[n] = n\n"
             "    open('%s.new', 'w').write('%%d %%d' %% (n, len(d)))\n"
             "    os.rename('%s.new', '%s')\n    time.sleep(0.02)\n",
             counter_path, counter_path, counter_path);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        setsid();
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execl("/usr/bin/python3", "python3", "-c", code, (char *)NULL);
        _exit(127);
    }
    for (double end = h_now() + 30; read_long(counter_path) == 0 && h_now() < end;)
        usleep(20000);
    cr_assert_gt(read_long(counter_path), 0, "the host counter never started");
    return pid;
}

/* A regular file's text (CRIU's logs, the counter), "" when it is missing. */
static char *read_text(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return strdup("");
    char *text = h_read_fd(fd);
    close(fd);
    return text;
}

/* Runs CRIU with its log in DIR/LOG_NAME: the exit code, and the log. */
static int run_criu(char *const argv[], const char *dir, const char *log_name, char **log)
{
    struct run_result r = h_run(argv, NULL, NULL, 60);
    char path[400];
    snprintf(path, sizeof(path), "%s/%s", dir, log_name);
    char *text = read_text(path);
    if (asprintf(log, "%s\n%s", r.err, text) < 0)
        *log = NULL;
    free(text);
    int status = r.status;
    h_free(&r);
    return status;
}

/* The control: this CRIU dumps a plain host process and restores it with
 * its memory (the counter and the dict's size go on from where they were),
 * so the container-tier failure below is the guest's wall, not a CRIU that
 * cannot run on this kernel. */
Test(checkpoint, private_criu_dumps_and_restores_a_host_python_process)
{
    const char *criu = criu_path();
    char counter_path[300], images[300], pidfile[300];
    snprintf(counter_path, sizeof(counter_path), "%s/host-n", tmp);
    snprintf(images, sizeof(images), "%s/host-images", tmp);
    snprintf(pidfile, sizeof(pidfile), "%s/restored.pid", tmp);
    cr_assert_eq(mkdir(images, 0700), 0);
    pid_t pid = start_host_counter(counter_path);
    char pid_s[16];
    snprintf(pid_s, sizeof(pid_s), "%d", (int)pid);
    char *log;
    int rc = run_criu(
        (char *const[]){(char *)criu, "dump", "-t", pid_s, "-D", images, "-o", "dump.log", NULL},
        images, "dump.log", &log);
    if (rc != 0)
        kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0); /* its pid must be free for the restore */
    cr_assert_eq(rc, 0, "criu dump: %s", log);
    free(log);
    long at_dump = read_long(counter_path);
    rc = run_criu((char *const[]){(char *)criu, "restore", "-d", "-D", images, "-o", "restore.log",
                                  "--pidfile", pidfile, NULL},
                  images, "restore.log", &log);
    cr_assert_eq(rc, 0, "criu restore: %s", log);
    free(log);
    long restored = read_long(pidfile);
    long after = at_dump;
    for (double end = h_now() + 30;
         (after = read_long(counter_path)) <= at_dump + 2 && h_now() < end;)
        usleep(20000);
    char *text = read_text(counter_path);
    if (restored > 0)
        kill((pid_t)restored, SIGKILL);
    cr_expect_eq(restored, pid, "restored as pid %ld, dumped as %d", restored, (int)pid);
    /* Still counting, from the dumped count on, and the dict kept every entry. */
    long n = 0, entries = 0;
    cr_expect_eq(sscanf(text, "%ld %ld", &n, &entries), 2, "%s", text);
    cr_expect_gt(n, at_dump + 2, "the counter stopped at %ld after the restore", at_dump);
    cr_expect_eq(n, entries, "the dict has %ld entries at count %ld", entries, n);
    free(text);
}

/* The refusal's reason, measured: CRIU's parasite, injected into a guest,
 * cannot connect to CRIU's abstract socket (the guest's Landlock domain, at
 * either tier, scopes abstract sockets), so the dump fails and the guest
 * runs on, untraced, with its state. Two ways of running CRIU reach that
 * wall: from the host's namespaces, with the bind mounts bulkhead makes
 * passed as external (as runc passes its own), and runc's way entered into
 * the sandbox (criu_in_the_sandbox_argv). If either ever dumps,
 * the scope is gone and the refusal's text is wrong: both must be looked at. */
enum criu_way { CRIU_FROM_THE_HOST, CRIU_IN_THE_SANDBOX };

/* CRIU from the host's namespaces: every bind (a mount whose root is not its
 * filesystem's) but the root is passed as external. */
static int criu_from_the_host_argv(const char *criu, long guest, const char *images, char *argv[64])
{
    static char guest_s[16], ext[24][600];
    const char *const fixed[] = {criu,   "dump", "--leave-running", "-t", guest_s, "-D",
                                 images, "-o",   "dump.log"};
    int argc = 0;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        argv[argc++] = (char *)fixed[i];
    snprintf(guest_s, sizeof(guest_s), "%ld", guest);
    char path[64], line[1024], root[512], point[512];
    snprintf(path, sizeof(path), "/proc/%ld/mountinfo", guest);
    FILE *mi = fopen(path, "re");
    cr_assert_not_null(mi, "%s: %s", path, strerror(errno));
    int n_ext = 0;
    for (bool first = true; fgets(line, sizeof(line), mi) != NULL; first = false) {
        if (sscanf(line, "%*d %*d %*s %511s %511s", root, point) != 2 || first ||
            strcmp(root, "/") == 0 || n_ext == 24)
            continue;
        snprintf(ext[n_ext], sizeof(ext[n_ext]), "mnt[%s]:bind%d", point, n_ext);
        argv[argc++] = "--external";
        argv[argc++] = ext[n_ext++];
    }
    fclose(mi);
    argv[argc] = NULL;
    return argc;
}

static long status_long(long pid, const char *field);

/* runc's way, as far as it goes here (tests/README.md, "Branch criu10"):
 * host root under no filter and in no domain, entered into every namespace
 * of the sandbox but its user namespace (so no mount, net, ipc or uts tree
 * is dumped, and no external mount is needed), running as the sandbox
 * root's host uid with its capabilities kept (prlimit(2) of the guest then
 * needs no CAP_SYS_RESOURCE, which this machine's root lacks, and the
 * sandbox's tmpfs accepts CRIU's probe directory), `criu --unprivileged`.
 * CRIU's prefix (tests/deps-criu's layout) is reached from inside the
 * sandbox's mount namespace through a descriptor of the host's root. */
static int criu_in_the_sandbox_argv(const char *criu, long sentry, long guest, const char *images,
                                    char *argv[64])
{
    static char script[2048], prefix[400];
    snprintf(prefix, sizeof(prefix), "%s", criu);
    char *slash = strrchr(prefix, '/');
    cr_assert_not_null(slash);
    *slash = '\0';
    char sbin[460];
    snprintf(sbin, sizeof(sbin), "%s/usr/sbin/criu", prefix);
    cr_assert_eq(access(sbin, X_OK), 0, "%s is not tests/deps-criu's layout (%s)", prefix,
                 strerror(errno));
    long uid = status_long(guest, "Uid:"), gid = status_long(guest, "Gid:");
    cr_assert(uid > 0 && gid > 0, "the guest %ld's ids: %ld %ld", guest, uid, gid);
    snprintf(script, sizeof(script),
             "exec 9</ || exit 90\n"
             "R=/proc/self/fd/9 P=/proc/self/fd/9%s\n"
             "exec nsenter -t %ld -p -m -u -i -n -- $R/usr/bin/setpriv --securebits "
             "+no_setuid_fixup --inh-caps +all,-sys_resource --ambient-caps +all,-sys_resource "
             "--reuid %ld --regid %ld --clear-groups $R/usr/bin/env CRIU_FAULT=130 "
             "$P/usr/lib64/ld-linux-x86-64.so.2 --library-path $P/usr/lib/x86_64-linux-gnu "
             "$P/usr/sbin/criu dump --unprivileged --leave-running --network-lock skip -t 2 "
             "-D $R%s -o dump.log\n",
             prefix, sentry, uid, gid, images);
    argv[0] = "/bin/sh";
    argv[1] = "-c";
    argv[2] = script;
    argv[3] = NULL;
    return 3;
}

static void criu_cannot_dump_a_guest(const char *tier, enum criu_way way)
{
    const char *criu = criu_path();
    start_counter(tier);
    long before = counter();
    char *sentry = state_field("\"pid\"");
    long sentry_pid = atol(strchr(sentry, ':') + 1);
    char path[300];
    snprintf(path, sizeof(path), "/proc/%ld/task/%ld/children", sentry_pid, sentry_pid);
    long guest = read_long(path);
    cr_assert_gt(guest, 0, "no guest under sentry %ld", sentry_pid);
    char images[300];
    snprintf(images, sizeof(images), "%s/images", tmp);
    cr_assert_eq(mkdir(images, 0700), 0);
    char *argv[64];
    if (way == CRIU_FROM_THE_HOST)
        criu_from_the_host_argv(criu, guest, images, argv);
    else
        criu_in_the_sandbox_argv(criu, sentry_pid, guest, images, argv);
    char *log;
    int rc = run_criu(argv, images, "dump.log", &log);
    cr_expect_neq(rc, 0, "CRIU dumped a %s-tier guest: the Landlock scope is gone", tier);
    cr_expect(strstr(log, "Unable to connect a transport socket: Operation not permitted") != NULL,
              "the dump failed elsewhere than at the parasite's socket:\n%s", log);
    free(log);
    /* The guest is as it was: same pid, not traced, still counting. */
    cr_expect_eq(status_long(guest, "TracerPid:"), 0, "the guest %ld is gone or left traced",
                 guest);
    char *status = state_field("\"status\"");
    cr_expect(strstr(status, "running") != NULL, "%s", status);
    free(status);
    long after = 0;
    for (double end = h_now() + 30; (after = counter()) <= before && h_now() < end;)
        usleep(20000);
    cr_expect_gt(after, before, "the guest's counter stopped at %ld", before);
    free(sentry);
}

Test(checkpoint, private_criu_cannot_dump_a_container_tier_guest)
{
    criu_cannot_dump_a_guest("container", CRIU_FROM_THE_HOST);
}

Test(checkpoint, private_criu_cannot_dump_a_kernel_tier_guest)
{
    h_require_kernel_tier();
    criu_cannot_dump_a_guest("kernel", CRIU_FROM_THE_HOST);
}

/* The other walls runc's way meets here (rlimits, mounts, the network
 * namespace, CRIU's kernel probe) are all passed: what stops the dump is the
 * scope alone (tests/README.md, "Branch criu10"). */
Test(checkpoint, criu_in_the_sandbox_namespaces_as_its_root_stops_only_at_the_scope)
{
    criu_cannot_dump_a_guest("container", CRIU_IN_THE_SANDBOX);
}

/* CRIU inside the sandbox (session 9's first idea: a dumper in the guests'
 * own Landlock domain, where the parasite's connect is allowed) meets a
 * kernel gate before Landlock: to trace a task under a seccomp filter, CRIU
 * sets PTRACE_O_SUSPEND_SECCOMP, which the kernel grants only to a tracer
 * holding CAP_SYS_ADMIN in the initial user namespace and under no filter
 * itself. Every guest of either tier has a filter, so no dumper a sandbox's
 * user namespace can hold dumps one. Measured here with the best case for
 * CRIU: `criu dump --unprivileged` as root of a fresh user namespace (every
 * capability there, CAP_CHECKPOINT_RESTORE and CAP_SYS_PTRACE included), no
 * filter and no Landlock domain of its own, in the target's pid namespace.
 * The control (the same Python without a filter) dumps, so the only thing
 * the dump stops at is the target's filter. The pid namespace's init is the
 * script: its exit ends every process the test made. */
static int criu_in_userns_dump(const char *criu, bool filtered, char **log)
{
    char dir[300], script[2048];
    snprintf(dir, sizeof(dir), "%s/userns-%s", tmp, filtered ? "filtered" : "plain");
    cr_assert_eq(mkdir(dir, 0700), 0);
    /* An allow-everything filter: its presence, not its rules, is the gate. */
    const char *filter =
        "import ctypes, struct\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "insn = ctypes.create_string_buffer(struct.pack('HBBI', 6, 0, 0, 0x7fff0000))\n"
        "class P(ctypes.Structure):\n"
        "    _fields_ = [('len', ctypes.c_ushort), ('f', ctypes.c_void_p)]\n"
        "p = P(1, ctypes.cast(insn, ctypes.c_void_p))\n"
        "assert libc.prctl(38, 1, 0, 0, 0) == 0\n"
        "assert libc.prctl(22, 2, ctypes.byref(p), 0, 0) == 0\n";
    snprintf(script, sizeof(script),
             "cd %s || exit 90\n"
             "setsid /usr/bin/python3 -c \"$1\" </dev/null >py.out 2>&1 &\n"
             "pid=$!\n"
             "i=0; while [ ! -s n ] && [ $i -lt 3000 ]; do i=$((i+1)); sleep 0.01; done\n"
             "[ -s n ] || { echo 'the counter never started'; cat py.out; exit 91; }\n"
             "grep -q '^Seccomp:[[:space:]]*%d' /proc/$pid/status || "
             "{ echo 'the counter is not in the expected seccomp mode'; exit 92; }\n"
             "%s dump --unprivileged -t $pid -D . -o dump.log\n"
             "rc=$?\n"
             "kill -9 $pid\n"
             "exit $rc\n",
             dir, filtered ? 2 : 0, criu);
    char code[1536];
    snprintf(code, sizeof(code),
             "import os, time\nos.closerange(3, 1024)\n%s"
             "n = 0\nwhile True:\n    n += 1\n"
             "    open('n.new', 'w').write(str(n))\n    os.rename('n.new', 'n')\n"
             "    time.sleep(0.02)\n",
             filtered ? filter : "");
    struct run_result r =
        h_run((char *const[]){"/usr/bin/unshare", "--user", "--map-root-user", "--pid", "--fork",
                              "--mount-proc", "/bin/sh", "-c", script, "sh", code, NULL},
              NULL, NULL, 90);
    char path[400];
    snprintf(path, sizeof(path), "%s/dump.log", dir);
    char *text = read_text(path);
    if (asprintf(log, "%s%s\n%s", r.out, r.err, text) < 0)
        *log = NULL;
    free(text);
    int status = r.status;
    h_free(&r);
    cr_assert(status < 90 || status > 92, "the script failed before the dump: %s", *log);
    return status;
}

Test(checkpoint, criu_in_a_user_namespace_cannot_dump_a_seccomp_filtered_process)
{
    const char *criu = criu_path();
    char *log;
    int rc = criu_in_userns_dump(criu, false, &log);
    cr_assert_eq(rc, 0, "the control (no filter) did not dump, so the gate is not measured:\n%s",
                 log);
    free(log);
    rc = criu_in_userns_dump(criu, true, &log);
    cr_expect_neq(rc, 0,
                  "CRIU in a user namespace dumped a filtered process: the kernel's gate is gone, "
                  "and a dumper inside the sandbox is worth trying again (oci/checkpoint.c)");
    cr_expect(strstr(log, "suspending seccomp failed: Operation not permitted") != NULL,
              "the dump failed elsewhere than at PTRACE_O_SUSPEND_SECCOMP:\n%s", log);
    free(log);
}

/* A number from /proc/PID/status (-1 when the line or the process is gone);
 * procfs files have no size, so they are read line by line. */
static long status_long(long pid, const char *field)
{
    char path[64], line[256];
    snprintf(path, sizeof(path), "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    long v = -1;
    size_t len = strlen(field);
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (strncmp(line, field, len) == 0 && sscanf(line + len, "%ld", &v) == 1)
            break;
    if (f != NULL)
        fclose(f);
    return v;
}

/* What a design could build on (not built: see oci/checkpoint.c): a dumper
 * that is host root, under no filter, and in the very Landlock domain of its
 * target passes both gates. A keeper process restricts itself into a domain
 * D (write rules, abstract-socket and signal scopes, as a guest's), forks a
 * seccomp-filtered Python counter that stays in D, and later forks
 * `criu dump` in D: ptrace and the parasite's connect are within one domain.
 * A second keeper, in a new domain D2 with the same rules, runs `criu
 * restore`: the restored counter goes on with its dict, has exactly the one
 * filter it was dumped with (CRIU, unfiltered, restores the dumped chain and
 * adds none), and is still refused the write D2 refuses (it inherits D2
 * from CRIU). CRIU in a domain cannot mount (Landlock refuses mount(2) to a
 * process in a domain), so its kernel probe fails; a cache from an unconfined
 * `criu check`, kept only on a tmpfs /run, lets it start: the script runs in
 * a private mount namespace with its own tmpfs on /run. */
static const char keeper_py[] =
    "import ctypes, os, struct, subprocess, sys, time\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.syscall.restype = ctypes.c_long\n"
    "mode, top, criu = sys.argv[1], sys.argv[2], sys.argv[3]\n"
    "ll = top + '/ll'\n"
    "WRITE = 2 | 32 | 256 | 16384  # write, remove and make files, truncate\n"
    "attr = struct.pack('QQQ', WRITE, 0, 1 | 2)  # scopes: abstract sockets, signals\n"
    "rs = libc.syscall(444, ctypes.c_char_p(attr), ctypes.c_size_t(len(attr)), 0)\n"
    "assert rs >= 0, ('landlock_create_ruleset', ctypes.get_errno())\n"
    "for p in (ll, '/proc', '/dev', '/run'):\n"
    "    fd = os.open(p, os.O_PATH | os.O_CLOEXEC)\n"
    "    rule = struct.pack('=Qi', WRITE, fd)\n"
    "    assert libc.syscall(445, rs, 1, ctypes.c_char_p(rule), 0) == 0, p\n"
    "assert libc.prctl(38, 1, 0, 0, 0) == 0\n"
    "assert libc.syscall(446, rs, 0) == 0, ('landlock_restrict_self', ctypes.get_errno())\n"
    "def count():\n"
    "    try:\n"
    "        return int(open(ll + '/n').read().split()[0])\n"
    "    except (OSError, ValueError, IndexError):\n"
    "        return 0\n"
    "def counter():\n"
    "    os.setsid()\n"
    "    out = os.open(ll + '/out', os.O_WRONLY | os.O_CREAT | os.O_TRUNC)\n"
    "    nul = os.open('/dev/null', os.O_RDONLY)\n"
    "    os.dup2(nul, 0); os.dup2(out, 1); os.dup2(out, 2); os.closerange(3, 1024)\n"
    "    insn = ctypes.create_string_buffer(struct.pack('HBBI', 6, 0, 0, 0x7fff0000))\n"
    "    class P(ctypes.Structure):\n"
    "        _fields_ = [('len', ctypes.c_ushort), ('f', ctypes.c_void_p)]\n"
    "    prog = P(1, ctypes.cast(insn, ctypes.c_void_p))\n"
    "    assert libc.prctl(22, 2, ctypes.byref(prog), 0, 0) == 0\n"
    "    d = {}\n"
    "    n = 0\n"
    "    while True:\n"
    "        n += 1\n"
    "        d[n] = n\n"
    "        try:\n"
    "            open(top + '/outside', 'w').write('x')\n"
    "            e = 0\n"
    "        except OSError as ex:\n"
    "            e = ex.errno\n"
    "        open(ll + '/n.new', 'w').write('%d %d %d' % (n, len(d), e))\n"
    "        os.rename(ll + '/n.new', ll + '/n')\n"
    "        time.sleep(0.02)\n"
    "if mode == 'dump':\n"
    "    pid = os.fork()\n"
    "    if pid == 0:\n"
    "        counter()\n"
    "    end = time.monotonic() + 60\n"
    "    while count() < 3 and time.monotonic() < end:\n"
    "        time.sleep(0.02)\n"
    "    rc = subprocess.run([criu, 'dump', '-t', str(pid), '-D', ll + '/img', '-o', "
    "'dump.log']).returncode\n"
    "    if rc != 0:\n"
    "        os.kill(pid, 9)\n"
    "    os.waitpid(pid, 0)\n"
    "else:\n"
    "    rc = subprocess.run([criu, 'restore', '-d', '-D', ll + '/img', '-o', 'restore.log',\n"
    "                         '--pidfile', ll + '/restored.pid']).returncode\n"
    "sys.exit(rc)\n";

Test(checkpoint, private_criu_in_the_targets_landlock_domain_dumps_it_and_restores_both_layers)
{
    const char *criu = criu_path();
    char top[300], ll[320], img[340], path[400];
    snprintf(top, sizeof(top), "%s/keeper", tmp);
    snprintf(ll, sizeof(ll), "%s/ll", top);
    snprintf(img, sizeof(img), "%s/img", ll);
    cr_assert_eq(mkdir(top, 0700), 0);
    cr_assert_eq(mkdir(ll, 0700), 0);
    cr_assert_eq(mkdir(img, 0700), 0);
    /* From the test's directory: a left-over /etc/criu/default.conf (runc's
     * checkpoint.bats writes one) can name a relative log file. */
    const char *script = "cd \"$2\" || exit 90\n"
                         "mount -t tmpfs bulkhead-criu-kdat /run || exit 90\n"
                         "\"$3\" check >/dev/null 2>&1 || { echo 'criu check failed'; exit 91; }\n"
                         "/usr/bin/python3 -c \"$1\" dump \"$2\" \"$3\" || "
                         "{ echo \"dump: $?\"; exit 92; }\n"
                         "cat \"$2/ll/n\" >\"$2/at-dump\"\n"
                         "/usr/bin/python3 -c \"$1\" restore \"$2\" \"$3\" || "
                         "{ echo \"restore: $?\"; exit 93; }\n";
    struct run_result r = h_run((char *const[]){"/usr/bin/unshare", "--mount", "--propagation",
                                                "private", "/bin/sh", "-c", (char *)script, "sh",
                                                (char *)keeper_py, top, (char *)criu, NULL},
                                NULL, NULL, 120);
    snprintf(path, sizeof(path), "%s/restored.pid", ll);
    long restored = read_long(path);
    char *dump_log = NULL, *restore_log = NULL;
    snprintf(path, sizeof(path), "%s/dump.log", img);
    dump_log = read_text(path);
    snprintf(path, sizeof(path), "%s/restore.log", img);
    restore_log = read_text(path);
    if (r.status != 0 && restored > 0)
        kill((pid_t)restored, SIGKILL);
    cr_assert_eq(r.status, 0, "%s%s\ndump.log:\n%s\nrestore.log:\n%s", r.out, r.err, dump_log,
                 restore_log);
    h_free(&r);
    free(dump_log);
    free(restore_log);
    cr_assert_gt(restored, 0, "no restored pid");
    snprintf(path, sizeof(path), "%s/at-dump", top);
    char *at_dump_text = read_text(path);
    long at_dump = 0, dumped_entries = 0, dumped_errno = -1;
    cr_expect_eq(sscanf(at_dump_text, "%ld %ld %ld", &at_dump, &dumped_entries, &dumped_errno), 3,
                 "%s", at_dump_text);
    free(at_dump_text);
    cr_expect_eq(dumped_errno, EACCES,
                 "before the dump the counter's write outside was not refused");
    /* The restored counter goes on, and its write outside is still refused. */
    snprintf(path, sizeof(path), "%s/n", ll);
    long n = 0, entries = 0, e = -1;
    for (double end = h_now() + 60; h_now() < end; usleep(20000)) {
        char *text = read_text(path);
        int got = sscanf(text, "%ld %ld %ld", &n, &entries, &e);
        free(text);
        if (got == 3 && n > at_dump + 2)
            break;
    }
    long mode = status_long(restored, "Seccomp:"),
         filters = status_long(restored, "Seccomp_filters:");
    kill((pid_t)restored, SIGKILL);
    cr_expect_gt(n, at_dump + 2, "the restored counter stopped at %ld (dumped at %ld)", n, at_dump);
    cr_expect_eq(n, entries, "the dict has %ld entries at count %ld", entries, n);
    cr_expect_eq(e, EACCES,
                 "after the restore the write outside gave errno %ld: no Landlock domain", e);
    cr_expect_eq(mode, 2, "restored in seccomp mode %ld, not under its filter", mode);
    cr_expect_eq(filters, 1, "restored with %ld filters, dumped with 1", filters);
}
