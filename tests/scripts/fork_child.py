"""Fork while profiling: the child runs unprofiled, the parent keeps sampling."""

import json
import os
import sys
import time

import spprof


def parent_work(seconds):
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        sum(i * i for i in range(1000))


def child_work():
    # Busy for a while: a SIGPROF with the default action here would kill the child.
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        sum(range(1000))
    return spprof.is_active()


spprof.start(interval_ms=1)
cpu0 = time.thread_time()
parent_work(0.2)
results = []
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        active = child_work()
        os.write(wfd, b"1" if active else b"0")
        os._exit(0)
    os.close(wfd)
    flag = os.read(r, 1)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    results.append({"status": status, "child_active": flag == b"1"})
    parent_work(0.1)
parent_cpu = time.thread_time() - cpu0
profile = spprof.stop()
after_fork = [s for s in profile.samples if any(f.function_name == "parent_work" for f in s.frames)]
print(
    json.dumps(
        {
            "children": results,
            "parent_samples": len(after_fork),
            "parent_weight_s": sum(s.weight_ns for s in after_fork) / 1e9,
            "parent_cpu_s": parent_cpu,
            "parent_pid": os.getpid(),
            "pids_in_profile": sorted({s.native_thread_id for s in profile.samples}),
        }
    )
)
