# bulkhead session agent: the first guest of a bulkheadd session sandbox.
#
# bulkheadd starts it as `python3 -I -c <this file>` with fd 0 and fd 1 both
# one end of a socketpair to the daemon. Everything on that channel is a
# frame (4-byte big-endian length + payload): JSON requests from the daemon;
# replies are a JSON header frame followed by raw frames (stdout, stderr,
# images). The daemon validates and caps all of it: this agent runs next to
# guest code and is not trusted.
#
# It owns the interpreters: the Python runner (a fork of this process that
# executes runner.py's source) and the Node runner (node -e runner.js), each
# with its fds 1 and 2 on pipes this agent reads (so child processes' output
# counts) and a separate control socketpair for cell requests and results.
import ctypes
import errno
import gc
import json
import os
import select
import signal
import socket
import struct
import sys
import time

CHAN_IN = 0
CHAN_OUT = 1
FRAME_MAX = 64 * 1024 * 1024


def pidfd_ended(fd):
    """True once the process behind the pidfd has ended (a zombie has)."""
    p = select.poll()
    p.register(fd, select.POLLIN)
    return bool(p.poll(0))


def wait_ended(pid, deadline):
    """(True, wait status) once child pid has ended ((True, None): reaped
    elsewhere), (False, None) if it has not by deadline (time.monotonic()):
    a pidfd says when, so nothing polls."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        fd = -1
    try:
        while True:
            done, st = os.waitpid(pid, os.WNOHANG)
            if done == pid:
                return True, st
            left = deadline - time.monotonic()
            if left <= 0:
                return False, None
            if fd < 0:
                time.sleep(min(left, 0.01))
                continue
            p = select.poll()
            p.register(fd, select.POLLIN)
            p.poll(left * 1000)
    except ChildProcessError:
        return True, None
    finally:
        if fd >= 0:
            os.close(fd)


def leader_exited(pid):
    """True once the process's main thread has exited (state Z or X): a kill
    or crash has reached it, though waitpid may not see it until its other
    threads are gone (node's take a moment). Unknown (no /proc) is False."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            s = f.read()
    except OSError:
        return False
    return s[s.rfind(b")") + 2 :][:1] in (b"Z", b"X")


def read_exact(fd, n):
    parts = []
    while n > 0:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            return None
        parts.append(b)
        n -= len(b)
    return b"".join(parts)


def read_frame(fd):
    h = read_exact(fd, 4)
    if h is None:
        return None
    (n,) = struct.unpack(">I", h)
    if n > FRAME_MAX:
        return None
    return read_exact(fd, n) if n else b""


def write_frame(fd, data):
    buf = struct.pack(">I", len(data)) + data
    view = memoryview(buf)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def sock_send(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def sock_recv_frame(sock, buf):
    """Returns (message or None, rest of buffer) from bytes already read."""
    if len(buf) < 4:
        return None, buf
    (n,) = struct.unpack(">I", buf[:4])
    if len(buf) < 4 + n:
        return None, buf
    return json.loads(buf[4 : 4 + n]), buf[4 + n :]


class Interp:
    def __init__(self, lang, pid, ctl, out_r, err_r):
        self.lang = lang
        self.pid = pid
        self.ctl = ctl
        self.out_r = out_r
        self.err_r = err_r
        self.status = None  # wait status once reaped

    def close(self):
        for fd in (self.out_r, self.err_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.ctl.close()


class Agent:
    def __init__(self, init):
        self.workdir = init.get("workdir", "/work")
        self.sandboxed = bool(init.get("sandboxed", True))
        self.py_src = init["python_runner"]
        self.js_src = init.get("javascript_runner", "")
        self.node = init.get("node", "/usr/bin/node")
        self.node_flags = [str(f) for f in init.get("node_flags") or []]
        self.env = init.get("env") or {}
        self.interps = {}
        self.used = set()  # languages that ran a cell in the current interpreter
        self.me = os.getpid()
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
        except Exception:
            pass

    # ---- interpreters ------------------------------------------------------
    def start(self, lang):
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        if lang == "python":
            # objects inherited from this agent stay out of the child's
            # collector: fewer copy-on-write pages per session
            gc.freeze()
            pid = os.fork()
            if pid == 0:
                try:
                    os.setsid()
                    null = os.open("/dev/null", os.O_RDONLY)
                    os.dup2(null, 0)
                    os.dup2(out_w, 1)
                    os.dup2(err_w, 2)
                    keep = b.fileno()
                    os.closerange(3, keep)
                    os.closerange(keep + 1, 65536)
                    for k in list(os.environ):
                        del os.environ[k]
                    os.environ.update(self.env)
                    os.chdir(self.workdir)
                    g = {"__name__": "bh_runner"}
                    exec(compile(self.py_src, "bh-runner.py", "exec"), g)
                    g["serve"](b.detach())
                except BaseException:
                    pass
                os._exit(70)
        else:
            fa = [
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
                (os.POSIX_SPAWN_DUP2, b.fileno(), 3),
            ]
            env = dict(self.env)
            env["BH_CTL_FD"] = "3"
            cwd = os.getcwd()
            os.chdir(self.workdir)
            try:
                pid = os.posix_spawn(
                    self.node,
                    [self.node, "--stack-size=2000"] + self.node_flags + ["-e", self.js_src],
                    env,
                    file_actions=fa,
                    setsid=True,
                )
            finally:
                os.chdir(cwd)
        b.close()
        os.close(out_w)
        os.close(err_w)
        it = Interp(lang, pid, a, out_r, err_r)
        self.interps[lang] = it
        self.used.discard(lang)
        return it

    def kill_interp(self, lang):
        it = self.interps.pop(lang, None)
        if it is None:
            return
        try:
            os.kill(it.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(it.pid, 0)
        except OSError:
            pass
        it.close()

    def reap(self):
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for lang, it in list(self.interps.items()):
                if it.pid == pid:
                    it.status = st

    def kill_all_but(self, keep):
        """In a sandbox every other process is the cell's: kill by listing
        /proc alone. Reading each /proc/N/stat is a brokered open per process,
        and after a fork bomb, with the sandbox's CPU quota spent, those opens
        cost tens of ms each: the cleanup overran the daemon's deadline.
        Each kill goes through a pidfd, which names that one process: a pid
        listed again is passed over while the process killed under it has
        not ended yet (a SIGKILL cannot be blocked: only its reaper is
        awaited), and looked at afresh once it has, since the pid may now be
        another process's. A zombie is left to its reaper. A round that
        signals no live process ends the cleanup."""
        killed = {}  # pid -> pidfd of the process we killed (None: without one)
        try:
            for _ in range(200):
                signalled = False
                for name in os.listdir("/proc"):
                    if not name.isdigit() or int(name) in keep:
                        continue
                    pid = int(name)
                    old = killed.get(pid, -1)
                    if old is None or (old != -1 and not pidfd_ended(old)):
                        continue
                    try:
                        fd = os.pidfd_open(pid)
                    except OSError as e:
                        if e.errno != errno.ESRCH:
                            # no pidfds here: kill by pid, once
                            try:
                                os.kill(pid, signal.SIGKILL)
                                signalled = True
                            except OSError:
                                pass
                            killed[pid] = None
                        continue
                    if pidfd_ended(fd):
                        os.close(fd)
                        continue
                    try:
                        signal.pidfd_send_signal(fd, signal.SIGKILL)
                    except OSError:
                        pass
                    if old != -1:
                        os.close(old)
                    killed[pid] = fd
                    signalled = True
                if not signalled:
                    return
                time.sleep(0.002)
        finally:
            for fd in killed.values():
                if fd is not None:
                    os.close(fd)

    def kill_leftovers(self):
        """Kill every process a cell left behind: all but pid 1, us and the
        interpreters (descendants of ours only, outside a sandbox)."""
        keep = {1, self.me} | {it.pid for it in self.interps.values() if it.status is None}
        if self.sandboxed:
            self.kill_all_but(keep)
            return
        for _ in range(20):
            procs = {}
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open("/proc/%s/stat" % name, "rb") as f:
                        st = f.read()
                    fields = st[st.rindex(b")") + 2 :].split()
                    ppid = int(fields[1])
                except (OSError, ValueError, IndexError):
                    continue
                if fields[0] in (b"Z", b"X"):
                    continue  # already dead; its parent reaps it
                procs[int(name)] = ppid
            victims = []
            for pid in procs:
                if pid in keep:
                    continue
                if self.sandboxed:
                    victims.append(pid)
                    continue
                p, hops = pid, 0
                while p in procs and hops < 64:
                    p = procs[p]
                    hops += 1
                    if p == self.me:
                        victims.append(pid)
                        break
            if not victims:
                break
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.002)
            self.reap()
        self.reap()

    # ---- files -------------------------------------------------------------
    def write_files(self, files):
        root = os.open(self.workdir, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            for f in files:
                parts = f["path"].split("/")
                if (
                    not parts
                    or any(p in ("", ".", "..") for p in parts)
                    or "\0" in f["path"]
                ):
                    raise ValueError("file path `%s` is not a plain relative path" % f["path"])
                dfd = os.dup(root)
                try:
                    for p in parts[:-1]:
                        try:
                            os.mkdir(p, 0o755, dir_fd=dfd)
                        except FileExistsError:
                            pass
                        nfd = os.open(
                            p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
                        )
                        os.close(dfd)
                        dfd = nfd
                    fd = os.open(
                        parts[-1],
                        os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                        0o644,
                        dir_fd=dfd,
                    )
                    try:
                        data = f["content"].encode("utf-8")
                        view = memoryview(data)
                        while view:
                            view = view[os.write(fd, view) :]
                    finally:
                        os.close(fd)
                except OSError as e:
                    raise ValueError("cannot write file `%s`: %s" % (f["path"], e.strerror))
                finally:
                    os.close(dfd)
        finally:
            os.close(root)

    # ---- a cell ------------------------------------------------------------
    def cell(self, req):
        lang = req["language"]
        cap = int(req.get("output_cap", 1 << 20))
        timeout = max(1, int(req.get("timeout_ms", 30000))) / 1000.0
        hdr = {"exit": 0, "timed_out": False, "has_value": False, "value": ""}
        try:
            self.write_files(req.get("files") or [])
        except ValueError as e:
            hdr["files_error"] = str(e)
            return hdr, b"", b"", []
        self.reap()
        it = self.interps.get(lang)
        # An interpreter whose main thread has exited would get this cell and
        # fail it with its own kill status, or never answer (its other
        # threads may live on): end it (SIGKILL ends every thread, so the
        # wait is bounded) and run the cell in a fresh one.
        if it is not None and (it.status is not None or leader_exited(it.pid)):
            self.kill_interp(lang)
            it = None
        fresh = it is None or lang not in self.used
        if it is None:
            it = self.start(lang)
        self.used.add(lang)
        hdr["fresh_interpreter"] = fresh
        # stale output (timers between cells) is not this cell's
        for fd in (it.out_r, it.err_r):
            os.set_blocking(fd, False)
            try:
                while os.read(fd, 65536):
                    pass
            except BlockingIOError:
                pass
        out = Capture(cap)
        err = Capture(cap)
        t0 = time.monotonic()
        deadline = t0 + timeout
        reply = None
        alive = True
        try:
            sock_send(it.ctl, {"code": req["code"]})
        except OSError:
            alive = False
        buf = b""
        while alive and reply is None:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r, _, _ = select.select([it.ctl, it.out_r, it.err_r], [], [], left)
            if it.out_r in r:
                out.read(it.out_r)
            if it.err_r in r:
                err.read(it.err_r)
            if it.ctl in r:
                try:
                    data = it.ctl.recv(1 << 20)
                except OSError:
                    data = b""
                if not data:
                    alive = False
                    break
                buf += data
                reply, buf = sock_recv_frame(it.ctl, buf)
        run_ms = int((time.monotonic() - t0) * 1000)
        if reply is None and alive:
            hdr["exit"] = 124
            hdr["timed_out"] = True
            self.kill_interp(lang)
        elif reply is None:
            # The interpreter hung up (exit() or a crash): its code, then
            # fresh. One that closed its channel and lives on gets until the
            # cell's deadline to end, as any cell does.
            ended, st = True, it.status
            if st is None:
                ended, st = wait_ended(it.pid, deadline)
                it.status = st
            if not ended:
                hdr["exit"] = 124
                hdr["timed_out"] = True
            elif st is None:
                hdr["exit"] = 1
            else:
                code = os.waitstatus_to_exitcode(st)
                hdr["exit"] = code if code >= 0 else 128 - code
            self.kill_interp(lang)
        else:
            hdr["exit"] = int(reply.get("exit", 0))
            if reply.get("has_value"):
                hdr["has_value"] = True
                hdr["value"] = str(reply.get("value", ""))
            if reply.get("exited"):
                self.kill_interp(lang)
        self.kill_leftovers()
        cur = self.interps.get(lang)
        for fd in (it.out_r, it.err_r):
            if cur is it:
                cap_obj = out if fd == it.out_r else err
                os.set_blocking(fd, False)
                try:
                    while cap_obj.read(fd):
                        pass
                except BlockingIOError:
                    pass
        if cur is not it:
            # the interpreter's pipes are ours to drain until its last writer is gone
            pass
        hdr["state_kept"] = lang in self.interps
        hdr["run_ms"] = run_ms
        hdr["stdout_bytes"] = out.total
        hdr["stderr_bytes"] = err.total
        images = []
        if reply is not None:
            import base64

            for im in reply.get("images") or []:
                try:
                    images.append(base64.b64decode(im))
                except Exception:
                    pass
        hdr["n_images"] = len(images)
        try:
            st = os.statvfs(self.workdir)
            hdr["disk_used"] = (st.f_blocks - st.f_bfree) * st.f_frsize
        except OSError:
            pass
        return hdr, out.data(), err.data(), images

    def serve(self):
        while True:
            raw = read_frame(CHAN_IN)
            if raw is None:
                return
            try:
                req = json.loads(raw)
            except ValueError:
                return
            op = req.get("op")
            if op == "cell":
                hdr, out, err, images = self.cell(req)
                write_frame(CHAN_OUT, json.dumps(hdr).encode())
                write_frame(CHAN_OUT, out)
                write_frame(CHAN_OUT, err)
                for im in images:
                    write_frame(CHAN_OUT, im)
            elif op == "start":
                for lang in req.get("languages") or []:
                    if lang not in self.interps:
                        self.start(lang)
                write_frame(CHAN_OUT, json.dumps({"ok": True}).encode())
            else:
                write_frame(CHAN_OUT, json.dumps({"error": "unknown op"}).encode())


class Capture:
    def __init__(self, cap):
        self.cap = cap
        self.parts = []
        self.kept = 0
        self.total = 0

    def read(self, fd):
        try:
            b = os.read(fd, 65536)
        except BlockingIOError:
            raise
        except OSError:
            return b""
        self.total += len(b)
        if self.kept < self.cap and b:
            take = b[: self.cap - self.kept]
            self.parts.append(take)
            self.kept += len(take)
        return b

    def data(self):
        return b"".join(self.parts)


def main():
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    raw = read_frame(CHAN_IN)
    if raw is None:
        sys.exit(0)
    init = json.loads(raw)
    # our own stderr must not reach the daemon's channel
    null = os.open("/dev/null", os.O_RDWR)
    os.dup2(null, 2)
    os.close(null)
    agent = Agent(init)
    for lang in init.get("prestart") or []:
        agent.start(lang)
    write_frame(CHAN_OUT, json.dumps({"ready": True, "pid": os.getpid()}).encode())
    agent.serve()


# Run as `python3 -c`; a test loads the source under another name.
if __name__ == "__main__":
    main()
