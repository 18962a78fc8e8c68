# bulkhead Python runner: executed inside a fork of the session agent; serve()
# runs cells from the agent's control socket in one persistent namespace.
# Cell output goes to fds 1 and 2 (pipes the agent reads); results go back as
# frames of JSON. The value of a final expression is printed and returned as
# its repr, top-level await runs on one persistent event loop, and open
# matplotlib figures come back as PNG.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import socket
import struct
import sys
import traceback
import types

CO_COROUTINE = 0x80


def _recv(sock):
    def exact(n):
        parts = []
        while n:
            b = sock.recv(n)
            if not b:
                return None
            parts.append(b)
            n -= len(b)
        return b"".join(parts)

    h = exact(4)
    if h is None:
        return None
    (n,) = struct.unpack(">I", h)
    data = exact(n)
    return None if data is None else json.loads(data)


def _send(sock, obj):
    data = json.dumps(obj).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def _figures():
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return []
    images = []
    try:
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png")
            images.append(base64.b64encode(buf.getvalue()).decode())
    except Exception as e:
        # a figure that cannot be drawn is the cell's problem: say so where
        # the caller looks, rather than answer with fewer charts and no word
        print("bulkhead: a matplotlib figure could not be rendered as PNG: %r" % (e,),
              file=sys.stderr)
    try:
        plt.close("all")
    except Exception:
        pass
    return images


def _reap():
    # The agent killed whatever the last cell left running; the dead children
    # of this interpreter are reaped here, or as zombies they would go on
    # counting against the session's pids limit.
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def serve(fd):
    # no display in a sandbox: draw off-screen from the start instead of
    # letting matplotlib try Debian's TkAgg default first
    os.environ.setdefault("MPLBACKEND", "Agg")
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    sys.stdout = io.TextIOWrapper(
        io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
        line_buffering=True,
    )
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
        line_buffering=True,
    )
    sys.stdin = open(os.devnull)
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = main
    ns = main.__dict__
    sys.argv = [""]
    sys.path.insert(0, os.getcwd())
    loop = _Loop()
    n = 0
    while True:
        req = _recv(sock)
        if req is None:
            os._exit(0)
        n += 1
        _reap()
        reply = _run(req.get("code", ""), ns, loop, "<cell-%d>" % n)
        reply["images"] = _figures()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:
            pass
        _send(sock, reply)
        if reply.get("exited"):
            os._exit(reply["exit"])


class _Loop:
    """The one persistent event loop, made when a cell first awaits: asyncio
    costs megabytes per idle session, and most cells never need it."""

    def __init__(self):
        self.loop = None

    def run_until_complete(self, coro):
        if self.loop is None:
            import asyncio

            self.loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self.loop)
        return self.loop.run_until_complete(coro)


def _run(code, ns, loop, name):
    flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)
    try:
        tree = compile(code, name, "exec", ast.PyCF_ONLY_AST | flags)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = tree.body.pop()
        body = compile(tree, name, "exec", flags)
        r = eval(body, ns)
        if body.co_flags & CO_COROUTINE:
            loop.run_until_complete(r)
        if last is None:
            return {"exit": 0}
        expr = compile(ast.Expression(last.value), name, "eval", flags)
        v = eval(expr, ns)
        if expr.co_flags & CO_COROUTINE:
            v = loop.run_until_complete(v)
        if v is None:
            return {"exit": 0}
        ns["_"] = v
        s = repr(v)
        print(s)
        return {"exit": 0, "has_value": True, "value": s}
    except SystemExit as e:
        code = e.code
        if code is None:
            code = 0
        elif not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        return {"exit": code & 0xFF, "exited": True}
    except BaseException as e:
        tb = e.__traceback__
        # drop this runner's own frame: the user sees only their cell
        while tb is not None and tb.tb_frame.f_code.co_filename == "bh-runner.py":
            tb = tb.tb_next
        traceback.print_exception(type(e), e, tb)
        return {"exit": 1}
