"""An interactive SVG flame graph, like py-spy's default output and flamegraph.pl's.

One standalone `.svg` file, no network: it shows in any SVG viewer, and in a browser it adds
search, click-to-zoom and a details line (tooltips give the function, its file:line, total
and self time). Threads are merged, as py-spy's SVG merges them; `render(profile,
thread_roots=True)` puts each thread as a root frame `name (tid N)` instead, so the graph
splits by thread (py-spy's `--threads`). The drawing itself is in _flame.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._flame import Drawing, build_tree, render_svg

if TYPE_CHECKING:
    from .._model import ProfileData


def subtitle(profile: ProfileData) -> str:
    meta = profile.metadata
    return (
        f"{profile.sample_count} samples over {profile.duration_ns / 1e9:.2f} s \u00b7 "
        f"{profile.mode} mode, {profile.interval_ms:g} ms interval \u00b7 "
        f"Python {meta.get('python', '?')}"
    )


def render(profile: ProfileData, thread_roots: bool = False) -> bytes:
    root = build_tree(profile, thread_roots=thread_roots)
    drawing = Drawing(
        title=f"spprof \u2014 {profile.metadata.get('name', 'profile')}",
        subtitle=subtitle(profile),
        legend="Click a frame to zoom, Search (or Ctrl-F) to highlight; hover for details",
    )
    return render_svg(root, drawing).encode("utf-8")


def render_with_thread_roots(profile: ProfileData) -> bytes:
    """The flame graph split by thread: each thread a root frame."""
    return render(profile, thread_roots=True)
