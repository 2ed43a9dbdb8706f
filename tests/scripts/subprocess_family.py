"""Child processes of every kind, for tests/test_subprocesses.py.

    subprocess_family.py KIND [OUT]

KIND: fork (os.fork, the child spins in forked_child_work and ends by os._exit), pool-fork,
pool-spawn, pool-forkserver (a multiprocessing pool of two workers spins in pool_task),
recycled (a fork pool with maxtasksperchild=1 runs RECYCLED tasks of 10 ms, each in a new
process; prints MOST_ENTRIES, the most entries the family directory held), term-at-start (a
forked child gets SIGTERM as soon as it has marked itself; prints CHILD_SIGNAL),
subprocess (subprocess.run of Python spinning in spawned_work), killed (a forked child
killed by SIGKILL), outliving (a child still spinning when this program ends), exec (a
forked child spins in forked_child_work, then execs Python spinning in spawned_work),
exec-fails (the forked child's exec fails; it goes on in after_failed_exec_work),
fork-while-locked (fork while another thread holds spprof's session lock), program-api (a
forked child uses spprof's API itself: is_active, stop, a Profiler block; writes what it saw
to OUT as JSON), nested (a
child that runs spprof itself, writing OUT). The parent spins in parent_work. Prints
`TRUTH {"root": pid, "children": [pid, ...]}` (the children it knows the pids of).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from typing import Callable

SPAWNED = """
import time

def spawned_work(seconds):
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass

spawned_work({seconds})
"""


RECYCLED = 400  # tasks of the "recycled" pool, each in a new process


def spin(seconds: float) -> None:
    t = time.process_time()
    while time.process_time() - t < seconds:
        pass


def forked_child_work() -> None:
    spin(0.3)


def pool_task(seconds: float) -> int:
    spin(seconds)
    return os.getpid()


def block_work() -> None:
    spin(0.2)


def after_block_work() -> None:
    spin(0.2)


def parent_work() -> None:
    spin(0.1)


def fork_and_wait(body: Callable[[], None]) -> int:
    """A forked child runs `body`, then os._exit(0); the parent waits for it."""
    pid = os.fork()
    if pid == 0:
        body()
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def exec_python(seconds: float) -> None:
    forked_child_work()
    os.execv(sys.executable, [sys.executable, "-c", SPAWNED.format(seconds=seconds)])


def after_failed_exec_work() -> None:
    spin(0.3)


def exec_that_fails() -> None:
    """forked_child_work, an exec that fails (no such file), then more work, same process."""
    forked_child_work()
    try:
        os.execv("/nonexistent/python", ["python"])
    except FileNotFoundError:
        print("EXEC_FAILED", flush=True)
    after_failed_exec_work()


def use_spprof(out: str) -> None:
    """The program's own use of spprof in a child: what it sees, as JSON into `out`."""
    import spprof

    forked_child_work()
    seen = {"active": spprof.is_active()}
    try:
        spprof.stop()
        seen["stop"] = "returned"
    except RuntimeError as exc:
        seen["stop"] = str(exc)
    with spprof.Profiler(interval_ms=5) as block:
        block_work()
    names = {f.function_name for s in block.get_samples() for f in s.frames}
    seen["block_has_block_work"] = "block_work" in names
    seen["block_has_forked_child_work"] = "forked_child_work" in names
    after_block_work()
    with open(out, "w") as f:
        json.dump(seen, f)


def main(kind: str, out: str) -> None:
    children: list[int] = []
    if kind == "fork":
        children.append(fork_and_wait(forked_child_work))
    elif kind.startswith("pool-"):
        with multiprocessing.get_context(kind[len("pool-") :]).Pool(2) as pool:
            children = sorted(set(pool.map(pool_task, [0.1] * 6)))
    elif kind == "subprocess":
        p = subprocess.Popen([sys.executable, "-c", SPAWNED.format(seconds=0.3)])
        children.append(p.pid)
        p.wait()
    elif kind == "recycled":
        # A pool recycling its workers (maxtasksperchild=1): a new process per task. A thread
        # of the program's counts the family directory's entries meanwhile.
        import threading

        family = json.loads(os.environ["SPPROF_SUBPROCESSES"])["dir"]
        most, done = [0], threading.Event()

        def count() -> None:
            while not done.wait(0.01):
                most[0] = max(most[0], len(os.listdir(family)))

        t = threading.Thread(target=count)
        t.start()
        ctx = multiprocessing.get_context("fork")
        with ctx.Pool(2, maxtasksperchild=1) as pool:
            children = sorted(set(pool.map(pool_task, [0.01] * RECYCLED, chunksize=1)))
        done.set()
        t.join()
        print(f"MOST_ENTRIES {most[0]}")
    elif kind == "term-at-start":
        # SIGTERM the moment the forked child has marked itself, while its session starts:
        # before its exit-signal watcher is there. TRUTH says how the child ended.
        family = json.loads(os.environ["SPPROF_SUBPROCESSES"])["dir"]
        pid = os.fork()
        if pid == 0:
            forked_child_work()
            os._exit(0)
        mark = os.path.join(family, f"{pid}.running")
        deadline = time.monotonic() + 10
        while not os.path.isdir(mark) and time.monotonic() < deadline:
            pass
        os.kill(pid, signal.SIGTERM)
        _, status = os.waitpid(pid, 0)
        children.append(pid)
        print(f"CHILD_SIGNAL {os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0}")
    elif kind == "killed":
        pid = os.fork()
        if pid == 0:
            forked_child_work()
            time.sleep(60)
            os._exit(0)
        children.append(pid)
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    elif kind == "outliving":
        p = subprocess.Popen([sys.executable, "-c", SPAWNED.format(seconds=1.5)])
        children.append(p.pid)
    elif kind == "exec":
        children.append(fork_and_wait(lambda: exec_python(0.3)))
    elif kind == "exec-fails":
        children.append(fork_and_wait(exec_that_fails))
    elif kind == "fork-while-locked":
        # Another thread is inside spprof's start()/stop() (holds its lock) at the fork.
        import threading

        from spprof import _session

        held, done = threading.Event(), threading.Event()

        def hold() -> None:
            with _session._lock:
                held.set()
                done.wait(5)

        t = threading.Thread(target=hold)
        t.start()
        held.wait()
        children.append(fork_and_wait(forked_child_work))
        done.set()
        t.join()
    elif kind == "program-api":
        children.append(fork_and_wait(lambda: use_spprof(out)))
    elif kind == "nested":
        code = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.2: pass"
        r = subprocess.run([sys.executable, "-m", "spprof", "-q", "-o", out, "-c", code])
        print(f"NESTED exit {r.returncode}")
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    parent_work()
    print("TRUTH " + json.dumps({"root": os.getpid(), "children": children}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
