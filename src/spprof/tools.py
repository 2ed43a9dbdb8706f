"""`spprof convert` and `spprof report`: work from a saved lossless .spprof file.

    spprof convert IN.spprof [-f FORMAT] [-o OUT|-]   write IN in another format
    spprof report IN.spprof [--top N]                  print the terminal summary

cli.py dispatches here when the *first* argument is exactly a subcommand word (SUBCOMMANDS);
anywhere else the word is a script path (`spprof ./report`, `spprof -- report`). Errors are
one line, `spprof: error: ...`, with exit code 2, like the recording command's.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, NoReturn, Optional

from ._load import load
from .output import FORMATS, check_format, guess_format, render, write
from .report import summary

EXIT_USAGE = 2


class _UsageError(Exception):
    """A bad command line or input file: one line on stderr, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse would print usage + exit itself
        raise _UsageError(f"{self.prog.split()[-1]}: {message}")


def _run(body: Callable[[list[str]], int], argv: list[str]) -> int:
    try:
        return body(argv)
    except _UsageError as exc:
        print(f"spprof: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as exc:  # ProfileFormatError is a ValueError naming the file
        print(f"spprof: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:
        what = f"{exc.filename}: {exc.strerror}" if exc.filename and exc.strerror else exc
        print(f"spprof: error: {what}", file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0


def _convert_parser() -> _Parser:
    p = _Parser(
        prog="spprof convert",
        description="Write a saved .spprof profile in another format.",
        epilog="Formats: " + ", ".join(FORMATS) + ". Without -f the format follows -o's name.",
    )
    p.add_argument("input", help="a profile saved with format 'spprof' (*.spprof)")
    p.add_argument("-f", "--format", help="output format (default: from the -o file name)")
    p.add_argument("-o", "--output", help="file to write, or - for stdout (default: IN + suffix)")
    return p


def _convert(argv: list[str]) -> int:
    opts = _convert_parser().parse_args(argv)
    if opts.format is None and opts.output in (None, "-"):
        raise _UsageError("convert: give the output format with -f FORMAT (or a -o file name)")
    try:
        fmt = check_format(opts.format) if opts.format else guess_format(opts.output)
    except ValueError as exc:
        raise _UsageError(f"convert: {exc}") from None
    src = Path(opts.input)
    profile = load(src)
    if opts.output == "-":
        sys.stdout.buffer.write(render(profile, fmt))
        sys.stdout.buffer.flush()
        return 0
    if opts.output:
        out = Path(opts.output)
    else:
        stem = src.name[: -len(".spprof")] if src.name.endswith(".spprof") else src.name
        out = src.with_name(stem + FORMATS[fmt][1])
    if out.exists() and out.resolve() == src.resolve():
        raise _UsageError(f"convert: the output {out} is the input file; give another -o")
    written = write(profile, out, fmt)
    print(f"spprof: wrote {written} ({fmt})", file=sys.stderr)
    return 0


def _report_parser() -> _Parser:
    p = _Parser(prog="spprof report", description="Print the summary of a saved .spprof profile.")
    p.add_argument("input", help="a profile saved with format 'spprof' (*.spprof)")
    p.add_argument("--top", type=int, default=10, help="functions per table (default 10)")
    return p


def _report(argv: list[str]) -> int:
    opts = _report_parser().parse_args(argv)
    if opts.top < 1:
        raise _UsageError(f"report: --top must be at least 1, got {opts.top}")
    profile = load(opts.input)
    print(summary(profile, top=opts.top))
    return 0


def main_convert(argv: Optional[list[str]] = None) -> int:
    return _run(_convert, list(sys.argv[2:] if argv is None else argv))


def main_report(argv: Optional[list[str]] = None) -> int:
    return _run(_report, list(sys.argv[2:] if argv is None else argv))


# First-argument words cli.main hands over to (the rest of argv goes to the function).
SUBCOMMANDS: dict[str, Callable[[list[str]], int]] = {
    "convert": main_convert,
    "report": main_report,
}
