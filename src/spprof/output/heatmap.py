"""A line heatmap: one self-contained HTML page with the source of the hottest files and the
time spent on each line, like Scalene's and CPython 3.15's heatmaps.

Per line, two times over all threads: self (the line was running: the sample's innermost
frame was on it) and total (the line was on the stack: running, or calling something that
was; a sample counts once per line even when the line is on the stack twice). Files are
ranked by the self time of their lines and the HOTTEST_FILES first are shown; each shows
its source with lines shaded by self time, stretches of more than 2 * CONTEXT lines without
samples folded to one row.

The source is read when the page is rendered (as tracebacks do, through linecache): the
page shows the file as it is then. A file that cannot be read (gone, or `<string>`) shows
its sampled lines without their text, and says so.
"""

from __future__ import annotations

import html
import json
import linecache
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

if TYPE_CHECKING:
    from .._model import ProfileData

HOTTEST_FILES = 10
CONTEXT = 3  # unsampled lines kept around sampled ones


@dataclass
class FileHeat:
    """Per-line times of one source file."""

    path: str
    self_ns: dict[int, int] = field(default_factory=dict)
    total_ns: dict[int, int] = field(default_factory=dict)
    self_samples: dict[int, int] = field(default_factory=dict)
    file_total_ns: int = 0  # time with any of its lines on the stack, each sample once

    @property
    def file_self_ns(self) -> int:
        return sum(self.self_ns.values())


def line_heat(profile: ProfileData) -> dict[str, FileHeat]:
    """{file: FileHeat} for every Python file with samples (native frames have no lines)."""
    files: dict[str, FileHeat] = {}
    table = profile.frame_table
    by_stack: dict[int, list[int]] = {}
    for (_, stack), (n, w) in profile.stack_weights().items():
        acc = by_stack.setdefault(stack, [0, 0])
        acc[0] += n
        acc[1] += w
    for stack, (n, w) in by_stack.items():
        ids = profile.stacks[stack]
        seen: set[tuple[str, int]] = set()
        seen_files: set[str] = set()
        leaf = next((i for i in reversed(ids) if not table[i].is_native), None)
        for fid in ids:
            f = table[fid]
            if f.is_native or not f.filename or f.lineno <= 0:
                continue
            heat = files.get(f.filename)
            if heat is None:
                heat = files[f.filename] = FileHeat(f.filename)
            if (f.filename, f.lineno) not in seen:
                seen.add((f.filename, f.lineno))
                heat.total_ns[f.lineno] = heat.total_ns.get(f.lineno, 0) + w
            if f.filename not in seen_files:
                seen_files.add(f.filename)
                heat.file_total_ns += w
            if fid == leaf:
                heat.self_ns[f.lineno] = heat.self_ns.get(f.lineno, 0) + w
                heat.self_samples[f.lineno] = heat.self_samples.get(f.lineno, 0) + n
    return files


def off_line_time(profile: ProfileData) -> dict[str, int]:
    """{frame name: time} of the samples whose running Python frame has no source line: a
    frame spprof makes (<GC>: the cyclic garbage collector, <subinterpreter N>). Its lines'
    total time includes it; no line's self time does."""
    table = profile.frame_table
    out: dict[str, int] = {}
    for (_, stack), (_n, w) in profile.stack_weights().items():
        ids = profile.stacks[stack]
        leaf = next((table[i] for i in reversed(ids) if not table[i].is_native), None)
        if leaf is not None and not leaf.filename and leaf.function_name.startswith("<"):
            out[leaf.function_name] = out.get(leaf.function_name, 0) + w
    return out


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.1f} ms" if ns else ""


def _pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f}%" if whole and part else ""


def _source(path: str, read: Callable[[str], list[str]]) -> Optional[list[str]]:
    try:
        lines = read(path)
    except (OSError, UnicodeDecodeError):
        return None
    return lines or None


def _linecache(path: str) -> list[str]:
    return linecache.getlines(path)


STYLE = """
  body { margin: 0; font: 13px/1.4 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
         color: #1d1d1f; background: #fbfbfd; }
  header { padding: 10px 16px; border-bottom: 1px solid #d2d2d7; background: #fff; }
  h1 { font-size: 16px; margin: 0 0 4px; }
  h2 { font-size: 14px; margin: 18px 16px 6px; word-break: break-all; }
  .meta, .note { color: #6e6e73; font-size: 12px; }
  .note { margin: 0 16px 6px; }
  ol.files { margin: 6px 0 0; padding-left: 22px; }
  table.src { border-collapse: collapse; margin: 0 16px; width: calc(100% - 32px);
              font: 12px/1.45 Menlo, Consolas, "DejaVu Sans Mono", monospace; }
  table.src td { padding: 0 6px; white-space: pre; vertical-align: top; }
  table.src td.n, table.src td.t { text-align: right; color: #6e6e73; width: 1%; }
  table.src td.t { color: #1d1d1f; }
  table.src th { text-align: right; font: 600 11px sans-serif; color: #6e6e73; padding: 2px 6px; }
  table.src th.code { text-align: left; }
  tr.gap td { color: #a1a1a6; font-style: italic; background: #f2f2f5; }
  td.code { width: 100%; }
"""


def _row_color(self_ns: int, hottest: int) -> str:
    if not self_ns or not hottest:
        return ""
    a = 0.08 + 0.72 * self_ns / hottest
    return f' style="background: rgba(255,80,0,{a:.2f})"'


def render(
    profile: ProfileData,
    files: int = HOTTEST_FILES,
    read_source: Callable[[str], list[str]] = _linecache,
) -> bytes:
    heat = line_heat(profile)
    whole = profile.total_weight_ns
    ranked = sorted(heat.values(), key=lambda h: (-h.file_self_ns, -h.file_total_ns, h.path))
    shown = [h for h in ranked if h.file_self_ns or h.file_total_ns][:files]
    hottest = max((max(h.self_ns.values(), default=0) for h in shown), default=0)
    esc = html.escape
    name = str(profile.metadata.get("name", "profile"))
    out: list[str] = []
    out.append(
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>spprof heatmap \u2014 {esc(name)}</title><style>{STYLE}</style></head><body>"
    )
    out.append(f"<header><h1>spprof line heatmap \u2014 {esc(name)}</h1>")
    out.append(
        f'<div class="meta">{profile.sample_count} samples, {whole / 1e9:.2f} s sampled '
        f"over {profile.duration_ns / 1e9:.2f} s \u00b7 {profile.mode} mode, "
        f"{profile.interval_ms:g} ms interval \u00b7 self: the line was running; total: it "
        "was on the stack. Percentages are of all sampled time.</div>"
    )
    off_line = off_line_time(profile)
    if off_line:
        parts = ", ".join(
            f"{esc(k)} {_ms(v)} ({_pct(v, whole)})"
            for k, v in sorted(off_line.items(), key=lambda kv: -kv[1])
        )
        out.append(
            f'<div class="meta">Running on no source line: {parts}; in the total time of the '
            "lines that were on the stack.</div>"
        )
    if len(ranked) > len(shown):
        out.append(f'<div class="meta">The {len(shown)} hottest of {len(ranked)} files.</div>')
    out.append('<ol class="files">')
    for i, h in enumerate(shown):
        out.append(
            f'<li><a href="#file-{i}">{esc(h.path)}</a> \u2014 self '
            f"{_pct(h.file_self_ns, whole) or '0%'}, total {_pct(h.file_total_ns, whole)}</li>"
        )
    out.append("</ol></header>")
    if not shown:
        out.append('<p class="note">No samples with a Python line.</p>')
    for i, h in enumerate(shown):
        out.append(
            f'<section class="file" id="file-{i}" data-path="{esc(h.path, quote=True)}">'
            f"<h2>{esc(h.path)}</h2>"
            f'<div class="note">self {_ms(h.file_self_ns) or "0 ms"} '
            f"({_pct(h.file_self_ns, whole) or '0%'}), total {_ms(h.file_total_ns)} "
            f"({_pct(h.file_total_ns, whole)})</div>"
        )
        src = _source(h.path, read_source)
        sampled = sorted(set(h.total_ns) | set(h.self_ns))
        if src is None:
            out.append('<div class="note">Source not available; sampled lines only.</div>')
            keep = sampled
        else:
            wanted: set[int] = set()
            for line in sampled:
                wanted.update(range(max(1, line - CONTEXT), line + CONTEXT + 1))
            keep = [n for n in range(1, len(src) + 1) if n in wanted]
            keep += [n for n in sampled if n > len(src)]  # file changed since: still shown
        out.append(
            '<table class="src"><tr><th>line</th><th>self</th><th>self %</th>'
            '<th>total</th><th>total %</th><th class="code">source</th></tr>'
        )
        prev = 0
        for n in keep:
            if n > prev + 1 and src is not None:
                out.append(
                    f'<tr class="gap"><td class="n"></td><td colspan="4"></td>'
                    f'<td class="code">\u22ef {n - prev - 1} lines without samples</td></tr>'
                )
            prev = n
            s, t = h.self_ns.get(n, 0), h.total_ns.get(n, 0)
            text = src[n - 1].rstrip("\r\n") if src is not None and n <= len(src) else ""
            out.append(
                f'<tr class="line" data-line="{n}" data-self-ns="{s}" data-total-ns="{t}"'
                f'{_row_color(s, hottest)}><td class="n">{n}</td><td class="t">{_ms(s)}</td>'
                f'<td class="t">{_pct(s, whole)}</td><td class="t">{_ms(t)}</td>'
                f'<td class="t">{_pct(t, whole)}</td><td class="code">{esc(text)}</td></tr>'
            )
        if src is not None and prev < len(src):
            out.append(
                f'<tr class="gap"><td class="n"></td><td colspan="4"></td>'
                f'<td class="code">\u22ef {len(src) - prev} lines without samples</td></tr>'
            )
        out.append("</table></section>")
    summary = {"files": [h.path for h in shown], "total_ns": whole}
    # The page's one script: it marks the page loaded (tests look for it) and records errors.
    out.append(
        '<script type="application/json" id="spprof-heatmap">'
        + json.dumps(summary).replace("</", "<\\/")
        + "</script><script>"
        'window.addEventListener("error", function (e) {'
        " var el = document.documentElement;"
        ' el.dataset.errors = (el.dataset.errors || "") + e.message + "\\n"; });'
        ' JSON.parse(document.getElementById("spprof-heatmap").textContent);'
        ' document.body.dataset.ready = "1";</script>'
    )
    out.append("</body></html>\n")
    return "".join(out).encode("utf-8")
