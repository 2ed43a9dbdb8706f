"""`spprof [record]`: run a script, module or code string under the profiler.

    spprof [options] (script.py [args] | -m module [args] | -c code [args])

argparse owns the split between spprof's options and the program's: the first word that is
not an option (or -m / -c) and everything after it belong to the program, so `--opt value`,
`--opt=value` and unambiguous abbreviations (`--out x.json`) all work with no second list.

The program runs as __main__ with the sys.argv and sys.path[0] `python` would give it, and
ends as it would under `python`, after the profile is written: its exit code passes through;
an uncaught exception (Ctrl-C's KeyboardInterrupt too) goes back to Python, which prints it
through sys.excepthook without spprof's frames and ends the process its usual way (for
KeyboardInterrupt: killed by SIGINT). SIGTERM, SIGHUP and SIGQUIT left at their default
action are watched from a thread of spprof's (_ext._watch_exit_signals): the profile is
written, then the process dies by the signal. Handlers the program installs take precedence;
one that restores SIG_DFL through signal.signal gives it back to spprof. os._exit and
os.exec* write the profile and print the summary first (spprof._exit_calls).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import runpy
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import Any, Optional, TypeVar

from .. import _debug, _exit_calls, _ext, _runner_frames, _session, _stderr
from .._config import SessionConfig
from .._model import ProfileData
from .._version import __version__
from ..output import FORMATS, check_format, check_writable, guess_format, write
from ..output.report import summary
from .errors import EXIT_USAGE, CliError, Parser, error_exit
from .record_pid import record_pid

ProfileT = TypeVar("ProfileT", bound=ProfileData)

USAGE = (
    "spprof [options] (script.py [args] | -m module [args] | -c code [args])\n"
    "       spprof record [options] (script.py | -m module | -c code) [args]\n"
    "       spprof convert IN [-f FORMAT] [-o OUT]\n"
    "       spprof report IN [--top N] [--diff BASE]\n"
    "       spprof diff BASE NEW [-o OUT] [-f FORMAT]\n"
    "       spprof diff --base FILE... --new FILE... [-o OUT] [-f FORMAT]\n"
    "       spprof record --pid PID [--duration S] [-o OUT]\n"
    "       spprof dump PID [--json]\n"
    "       spprof top PID [-d S] [-n N]\n"
    "       spprof attach PID [-d S] [-o OUT] [options]   (CPython 3.14+)"
)

MODES = ("cpu", "wall")
TIMERS = ("auto", "thread", "itimer")
# The interval range SessionConfig accepts, as a rate for -r.
MIN_RATE_HZ, MAX_RATE_HZ = 1.0, 1000.0


def add_session_options(p: argparse.ArgumentParser) -> None:
    """The options that shape a session and its output: one definition for the command line
    and the IPython magics (spprof.ipython)."""
    p.add_argument(
        "-o", "--output", help="profile file to write; its suffix picks the format (see -f)"
    )
    p.add_argument(
        "-f",
        "--format",
        choices=list(FORMATS),
        metavar="FORMAT",
        help="output format: " + ", ".join(FORMATS) + " (default: from the -o suffix, "
        "else speedscope)",
    )
    rate = p.add_mutually_exclusive_group()
    rate.add_argument(
        "-i",
        "--interval",
        type=_interval,
        default=None,
        metavar="MS",
        help="sampling interval in ms, 1-1000 (default 10)",
    )
    rate.add_argument(
        "-r",
        "--rate",
        type=_rate,
        default=None,
        metavar="HZ",
        help="samples per second, 1-1000 (py-spy's name; -r 100 is -i 10)",
    )
    p.add_argument(
        "--mode",
        choices=MODES,
        default="cpu",
        help="cpu: sample by each thread's CPU time (default); wall: elapsed time, "
        "blocked threads too",
    )
    p.add_argument(
        "--timer",
        choices=TIMERS,
        default="auto",
        help="the CPU-time timer: one per thread, the process itimer, or auto (default)",
    )
    p.add_argument("--idle", action="store_true", help="wall mode: keep samples of blocked threads")
    p.add_argument("--gil", action="store_true", help="keep only samples holding the GIL")
    p.add_argument("--native", action="store_true", help="include native C frames")
    add_threads_option(p)
    p.add_argument(
        "--interpreter-frames",
        action="store_true",
        help="with --native: keep CPython's own C frames (folded away by default)",
    )
    p.add_argument(
        "--async",
        dest="async_tasks",
        action="store_true",
        help="asyncio: root each sample at its task (<task> coroutine), not the event loop",
    )
    p.add_argument(
        "--greenlets",
        action="store_true",
        help="wall mode: add each switched-out greenlet (gevent, greenlet) on the line it waits on",
    )
    p.add_argument(
        "--max-overhead",
        type=float,
        default=None,
        metavar="PCT",
        help="overhead budget in percent: widen the interval to stay under it",
    )
    p.add_argument(
        "--subprocesses",
        action="store_true",
        help="profile child processes too (forked, multiprocessing, subprocess): one output",
    )
    p.add_argument(
        "--top", type=int, default=10, metavar="N", help="functions in the summary (default 10)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="no summary on stderr")


def _duration(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds <= 3600:
        raise argparse.ArgumentTypeError(f"duration must be 0-3600 seconds, got {text!r}")
    return seconds


def _interval(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"interval must be a number of milliseconds (1-1000), got {text!r}"
        ) from None


def _rate(text: str) -> float:
    try:
        hz = float(text)
    except ValueError:
        hz = float("nan")
    if not MIN_RATE_HZ <= hz <= MAX_RATE_HZ:  # NaN fails too
        raise argparse.ArgumentTypeError(
            f"rate must be a number of samples per second ({MIN_RATE_HZ:g}-{MAX_RATE_HZ:g}), "
            f"got {text!r}"
        )
    return hz


def interval_ms(opts: argparse.Namespace) -> float:
    """The sampling interval -i or -r asked for (10 ms when neither)."""
    if opts.rate is not None:
        return 1000.0 / float(opts.rate)
    return 10.0 if opts.interval is None else float(opts.interval)


def check_session_options(opts: argparse.Namespace) -> None:
    """What the parser cannot say alone: raise CliError for an option spprof refuses."""
    if opts.top < 1:
        raise CliError(f"--top must be at least 1, got {opts.top}")


def add_threads_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threads",
        action="store_true",
        help="collapsed and flamegraph: each thread as the root frame (py-spy's --threads)",
    )


def output_format(fmt: Optional[str], output: Optional[str]) -> str:
    """The format -f names, else the one -o's suffix names, else speedscope.

    A suffix no format claims is an error: a speedscope file named x.svg would open nowhere.
    A name with no suffix at all (/dev/null, a FIFO, `profile`) gets speedscope.
    """
    if fmt:
        return check_format(fmt)
    if not output or output == "-":
        return "speedscope"
    guessed = guess_format(output)
    # guess_format falls back to speedscope; only a .json name really asks for it.
    suffix = os.path.splitext(os.path.basename(output))[1]
    if guessed == "speedscope" and suffix and suffix.lower() != ".json":
        suffixes = ", ".join(sorted({s for _, s in FORMATS.values()}))
        raise CliError(
            f"cannot tell the output format from the name {output!r}: give -f FORMAT "
            f"({', '.join(FORMATS)}) or a known suffix ({suffixes})"
        )
    return guessed


def session_config(opts: argparse.Namespace, fmt: str) -> Any:
    """The checked SessionConfig for these options (ValueError names the option)."""
    return SessionConfig(
        interval_ms=interval_ms(opts),
        mode=opts.mode,
        native=opts.native,
        output_format=fmt,
        timer=opts.timer,
        interpreter_frames=opts.interpreter_frames,
        max_overhead_pct=opts.max_overhead,
        async_tasks=opts.async_tasks,
        greenlets=opts.greenlets,
        http=getattr(opts, "http", None),
        http_allow_remote=getattr(opts, "http_allow_remote", False),
        subprocesses=bool(getattr(opts, "subprocesses", False)),
    ).validate(names={"max_overhead_pct": "--max-overhead", "http": "--http"})


def keep_requested_samples(profile: ProfileT, opts: argparse.Namespace) -> ProfileT:
    """py-spy's convention: wall mode leaves idle samples out unless --idle; --gil keeps only
    samples whose thread held the GIL."""
    if (opts.mode == "wall" and not opts.idle) or opts.gil:
        return profile.filter(idle=opts.idle or opts.mode != "wall", gil_only=opts.gil)
    return profile


def _parser() -> Parser:
    p = Parser(
        prog="spprof",
        usage=USAGE,
        description="Sampling profiler for Python: profiles every thread of a program.",
        epilog="Options go before the program; everything after it is the program's. "
        "See docs/usage.md.",
    )
    p.add_argument("--version", action="version", version=f"spprof {__version__}")
    add_session_options(p)
    add_http_options(p)
    p.add_argument(
        "-p",
        "--pid",
        default=None,
        metavar="PID",
        help="record a window on the session of a process that runs spprof already",
    )
    p.add_argument(
        "-d",
        "--duration",
        type=_duration,
        default=None,
        metavar="S",
        help="with --pid: seconds to record (default: until Ctrl-C)",
    )
    # -m and -c end spprof's options as they end python's: the rest is the program's argv.
    p.add_argument(
        "-m", dest="module", nargs=argparse.REMAINDER, metavar="module", help="run a module"
    )
    p.add_argument("-c", dest="code", nargs=argparse.REMAINDER, metavar="code", help="run code")
    p.add_argument("target", nargs=argparse.REMAINDER, help="script.py [args]")
    return p


def add_http_options(p: argparse.ArgumentParser) -> None:
    """The pprof endpoint (_http.py): `spprof record` only, it lives as long as the session."""
    p.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="serve /debug/pprof/profile?seconds=N (pprof) on this address (port 0: any free)",
    )
    p.add_argument(
        "--http-allow-remote",
        action="store_true",
        help="let --http listen on an address other than loopback",
    )


def _target(opts: argparse.Namespace) -> tuple[str, Optional[str], list[str]]:
    """(kind, target, program args) from the parsed command line; kind "none" when absent."""
    rest = list(opts.target)
    if rest[:1] == ["--"]:
        rest = rest[1:]
    for kind, words in (("module", opts.module), ("code", opts.code)):
        if words is not None:
            if not words:
                raise CliError(f"argument {'-m' if kind == 'module' else '-c'} expects a value")
            return kind, words[0], [*words[1:], *rest]
    if not rest:
        return "none", None, []
    return "script", rest[0], rest[1:]


def _default_output(kind: str, target: str, fmt: str) -> Path:
    stem = {"script": Path(target).stem, "module": target.replace(".", "_"), "code": "c"}[kind]
    return Path(f"spprof-{stem}-{os.getpid()}{FORMATS[fmt][1]}")


def _prepare(kind: str, target: str, args: list[str]) -> Any:
    """Check the target exists and set sys.argv / sys.path[0]; return a callable that runs it."""
    if kind == "script":
        path = Path(target)
        if not path.exists():
            raise CliError(f"can't open file {target!r}: [Errno 2] No such file or directory")
        if path.is_dir() and not (path / "__main__.py").exists():
            raise CliError(f"can't run {target!r}: it is a directory with no __main__.py")
        try:
            source = path.read_bytes() if path.is_file() else None
            if source is not None:
                compile(source, str(path), "exec")
        except SyntaxError as exc:
            raise CliError(f"{target}:{exc.lineno}: syntax error: {exc.msg}") from None
        except OSError as exc:
            raise CliError(f"can't open file {target!r}: {exc}") from None
        sys.argv = [target, *args]
        sys.path[0] = str(path.resolve().parent if path.is_file() else path.resolve())
        return lambda: runpy.run_path(target, run_name="__main__")
    if kind == "module":
        sys.path[0] = os.getcwd()
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:
            raise CliError(f"No module named {target!r} ({exc})") from None
        if spec is None:
            raise CliError(f"No module named {target!r}")
        if spec.submodule_search_locations is not None:  # a package: python runs its __main__
            try:
                main_spec = importlib.util.find_spec(target + ".__main__")
            except (ImportError, ValueError):
                main_spec = None
            if main_spec is None:
                raise CliError(
                    f"No module named {target}.__main__; {target!r} is a package and cannot be "
                    "directly executed"
                )
        sys.argv = [spec.origin or target, *args]
        return lambda: runpy.run_module(target, run_name="__main__", alter_sys=True)
    code = target
    try:
        compiled = compile(code, "<string>", "exec")
    except SyntaxError as exc:
        raise CliError(f"-c code: syntax error: {exc.msg}") from None
    sys.argv = ["-c", *args]
    sys.path[0] = ""
    main_globals = {"__name__": "__main__", "__builtins__": __builtins__}
    return lambda: exec(compiled, main_globals)


def _launcher_files() -> frozenset[str]:
    """The file that started this process, if it is a launcher of spprof's (the console script).

    Read before the program runs: runpy replaces sys.argv[0] and __main__ for it. Both the name
    as given (frames carry it so; the program may chdir) and the absolute path.
    """
    main = sys.modules.get("__main__")
    names = {sys.argv[0] if sys.argv else "", getattr(main, "__file__", None) or ""}
    out: set[str] = set()
    for name in names:
        if name and not name.startswith("<") and name != "-c" and os.path.isfile(name):
            out |= {name, os.path.abspath(name)}
    return frozenset(out)


def _program_traceback(tb: Optional[TracebackType]) -> Optional[TracebackType]:
    """`tb` without the runner's entries at its root (the launcher, spprof.cli, runpy)."""
    while (
        tb is not None
        and tb.tb_next is not None
        and _runner_frames.is_runner_file(tb.tb_frame.f_code.co_filename)
    ):
        tb = tb.tb_next
    return tb


def _hand_back_to_python() -> None:
    """Make Python print the exception now propagating out of main() as it prints the
    program's own: through whatever sys.excepthook the program left, without our frames."""
    hook = sys.excepthook

    def program_excepthook(
        etype: type[BaseException], value: BaseException, tb: Optional[TracebackType]
    ) -> None:
        tb = _program_traceback(tb)
        if isinstance(value, BaseException):
            value.with_traceback(tb)  # the default hook prints __traceback__, not `tb`
        hook(etype, value, tb)

    sys.excepthook = program_excepthook


class _Recording:
    """Stops the session and writes the profile, once: from the main thread when the program
    ends, or from spprof's exit-signal thread when a signal ends it first."""

    def __init__(
        self,
        opts: argparse.Namespace,
        out: Path,
        fmt: str,
        cfg: Any = None,
        shown_as: str = "",
    ) -> None:
        self._opts = opts
        self._out = out
        self._shown_as = shown_as  # the output path as the user gave it
        self._fmt = fmt
        self._cfg = cfg
        self._pid = os.getpid()  # a forked child's profile is its own (--subprocesses), not ours
        self._lock = threading.Lock()
        self._done = False
        self._write_failed = False
        # The whole profile last written, and (after an exec that failed) the part that goes
        # in front of the next one.
        self._last: Optional[ProfileData] = None
        self._carried: Optional[ProfileData] = None

    def resume(self) -> None:
        """An exec the profile was written for failed: the program goes on, and so does the
        profile (the next one written holds both parts)."""
        with self._lock:
            if self._cfg is None or _session.is_active():
                return
            _session.start_checked(self._cfg, progress=not self._opts.quiet and _stderr.is_tty())
            _session.arm_exit_dump(self._out, self._fmt)
            self._carried, self._done = self._last, False

    def finish(self) -> bool:
        """Write the profile (if not done yet); False when writing it failed."""
        with self._lock:
            if not self._done and os.getpid() == self._pid:
                self._done = True
                self._write_failed = not self._write()
            return not self._write_failed

    def on_exit_signal(self, signum: int) -> None:
        # Runs on spprof's own thread, with the GIL; the process dies by `signum` on return.
        try:
            self.finish()
        except BaseException as exc:  # the process ends either way: say why there is no profile
            _stderr.say(f"spprof: error: could not write the profile: {exc!r}")

    def _write(self) -> bool:
        opts = self._opts
        profile = _session.stop() if _session.is_active() else None
        if profile is None:
            return True
        # Time in the runner before or after the program (runpy setting up, cleaning up) is not
        # the program's (stop() has already cut the runner's frames above the program's).
        runner = _runner_frames.drop_runner_time(profile)
        profile.stats["samples_in_profiler"] = profile.stats.get("samples_in_profiler", 0) + runner
        if self._carried is not None:
            profile, self._carried = _exit_calls.join(self._carried, profile), None
        full = self._last = profile
        profile = keep_requested_samples(profile, opts)
        try:
            written = write(profile, self._out, self._fmt, thread_roots=opts.threads, rescue=True)
        except OSError as exc:
            # The OSError names the output path (output.write says so), not a temp file.
            _stderr.say(f"spprof: error: could not write the profile: {exc}")
            return False
        if not opts.quiet:
            shown = self._shown_as or str(written)
            _stderr.say(
                summary(profile, top=opts.top, output=shown, fmt=self._fmt, threads_of=full)
            )
        return True


def record(argv: list[str]) -> int:
    """`spprof [record] [options] target [args]`: run the target under the profiler."""
    try:
        opts = _parser().parse_args(argv)
        if opts.pid is not None:
            return record_pid(opts, argv, output_format(opts.format, opts.output))
        if opts.duration is not None:
            raise CliError("--duration goes with --pid (a program runs until it ends)")
        kind, target, args = _target(opts)
        if kind == "none" or target is None:
            _parser().print_usage(sys.stderr)
            print(
                "spprof: error: nothing to profile: give a script, -m module or -c code",
                file=sys.stderr,
            )
            return EXIT_USAGE
        check_session_options(opts)
        fmt = output_format(opts.format, opts.output)
        given = Path(opts.output) if opts.output else _default_output(kind, target, fmt)
        # Absolute from here on: the program may chdir (or delete its directory) before the
        # profile is written at its end.
        out = check_writable(given)
        # Every session option is checked before the program runs (too late at start() for
        # -m); the output path above is the CLI's own (it writes the profile itself).
        cfg = session_config(opts, fmt)
        launcher = _launcher_files()
        run = _prepare(kind, target, args)
    except (CliError, ValueError, NotImplementedError, OSError) as exc:
        return error_exit(exc)

    # Sessions the program starts under this runner, and windows on ours, hide it too.
    _runner_frames.add_launchers(launcher)
    recording = _Recording(opts, out, fmt, cfg, str(given))
    try:
        _ext._watch_exit_signals(recording.on_exit_signal)
        watching = True
    except (OSError, RuntimeError) as exc:  # the program runs regardless
        _debug.debug(f"exit signals not watched: {exc}")
        watching = False
    exit_code = 0
    uncaught: Optional[BaseException] = None
    try:
        try:
            _session.start_checked(cfg, progress=not opts.quiet and _stderr.is_tty())
        except OSError as exc:  # --http: the address cannot be bound; the program never ran
            return error_exit(exc)
        _exit_calls.enable(recording.finish, recording.resume)
        if watching:
            _session.arm_exit_dump(out, fmt)
        try:
            run()
        except SystemExit as exc:
            code = exc.code
            if code is None:
                exit_code = 0
            elif isinstance(code, int):
                exit_code = code
            else:
                _stderr.say(str(code))
                exit_code = 1
        except BaseException as exc:  # KeyboardInterrupt too: Python ends the process below
            uncaught = exc
        finally:
            written = recording.finish()
    finally:
        _exit_calls.disable()
        if watching:
            _ext._unwatch_exit_signals()
    if uncaught is not None:
        _hand_back_to_python()
        raise uncaught
    if not written:  # said on stderr; the exit status stays the program's
        _debug.debug("the profile could not be written")
    return exit_code
