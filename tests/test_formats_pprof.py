"""pprof output: `go tool pprof` reads it (where Go is installed), and a small independent
protobuf decoder (written against profile.proto, not against our writer) checks the fields."""

from __future__ import annotations

import gzip
import subprocess
from collections import defaultdict

import pytest

from spprof import Frame
from spprof._rows import FLAG_ON_CPU
from spprof.output import render
from test_formats_common import (
    MS,
    find_tool,
    pack_rows,
    real_profile,
    small_profile,
    tool_env,
)


# ---- a minimal protobuf reader -----------------------------------------------------------
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def fields(buf: bytes) -> dict[int, list]:
    """{field number: [values]}: ints for varints, bytes for length-delimited fields."""
    out: dict[int, list] = defaultdict(list)
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == 0:
            v, pos = _varint(buf, pos)
        elif wire == 2:
            n, pos = _varint(buf, pos)
            v, pos = buf[pos : pos + n], pos + n
        else:
            raise AssertionError(f"unexpected wire type {wire}")
        out[num].append(v)
    return out


def packed(values: list) -> list[int]:
    out: list[int] = []
    for v in values:
        if isinstance(v, int):
            out.append(v)
            continue
        pos = 0
        while pos < len(v):
            x, pos = _varint(v, pos)
            out.append(x)
    return out


def one(f: dict, num: int, default: int = 0):
    return f[num][0] if f.get(num) else default


class Decoded:
    def __init__(self, data: bytes) -> None:
        top = fields(gzip.decompress(data))
        self.strings = [s.decode() for s in top[6]]
        s = self.strings
        self.sample_types = [(s[one(v, 1)], s[one(v, 2)]) for v in map(fields, top[1])]
        pt = fields(top[11][0])
        self.period_type = (s[one(pt, 1)], s[one(pt, 2)])
        self.period = one(top, 12)
        self.default_type = s[one(top, 14)]
        self.functions = {}
        for raw in top[5]:
            f = fields(raw)
            self.functions[one(f, 1)] = (s[one(f, 2)], s[one(f, 4)], one(f, 5))
        self.locations = {}
        self.addresses = {}  # location id -> (mapping id, address)
        for raw in top[4]:
            loc = fields(raw)
            lines = [fields(x) for x in loc[4]]
            self.locations[one(loc, 1)] = [(one(x, 1), one(x, 2)) for x in lines]
            self.addresses[one(loc, 1)] = (one(loc, 2), one(loc, 3))
        # mapping id -> (start, limit, file offset, file name, has_functions)
        self.mappings = {}
        for raw in top.get(3, []):
            m = fields(raw)
            self.mappings[one(m, 1)] = (one(m, 2), one(m, 3), one(m, 4), s[one(m, 5)], one(m, 7))
        self.samples = []
        for raw in top[2]:
            smp = fields(raw)
            labels = {}
            for lab in map(fields, smp[3]):
                labels[s[one(lab, 1)]] = s[one(lab, 2)] if lab.get(2) else one(lab, 3)
            self.samples.append((packed(smp[1]), packed(smp[2]), labels))

    def stack(self, loc_ids: list[int]) -> list[tuple[str, str, int]]:
        """Root-first (function name, file, line) for a sample's location ids (leaf first)."""
        out = []
        for loc in reversed(loc_ids):
            ((fn, line),) = self.locations[loc]
            out.append((self.functions[fn][0], self.functions[fn][1], line))
        return out


def test_fields_follow_profile_proto():
    d = Decoded(render(small_profile(), "pprof"))
    assert d.strings[0] == ""
    assert d.sample_types == [("samples", "count"), ("cpu", "nanoseconds")]
    assert d.period_type == ("cpu", "nanoseconds") and d.period == 1_000_000
    assert d.default_type == "cpu"
    # Functions carry file and start line; a function on two lines is one function.
    hot = [f for f in d.functions.values() if f[0] == "Work.hot"]
    assert hot == [("Work.hot", "/app/prog.py", 10)]
    # Samples: per (thread, stack), leaf first, values [count, ns], thread labels.
    by_stack = {}
    for locs, values, labels in d.samples:
        by_stack[(labels["thread_name"], tuple(d.stack(locs)))] = (values, labels)
    key = (
        "MainThread",
        (
            ("<module>", "/app/prog.py", 30),
            ("main", "/app/prog.py", 25),
            ("Work.hot", "/app/prog.py", 12),
        ),
    )
    assert by_stack[key] == ([5, 5_000_000], {"thread_name": "MainThread", "thread_id": 4000})
    wkey = ("worker", (("Thread.run", "/usr/lib/threading.py", 1012), ("wait", "/app/prog.py", 7)))
    assert by_stack[wkey][0] == [3, 3_000_000]
    assert by_stack[wkey][1]["thread_id"] == 4001
    assert sum(v[0] for _, v, _ in d.samples) == 13


def _go_top(go: str, path, tmp_path, *extra: str) -> list[str]:
    env = tool_env(
        HOME=str(tmp_path), GOCACHE=str(tmp_path / "gocache"), PPROF_TMPDIR=str(tmp_path)
    )
    out = subprocess.run(
        [go, "tool", "pprof", "-top", *extra, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=True,
    ).stdout
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("flat"))
    return [line.split()[-1] for line in lines[start + 1 :] if line.strip()]


@pytest.fixture(scope="module")
def go() -> str:
    path = find_tool(("go",), "golang-go")
    if path is None:
        pytest.skip("Go is not installed and could not be installed (apt-get install golang-go)")
    return path


def test_go_tool_pprof_reads_the_hand_made_profile(go, tmp_path):
    path = tmp_path / "small.pb.gz"
    small_profile().save(path, "pprof")
    names = _go_top(go, path, tmp_path)
    assert names[:3] == ["Work.hot", "wait", "cold"]
    assert "<module>" in names  # pprof would strip "<...>" as C++ template arguments
    # The thread label works as a filter.
    assert _go_top(go, path, tmp_path, "-tagfocus=thread_name=worker")[0] == "wait"


def test_go_tool_pprof_lists_the_hot_function_of_a_real_profile_first(go, tmp_path):
    p = real_profile(tmp_path)
    path = tmp_path / "real.pb.gz"
    p.save(path, "pprof")
    assert _go_top(go, path, tmp_path)[0] == "hot_function"


def test_real_profile_decodes_with_lines_inside_the_function(tmp_path):
    p = real_profile(tmp_path)
    d = Decoded(render(p, "pprof"))
    assert sum(v[0] for _, v, _ in d.samples) == p.sample_count
    assert sum(v[1] for _, v, _ in d.samples) == p.total_weight_ns
    hot = [f for f in d.functions.values() if f[0] == "hot_function"]
    assert len(hot) == 1 and hot[0][1].endswith("hot_prog.py")
    start = hot[0][2]
    hot_id = next(k for k, f in d.functions.items() if f[0] == "hot_function")
    lines = {line for locs in d.locations.values() for fn, line in locs if fn == hot_id}
    assert lines and all(start < line <= start + 6 for line in lines)
    threads = {labels["thread_name"] for _, _, labels in d.samples}
    assert {"MainThread", "warm-worker"} <= threads


def _native_profile():
    """small_profile with a native leaf `sum_loop` (libx.so, load bias 0x7000_0000) under
    main, sampled at two addresses: two stacks of the same frames."""
    p = small_profile()
    p.frame_table.append(Frame("sum_loop", "/lib/libx.so", 0, is_native=True))
    native = len(p.frame_table) - 1
    p.stacks += [(0, 1, native), (0, 1, native)]
    a, b = len(p.stacks) - 2, len(p.stacks) - 1
    bias = 0x7000_0000
    p.native_libraries = {"/lib/libx.so": bias}
    p.stack_addresses = {
        a: (p.stacks[a], (0, 0, bias + 0x1234)),
        b: (p.stacks[b], (0, 0, bias + 0x1240)),
    }
    t0 = p.start_ns + 20 * MS
    rows = [(t0 + i * MS, MS, a if i < 3 else b, 0, FLAG_ON_CPU) for i in range(5)]
    p.rows += pack_rows(rows)
    p._samples = None
    return p, a, b, bias


def test_native_addresses_are_locations_of_one_function_in_the_library_s_mapping():
    p, _, _, bias = _native_profile()
    d = Decoded(render(p, "pprof"))
    fns = [fid for fid, f in d.functions.items() if f[0] == "sum_loop"]
    assert len(fns) == 1  # one function
    at = {}
    for locs, values, _ in d.samples:
        ((fn, _),) = d.locations[locs[0]]
        if fn == fns[0]:
            mapping, address = d.addresses[locs[0]]
            at[address] = at.get(address, 0) + values[0]
            assert d.mappings[mapping] == (bias, bias + 0x1241, 0, "/lib/libx.so", 1)
            # The Python callers have no address and no mapping.
            assert all(d.addresses[loc] == (0, 0) for loc in locs[1:])
    assert at == {bias + 0x1234: 3, bias + 0x1240: 2}
    # Collapsed: one line for the two stacks of the same frames.
    lines = [x for x in render(p, "collapsed").decode().splitlines() if "sum_loop" in x]
    assert len(lines) == 1 and lines[0].endswith(" 5000"), lines


def test_native_addresses_follow_their_frames_when_a_view_cuts_the_stack():
    p, a, b, bias = _native_profile()
    # The runner's cut at the root (drop_root_frames), then a view that drops a frame from the
    # middle and puts a synthetic frame at the root (--async's task frame).
    p.drop_root_frames(lambda f: f.function_name == "<module>")
    assert p.frame_addresses(a) == (0, bias + 0x1234)
    native = p.stacks[b][-1]
    p.frame_table.append(Frame("<task> t", "", 0))
    p.stacks[b] = (len(p.frame_table) - 1, native)
    assert p.frame_addresses(b) == (0, bias + 0x1240)
    # A stack without addresses has zeros.
    assert p.frame_addresses(0) == (0, 0)
    d = Decoded(render(p, "pprof"))
    assert sorted(addr for _, addr in d.addresses.values() if addr) == [
        bias + 0x1234,
        bias + 0x1240,
    ]


def test_native_addresses_survive_a_spprof_file():
    # Issue 28: a .spprof file kept no addresses, so `spprof convert x.spprof -o x.pb.gz`
    # had one location per native function where the live profile had one per address.
    from spprof._load import loads

    p, a, b, bias = _native_profile()
    back = loads(render(p, "spprof"))
    assert back.native_libraries == {"/lib/libx.so": bias}
    assert back.frame_addresses(a) == (0, 0, bias + 0x1234)
    assert back.frame_addresses(b) == (0, 0, bias + 0x1240)
    assert render(back, "pprof") == render(p, "pprof")
    # Cut by a view before it is written: written as it is now, and read back so.
    p.drop_root_frames(lambda f: f.function_name == "<module>")
    back = loads(render(p, "spprof"))
    assert back.frame_addresses(a) == (0, bias + 0x1234)
    assert render(back, "pprof") == render(p, "pprof")


def test_a_spprof_file_without_native_addresses_has_no_address_keys():
    # Optional META keys: a profile without them is written as before (older readers, and
    # the format's own size), and one whose addresses do not match its stacks is refused.
    import json

    from spprof._load import loads

    p = small_profile()
    meta = _meta_of(render(p, "spprof"))
    assert "addresses" not in meta and "native_libraries" not in meta
    n, _, _, _ = _native_profile()
    meta = _meta_of(render(n, "spprof"))
    assert meta["addresses"][0][1:] == [0, 0, 0x7000_0000 + 0x1234]
    bad = render(n, "spprof")
    broken = gzip.decompress(bad).replace(
        json.dumps(meta["addresses"][0], separators=(",", ":")).encode(),
        json.dumps(meta["addresses"][0][:-1], separators=(",", ":")).encode(),
    )
    with pytest.raises(ValueError, match="do not match its frames"):
        loads(gzip.compress(_fix_meta_length(broken)))


def _meta_of(data: bytes) -> dict:
    import json
    import struct

    body = gzip.decompress(data)
    tag, length = struct.unpack_from("<4sQ", body, 8)
    assert tag == b"META"
    return json.loads(body[20 : 20 + length])


def _fix_meta_length(body: bytes) -> bytes:
    """body with its META section's length set to what the section now holds (the JSON's
    end is its closing brace before the TIME tag)."""
    import struct

    end = body.index(b"TIME", 20)
    return body[:12] + struct.pack("<Q", end - 20) + body[20:]


def test_native_addresses_of_several_processes_merge_as_addresses_in_the_file():
    # --subprocesses and `spprof convert a.spprof b.spprof`: each process loaded libx.so at
    # a load bias of its own, so the same instruction had two addresses. The merge keeps
    # file addresses (bias 0): one location per instruction, its samples from both.
    from spprof._process_merge import merge

    a_prof, _, _, _ = _native_profile()
    c_prof, c, _, _ = _native_profile()
    other = 0x5500_0000
    c_prof.native_libraries = {"/lib/libx.so": other}
    c_prof.stack_addresses = {c: (c_prof.stacks[c], (0, 0, other + 0x1234))}
    a_prof.metadata["pid"], c_prof.metadata["pid"] = 100, 200
    m = merge(a_prof, [c_prof])
    assert m.native_libraries == {"/lib/libx.so": 0}
    d = Decoded(render(m, "pprof"))
    at: dict[int, int] = {}
    for locs, values, _ in d.samples:
        mapping, address = d.addresses[locs[0]]
        if address:
            assert d.mappings[mapping][:4] == (0, 0x1241, 0, "/lib/libx.so")
            at[address] = at.get(address, 0) + values[0]
    # 0x1234: 3 samples in each process; 0x1240: the first's 2, and the second's 2 whose
    # stack kept no address are the function's location without one.
    assert at == {0x1234: 6, 0x1240: 2}, at
    # A merge of merges (a .spprof of several processes, converted with another) keeps them.
    again = merge(m, [])
    assert render(again, "pprof") == render(m, "pprof")
