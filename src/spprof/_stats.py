"""Typed session counters: SessionStats, built in one place from the extension's stats dict.

spprof.stats() returns a SessionStats. Its fields are the counters docs/usage.md lists; a
counter the running engine or platform does not have is None. It is also a read-only
mapping of the counters present (stats()["timer"], .get, `in`, dict(stats)), as stats() was
a dict before, and as_dict() gives exactly what the extension reported.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Optional


@dataclass(frozen=True)
class SessionStats(Mapping[str, Any]):
    """Counters of the running session, or of the last one (docs/usage.md, stats())."""

    timer: str
    samples_captured: int
    samples_dropped: int
    dropped_ring_full: int
    dropped_busy: int
    dropped_memory_limit: int
    walk_errors: int
    walk_faults: int
    samples_deferred: int
    native_faults: int
    samples_in_subinterpreters: int
    samples_unguarded: int
    fault_guard_retaken: int
    truncated_stacks: int
    frame_layout: str
    # Present only for some sessions, engines or platforms (docs/usage.md, stats()).
    signals: Optional[int] = None
    foreign_signals: Optional[int] = None
    timer_overruns: Optional[int] = None
    timers_active: Optional[int] = None
    timer_failures: Optional[int] = None
    signals_on_unsampled_threads: Optional[int] = None
    threads_sampled: Optional[int] = None
    threads_skipped: Optional[int] = None
    total_suspend_ns: Optional[int] = None
    max_suspend_ns: Optional[int] = None
    mach_walk_errors: Optional[int] = None
    threads_seen: Optional[int] = None
    threads_ended: Optional[int] = None
    sampling_signal: Optional[str] = None
    threads_unsampled: Optional[int] = None
    threads_unsampled_cpu_ns: Optional[int] = None
    threads_refused: Optional[int] = None
    threads_alive_max: Optional[int] = None
    threads_alive_limit: Optional[int] = None
    thread_memory_bytes: Optional[int] = None
    handler_retaken: Optional[int] = None
    # 1 when the program took SIGPROF or ITIMER_PROF from the itimer fallback (docs/reliability.md)
    sig_itimer_yielded: Optional[int] = None
    thread_end_samples: Optional[int] = None
    thread_end_expiries: Optional[int] = None
    thread_end_ns: Optional[int] = None
    off_cpu_skipped: Optional[int] = None
    threads_found_by_scan: Optional[int] = None
    timer_attach_failures: Optional[int] = None
    # threads that ended between being found and getting their CPU timer (not failures)
    threads_ended_before_armed: Optional[int] = None
    drains: Optional[int] = None
    records_drained: Optional[int] = None
    ring_rewinds: Optional[int] = None
    ring_touched_bytes: Optional[int] = None
    idle_samples_folded: Optional[int] = None
    idle_folded_over_limit: Optional[int] = None
    sample_rows: Optional[int] = None
    records_unknown_thread: Optional[int] = None
    records_root_shared: Optional[int] = None
    records_without_base: Optional[int] = None
    unknown_frames: Optional[int] = None
    distinct_stacks: Optional[int] = None
    distinct_frames: Optional[int] = None
    code_objects: Optional[int] = None
    code_objects_kept: Optional[int] = None
    samples_stored: Optional[int] = None
    memory_bytes: Optional[int] = None
    python_memory_bytes: Optional[int] = None  # the censuses' rows (in memory_bytes)
    memory_limit_bytes: Optional[int] = None
    mode: Optional[str] = None
    capture_ns: Optional[int] = None
    drain_ns: Optional[int] = None
    drain_cpu_ns: Optional[int] = None  # the drain's CPU in drain_ns (less: it waited for a core)
    effective_interval_ms: Optional[float] = None
    max_overhead_pct: Optional[float] = None
    overhead_pct: Optional[float] = None
    interval_changes: Optional[int] = None
    signal_cost_ns: Optional[int] = None
    native_unwinds: Optional[int] = None
    native_fp_steps: Optional[int] = None
    native_leaf_steps: Optional[int] = None
    native_cached_steps: Optional[int] = None  # CFI steps by a row an earlier walk kept
    eval_ranges: Optional[int] = None
    modules_without_cfi: Optional[int] = None
    rust_names_over_limit: Optional[int] = None  # left mangled: past the demangler's limits
    # Module files read for names: by the drain thread without the GIL, or with it (none had
    # read them first: a window's end, stop(), a thread's end), and the passes that waited.
    symbol_files_read_off_gil: Optional[int] = None
    symbol_file_read_ns: Optional[int] = None
    symbol_files_read_under_gil: Optional[int] = None
    drains_waiting_for_files: Optional[int] = None
    native_stop_reasons: Optional[dict[str, int]] = None
    wall_ticks: Optional[int] = None
    wall_missed_ticks: Optional[int] = None
    wall_longest_census_gap_ns: Optional[int] = None
    wall_quiet_skips: Optional[int] = None
    wall_signals_sent: Optional[int] = None
    wall_idle_records: Optional[int] = None
    wall_idle_dropped: Optional[int] = None
    wall_state_probes: Optional[int] = None
    wall_walks: Optional[int] = None
    wall_walks_lost: Optional[int] = None
    wall_passed_over: Optional[int] = None  # a long wait's censuses that read no clock
    samples_in_gc: Optional[int] = None  # None where <GC> frames are not made (macOS)
    # Every OS thread and the CPU balance (docs/usage.md, "The CPU balance").
    os_threads_scan: Optional[str] = None
    threads_native_only: Optional[int] = None
    threads_signal_blocked: Optional[int] = None
    threads_rejoined: Optional[int] = None
    samples_native_threads: Optional[int] = None
    cpu_process_ns: Optional[int] = None
    cpu_profile_ns: Optional[int] = None
    cpu_spprof_threads_ns: Optional[int] = None
    cpu_signal_blocked_ns: Optional[int] = None
    cpu_before_found_ns: Optional[int] = None
    cpu_unsampled_threads_ns: Optional[int] = None
    cpu_ended_between_scans_ns: Optional[int] = None
    cpu_unaccounted_ns: Optional[int] = None
    cpu_sig_given_up_ns: Optional[int] = None
    # Descriptors spprof holds above the program's numbers (docs/reliability.md, "File
    # descriptors"): held now, found to be the program's (lost), /proc reads past the budget.
    fds_held: Optional[int] = None
    fds_lost: Optional[int] = None
    fds_proc_over_budget: Optional[int] = None
    # spprof's threads (since the module loaded) that opened files in a descriptor table of
    # their own, and those the OS refused one (they share the program's, as before).
    fd_tables_own: Optional[int] = None
    fd_tables_refused: Optional[int] = None
    # Counters this version of the Python side has no field for (a newer extension's).
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_native(cls, raw: Mapping[str, Any]) -> SessionStats:
        """The one place the extension's stats dict becomes typed."""
        names = _FIELD_NAMES
        known = {k: v for k, v in raw.items() if k in names}
        if "native_stop_reasons" in known:
            known["native_stop_reasons"] = dict(known["native_stop_reasons"])
        extra = {k: v for k, v in raw.items() if k not in names}
        return cls(**known, extra=extra)

    def as_dict(self) -> dict[str, Any]:
        """The counters present, by name, as the extension reported them."""
        out = {
            f.name: getattr(self, f.name)
            for f in dataclasses.fields(self)
            if f.name != "extra" and getattr(self, f.name) is not None
        }
        out.update(self.extra)
        return out

    @property
    def cpu_balance(self) -> Optional[CpuBalance]:
        """The process's CPU time beside the profile's, and where the rest went."""
        return CpuBalance.from_stats(self)

    def __getitem__(self, key: str) -> Any:
        if key in _FIELD_NAMES:
            value = getattr(self, key)
            if value is not None:
                return value
        elif key in self.extra:
            return self.extra[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.as_dict())

    def __len__(self) -> int:
        return len(self.as_dict())


@dataclass(frozen=True)
class CpuBalance:
    """The process's CPU time from start() to stop() (to now while running), the CPU time in
    the profile, and the difference broken down; `unaccounted_ns` is what remains (sampling
    error, each thread's last partial interval) and may be negative."""

    process_ns: int
    profile_ns: int
    spprof_threads_ns: int  # spprof's own threads, and stop()'s work on its caller
    signal_blocked_ns: int  # threads that block the sampling signal (not sampled)
    before_found_ns: int  # threads' CPU before the scan found them (C threads, up to 250 ms)
    unsampled_threads_ns: int  # threads that ended without a single sample
    ended_between_scans_ns: int  # threads that started and ended between two scans
    unaccounted_ns: int
    sig_given_up_ns: int = 0  # after sampling was given up to the program (it took SIGPROF)

    PARTS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("spprof_threads_ns", "spprof's threads"),
        ("signal_blocked_ns", "threads blocking the signal"),
        ("before_found_ns", "before threads were found"),
        ("unsampled_threads_ns", "threads ended unsampled"),
        ("ended_between_scans_ns", "threads ended between scans"),
        ("sig_given_up_ns", "after the program took SIGPROF"),
    )

    @classmethod
    def from_stats(cls, stats: Mapping[str, Any]) -> Optional[CpuBalance]:
        """From stats() (or a saved profile's stats); None when the session had no balance."""
        if stats.get("cpu_process_ns") is None:
            return None

        def get(key: str) -> int:
            return int(stats.get(key) or 0)

        return cls(
            process_ns=get("cpu_process_ns"),
            profile_ns=get("cpu_profile_ns"),
            spprof_threads_ns=get("cpu_spprof_threads_ns"),
            signal_blocked_ns=get("cpu_signal_blocked_ns"),
            before_found_ns=get("cpu_before_found_ns"),
            unsampled_threads_ns=get("cpu_unsampled_threads_ns"),
            ended_between_scans_ns=get("cpu_ended_between_scans_ns"),
            unaccounted_ns=get("cpu_unaccounted_ns"),
            sig_given_up_ns=get("cpu_sig_given_up_ns"),
        )

    @property
    def accounted_ns(self) -> int:
        """The profile plus every named part: the process's CPU time less what remains."""
        return self.process_ns - self.unaccounted_ns


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(SessionStats)) - {"extra"}
