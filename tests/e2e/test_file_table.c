/* The host's file table (fs.file-max): a global pool no cgroup counts; past
 * it every process without CAP_SYS_ADMIN in the host's user namespace gets
 * ENFILE. The mend (sentry/file-table.c): a sandbox is made only on a host
 * whose fs.file-max is at least what the host's memory can hold (MemTotal /
 * 128 bytes), raised by the runtime when it is lower, the create refused
 * with the numbers when it may not raise it. The refusals are driven through
 * the test build's BULKHEAD_TEST_FILE_MAX (a file of ours in place of the
 * sysctl), so no test lowers the host's own; tests/README.md, "Attacks". */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cleanup.h"
#include "file-table.h"
#include "harness.h"

#define PY "/usr/bin/python3"

static char tmp[64] = "";

static void teardown(void)
{
    if (tmp[0] == '\0')
        return;
    /* A test that failed before its umount leaves its read-only bind (in its
     * own mount namespace), which would keep the file from being removed. */
    char p[96];
    snprintf(p, sizeof(p), "%s/file-max", tmp);
    umount2(p, MNT_DETACH);
    h_remove_tree(tmp);
}

TestSuite(file_table, .fini = teardown, .timeout = 240);

/* A fake fs.file-max holding value, in a temp dir of the test's; its path. */
static const char *fake_file_max(const char *value)
{
    static char path[128];
    snprintf(tmp, sizeof(tmp), "/tmp/bh-e2e-filemax-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
    snprintf(path, sizeof(path), "%s/file-max", tmp);
    h_write_file(tmp, "file-max", value);
    return path;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    cr_assert_not_null(f, "open %s: %s", path, strerror(errno));
    char buf[128] = "";
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strdup(buf);
}

static unsigned long long proc_number(const char *path)
{
    cleanup_free char *s = slurp(path);
    return strtoull(s, NULL, 10);
}

static unsigned long long mem_total(void)
{
    FILE *f = fopen("/proc/meminfo", "re");
    cr_assert_not_null(f);
    char line[128];
    unsigned long long kib = 0;
    while (fgets(line, sizeof(line), f) != NULL && sscanf(line, "MemTotal: %llu kB", &kib) != 1)
        ;
    fclose(f);
    cr_assert_gt(kib, 0, "/proc/meminfo names no MemTotal");
    return kib * 1024;
}

/* bulkhead do --tier TIER PRE... -- args..., with env entries (may be NULL). */
static struct run_result do_env(const char *tier, char *const env[], const char *const *pre, ...)
{
    va_list ap;
    va_start(ap, pre);
    struct run_result r = h_do_va(tier, env, 180, pre, ap);
    va_end(ap);
    return r;
}

/* A host whose fs.file-max is below what its memory can hold gets it raised
 * to the sysctl's maximum before the sandbox is made, and the sandbox runs. */
static void low_file_max_is_raised(const char *tier)
{
    h_require_kernel_tier();
    const char *path = fake_file_max("1000\n");
    char env[200];
    snprintf(env, sizeof(env), "BULKHEAD_TEST_FILE_MAX=%s", path);
    struct run_result r = do_env(tier, (char *const[]){env, NULL}, NULL, "--", "/bin/true", NULL);
    cr_assert_eq(r.status, 0, "a sandbox on a host whose file-max the runtime may raise: %s",
                 r.err);
    cleanup_free char *now = slurp(path);
    cr_assert_eq(strtoull(now, NULL, 10), BH_FILE_MAX_RAISED,
                 "fs.file-max (fake) was 1000 and is now `%s`, not raised to %llu", now,
                 BH_FILE_MAX_RAISED);
    h_free(&r);
}

Test(file_table, a_low_file_max_is_raised_before_the_sandbox_is_made_kernel)
{
    low_file_max_is_raised("kernel");
}

Test(file_table, a_low_file_max_is_raised_before_the_sandbox_is_made_container)
{
    low_file_max_is_raised("container");
}

/* The runtime never lowers it: a value above what memory can hold stays. */
Test(file_table, a_high_file_max_is_left_as_it_is)
{
    h_require_kernel_tier();
    char high[64];
    unsigned long long want = mem_total() / BH_FILE_MIN_BYTES + 12345;
    snprintf(high, sizeof(high), "%llu\n", want);
    const char *path = fake_file_max(high);
    char env[200];
    snprintf(env, sizeof(env), "BULKHEAD_TEST_FILE_MAX=%s", path);
    struct run_result r =
        do_env("container", (char *const[]){env, NULL}, NULL, "--", "/bin/true", NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cleanup_free char *now = slurp(path);
    cr_assert_eq(strtoull(now, NULL, 10), want, "fs.file-max (fake) was %llu, is now `%s`", want,
                 now);
    h_free(&r);
}

/* The refusal names the sysctl, its value, what the host needs and why. */
static void assert_refusal(const struct run_result *r, const char *why)
{
    cr_assert_eq(r->status, BH_EXIT_REFUSED,
                 "a sandbox on a host whose fs.file-max is 1000 and "
                 "may not be raised ran (exit %d): %s",
                 r->status, r->err);
    char needed[128];
    snprintf(needed, sizeof(needed), "below the %llu files this host's memory",
             mem_total() / BH_FILE_MIN_BYTES);
    cr_assert_not_null(strstr(r->err, "fs.file-max is 1000"), "%s", r->err);
    cr_assert_not_null(strstr(r->err, needed), "no `%s` in: %s", needed, r->err);
    cr_assert_not_null(strstr(r->err, why), "no `%s` in: %s", why, r->err);
}

/* BULKHEAD_KEEP_FILE_MAX=1: the operator keeps the value, so no sandbox. */
static void kept_low_file_max_refuses(const char *tier)
{
    h_require_kernel_tier();
    const char *path = fake_file_max("1000\n");
    char env[200];
    snprintf(env, sizeof(env), "BULKHEAD_TEST_FILE_MAX=%s", path);
    struct run_result r = do_env(tier, (char *const[]){env, "BULKHEAD_KEEP_FILE_MAX=1", NULL}, NULL,
                                 "--", "/bin/echo", "ran", NULL);
    assert_refusal(&r, "BULKHEAD_KEEP_FILE_MAX=1 forbids raising it");
    cr_assert_null(strstr(r.out, "ran"), "the guest ran: %s", r.out);
    cleanup_free char *now = slurp(path);
    cr_assert_str_eq(now, "1000\n", "the kept fs.file-max (fake) was written");
    h_free(&r);
}

Test(file_table, a_kept_low_file_max_refuses_the_sandbox_with_the_numbers_kernel)
{
    kept_low_file_max_refuses("kernel");
}

Test(file_table, a_kept_low_file_max_refuses_the_sandbox_with_the_numbers_container)
{
    kept_low_file_max_refuses("container");
}

/* A file-max the runtime cannot write (here: read-only, as /proc/sys is to a
 * runtime without CAP_SYS_ADMIN in the host's user namespace) refuses too. */
Test(file_table, a_file_max_that_cannot_be_raised_refuses_the_sandbox)
{
    h_require_kernel_tier();
    const char *path = fake_file_max("1000\n");
    /* The read-only bind lives in a mount namespace of this test process. */
    cr_assert_eq(unshare(CLONE_NEWNS), 0, "unshare: %s", strerror(errno));
    cr_assert_eq(mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL), 0, "%s", strerror(errno));
    cr_assert_eq(mount(path, path, NULL, MS_BIND, NULL), 0, "%s", strerror(errno));
    cr_assert_eq(mount(NULL, path, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY, NULL), 0, "%s",
                 strerror(errno));
    char env[200];
    snprintf(env, sizeof(env), "BULKHEAD_TEST_FILE_MAX=%s", path);
    struct run_result r =
        do_env("kernel", (char *const[]){env, NULL}, NULL, "--", "/bin/echo", "ran", NULL);
    assert_refusal(&r, "Read-only file system");
    h_free(&r);
    cr_assert_eq(umount(path), 0, "%s", strerror(errno));
}

/* OCI `create` goes through the same check: refused, and nothing is left of
 * the container (no state, no cgroup). */
Test(file_table, an_oci_create_is_refused_on_a_kept_low_file_max)
{
    h_require_kernel_tier();
    const char *path = fake_file_max("1000\n");
    cr_assert_eq(setenv("BULKHEAD_TEST_FILE_MAX", path, 1), 0);
    cr_assert_eq(setenv("BULKHEAD_KEEP_FILE_MAX", "1", 1), 0);
    h_bundle_skeleton(tmp);
    char bundle[128], id[64], config[160];
    snprintf(bundle, sizeof(bundle), "%s/bundle", tmp);
    json_t *c = h_spec_config(tmp, bundle);
    snprintf(config, sizeof(config), "%s/config.json", bundle);
    cr_assert_eq(json_dump_file(c, config, JSON_INDENT(1)), 0);
    json_decref(c);
    snprintf(id, sizeof(id), "filemax-oci-%d", (int)getpid());
    struct run_result r;
    h_bulkhead_in(tmp, (const char *const[]){"create", "--bundle", bundle, id, NULL}, 120, &r);
    cr_assert_neq(r.status, 0,
                  "an OCI create on a host whose fs.file-max may not be raised "
                  "succeeded");
    cr_assert_not_null(strstr(r.err, "fs.file-max is 1000"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "BULKHEAD_KEEP_FILE_MAX=1 forbids raising it"), "%s", r.err);
    h_free(&r);
    char p[300], cg[600];
    snprintf(p, sizeof(p), "%s/root/%s", tmp, id);
    cr_expect_neq(access(p, F_OK), 0, "state %s left", p);
    snprintf(p, sizeof(p), "bulkhead/%s", id);
    h_cgroup_dir("pids", p, cg, sizeof(cg));
    cr_expect_neq(access(cg, F_OK), 0, "cgroup %s left", cg);
}

/* Takes struct files into the host's global table (fs.file-max) past
 * RLIMIT_NOFILE: each child opens a file of its own /tmp, maps a page of it
 * and closes the fd, so the mapping alone keeps the file (up to 60,000 a
 * process, under vm.max_map_count), for 8 children. Prints "held TOTAL
 * GROWTH WHY" as each thousand comes in and after each child (GROWTH: the
 * host's file-nr since the start), so the OOM killer leaves the last count
 * behind, then "end TOTAL". A file of the /usr overlay would not do: its
 * mapping keeps only the overlay's backing file, which file-nr never
 * counts. */
static const char file_table_grab[] =
    "import ctypes, os, signal, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.mmap.restype = ctypes.c_void_p\n"
    "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, "
    "ctypes.c_int, ctypes.c_long]\n"
    "def nr():\n"
    "    return int(open('/proc/sys/fs/file-nr').read().split()[0])\n"
    "open('/tmp/f', 'w').write('x' * 4096)\n"
    "base = nr()\n"
    "print('base', base, flush=True)\n"
    "total = 0\n"
    "for k in range(8):\n"
    "    r, w = os.pipe()\n"
    "    if os.fork() == 0:\n"
    "        os.close(r)\n"
    "        n, why = 0, 'cap'\n"
    "        while n < 60000:\n"
    "            try:\n"
    "                fd = os.open('/tmp/f', os.O_RDONLY | os.O_CLOEXEC)\n"
    "            except OSError as e:\n"
    "                why = e.strerror; break\n"
    "            p = libc.mmap(None, 4096, 1, 1, fd, 0)\n"
    "            e = ctypes.get_errno()\n"
    "            os.close(fd)\n"
    "            if p is None or p == ctypes.c_void_p(-1).value:\n"
    "                why = os.strerror(e); break\n"
    "            n += 1\n"
    "            if n % 1000 == 0:\n"
    "                os.write(w, b'+')\n"
    "        os.write(w, b'.' + why.encode())\n"
    "        signal.pause()\n"
    "    os.close(w)\n"
    "    got, why = 0, 'died'\n"
    "    while True:\n"
    "        b = os.read(r, 4096)\n"
    "        if not b:\n"
    "            break\n"
    "        got += b.count(b'+') * 1000\n"
    "        print('held', total + got, nr() - base, 'running', flush=True)\n"
    "        if b'.' in b:\n"
    "            why = b.split(b'.', 1)[1].decode(); break\n"
    "    total += got\n"
    "    print('held', total, nr() - base, why, flush=True)\n"
    "    if why != 'cap':\n"
    "        break\n"
    "print('end', total, flush=True)\n";

/* The host's file table (fs.file-max, 2,466,112 here): past it every
 * process without CAP_SYS_ADMIN gets ENFILE, the host's services and every
 * neighbour sandbox alike. RLIMIT_NOFILE does not bound a sandbox's share:
 * a mapping keeps its file after the fd is closed (on main a 64 MiB guest
 * held 120,000 files from 2 processes, each with nofile 1024/4096; the
 * default 1 GiB `do` sandbox held 480,000 mapped files, all the script
 * tries). Nothing per cgroup or per user counts files; what holds is the
 * memory cgroup, which charges each file and its mapping (~300-500 bytes):
 * here a guest under --memory 32m must stop (ENOMEM, ENFILE or the OOM
 * killer) below 262,144 files, 128 bytes each. The files must be in the
 * host's table (file-nr grew by at least half of what the guest held), or
 * the test proves nothing. At 1 GiB a sandbox can hold ~2M files (85% of
 * this host's file-max before the runtime raised it), which is why the
 * runtime raises fs.file-max to what memory can hold (tests above). */
Test(file_table, a_guests_share_of_the_hosts_file_table_is_bounded_by_its_memory_limit)
{
    h_require_kernel_tier();
    static const char *const pre[] = {"--memory", "32m", NULL};
    struct run_result r = do_env("container", NULL, pre, "--", PY, "-c", file_table_grab, NULL);
    long total = -1, growth = 0, shown_total = -1, shown_growth = 0;
    char why[64] = "";
    for (const char *p = r.out; p != NULL && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        long t, g;
        char w[64];
        if (sscanf(p, "held %ld %ld %63s", &t, &g, w) == 3) {
            total = t;
            growth = g;
            snprintf(why, sizeof(why), "%s", w);
            /* A line written after the OOM killer took a child counts that
             * child's files in t but no longer in g, so the files are shown
             * to be in the host's table by the best line, not the last. */
            if (t >= 1000 &&
                (shown_total < 0 || g - t / 2 > shown_growth - shown_total / 2)) {
                shown_total = t;
                shown_growth = g;
            }
        }
    }
    cr_assert_geq(total, 0, "the guest never reported what it held (exit %d): %s\n%s", r.status,
                  r.out, r.err);
    cr_assert_lt(total, 262144,
                 "a guest under a 32 MiB memory limit held %ld files of the host's table (the "
                 "script's own cap is 480,000): files are not charged to its memory cgroup",
                 total);
    cr_assert_geq(shown_total, 1000, "the guest never held 1,000 files (exit %d): %s\n%s",
                  r.status, r.out, r.err);
    cr_assert_geq(shown_growth, shown_total / 2,
                  "the host's file-nr grew by at most %ld while the guest held %ld mapped files: "
                  "the files are not in the host's table, so the test shows nothing\n%s",
                  shown_growth, shown_total, r.out);
    cr_log_info("under --memory 32m the guest held %ld files (file-nr +%ld, stopped: %s, exit %d)",
                total, growth, why, r.status);
    h_free(&r);
}

/* The guest of the holding test: 4 children each map (and close) up to
 * 10,000 files of its /tmp, ~20 MiB of a 64 MiB limit, and keep them; the
 * parent prints "held N" and "end", then waits for its stdin to close. */
static const char file_table_hold[] =
    "import ctypes, os, sys\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "libc.mmap.restype = ctypes.c_void_p\n"
    "libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, "
    "ctypes.c_int, ctypes.c_long]\n"
    "open('/tmp/f', 'w').write('x' * 4096)\n"
    "total = 0\n"
    "for k in range(4):\n"
    "    r, w = os.pipe()\n"
    "    if os.fork() == 0:\n"
    "        os.close(r)\n"
    "        n = 0\n"
    "        while n < 10000:\n"
    "            try:\n"
    "                fd = os.open('/tmp/f', os.O_RDONLY | os.O_CLOEXEC)\n"
    "            except OSError:\n"
    "                break\n"
    "            p = libc.mmap(None, 4096, 1, 1, fd, 0)\n"
    "            os.close(fd)\n"
    "            if p is None or p == ctypes.c_void_p(-1).value:\n"
    "                break\n"
    "            n += 1\n"
    "        os.write(w, str(n).encode())\n"
    "        os.close(w)\n"
    "        sys.stdin.read()\n"
    "        os._exit(0)\n"
    "    os.close(w)\n"
    "    total += int(os.read(r, 64) or b'0')\n"
    "    os.close(r)\n"
    "print('held', total, flush=True)\n"
    "print('end', flush=True)\n"
    "sys.stdin.read()\n";

/* A neighbour's guest opens 900 files (held at once, under nofile 1024). */
static const char neighbour_opens[] = "import os\n"
                                      "fds = [os.open('/etc/hostname', os.O_RDONLY) "
                                      "for _ in range(900)]\n"
                                      "print('opened', len(fds))\n";

/* An unprivileged host process (uid/gid 65534, no capabilities) opens 500
 * files at once: 0 when it could, else the errno. */
static int unprivileged_opens(void)
{
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(65534, 65534, 65534) < 0 ||
            setresuid(65534, 65534, 65534) < 0)
            _exit(200);
        for (int i = 0; i < 500; i++)
            if (open("/etc/hostname", O_RDONLY) < 0)
                _exit(errno & 0x7f);
        _exit(0);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st), "the unprivileged opener died");
    return WEXITSTATUS(st);
}

/* What the mend is for: a guest holding files (past RLIMIT_NOFILE, through
 * mappings) leaves a neighbour sandbox and an unprivileged host process able
 * to open files, and the host's fs.file-max (the real one: the runtime
 * raised it if it was low) is above everything the host's memory could
 * hold, so no set of sandboxes can reach it. file-nr is measured before and
 * while the guest holds. */
static void holder_leaves_the_table_to_others(const char *tier)
{
    h_require_kernel_tier();
    unsigned long long before = proc_number("/proc/sys/fs/file-nr");
    snprintf(tmp, sizeof(tmp), "/tmp/bh-e2e-filemax-XXXXXX");
    cr_assert_not_null(mkdtemp(tmp));
    char fifo[128];
    snprintf(fifo, sizeof(fifo), "%s/stdin", tmp);
    /* closing it ends the guest */
    cleanup_close int hold = h_held_fifo(fifo);
    char *bh = h_path("bulkhead");
    struct h_job j = h_spawn((char *const[]){bh, "do", "--tier", (char *)tier, "--memory", "64m",
                                             "--", PY, "-c", (char *)file_table_hold, NULL},
                             NULL, fifo, NULL);
    free(bh);
    long held = -1;
    /* Until the guest says it holds, or ended; the bound only stops a hang. */
    for (int i = 0; i < 18000 && held < 0; i++) {
        cleanup_free char *out = h_read_fd(j.out);
        const char *h = strstr(out, "held ");
        if (h != NULL && strstr(h, "end") != NULL)
            held = strtol(h + 5, NULL, 10);
        else if (waitpid(j.pid, NULL, WNOHANG) != 0)
            break;
        else
            usleep(10000);
    }
    unsigned long long during = proc_number("/proc/sys/fs/file-nr");
    struct run_result n = do_env(tier, NULL, NULL, "--", PY, "-c", neighbour_opens, NULL);
    int unpriv = unprivileged_opens();
    unsigned long long file_max = proc_number("/proc/sys/fs/file-max");
    close(hold);
    hold = -1;
    char *out = NULL, *err = NULL;
    int st = h_finish(&j, 120, &out, &err);
    cr_log_info("%s tier: guest held %ld mapped files under --memory 64m; file-nr %llu before, "
                "%llu while held; fs.file-max %llu",
                tier, held, before, during, file_max);
    cr_assert_geq(held, 20000, "the guest held only %ld files (exit %d): %s\n%s", held, st, out,
                  err);
    cr_assert_eq(st, 0, "the holding guest: exit %d: %s", st, err);
    cr_assert_eq(n.status, 0, "a neighbour sandbox could not open files while a guest held %ld: %s",
                 held, n.err);
    cr_assert_not_null(strstr(n.out, "opened 900"), "%s", n.out);
    cr_assert_eq(unpriv, 0,
                 "an unprivileged host process could not open files while a guest held "
                 "%ld: %s",
                 held, strerror(unpriv));
    unsigned long long can_hold = mem_total() / BH_FILE_MIN_BYTES;
    cr_assert_geq(file_max, can_hold,
                  "fs.file-max is %llu after a sandbox was made, below the %llu files this "
                  "host's memory can hold",
                  file_max, can_hold);
    free(out);
    free(err);
    h_free(&n);
}

Test(file_table, a_guest_holding_files_leaves_the_table_to_its_neighbours_kernel)
{
    holder_leaves_the_table_to_others("kernel");
}

Test(file_table, a_guest_holding_files_leaves_the_table_to_its_neighbours_container)
{
    holder_leaves_the_table_to_others("container");
}

/* `bulkhead tier` reports the check with its numbers, and refuses a host
 * whose fs.file-max is kept low. */
Test(file_table, the_tier_report_checks_the_file_table)
{
    h_require_kernel_tier();
    char *bh = h_path("bulkhead");
    struct run_result r = h_run((char *const[]){bh, "tier", "--json", NULL}, NULL, NULL, 180);
    cr_assert_eq(r.status, 0, "bulkhead tier: exit %d: %s", r.status, r.err);
    char want[160];
    snprintf(want, sizeof(want), "the host's memory can hold %llu files",
             mem_total() / BH_FILE_MIN_BYTES);
    json_error_t jerr;
    json_t *doc = json_loads(r.out, 0, &jerr);
    cr_assert_not_null(doc, "bulkhead tier --json: %s", jerr.text);
    const char *res = NULL, *detail = NULL;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(doc, "checks"), i, c)
    {
        if (strcmp(json_string_value(json_object_get(c, "name")), "file_table") == 0) {
            res = json_string_value(json_object_get(c, "result"));
            detail = json_string_value(json_object_get(c, "detail"));
        }
    }
    cr_assert_not_null(res, "the tier report has no file_table check: %s", r.out);
    cr_assert_str_eq(res, "pass", "file_table: %s", detail);
    cr_assert_not_null(strstr(detail, want), "no `%s` in: %s", want, detail);
    json_decref(doc);
    h_free(&r);

    const char *path = fake_file_max("1000\n");
    char env[200];
    snprintf(env, sizeof(env), "BULKHEAD_TEST_FILE_MAX=%s", path);
    r = h_run((char *const[]){bh, "tier", NULL},
              (char *const[]){env, "BULKHEAD_KEEP_FILE_MAX=1", NULL}, NULL, 180);
    free(bh);
    cr_assert_neq(r.status, 0,
                  "bulkhead tier verified a tier on a host whose fs.file-max is "
                  "kept at 1000: %s",
                  r.out);
    cr_assert_not_null(strstr(r.err, "cannot verify the tier"), "%s", r.err);
    cr_assert_not_null(strstr(r.err, "fs.file-max is 1000"), "%s", r.err);
    h_free(&r);
}

static struct h_daemon bhd = H_DAEMON_INIT(5000);

static void daemon_teardown(void)
{
    h_daemon_stop(&bhd);
    teardown();
}

/* bulkheadd verifies its tier at start through a probe sandbox: on a host
 * whose fs.file-max may be raised it raises it and serves; where it is kept
 * low it refuses to start, naming the numbers. */
Test(file_table, bulkheadd_raises_a_low_file_max_and_serves, .fini = daemon_teardown)
{
    h_require_kernel_tier();
    const char *path = fake_file_max("1000\n");
    cr_assert_eq(setenv("BULKHEAD_TEST_FILE_MAX", path, 1), 0);
    char msg[1024];
    cr_assert_eq(
        h_daemon_launch(&bhd, "/tmp/bhd-e2e-XXXXXX", "kernel", "--warm 0", msg, sizeof(msg)), 0,
        "bulkheadd did not start on a host whose fs.file-max it may raise: %s", msg);
    cleanup_free char *now = slurp(path);
    cr_assert_eq(strtoull(now, NULL, 10), BH_FILE_MAX_RAISED,
                 "fs.file-max (fake) was 1000 and is now `%s` after bulkheadd started", now);
}

Test(file_table, bulkheadd_refuses_to_start_on_a_kept_low_file_max, .fini = daemon_teardown)
{
    h_require_kernel_tier();
    const char *path = fake_file_max("1000\n");
    cr_assert_eq(setenv("BULKHEAD_TEST_FILE_MAX", path, 1), 0);
    cr_assert_eq(setenv("BULKHEAD_KEEP_FILE_MAX", "1", 1), 0);
    char msg[1024];
    int rc = h_daemon_launch(&bhd, "/tmp/bhd-e2e-XXXXXX", "kernel", "--warm 0", msg, sizeof(msg));
    cr_assert_eq(rc, -1, "bulkheadd started on a host whose fs.file-max is kept at 1000");
    cr_assert_not_null(strstr(msg, "fs.file-max is 1000"), "%s", msg);
    cr_assert_not_null(strstr(msg, "BULKHEAD_KEEP_FILE_MAX=1 forbids raising it"), "%s", msg);
}
