"""IPython / Jupyter magics: `%load_ext spprof`, then

    %%spprof [options]          profile the cell
    %spprof [options] statement profile one statement

Options are words separated by spaces (no shell quoting), and the statement after them is
run exactly as typed. They are the command line's (cli.record.add_session_options: -i/-r,
--mode, --timer, --idle, --gil, --native, --max-overhead, -o/-f, --top, -q). The code runs in
the user's namespace under the profiler; the HTML flame graph (output.html) is then shown
inline, in an iframe so that its page and the notebook's styles and scripts stay apart, with
a line of text in its place where HTML cannot be shown (terminal IPython). -o
also writes the profile to a file, in the format its suffix (or -f) names. The summary is
printed unless -q.

IPython is imported only through the shell that loads the extension, never by `import spprof`.
"""

from __future__ import annotations

import argparse
import html
import importlib
import re
import sys
from pathlib import Path
from typing import Any, Optional

from . import _session
from .cli.errors import CliError, Parser
from .cli.record import (
    add_session_options,
    check_session_options,
    keep_requested_samples,
    output_format,
    session_config,
)
from .output import html as html_output
from .output import write
from .output.report import summary

# Height of the inline flame graph; the page scrolls inside it.
IFRAME_HEIGHT_PX = 600


def _parser() -> Parser:
    p = Parser(
        prog="%spprof",
        description="Profile a cell (%%spprof) or a statement (%spprof) with spprof and show "
        "its flame graph.",
    )
    add_session_options(p)
    p.add_argument("statement", nargs=argparse.REMAINDER, help="line magic: the code to run")
    return p


def _runner_files() -> frozenset[str]:
    """The files on the stack that runs the magic (IPython, ipykernel, asyncio, spprof):
    frames of theirs at a stack's root are the runner's, not the profiled code's."""
    files = set()
    frame: Any = sys._getframe(1)
    while frame is not None:
        files.add(frame.f_code.co_filename)
        frame = frame.f_back
    return frozenset(files)


def inline_html(page: bytes) -> str:
    """The HTML flame graph page, as notebook output: an iframe holding the whole page."""
    doc = html.escape(page.decode("utf-8"), quote=True)
    return (
        f'<iframe srcdoc="{doc}" style="width:100%;height:{IFRAME_HEIGHT_PX}px;border:0" '
        'sandbox="allow-scripts"></iframe>'
    )


def plain_text(samples: int, written: str) -> str:
    """What a frontend that cannot show HTML (terminal IPython) shows instead of the flame graph."""
    where = f"the profile is in {written}" if written else "-o FILE.html writes it to a file"
    return f"spprof: {samples} samples; the flame graph shows in a notebook ({where})"


class SpprofMagic:
    """The `spprof` line/cell magic of one IPython shell."""

    def __init__(self, shell: Any) -> None:
        self.shell = shell
        self.last_profile: Optional[Any] = None  # the Profile of the last run, for inspection

    def __call__(self, line: str, cell: Optional[str] = None) -> None:
        usage_error = importlib.import_module("IPython.core.error").UsageError
        words = [(m.group(), m.start()) for m in re.finditer(r"\S+", line)]
        try:
            opts = _parser().parse_args([w for w, _ in words])
            check_session_options(opts)
            fmt = output_format(opts.format, opts.output)
            cfg = session_config(opts, fmt)
        except (CliError, ValueError) as exc:
            raise usage_error(str(exc)) from None
        except SystemExit:  # --help printed
            return
        statement = list(opts.statement)
        skip = 1 if statement[:1] == ["--"] else 0
        if cell is not None and statement[skip:]:
            raise usage_error("%%spprof takes options only; the code is the cell's")
        # The statement as typed (quotes, spacing): from its first word to the end of the line.
        first = len(words) - len(statement) + skip
        source = cell if cell is not None else (line[words[first][1] :] if statement[skip:] else "")
        if not source.strip():
            raise usage_error("%spprof: nothing to profile: give a statement, or use %%spprof")
        code = self._compile(source)
        runner = _runner_files()
        namespace = self.shell.user_ns
        _session.start_checked(cfg)
        try:
            exec(code, namespace)
        finally:
            profile = _session.stop()
            # IPython's time alone (no frame of the cell): not the cell's
            profile.drop_stacks_if(
                lambda frames: (
                    any(not f.is_native for f in frames)
                    and all(f.filename in runner for f in frames if not f.is_native)
                )
            )
            profile.drop_root_frames(lambda frame: frame.filename in runner)
            self._show(profile, opts, fmt)

    def _compile(self, source: str) -> Any:
        """Compile IPython syntax (magics, !shell) as a cell would, under a file name that
        linecache knows, so tracebacks show the cell's lines."""
        transformed = self.shell.transform_cell(source)
        name = "<spprof>"
        cache = getattr(self.shell.compile, "cache", None)
        if cache is not None:
            name = cache(transformed, self.shell.execution_count, raw_code=source)
        return compile(transformed, name, "exec")

    def _show(self, profile: Any, opts: argparse.Namespace, fmt: str) -> None:
        self.last_profile = profile
        kept = keep_requested_samples(profile, opts)
        written = ""
        if opts.output:
            written = str(write(kept, Path(opts.output), fmt, thread_roots=opts.threads))
        if not opts.quiet:
            print(summary(kept, top=opts.top, output=written, fmt=fmt, threads_of=profile))
        display = importlib.import_module("IPython.display")
        # A raw bundle, not display.HTML: that class warns about any page starting with
        # <iframe, and a terminal shows its repr; the text is what a frontend without HTML shows.
        bundle = {
            "text/html": inline_html(html_output.render(kept)),
            "text/plain": plain_text(kept.sample_count, written),
        }
        display.display(bundle, raw=True)


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext spprof`: register %spprof / %%spprof on this shell."""
    ipython.register_magic_function(
        SpprofMagic(ipython), magic_kind="line_cell", magic_name="spprof"
    )
