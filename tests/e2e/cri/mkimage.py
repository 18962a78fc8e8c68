#!/usr/bin/python3
"""Writes a docker-archive image (what `ctr images import` reads) holding one
static program at /podtool, with `podtool pause` as its command.

  mkimage.py PODTOOL NAME:TAG OUT.tar
"""
import hashlib
import io
import json
import sys
import tarfile


def add(tar, name, data, mode=0o644):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    tar.addfile(info, io.BytesIO(data))


def main(podtool, ref, out):
    layer = io.BytesIO()
    with tarfile.open(fileobj=layer, mode="w", format=tarfile.PAX_FORMAT) as t:
        for d in ("proc", "sys", "dev", "etc", "tmp"):
            info = tarfile.TarInfo(d)
            info.type = tarfile.DIRTYPE
            info.mode = 0o1777 if d == "tmp" else 0o755
            t.addfile(info)
        add(t, "etc/passwd", b"root:x:0:0:root:/:/podtool\n")
        add(t, "etc/group", b"root:x:0:\n")
        with open(podtool, "rb") as f:
            add(t, "podtool", f.read(), 0o755)
    layer = layer.getvalue()
    diff_id = "sha256:" + hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64", "os": "linux",
        "config": {"Cmd": ["/podtool", "pause"], "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }).encode()
    config_name = hashlib.sha256(config).hexdigest() + ".json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [ref],
                            "Layers": ["layer.tar"]}]).encode()
    with tarfile.open(out, "w") as t:
        add(t, "layer.tar", layer)
        add(t, config_name, config)
        add(t, "manifest.json", manifest)


if __name__ == "__main__":
    main(*sys.argv[1:4])
