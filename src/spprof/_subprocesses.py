"""Child processes profiled with the session (--subprocesses, start(subprocesses=True)).

The session that asks for it is the family's root. It makes a private directory and names
it, with its settings, in the environment variable SPPROF_SUBPROCESSES, which every child
inherits:

- a forked child (os.fork, multiprocessing's fork and forkserver workers, pre-fork servers'
  workers) starts a session of its own in spprof's after-fork hook (_session.py);
- a new Python process (subprocess, multiprocessing's spawn, a program that runs itself
  again) starts one at interpreter start-up, from the `spprof-subprocesses.pth` file that
  the package installs into site-packages (_subprocess_hook.py). The file costs one
  environment lookup in a Python that runs without the variable.

A child's session writes `PID.spprof` into the directory when it ends (normal exit,
os._exit, exec, exit signals: the session's usual exits), after marking itself
`PID.running` there (a directory: no descriptor is opened in the program; `PID.K` when PID
is taken, by the same process before an exec or an earlier one with its pid). multiprocessing's
helpers mark themselves `PID.helper` and take no profile (_subprocess_hook.py). When the
root stops, it merges every finished child into its own profile (_process_merge.py) and
deletes their files; while it runs, it merges finished children into batch files as they
come, so the directory stays small however many children a long service recycles
(_family_files.py). A child that died without writing (SIGKILL) is counted and named. So is
one still running: marked, or (Linux) a child of the root's that runs this Python and has
not marked itself yet (still starting); the directory then stays, for it to write into.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Optional, TypeVar

from . import _debug, _ext, _family_files
from ._config import ValidConfig
from ._family_files import RUNNING as _RUNNING
from ._family_files import WRITTEN as _WRITTEN
from ._family_files import Compactor, alive, batch_files
from ._model import ProfileData

P = TypeVar("P", bound=ProfileData)

ENV = "SPPROF_SUBPROCESSES"
_HELPER = ".helper"

# The settings a child takes from the root (its output and endpoint are its own).
_INHERITED = (
    "interval_ms",
    "mode",
    "native",
    "memory_limit_mb",
    "timer",
    "interpreter_frames",
    "max_overhead_pct",
    "async_tasks",
    "greenlets",
)


@dataclass(frozen=True)
class Family:
    directory: str
    root_pid: int
    settings: dict[str, Any]

    @property
    def is_root(self) -> bool:
        return os.getpid() == self.root_pid


_family: Optional[Family] = None
_compactor: Optional[Compactor] = None  # the root's, while its session runs


def begin(cfg: ValidConfig) -> None:
    """The root's start (its session running): the directory, the variable that hands it to
    children, and the drain thread's call that merges finished children as they come."""
    global _family, _compactor
    directory = tempfile.mkdtemp(prefix="spprof-subprocesses-")
    settings = {k: v for k, v in asdict(cfg).items() if k in _INHERITED}
    _family = Family(directory, os.getpid(), settings)
    os.environ[ENV] = json.dumps({"dir": directory, "root": _family.root_pid, "settings": settings})
    _compactor = Compactor(directory, _family.root_pid, _ext._call_apart)
    _ext._drain_timer(_compactor, _family_files.CHECK_S)
    _debug.debug(f"--subprocesses: children write into {directory}")


def from_environment() -> Optional[Family]:
    """The family a new Python process belongs to, from its environment (None: none)."""
    global _family
    text = os.environ.get(ENV)
    if not text:
        return None
    try:
        raw = json.loads(text)
        family = Family(str(raw["dir"]), int(raw["root"]), dict(raw["settings"]))
    except (ValueError, KeyError, TypeError):
        return None
    if family.is_root or not os.path.isdir(family.directory):
        return None  # the root after an exec, or a family that has ended
    _family = family
    return family


def child_config(cfg: Optional[ValidConfig] = None) -> Optional[ValidConfig]:
    """This child's session settings (the family's, writing PID.spprof into its directory),
    marked as running; None when this process is in no family or the directory is gone."""
    family = _family
    if family is None or family.is_root:
        return None
    base = Path(family.directory)
    stem = _mark_running(base, os.getpid())
    if stem is None:
        return None
    out = base / f"{stem}{_WRITTEN}"
    if cfg is not None:
        return replace(cfg, output_path=out, output_format="spprof", http=None)
    return ValidConfig(
        **family.settings,
        output_path=out,
        output_format="spprof",
        http=None,
        subprocesses=True,
    )


def _mark_running(base: Path, pid: int) -> Optional[str]:
    """PID, or PID.K when PID is taken: this process after an exec (its part before is
    written), or an earlier process with the same pid. None: the directory is gone."""
    for k in range(1000):
        stem = f"{pid}.{k}" if k else str(pid)
        try:
            os.mkdir(base / f"{stem}{_RUNNING}")
            return stem
        except FileExistsError:
            continue
        except OSError as exc:  # the root has stopped and removed the directory
            _debug.debug(f"--subprocesses: not profiled, {exc}")
            return None
    return None


def mark_helper() -> None:
    """This process is one of multiprocessing's helpers: the root waits for no profile of it."""
    if _family is not None:
        with contextlib.suppress(OSError):
            os.mkdir(Path(_family.directory) / f"{os.getpid()}{_HELPER}")


def running_members() -> list[int]:
    """The root's live family members with a session now (marked running, not yet written),
    for a window over the family (_family_windows); [] outside a family's root."""
    family = _family
    if family is None or not family.is_root:
        return []
    base = Path(family.directory)
    try:
        marks = list(base.glob(f"*{_RUNNING}"))
    except OSError:
        return []
    pids: set[int] = set()
    for mark in marks:
        stem = mark.name[: -len(_RUNNING)]
        if (base / f"{stem}{_WRITTEN}").exists():
            continue
        pid = int(stem.split(".")[0])
        if pid != family.root_pid and alive(pid):
            pids.add(pid)
    return sorted(pids)


def in_child() -> bool:
    """Whether this process is a profiled child (its writes are its own, never the root's)."""
    return _family is not None and not _family.is_root


def end(own: P) -> P:
    """The root's stop: `own` with the finished children merged, their files removed."""
    global _family, _compactor
    family = _family
    if family is None or not family.is_root:
        return own
    _family = None
    compactor, _compactor = _compactor, None
    _ext._drain_timer(None, 0)  # the drain thread is gone: this only drops the handler
    if os.environ.get(ENV, "").find(family.directory) >= 0:
        del os.environ[ENV]
    from ._load import ProfileFormatError, load
    from ._process_merge import merge

    t0 = time.perf_counter_ns()

    base = Path(family.directory)
    children: list[ProfileData] = []  # loaded as Profile
    unreadable: list[int] = []
    unfinished: list[int] = []
    # Every child that marked itself or wrote, before any mark is removed below; and those
    # the loop meets (a child still starting may mark itself between the two looks: counted
    # twice as running, before).
    known = {int(m.name.split(".")[0]) for m in base.iterdir() if m.name[:1].isdigit()}
    if compactor is not None:  # merged into batches or found lost while the root ran
        unreadable += compactor.lost
        known.update(compactor.lost)
    for path in batch_files(base):
        try:
            batch = load(path)
        except (ProfileFormatError, OSError) as exc:  # ours: should not happen
            _debug.debug(f"--subprocesses: {exc}")
            continue
        known.update(int(e["pid"]) for e in batch.metadata.get("processes", []))
        children.append(batch)
        path.unlink(missing_ok=True)
    for mark in sorted(base.glob(f"*{_RUNNING}")):
        stem = mark.name[: -len(_RUNNING)]
        pid = int(stem.split(".")[0])
        known.add(pid)
        written = base / f"{stem}{_WRITTEN}"
        if written.is_file():
            try:
                children.append(load(written))
            except (ProfileFormatError, OSError) as exc:
                _debug.debug(f"--subprocesses: {exc}")
                unreadable.append(pid)
            written.unlink(missing_ok=True)
            mark.rmdir()
        elif alive(pid):
            unfinished.append(pid)
        else:
            unreadable.append(pid)  # ended without writing: SIGKILL, a crash
            mark.rmdir()
    unfinished += [pid for pid in _python_children() if pid not in known]
    children.sort(key=lambda p: p.start_ns)
    profile = merge(own, children)
    processes = profile.metadata["processes"]
    mine = len(own.metadata.get("processes") or [own])  # the root's own entries come first
    processes[mine:] = sorted(processes[mine:], key=lambda e: e["start_ns"])  # batches interleave
    profile.stats["subprocesses_profiled"] = len(processes) - mine
    profile.stats["subprocesses_merged_early"] = compactor.merged if compactor else 0
    profile.stats["subprocesses_early_merge_ns"] = compactor.spent_ns if compactor else 0
    profile.stats["subprocesses_lost"] = len(unreadable)
    profile.stats["subprocesses_running"] = len(unfinished)
    profile.stats["subprocesses_cpu_ns"] = sum(int(e["cpu_ns"] or 0) for e in processes[mine:])
    profile.stats["subprocesses_merge_ns"] = time.perf_counter_ns() - t0
    profile.metadata["subprocesses_lost"] = unreadable
    profile.metadata["subprocesses_running"] = unfinished
    if unfinished:
        profile.metadata["subprocesses_dir"] = family.directory
    else:
        shutil.rmtree(family.directory, ignore_errors=True)
    return profile


def _python_children() -> list[int]:
    """The root's live child processes that run this interpreter's executable (Linux; [] where
    /proc cannot tell): a child that has not reached its start-up hook yet is one of them."""
    try:
        exe = os.readlink("/proc/self/exe")
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return []
    pids: set[int] = set()
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/children") as f:
                pids.update(int(p) for p in f.read().split())
        except (OSError, ValueError):
            continue
    out = []
    for pid in sorted(pids):
        try:
            if os.readlink(f"/proc/{pid}/exe") == exe:
                out.append(pid)
        except OSError:  # ended meanwhile, or not ours to look at
            continue
    return out
