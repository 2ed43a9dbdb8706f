"""`spprof diff BASE NEW [-o OUT] [-f html|collapsed]`: a differential flame graph.
`spprof diff --base B1 B2 ... --new N1 N2 ...`: each side several files (workers profiled
apart), merged as `report` and `convert` merge them (cli/inputs.py).

The rendering is spprof.output.diff's; this module reads the two profiles, picks the format
from -f or the -o suffix, and writes the file as every other output is written (atomically).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

from .._model import ProfileData
from ..output import _probe, _replace, _target, _write_through
from .errors import CliError, Parser, guarded
from .inputs import load_inputs

# -f name -> the default suffix; the renderers are looked up when used (output.diff).
DIFF_FORMATS = {"html": ".diff.html", "collapsed": ".diff.collapsed.txt"}


def _parser() -> Parser:
    p = Parser(
        prog="spprof diff",
        description="Compare two saved .spprof profiles: a differential flame graph, "
        "normalised by total time, red where NEW spends more, blue where less.",
        epilog="html: an interactive page; collapsed: flamegraph.pl's difffolded input "
        "(`flamegraph.pl` reads it directly). `spprof report NEW --diff BASE` prints the "
        "top changes instead.",
    )
    p.add_argument("base", nargs="?", help="the profile before (a .spprof file)")
    p.add_argument("new", nargs="?", help="the profile after (a .spprof file)")
    p.add_argument(
        "--base",
        dest="bases",
        nargs="+",
        metavar="FILE",
        help="instead of BASE: several files, merged (each thread under its process)",
    )
    p.add_argument(
        "--new", dest="news", nargs="+", metavar="FILE", help="instead of NEW: several files"
    )
    p.add_argument(
        "-f", "--format", choices=list(DIFF_FORMATS), help="default: from -o's suffix, else html"
    )
    p.add_argument("-o", "--output", help="file to write, or - for stdout (default: NEW.diff.html)")
    return p


def _format(fmt: Optional[str], output: Optional[str]) -> str:
    if fmt:
        return fmt
    if not output or output == "-":
        return "html"
    name = output.lower()
    if name.endswith((".html", ".htm")):
        return "html"
    if name.endswith((".txt", ".folded", ".collapsed")):
        return "collapsed"
    raise CliError(
        f"diff: cannot tell the output format from the name {output!r}: give -f html or "
        "-f collapsed, or a .html / .txt name"
    )


def diff_module(command: str) -> ModuleType:
    """spprof.output.diff, imported when used (CliError naming `command` if it is missing)."""
    try:
        return importlib.import_module("spprof.output.diff")
    except ImportError:
        raise CliError(f"{command}: this spprof has no diff support (spprof.output.diff)") from None


def renderer(fmt: str) -> Callable[[ProfileData, ProfileData], bytes]:
    """output.diff's renderer for `fmt`."""
    diff = diff_module("diff")
    render: Callable[[ProfileData, ProfileData], bytes] = (
        diff.render_diff_html if fmt == "html" else diff.render_diff_collapsed
    )
    return render


def _write(path: Path, data: bytes) -> Path:
    t = _target(path)
    _probe(t)
    try:
        if t.kind == "replace":
            _replace(t.real, data, t.mode)
        else:
            _write_through(t.real, data)
    except OSError as exc:
        raise OSError(exc.errno, f"output path {t.path}: {exc.strerror or exc}") from exc
    return t.path


def _sides(opts: argparse.Namespace) -> tuple[list[str], list[str]]:
    """(base files, new files): BASE NEW, or --base ... --new ..., not a mix."""
    if opts.bases or opts.news:
        if opts.base is not None or not (opts.bases and opts.news):
            raise CliError("diff: give BASE NEW, or both --base FILE... and --new FILE...")
        return list(opts.bases), list(opts.news)
    if opts.new is None:
        raise CliError("diff: give two profiles, BASE and NEW")
    return [opts.base], [opts.new]


def _diff(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    fmt = _format(opts.format, opts.output)
    render = renderer(fmt)
    bases, news = _sides(opts)
    base, new = load_inputs(bases, "diff"), load_inputs(news, "diff")
    data = render(base, new)
    if opts.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    if opts.output:
        out = Path(opts.output)
    else:
        src = Path(news[0])
        stem = src.name[: -len(".spprof")] if src.name.endswith(".spprof") else src.name
        out = src.with_name(stem + DIFF_FORMATS[fmt])
    written = _write(out, data)
    print(f"spprof: wrote {written} (diff, {fmt})", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_diff, list(sys.argv[2:] if argv is None else argv))
