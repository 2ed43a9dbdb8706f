"""Records that keep only what their thread's last record lacked at its root end
(capture/root_share.h): every sample still has its whole stack, every frame on its line.

A sample 120 calls deep stores the frame or two that changed since the thread's last one; the
drain puts the rest back from that record. A mistake there shows as a frame missing, a frame
of the other chain, or a caller on the wrong line: each is checked frame by frame here.
"""

from __future__ import annotations

import threading
import time

import spprof
import workloads as w

DEPTH = 120


def leaf(seconds: float) -> int:
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1  # LEAF_A
        n ^= 3  # LEAF_B
    return n


def down_a(depth: int, seconds: float) -> int:
    if depth > 0:
        return down_a(depth - 1, seconds)  # DOWN_A
    return leaf(seconds)  # LEAF_CALL_A


def down_b(depth: int, seconds: float) -> int:
    if depth > 0:
        return down_b(depth - 1, seconds)  # DOWN_B
    return leaf(seconds)  # LEAF_CALL_B


def root_a(seconds: float) -> int:
    return down_a(DEPTH, seconds)  # ROOT_A


def root_b(seconds: float) -> int:
    return down_b(DEPTH, seconds)  # ROOT_B


def expected_chain(root) -> list[tuple[str, int]]:
    """(function, line) from the chain's root function to the leaf's caller."""
    down = down_a if root is root_a else down_b
    tag = "A" if root is root_a else "B"
    rec = w.line_of(down, f"DOWN_{tag}")
    return (
        [(root.__name__, w.line_of(root, f"ROOT_{tag}"))]
        + [(down.__name__, rec)] * DEPTH
        + [(down.__name__, w.line_of(down, f"LEAF_CALL_{tag}"))]
    )


def check_chains(samples, roots=(root_a, root_b)) -> dict[str, int]:
    """Every sample in leaf(): exactly its chain, frame by frame, and the leaf on a line of
    its body (its first line too: in wall mode a thread entering leaf() waits there for the
    GIL now and then; CI saw it on 3.15). Returns the samples per root."""
    leaf_lines = set(range(w.line_of(leaf, "end ="), w.line_of(leaf, "return n") + 1))
    chains = {r.__name__: expected_chain(r) for r in roots}
    per_root = dict.fromkeys(chains, 0)
    for s in samples:
        names = [f.function_name for f in s.frames]
        if not names or names[-1] != "leaf":
            continue
        assert not s.truncated, names[:5]
        assert s.frames[-1].lineno in leaf_lines, s.frames[-1]
        root = next((n for n in names if n in chains), None)
        assert root is not None, names
        start = names.index(root)
        got = [(f.function_name, f.lineno) for f in s.frames[start:-1]]
        wrong = [g for g, e in zip(got, chains[root]) if g != e][:3]
        assert got == chains[root], (root, wrong, len(got))
        per_root[root] += 1
    return per_root


def test_deep_samples_sharing_their_root_keep_every_frame_on_its_line():
    # Two chains 122 frames deep under different roots, in turns of ~20 ms of CPU: most records
    # share all but the leaf with the one before; at each turn the root changes and a record
    # is whole again.
    with spprof.Profiler(interval_ms=1) as p:
        for i in range(40):
            (root_a if i % 2 == 0 else root_b)(0.02)
    stats = spprof.stats()  # after stop(): every record drained
    per_root = check_chains(p.get_samples())
    assert per_root["root_a"] >= 40 and per_root["root_b"] >= 40, per_root
    assert stats["records_without_base"] == 0
    # Nearly every record shares its root (at a turn, the frames under root_a/root_b).
    shared = stats["records_root_shared"]
    assert shared >= 0.9 * sum(per_root.values()), (shared, per_root)


def test_wall_mode_census_walks_between_deep_samples_leave_every_stack_whole():
    # Wall mode: four threads each alternate 15 ms of CPU deep in a chain with 15 ms asleep in
    # it. The census walks a sleeping thread (a record written whole by another thread) between
    # its handler's records, which must then start whole again; a walk's stack (the sleep, in
    # the chain) is checked too.
    def worker(root, stop: threading.Event) -> None:
        while not stop.is_set():
            root(0.015)
            sleeper(root)

    def sleeper(root) -> None:
        (down_sleep_a if root is root_a else down_sleep_b)(DEPTH)

    stop = threading.Event()
    with spprof.Profiler(interval_ms=2, mode="wall") as p:
        roots = (root_a, root_b, root_a, root_b)
        threads = [threading.Thread(target=worker, args=(r, stop)) for r in roots]
        for t in threads:
            t.start()
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join()
    stats = spprof.stats()
    samples = p.get_samples()
    per_root = check_chains(samples)
    assert per_root["root_a"] >= 30 and per_root["root_b"] >= 30, per_root
    asleep = [s for s in samples if s.frames and s.frames[-1].function_name == "sleep_leaf"]
    assert len(asleep) >= 20, len(asleep)
    for s in asleep:
        names = [f.function_name for f in s.frames]
        down = "down_sleep_a" if "down_sleep_a" in names else "down_sleep_b"
        assert names.count(down) == DEPTH + 1, (down, names.count(down))
        assert s.frames[-1].lineno == w.line_of(sleep_leaf, "SLEEP")
    assert stats["records_without_base"] == 0
    assert stats["records_root_shared"] > 0


def sleep_leaf() -> None:
    time.sleep(0.015)  # SLEEP


def down_sleep_a(depth: int) -> None:
    if depth > 0:
        return down_sleep_a(depth - 1)
    return sleep_leaf()


def down_sleep_b(depth: int) -> None:
    if depth > 0:
        return down_sleep_b(depth - 1)
    return sleep_leaf()
