"""speedscope and collapsed output: valid, root first, weights in real time."""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path

import pytest

import spprof
import workloads as w

SCHEMA = (
    Path(__file__).resolve().parents[1].parent
    / "shared"
    / "formats"
    / "speedscope-file-format-schema.json"
)
SCHEMA_CANDIDATES = [
    SCHEMA,
    Path(__file__).resolve().parents[1]
    / ".."
    / "shared"
    / "formats"
    / "speedscope-file-format-schema.json",
]


def _schema() -> dict:
    for p in SCHEMA_CANDIDATES:
        if p.exists():
            return json.loads(p.read_text())
    pytest.skip("shared/formats/ is not beside this checkout")


@pytest.fixture(scope="module")
def two_thread_profile():
    def worker():
        w.consume(0.3)

    t = threading.Thread(target=worker, name="gen-worker")
    with spprof.Profiler(interval_ms=2) as p:
        t.start()
        w.spin(0.3)
        t.join()
    return p.profile


def test_speedscope_validates_and_has_one_profile_per_thread(two_thread_profile, tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    out = tmp_path / "p.speedscope.json"
    two_thread_profile.save(out, format="speedscope")
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, _schema())
    names = [p["name"] for p in doc["profiles"]]
    assert any(n.startswith("MainThread") for n in names)
    assert any(n.startswith("gen-worker") for n in names)
    for prof in doc["profiles"]:
        assert prof["unit"] == "nanoseconds"
        assert prof["endValue"] == sum(prof["weights"])
        assert all(wt >= 2_000_000 for wt in prof["weights"])


def test_speedscope_stacks_are_root_first(two_thread_profile, tmp_path):
    out = tmp_path / "p.json"
    two_thread_profile.save(out)
    doc = json.loads(out.read_text())
    frames = doc["shared"]["frames"]
    worker = next(p for p in doc["profiles"] if p["name"].startswith("gen-worker"))
    outside_python_ns = 0
    for stack, weight in zip(worker["samples"], worker["weights"]):
        names = [frames[i]["name"] for i in stack]
        if names == ["<no Python frame>"]:
            # The thread's C start-up before its first Python frame, or its tear-down after its
            # last: real CPU time (long under ASan), kept under a frame that says so.
            outside_python_ns += weight
            continue
        # threading's bootstrap is the root, the generator body the leaf
        assert names[0] in ("_bootstrap", "Thread._bootstrap")
        if "produce" in names:
            assert names.index("consume") < names.index("produce")
            assert names[-1] == "produce"
    # the generator is where the worker spent its 0.3 s of CPU
    produce = [i for i, s in enumerate(worker["samples"]) if frames[s[-1]]["name"] == "produce"]
    assert sum(worker["weights"][i] for i in produce) >= 0.2e9
    assert outside_python_ns <= 0.1 * sum(worker["weights"])


FOLDED = re.compile(r"^(?P<stack>[^\n]+) (?P<value>\d+)$")


def test_collapsed_is_folded_stacks_root_first(two_thread_profile, tmp_path):
    out = tmp_path / "p.collapsed.txt"
    two_thread_profile.save(out, format="collapsed")
    lines = out.read_text().splitlines()
    assert lines == sorted(lines)
    stacks = {}
    for line in lines:
        m = FOLDED.match(line)
        assert m, line
        assert m["stack"] not in stacks, "one line per distinct stack"
        stacks[m["stack"]] = int(m["value"])
    total_us = sum(stacks.values())
    assert abs(total_us * 1000 - two_thread_profile.total_weight_ns) <= 1000 * len(stacks)
    spin_lines = [s for s in stacks if s.split(";")[-1].startswith("spin_inner (")]
    assert spin_lines
    for s in spin_lines:
        parts = s.split(";")
        assert parts[-2].startswith("spin (")
        assert re.match(r"spin_inner \(.*workloads\.py:\d+\)$", parts[-1])


def test_collapsed_escapes_separators_in_names():
    from spprof.output import collapsed

    f = spprof.Frame(function_name="odd;name", filename="/a b/c.py", lineno=3, qualname="odd;name")
    assert collapsed.frame_label(f) == "odd%3Bname (/a b/c.py:3)"


def test_unknown_format_is_a_value_error(two_thread_profile, tmp_path):
    with pytest.raises(ValueError, match="unknown output format"):
        two_thread_profile.save(tmp_path / "x", format="svg")
    assert list(tmp_path.iterdir()) == []


def test_aggregate_ranks_functions_by_self_time(two_thread_profile):
    stats = two_thread_profile.aggregate()
    assert stats[0].self_ns >= stats[-1].self_ns
    top = {s.function_name for s in stats[:3]}
    assert top & {"spin_inner", "produce"}
    spin = next(s for s in stats if s.function_name == "spin")
    assert spin.total_ns >= spin.self_ns
    assert spin.total_ns >= next(s for s in stats if s.function_name == "spin_inner").total_ns
