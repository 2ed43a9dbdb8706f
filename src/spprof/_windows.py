"""Windows on a running session: a Profiler block or @profile call inside a session.

There is one sampling engine per process. When a session already runs (the CLI's, the pytest
plugin's, another Profiler's), a Profiler that starts opens a window instead of a second
session: it notes the time (the clock the samples are stamped with) and, at its end, takes
the session's samples stamped within [start, end] (`_ext.window_export`, which drains the
rings first), optionally only the calling thread's. The session keeps every sample, so its
own profile is unchanged; windows nest and overlap freely, since a window is only a time
range (and a thread) read from the same store.

A window cannot change how the engine samples: it uses the session's interval, mode, timer
and native setting. Settings asked for that differ are said once per process and setting on
stderr, and recorded in the window profile's metadata (window.settings_asked / settings_used).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional

from . import _ext, _stderr
from ._config import ValidConfig
from ._model import ThreadRecord
from ._profile import Profile
from ._rows import FLAG_ON_CPU

# Profiler(thread=...): None (every thread) or "current" (the thread that opens the window).
THREAD_CHOICES = (None, "current")

_said: set[tuple[str, str]] = set()  # (setting, asked) pairs already said on stderr
_said_lock = threading.Lock()


def check_thread(thread: Optional[str]) -> Optional[str]:
    if thread not in THREAD_CHOICES:
        raise ValueError(f"thread must be None (every thread) or 'current', got {thread!r}")
    return thread


def check_labels(labels: Optional[Mapping[str, str]]) -> dict[str, str]:
    """labels={"route": "/x"}: str keys and values, else a clear exception."""
    if labels is None:
        return {}
    if not isinstance(labels, Mapping):
        raise TypeError(f"labels must be a mapping of str to str, got {type(labels).__name__}")
    out: dict[str, str] = {}
    for k, v in labels.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise TypeError(f"labels must map str to str, got {k!r}: {v!r}")
        if not k:
            raise ValueError("a label's name must not be empty")
        out[k] = v
    return out


def settings_differences(asked: Mapping[str, Any], session: ValidConfig) -> dict[str, Any]:
    """The settings a window asked for that the session does not have: {name: session's}."""
    used = session_settings(session)
    return {k: used[k] for k, v in asked.items() if k in used and v != used[k]}


def session_settings(session: ValidConfig) -> dict[str, Any]:
    return {
        "interval_ms": session.interval_ms,
        "mode": session.mode,
        "native": session.native,
        "timer": session.timer,
        "interpreter_frames": session.interpreter_frames,
        "memory_limit_mb": session.memory_limit_mb,
        "max_overhead_pct": session.max_overhead_pct,
    }


def say_differences(asked: Mapping[str, Any], differ: Mapping[str, Any]) -> None:
    """One stderr line per setting and asked value, once per process (a decorated function
    called per request says it once, not per call)."""
    fresh = []
    with _said_lock:
        for name, used in differ.items():
            key = (name, repr(asked[name]))
            if key not in _said:
                _said.add(key)
                fresh.append(f"{name}={asked[name]!r} (the session's: {used!r})")
    if fresh:
        _stderr.say(
            "spprof: a profile inside a running session is a window on it and uses the "
            "session's settings: asked " + ", ".join(fresh)
        )


@dataclass
class Window:
    """One window: opened by a Profiler that found a session running, closed by its stop()."""

    session: ValidConfig  # the session's settings (what the window uses)
    generation: int  # which session (a window cannot span two)
    asked: dict[str, Any]  # settings the caller passed explicitly
    thread: Optional[str] = None
    labels: dict[str, str] = field(default_factory=dict)
    # A window of a fixed length (the endpoint's, a control window's) ends at start + length
    # even when it is closed later: a thread that serves it late (no core, the GIL) must not
    # lengthen it. 0: it ends at its close (a Profiler block).
    length_ns: int = 0
    start_ns: int = 0
    native_tid: int = 0  # 0: every thread
    differ: dict[str, Any] = field(default_factory=dict)

    def open(self) -> None:
        self.differ = settings_differences(self.asked, self.session)
        if self.differ:
            say_differences(self.asked, self.differ)
        self.native_tid = threading.get_native_id() if self.thread == "current" else 0
        self.start_ns = _ext.monotonic_ns()

    def close(
        self,
        metadata: dict[str, Any],
        tidy: Callable[[Profile], Profile],
    ) -> Profile:
        """The window's Profile: the session's samples in [start, now] (of its thread), or
        [start, start + length] for a fixed length closed late."""
        end_ns = _ext.monotonic_ns()
        if self.length_ns > 0:
            end_ns = min(end_ns, self.start_ns + self.length_ns)
        raw = _ext.window_export(self.start_ns, end_ns, self.native_tid)
        meta = dict(metadata)
        window: dict[str, Any] = {
            "start_ns": self.start_ns,
            "end_ns": end_ns,
            "thread": self.native_tid or None,
            "settings_used": session_settings(self.session),
        }
        if self.differ:
            window["settings_asked"] = {k: self.asked[k] for k in self.differ}
        meta["window"] = window
        profile = Profile.from_native(raw, self.session.mode, self.session.interval_ms, meta)
        profile.thread_table = _cpu_in_window(profile)
        put_labels(profile, self.labels)
        profile.stats.update(
            {
                "timer": self.session.timer,
                "window": True,
                "window_thread": self.native_tid,
                "window_settings_differ": sorted(self.differ),
            }
        )
        return tidy(profile)  # as the session's own profile (_session._tidy)

    def orphaned(self, metadata: dict[str, Any]) -> Profile:
        """The window's session stopped before the window did (another thread stopped it, or
        this is a forked child): an empty profile that says so, never an exception in the
        program's block."""
        end_ns = _ext.monotonic_ns()
        say_once(
            ("session_ended", ""),
            "spprof: a profile window ended after its session: it has no samples "
            "(they went with the session's profile)",
        )
        meta = {**metadata, "window": {"start_ns": self.start_ns, "end_ns": end_ns}}
        profile = Profile(
            interval_ms=self.session.interval_ms,
            mode=self.session.mode,
            duration_ns=max(0, end_ns - self.start_ns),
            start_ns=self.start_ns,
            frame_table=[],
            stacks=[],
            rows=b"",
            thread_table=[],
            dropped_count=0,
            stats={"window": True, "window_session_ended": True},
            metadata=meta,
        )
        put_labels(profile, self.labels)
        return profile


def _cpu_in_window(profile: Profile) -> list[ThreadRecord]:
    """A thread's CPU time in a window: its on-CPU sampled weight there (its clock is read
    for the session, not at the window's bounds; the exported figure is the session's)."""
    on_cpu: dict[int, int] = {}
    for _, weight, _, serial, flags in profile.iter_rows():
        if flags & FLAG_ON_CPU:
            on_cpu[serial] = on_cpu.get(serial, 0) + weight
    return [replace(t, cpu_ns=on_cpu.get(t.serial, 0)) for t in profile.thread_table]


def say_once(key: tuple[str, str], text: str) -> None:
    with _said_lock:
        if key in _said:
            return
        _said.add(key)
    _stderr.say(text)


def put_labels(profile: Profile, labels: Mapping[str, str]) -> None:
    """metadata["labels"], and the labels in the profile's name (speedscope, HTML titles)."""
    if labels:
        profile.metadata["labels"] = dict(labels)
        shown = ", ".join(f"{k}={v}" for k, v in labels.items())
        profile.metadata["name"] = f"{profile.metadata.get('name', 'spprof profile')} [{shown}]"


def only_thread(profile: Profile, native_tid: int) -> Profile:
    """A Profiler(thread="current") that ran its own session: only that thread's samples."""
    keep = {t.serial for t in profile.thread_table if t.native_id == native_tid}
    drop = [
        i for i, (_, _, _, serial, _, _) in enumerate(profile.iter_counted()) if serial not in keep
    ]
    profile.drop_rows(drop)
    profile.metadata["thread"] = native_tid
    return profile
