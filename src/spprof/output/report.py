"""The terminal summary of a profile (`spprof record`, `spprof report`): fits 80 columns."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Optional

from .native_names import short_name

if TYPE_CHECKING:
    from .._model import Frame, ProfileData


# Thread rows in the summary: the busiest; the rest are one line.
THREAD_ROWS = 12
# The function column: at most this wide, except that file:line is never cut.
LABEL_WIDTH = 62
# threading's start-up frames: under every thread's stack, so their total time is the thread's
# and they would fill the total-time table with no news.
_THREAD_STARTUP = frozenset({"_bootstrap", "_bootstrap_inner", "run"})
# Effective rate below this share of the asked rate: the summary says what capped it.
_RATE_NOTE_BELOW = 0.8
# Less CPU time than this tells nothing reliable about the rate.
_RATE_MIN_CPU_NS = 200_000_000


def _short_path(path: str, width: int) -> str:
    """`path` relative to the current directory if under it, with leading directories
    replaced by ".../" until it fits `width`; the file name itself is never cut."""
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except (ValueError, OSError):  # OSError: the current directory was deleted
        pass
    if len(path) <= width:
        return path
    parts = path.split(os.sep)
    for k in range(1, len(parts) - 1):
        short = os.path.join("...", *parts[k:])
        if len(short) <= width:
            return short
    return os.path.join("...", parts[-1])


def _is_thread_startup(filename: str, name: str) -> bool:
    return name in _THREAD_STARTUP and os.path.basename(filename) == "threading.py"


def _label(qualname: str, filename: str, line: int) -> str:
    """`qualname (file:line)`, within LABEL_WIDTH when the directory part can be shortened
    enough; the function name, the file name and the line are never cut."""
    if not filename:
        return qualname
    suffix = f":{line}"
    where = _short_path(filename, LABEL_WIDTH - len(qualname) - 3 - len(suffix))
    return f"{qualname} ({where}{suffix})"


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:.2f}s"


def _count(n: int, noun: str) -> str:
    """'1 thread', '2 threads' (the noun's last word takes the s)."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def effective_rate(profile: ProfileData) -> Optional[float]:
    """Samples per second of thread CPU time the timers delivered (None: not measurable).

    A CPU-time timer fires on the kernel's tick, so `-i 1` on a HZ=250 kernel gives ~250
    signals per CPU-second, not 1000. Counted from the session's signals and the CPU time of
    every thread it watched.
    """
    signals = profile.stats.get("signals")
    if not signals:
        return None
    own = int(profile.metadata.get("pid") or 0)  # the session's process, not its children
    cpu_ns = sum(t.cpu_ns for t in profile.threads if t.pid in (0, own))
    cpu_ns += profile.stats.get("threads_unsampled_cpu_ns") or 0
    if cpu_ns < _RATE_MIN_CPU_NS:
        return None
    return float(signals) * 1e9 / cpu_ns


def rate_cause(stats: Mapping[str, Any], rate: Optional[float] = None) -> str:
    """Why the timers delivered fewer signals per CPU second than asked, from the counters.

    Two causes, told apart by what they leave behind: expiries that fell due in a thread's last
    stretch without a scheduler tick (short threads; recorded at the thread's end as
    thread-end samples), and several expiries per tick (an interval below the tick: overruns
    keep the weights, not the signal count).
    """
    signals = stats.get("signals") or 0
    overruns = stats.get("timer_overruns") or 0
    owed = stats.get("thread_end_expiries") or 0
    if owed and owed >= overruns:
        return f"short threads: {owed:,} expiries fell due after their last tick"
    if overruns > 0.2 * signals:
        cause = "the kernel tick (CONFIG_HZ) fires fewer signals; overruns keep the weights"
        if rate:
            # The weights stay right but land on the line running at the signal: a loaded
            # machine's late expiries (one sample of 110 ms measured) place lines that coarsely.
            cause += f", each sample {1000 / rate:.0f} ms of CPU on average"
        return cause
    return "threads that ran less than an interval or had no timer of their own (see stats())"


def _open_hint(fmt: str) -> str:
    from .. import output  # OPEN_HINTS lives beside FORMATS (imported late: no cycle)

    hints: dict[str, str] = getattr(output, "OPEN_HINTS", {})
    return hints.get(fmt, "")


def summary(
    profile: ProfileData,
    top: int = 10,
    output: str = "",
    fmt: str = "",
    threads_of: Optional[ProfileData] = None,
) -> str:
    """The summary of `profile`. `threads_of`: the profile before the CLI dropped idle or
    GIL-less samples, whose thread table (IDLE%, GIL%) and rates are the run's own."""
    run = threads_of if threads_of is not None else profile
    lines: list[str] = []
    n = profile.sample_count
    total = profile.total_weight_ns or 1
    if run.sample_count == 0:
        why = "used less CPU time than" if profile.mode == "cpu" else "ended within"
        lines.append(
            f"spprof: no samples over {_seconds(profile.duration_ns)} ({profile.mode} mode, "
            f"{profile.interval_ms:g} ms interval): the program {why} one interval"
        )
        _written(lines, output, fmt)
        return "\n".join(lines)
    # The run's samples, as the thread table counts them (ProfileData.thread_tallies); those a
    # filter left out are said apart.
    left_out = profile.left_out_count
    lines.append(
        f"spprof: {n + left_out} samples over {_seconds(profile.duration_ns)} "
        f"({profile.mode} mode, {profile.interval_ms:g} ms interval, "
        f"timer {profile.stats.get('timer', '?')}), {profile.dropped_count} dropped"
    )
    if left_out:
        lines.append(_left_out_note(profile, n, left_out))
    rate = effective_rate(run)
    # An interval the overhead budget widened is no tick's doing: no note then.
    if rate is not None and profile.interval_ms > 0 and not profile.stats.get("interval_changes"):
        asked = 1000.0 / profile.interval_ms
        if rate < _RATE_NOTE_BELOW * asked:
            lines.append(
                f"  note: {rate:.0f} samples/s per CPU second, not {asked:.0f}: "
                + rate_cause(run.stats, rate)
            )
    if profile.dropped_count:
        lines.append(
            "  warning: samples were dropped (see spprof.stats(): ring full / memory limit)"
        )
    unknown = profile.stats.get("unknown_frames", 0)
    if unknown:
        lines.append(f"  note: {unknown} frames could not be resolved and show as <unknown>")
    lost_fds = profile.stats.get("fds_lost", 0)
    if lost_fds:
        lines.append(
            f"  note: the program closed or reused {lost_fds} descriptor(s) spprof held above its "
            "own numbers: spprof read no /proc file after that (threads without a Python state "
            "not scanned, wall mode's runnable state unknown)"
        )
    if n == 0:
        lines.append(
            "  note: no sample is left in the profile: wall mode leaves idle samples out "
            "unless --idle, --gil keeps only samples holding the GIL"
        )

    lines.append("")
    # Several processes (--subprocesses): a PID column beside the threads' names.
    processes = any(t.pid for t in run.threads)
    pid_head = f"{'PID':>7} " if processes else ""
    lines.append(
        f"  {'THREAD':<22} {pid_head}{'TID':>7} {'SAMPLES':>7} {'CPU TIME':>8} {'CPU%':>6} "
        f"{'GIL%':>6} {'IDLE%':>6}"
    )
    duration = profile.duration_ns or 1
    ranked_threads = sorted(run.threads, key=lambda t: t.weight_ns, reverse=True)
    for t in ranked_threads[:THREAD_ROWS]:
        name = t.name if len(t.name) <= 22 else t.name[:19] + "..."
        pid = f"{t.pid:>7} " if processes else ""
        cpu_pct = 100.0 * t.cpu_ns / duration
        gil = "-" if t.gil_fraction is None else f"{100.0 * t.gil_fraction:.1f}%"
        idle = f"{100.0 * t.idle_fraction:>5.1f}%"
        if t.signal_blocked:  # not sampled: its CPU time is real, no share of it is known
            gil = idle = "-"
        lines.append(
            f"  {name:<22} {pid}{t.native_thread_id:>7} {t.samples:>7} "
            f"{_seconds(t.cpu_ns):>8} {cpu_pct:>5.1f}% {gil:>6} {idle:>6}"
        )
    rest = ranked_threads[THREAD_ROWS:]
    if rest:
        lines.append(
            f"  ... and {_count(len(rest), 'more thread')}, "
            f"{_seconds(sum(t.weight_ns for t in rest))} "
            f"sampled, {_seconds(sum(t.cpu_ns for t in rest))} CPU"
        )
    unsampled = profile.stats.get("threads_unsampled", 0)
    if unsampled:
        cpu = profile.stats.get("threads_unsampled_cpu_ns", 0)
        missing = profile.stats.get("cpu_unsampled_threads_ns", cpu)
        # A thread whose random timer phase drew no expiry is the other side of those that
        # drew one more than their CPU: its CPU is in the profile's total, only not named.
        why = ""
        if missing < cpu:
            held = _seconds(cpu - missing)
            why = f"; {held} of it in other threads' weights (random timer phase)"
        lines.append(
            f"  ({_count(unsampled, 'thread')} ended without a sample, {_seconds(cpu)} CPU: "
            f"not listed{why})"
        )
    thread_end = profile.stats.get("thread_end_samples", 0)
    if thread_end:
        lines.append(
            f"  ({_count(thread_end, 'thread-end sample')}, "
            f"{_seconds(profile.stats.get('thread_end_ns', 0))} CPU: used after a thread's last "
            "sample, on its last stack)"
        )
    lines.extend(_thread_coverage_lines(run))
    refused = profile.stats.get("threads_refused", 0)
    if refused:
        lines.append(
            f"  warning: {refused:,} threads were not sampled: more than "
            f"{profile.stats.get('threads_alive_limit', '?')} alive at once"
        )

    funcs = profile.aggregate()
    for title, key in (("self", "self_ns"), ("total", "total_ns")):
        lines.append("")
        lines.append(f"  Top functions by {title} time")
        lines.append(f"  {'%':>6} {'TIME':>8}  FUNCTION (FILE:LINE)")
        ranked = sorted(funcs, key=lambda f: getattr(f, key), reverse=True)
        if key == "total_ns":
            ranked = [f for f in ranked if not _is_thread_startup(f.filename, f.function_name)]
        for f in ranked[:top]:
            value = getattr(f, key)
            if value == 0:
                break
            line = f.hottest_total_line if key == "total_ns" else f.hottest_line
            label = _label(short_name(f.qualname) if f.is_native else f.qualname, f.filename, line)
            lines.append(f"  {100.0 * value / total:>5.1f}% {_seconds(value):>8}  {label}")
    lines.extend(_task_lines(profile, top))
    lines.extend(_greenlet_lines(profile, top))
    if output:
        lines.append("")
    _written(lines, output, fmt)
    return "\n".join(lines)


def _task_lines(profile: ProfileData, top: int) -> list[str]:
    """--async in wall mode: the tasks by wall time (running, from their thread's samples, and
    waiting, from their loop's task track) and the lines tasks waited on."""
    from .._async_census import TRACK_SUFFIX
    from .._async_view import innermost_task, is_asyncio_file

    tracks = {
        r.serial for r in profile.thread_table if r.task_track and r.name.endswith(TRACK_SUFFIX)
    }
    if not tracks:
        return []

    table = profile.frame_table
    tasks: dict[str, list[int]] = {}  # task -> [running ns, waiting ns]
    awaits: dict[int, int] = {}  # frame id of the awaiting line -> waiting ns
    for (serial, stack), (_, weight) in profile.stack_weights().items():
        ids = profile.stacks[stack]
        found = innermost_task(table, ids)
        if found is None:
            continue  # not a task's
        at, name = found
        times = tasks.setdefault(name, [0, 0])
        if serial not in tracks:
            times[0] += weight
            continue
        times[1] += weight
        # The innermost line of the program's own: asyncio's awaits are below it.
        own = [fid for fid in ids[at + 1 :] if not is_asyncio_file(table[fid].filename)]
        if own:
            awaits[own[-1]] = awaits.get(own[-1], 0) + weight
    return _waiting_tables(
        ("asyncio tasks", "task", "TASK (its name, or its outermost coroutine)"),
        tasks,
        awaits,
        table,
        top,
    )


def _waiting_tables(
    names: tuple[str, str, str],
    times: dict[str, list[int]],
    waits: dict[int, int],
    table: list[Frame],
    top: int,
) -> list[str]:
    """The two tables of --async and --greenlets: each task (greenlet) by wall time, running
    and waiting, and the lines they waited on. names: (plural, singular, column heading)."""
    many, one, heading = names
    lines = ["", f"  Top {many} by wall time (each waiting {one} counts its own time)"]
    lines.append(f"  {'TOTAL':>8} {'RUNNING':>8} {'WAITING':>8}  {heading}")
    for name, (running, waiting) in sorted(times.items(), key=lambda kv: -sum(kv[1]))[:top]:
        cells = " ".join(f"{_seconds(ns):>8}" for ns in (running + waiting, running, waiting))
        lines.append(f"  {cells}  {name}")
    lines += [
        "",
        f"  Top lines {many.split()[-1]} waited on",
        f"  {'WAITING':>8}  FUNCTION (FILE:LINE)",
    ]
    for fid, ns in sorted(waits.items(), key=lambda kv: -kv[1])[:top]:
        f = table[fid]
        label = _label(f.qualname or f.function_name, f.filename, f.lineno)
        lines.append(f"  {_seconds(ns):>8}  {label}")
    return lines


def _greenlet_lines(profile: ProfileData, top: int) -> list[str]:
    """--greenlets in wall mode: the greenlets by wall time (waiting, from their thread's
    greenlet track; running, from the thread's samples rooted at the same function) and the
    lines they waited on."""
    from .._greenlet_census import GREENLET_PREFIX, TRACK_SUFFIX

    tracks = {
        r.serial: r.ident
        for r in profile.thread_table
        if r.task_track and r.name.endswith(TRACK_SUFFIX)
    }
    if not tracks:
        return []
    table = profile.frame_table
    greenlets: dict[str, list[int]] = {}  # FUNCTION -> [running ns, waiting ns]
    waits: dict[int, int] = {}  # frame id of the line it switched out on -> waiting ns
    running: dict[tuple[int, str], int] = {}  # (thread ident, outermost qualname) -> ns
    idents = set(tracks.values())
    ident_of = {r.serial: r.ident for r in profile.thread_table}
    for (serial, stack), (_, weight) in profile.stack_weights().items():
        ids = profile.stacks[stack]
        if serial in tracks:
            head = table[ids[0]].function_name
            if not head.startswith(GREENLET_PREFIX) or len(ids) < 2:
                continue
            greenlets.setdefault(head[len(GREENLET_PREFIX) :], [0, 0])[1] += weight
            # The innermost line of the program's own: gevent's waits are below it.
            own = [fid for fid in ids[1:] if not _is_gevent(table[fid].filename)] or [ids[-1]]
            waits[own[-1]] = waits.get(own[-1], 0) + weight
        elif ident_of.get(serial) in idents:
            python = [
                fid
                for fid in ids
                if not table[fid].is_native and not _is_gevent(table[fid].filename)
            ]
            if python:
                f = table[python[0]]
                key = (ident_of[serial], f.qualname or f.function_name)
                running[key] = running.get(key, 0) + weight
    for (_, name), ns in running.items():
        if name in greenlets:  # a greenlet runs with its own function outermost
            greenlets[name][0] += ns
    heading = "GREENLET (outermost function)"
    return _waiting_tables(("greenlets", "greenlet", heading), greenlets, waits, table, top)


def _is_gevent(filename: str) -> bool:
    """A file of gevent's package (as the profiled process named it)."""
    return f"{os.sep}gevent{os.sep}" in filename


def _left_out_note(profile: ProfileData, kept: int, left_out: int) -> str:
    why = profile.metadata.get("left_out_why", [])
    what = " or ".join(f"{w} threads" if w == "blocked" else w for w in why) or "filtered"
    keeps = {"blocked": "--idle", "without the GIL": "without --gil"}
    how = ", ".join(keeps[w] for w in why if w in keeps)
    return f"  {kept} in the profile, {left_out} left out (samples of {what}" + (
        f"; {how} keeps them)" if how else ")"
    )


def cpu_balance_line(stats: Mapping[str, Any]) -> Optional[str]:
    """One line: the process's CPU time beside the profile's and where the rest went
    (docs/usage.md, "The CPU balance"); None when the profile has no balance (older files)."""
    from .._stats import CpuBalance

    b = CpuBalance.from_stats(stats)
    if b is None:
        return None
    parts = [f"profile {_seconds(b.profile_ns)}"]
    for key, label in CpuBalance.PARTS:
        value = getattr(b, key)
        if value:
            parts.append(f"{label} {_seconds(value)}")
    sign = "-" if b.unaccounted_ns < 0 else ""
    parts.append(f"not accounted {sign}{_seconds(abs(b.unaccounted_ns))}")
    return f"  CPU balance: process {_seconds(b.process_ns)} = " + " + ".join(parts)


def _thread_coverage_lines(profile: ProfileData) -> list[str]:
    """Threads that block the sampling signal, by name; the platform's limit, if any."""
    lines: list[str] = []
    blocked = [t for t in profile.threads if t.signal_blocked]
    if blocked:
        names = ", ".join(
            f'"{t.label}" (tid {t.native_thread_id}, {_seconds(t.cpu_ns)} CPU)' for t in blocked[:5]
        )
        more = f" and {len(blocked) - 5} more" if len(blocked) > 5 else ""
        lines.append(f"  note: not sampled, they block the sampling signal: {names}{more}")
    if profile.stats.get("os_threads_scan") == "unsupported":
        lines.append(
            "  note: threads without a Python state are not sampled on this platform"
            " (Linux and macOS only)"
        )
    balance = cpu_balance_line(profile.stats)
    if balance is not None:
        lines.append(balance)
    children = children_line(profile.stats, profile.metadata)
    if children is not None:
        lines.append(children)
    return lines


def children_line(stats: Mapping[str, Any], metadata: Mapping[str, Any]) -> Optional[str]:
    """Child processes' CPU time over the session: in this profile (--subprocesses) or not
    (spprof samples its own process); None when there was none (or an older file)."""
    cpu = int(stats.get("children_cpu_ns") or 0)
    forked = int(stats.get("children_forked") or 0)
    if "subprocesses_profiled" in stats:
        return _subprocesses_line(stats, metadata, cpu)
    if cpu < 5_000_000 and forked == 0:
        return None  # a `uname` child: not worth a line
    count = f"{forked} forked, " if forked else ""
    return (
        f"  child processes: {count}{_seconds(cpu)} CPU (those that ended), not in this profile:"
        " spprof samples only the process it runs in (--subprocesses adds them)"
    )


def _pids(pids: Any) -> str:
    shown = ", ".join(str(p) for p in list(pids)[:5])
    return shown + (f" and {len(pids) - 5} more" if len(pids) > 5 else "")


def _subprocesses_line(stats: Mapping[str, Any], metadata: Mapping[str, Any], cpu: int) -> str:
    profiled = int(stats.get("subprocesses_profiled") or 0)
    in_profile = int(stats.get("subprocesses_cpu_ns") or 0)
    parts = [f"{profiled} profiled ({_seconds(in_profile)} CPU, in this profile)"]
    running = list(metadata.get("subprocesses_running") or [])
    if running:
        parts.append(
            f"{len(running)} still running (pid {_pids(running)}): not in this profile, "
            f"each writes PID.spprof into {metadata.get('subprocesses_dir', '?')} as it ends"
        )
    lost = list(metadata.get("subprocesses_lost") or [])
    if lost:
        parts.append(f"{len(lost)} ended without a profile (pid {_pids(lost)}: killed?)")
    rest = cpu - in_profile
    if rest >= 5_000_000:
        parts.append(
            f"{_seconds(rest)} CPU of ended children not sampled (their start-up before "
            "spprof, or children that run no Python)"
        )
    return "  child processes: " + "; ".join(parts)


def _written(lines: list[str], output: str, fmt: str) -> None:
    if not output:
        return
    lines.append(f"  Profile written to {output} ({fmt})")
    hint = _open_hint(fmt)  # "open it with ...": a sentence of its own here
    if hint:
        lines.append(f"  {hint[:1].upper()}{hint[1:]}")
