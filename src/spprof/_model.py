"""The profile data model: Frame, Sample, ThreadInfo, FunctionStats and ProfileData.

The bottom layer: it imports nothing of spprof's but the row layout (_rows.py). The writers
in output/ read ProfileData; spprof.Profile (_profile.py) is ProfileData plus save(), which
needs the writers.

A Profile keeps what the native core exports in compact form (a frame table, interned
stacks, packed sample rows, a thread table) and builds the typed view lazily, so stopping a
long session costs almost nothing and memory follows distinct stacks, not samples. A blocked
thread's wait (wall mode) is one row holding many samples (`folds`): the tallies count it
once with its count, and iter_rows() gives its samples one by one to the writers that want
them, without ever holding them all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, TypeVar

from ._rows import (
    FLAG_GIL_KNOWN,
    FLAG_HAS_GIL,
    FLAG_IDLE,
    FLAG_ON_CPU,
    FLAG_RUNNABLE,
    FLAG_THREAD_END,
    FLAG_TRUNCATED,
    ROW,
    ROW_WORDS,
    SERIAL_BITS,
    SERIAL_MASK,
    STACK_WORD,
    THREAD_AND_FLAGS_WORD,
    pieces,
)


@dataclass(frozen=True)
class Frame:
    """One frame of a sampled stack."""

    function_name: str
    filename: str
    lineno: int
    is_native: bool = False
    qualname: str = ""
    first_lineno: int = 0

    @property
    def display_name(self) -> str:
        """The qualified name where the interpreter provides one (3.11+), else the name."""
        return self.qualname or self.function_name


@dataclass(frozen=True)
class Sample:
    """One sample: a thread's stack at one instant, standing for `weight_ns` of time."""

    timestamp_ns: int
    thread_id: int
    native_thread_id: int
    thread_name: str
    weight_ns: int
    frames: tuple[Frame, ...]  # frames[0] is the outermost, frames[-1] the one running
    on_cpu: bool = True
    gil: Optional[bool] = None
    idle: bool = False
    truncated: bool = False
    runnable: bool = False  # wall mode: the thread waited for a CPU here (preempted), not blocked
    # CPU time a thread used after its last sample, owed by its timer as it ended: on its last
    # stack, not on the line it ran (docs/architecture.md, "Short threads")
    thread_end: bool = False


def thread_label(name: str, pid: int) -> str:
    """A thread's name as every format shows it: with its process when it has one (pid 0:
    the profile holds one process)."""
    return f"{name} (pid {pid})" if pid else name


@dataclass(frozen=True)
class ThreadInfo:
    """A thread seen during the session."""

    thread_id: int
    native_thread_id: int
    name: str
    cpu_ns: int  # CPU time the thread used while the session watched it
    samples: int
    weight_ns: int  # sampled time attributed to the thread
    ended: bool  # ended before the profile was stopped
    gil_fraction: Optional[float] = None  # share of sampled time holding the GIL (None: unknown)
    idle_fraction: float = 0.0  # share of sampled time blocked (wall mode)
    # Of `samples`, how many a filter (wall mode without --idle, --gil) left out of the profile:
    # the thread's figures are the run's, its samples in the profile are samples - left_out.
    left_out: int = 0
    native_only: bool = False  # found without a Python thread state (OpenMP, OpenBLAS, C)
    signal_blocked: bool = False  # blocks the sampling signal: not sampled, CPU time reported
    pid: int = 0  # its process when --subprocesses merged several (0: the profile's own)
    task_track: bool = False  # the asyncio tasks waiting in this thread's loop (--async, wall)

    @property
    def key(self) -> tuple[int, int, bool]:
        """As ThreadRecord.key: the records merged into this thread."""
        return (self.thread_id, self.native_thread_id, self.task_track)

    @property
    def label(self) -> str:
        """The name, with the process when the profile holds several: `MainThread (pid 42)`."""
        return thread_label(self.name, self.pid)


@dataclass(frozen=True)
class ThreadRecord:
    """One entry of Profile.thread_table: a Python thread state the session registered.

    Rows name it by `serial` (its index). One OS thread can have several records when its
    thread state was recreated (C callbacks); Profile.threads merges them.
    """

    serial: int
    ident: int  # threading.get_ident()
    native_id: int  # the OS thread id
    name: str
    cpu_ns: int  # CPU time used while the session watched it
    registered_ns: int
    ended_ns: int  # 0: still running at stop
    native_only: bool = False  # found without a Python thread state; identified by native_id
    signal_blocked: bool = False  # blocks the sampling signal: left alone, CPU time reported
    pid: int = 0  # its process, set when --subprocesses merged several (0: the profile's own)
    # The asyncio tasks waiting in this thread's event loop (_async_census), not the thread
    task_track: bool = False

    @property
    def label(self) -> str:
        """The name, with the process when the profile holds several: `MainThread (pid 42)`."""
        return thread_label(self.name, self.pid)

    @property
    def key(self) -> tuple[int, int, bool]:
        """The logical thread (or task track) it belongs to: Profile.threads merges by it."""
        return (self.ident, self.native_id, self.task_track)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ThreadRecord:
        """From the extension's (or the .spprof file's) dict of the same keys."""
        return cls(
            serial=int(d["serial"]),
            ident=int(d["ident"]),
            native_id=int(d["native_id"]),
            name=str(d["name"]),
            cpu_ns=int(d["cpu_ns"]),
            registered_ns=int(d["registered_ns"]),
            ended_ns=int(d["ended_ns"]),
            native_only=bool(d.get("native_only", False)),
            signal_blocked=bool(d.get("signal_blocked", False)),
            pid=int(d.get("pid", 0)),
            task_track=bool(d.get("task_track", False)),
        )

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class FunctionStats:
    """Time spent in one function, summed over every thread."""

    function_name: str
    qualname: str
    filename: str
    first_lineno: int
    self_ns: int
    total_ns: int
    self_samples: int
    total_samples: int
    hottest_line: int  # the line with most self time (or total time when self is 0)
    # the line with most total time: where a caller spends it (its call's line)
    hottest_total_line: int = 0
    is_native: bool = False  # a native (C/C++/Rust) function


_P = TypeVar("_P", bound="ProfileData")  # from_native and filter keep the subclass (Profile)


@dataclass
class ProfileData:
    """The result of a profiling session: its data and the views computed from it."""

    interval_ms: float
    mode: str
    duration_ns: int
    start_ns: int
    frame_table: list[Frame]
    stacks: list[tuple[int, ...]]
    rows: bytes
    thread_table: list[ThreadRecord]
    dropped_count: int
    stats: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    # Row index -> samples that row holds, for rows holding more than one: a blocked thread's
    # wait folded into one row (wall mode; stack_store.h). Rows not here hold one sample.
    folds: dict[int, int] = field(default_factory=dict)
    # Native mode: stack id -> (its frames as sampled, the address of each: 0 for a frame that
    # is not native), for stacks with a native frame; equal frames at other addresses are
    # other stacks (pprof's locations keep addresses, every other output merges by frame).
    # The frames are kept so that views that cut or relabel stacks need not keep addresses
    # in step (frame_addresses). native_libraries: each library's load bias (an address
    # minus it is the address in the file). Both are kept in .spprof files; a merge of
    # processes (--subprocesses) keeps addresses in the file, with biases 0.
    stack_addresses: dict[int, tuple[tuple[int, ...], tuple[int, ...]]] = field(
        default_factory=dict
    )
    native_libraries: dict[str, int] = field(default_factory=dict)
    _samples: Optional[list[Sample]] = field(default=None, repr=False)

    # ---- construction -------------------------------------------------------------------
    @classmethod
    def from_native(
        cls: type[_P],
        raw: Mapping[str, Any],
        mode: str,
        interval_ms: float,
        metadata: dict[str, Any],
    ) -> _P:
        frames = [
            Frame(
                function_name=name,
                filename=filename,
                lineno=line,
                is_native=native,
                qualname=qualname,
                first_lineno=first,
            )
            for (name, qualname, filename, line, first, native) in raw["frames"]
        ]
        stats = dict(raw["stats"])
        stacks = list(raw["stacks"])
        return cls(
            interval_ms=interval_ms,
            mode=mode,
            duration_ns=max(0, raw["end_ns"] - raw["start_ns"]),
            start_ns=raw["start_ns"],
            frame_table=frames,
            stacks=stacks,
            rows=raw["samples"],
            thread_table=[ThreadRecord.from_dict(t) for t in raw["threads"]],
            dropped_count=int(stats.get("samples_dropped", 0)),
            stats=stats,
            metadata=dict(metadata),
            folds=dict(raw.get("folds") or {}),
            stack_addresses={
                sid: (stacks[sid], tuple(at))
                for sid, at in (raw.get("stack_addresses") or {}).items()
            },
            native_libraries=dict(raw.get("native_libraries") or {}),
        )

    # ---- raw access for writers -------------------------------------------------------------
    def iter_rows(self) -> Iterator[tuple[int, int, int, int, int]]:
        """(timestamp_ns, weight_ns, stack_id, thread_serial, flags) for every sample, in order:
        a folded row as the samples it holds (_rows.pieces), made one at a time."""
        if not self.folds:
            for ts, weight, stack, tf in ROW.iter_unpack(self.rows):
                yield ts, weight, stack, tf & SERIAL_MASK, tf >> SERIAL_BITS
            return
        folds = self.folds
        for i, (ts, weight, stack, tf) in enumerate(ROW.iter_unpack(self.rows)):
            n = folds.get(i, 1)
            if n == 1:
                yield ts, weight, stack, tf & SERIAL_MASK, tf >> SERIAL_BITS
                continue
            for t, w in pieces(ts, weight, n):
                yield t, w, stack, tf & SERIAL_MASK, tf >> SERIAL_BITS

    def iter_counted(self) -> Iterator[tuple[int, int, int, int, int, int]]:
        """(timestamp_ns, weight_ns, stack_id, thread_serial, flags, samples) for every row,
        in order: a folded row once, with its whole weight and the samples it holds. What
        sums and counts read (the samples' weights add up to the row's)."""
        get = self.folds.get
        for i, (ts, weight, stack, tf) in enumerate(ROW.iter_unpack(self.rows)):
            yield ts, weight, stack, tf & SERIAL_MASK, tf >> SERIAL_BITS, get(i, 1)

    def process_names(self) -> Callable[[ThreadRecord], tuple[int, str]]:
        """A thread's process: (pid, "COMMAND LINE (pid N)"), from metadata["processes"]
        when --subprocesses merged several, else the session's own. Read once per writer:
        a merge of 1,000 children lists 1,000 processes."""
        own = int(self.metadata.get("pid") or 0)
        default = str(self.metadata.get("name") or "python")
        names: dict[int, str] = {}
        for p in self.metadata.get("processes") or ():
            if p.get("argv"):  # the first entry of a pid: before an exec, its first image
                names.setdefault(int(p.get("pid") or 0), " ".join(str(a) for a in p["argv"]))

        def process_of(t: ThreadRecord) -> tuple[int, str]:
            pid = t.pid or own
            return pid, f"{names.get(pid, default)} (pid {pid})"

        return process_of

    @property
    def sample_count(self) -> int:
        """Samples in the profile, a folded row counted as the samples it holds."""
        return self.row_count + sum(self.folds.values()) - len(self.folds)

    @property
    def row_count(self) -> int:
        """Rows held: a folded row is one."""
        return len(self.rows) // ROW.size

    def frame_addresses(self, stack_id: int) -> tuple[int, ...]:
        """The address of each frame of the stack as it is now (0: none kept), beside it.
        Views cut stacks at the root (the runner, a greenlet's run), drop frames from the
        middle (@profile's wrapper) or put a synthetic frame at the root (--async): each frame
        of today's stack takes the address of the same frame in the stack as sampled, matched
        from the leaf, where they agree."""
        ids = self.stacks[stack_id]
        kept = self.stack_addresses.get(stack_id)
        if kept is None:
            return (0,) * len(ids)
        old, at = kept
        if old is ids:
            return at
        out = [0] * len(ids)
        j = len(old) - 1
        for k in range(len(ids) - 1, -1, -1):
            i = j
            while i >= 0 and old[i] != ids[k]:
                i -= 1
            if i >= 0:
                out[k] = at[i]
                j = i - 1
        return tuple(out)

    def stack_frames(self, stack_id: int) -> tuple[Frame, ...]:
        table = self.frame_table
        return tuple(table[i] for i in self.stacks[stack_id])

    # ---- the typed view -----------------------------------------------------------------
    @property
    def samples(self) -> list[Sample]:
        if self._samples is None:
            stack_cache: dict[int, tuple[Frame, ...]] = {}
            threads = self.thread_table
            out: list[Sample] = []
            for ts, weight, stack, serial, flags in self.iter_rows():
                frames = stack_cache.get(stack)
                if frames is None:
                    frames = stack_cache[stack] = self.stack_frames(stack)
                t = threads[serial]
                out.append(
                    Sample(
                        timestamp_ns=ts,
                        thread_id=t.ident,
                        native_thread_id=t.native_id,
                        thread_name=t.label,
                        weight_ns=weight,
                        frames=frames,
                        on_cpu=bool(flags & FLAG_ON_CPU),
                        gil=bool(flags & FLAG_HAS_GIL) if flags & FLAG_GIL_KNOWN else None,
                        idle=bool(flags & FLAG_IDLE),
                        truncated=bool(flags & FLAG_TRUNCATED),
                        runnable=bool(flags & FLAG_RUNNABLE),
                        thread_end=bool(flags & FLAG_THREAD_END),
                    )
                )
            self._samples = out
        return self._samples

    def _tally(self, keep: Callable[[int], bool] = lambda i: True) -> dict[int, list[int]]:
        """Per thread serial, over the rows whose index `keep` accepts:
        [samples, weight, GIL weight, GIL-known weight, idle weight, 0]."""
        counts: dict[int, list[int]] = {}
        for i, (_, weight, _, serial, flags, n) in enumerate(self.iter_counted()):
            if not keep(i):
                continue
            c = counts.setdefault(serial, [0, 0, 0, 0, 0, 0])
            c[0] += n
            c[1] += weight
            if flags & FLAG_GIL_KNOWN:
                c[3] += weight
                if flags & FLAG_HAS_GIL:
                    c[2] += weight
            if flags & FLAG_IDLE:
                c[4] += weight
        return counts

    def thread_tallies(self) -> dict[int, list[int]]:
        """Per thread serial, the run's figures: [samples, weight, GIL weight, GIL-known
        weight, idle weight, samples left out]. The rows in the profile plus what filter()
        left out (kept in metadata["left_out_threads"], so a saved profile has them too).
        The one place a thread's samples, GIL% and IDLE% come from: the summary of a
        recording, `spprof report` of its file and every writer agree."""
        counts = self._tally()
        for key, left in self.metadata.get("left_out_threads", {}).items():
            c = counts.setdefault(int(key), [0, 0, 0, 0, 0, 0])
            for k in range(5):
                c[k] += int(left[k])
            c[5] += int(left[0])
        return counts

    @property
    def left_out_count(self) -> int:
        """Samples of the run a filter left out of the profile (wall mode without --idle,
        --gil): the run had sample_count + left_out_count."""
        return sum(int(v[0]) for v in self.metadata.get("left_out_threads", {}).values())

    @property
    def threads(self) -> list[ThreadInfo]:
        """Threads by logical identity (ident, native id), in order of first appearance,
        with the run's figures (thread_tallies)."""
        counts = self.thread_tallies()
        merged: dict[tuple[int, int, bool], dict[str, Any]] = {}
        for t in self.thread_table:
            key = t.key
            c = counts.get(t.serial, [0, 0, 0, 0, 0, 0])
            m = merged.get(key)
            if m is None:
                merged[key] = {
                    "name": t.name,
                    "cpu_ns": t.cpu_ns,
                    "c": list(c),
                    "ended": t.ended_ns != 0,
                    "native_only": t.native_only,
                    "signal_blocked": t.signal_blocked,
                    "pid": t.pid,
                    "task_track": t.task_track,
                }
            else:  # one OS thread whose Python thread state was recreated (C callbacks)
                m["cpu_ns"] = max(m["cpu_ns"], t.cpu_ns)
                m["c"] = [x + y for x, y in zip(m["c"], c)]
                m["ended"] = t.ended_ns != 0
                m["native_only"] = m["native_only"] or t.native_only
                m["signal_blocked"] = m["signal_blocked"] or t.signal_blocked
        return [
            ThreadInfo(
                thread_id=k[0],
                native_thread_id=k[1],
                name=v["name"],
                cpu_ns=v["cpu_ns"],
                samples=v["c"][0],
                weight_ns=v["c"][1],
                ended=v["ended"],
                gil_fraction=v["c"][2] / v["c"][3] if v["c"][3] else None,
                idle_fraction=v["c"][4] / v["c"][1] if v["c"][1] else 0.0,
                left_out=v["c"][5],
                native_only=v["native_only"],
                signal_blocked=v["signal_blocked"],
                pid=v["pid"],
                task_track=v["task_track"],
            )
            for k, v in merged.items()
        ]

    def get_samples(self) -> list[Sample]:
        return self.samples

    @property
    def total_weight_ns(self) -> int:
        return sum(w for _, w, _, _, _, _ in self.iter_counted())

    def stack_weights(self) -> dict[tuple[int, int], list[int]]:
        """{(thread serial, stack id): [samples, weight_ns]}: the profile folded by stack."""
        folded: dict[tuple[int, int], list[int]] = {}
        for _, weight, stack, serial, _, n in self.iter_counted():
            f = folded.setdefault((serial, stack), [0, 0])
            f[0] += n
            f[1] += weight
        return folded

    def aggregate(self) -> list[FunctionStats]:
        """Self and total time per function over all threads, hottest (by self time) first.

        Total time counts a sample once per function even when it recurses.
        """
        by_stack: dict[int, list[int]] = {}
        for (_, stack), (n, w) in self.stack_weights().items():
            acc = by_stack.setdefault(stack, [0, 0])
            acc[0] += n
            acc[1] += w
        stats: dict[tuple[str, str, int], list[Any]] = {}
        lines: dict[tuple[str, str, int], dict[int, list[int]]] = {}
        for stack, (n, w) in by_stack.items():
            ids = self.stacks[stack]
            seen: set[tuple[str, str, int]] = set()
            for pos, fid in enumerate(ids):
                f = self.frame_table[fid]
                key = (f.display_name, f.filename, f.first_lineno)
                s = stats.setdefault(key, [f.function_name, 0, 0, 0, 0, f.is_native])
                leaf = pos == len(ids) - 1
                if key not in seen:
                    seen.add(key)
                    s[2] += w
                    s[4] += n
                line_acc = lines.setdefault(key, {}).setdefault(f.lineno, [0, 0])
                line_acc[1] += w
                if leaf:
                    s[1] += w
                    s[3] += n
                    line_acc[0] += w
        result = []
        for key, (name, self_ns, total_ns, self_n, total_n, native) in stats.items():
            per_line = lines[key]
            hottest = max(per_line.items(), key=lambda kv: (kv[1][0], kv[1][1]))[0]
            hottest_total = max(per_line.items(), key=lambda kv: (kv[1][1], kv[1][0]))[0]
            result.append(
                FunctionStats(
                    function_name=name,
                    qualname=key[0],
                    filename=key[1],
                    first_lineno=key[2],
                    self_ns=self_ns,
                    total_ns=total_ns,
                    self_samples=self_n,
                    total_samples=total_n,
                    hottest_line=hottest,
                    hottest_total_line=hottest_total,
                    is_native=native,
                )
            )
        result.sort(key=lambda s: (s.self_ns, s.total_ns), reverse=True)
        return result

    def filter(self: _P, *, idle: bool = True, gil_only: bool = False) -> _P:
        """A copy keeping only some samples: idle=False drops samples of blocked threads
        (wall mode; waiting asyncio tasks stay), gil_only=True keeps only samples whose thread
        held the GIL."""
        gil = FLAG_GIL_KNOWN | FLAG_HAS_GIL
        # Waiting asyncio tasks (--async) are what wall mode asks for, not a blocked thread.
        tasks = {r.serial for r in self.thread_table if r.task_track}
        drop = [
            i
            for i, tag in enumerate(self._row_words(THREAD_AND_FLAGS_WORD))
            if (not idle and (tag >> SERIAL_BITS) & FLAG_IDLE and tag & SERIAL_MASK not in tasks)
            or (gil_only and ((tag >> SERIAL_BITS) & gil) != gil)
        ]
        # What is left out stays in the threads' figures (thread_tallies): the run's samples,
        # GIL and idle shares do not change because the profile shows fewer of them.
        left = {str(k): list(v[:5]) for k, v in self.metadata.get("left_out_threads", {}).items()}
        dropped = set(drop)
        for serial, c in self._tally(dropped.__contains__).items():
            acc = left.setdefault(str(serial), [0, 0, 0, 0, 0])
            left[str(serial)] = [int(a) + b for a, b in zip(acc, c[:5])]
        metadata = {
            **self.metadata,
            "filtered_out": self._samples_in(drop) + int(self.metadata.get("filtered_out", 0)),
        }
        if left:
            metadata["left_out_threads"] = left
            why = list(self.metadata.get("left_out_why", []))
            for reason, on in (("blocked", not idle), ("without the GIL", gil_only)):
                if on and reason not in why:
                    why.append(reason)
            metadata["left_out_why"] = why
        rows, folds = self._without(drop)
        return replace(self, rows=rows, folds=folds, _samples=None, metadata=metadata)

    def drop_root_frames(self, is_runner: Callable[[Frame], bool]) -> None:
        """Remove the leading (root-side) frames for which `is_runner` holds from every stack.

        The CLI uses it to hide its own frames (runpy, spprof.cli) above the program's
        `<module>`, so profiles look as if the program had been run by `python` itself.
        """
        table = self.frame_table
        new_stacks = []
        for ids in self.stacks:
            k = 0
            while k < len(ids) - 1 and is_runner(table[ids[k]]):
                k += 1
            new_stacks.append(ids[k:] if k else ids)
        self.stacks = new_stacks
        self._samples = None

    def drop_profiler_samples(
        self,
        is_profiler: Callable[[Frame], bool],
        anywhere: Optional[Callable[[Frame], bool]] = None,
    ) -> int:
        """Drop the samples whose running Python frame is the profiler's own, or that have a
        frame `anywhere` accepts at any depth (profiler code that never calls the program's,
        so whatever runs below it, a dataclass __init__ or a lock, is the profiler's too);
        return how many.

        Timers run from inside start() until inside stop(), so a sample can land in spprof's
        own Python code (start/stop, the thread hook, the CLI runner). That time is the
        profiler's, not the program's; py-spy, sampling from outside, never shows it either.
        """
        table = self.frame_table
        verdict: dict[int, bool] = {}  # per frame id: stacks share their running frames
        inside: dict[int, bool] = {}
        own: set[int] = set()
        for stack_id, ids in enumerate(self.stacks):
            running = next((i for i in reversed(ids) if not table[i].is_native), None)
            if running is None:
                continue
            if running not in verdict:
                verdict[running] = is_profiler(table[running])
            if verdict[running]:
                own.add(stack_id)
                continue
            if anywhere is None:
                continue
            for i in ids:
                v = inside.get(i)
                if v is None:
                    v = inside[i] = not table[i].is_native and anywhere(table[i])
                if v:
                    own.add(stack_id)
                    break
        return self._drop_stacks(own)

    def drop_stacks_if(self, predicate: Callable[[list[Frame]], bool]) -> int:
        """Drop the samples whose stack (its frames, root first) `predicate` accepts; return
        how many."""
        table = self.frame_table
        own = {
            stack_id
            for stack_id, ids in enumerate(self.stacks)
            if predicate([table[i] for i in ids])
        }
        return self._drop_stacks(own)

    def _drop_stacks(self, own: set[int]) -> int:
        if not own:
            return 0
        drop = [i for i, stack_id in enumerate(self._row_words(STACK_WORD)) if stack_id in own]
        return self.drop_rows(drop)

    # Row filtering at C speed: stop() runs drop_profiler_samples on every session, and a
    # Python unpack/pack per row cost 20-25 ms at 100,000 rows (the stop() target is 50 ms).
    def _row_words(self, word: int) -> list[int]:
        """One uint32 word of every row: STACK_WORD or THREAD_AND_FLAGS_WORD (_rows.py)."""
        return memoryview(self.rows).cast("I")[word::ROW_WORDS].tolist()

    def drop_rows(self, drop: list[int]) -> int:
        """Remove the rows at the (ascending) indices in `drop` (row indices, as _row_words
        gives them); return the samples they held."""
        if not drop:
            return 0
        dropped = self._samples_in(drop)
        self.rows, self.folds = self._without(drop)
        self._samples = None
        return dropped

    def _samples_in(self, rows: list[int]) -> int:
        get = self.folds.get
        return sum(get(i, 1) for i in rows) if self.folds else len(rows)

    def _without(self, drop: list[int]) -> tuple[bytes, dict[int, int]]:
        """The rows minus those at the (ascending) indices in `drop`, and the folds
        renumbered to match."""
        if not drop:
            return self.rows, self.folds
        size, rows, parts, start = ROW.size, self.rows, [], 0
        for i in drop:
            parts.append(rows[start * size : i * size])
            start = i + 1
        parts.append(rows[start * size :])
        folds: dict[int, int] = {}
        if self.folds:
            k = 0  # rows dropped before row i: it moves down by k
            for i in sorted(self.folds):
                while k < len(drop) and drop[k] < i:
                    k += 1
                if k == len(drop) or drop[k] != i:
                    folds[i - k] = self.folds[i]
        return b"".join(parts), folds
