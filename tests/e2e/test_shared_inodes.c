/* Shared kernel state, tried as a hostile guest would (issue 10, findings 3,
 * 4, 5, 7): every test is the attack itself. A guest runs in a kernel-tier
 * `bulkhead do`; the host side (this process, the host's own programs, a
 * second sandbox) does what the guest tries to observe, and the test checks
 * what the guest saw.
 * - watches: a guest watching /usr/bin and the Python tree hears nothing of
 *   the host or of a neighbour sandbox, only of itself;
 * - locks: flock and POSIX locks on a file of a shared tree are not seen by
 *   the host or by another sandbox;
 * - /proc: no path with `..` opens another process's entries;
 * - sockets: MPTCP and UDP-Lite sockets and socket filters are refused,
 *   while loopback TCP/UDP, unix sockets and sqlite3 keep working.
 * Guests and host meet over pipes (guest stdin/stdout), so nothing here
 * depends on timing. Each test fails when the kernel tier is not there. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

static void setup(void)
{
    h_require_kernel_tier();
}

/* A kernel-tier sandbox running python3 -c code, spoken to over pipes. */
struct peer {
    pid_t pid;
    int in;  /* the guest's stdin */
    int out; /* the guest's stdout */
    char buf[65536];
    size_t len;
};

static void peer_start(struct peer *p, const char *code)
{
    int in[2], out[2];
    cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
    cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
    char *bh = h_path("bulkhead");
    p->len = 0;
    p->pid = fork();
    cr_assert_geq(p->pid, 0);
    if (p->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        char *argv[] = {bh,   "do",         "--tier", "kernel", "--", "/usr/bin/python3",
                        "-c", (char *)code, NULL};
        execv(bh, argv);
        _exit(127);
    }
    free(bh);
    close(in[0]);
    close(out[1]);
    p->in = in[1];
    p->out = out[0];
}

/* Reads until a line equal to want (or EOF, or 60 s); returns the whole
 * output so far. */
static const char *peer_until(struct peer *p, const char *want)
{
    double end = h_now() + 60;
    for (;;) {
        p->buf[p->len] = '\0';
        char pat[128];
        snprintf(pat, sizeof(pat), "%s\n", want);
        if ((p->len >= strlen(pat) && strncmp(p->buf, pat, strlen(pat)) == 0) ||
            strstr(p->buf, (snprintf(pat, sizeof(pat), "\n%s\n", want), pat)) != NULL)
            return p->buf;
        int left = (int)((end - h_now()) * 1000);
        struct pollfd pfd = {.fd = p->out, .events = POLLIN};
        if (left <= 0 || poll(&pfd, 1, left) <= 0)
            cr_assert_fail("the guest did not say `%s` within 60 s; it said: %s", want, p->buf);
        ssize_t n = read(p->out, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
        if (n <= 0)
            cr_assert_fail("the guest ended before saying `%s`; it said: %s", want, p->buf);
        p->len += (size_t)n;
    }
}

static void peer_say(struct peer *p, const char *line)
{
    cr_assert_eq(write(p->in, line, strlen(line)), (ssize_t)strlen(line));
}

static int peer_end(struct peer *p)
{
    close(p->in);
    int st = 0;
    double end = h_now() + 60;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (h_now() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            break;
        }
        usleep(20000);
    }
    close(p->out);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Runs a program in a second kernel-tier sandbox, to completion. */
static void neighbour(const char *const *cmd)
{
    char *bh = h_path("bulkhead");
    char *argv[16] = {bh, "do", "--tier", "kernel", "--"};
    size_t n = 5;
    for (size_t i = 0; cmd[i] && n < 15; i++)
        argv[n++] = (char *)cmd[i];
    argv[n] = NULL;
    struct run_result r = h_run(argv, NULL, NULL, 60);
    cr_assert_eq(r.status, 0, "the neighbour sandbox failed (%d): %s", r.status, r.err);
    h_free(&r);
    free(bh);
}

static void host_run(const char *const *cmd)
{
    struct run_result r = h_run((char *const *)cmd, NULL, NULL, 60);
    cr_assert_eq(r.status, 0, "%s on the host failed (%d): %s", cmd[0], r.status, r.err);
    h_free(&r);
}

/* ---- watches (finding 3) -------------------------------------------------- */

/* The guest's watcher: inotify on /usr/bin and the Python tree; "ready";
 * waits for the host's "go"; then opens /usr/bin/env itself (its own
 * activity must still be reported, so the watch really works) and prints
 * every event it got, one "event DIR NAME" line each. */
static const char watcher[] =
    "import ctypes, os, struct, sys, sysconfig\n"
    "libc = ctypes.CDLL(None, use_errno=True)\n"
    "fd = libc.inotify_init1(os.O_NONBLOCK)\n"
    "assert fd >= 0, ctypes.get_errno()\n"
    "dirs = {}\n"
    "for d in ('/usr/bin', sysconfig.get_paths()['stdlib'], sysconfig.get_paths()['stdlib'] + "
    "'/json'):\n"
    "    wd = libc.inotify_add_watch(fd, d.encode(), 0x1 | 0x20 | 0x10)\n"
    "    assert wd >= 0, (d, os.strerror(ctypes.get_errno()))\n"
    "    dirs[wd] = d\n"
    "print('ready', flush=True)\n"
    "sys.stdin.readline()\n"
    "def drain():\n"
    "    out = []\n"
    "    while True:\n"
    "        try:\n"
    "            b = os.read(fd, 65536)\n"
    "        except BlockingIOError:\n"
    "            return out\n"
    "        i = 0\n"
    "        while i < len(b):\n"
    "            wd, mask, cookie, ln = struct.unpack_from('iIII', b, i)\n"
    "            name = b[i + 16:i + 16 + ln].rstrip(b'\\0').decode()\n"
    "            out.append((dirs.get(wd, '?'), name))\n"
    "            i += 16 + ln\n"
    "for d, name in drain():\n"
    "    print('event', d, name)\n"
    "open('/usr/bin/env', 'rb').close()\n"
    "print('own', ' '.join(n for d, n in drain()))\n"
    "print('done', flush=True)\n";

Test(shared_watches, a_guest_hears_nothing_of_the_host_or_a_neighbour, .init = setup,
     .timeout = 240)
{
    struct peer p;
    peer_start(&p, watcher);
    peer_until(&p, "ready");
    /* The host runs programs from /usr/bin; a neighbour sandbox runs one and
     * imports from the Python tree, as another session would. */
    host_run((const char *const[]){"/usr/bin/env", "true", NULL});
    host_run((const char *const[]){"/usr/bin/python3", "-c", "import json", NULL});
    neighbour((const char *const[]){"/usr/bin/env", "true", NULL});
    neighbour((const char *const[]){"/usr/bin/python3", "-c", "import json.decoder", NULL});
    peer_say(&p, "go\n");
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0);
    cr_expect_null(strstr(out, "event "),
                   "the guest's watches on the shared trees reported someone else's activity:\n%s",
                   out);
    cr_expect_not_null(strstr(out, "own env"),
                       "the guest's own open of /usr/bin/env was not reported (the watch does not "
                       "work at all):\n%s",
                       out);
}

/* Watches on the sandbox's own writable trees work as usual. */
Test(shared_watches, own_trees_are_watched_as_usual, .init = setup, .timeout = 120)
{
    struct peer p;
    peer_start(&p, "import ctypes, os\n"
                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                   "fd = libc.inotify_init1(0)\n"
                   "for d in ('/tmp', os.getcwd(), '/dev/shm'):\n"
                   "    assert libc.inotify_add_watch(fd, d.encode(), 0x100) >= 0, d\n"
                   "    open(d + '/f', 'w').close()\n"
                   "    b = os.read(fd, 4096)\n"
                   "    assert b[16:].rstrip(b'\\0') == b'f', b\n"
                   "print('done', flush=True)\n");
    peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0);
}

/* Device nodes are the host's inodes (any read of /dev/urandom on the host
 * would be an event), /proc and /sys are kernel state: no watch there. */
Test(shared_watches, device_nodes_and_kernel_state_are_not_watched, .init = setup, .timeout = 120)
{
    struct peer p;
    peer_start(&p, "import ctypes, os\n"
                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                   "fd = libc.inotify_init1(0)\n"
                   "for d in ('/dev/null', '/dev/urandom', '/dev/zero', '/proc', '/proc/self', "
                   "'/sys', '/proc/self/fd/0'):\n"
                   "    wd = libc.inotify_add_watch(fd, d.encode(), 0xfff)\n"
                   "    print('WATCHED' if wd >= 0 else 'refused', d, ctypes.get_errno())\n"
                   "print('done', flush=True)\n");
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0, "%s", out);
    cr_expect_null(strstr(out, "WATCHED"), "%s", out);
}

/* fanotify would watch whole mounts: refused outright. */
Test(shared_watches, fanotify_is_refused, .init = setup, .timeout = 120)
{
    struct peer p;
    peer_start(&p, "import ctypes, os\n"
                   "libc = ctypes.CDLL(None, use_errno=True)\n"
                   "for flags in (0, 0x200, 0x4):\n" /* FAN_CLASS_NOTIF, FAN_REPORT_FID, ... */
                   "    fd = libc.fanotify_init(flags, os.O_RDONLY)\n"
                   "    print('fanotify', flags, fd, ctypes.get_errno())\n"
                   "    assert fd < 0\n"
                   "print('done', flush=True)\n");
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0, "%s", out);
}

/* ---- locks (finding 4) ---------------------------------------------------- */

static const char *const lock_file = "/usr/bin/env";

/* Holds an exclusive flock and a POSIX read lock on lock_file, says
 * "locked", and keeps them until told to go. */
static const char holder[] = "import fcntl, sys\n"
                             "f = open('/usr/bin/env', 'rb')\n"
                             "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                             "fcntl.lockf(f, fcntl.LOCK_SH | fcntl.LOCK_NB)\n"
                             "print('locked', flush=True)\n"
                             "sys.stdin.readline()\n"
                             "print('done', flush=True)\n";

/* Reports whether someone else holds locks on lock_file: flock with NB, and
 * F_GETLK for a write lock (allowed on a read-only fd, and it names the
 * holder of any read lock). */
static const char prober[] = "import fcntl, os, struct\n"
                             "f = open('/usr/bin/env', 'rb')\n"
                             "try:\n"
                             "    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                             "    print('flock free')\n"
                             "except BlockingIOError:\n"
                             "    print('flock HELD')\n"
                             "lk = struct.pack('hhqqi4x', fcntl.F_WRLCK, 0, 0, 0, 0)\n"
                             "t = struct.unpack('hhqqi4x', fcntl.fcntl(f, fcntl.F_GETLK, lk))[0]\n"
                             "print('posix', 'free' if t == fcntl.F_UNLCK else 'HELD')\n"
                             "print('done', flush=True)\n";

Test(shared_locks, locks_on_a_shared_tree_cross_no_wall, .init = setup, .timeout = 240)
{
    struct peer a;
    peer_start(&a, holder);
    peer_until(&a, "locked");

    /* A second sandbox looks for them. */
    struct peer b;
    peer_start(&b, prober);
    const char *out = peer_until(&b, "done");
    cr_expect_eq(peer_end(&b), 0);
    cr_expect_not_null(strstr(out, "flock free"), "a neighbour sandbox saw the flock: %s", out);
    cr_expect_not_null(strstr(out, "posix free"), "a neighbour sandbox saw the POSIX lock: %s",
                       out);

    /* So does the host. */
    int fd = open(lock_file, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_expect_eq(flock(fd, LOCK_EX | LOCK_NB), 0, "the host saw the guest's flock: %s",
                 strerror(errno));
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    cr_assert_eq(fcntl(fd, F_GETLK, &fl), 0);
    cr_expect_eq(fl.l_type, F_UNLCK, "the host saw the guest's POSIX lock (pid %d)", fl.l_pid);

    /* And the other way: with the host holding both, a sandbox sees none. */
    struct flock rd = {.l_type = F_RDLCK, .l_whence = SEEK_SET};
    cr_assert_eq(fcntl(fd, F_SETLK, &rd), 0);
    struct peer c;
    peer_start(&c, prober);
    out = peer_until(&c, "done");
    cr_expect_eq(peer_end(&c), 0);
    cr_expect_not_null(strstr(out, "flock free"), "a sandbox saw the host's flock: %s", out);
    cr_expect_not_null(strstr(out, "posix free"), "a sandbox saw the host's POSIX lock: %s", out);
    close(fd);

    peer_say(&a, "go\n");
    peer_until(&a, "done");
    cr_expect_eq(peer_end(&a), 0);
}

/* The device nodes too: /dev/null is a node of the sandbox's own, not the
 * host's, so its locks cross no wall either. */
Test(shared_locks, locks_on_device_nodes_cross_no_wall, .init = setup, .timeout = 240)
{
    struct peer a;
    peer_start(&a, "import fcntl, sys\n"
                   "f = open('/dev/null', 'rb')\n"
                   "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                   "print('locked', flush=True)\n"
                   "sys.stdin.readline()\n"
                   "print('done', flush=True)\n");
    peer_until(&a, "locked");
    struct peer b;
    peer_start(&b, "import fcntl\n"
                   "f = open('/dev/null', 'rb')\n"
                   "try:\n"
                   "    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
                   "    print('flock free')\n"
                   "except BlockingIOError:\n"
                   "    print('flock HELD')\n"
                   "print('done', flush=True)\n");
    const char *out = peer_until(&b, "done");
    cr_expect_eq(peer_end(&b), 0);
    cr_expect_not_null(strstr(out, "flock free"), "a neighbour saw the flock on /dev/null: %s",
                       out);
    int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    cr_expect_eq(flock(fd, LOCK_EX | LOCK_NB), 0, "the host saw the guest's flock on /dev/null");
    close(fd);
    peer_say(&a, "go\n");
    peer_until(&a, "done");
    cr_expect_eq(peer_end(&a), 0);
}

/* sqlite3 locks its files (POSIX locks) on the sandbox's own trees, where
 * they must keep working: two connections, one writing in a transaction. */
Test(shared_locks, sqlite3_on_tmp_and_the_working_directory, .init = setup, .timeout = 120)
{
    struct peer p;
    peer_start(&p, "import sqlite3, os\n"
                   "for d in ('/tmp', os.getcwd()):\n"
                   "    a = sqlite3.connect(d + '/t.db', timeout=0)\n"
                   "    b = sqlite3.connect(d + '/t.db', timeout=0)\n"
                   "    a.execute('create table t(x)')\n"
                   "    a.commit()\n"
                   "    a.execute('begin exclusive')\n"
                   "    a.execute('insert into t values (1)')\n"
                   "    try:\n"
                   "        b.execute('insert into t values (2)')\n"
                   "        print('NOT LOCKED', d)\n"
                   "    except sqlite3.OperationalError as e:\n"
                   "        print('locked', d, e)\n"
                   "    a.commit()\n"
                   "    b.execute('insert into t values (3)')\n"
                   "    b.commit()\n"
                   "    print(d, sorted(r[0] for r in a.execute('select x from t')))\n"
                   "print('done', flush=True)\n");
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0);
    cr_expect_null(strstr(out, "NOT LOCKED"), "%s", out);
    cr_expect_not_null(strstr(out, "/tmp [1, 3]"), "%s", out);
    cr_expect_not_null(strstr(out, "/work [1, 3]"), "%s", out);
}

/* ---- /proc and ".." (finding 5) ------------------------------------------ */

/* The broker holds CAP_SYS_PTRACE; a /proc path must be judged by the
 * process it reaches, whatever ".." did on the way. Siblings: a plain one
 * (same uid) and a non-dumpable one (an execute-only copy of sleep). */
static const char proc_walker[] =
    "import os, subprocess, shutil, time\n"
    "me = os.getpid()\n"
    "sib = subprocess.Popen(['/bin/sleep', '60'])\n"
    "shutil.copy('/bin/sleep', '/tmp/nd')\n"
    "os.chmod('/tmp/nd', 0o111)\n"
    "for attempt in range(50):\n"
    "    try:\n"
    "        nd = subprocess.Popen(['/tmp/nd', '60'])\n"
    "        break\n"
    "    except OSError as e:\n"
    /* the broker closes its copy of the written file's fd a moment after
     * handing it over: a file executed at once can be busy, as after a fork */
    "        if e.errno != 26: raise\n"
    "        time.sleep(0.02)\n"
    "paths = []\n"
    "for P in (sib.pid, nd.pid, 1):\n"
    "    for f in ('mem', 'environ', 'maps', 'smaps', 'auxv', 'syscall', 'fd/0', 'cwd/.', "
    "'root/.'):\n"
    "        paths += [f'/proc/{P}/task/{P}/../{P}/{f}',\n"
    "                  f'/proc/{P}/task/{P}/../../../{P}/task/{P}/../{P}/{f}',\n"
    "                  f'/proc/{P}/task/../task/{P}/../{P}/{f}',\n"
    "                  f'/proc/self/task/{me}/../../../{P}/{f}',\n"
    "                  f'/proc/self/task/{me}/../../1/{f}',\n"
    "                  f'/proc/thread-self/../../{P}/task/{P}/../{P}/{f}']\n"
    "for p in paths:\n"
    "    try:\n"
    "        fd = os.open(p, os.O_RDONLY)\n"
    "        print('OPENED', p)\n"
    "        os.close(fd)\n"
    "    except OSError as e:\n"
    "        pass\n"
    "    try:\n"
    "        print('READLINK', p, os.readlink(p.replace('/mem', '/exe')))\n"
    "    except OSError:\n"
    "        pass\n"
    "own = [f'/proc/self/task/{me}/../{me}/maps', f'/proc/{me}/task/{me}/../{me}/environ',\n"
    "       f'/proc/thread-self/../{me}/status']\n"
    "for p in own:\n"
    "    with open(p, 'rb') as f:\n"
    "        print('own', 'ok' if f.read(16) else 'empty', p)\n"
    "sib.kill(); nd.kill()\n"
    "print('done', flush=True)\n";

Test(proc_dotdot, no_path_with_dotdot_opens_another_process, .init = setup, .timeout = 120)
{
    struct peer p;
    peer_start(&p, proc_walker);
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0, "%s", out);
    cr_expect_null(strstr(out, "OPENED"), "another process's /proc entries were opened:\n%s", out);
    cr_expect_null(strstr(out, "READLINK"), "another process's /proc links were read:\n%s", out);
    cr_expect_not_null(strstr(out, "own ok /proc/thread-self"), "%s", out);
    cr_expect_not_null(strstr(out, "/maps\nown ok"), "the guest's own entries: %s", out);
}

/* ---- the direct socket surface (finding 7) -------------------------------- */

Test(socket_surface, other_protocols_and_socket_filters_are_refused, .init = setup, .timeout = 120)
{
    struct peer p;
    peer_start(
        &p,
        "import socket, struct\n"
        "A, A6, U = socket.AF_INET, socket.AF_INET6, socket.AF_UNIX\n"
        "S, D = socket.SOCK_STREAM, socket.SOCK_DGRAM\n"
        "for args in ((A, S, 262), (A6, S, 262), (A, D, 136), (A6, D, 136), (A, S, 132),\n"
        "             (A, D, 1), (U, S, 1)):\n" /* MPTCP, UDP-Lite, SCTP, ICMP, PF_UNIX */
        "    try:\n"
        "        socket.socket(*args).close()\n"
        "        print('MADE', args)\n"
        "    except OSError as e:\n"
        "        print('refused socket', args, e.errno)\n"
        "prog = struct.pack('HBBI', 6, 0, 0, 0xffff)\n" /* BPF_RET|BPF_K: accept all */
        "buf = ctypes_buf = bytearray(prog)\n"
        "import ctypes\n"
        "b = ctypes.create_string_buffer(prog)\n"
        "fprog = struct.pack('HxxxxxxQ', 1, ctypes.addressof(b))\n"
        "for level, opt, val in ((socket.SOL_SOCKET, 26, fprog), (socket.SOL_SOCKET, 50, "
        "struct.pack('i', 3)),\n"
        "                        (socket.SOL_SOCKET, 51, fprog), (socket.SOL_SOCKET, 52, "
        "struct.pack('i', 3)),\n"
        "                        (socket.SOL_SOCKET, 25, b'lo\\0'), (socket.IPPROTO_TCP, 31, "
        "b'tls'),\n"
        "                        (socket.IPPROTO_IP, 4, b'\\x01' * 4), (socket.IPPROTO_UDP, 100, "
        "struct.pack('i', 1))):\n"
        "    kind = socket.SOCK_DGRAM if level == socket.IPPROTO_UDP else socket.SOCK_STREAM\n"
        "    s = socket.socket(socket.AF_INET, kind)\n"
        "    try:\n"
        "        s.setsockopt(level, opt, val)\n"
        "        print('SET', level, opt)\n"
        "    except OSError as e:\n"
        "        print('refused option', level, opt, e.errno)\n"
        "    s.close()\n"
        "a, b2 = socket.socketpair()\n"
        "try:\n"
        "    a.getsockopt(socket.SOL_SOCKET, 77)\n"
        "    print('GOT peer pidfd')\n"
        "except OSError as e:\n"
        "    print('refused peer pidfd', e.errno)\n"
        "print('done', flush=True)\n");
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0, "%s", out);
    cr_expect_null(strstr(out, "MADE"), "a refused protocol made a socket:\n%s", out);
    cr_expect_null(strstr(out, "SET"), "a refused socket option was set:\n%s", out);
    cr_expect_null(strstr(out, "GOT"), "%s", out);
    /* MPTCP and UDP-Lite say "not supported", so programs fall back. */
    cr_expect_not_null(strstr(out, "refused socket (<AddressFamily.AF_INET: 2>, "
                                   "<SocketKind.SOCK_STREAM: 1>, 262) 93"),
                       "%s", out);
}

/* Normal socket use keeps working: asyncio and http.server on 127.0.0.1
 * (and ::1), UDP, socketpair, the options they set; Node's http. */
Test(socket_surface, python_and_node_loopback_servers_still_work, .init = setup, .timeout = 180)
{
    struct peer p;
    peer_start(
        &p, "import asyncio, socket, threading, http.server, urllib.request\n"
            "async def main():\n"
            "    async def echo(r, w):\n"
            "        w.write(await r.read(100)); await w.drain(); w.close()\n"
            "    for host in ('127.0.0.1', '::1'):\n"
            "        srv = await asyncio.start_server(echo, host, 0)\n"
            "        port = srv.sockets[0].getsockname()[1]\n"
            "        r, w = await asyncio.open_connection(host, port)\n"
            "        w.write(b'ping'); w.write_eof()\n"
            "        print('asyncio', host, (await r.read()).decode())\n"
            "        w.close(); srv.close(); await srv.wait_closed()\n"
            "asyncio.run(main())\n"
            "h = http.server.ThreadingHTTPServer(('127.0.0.1', 0), "
            "http.server.SimpleHTTPRequestHandler)\n"
            "threading.Thread(target=h.serve_forever, daemon=True).start()\n"
            "print('http', urllib.request.urlopen(f'http://127.0.0.1:{h.server_port}/').status)\n"
            "h.shutdown()\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)\n"
            "u.bind(('127.0.0.1', 0)); u.sendto(b'udp', u.getsockname()); print('udp', "
            "u.recv(9).decode())\n"
            "t = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)\n"
            "for lvl, opt in ((socket.SOL_SOCKET, socket.SO_KEEPALIVE), (socket.IPPROTO_TCP, "
            "socket.TCP_KEEPIDLE),\n"
            "                 (socket.SOL_SOCKET, socket.SO_RCVBUF), (socket.IPPROTO_TCP, "
            "socket.TCP_NODELAY)):\n"
            "    t.setsockopt(lvl, opt, 1 if opt != socket.SO_RCVBUF else 65536)\n"
            "print('err', t.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR))\n"
            "a, b = socket.socketpair(); a.send(b'pair'); print('socketpair', b.recv(9).decode())\n"
            "print('done', flush=True)\n");
    const char *out = peer_until(&p, "done");
    cr_expect_eq(peer_end(&p), 0, "%s", out);
    cr_expect_not_null(strstr(out, "asyncio 127.0.0.1 ping"), "%s", out);
    cr_expect_not_null(strstr(out, "http 200"), "%s", out);
    cr_expect_not_null(strstr(out, "udp udp"), "%s", out);
    cr_expect_not_null(strstr(out, "socketpair pair"), "%s", out);

    const char js[] =
        "const http = require('http'), net = require('net'), dgram = require('dgram');\n"
        "const s = http.createServer((q, r) => r.end('node-ok'));\n"
        "s.listen(0, '127.0.0.1', () => {\n"
        "  http.get({port: s.address().port, host: '127.0.0.1', agent: new "
        "http.Agent({keepAlive: true})}, (r) => {\n"
        "    let b = ''; r.on('data', (d) => b += d);\n"
        "    r.on('end', () => { console.log(b); s.close(); process.exit(0); });\n"
        "  });\n"
        "});\n"
        "const u = dgram.createSocket('udp4'); u.bind(0, '127.0.0.1', () => "
        "u.close());\n";
    char *bh = h_path("bulkhead");
    char *argv[] = {bh, "do", "--tier", "kernel", "--", "/usr/bin/node", "-e", (char *)js, NULL};
    struct run_result r = h_run(argv, NULL, NULL, 120);
    cr_expect_eq(r.status, 0, "node: %s %s", r.out, r.err);
    cr_expect_not_null(strstr(r.out, "node-ok"), "node: %s %s", r.out, r.err);
    h_free(&r);
    free(bh);
}

/* A bulkheadd session: the cell's Python runner is a child of the session
 * agent, which holds the daemon's channel; its environment and memory are
 * out of reach, with or without "..". */
static struct h_daemon agent_daemon = H_DAEMON_INIT(10000);

static void agent_daemon_stop(void)
{
    h_daemon_stop(&agent_daemon);
}

static Bulkhead__Control__Response *agent_roundtrip(Bulkhead__Control__Request *req)
{
    int fd = h_connect(agent_daemon.sock);
    cr_assert_geq(fd, 0);
    cr_assert_eq(h_send(fd, req), 0);
    struct bh_error err = {0};
    Bulkhead__Control__Response *r = h_recv(fd, 180000, &err);
    close(fd);
    cr_assert_not_null(r, "no answer: %s", err.msg);
    return r;
}

Test(proc_dotdot, a_cell_cannot_reach_its_session_agent, .fini = agent_daemon_stop, .timeout = 480)
{
    h_daemon_start(&agent_daemon, "test_shared_inodes", "/tmp/bhd-inodes-XXXXXX", "--warm 0");
    cr_assert_str_eq(agent_daemon.tier, "kernel");
    Bulkhead__Control__Request req;
    Bulkhead__Control__OpenSession o;
    h_open_req(&req, &o, "mallory");
    Bulkhead__Control__Response *r = agent_roundtrip(&req);
    char *id = h_session_id(r);
    bulkhead__control__response__free_unpacked(r, NULL);
    Bulkhead__Control__RunCell c;
    h_cell_req(&req, &c, id, "python",
               "import os\n"
               "me, a = os.getpid(), os.getppid()\n"
               "out = []\n"
               "for f in ('environ', 'mem', 'maps', 'smaps', 'fd/0', 'cwd/.'):\n"
               "    for p in (f'/proc/{a}/task/{a}/../{a}/{f}',\n"
               "              f'/proc/self/task/{me}/../../../{a}/{f}',\n"
               "              f'/proc/{a}/task/../task/{a}/../{a}/{f}', f'/proc/{a}/{f}'):\n"
               "        try:\n"
               "            fd = os.open(p, os.O_RDONLY)\n"
               "            out.append('OPENED ' + p)\n"
               "            os.close(fd)\n"
               "        except OSError:\n"
               "            out.append('refused')\n"
               "print('agent', a not in (me, 1), len(out))\n"
               "print('\\n'.join(out))\n",
               /* not the daemon's 30 s default: the session's first cell
                * starts its interpreter within it, slowly under ASan at
                * load 30+; a bound on a hang only */
               120000, NULL, 0);
    r = agent_roundtrip(&req);
    cr_assert_eq(r->body_case, BULKHEAD__CONTROL__RESPONSE__BODY_RUN_CELL, "not a result");
    const char *out = r->run_cell->stdout;
    cr_expect_not_null(strstr(out, "agent True 24"), "the agent was not found: %s / %s", out,
                       r->run_cell->stderr);
    cr_expect_null(strstr(out, "OPENED"), "the cell reached its session agent:\n%s", out);
    bulkhead__control__response__free_unpacked(r, NULL);
    free(id);
}
