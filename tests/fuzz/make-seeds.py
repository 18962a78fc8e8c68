#!/usr/bin/env python3
"""Writes the hand-written seed corpora in tests/fuzz/corpus/NAME/ (run from
the repository root; the files are committed, this script says how they were
made). Protobuf is encoded by hand so no protobuf module is needed."""
import json, os, struct

def varint(v):
    out = b""
    while True:
        b = v & 0x7F
        v >>= 7
        out += bytes([b | (0x80 if v else 0)])
        if not v:
            return out

def fv(field, v):  # varint field
    return varint(field << 3) + varint(v)

def fb(field, data):  # length-delimited field
    if isinstance(data, str):
        data = data.encode()
    return varint(field << 3 | 2) + varint(len(data)) + data

def frame(b):
    return struct.pack(">I", len(b)) + b

def req(body_field, body=b"", version=1, rid=7):
    return (fv(1, version) if version else b"") + fv(2, rid) + fb(body_field, body)

def write(name, fname, data):
    d = os.path.join("tests/fuzz/corpus", name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, fname), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)

SID = "0123456789abcdef0123456789abcdef"
files = fb(4, fb(1, "data/in.txt") + fb(2, "hello\n")) + fb(4, fb(1, "b.py") + fb(2, "x = 1\n"))
cell = fb(1, SID) + fb(2, "python") + fb(3, "print(6*7)") + files + fv(5, 1000)

# ---- control: whole client byte streams ----------------------------------
c = {
    "describe": frame(req(10)),
    "stats": frame(req(15)),
    "list": frame(req(14, fb(1, "alice"))),
    "open": frame(req(11, fb(1, "alice") + fb(2, "conv-1") + fb(3, "kernel") + fv(4, 60000))),
    "open_floor_vm": frame(req(11, fb(1, "alice") + fb(3, "vm"))),
    "open_bad_tier": frame(req(11, fb(1, "alice") + fb(3, "bogus"))),
    "open_no_owner": frame(req(11, fb(2, "c"))),
    "open_bad_utf8": frame(req(11, fb(1, b"al\xffice"))),
    "run_cell": frame(req(12, cell)),
    "run_bad_lang": frame(req(12, fb(1, SID) + fb(2, "ruby") + fb(3, "1"))),
    "run_dotdot": frame(req(12, fb(1, SID) + fb(2, "python") + fb(4, fb(1, "../x") + fb(2, "")))),
    "run_timeout": frame(req(12, fb(1, SID) + fb(2, "javascript") + fb(3, "1") + fv(5, 1 << 40))),
    "close": frame(req(13, fb(1, SID))),
    "version_2": frame(req(10, version=2)),
    "no_version": frame(req(15, version=0)),
    "no_body": frame(fv(1, 1) + fv(2, 3)),
    "unknown_body": frame(fv(1, 1) + fb(99, b"\x08\x01")),
    "empty_frame": frame(b""),
    "not_protobuf": frame(b"\xff\xff\xff\xff\xff"),
    "cut_header": b"\x00\x00",
    "cut_payload": struct.pack(">I", 100) + req(10)[:3],
    "oversized": struct.pack(">I", 0x7FFFFFFF) + b"x" * 8,
    "pipeline": frame(req(10)) + frame(req(15, rid=8)) + frame(req(14, fb(1, "bob"), rid=9)),
}
for k, v in c.items():
    write("control", k, v)

# ---- cell_files: byte 0 language, records (plen, rep, clen LE, path, content)
def rec(path, content=b"", rep=0):
    path = path.encode() if isinstance(path, str) else path
    content = content.encode() if isinstance(content, str) else content
    return bytes([len(path), rep]) + struct.pack("<H", len(content)) + path + content

cf = {
    "ok_two": b"\x00" + rec("a.txt", "hi") + rec("dir/b.py", "x = 1\n"),
    "ok_js": b"\x01" + rec("m.js", "export const a = 1;\n"),
    "ok_unicode": b"\x00" + rec("données/€.txt".encode(), "ü"),
    "dotdot": b"\x00" + rec("../etc/passwd", "x"),
    "dotdot_inner": b"\x00" + rec("a/../../b", "x"),
    "dot": b"\x00" + rec("./a", "x"),
    "absolute": b"\x00" + rec("/etc/passwd", "x"),
    "trailing_slash": b"\x00" + rec("dir/", "x"),
    "double_slash": b"\x00" + rec("a//b", "x"),
    "empty_path": b"\x00" + rec("", "x"),
    "bad_utf8_path": b"\x00" + rec(b"a\xff.txt", "x"),
    "overlong_utf8": b"\x00" + rec(b"\xc0\xae\xc0\xae/x", "x"),
    "surrogate": b"\x00" + rec(b"\xed\xa0\x80", "x"),
    "bad_utf8_content": b"\x00" + rec("a.txt", b"\xfe\xfe"),
    "nul_path": b"\x00" + rec(b"notes.txt\x00../../etc/passwd", "x"),
    "nul_content": b"\x00" + rec("a.txt", b"abc\x00def"),
    "big_total": b"\x00" + rec("big1", "y" * 1024, rep=9) + rec("big2", "y" * 1024, rep=9),
    "many_files": b"\x00" + b"".join(rec("f%d" % i, "") for i in range(201)),
    "bad_lang": b"\x02" + rec("a", "b"),
}
for k, v in cf.items():
    write("cell_files", k, v)

# ---- agent_reply: frames from the in-sandbox agent -------------------------
def hdr(**kw):
    return frame(json.dumps(kw).encode())

ok = dict(exit=0, n_images=0, timed_out=False, has_value=True, value="42", fresh_interpreter=False,
          state_kept=True, stdout_bytes=3, stderr_bytes=0, run_ms=5, disk_used=4096)
ar = {
    "ok": hdr(**ok) + frame(b"42\n") + frame(b""),
    "image": hdr(**dict(ok, n_images=2)) + frame(b"") + frame(b"") + frame(b"\x89PNG\r\n") + frame(b"\x89PNG"),
    "files_error": hdr(files_error="data/x: refused"),
    "timed_out": hdr(**dict(ok, exit=124, timed_out=True, has_value=False)) + frame(b"") + frame(b"deadline\n"),
    "bad_utf8_out": hdr(**ok) + frame(b"\xff\xfe\x00x") + frame(b"\xc3"),
    "nul_value": hdr(**dict(ok, value="a\u0000b")) + frame(b"") + frame(b""),
    "bad_exit": hdr(**dict(ok, exit=99999)) + frame(b"") + frame(b""),
    "many_images": hdr(**dict(ok, n_images=17)),
    "cut": hdr(**ok) + frame(b"only stdout"),
    "not_json": frame(b"{nope"),
    "array": frame(b"[1,2]"),
    "huge_frame": struct.pack(">I", 0x00FFFFFF) + b"x",
    "big_stdout_total": hdr(**dict(ok, stdout_bytes=1 << 62)) + frame(b"x" * 2000) + frame(b""),
}
for k, v in ar.items():
    write("agent_reply", k, v)

# ---- oci_config ------------------------------------------------------------
proc = {"terminal": False, "user": {"uid": 0, "gid": 0}, "args": ["/bin/sh", "-c", "true"],
        "env": ["PATH=/usr/bin:/bin", "TERM=xterm"], "cwd": "/",
        "capabilities": {"bounding": ["CAP_CHOWN", "CAP_KILL"], "effective": ["CAP_CHOWN"],
                         "permitted": ["CAP_CHOWN"]},
        "rlimits": [{"type": "RLIMIT_NOFILE", "hard": 1024, "soft": 1024}],
        "noNewPrivileges": True}
minimal = {"ociVersion": "1.0.2", "root": {"path": "rootfs"}, "process": {"args": ["/bin/true"], "cwd": "/"}}
docker = {
    "ociVersion": "1.0.2-dev", "process": proc, "root": {"path": "rootfs", "readonly": True},
    "hostname": "c1", "annotations": {"dev.bulkhead.tier": "container"},
    "mounts": [
        {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
        {"destination": "/dev/pts", "type": "devpts", "source": "devpts", "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"]},
        {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
        {"destination": "/sys/fs/cgroup", "type": "cgroup", "source": "cgroup", "options": ["ro", "nosuid", "noexec", "nodev"]},
        {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
        {"destination": "/data", "type": "bind", "source": "sub", "options": ["rbind", "ro", "rprivate"]},
    ],
    "hooks": {"prestart": [{"path": "/bin/true", "args": ["true"], "timeout": 5}]},
    "linux": {
        "namespaces": [{"type": "pid"}, {"type": "network"}, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
        "uidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
        "gidMappings": [{"containerID": 0, "hostID": 100000, "size": 65536}],
        "resources": {"memory": {"limit": 67108864, "swap": 134217728}, "cpu": {"quota": 50000, "period": 100000, "shares": 512},
                      "pids": {"limit": 64}, "devices": [{"allow": False, "access": "rwm"}]},
        "cgroupsPath": "/docker/abc123",
        "sysctl": {"net.ipv4.ip_forward": "0"},
        "maskedPaths": ["/proc/kcore", "/proc/keys"], "readonlyPaths": ["/proc/sys", "/proc/bus"],
        "rootfsPropagation": "rprivate",
        "seccomp": {"defaultAction": "SCMP_ACT_ERRNO", "defaultErrnoRet": 1, "architectures": ["SCMP_ARCH_X86_64"],
                    "syscalls": [{"names": ["read", "write", "exit_group"], "action": "SCMP_ACT_ALLOW"},
                                 {"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                                  "args": [{"index": 0, "value": 0, "op": "SCMP_CMP_EQ"}]}]},
    },
}
oc = {
    "minimal.json": minimal,
    "docker.json": docker,
    "wrong_type.json": dict(minimal, root="rootfs"),
    "missing_process.json": {"ociVersion": "1.0.2", "root": {"path": "rootfs"}},
    "unknown_ns.json": dict(minimal, linux={"namespaces": [{"type": "bogus"}]}),
    "relative_root_escape.json": dict(minimal, root={"path": "../.."}),
    "root_symlink_escape.json": dict(minimal, root={"path": "escape"}),
    "ns_path.json": dict(minimal, linux={"namespaces": [{"type": "network", "path": "/proc/self/ns/net"}]}),
    "bad_version.json": dict(minimal, ociVersion="2.0.0"),
}
for k, v in oc.items():
    write("oci_config", k, json.dumps(v, indent=1))
write("oci_config", "not_json.json", '{"ociVersion": "1.0.2", ')
write("oci_config", "duplicate.json", '{"ociVersion":"1.0.2","ociVersion":"1.0.2"}')

# ---- oci_process: exec --process and update --resources ---------------------
write("oci_process", "process.json", json.dumps(proc, indent=1))
write("oci_process", "process_tty.json", json.dumps(dict(proc, terminal=True, consoleSize={"height": 24, "width": 80}, user={"uid": 1000, "gid": 1000, "additionalGids": [5, 6], "umask": 18})))
write("oci_process", "resources.json", json.dumps(docker["linux"]["resources"]))
write("oci_process", "resources_neg.json", json.dumps({"memory": {"limit": -1}, "cpu": {"quota": -1}, "pids": {"limit": -1}}))
write("oci_process", "no_args.json", json.dumps({"cwd": "/"}))
write("oci_process", "bad_cap.json", json.dumps(dict(proc, capabilities={"bounding": ["CAP_BOGUS"]})))

# ---- policy ----------------------------------------------------------------
for name in ("container.policy", "kernel.policy", "host-state.policy"):
    with open(os.path.join("seccomp-policies", name), "rb") as f:
        write("policy", name, f.read())
write("policy", "small.policy", "@default errno EPERM\n@include base.policy\nopenat notify # brokered\n"
      "mmap allow if prot & PROT_EXEC == 0 || prot & PROT_WRITE == 0\nkeyctl errno EPERM\n")
write("policy", "cycle.policy", "@default kill\n@include cycle.policy\n")
write("policy", "args.policy", "@default trap\nioctl errno EPERM if request == TIOCSTI || request == TIOCLINUX\n"
      "clone allow if flags & CLONE_NS_FLAGS == 0\nprctl allow if option == PR_SET_NAME\nsocket allow if domain == AF_UNIX\n")
write("policy", "bad.policy", "@default notify\nnosuchcall allow\nread allow if fd > 99999999999999999999\n")
