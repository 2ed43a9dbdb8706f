"""Stress workloads for tests/test_reliability_stress.py, one per subcommand; each samples at
1 ms, checks what it can only check in-process, and prints `RESULT {json}` for the test.

    rel_stress.py threads N          N threads started and ended while sampling
    rel_stress.py race CYCLES        start/stop cycles in one thread, thread churn in others
    rel_stress.py fork N             fork() and subprocess in a loop while sampling
    rel_stress.py exec N THREADS     N exec-made functions per thread, created and freed
    rel_stress.py recursion DEPTH    a stack DEPTH frames deep
    rel_stress.py asyncio TASKS      TASKS asyncio tasks
    rel_stress.py suspend N          N generators and coroutines suspended/resumed
    rel_stress.py gc SECONDS         gc.collect() storms over cyclic garbage and dying code
"""

import asyncio
import gc
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/: workloads.py

import spprof
import workloads as w


def emit(**result):
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)


def timers_left():
    return Path("/proc/self/timers").read_text().strip() if sys.platform == "linux" else ""


def task_count():
    return len(os.listdir("/proc/self/task")) if sys.platform == "linux" else -1


def settled_task_count(target, timeout=3.0):
    """The thread count once joined threads have finished exiting (join() returns before the
    kernel thread is gone), waiting at most `timeout` for it to reach `target`."""
    end = time.monotonic() + timeout
    while task_count() > target and time.monotonic() < end:
        time.sleep(0.01)
    return task_count()


def names_on_stacks(samples):
    return {f.function_name for s in samples for f in s.frames}


# ---- threads -------------------------------------------------------------------------------


def thread_work(seconds, results, key):
    t0 = time.thread_time()
    w.spin(seconds)
    results[key] = (
        time.thread_time() - t0,
        threading.get_ident(),
        threading.get_native_id(),
    )


def cmd_threads(n):
    n = int(n)
    results = {}
    batch = 20
    tasks_before = task_count()
    spprof.start(interval_ms=1)
    made = 0
    while made < n:
        group = []
        for _ in range(min(batch, n - made)):
            key = f"worker-{made}"
            t = threading.Thread(target=thread_work, args=(0.01, results, key), name=key)
            t.start()
            group.append(t)
            made += 1
        w.spin(0.005)  # the main thread works too
        for t in group:
            t.join()
    live = spprof.stats()
    profile = spprof.stop()
    stats = spprof.stats()
    samples = profile.samples
    by_name = {}
    for s in samples:
        by_name.setdefault(s.thread_name, []).append(s)
    wrong_identity = 0
    weight_ns = 0
    for key, (_, ident, native) in results.items():
        for s in by_name.get(key, []):
            if s.thread_id != ident or s.native_thread_id != native:
                wrong_identity += 1
            weight_ns += s.weight_ns
    cpu = sum(r[0] for r in results.values())
    emit(
        threads=made,
        threads_done=len(results),
        threads_sampled=len([k for k in by_name if k and k.startswith("worker-")]),
        samples=len(samples),
        wrong_identity=wrong_identity,
        worker_cpu_s=cpu,
        worker_weight_s=weight_ns / 1e9,
        threads_seen=stats["threads_seen"],
        threads_ended=stats["threads_ended"],
        timers_active_live=live["timers_active"],
        timers_active_after=stats["timers_active"],
        timers_left=timers_left(),
        tasks_before=tasks_before,
        tasks_after=settled_task_count(tasks_before),
        spin_inner_samples=len(
            [s for s in samples if s.frames and s.frames[-1].function_name == "spin_inner"]
        ),
        # samples with no Python frame at all (a thread between its last frame and its end)
        empty_samples=len([s for s in samples if not s.frames]),
        dropped=profile.dropped_count,
    )


# ---- start/stop race ---------------------------------------------------------------------


def cmd_race(cycles):
    cycles = int(cycles)
    stop_churn = threading.Event()
    started = [0]
    errors = []

    def churn():
        k = 0
        while not stop_churn.is_set():
            group = [
                threading.Thread(target=w.spin, args=(0.002,), name=f"churn-{k}-{i}")
                for i in range(4)
            ]
            for t in group:
                t.start()
            for t in group:
                t.join()
            k += 1
        started[0] = k * 4

    def burner():
        while not stop_churn.is_set():
            w.spin(0.01)

    def cycler():
        try:
            for i in range(cycles):
                spprof.start(interval_ms=1, timer="itimer" if i % 5 == 4 else "auto")
                time.sleep(0.0005 * (i % 3))
                spprof.stop()
        except Exception as exc:
            errors.append(repr(exc))

    tasks_before = task_count()
    helpers = [
        threading.Thread(target=churn, name="churn"),
        threading.Thread(target=burner, name="burner"),
    ]
    for t in helpers:
        t.start()
    t0 = time.monotonic()
    c = threading.Thread(target=cycler, name="cycler")
    c.start()
    c.join()
    elapsed = time.monotonic() - t0
    stop_churn.set()
    for t in helpers:
        t.join()
    after_cycles = {
        "timers_left": timers_left(),
        "tasks": settled_task_count(tasks_before),
        "handler": repr(__import__("signal").getsignal(__import__("signal").SIGPROF)),
    }
    # afterwards a normal session still measures the right thing
    with spprof.Profiler(interval_ms=5) as p:
        t_cpu = time.thread_time()
        w.spin(0.4)
        cpu = time.thread_time() - t_cpu
    final = p.profile.samples
    emit(
        cycles=cycles,
        errors=errors,
        seconds=elapsed,
        threads_churned=started[0],
        after_cycles=after_cycles,
        tasks_before=tasks_before,
        final_samples=len(final),
        final_expected=cpu * 1000 / 5,
        final_spin_share=sum(s.weight_ns for s in final if "spin" in names_on_stacks([s]))
        / max(1, sum(s.weight_ns for s in final)),
        final_weight_s=sum(s.weight_ns for s in final) / 1e9,
        final_cpu_s=cpu,
    )


# ---- fork and subprocess ---------------------------------------------------------------------


PARENT_CPU = [0.0]


def parent_work(seconds):
    t0 = time.thread_time()
    w.spin(seconds)
    PARENT_CPU[0] += time.thread_time() - t0


CHILD_PROFILES = (
    "import spprof, sys; sys.path.insert(0, {tests!r}); import workloads as w\n"
    "import time\n"
    "with spprof.Profiler(interval_ms=1) as p:\n"
    "    t0 = time.thread_time(); w.spin(0.2); cpu = time.thread_time() - t0\n"
    "print(len(p.get_samples()), sum(s.weight_ns for s in p.get_samples()) / 1e9 / cpu)\n"
)


def cmd_fork(n):
    n = int(n)
    stop = threading.Event()

    def background():
        while not stop.is_set():
            w.spin(0.01)

    bg = threading.Thread(target=background, name="background")
    spprof.start(interval_ms=1)
    bg.start()
    forks = []
    for i in range(n):
        r, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: unprofiled, may profile itself, must not die of SIGPROF
            os.close(r)
            try:
                active = spprof.is_active()
                w.spin(0.02)
                own, share = 0, 0.0
                if i % 5 == 0:
                    with spprof.Profiler(interval_ms=1) as p:
                        t0 = time.thread_time()
                        w.spin(0.2)
                        cpu = time.thread_time() - t0
                    own = len(p.get_samples())
                    share = sum(s.weight_ns for s in p.get_samples()) / 1e9 / cpu
                payload = {"active": active, "own": own, "own_share": share}
                os.write(wfd, json.dumps(payload).encode())
            finally:
                os._exit(0)
        os.close(wfd)
        data = b""
        while True:
            chunk = os.read(r, 4096)
            if not chunk:
                break
            data += chunk
        os.close(r)
        _, status = os.waitpid(pid, 0)
        child = json.loads(data) if data else {}
        forks.append({"status": status, **child})
        parent_work(0.01)
    subs = []
    tests_dir = str(Path(__file__).resolve().parent.parent)
    for _ in range(max(1, n // 5)):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD_PROFILES.format(tests=tests_dir)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        subs.append({"rc": proc.returncode, "out": proc.stdout.strip(), "err": proc.stderr[-500:]})
        parent_work(0.01)
    stop.set()
    bg.join()
    profile = spprof.stop()
    samples = profile.samples
    emit(
        forks=len(forks),
        fork_status=sorted({f["status"] for f in forks}),
        children_active=sum(1 for f in forks if f.get("active")),
        children_own_samples=[f["own"] for f in forks if f.get("own")],
        children_own_shares=[round(f["own_share"], 3) for f in forks if f.get("own")],
        children_reported=sum(1 for f in forks if "active" in f),
        subprocesses=len(subs),
        subprocess_rcs=sorted({s["rc"] for s in subs}),
        subprocess_samples=[int(s["out"].split()[0]) if s["out"] else 0 for s in subs],
        subprocess_shares=[float(s["out"].split()[1]) if s["out"] else 0.0 for s in subs],
        subprocess_errs=[s["err"] for s in subs if s["rc"] != 0],
        parent_samples=len([s for s in samples if "parent_work" in names_on_stacks([s])]),
        parent_weight_s=sum(s.weight_ns for s in samples if "parent_work" in names_on_stacks([s]))
        / 1e9,
        parent_cpu_s=PARENT_CPU[0],
        samples=len(samples),
        pids=sorted({s.native_thread_id for s in samples} - {threading.get_native_id()}),
        bg_native=bg.native_id,
        parent_pid=os.getpid(),
    )


# ---- exec'd functions -------------------------------------------------------------------------


def make_and_run(prefix, k):
    src = f"def {prefix}_{k}(n):\n    t = 0\n    for i in range(n):\n        t += i\n    return t\n"
    ns = {}
    exec(compile(src, f"<gen-{prefix}-{k}>", "exec"), ns)
    ns[f"{prefix}_{k}"](1500)
    # the function and its code object die here


def cmd_exec(n, nthreads):
    n, nthreads = int(n), int(nthreads)

    def body(prefix):
        for k in range(n):
            make_and_run(prefix, k)
            if k % 500 == 0:
                gc.collect()

    spprof.start(interval_ms=1)
    threads = [threading.Thread(target=body, args=(f"f{t}",)) for t in range(nthreads)]
    for t in threads:
        t.start()
    body("fm")
    for t in threads:
        t.join()
    profile = spprof.stop()
    stats = spprof.stats()
    wrong = []
    exec_frames = 0
    def_line = 0
    unknown = 0
    unknown_elsewhere = 0  # an <unknown> standing for a function that never died
    for s in profile.samples:
        for depth, f in enumerate(s.frames):
            if f.function_name == "<unknown>" and (
                depth == 0 or s.frames[depth - 1].function_name != "make_and_run"
            ):
                unknown_elsewhere += 1
            name = f.function_name
            if (
                name.startswith("f")
                and "_" in name
                and name.split("_")[0][1:] in ([str(i) for i in range(nthreads)] + ["m"])
            ):
                exec_frames += 1
                prefix, k = name.split("_")
                # the def line only for a sample at the call's first instruction (3.12+ RESUME)
                if f.filename != f"<gen-{prefix}-{k}>" or f.lineno not in (1, 2, 3, 4, 5):
                    wrong.append((name, f.filename, f.lineno))
                def_line += f.lineno == 1
            if name == "<unknown>":
                unknown += 1
    emit(
        functions=n * (nthreads + 1),
        samples=len(profile.samples),
        exec_frames=exec_frames,
        def_line_frames=def_line,
        wrong=wrong[:20],
        unknown_frames=unknown,
        unknown_elsewhere=unknown_elsewhere,
        stats_unknown=stats["unknown_frames"],
        code_objects=stats["code_objects"],
        code_objects_kept=stats["code_objects_kept"],
        memory_bytes=stats["memory_bytes"],
        make_and_run_present=any(
            s.frames and "make_and_run" in names_on_stacks([s]) for s in profile.samples
        ),
    )


# ---- deep recursion ---------------------------------------------------------------------------


def cmd_recursion(depth):
    depth = int(depth)
    sys.setrecursionlimit(depth + 1000)
    with spprof.Profiler(interval_ms=1) as p:
        w.recurse(depth, 0.3)
    stats = spprof.stats()
    # Captures only: a thread-end sample repeats the last stack and is no capture, which
    # truncated_stacks counts.
    deep = [
        s
        for s in p.get_samples()
        if s.frames and s.frames[-1].function_name == "spin_inner" and not s.thread_end
    ]
    ok = [
        s
        for s in deep
        if s.truncated
        and s.frames[0].function_name == "<truncated>"
        and len(s.frames) == 257
        and [f.function_name for f in s.frames[-3:]] == ["recurse", "spin", "spin_inner"]
        and all(f.function_name == "recurse" for f in s.frames[1:-2])
    ]
    emit(
        depth=depth,
        samples=len(p.get_samples()),
        deep=len(deep),
        deep_weight_s=sum(s.weight_ns for s in deep) / 1e9,
        well_formed=len(ok),
        truncated_stacks=stats["truncated_stacks"],
        walk_errors=stats["walk_errors"],
    )


# ---- asyncio ------------------------------------------------------------------------------


async def task_body(i, rounds):
    n = 0
    for _ in range(rounds):
        for j in range(400):
            n += j * i  # TASK_HOT
        await asyncio.sleep(0)
    return n


async def run_tasks(ntasks, rounds):
    return await asyncio.gather(*(task_body(i, rounds) for i in range(ntasks)))


def cmd_asyncio(ntasks):
    ntasks = int(ntasks)
    with spprof.Profiler(interval_ms=1) as p:
        t0 = time.thread_time()
        results = asyncio.run(run_tasks(ntasks, 20))
        cpu = time.thread_time() - t0
    samples = p.get_samples()
    in_task = [s for s in samples if s.frames and s.frames[-1].function_name == "task_body"]
    hot = w.line_of(task_body, "TASK_HOT")
    emit(
        tasks=len(results),
        samples=len(samples),
        weight_s=sum(s.weight_ns for s in samples) / 1e9,
        cpu_s=cpu,
        task_samples=len(in_task),
        task_on_hot_line=sum(1 for s in in_task if s.frames[-1].lineno in (hot, hot - 1)),
        task_under_run=sum(
            1 for s in in_task if any(f.function_name == "run" for f in s.frames[:-1])
        ),
    )


# ---- generators and coroutines suspended across samples --------------------------------------


def gen_worker(i):  # GEN_DEF
    while True:
        t = 0
        for j in range(1500):
            t += j ^ i  # GEN_WORK
        yield t  # GEN_YIELD


def coro_worker(i):
    total = 0
    while True:
        x = yield total
        for j in range(1500):
            total += (j * x) & 7  # CORO_WORK


def cmd_suspend(n):
    n = int(n)
    gens = [gen_worker(i) for i in range(n)]
    coros = [coro_worker(i) for i in range(n)]
    for c in coros:
        next(c)
    with spprof.Profiler(interval_ms=1) as p:
        end = time.thread_time() + 1.0
        rounds = 0
        while time.thread_time() < end:
            for g in gens:  # LOOP_GEN
                next(g)  # RESUME_GEN
            for c in coros:
                c.send(rounds)  # RESUME_CORO
            rounds += 1
            if rounds % 10 == 0:  # some die and are replaced while suspended
                for k in range(0, n, 7):
                    gens[k] = gen_worker(k)  # REPLACE_GEN
    samples = p.get_samples()
    gen_s = [s for s in samples if s.frames and s.frames[-1].function_name == "gen_worker"]
    coro_s = [s for s in samples if s.frames and s.frames[-1].function_name == "coro_worker"]
    resume_gen = w.line_of(cmd_suspend, "RESUME_GEN")
    resume_coro = w.line_of(cmd_suspend, "RESUME_CORO")

    def parent_ok(s, line):
        return s.frames[-2].function_name == "cmd_suspend" and s.frames[-2].lineno == line

    # A suspended generator whose last reference goes is closed: GeneratorExit is thrown in at
    # its yield, so it runs once more, under the line that dropped it (the replacement, or the
    # loop rebinding g, which held the last replaced one). The replacement also creates one:
    # gen_worker on its first line under it (3.12: 1-3 samples a second in a workload that
    # creates and closes a hundred generators a round).
    replace = w.line_of(cmd_suspend, "REPLACE_GEN")
    dropping = (replace, w.line_of(cmd_suspend, "LOOP_GEN"))
    gen_yield = w.line_of(gen_worker, "GEN_YIELD")
    gen_def = w.line_of(gen_worker, "GEN_DEF")

    def closing(s):
        leaf = s.frames[-1].lineno
        return (leaf == gen_yield and any(parent_ok(s, line) for line in dropping)) or (
            leaf == gen_def and parent_ok(s, replace)
        )

    def torn(s):
        # The chain was torn below the leaf (counted in walk_errors): no parent to check.
        return s.truncated and s.frames[-2].function_name == "<truncated>"

    def stack(s):
        tail = ["(truncated)"] if s.truncated else []
        return [f"{f.function_name}:{f.lineno}" for f in s.frames] + tail

    emit(
        generators=n,
        coroutines=n,
        rounds=rounds,
        samples=len(samples),
        gen_samples=len(gen_s),
        coro_samples=len(coro_s),
        gen_parent_ok=sum(1 for s in gen_s if parent_ok(s, resume_gen)),
        gen_closing=sum(1 for s in gen_s if closing(s)),
        gen_torn=sum(1 for s in gen_s if torn(s)),
        coro_torn=sum(1 for s in coro_s if torn(s)),
        # any other stack, for the log
        gen_parent_other=[
            stack(s)
            for s in gen_s
            if not parent_ok(s, resume_gen) and not closing(s) and not torn(s)
        ][:5],
        coro_parent_other=[
            stack(s) for s in coro_s if not parent_ok(s, resume_coro) and not torn(s)
        ][:5],
        coro_parent_ok=sum(1 for s in coro_s if parent_ok(s, resume_coro)),
        gen_line_ok=sum(
            1 for s in gen_s if s.frames[-1].lineno == w.line_of(gen_worker, "GEN_WORK")
        ),
    )


# ---- GC storms --------------------------------------------------------------------------------


class Node:
    def __init__(self, payload):
        self.payload = payload
        self.other = None

    def __del__(self):
        self.payload = None  # finalizers run inside gc.collect


def make_cycles(k):
    # cyclic garbage that holds an exec'd function: its code object dies in the collector
    ns = {}
    exec(compile(f"def cyc_{k}():\n    return sum(range(3000))\n", f"<cyc-{k}>", "exec"), ns)
    ns[f"cyc_{k}"]()
    for _ in range(50):
        a, b = Node(ns), Node([1, 2, 3])
        a.other, b.other = b, a


def collector(stop):
    while not stop.is_set():
        gc.collect()


def full_collections():
    return gc.get_stats()[2]["collections"]


def cmd_gc(seconds):
    seconds = float(seconds)
    stop = threading.Event()
    collections0 = full_collections()
    gc_thread = threading.Thread(target=collector, args=(stop,), name="collector")
    with spprof.Profiler(interval_ms=1) as p:
        gc_thread.start()
        end = time.monotonic() + seconds
        k = 0
        while time.monotonic() < end:
            make_cycles(k)
            k += 1
            if k % 20 == 0:
                gc.collect()
        stop.set()
        gc_thread.join()
    stats = spprof.stats()
    samples = p.get_samples()
    wrong = [
        (f.function_name, f.filename)
        for s in samples
        for f in s.frames
        if f.function_name.startswith("cyc_") and f.filename != f"<cyc-{f.function_name[4:]}>"
    ]
    emit(
        collections=full_collections() - collections0,
        cycles_made=k * 50,
        samples=len(samples),
        wrong=wrong[:20],
        functions=sorted(
            names_on_stacks(samples) & {"make_cycles", "collector", "__del__", "__init__"}
        ),
        collector_samples=len([s for s in samples if s.thread_name == "collector"]),
        unknown_frames=stats["unknown_frames"],
    )


COMMANDS = {
    "threads": cmd_threads,
    "race": cmd_race,
    "fork": cmd_fork,
    "exec": cmd_exec,
    "recursion": cmd_recursion,
    "asyncio": cmd_asyncio,
    "suspend": cmd_suspend,
    "gc": cmd_gc,
}

if __name__ == "__main__":
    COMMANDS[sys.argv[1]](*sys.argv[2:])
