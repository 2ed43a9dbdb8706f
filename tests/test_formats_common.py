"""Shared helpers for the format tests (hand-made profiles) and the format registry checks.

Hand-made profiles give exact expectations; each format's own test file also reads one real
profile recorded by spprof.
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from spprof import Frame, Profile, ThreadRecord
from spprof import _rows as rowlayout
from spprof._load import load
from spprof._rows import FLAG_GIL_KNOWN, FLAG_HAS_GIL, FLAG_IDLE, FLAG_ON_CPU
from spprof.output import FORMATS, guess_format

MS = 1_000_000


def thread(serial: int, name: str, cpu_ns: int, ended_ns: int = 0) -> ThreadRecord:
    return ThreadRecord(
        serial=serial,
        ident=140000000000000 + serial,
        native_id=4000 + serial,
        name=name,
        cpu_ns=cpu_ns,
        registered_ns=1_000_000_000 + serial,
        ended_ns=ended_ns,
    )


def pack_rows(rows: list[tuple[int, int, int, int, int]]) -> bytes:
    """rows of (timestamp_ns, weight_ns, stack id, thread serial, flags) -> Profile.rows."""
    return b"".join(rowlayout.pack(*r) for r in rows)


def small_profile() -> Profile:
    """Two threads with known stacks.

    MainThread (serial 0): <module> -> main -> hot for 6 ms, then <module> -> main -> cold
    for 2 ms, then hot again for 2 ms. "worker" (serial 1): run -> wait for 3 ms (idle).
    Samples are 1 ms each and interleaved in drain order (per-thread batches).
    """
    frames = [
        Frame("<module>", "/app/prog.py", 30, qualname="<module>", first_lineno=1),
        Frame("main", "/app/prog.py", 25, qualname="main", first_lineno=20),
        Frame("hot", "/app/prog.py", 12, qualname="Work.hot", first_lineno=10),
        Frame("cold", "/app/prog.py", 17, qualname="cold", first_lineno=15),
        Frame("run", "/usr/lib/threading.py", 1012, qualname="Thread.run", first_lineno=990),
        Frame("wait", "/app/prog.py", 7, qualname="wait", first_lineno=5),
        Frame("hot", "/app/prog.py", 13, qualname="Work.hot", first_lineno=10),  # other line
    ]
    stacks = [(0, 1, 2), (0, 1, 3), (4, 5), (0, 1, 6)]
    t0 = 1_000_000_000
    running = FLAG_ON_CPU | FLAG_GIL_KNOWN | FLAG_HAS_GIL
    # hot alternates between its lines 12 (stack 0) and 13 (stack 3)
    main_rows = [
        (t0 + (i + 1) * MS + 17 * i, MS, 0 if i % 2 == 0 else 3, 0, running) for i in range(6)
    ]
    main_rows += [(t0 + (7 + i) * MS + 5, MS, 1, 0, running) for i in range(2)]
    main_rows += [(t0 + (9 + i) * MS + 3, MS, 0, 0, running) for i in range(2)]
    worker_rows = [
        (t0 + (2 + i) * MS + 400, MS, 2, 1, FLAG_IDLE | FLAG_GIL_KNOWN) for i in range(3)
    ]
    rows = main_rows[:4] + worker_rows + main_rows[4:]
    return Profile(
        interval_ms=1.0,
        mode="cpu",
        duration_ns=12 * MS,
        start_ns=t0,
        frame_table=frames,
        stacks=stacks,
        rows=pack_rows(rows),
        thread_table=[thread(0, "MainThread", 10 * MS), thread(1, "worker", 1 * MS, t0 + 6 * MS)],
        dropped_count=2,
        stats={"timer": "per-thread", "samples_dropped": 2, "dropped_ring_full": 2},
        metadata={
            "spprof_version": "0.1.0",
            "python": "3.12.1",
            "platform": "linux",
            "machine": "x86_64",
            "pid": 4242,
            "argv": ["prog.py", "--fast"],
            "name": "prog.py",
            "mode": "cpu",
            "interval_ms": 1.0,
        },
    )


def synthetic_profile(
    seconds: float, threads: int, interval_ms: float = 1.0, jitter_ns: int = 5000, seed: int = 1
) -> Profile:
    """A long session shaped like a real one, for size and speed measurements.

    Every thread is sampled on each timer tick (the worst case: all threads running, e.g.
    in native code without the GIL). A sample's timestamp is the tick plus a latency drawn
    from a normal distribution (mean 8 us, sd `jitter_ns`; spprof measured an sd of 7-11 us
    on a VM); 2% of ticks are missed and give a double-weight sample. Each thread works through
    its own 300 stacks (5 to 30 frames), staying on one for 20 samples on average as real code
    does. Rows come in drain batches of 100 per thread.
    """
    rng = random.Random(seed)
    interval = int(interval_ms * MS)
    ticks = int(seconds * 1000 / interval_ms)
    frames = [
        Frame(
            f"func_{i}",
            f"/srv/app/module_{i % 40}.py",
            10 + i,
            qualname=f"Cls{i % 7}.func_{i}",
            first_lineno=5 + i,
        )
        for i in range(400)
    ]
    stacks = [
        tuple(rng.randrange(400) for _ in range(rng.randint(5, 30))) for _ in range(300 * threads)
    ]
    # A large pool of latencies drawn once; rng.choices picks from it at C-ish speed.
    pool = [max(0, int(rng.gauss(8000, jitter_ns))) for _ in range(1 << 20)]
    t0 = 5_000_000_000
    per_thread = []
    for serial in range(threads):
        steps = rng.choices((1, 2), weights=(98, 2), k=ticks)
        tick_no = list(itertools.takewhile(lambda t: t <= ticks, itertools.accumulate(steps)))
        n = len(tick_no)
        latency = rng.choices(pool, k=n)
        ts = [t0 + t * interval + j for t, j in zip(tick_no, latency)]
        weights = [s * interval for s in steps[:n]]
        stack_col: list[int] = []
        while len(stack_col) < n:
            run = 1 + int(rng.expovariate(1 / 20))
            stack_col.extend([serial * 300 + min(299, int(rng.expovariate(1 / 40)))] * run)
        tf = [serial | FLAG_ON_CPU << rowlayout.SERIAL_BITS] * n
        per_thread.append((ts, weights, stack_col[:n], tf))
    cols: list[list[int]] = [[], [], [], []]
    longest = max(len(t[0]) for t in per_thread)
    for start in range(0, longest, 100):
        for thread_cols in per_thread:
            for out, col in zip(cols, thread_cols):
                out.extend(col[start : start + 100])
    n = len(cols[0])
    size = rowlayout.ROW_SIZE
    buf = bytearray(size * n)
    layout = (rowlayout.TIMESTAMP, rowlayout.WEIGHT, rowlayout.STACK, rowlayout.THREAD_AND_FLAGS)
    for (offset, width), col in zip(layout, cols):
        packed = struct.pack(f"<{n}{'Q' if width == 8 else 'I'}", *col)
        for k in range(width):
            buf[offset + k :: size] = packed[k::width]
    return Profile(
        interval_ms=interval_ms,
        mode="cpu",
        duration_ns=(ticks + 1) * interval,
        start_ns=t0,
        frame_table=frames,
        stacks=stacks,
        rows=bytes(buf),
        thread_table=[thread(i, f"worker-{i}", ticks * interval) for i in range(threads)],
        dropped_count=0,
        stats={"timer": "per-thread"},
        metadata={"spprof_version": "0.1.0", "name": "synthetic", "mode": "cpu"},
    )


HOT_SCRIPT = textwrap.dedent(
    """
    import threading, time

    def hot_function(seconds):
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            for i in range(2000):
                n += i * i
        return n

    def warm_function(seconds):
        end = time.perf_counter() + seconds
        n = 0
        while time.perf_counter() < end:
            n += sum(range(500))
        return n

    def main():
        t = threading.Thread(target=warm_function, args=(0.3,), name="warm-worker")
        t.start()
        hot_function(1.2)
        t.join()

    main()
    """
)


def real_profile(tmp_path: Path) -> Profile:
    """Record HOT_SCRIPT with spprof in a subprocess and save it as .spprof; return it loaded.

    The subprocess keeps the test process free of signals and timers.
    """
    script = tmp_path / "hot_prog.py"
    script.write_text(HOT_SCRIPT)
    out = tmp_path / "real.spprof"
    code = textwrap.dedent(
        f"""
        import runpy, spprof
        with spprof.Profiler(interval_ms=1) as p:
            runpy.run_path({str(script)!r}, run_name="__main__")
        # hide this runner (the -c code and runpy), as the CLI does
        runner = ("<string>", "<frozen runpy>", runpy.__file__)
        p.profile.drop_root_frames(lambda f: f.filename in runner)
        p.profile.save({str(out)!r}, "spprof")
        """
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
    return load(out)


def find_tool(names: tuple[str, ...], apt_package: str) -> str:
    """The path of the first of `names` on PATH; skips the test when none is there.

    Tests never install system packages: under `make test-asan` an `apt-get install` run from
    here got the ASan preload into chromium's post-install step, which hung holding dpkg's lock.
    `.ci/run` installs `apt_package` up front.
    """
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        f"{names[0]} is not installed: install the Debian package {apt_package!r} "
        "(.ci/run does, before the tests; tests never install system packages)"
    )


# ---- the registry ------------------------------------------------------------------------


def test_every_issue_format_is_registered_with_its_suffix():
    expected = {
        "spprof": ".spprof",
        "speedscope": ".speedscope.json",
        "collapsed": ".collapsed.txt",
        "pprof": ".pb.gz",
        "chrome": ".trace.json",
        "html": ".html",
    }
    assert {name: FORMATS[name][1] for name in expected} == expected


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        ("out.spprof", "spprof"),
        ("OUT.SPPROF", "spprof"),
        ("cpu.pb.gz", "pprof"),
        ("cpu.pprof", "pprof"),
        ("run.trace.json", "chrome"),
        ("run.chrome.json", "chrome"),
        ("flame.html", "html"),
        ("stacks.txt", "collapsed"),
        ("profile.json", "speedscope"),
        ("profile.speedscope.json", "speedscope"),
    ],
)
def test_guess_format_from_file_name(path, fmt):
    assert guess_format(path) == fmt


def test_each_default_suffix_guesses_its_own_format():
    # A file written with `-f X` and the default name must be recognised as X again.
    for name, (_, suffix) in FORMATS.items():
        assert guess_format("p" + suffix) == name


def assert_rows_match(a, b) -> None:
    """Every row identical except timestamps, which the file keeps to +-500 ns."""
    assert len(a) == len(b)
    for (ta, wa, sa, fa), (tb, wb, sb, fb) in zip(
        rowlayout.ROW.iter_unpack(a), rowlayout.ROW.iter_unpack(b)
    ):
        assert (wa, sa, fa) == (wb, sb, fb)
        assert abs(ta - tb) <= 500, (ta, tb)


def tool_env(**extra: str) -> dict:
    """The environment for an external tool (Chromium, Go): without the sanitizer runtime
    that `make test-asan` preloads into Python, which those programs cannot run with."""
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    env.update(extra)
    return env
