"""`spprof convert IN.spprof [IN2.spprof ...] [-f FORMAT] [-o OUT|-]`: write a saved profile
(several: merged) in another format."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

from ..output import FORMATS, render, write
from .errors import CliError, Parser, guarded
from .inputs import load_inputs
from .record import add_threads_option, output_format


def _parser() -> Parser:
    p = Parser(
        prog="spprof convert",
        description="Write a saved .spprof profile in another format.",
        epilog="Formats: " + ", ".join(FORMATS) + ". Without -f the format follows -o's name.",
    )
    p.add_argument(
        "input",
        nargs="+",
        help="a profile saved with format 'spprof' (*.spprof); several are merged, each "
        "thread named with its process",
    )
    p.add_argument(
        "-f",
        "--format",
        help="output format (default: from the -o file name)",
    )
    p.add_argument("-o", "--output", help="file to write, or - for stdout (default: IN + suffix)")
    add_threads_option(p)
    return p


def _convert(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    if opts.format is None and opts.output in (None, "-"):
        raise CliError("convert: give the output format with -f FORMAT (or a -o file name)")
    try:
        fmt = output_format(opts.format, opts.output)
    except (ValueError, CliError) as exc:
        raise CliError(f"convert: {exc}") from None
    src = Path(opts.input[0])
    profile = load_inputs(opts.input, "convert")
    if opts.output == "-":
        sys.stdout.buffer.write(render(profile, fmt, opts.threads))
        sys.stdout.buffer.flush()
        return 0
    if opts.output:
        out = Path(opts.output)
    else:
        stem = src.name[: -len(".spprof")] if src.name.endswith(".spprof") else src.name
        out = src.with_name(stem + FORMATS[fmt][1])
    if out.exists() and out.resolve() == src.resolve():
        raise CliError(f"convert: the output {out} is the input file; give another -o")
    written = write(profile, out, fmt, thread_roots=opts.threads)
    print(f"spprof: wrote {written} ({fmt})", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_convert, list(sys.argv[2:] if argv is None else argv))
