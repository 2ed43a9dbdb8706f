"""spprof's command line (`python -m spprof`, the `spprof` console script): one entry, main().

    spprof [record] [options] (script.py | -m module | -c code) [args]   cli/record.py
    spprof convert IN.spprof [-f FORMAT] [-o OUT|-]                     cli/convert.py
    spprof report IN.spprof [--top N] [--diff BASE]                     cli/report.py
    spprof diff BASE.spprof NEW.spprof [-o OUT] [-f html|collapsed]     cli/diff.py
    spprof diff --base FILE... --new FILE... [-o OUT] [-f ...]          cli/diff.py
    spprof record --pid PID [--duration S] [-o OUT]                     cli/record_pid.py
    spprof dump PID [--json]                                            cli/dump.py
    spprof top PID [-d S] [-n N]                                        cli/top.py
    spprof attach PID [-d S] [-o OUT] [options]   (CPython 3.14+)       cli/attach.py

A subcommand word counts only as the very first argument: anything else (`spprof ./report`,
`spprof -- report`, `spprof script.py`) means record. Errors: cli/errors.py.

A reader that closes the pipe early (`spprof report f | head`) ends the subcommands that print
(report, convert -o -, diff -o -) quietly with exit 0: the reader got what it asked for, and
`set -o pipefail` scripts stay green. `record` leaves the program's own broken pipes alone.
"""

from __future__ import annotations

import os
import sys
from typing import Callable, Optional

from . import attach, convert, diff, dump, record, report, top

# First-argument words main() hands the rest of argv to.
SUBCOMMAND_DISPATCH: dict[str, Callable[[list[str]], int]] = {
    "record": record.record,
    "convert": convert.main,
    "report": report.main,
    "diff": diff.main,
    "dump": dump.main,
    "top": top.main,
    "attach": attach.main,
}


def _quiet_broken_pipe(body: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a printing subcommand; the reader closing the pipe ends it with exit 0, no message.

    As the Python docs' "Note on SIGPIPE" says: point stdout at /dev/null so that the flush
    at interpreter exit does not raise again.
    """
    try:
        code = body(argv)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 0


def main(argv: Optional[list[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in SUBCOMMAND_DISPATCH:
        if argv[0] == "record":
            return record.record(argv[1:])
        return _quiet_broken_pipe(SUBCOMMAND_DISPATCH[argv[0]], argv[1:])
    return record.record(argv)
