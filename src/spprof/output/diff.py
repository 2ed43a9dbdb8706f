"""Comparing two profiles: a differential flame graph, flamegraph.pl's difffolded input and
the functions whose share of time changed most.

Everything is normalised by total sampled time, so a run twice as long (or sampled at
another interval) compares fairly: a frame's share is its time over its profile's total.

- `render_diff_html(base, new)`: one self-contained HTML page (no network) with the flame
  graph of NEW, each frame coloured by how its share of total time changed from BASE: red
  where NEW spends more, blue where less, white where equal, the intensity scaled to the
  largest change; the tooltip gives both shares, both times and the change in percentage
  points. Search and click-to-zoom as in the SVG flame graph. Frames present only in BASE
  have no width in NEW's graph; the table of top changes under it lists them.
- `render_diff_collapsed(base, new)`: `stack count_base count_new` lines, flamegraph.pl's
  difffolded input, in microseconds, with BASE scaled to NEW's total (what difffolded.pl -n
  does), so `flamegraph.pl` draws the normalised difference.
- `top_changes(base, new)`: functions by the change of their self time's share (what
  `spprof report NEW --diff BASE` prints, via `format_top_changes`).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from . import collapsed, flamegraph
from ._flame import Drawing, Node, build_tree, pct, render_svg, seconds

if TYPE_CHECKING:
    from .._model import ProfileData


@dataclass(frozen=True)
class Change:
    """One function's share of self time in BASE and NEW (percent of each total)."""

    function: str
    file: str
    line: int  # the function's first line
    base_pct: float
    new_pct: float
    delta_pct: float  # new_pct - base_pct, in percentage points


def _self_shares(profile: ProfileData) -> dict[tuple[str, str, int], float]:
    total = profile.total_weight_ns
    if not total:
        return {}
    return {
        (f.qualname, f.filename, f.first_lineno): 100.0 * f.self_ns / total
        for f in profile.aggregate()
    }


def top_changes(base: ProfileData, new: ProfileData, limit: int = 20) -> list[Change]:
    """The `limit` functions whose share of self time changed most, largest |change| first
    (ties: by name); a function missing from one profile has 0% there. Functions whose
    share did not change are left out."""
    b, n = _self_shares(base), _self_shares(new)
    changes = [
        Change(key[0], key[1], key[2], b.get(key, 0.0), n.get(key, 0.0), 0.0)
        for key in set(b) | set(n)
        if b.get(key, 0.0) != n.get(key, 0.0)  # unchanged (often 0% in both): no change
    ]
    changes = [
        Change(c.function, c.file, c.line, c.base_pct, c.new_pct, c.new_pct - c.base_pct)
        for c in changes
    ]
    changes.sort(key=lambda c: (-abs(c.delta_pct), c.function, c.file, c.line))
    return changes[: max(0, limit)]


def format_top_changes(changes: list[Change]) -> str:
    """The changes as a text table (80 columns), one function a line."""
    lines = [f"  {'BASE%':>6} {'NEW%':>6} {'CHANGE':>7}  FUNCTION (self time)"]
    for c in changes:
        where = f"{c.file}:{c.line}" if c.file else ""
        lines.append(
            f"  {c.base_pct:6.1f} {c.new_pct:6.1f} {c.delta_pct:+7.1f}  {c.function}"
            + (f" ({where})" if where else "")
        )
    if not changes:
        lines.append("  (no function's share of self time changed)")
    return "\n".join(lines) + "\n"


# ---- the differential flame graph --------------------------------------------------------


def _find(base_root: Node, path: list[Node]) -> Optional[Node]:
    cur: Optional[Node] = base_root
    for node in path:
        if cur is None:
            return None
        cur = cur.children.get((node.name, node.file, node.first_line))
    return cur


def _annotate(new_root: Node, base_root: Node) -> dict[int, tuple[float, float, int]]:
    """id(new node) -> (base share, new share, base time) for every node of NEW's tree."""
    out: dict[int, tuple[float, float, int]] = {}
    bt, nt = base_root.total_ns, new_root.total_ns
    todo: list[tuple[Node, Optional[Node]]] = [
        (k, base_root.children.get(key)) for key, k in new_root.children.items()
    ]
    while todo:
        node, match = todo.pop()
        base_ns = match.total_ns if match is not None else 0
        out[id(node)] = (base_ns / bt if bt else 0.0, node.total_ns / nt if nt else 0.0, base_ns)
        for key, k in node.children.items():
            todo.append((k, match.children.get(key) if match is not None else None))
    return out


def _diff_color(delta: float, biggest: float) -> str:
    """White at no change, to full red (more in NEW) or blue (less) at the largest change."""
    if biggest <= 0 or abs(delta) < 1e-12:
        return "rgb(250,250,250)"
    k = min(1.0, abs(delta) / biggest)
    fade = int(250 - 190 * k)
    return f"rgb(250,{fade},{fade})" if delta > 0 else f"rgb({fade},{fade},250)"


def diff_drawing(base: ProfileData, new: ProfileData, new_root: Node, base_root: Node) -> Drawing:
    shares = _annotate(new_root, base_root)
    biggest = max((abs(n - b) for b, n, _ in shares.values()), default=0.0)

    def color(node: Node) -> str:
        b, n, _ = shares.get(id(node), (0.0, 0.0, 0))
        return _diff_color(n - b, biggest)

    def tip(node: Node, total: float) -> str:
        b, n, base_ns = shares.get(id(node), (0.0, 0.0, 0))
        lines = [node.name]
        if node.where:
            lines.append(node.where)
        lines.append(f"NEW: {100 * n:.2f}% of total ({seconds(node.total_ns)})")
        lines.append(f"BASE: {100 * b:.2f}% of total ({seconds(base_ns)})")
        lines.append(f"Change: {100 * (n - b):+.2f} points")
        lines.append(f"Self in NEW: {seconds(node.self_ns)} ({pct(node.self_ns, total)})")
        return "\n".join(lines)

    return Drawing(
        title=(
            f"spprof diff \u2014 {base.metadata.get('name', 'base')} \u2192 "
            f"{new.metadata.get('name', 'new')}"
        ),
        subtitle=(
            f"width: NEW ({flamegraph.subtitle(new)}); colour: share of total time vs BASE "
            f"({base.sample_count} samples, {base.total_weight_ns / 1e9:.2f} s)"
        ),
        color=color,
        tip=tip,
        legend="red: NEW spends a larger share of its time here; blue: smaller; hover for numbers",
    )


PAGE_STYLE = """
  body { margin: 0; font: 13px/1.4 -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif;
         background: #fbfbfd; color: #1d1d1f; }
  main { padding: 8px 16px; }
  svg { max-width: 100%; height: auto; display: block; }
  table { border-collapse: collapse; margin-top: 10px; font-size: 12px; }
  td, th { padding: 2px 8px; text-align: right; }
  td.f, th.f { text-align: left; font-family: Menlo, Consolas, "DejaVu Sans Mono", monospace; }
  tr.more td.d { color: #c00; } tr.less td.d { color: #00c; }
"""


def render_diff_html(base: ProfileData, new: ProfileData) -> bytes:
    new_root, base_root = build_tree(new), build_tree(base)
    svg = render_svg(new_root, diff_drawing(base, new, new_root, base_root))
    svg = svg.split("?>", 1)[1]  # inline in HTML: no XML declaration
    rows = []
    for c in top_changes(base, new):
        cls = "more" if c.delta_pct > 0 else "less" if c.delta_pct < 0 else ""
        where = f" ({c.file}:{c.line})" if c.file else ""
        rows.append(
            f'<tr class="{cls}"><td>{c.base_pct:.1f}%</td><td>{c.new_pct:.1f}%</td>'
            f'<td class="d">{c.delta_pct:+.1f}</td>'
            f'<td class="f">{html.escape(c.function + where)}</td></tr>'
        )
    title = html.escape(
        f"spprof diff \u2014 {base.metadata.get('name', 'base')} \u2192 "
        f"{new.metadata.get('name', 'new')}"
    )
    page = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title>'
        f"<style>{PAGE_STYLE}</style></head><body><main>{svg}"
        "<h3>Top changes in self time (percentage points of each profile's total)</h3>"
        '<table id="changes"><tr><th>BASE</th><th>NEW</th><th>CHANGE</th>'
        '<th class="f">FUNCTION</th></tr>' + "".join(rows) + "</table></main></body></html>\n"
    )
    return page.encode("utf-8")


def _folded(profile: ProfileData) -> dict[str, int]:
    """{folded stack: time in ns}, stacks labelled as the collapsed format labels them."""
    out: dict[str, int] = {}
    for (_, stack), (_, w) in profile.stack_weights().items():
        ids = profile.stacks[stack]
        key = (
            ";".join(collapsed.frame_label(profile.frame_table[i]) for i in ids)
            if ids
            else collapsed.NO_PYTHON_FRAME
        )
        out[key] = out.get(key, 0) + w
    return out


def render_diff_collapsed(base: ProfileData, new: ProfileData) -> bytes:
    b, n = _folded(base), _folded(new)
    bt, nt = sum(b.values()), sum(n.values())
    scale = nt / bt if bt and nt else 1.0
    lines = [
        f"{stack} {round(b.get(stack, 0) * scale / 1000)} {round(n.get(stack, 0) / 1000)}"
        for stack in set(b) | set(n)
    ]
    lines.sort()
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")
