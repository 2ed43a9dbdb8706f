"""The call tree and the SVG drawing shared by the flame graph (flamegraph.py) and the
differential flame graph (diff.py).

The tree merges stacks by function (qualified name, file, first line), as the HTML page
does; each node keeps its total and self time, its sample count and its time per line (the
tooltip names the hottest line). Layout happens here, in Python: the SVG holds one `<g>` per
frame with its rectangle and label already placed, so it reads correctly in any SVG viewer;
the embedded script (_flame_script.py) adds search and click-to-zoom in a browser.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Optional

from ._flame_script import SCRIPT, STYLE
from .native_names import short_name

if TYPE_CHECKING:
    from .._model import ProfileData

FuncKey = tuple[str, str, int]  # (display name, file, first line)

NO_PYTHON_FRAME = "<no Python frame>"

# Drawing constants (px). A frame narrower than MIN_WIDTH is left out, as flamegraph.pl's
# --minwidth does, so a long profile stays a few hundred kB; the footer says how many.
WIDTH = 1200
ROW = 17
PAD_TOP = 58
PAD_BOTTOM = 40
SIDE = 10
MIN_WIDTH = 0.1
CHAR_PX = 6.6  # width of one character of the 11.5px monospace label font


@dataclass
class Node:
    """One function at one position of the call tree."""

    name: str
    file: str = ""
    first_line: int = 0
    native: bool = False
    thread: bool = False  # a thread's pseudo-frame (thread roots)
    total_ns: int = 0
    self_ns: int = 0
    samples: int = 0
    lines: dict[int, int] = field(default_factory=dict)  # line -> time on it (ns)
    children: dict[FuncKey, Node] = field(default_factory=dict)

    def child(self, key: FuncKey, native: bool = False, thread: bool = False) -> Node:
        node = self.children.get(key)
        if node is None:
            node = self.children[key] = Node(key[0], key[1], key[2], native, thread)
        return node

    @property
    def hot_line(self) -> int:
        if not self.lines:
            return self.first_line
        return max(self.lines.items(), key=lambda kv: (kv[1], -kv[0]))[0]

    @property
    def where(self) -> str:
        """`file:line` of the line that took most of this node's time ('' when unknown)."""
        if not self.file:
            return ""
        line = self.hot_line
        return f"{self.file}:{line}" if line > 0 else self.file


def build_tree(profile: ProfileData, thread_roots: bool = False) -> Node:
    """The profile's call tree, threads merged; with `thread_roots`, each thread is a root
    pseudo-frame `name (tid N)` above its own stacks (py-spy's --threads)."""
    root = Node("all")
    table = profile.frame_table
    threads = profile.thread_table
    for (serial, stack), (n, w) in profile.stack_weights().items():
        cur = root
        cur.total_ns += w
        cur.samples += n
        if thread_roots:
            t = threads[serial]
            cur = cur.child((f"{t.label} (tid {t.native_id})", "", 0), thread=True)
            cur.total_ns += w
            cur.samples += n
        ids = profile.stacks[stack]
        if not ids:  # a thread caught outside any Python frame
            cur = cur.child((NO_PYTHON_FRAME, "", 0))
            cur.total_ns += w
            cur.samples += n
        for fid in ids:
            f = table[fid]
            cur = cur.child((f.display_name, f.filename, f.first_lineno), native=f.is_native)
            cur.total_ns += w
            cur.samples += n
            cur.lines[f.lineno] = cur.lines.get(f.lineno, 0) + w
        cur.self_ns += w
    return root


def seconds(ns: float) -> str:
    """A time for a tooltip: 1.23 s, 45.6 ms or 789 us."""
    if abs(ns) >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if abs(ns) >= 1e6:
        return f"{ns / 1e6:.1f} ms"
    return f"{ns / 1e3:.0f} \u00b5s"


def pct(part: float, whole: float) -> str:
    return f"{100.0 * part / whole:.2f}%" if whole else "0%"


def warm_color(node: Node) -> str:
    """flamegraph.pl's warm palette, stable per function: Python red-orange-yellow,
    native code blue-grey, thread pseudo-frames grey."""
    if node.thread:
        return "rgb(200,200,200)"
    h = 0
    for ch in f"{node.file}/{node.name}":
        h = (h * 31 + ord(ch)) & 0xFFFFFFFF
    if node.native:
        v = h % 40
        return f"rgb({100 + v},{150 + v},{200 + v // 2})"
    return f"rgb({205 + h % 50},{(h >> 8) % 180 + 40},{(h >> 16) % 55})"


def fit_label(name: str, width_px: float) -> str:
    """The label a box of `width_px` can show: the name, cut with '..', or nothing."""
    room = int((width_px - 6) / CHAR_PX)
    if room < 3:
        return ""
    return name if len(name) <= room else name[: room - 2] + ".."


def tooltip(node: Node, total: float) -> str:
    """The default tooltip: name, file:line, total and self time with their shares."""
    lines = [node.name]
    if node.where:
        lines.append(node.where)
    lines.append(f"Total: {seconds(node.total_ns)} ({pct(node.total_ns, total)})")
    lines.append(f"Self: {seconds(node.self_ns)} ({pct(node.self_ns, total)})")
    lines.append(f"Samples: {node.samples}")
    return "\n".join(lines)


@dataclass
class Drawing:
    """What render_svg needs beyond the tree."""

    title: str
    subtitle: str
    color: Callable[[Node], str] = warm_color
    tip: Optional[Callable[[Node, float], str]] = None  # default: `tooltip`
    legend: str = ""


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def render_svg(root: Node, drawing: Drawing) -> str:
    """The flame graph of `root` as a standalone SVG document (root frames at the bottom)."""
    total = root.total_ns
    tip = drawing.tip or tooltip
    frames: list[str] = []
    skipped = 0
    depth_max = 0
    scale = (WIDTH - 2 * SIDE) / total if total else 0.0
    # Iterative walk: (node, depth, x in px). Children hottest first (flamegraph.pl sorts
    # them by name), so the widest boxes line up on the left.
    stack: list[tuple[Node, int, float]] = []
    x = 0.0
    for k in sorted(root.children.values(), key=lambda n: -n.total_ns):
        stack.append((k, 0, x))
        x += k.total_ns * scale
    placed: list[tuple[Node, int, float, float]] = []
    while stack:
        node, depth, x0 = stack.pop()
        w = node.total_ns * scale
        if w < MIN_WIDTH:
            skipped += 1
            continue
        placed.append((node, depth, x0, w))
        depth_max = max(depth_max, depth)
        cx = x0
        for k in sorted(node.children.values(), key=lambda n: -n.total_ns):
            stack.append((k, depth + 1, cx))
            cx += k.total_ns * scale
    height = PAD_TOP + (depth_max + 1) * ROW + PAD_BOTTOM
    bottom = height - PAD_BOTTOM
    for node, depth, x0, w in placed:
        y = bottom - (depth + 1) * ROW
        name = node.name
        # A native name's box shows it without template arguments; the tooltip, search and
        # zoom keep the full name (data-n).
        label = short_name(name) if node.native else name
        shown = f' data-l="{_attr(label)}"' if label != name else ""
        frames.append(
            f'<g class="f" data-d="{depth}" data-x="{x0:.2f}" data-w="{w:.2f}"'
            f' data-n="{_attr(name)}"{shown} data-file="{_attr(node.file)}">'
            f"<title>{_attr(tip(node, total))}</title>"
            f'<rect x="{SIDE + x0:.2f}" y="{y}" width="{w:.2f}" height="{ROW - 1}"'
            f' fill="{drawing.color(node)}" rx="2"/>'
            f'<text x="{SIDE + x0 + 3:.2f}" y="{y + ROW - 5}">{_attr(fit_label(label, w))}</text>'
            "</g>"
        )
    note = f"{skipped} frames narrower than {MIN_WIDTH} px not drawn" if skipped else ""
    return (
        '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n'
        f'<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}"'
        f' height="{height}" viewBox="0 0 {WIDTH} {height}" id="spprof-flame"'
        f' data-total="{total}" data-row="{ROW}" data-side="{SIDE}" data-char="{CHAR_PX}">\n'
        f"<style>{STYLE}</style>\n"
        f'<rect class="bg" x="0" y="0" width="{WIDTH}" height="{height}"/>\n'
        f'<text id="title" x="{WIDTH / 2}" y="22">{_attr(drawing.title)}</text>\n'
        f'<text id="subtitle" x="{WIDTH / 2}" y="40">{_attr(drawing.subtitle)}</text>\n'
        f'<text id="reset" class="btn" x="{SIDE}" y="22" display="none">Reset Zoom</text>\n'
        f'<text id="search" class="btn" x="{WIDTH - SIDE}" y="22">Search</text>\n'
        f'<text id="matched" x="{WIDTH - SIDE}" y="{height - 12}"></text>\n'
        f'<text id="details" x="{SIDE}" y="{height - 12}">{_attr(drawing.legend)}</text>\n'
        f'<text id="note" x="{WIDTH - SIDE}" y="40">{_attr(note)}</text>\n'
        f'<g id="frames">\n{chr(10).join(frames)}\n</g>\n'
        f"<script><![CDATA[{SCRIPT}]]></script>\n"
        "</svg>\n"
    )
