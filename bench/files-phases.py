"""The 10,000-small-files script of bench/run's interpreters group, timed
per phase (create, read, unlink) and per call (the open or unlink alone,
perf_counter_ns around it), so that a native run and a sandboxed one can be
compared call by call (sentry/README.md, "The 10,000-files script").

    BENCH_DIR=$(mktemp -d -p /dev/shm) /usr/bin/python3 bench/files-phases.py
    bulkhead do --tier kernel -- /usr/bin/python3 -c "$(cat bench/files-phases.py)"

Per phase it prints the phase's time, the time spent inside the calls, the
5th..95th percentiles of one call in steps of 5 (us), and the calls over
100 us with their total. Use /usr/bin/python3 natively: a pyenv shim first
in PATH adds ~0.5 s of shell to every run.
"""
import os
import time

pc = time.perf_counter_ns
d = os.environ.get("BENCH_DIR", "/tmp") + "/files"
os.makedirs(d, exist_ok=True)
N = 10000
lat = {"create": [], "read": [], "unlink": []}
t0 = pc()
for i in range(N):
    a = pc()
    f = open(f"{d}/{i}", "w")
    lat["create"].append(pc() - a)
    f.write("x" * 64)
    f.close()
t1 = pc()
for i in range(N):
    a = pc()
    f = open(f"{d}/{i}")
    lat["read"].append(pc() - a)
    f.read()
    f.close()
t2 = pc()
for i in range(N):
    a = pc()
    os.unlink(f"{d}/{i}")
    lat["unlink"].append(pc() - a)
os.rmdir(d)
t3 = pc()
phase = {"create": t1 - t0, "read": t2 - t1, "unlink": t3 - t2}
for k in ("create", "read", "unlink"):
    v = sorted(lat[k])
    q = [v[int(p / 20 * (len(v) - 1))] / 1000 for p in range(1, 20)]
    slow = [x for x in v if x > 100000]
    print("%-6s phase %4.0f ms, in calls %4.0f ms, p5..p95 (us): %s; over 100 us: %d calls, %.0f ms"
          % (k, phase[k] / 1e6, sum(v) / 1e6, " ".join("%.0f" % x for x in q), len(slow),
             sum(slow) / 1e6))
