"""`spprof report IN.spprof [IN2.spprof ...] [--top N] [--diff BASE]`: print the terminal
summary of a saved profile (several: merged), or the functions whose share of time changed
most since BASE."""

from __future__ import annotations

import sys
from typing import Optional

from .._load import load
from ..output.report import summary
from .diff import diff_module
from .errors import CliError, Parser, guarded
from .inputs import load_inputs


def _parser() -> Parser:
    p = Parser(prog="spprof report", description="Print the summary of a saved .spprof profile.")
    p.add_argument(
        "input",
        nargs="+",
        help="a profile saved with format 'spprof' (*.spprof); several are merged, each "
        "thread named with its process",
    )
    p.add_argument("--top", type=int, default=10, help="functions per table (default 10)")
    p.add_argument(
        "--diff",
        metavar="BASE",
        help="print the top changes from BASE (a .spprof file) to IN instead of the summary",
    )
    return p


def _report(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    if opts.top < 1:
        raise CliError(f"report: --top must be at least 1, got {opts.top}")
    if opts.diff is not None:
        diff = diff_module("report --diff")
        base, new = load(opts.diff), load_inputs(opts.input, "report")
        print(str(diff.format_top_changes(diff.top_changes(base, new, limit=opts.top))))
        return 0
    profile = load_inputs(opts.input, "report")
    print(summary(profile, top=opts.top))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_report, list(sys.argv[2:] if argv is None else argv))
