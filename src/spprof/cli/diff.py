"""`spprof diff BASE NEW [-o OUT] [-f html|collapsed]`: a differential flame graph.

The rendering is spprof.output.diff's; this module reads the two profiles, picks the format
from -f or the -o suffix, and writes the file as every other output is written (atomically).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import Callable, Optional

from .._load import load
from .._model import ProfileData
from ..output import _probe, _replace, _target, _write_through
from .errors import CliError, Parser, guarded

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
    p.add_argument("base", help="the profile before (a .spprof file)")
    p.add_argument("new", help="the profile after (a .spprof file)")
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


def _diff(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    fmt = _format(opts.format, opts.output)
    render = renderer(fmt)
    base, new = load(opts.base), load(opts.new)
    data = render(base, new)
    if opts.output == "-":
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    if opts.output:
        out = Path(opts.output)
    else:
        src = Path(opts.new)
        stem = src.name[: -len(".spprof")] if src.name.endswith(".spprof") else src.name
        out = src.with_name(stem + DIFF_FORMATS[fmt])
    written = _write(out, data)
    print(f"spprof: wrote {written} (diff, {fmt})", file=sys.stderr)
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_diff, list(sys.argv[2:] if argv is None else argv))
