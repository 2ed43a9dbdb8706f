"""The one error convention of spprof's command line: CliError, its exit code, its message.

Every subcommand raises CliError (or lets ValueError / OSError / NotImplementedError out of
the API) for a bad command line or input; `error_exit` prints it as one line,
`spprof: error: ...`, and returns EXIT_USAGE. A program run under `record` keeps its own exit.
"""

from __future__ import annotations

import argparse
import sys
from typing import Callable, NoReturn

# argparse's own code for a bad command line; every spprof usage error uses it too.
EXIT_USAGE = 2


class CliError(Exception):
    """A problem with the command line or its target: printed as one line, exit code 2."""


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are CliError (argparse would print usage and exit)."""

    def error(self, message: str) -> NoReturn:
        name = self.prog.split()[-1]
        raise CliError(message if name == "spprof" else f"{name}: {message}")


def error_exit(exc: Exception) -> int:
    """Print `exc` as `spprof: error: ...` on stderr; return EXIT_USAGE."""
    what: object = exc
    if isinstance(exc, OSError) and exc.filename and exc.strerror:
        what = f"{exc.filename}: {exc.strerror}"
    print(f"spprof: error: {what}", file=sys.stderr)
    return EXIT_USAGE


def guarded(body: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a subcommand's body; a usage or input error becomes its message and EXIT_USAGE."""
    try:
        return body(argv)
    except BrokenPipeError:  # the reader left: cli.main ends quietly
        raise
    except (CliError, ValueError, NotImplementedError, OSError) as exc:
        # ValueError covers ProfileFormatError, which names the file.
        return error_exit(exc)
    except SystemExit as exc:  # --help
        return exc.code if isinstance(exc.code, int) else 0
