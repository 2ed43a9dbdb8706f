"""pytest plugin (entry point `pytest11`): `pytest --spprof[=DIR]` profiles the test session.

One profile for the whole session, written as DIR/spprof-pytest.spprof (reload it with
`spprof report` / `spprof convert`) and DIR/spprof-pytest.html (the flame graph): under each
test's samples a root pseudo-frame `test: <nodeid>` (at the test's file and line), with
pytest's and pluggy's own frames removed above it; time outside any test (collection, session
fixtures) sits under `pytest: outside tests`. The terminal summary lists the slowest tests
and the functions that dominate each (by self time).

The plugin never changes outcomes or the exit status: a profiling failure is one warning line
in the summary. Limits: a test that calls spprof.start() itself finds it already profiling
(a Profiler block or @spprof.profile is a window on the plugin's session); with pytest-xdist
only the controller process is profiled.

Without --spprof the plugin only adds its options: it starts nothing and changes nothing.
"""

from __future__ import annotations

import bisect
import importlib
import os
import sys
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, TypeVar

_F = TypeVar("_F", bound=Callable[..., Any])


def _hookwrapper(func: _F) -> _F:
    """pytest.hookimpl(hookwrapper=True), looked up at run time: the plugin runs only inside
    pytest, and the type checker's environment need not have pytest."""
    marked: _F = importlib.import_module("pytest").hookimpl(hookwrapper=True)(func)
    return marked


DEFAULT_DIR = ".spprof"
PROFILE_STEM = "spprof-pytest"
# The slowest tests the terminal summary explains, and the functions shown for each.
SLOWEST_TESTS = 5
FUNCTIONS_PER_TEST = 3
OUTSIDE_TESTS = "pytest: outside tests"


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("spprof", "spprof sampling profiler")
    group.addoption(
        "--spprof",
        action="store",
        nargs="?",
        const=DEFAULT_DIR,
        default=None,
        metavar="DIR",
        help="profile the test session with spprof; write the profile to DIR "
        f"(default {DEFAULT_DIR}; give it as --spprof=DIR)",
    )
    group.addoption(
        "--spprof-interval",
        action="store",
        type=float,
        default=1.0,
        metavar="MS",
        help="--spprof sampling interval in ms (default 1)",
    )


def pytest_configure(config: Any) -> None:
    directory = config.getoption("spprof")
    if directory is not None:
        config.pluginmanager.register(
            SessionProfiler(Path(directory), config.getoption("spprof_interval")),
            "spprof-session",
        )


@dataclass
class _Test:
    nodeid: str
    filename: str
    lineno: int
    start_ns: int
    end_ns: int = 0
    duration_s: float = 0.0  # setup + call + teardown, as pytest reports them


@dataclass(eq=False)  # pluggy keeps plugins in sets: hashed by identity
class SessionProfiler:
    directory: Path
    interval_ms: float
    tests: list[_Test] = field(default_factory=list)
    by_id: dict[str, _Test] = field(default_factory=dict)
    runner_files: set[str] = field(default_factory=set)
    written: list[Path] = field(default_factory=list)
    problem: str = ""
    profile: Optional[Any] = None
    started: bool = False

    # ---- hooks ------------------------------------------------------------------------
    def pytest_sessionstart(self, session: Any) -> None:
        try:
            import spprof

            spprof.start(interval_ms=self.interval_ms)
            self.started = True
        except Exception as exc:  # the tests run regardless
            self.problem = f"not profiling: {exc}"

    @_hookwrapper
    def pytest_runtest_protocol(self, item: Any, nextitem: Any) -> Generator[None, None, None]:
        if self.started:
            self._note_runner_stack()
            path, lineno = str(getattr(item, "path", item.fspath)), (item.location[1] or 0) + 1
            t = _Test(item.nodeid, path, lineno, time.monotonic_ns())
            self.tests.append(t)
            self.by_id[item.nodeid] = t
        yield
        if self.started:
            self.tests[-1].end_ns = time.monotonic_ns()

    def pytest_runtest_logreport(self, report: Any) -> None:
        t = self.by_id.get(report.nodeid)
        if t is not None:
            t.duration_s += float(getattr(report, "duration", 0.0) or 0.0)

    def pytest_sessionfinish(self, session: Any, exitstatus: Any) -> None:
        if not self.started:
            return
        self.started = False
        try:
            import spprof
            from spprof.output import write

            profile = spprof.stop()
            self._label(profile)
            self.directory.mkdir(parents=True, exist_ok=True)
            for fmt, suffix in (("spprof", ".spprof"), ("html", ".html")):
                self.written.append(write(profile, self.directory / (PROFILE_STEM + suffix), fmt))
            self.profile = profile
        except Exception as exc:
            self.problem = f"the profile could not be written: {exc}"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.section("spprof")
        if self.problem:
            tr.write_line(f"spprof: warning: {self.problem}")
        if self.profile is None:
            return
        tr.write_line("spprof: profile of the session: " + ", ".join(map(str, self.written)))
        for line in slowest_tests_report(self.profile, self.tests):
            tr.write_line(line)

    # ---- the profile ------------------------------------------------------------------
    def _note_runner_stack(self) -> None:
        """The files on the stack that runs a test (pytest, pluggy, runpy, the console script)
        are the runner's: frames of theirs at a stack's root are removed."""
        frame: Any = sys._getframe(1)
        while frame is not None:
            self.runner_files.add(frame.f_code.co_filename)
            frame = frame.f_back

    def _is_runner(self, filename: str) -> bool:
        return filename in self.runner_files or filename.startswith(_PACKAGE_DIRS)

    def _label(self, profile: Any) -> None:
        """Put `test: nodeid` at the root of every sample taken while that test ran."""
        from spprof._model import Frame
        from spprof._rows import ROW, SERIAL_BITS

        profile.drop_root_frames(lambda f: self._is_runner(f.filename))
        table = profile.frame_table
        labels = []
        for t in self.tests:
            labels.append(len(table))
            table.append(Frame(f"test: {t.nodeid}", t.filename, t.lineno, first_lineno=t.lineno))
        outside = len(table)
        table.append(Frame(OUTSIDE_TESTS, "", 0))
        starts = [t.start_ns for t in self.tests]
        stacks = profile.stacks
        new_ids: dict[tuple[int, int], int] = {}
        rows = bytearray()
        # Sample by sample: a wait folded into one row (wall mode) may span several tests.
        for ts, weight, stack, serial, flags in profile.iter_rows():
            tf = serial | flags << SERIAL_BITS
            i = bisect.bisect_right(starts, ts) - 1
            label = labels[i] if i >= 0 and ts <= self.tests[i].end_ns else outside
            key = (label, stack)
            sid = new_ids.get(key)
            if sid is None:
                sid = new_ids[key] = len(stacks)
                stacks.append((label, *stacks[stack]))
            rows += ROW.pack(ts, weight, sid, tf)
        profile.rows = bytes(rows)
        profile.folds = {}
        profile._samples = None


def _package_dir(name: str) -> str:
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    return os.path.dirname(file) + os.sep if file else "\0"


# pytest's and pluggy's own files: frames of theirs at a stack's root are the runner's.
_PACKAGE_DIRS = tuple(_package_dir(n) for n in ("_pytest", "pluggy"))


def slowest_tests_report(profile: Any, tests: list[_Test]) -> list[str]:
    """Lines naming the slowest tests and, for each, the functions with most self time."""
    by_label: dict[str, dict[tuple[str, str, int], int]] = {}
    totals: dict[str, int] = {}
    table = profile.frame_table
    for _, weight, stack, _, _ in profile.iter_rows():
        ids = profile.stacks[stack]
        root = table[ids[0]].function_name
        if not root.startswith("test: "):
            continue
        totals[root] = totals.get(root, 0) + weight
        if len(ids) > 1:
            leaf = table[ids[-1]]
            key = (leaf.display_name, leaf.filename, leaf.lineno)
            funcs = by_label.setdefault(root, {})
            funcs[key] = funcs.get(key, 0) + weight
    slowest = sorted(tests, key=lambda t: t.duration_s, reverse=True)[:SLOWEST_TESTS]
    lines = [f"slowest {len(slowest)} tests and the functions that dominate them (self time):"]
    for t in slowest:
        label = f"test: {t.nodeid}"
        lines.append(f"  {t.duration_s:7.2f}s {t.nodeid}")
        funcs = by_label.get(label, {})
        total = totals.get(label, 0)
        if not funcs or not total:
            lines.append("           (no samples: it used less CPU time than the interval)")
            continue
        ranked = sorted(funcs.items(), key=lambda kv: kv[1], reverse=True)
        for (name, filename, lineno), weight in ranked[:FUNCTIONS_PER_TEST]:
            where = f" ({_relative(filename)}:{lineno})" if filename else ""
            lines.append(f"           {100.0 * weight / total:5.1f}%  {name}{where}")
    return lines


def _relative(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return path
    return path if rel.startswith("..") else rel
