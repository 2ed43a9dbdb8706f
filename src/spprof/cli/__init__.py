"""spprof's command line (`python -m spprof`, the `spprof` console script): one entry, main().

    spprof [record] [options] (script.py | -m module | -c code) [args]   cli/record.py
    spprof convert IN.spprof [-f FORMAT] [-o OUT|-]                     cli/convert.py
    spprof report IN.spprof [--top N]                                   cli/report.py

A subcommand word counts only as the very first argument: anything else (`spprof ./report`,
`spprof -- report`, `spprof script.py`) means record. Errors: cli/errors.py.
"""

from __future__ import annotations

import sys
from typing import Callable, Optional

from . import convert, record, report

# First-argument words main() hands the rest of argv to.
SUBCOMMAND_DISPATCH: dict[str, Callable[[list[str]], int]] = {
    "record": record.record,
    "convert": convert.main,
    "report": report.main,
}


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMAND_DISPATCH:
        return SUBCOMMAND_DISPATCH[argv[0]](argv[1:])
    return record.record(argv)
