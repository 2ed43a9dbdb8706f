"""start/stop/is_active/stats, the Profiler context manager and the @profile decorator.

Session-wide concerns that live in Python: argument checking (_config.SessionConfig: bad
input fails before any sampling starts), the threading hook that registers each new thread
on the thread itself, stopping at interpreter exit (so an output path still gets its
profile), and forgetting the session in a forked child. With an output path, the profile is
also written before os._exit / os.exec* (_exit_calls) and when SIGTERM, SIGHUP or SIGQUIT
left at their default action end the process (the exit-signal watcher, as under the CLI).
"""

from __future__ import annotations

import atexit
import functools
import json
import os
import platform
import signal
import sys
import threading
import time
from typing import Any, Callable, Optional, TypeVar

from . import (
    _async_view,
    _censuses,
    _children,
    _control,
    _debug,
    _exit_calls,
    _ext,
    _family_windows,
    _greenlet_view,
    _http,
    _mypyc_names,
    _runner_frames,
    _stderr,
    _subprocesses,
    _windows,
)
from ._config import SessionConfig, ValidConfig
from ._model import Sample
from ._own_threads import OwnThread
from ._profile import Profile
from ._stats import SessionStats
from ._version import __version__
from .output import PathLike, render, write

F = TypeVar("F", bound=Callable[..., Any])

_active: Optional[ValidConfig] = None
_generation = 0  # sessions started so far: a window belongs to one (_windows.Window)
_children_start: Optional[_children.ChildrenMark] = None  # child processes at start()
_lock = threading.Lock()
# start(output_path=...) only: what the session covers, so that stop() undoes just that.
_covers_exit_calls = False
_watches_exit_signals = False
# The exit-signal runner's thread ident once it handles a signal (0 before): from then on the
# runner ends the process, its watcher cannot be joined, and no other thread may finish.
_in_exit_signal = 0
# The profile written before an exec that then failed, and the config to go on with; the
# next stop() puts it in front of the new session's samples.
_before_exec: Optional[tuple[Profile, ValidConfig]] = None
_carried: Optional[Profile] = None
# The running session is this process's part of a --subprocesses family (_subprocesses.py),
# started by spprof, not by the program: a session the program starts takes its place.
_family_child = False
# Held for a whole stop() (stop and write), by whichever thread stops: the exit-signal runner,
# the main thread at interpreter exit, the program. The runner must not end the process while
# another thread writes, nor may interpreter exit go on while the runner writes (a thread
# that wants the GIL once finalization has begun is ended silently: no profile, exit 0).
_stopping = threading.RLock()


# ---- the profiler's own frames ---------------------------------------------------------------


def _package_files(*names: str) -> frozenset[str]:
    """Absolute paths of these files of the spprof package."""
    here = os.path.dirname(os.path.abspath(__file__))
    return frozenset(os.path.join(here, n) for n in names)


def _getcwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # started in a directory that is gone
        return ""


# The working directory spprof was imported in: relative code file names are relative to it.
_START_CWD = _getcwd()


def absolute_path(name: str) -> str:
    """os.path.abspath(name), also when the current directory no longer exists (a program may
    end in a directory it deleted): a relative name is then taken from where spprof started."""
    try:
        return os.path.abspath(name)
    except OSError:
        return os.path.normpath(os.path.join(_START_CWD, name)) if _START_CWD else name


def _frame_in(frame: Any, files: frozenset[str]) -> bool:
    name = frame.filename
    return name in files or (not name.startswith("<") and absolute_path(name) in files)


# spprof's Python code that runs while timers are armed (Profile.drop_profiler_samples).
# These call the program's code (the @profile wrapper, the CLI runner): a sample is the
# profiler's only when one of them is the running frame.
_CALLING_FILES = _package_files("_session.py", "cli/__init__.py", "cli/record.py", "__main__.py")
# These never do (the debug log, windows, stats, child CPU marks, the exit-call hook): a
# sample with one of them anywhere on its stack is the profiler's, whatever runs below it.
_INNER_FILES = _package_files(
    "_debug.py",
    "_windows.py",
    "_stats.py",
    "_children.py",
    "_config.py",
    "_exit_calls.py",
    "_mypyc_names.py",
    "_runner_frames.py",
    "_async_view.py",
    "_async_census.py",
    "_task_names.py",
    "_greenlet_census.py",
    "_greenlet_view.py",
    "_waits.py",
    "_censuses.py",
    "_http.py",
    "_http_address.py",
    "_control.py",
    "_high_fd.py",
    "_attach.py",
)


def _is_profiler_frame(frame: Any) -> bool:
    return _frame_in(frame, _CALLING_FILES) or _frame_in(frame, _INNER_FILES)


def _is_inner_profiler_frame(frame: Any) -> bool:
    return _frame_in(frame, _INNER_FILES)


# ---- thread discovery ---------------------------------------------------------------------


# The method of threading.Thread that _bootstrap calls on the new thread (3.9-3.15).
_BOOTSTRAP_INNER = "_bootstrap_inner"


def _install_thread_hook(greenlets: bool = False) -> None:
    """Thread._bootstrap_inner becomes a C method that calls the registrar, then the
    original: nothing the program can see in threading.getprofile()/gettrace() or reset with
    setprofile(None), no frame of spprof's on the thread's stack, no PEP 669 re-instrumentation
    per thread (3.12+). Threads of _thread.start_new_thread never pass here (nor did they pass
    the setprofile hook before): the drain's scan finds them, up to a pass after they start."""
    current = threading.Thread.__dict__.get(_BOOTSTRAP_INNER)
    if current is None or _ext.thread_start_hook_original(current) is not None:
        return  # not there (an unknown threading), or already ours
    # The registrar (C): the new thread's name, its target's code as its entry, and spprof's
    # own threads (OwnThread, the pprof endpoint's) made spprof's instead of sampled.
    # With --greenlets (wall mode), each new thread gets the greenlet trace (_greenlet_census).
    on_start = _censuses.on_thread_start if greenlets else None
    registrar = _ext.thread_registrar(threading.Thread.run, OwnThread, on_start)
    setattr(threading.Thread, _BOOTSTRAP_INNER, _ext.thread_start_hook(current, registrar))


def _remove_thread_hook() -> None:
    """Puts the original back, only while Thread._bootstrap_inner is still ours (a program or
    another tool may have wrapped it since: theirs stays, and ours in it becomes a no-op once
    the session stops, as registration outside a session does nothing)."""
    current = threading.Thread.__dict__.get(_BOOTSTRAP_INNER)
    original = _ext.thread_start_hook_original(current) if current is not None else None
    if original is not None:
        setattr(threading.Thread, _BOOTSTRAP_INNER, original)


# ---- the API ----------------------------------------------------------------------------------


def start(
    interval_ms: float = 10,
    mode: str = "cpu",
    native: bool = False,
    memory_limit_mb: Optional[float] = None,
    output_path: Optional[PathLike] = None,
    *,
    format: Optional[str] = None,
    timer: str = "auto",
    progress: bool = False,
    interpreter_frames: bool = False,
    max_overhead_pct: Optional[float] = None,
    async_tasks: bool = False,
    greenlets: bool = False,
    http: Optional[str] = None,
    http_allow_remote: bool = False,
    subprocesses: bool = False,
) -> None:
    """Start sampling every Python thread of this process.

    interval_ms: sampling interval, 1-1000 ms (of CPU time per thread in "cpu" mode, of
    elapsed time in "wall" mode, where blocked threads are sampled too, flagged idle).
    memory_limit_mb: cap on the memory the profile may use; samples beyond it are dropped
    and counted in Profile.dropped_count. output_path: where stop() (or interpreter exit)
    writes the profile, in `format` (default: from the file name, else speedscope).
    timer: "auto" (per-thread CPU timers, falling back to setitimer), "thread" or "itimer".
    progress: a live line on stderr (elapsed, samples, drops) while recording.
    native: record native (C/C++) frames too, interleaved with the Python frames in call
    order; interpreter_frames keeps CPython's own C frames, which are folded away by default.
    max_overhead_pct: an overhead budget: the profiler measures its own cost and widens the
    interval (never below interval_ms) to stay under it; stats()["effective_interval_ms"].
    async_tasks: root each sample taken in an asyncio event loop at its task (`<task> coro`)
    or at `<event loop>`, folding the loop's own frames away (docs/usage.md, "asyncio");
    in wall mode, every waiting task too, on the line it awaits. greenlets: in wall mode, every
    switched-out greenlet (gevent, greenlet) on the line it switched out on (docs/usage.md,
    "gevent and greenlet").
    http: "HOST:PORT" (port 0: any free one) to serve /debug/pprof/profile?seconds=N, a pprof
    window on this session (docs/usage.md "pprof endpoint"); loopback only unless
    http_allow_remote. The bound address: http_address().
    subprocesses: profile child processes too (forked, spawned, run with subprocess), each
    with these settings; stop() merges them, each thread named with its process
    (docs/usage.md, "Child processes").
    """
    cfg = SessionConfig(
        interval_ms=interval_ms,
        mode=mode,
        native=native,
        memory_limit_mb=memory_limit_mb,
        output_path=output_path,
        output_format=format,
        timer=timer,
        interpreter_frames=interpreter_frames,
        max_overhead_pct=max_overhead_pct,
        async_tasks=async_tasks,
        greenlets=greenlets,
        http=http,
        http_allow_remote=http_allow_remote,
        subprocesses=subprocesses,
    ).validate()
    start_checked(cfg, progress=progress)


def start_checked(cfg: ValidConfig, *, progress: bool = False) -> None:
    """start() with arguments SessionConfig.validate() has checked (the CLI checks them first)."""
    global _active, _children_start, _generation
    if _family_child and _active is not None and _ext.is_active():
        # The program profiles itself in a child of a --subprocesses family: its session
        # wins; the family's part so far is written for the root.
        _debug.debug("--subprocesses: the program starts its own session; the family's ends")
        _stop()
    with _lock:
        if _active is not None or _ext.is_active():
            raise RuntimeError("spprof is already profiling; call spprof.stop() first")
        # Bound before sampling starts: a port in use fails with nothing started.
        listener = _http.bind(cfg.http) if cfg.http is not None else None
        _install_thread_hook(cfg.greenlets and cfg.mode == "wall")
        try:
            _ext.start(
                int(cfg.interval_ms * 1_000_000),
                timer=cfg.timer,
                memory_limit_bytes=int(cfg.memory_limit_mb * 1024 * 1024),
                mode=cfg.mode,
                progress=bool(progress),
                native=cfg.native,
                interpreter_frames=cfg.interpreter_frames,
                max_overhead_pct=cfg.max_overhead_pct or 0.0,
            )
        except BaseException:
            _remove_thread_hook()
            if listener is not None:
                listener.close()
            raise
        _active = cfg
        _generation += 1
        _children_start = _children.mark()
        if cfg.subprocesses and not _subprocesses.in_child():
            _subprocesses.begin(cfg)
    if listener is not None:
        _http.serve(listener, _http_window)
    _control.open_channel(
        _control_window, _control_window_to, not _subprocesses.in_child(), _control_window_profile
    )
    # Waiting tasks and greenlets (wall mode), tasks' names (_censuses.py), when asked for
    _censuses.start(cfg.mode, cfg.async_tasks, cfg.greenlets, _ext.monotonic_ns, _ext._python_tick)
    if cfg.output_path is not None:
        _cover_exits()
    if _debug.enabled:  # stats() costs a native call and a dataclass: only when it is printed
        _debug.debug(
            f"started: interval {cfg.interval_ms} ms, mode {cfg.mode}, timer {stats().timer}"
        )


def stop() -> Profile:
    """Stop sampling and return the Profile (also written to output_path if one was given)."""
    if _family_child:  # a --subprocesses child's session is spprof's, not the program's
        raise RuntimeError("spprof is not profiling; call spprof.start() first")
    profile = _stop()
    if _subprocesses.in_child() and not _ext.is_active():
        # The program's own session in a --subprocesses child has ended: the family's part
        # goes on (PID.K.spprof), as before the program started its own.
        try:
            start_family_child()
        except Exception as exc:
            _debug.debug(f"--subprocesses: this child is no longer profiled: {exc!r}")
    return profile


def _stop() -> Profile:
    with _stopping:
        profile = _stop_and_write()
    _uncover_exits()  # after: a SIGTERM that came meanwhile ends the process here
    return profile


def _tidy(profile: Profile) -> Profile:
    """What a session's profile and a window's both get: mypyc's C names as the Python
    functions they were compiled from (modules loaded now), and none of spprof's own frames
    (its start/stop samples, the CLI runner's frames at the root)."""
    profile.frame_table = _mypyc_names.rename_frames(profile.frame_table, sys.modules)
    profile.stats["samples_in_profiler"] = profile.drop_profiler_samples(
        _is_profiler_frame, _is_inner_profiler_frame
    ) + _http.drop_server_samples(profile)
    _runner_frames.hide_spprof_frames(profile)
    if profile.metadata.get("async_tasks"):
        profile.stats.update(_async_view.root_at_tasks(profile))
    if profile.metadata.get("greenlets"):  # pure-Python gevent's Greenlet.run at the root
        profile.stats["greenlet_run_roots_dropped"] = _greenlet_view.drop_greenlet_run(profile)
    # Wall mode: the tasks and greenlets that waited meanwhile.
    end = profile.start_ns + profile.duration_ns
    for census in _censuses.current():
        profile.stats.update(census.add_to(profile, profile.start_ns, end))
    return profile


def _stop_and_write() -> Profile:
    global _active, _family_child
    # Before any of spprof's stopping code can be sampled: the caller's wait up to now goes
    # to the stack it waited on, not to this code's (whose samples are dropped). Only when
    # this stop will stop the session: the caller's span is not handed back.
    if _active is not None and _ext.is_active():
        _ext._settle_caller()
    # The control channel first: the drain thread serves it, and is joined below.
    control_stats = _control.close_channel()
    # The endpoint next: a request in a window gets the window up to now, then its threads
    # are joined and its socket closed, before the session's samples are taken.
    http_stats = _http.shutdown()
    with _lock:
        cfg = _active
        if cfg is None or not _ext.is_active():
            raise RuntimeError("spprof is not profiling; call spprof.start() first")
        _remove_thread_hook()
        _censuses.stop(_ext._python_tick)  # their rows stay for _tidy
        try:
            raw = _ext.stop()
        finally:
            _active = None
    family_child, _family_child = _family_child, False
    global _carried
    profile = _tidy(Profile.from_native(raw, cfg.mode, cfg.interval_ms, _metadata(cfg)))
    _censuses.forget()
    if _children_start is not None:
        profile.stats.update(_children.since(_children_start))
    profile.stats.update(http_stats)
    profile.stats.update(control_stats)
    if _carried is not None:  # the part before an exec that failed
        profile, _carried = _exit_calls.join(_carried, profile), None
    if cfg.subprocesses:  # the root merges its children (a child leaves its own to the root)
        profile = _subprocesses.end(profile)
    _debug.debug(
        f"stopped: {profile.sample_count} samples, {profile.dropped_count} dropped, "
        f"{len(profile.thread_table)} threads"
    )
    if family_child:
        # Nothing of a child's is the program's: no rescue file, no message (the root, gone
        # already, may have removed the directory).
        try:
            write(profile, cfg.output_path or "", "spprof")
        except OSError as exc:
            _debug.debug(f"--subprocesses: this child's profile is lost: {exc}")
    elif cfg.output_path is not None:
        write(profile, cfg.output_path, cfg.output_format, rescue=True)
        _debug.debug(f"wrote {cfg.output_format} profile to {cfg.output_path}")
    return profile


def exit_dump_path(output: PathLike, fmt: str) -> str:
    """Where the .spprof file written without the GIL goes: the output itself when it is a
    .spprof file (the only format written without Python), else next to it."""
    path = os.fspath(output)
    path = path if isinstance(path, str) else os.fsdecode(path)
    return path if fmt == "spprof" else path + ".spprof"


def arm_exit_dump(output: PathLike, fmt: str) -> None:
    """GIL held, session running: if an exit signal comes while C code holds the GIL, the
    watcher writes what the drain has resolved to exit_dump_path() (session/exit_dump.h)."""
    cfg = _active
    if cfg is None:
        return
    fields = {"interval_ms": cfg.interval_ms, "mode": cfg.mode, "metadata": _metadata(cfg)}
    members = json.dumps(fields, separators=(",", ":"), default=str)[1:-1]
    _ext._arm_exit_dump(exit_dump_path(output, fmt), members)


def _cover_exits() -> None:
    """start(output_path=...): write the profile at os._exit, os.exec* and exit signals too."""
    global _covers_exit_calls, _watches_exit_signals
    if _active is not None and _active.output_path is not None:
        arm_exit_dump(_active.output_path, _active.output_format)
    _exit_calls.enable(_stop_before_exec, _resume_after_exec)
    _covers_exit_calls = True
    try:
        _ext._watch_exit_signals(_on_exit_signal)
        _watches_exit_signals = True
    except (OSError, RuntimeError) as exc:  # already watched (the CLI), or no pipe
        _debug.debug(f"exit signals not watched by the session: {exc}")


def _uncover_exits() -> None:
    global _covers_exit_calls, _watches_exit_signals
    if _covers_exit_calls:
        _covers_exit_calls = False
        _exit_calls.disable()
    if _in_exit_signal:
        _wait_for_the_exit_signal()
    elif _watches_exit_signals:
        _watches_exit_signals = False
        _ext._unwatch_exit_signals()


def _wait_for_the_exit_signal() -> None:
    """On any thread but the runner, once it handles an exit signal: wait (GIL released) for
    it to end the process. Finishing here instead, the main thread would start finalization,
    which silently ends a thread that still needs the GIL: no profile, exit status 0."""
    if _in_exit_signal and _in_exit_signal != threading.get_ident():
        threading.Event().wait()


def _stop_before_exec() -> None:
    global _before_exec
    cfg = _active
    if cfg is not None and _ext.is_active():
        _before_exec = (_stop(), cfg)


def _resume_after_exec() -> None:
    global _before_exec, _carried
    if _before_exec is None:
        return
    profile, cfg = _before_exec
    _before_exec = None
    start_checked(cfg)
    _carried = profile


def _on_exit_signal(signum: int) -> None:
    """The exit-signal runner (GIL held); the process dies by `signum` when this returns."""
    global _in_exit_signal
    _in_exit_signal = threading.get_ident()
    with _stopping:  # another thread writing: let it finish, then die
        if _active is not None and _ext.is_active():
            try:
                _stop()
            except Exception as exc:
                _stderr.say(f"spprof: could not write the profile: {exc}")


def is_active() -> bool:
    """Whether a session runs (a --subprocesses child's own, spprof's, does not count)."""
    return _ext.is_active() and not _family_child


def http_address() -> Optional[tuple[str, int]]:
    """(host, port) the pprof endpoint of the running session listens on (start(http=...),
    --http), None when there is none."""
    return _http.address()


def _open_window(
    asked: dict[str, Any],
    thread: Optional[str] = None,
    labels: Optional[dict[str, str]] = None,
    seconds: float = 0.0,
) -> Optional[_windows.Window]:
    """A window on the running session from now on (Profiler inside a session, the pprof
    endpoint: `seconds` long); None when no session runs."""
    with _lock:
        # A --subprocesses child's session is not the program's: its blocks get their own.
        session = _active if _ext.is_active() and not _family_child else None
        generation = _generation
    if session is None:
        return None
    window = _windows.Window(session, generation, asked, thread, labels or {}, int(seconds * 1e9))
    window.open()
    return window


def _close_window(window: _windows.Window, metadata: dict[str, Any]) -> Optional[Profile]:
    """The window's profile up to now; None when its session has stopped (or this is a
    forked child), the window's samples gone with it."""
    with _lock:
        same = _ext.is_active() and _generation == window.generation
    if not same:
        return None
    try:
        return window.close(metadata, _tidy)
    except RuntimeError:
        if _ext.is_active():
            raise
        return None  # the session stopped between the check and the export


def _http_window(seconds: float, ending: threading.Event) -> Optional[bytes]:
    """The pprof endpoint's window (_http.py): every thread's samples of the next `seconds`
    (up to `ending`, the session's stop), as gzipped pprof; None when the session is gone."""
    # The root of a --subprocesses family asks its running members for the same window.
    members = _family_windows.ask(_subprocesses.running_members(), seconds)
    window = _open_window({}, seconds=seconds)
    if window is None:
        _family_windows.abandon(members)
        return None
    deadline = time.monotonic() + seconds + _family_windows.ANSWER_GRACE_S
    ended_early = ending.wait(seconds)
    profile = _close_window(window, _metadata(window.session))
    if profile is None or ended_early:
        _family_windows.abandon(members)
        return render(profile, "pprof") if profile is not None else None
    if members:
        found, missing = _family_windows.collect(members, deadline)
        profile = _family_windows.merged(profile, found, missing)
    return render(profile, "pprof")


def _control_window(seconds: float) -> Optional[_windows.Window]:
    """`spprof record --pid`'s window (_control.py, on the drain thread), at most `seconds`
    long: every thread of the running session, a --subprocesses child's too (its session is
    the family's)."""
    with _lock:
        session = _active if _ext.is_active() else None
        generation = _generation
    if session is None:
        return None
    window = _windows.Window(session, generation, {}, length_ns=int(seconds * 1e9))
    window.open()
    return window


def _control_window_to(window: _windows.Window, path: str) -> Optional[int]:
    """The window's profile written to `path` (.spprof); its samples, None when the session
    is gone."""
    profile = _control_window_profile(window)
    if profile is None:
        return None
    write(profile, path, "spprof")
    return profile.sample_count


def _control_window_profile(window: _windows.Window) -> Optional[Profile]:
    """The window's profile (a dump's span: each thread's last sample); None when the session
    is gone."""
    return _close_window(window, _metadata(window.session))


def stats() -> SessionStats:
    """Counters of the running session, or of the last one: samples, drops, timer, threads."""
    return SessionStats.from_native(_ext.stats())


def _metadata(cfg: ValidConfig) -> dict[str, Any]:
    return {
        "spprof_version": __version__,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": sys.platform,
        "machine": platform.machine(),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "cwd": _START_CWD,  # relative code file names are relative to it
        "argv": list(sys.argv),
        "name": " ".join(sys.argv) or "spprof profile",
        "mode": cfg.mode,
        "interval_ms": cfg.interval_ms,
        "async_tasks": cfg.async_tasks,
        "greenlets": cfg.greenlets,
    }


class _Unasked(float):
    """Profiler's default interval (10 ms): the same number, but a window can tell that the
    caller did not ask for it (and takes the session's without a word)."""


class _UnaskedMode(str):
    """Profiler's default mode ("cpu"), told apart from an explicit "cpu" the same way."""


_DEFAULT_INTERVAL_MS = _Unasked(10)
_DEFAULT_MODE = _UnaskedMode("cpu")


class Profiler:
    """`with spprof.Profiler(interval_ms=10) as p: ...` then `p.profile` / `p.get_samples()`.

    Inside a running session (the CLI's, the pytest plugin's, another Profiler's) the block
    is a window on it (_windows.py, docs/usage.md "Windows inside a running session"): the
    session's samples taken during the block, with the session's settings. thread="current":
    only the samples of the thread that started the block. labels: {name: value} kept in the
    profile's metadata (and in its name, and as pprof sample labels).
    """

    def __init__(
        self,
        interval_ms: float = _DEFAULT_INTERVAL_MS,
        mode: str = _DEFAULT_MODE,
        native: bool = False,
        memory_limit_mb: Optional[float] = None,
        output_path: Optional[PathLike] = None,
        *,
        format: Optional[str] = None,
        timer: str = "auto",
        interpreter_frames: bool = False,
        max_overhead_pct: Optional[float] = None,
        async_tasks: bool = False,
        greenlets: bool = False,
        subprocesses: bool = False,
        thread: Optional[str] = None,
        labels: Optional[dict[str, str]] = None,
    ) -> None:
        # Checked now, so a bad argument fails where the Profiler is made; start() reuses it.
        self._config = SessionConfig(
            interval_ms=interval_ms,
            mode=mode,
            native=native,
            memory_limit_mb=memory_limit_mb,
            output_path=output_path,
            output_format=format,
            timer=timer,
            interpreter_frames=interpreter_frames,
            max_overhead_pct=max_overhead_pct,
            async_tasks=async_tasks,
            greenlets=greenlets,
            subprocesses=subprocesses,
        ).validate()
        self._thread = _windows.check_thread(thread)
        self._labels = _windows.check_labels(labels)
        # What the caller asked for explicitly: a window says which of these it cannot have.
        c = self._config
        given = {
            "interval_ms": (interval_ms is not _DEFAULT_INTERVAL_MS, c.interval_ms),
            "mode": (mode is not _DEFAULT_MODE, c.mode),
            "native": (native is True, c.native),
            "timer": (timer != "auto", c.timer),
            "interpreter_frames": (interpreter_frames, c.interpreter_frames),
            "memory_limit_mb": (memory_limit_mb is not None, c.memory_limit_mb),
            "max_overhead_pct": (max_overhead_pct is not None, c.max_overhead_pct),
            "subprocesses": (subprocesses is True, c.subprocesses),
        }
        self._asked = {k: v for k, (explicit, v) in given.items() if explicit}
        self._window: Optional[_windows.Window] = None
        self._censuses: list[Any] = []  # a window's own (_censuses.open_for_window)
        self._native_tid = 0
        self.profile: Optional[Profile] = None

    def start(self) -> None:
        self._window = _open_window(self._asked, self._thread, self._labels)
        if self._window is not None:
            cfg = self._config
            if cfg.async_tasks or cfg.greenlets:
                # Waiting tasks or greenlets (or tasks' names) the session does not count
                self._censuses = _censuses.open_for_window(
                    self._window.session.mode,
                    cfg.async_tasks,
                    cfg.greenlets,
                    _ext.monotonic_ns,
                    _ext._python_tick,
                )
            return
        start_checked(self._config)
        self._native_tid = threading.get_native_id() if self._thread == "current" else 0

    def stop(self) -> Profile:
        window, self._window = self._window, None
        if window is None:
            profile = stop()
            if self._native_tid:
                profile = _windows.only_thread(profile, self._native_tid)
            if self._labels:
                _windows.put_labels(profile, self._labels)
            if self._native_tid or self._labels:
                self._write(profile)
        else:
            try:
                _censuses.settle(self._censuses)  # up to now: the window ends here
                closed = _close_window(window, self._window_metadata(window))
            finally:
                censuses, self._censuses = self._censuses, []
                _censuses.close_for_window(censuses)
            # None: the session stopped (or this is a forked child), and the program goes on
            profile = closed if closed is not None else window.orphaned(_metadata(window.session))
            self._write(profile)
        self.profile = profile
        return profile

    def _window_metadata(self, window: _windows.Window) -> dict[str, Any]:
        """The session's metadata; async_tasks=True asked of a window gives it the asyncio
        view even when its session has none (the view is made from the stacks at stop)."""
        metadata = _metadata(window.session)
        metadata["async_tasks"] = metadata["async_tasks"] or self._config.async_tasks
        return metadata

    def _write(self, profile: Profile) -> None:
        """A window's profile (or one narrowed to a thread or labelled) goes to output_path."""
        cfg = self._config
        if cfg.output_path is not None:
            write(profile, cfg.output_path, cfg.output_format, rescue=True)

    def __enter__(self) -> Profiler:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def get_samples(self) -> list[Sample]:
        if self.profile is None:
            raise RuntimeError("no profile yet: the Profiler has not been stopped")
        return self.profile.samples


def profile(
    output_path: Optional[PathLike] = None,
    interval_ms: float = _DEFAULT_INTERVAL_MS,
    mode: str = _DEFAULT_MODE,
    *,
    format: Optional[str] = None,
    timer: str = "auto",
    thread: Optional[str] = None,
    labels: Optional[dict[str, str]] = None,
) -> Callable[[F], F]:
    """Decorator: profile every call of the function; each call writes `output_path`.
    Inside a running session each call is a window on it (see Profiler)."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with Profiler(
                interval_ms=interval_ms,
                mode=mode,
                output_path=output_path,
                format=format,
                timer=timer,
                thread=thread,
                labels=labels,
            ) as p:
                result = fn(*args, **kwargs)
            wrapper.last_profile = p.profile  # type: ignore[attr-defined]
            return result

        return wrapper  # type: ignore[return-value]

    return decorate


# ---- process lifecycle ----------------------------------------------------------------------


def _stop_at_exit() -> None:
    """Interpreter exit with profiling on: stop, so a requested output file is still written."""
    with _stopping:  # the exit-signal runner writing: wait for it (it ends the process)
        if _active is None or not _ext.is_active():
            _wait_for_the_exit_signal()
            return
        _debug.debug("interpreter exiting while profiling: stopping")
        try:
            _stop_and_write()
        except Exception as exc:
            _stderr.say(f"spprof: could not write the profile at exit: {exc}")
    _uncover_exits()  # not holding _stopping: the runner may need it to finish


def _after_fork_child() -> None:
    """The child of a fork runs unprofiled (timers are not inherited, the handler is reset),
    unless the session profiles its subprocesses: then the child starts a session of its own."""
    global _active, _carried, _before_exec, _covers_exit_calls, _watches_exit_signals
    global _family_child, _lock, _stopping
    # Another thread of the parent may have held them (inside start() or stop()): that thread
    # is not in the child, and the child's session below takes them.
    _lock, _stopping = threading.Lock(), threading.RLock()
    cfg = _active if _active is not None and _active.subprocesses else None
    # A family member without a session of its own (multiprocessing's forkserver) still
    # starts one in the children it forks, with the family's settings.
    family = cfg is not None or (_active is None and _subprocesses.in_child())
    _family_child = False
    if _active is not None:
        _ext.after_fork_child()
        _remove_thread_hook()
        _active = None
    _carried = _before_exec = None
    _control.after_fork_child()
    _censuses.forget()
    if _covers_exit_calls:
        _covers_exit_calls = False
        _exit_calls.disable()
    if _watches_exit_signals:  # the watcher thread was not copied: only forget the handler
        _watches_exit_signals = False
        _ext._unwatch_exit_signals()
    if family:
        try:
            start_family_child(cfg)
        except Exception as exc:  # the child runs unprofiled, as without --subprocesses
            _debug.debug(f"--subprocesses: the forked child is not profiled: {exc!r}")


_EXIT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)  # the watcher's


def start_family_child(cfg: Optional[ValidConfig] = None) -> None:
    """Profile this process as a child of its --subprocesses family: forked (`cfg`: the
    parent's settings) or a new interpreter (the family's, from the environment)."""
    global _family_child
    # From its mark on, the child is counted: one ended by SIGTERM before its session's
    # exit-signal watcher is there would be lost. Those signals wait, on the child's only
    # thread (spprof's threads block them), until the watcher takes them.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _EXIT_SIGNALS)
    try:
        child = _subprocesses.child_config(cfg)
        if child is None:
            return
        # A runner's covers the parent had (the CLI's) are the parent's: the child's session
        # covers its own exits.
        _exit_calls.disable()
        _ext._unwatch_exit_signals()
        start_checked(child)
        _family_child = True
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _before_fork() -> None:
    """spprof's helper threads are stopped across os.fork (joined, not paused: CPython 3.12+
    counts OS threads to warn that a fork may deadlock), so that the child inherits none of
    them, nor a lock one of them held; the parent starts them again (_after_fork_parent)."""
    _ext.stop_threads_for_fork()


def _after_fork_parent() -> None:
    # The endpoint's accept thread comes back with spprof's native threads: on 3.13+ only once
    # os.fork has returned (CPython counts the threads for its fork warning after the hooks).
    # Without the endpoint no Python code runs there (a pending call, maybe inside a join).
    _ext.restart_threads_after_fork(_http.restart_after_fork if _http.address() else None)


atexit.register(_stop_at_exit)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(
        before=_before_fork, after_in_parent=_after_fork_parent, after_in_child=_after_fork_child
    )
