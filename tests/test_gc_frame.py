"""The <GC> frame: time the cyclic garbage collector takes is shown as a frame of its own, on
the leaf side of the Python frame that triggered the collection (issue 23, section 4).

Each case runs tests/scripts/gc_heavy.py in its own interpreter: `make_cycles` builds cyclic
garbage, and gc.callbacks measure, with the thread's CPU clock from "start" to "stop", how much
of its CPU time the collections took. Before <GC> existed that time was charged to the line
that allocated, and the <GC> share was 0.
"""

from __future__ import annotations

import bisect
import gzip
import json

import pytest

import spprof
from conftest import SCRIPTS, run_python, skip_when_emulated
from spprof import output

GC_FRAME = "<GC>"
# macOS too: the Mach sampler reads the GIL holder (pyframes/gil_state.h, test_gil_state.py).


def _run(mode: str, native: bool, out_path: str = "") -> dict:
    # 6 s of CPU: ~1,500 samples at the 4 ms a HZ=250 kernel tick allows, so the sampling
    # error of a ~20 % share is about 1 point (binomial), and 3 points is 3 of them. (On a
    # 2-core machine at load 10 the spread was seen to double: see the commit.)
    args = [str(SCRIPTS / "gc_heavy.py"), mode, "1" if native else "0", "6"]
    if out_path:
        args.append(out_path)
    r = run_python(*args, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


@skip_when_emulated("a share measured against the CPU clock over 6 s")
@pytest.mark.parametrize("native", [False, True], ids=["python", "native"])
@pytest.mark.parametrize("mode", ["cpu", "wall"])
def test_gc_share_matches_what_gc_callbacks_measure(mode: str, native: bool) -> None:
    out = _run(mode, native)
    # Wall mode: the samples of the thread running (not blocked, not waiting for a CPU),
    # which is what its CPU clock measures.
    running = [r for r in out["rows"] if not r[2] and not r[3]]

    # Sample by sample, whatever the sampling's own error: a sample taken between a
    # collection's "start" and "stop" callbacks (monotonic clock, as Sample.timestamp_ns)
    # has <GC>, and one with <GC> was taken in such a window, in the callback Python code
    # around it, or in the collector's C code just before "start" or after "stop" (the
    # flag is set before the callbacks run; a sample's time is read as its capture starts,
    # a few tens of microseconds before the code it interrupted goes on).
    slack_ns = 200_000
    windows = out["windows"]
    missed, extra = [], []
    for _, _, _, _, names, ts in running:
        k = bisect.bisect_right(windows, ts)
        inside = k % 2 == 1  # after a start, before its stop
        if inside and GC_FRAME not in names:
            missed.append((ts, names[-3:]))
        elif not inside and GC_FRAME in names and "on_gc" not in names:
            near = (k < len(windows) and windows[k] - ts <= slack_ns) or (
                k > 0 and ts - windows[k - 1] <= slack_ns
            )
            if not near:
                extra.append((ts, names[-3:]))
    assert len(missed) + len(extra) <= max(2, len(running) // 200), (missed[:5], extra[:5])

    rows = [(r[0], r[4]) for r in running]
    in_gc = [(w, names) for w, names in rows if GC_FRAME in names]
    assert out["samples_in_gc"] >= len(in_gc) > 0
    # Under the function that allocates: make_cycles, or the gc.callbacks function the
    # collection itself calls (its own Python frames run inside the collection).
    parents: dict[str, int] = {}
    # A chain caught torn (a frame being pushed as the signal came: 3.12, about one run in
    # fifteen, 4 ms of ~0.5 s) is marked <truncated> at its root side and keeps its <GC>, with
    # nothing between: correct, and rare, never a parent of its own.
    torn = [names for _, names in in_gc if "<truncated>" in names]
    assert len(torn) <= max(1, len(in_gc) // 100), torn
    for w, names in in_gc:
        if "<truncated>" in names:
            continue
        at = names.index(GC_FRAME)
        parents[names[at - 1]] = parents.get(names[at - 1], 0) + w
        # Leaf side of every Python frame: only native frames may follow it (native mode).
        assert GC_FRAME not in names[at + 1 :], names
        if not native:
            assert at == len(names) - 1, names
    assert parents.get("make_cycles", 0) >= 0.8 * sum(parents.values()), parents
    assert set(parents) <= {"make_cycles", "on_gc"}, parents

    # The share: sampled time with <GC> against the collections' CPU time.
    share = sum(w for w, _ in in_gc) / sum(w for w, _ in rows)
    truth = out["gc_cpu"] / out["cpu"]
    # Every sample's label was checked above, so what is left is sampling noise. Collections
    # last several ticks, so neighbouring samples are alike and the noise is well above the
    # binomial point: measured from the samples themselves (batch means over 20 stretches of
    # time), the bound is 3 points or 4 standard errors, whichever is larger, up to 7 (CI, 2
    # cores: 43.4 % against 39.8 %, 3.6 points off, with every label right).
    ordered = sorted(running, key=lambda r: r[5])
    size = max(1, len(ordered) // 20)
    batches = [ordered[i : i + size] for i in range(0, size * 20, size)]
    shares = [sum(r[0] for r in b if GC_FRAME in r[4]) / sum(r[0] for r in b) for b in batches if b]
    mean = sum(shares) / len(shares)
    stderr = (sum((x - mean) ** 2 for x in shares) / (len(shares) - 1) / len(shares)) ** 0.5
    bound = min(0.07, max(0.03, 4 * stderr))
    assert truth > 0.1, out["gc_cpu"]  # the workload is GC-heavy, or the test says nothing
    on_cpu = out["cpu"] / out["wall"]
    if on_cpu < 0.8:
        # A thread given less than 80 % of a CPU is sampled where the kernel's tick finds it
        # running: at load 7-10 on a 2-core machine its samples' share of collection time
        # was seen 5 points below and 12 above its CPU share, with every label right (the
        # check above). Everything else is checked; this one figure is not.
        pytest.skip(f"share against CPU time not checked: the thread had {on_cpu:.0%} of a CPU")
    print(f"[gc share] {mode} native={native}: {share:.3f} vs {truth:.3f}, bound {bound:.3f}")
    assert abs(share - truth) <= bound, (share, truth, bound, mode, native)


@skip_when_emulated("a 6 s workload")
def test_every_format_shows_gc_as_a_frame_without_file_or_line(tmp_path) -> None:
    saved = tmp_path / "gc.spprof"
    _run("cpu", False, str(saved))
    profile = spprof.load(saved)
    gc_frames = [f for f in profile.frame_table if f.function_name == GC_FRAME]
    assert len(gc_frames) == 1, gc_frames
    assert gc_frames[0].filename == "" and gc_frames[0].lineno == 0 and not gc_frames[0].is_native
    for fmt in output.FORMATS:
        data = output.render(profile, fmt)
        if data[:2] == b"\x1f\x8b":
            data = gzip.decompress(data)
        text = data.decode("utf-8", "replace")
        # Named as it is (SVG and HTML escape "<"), and never with a made-up place: no
        # "<GC> (:0)" or "<GC>:0".
        names = (GC_FRAME, "&lt;GC&gt;", "\\u003cGC>", "\\u003cGC\\u003e")
        assert any(n in text for n in names), fmt
        assert "<GC> (" not in text and "<GC>:0" not in text and "&lt;GC&gt; (" not in text, fmt
