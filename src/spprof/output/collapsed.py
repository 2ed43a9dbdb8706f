"""FlameGraph's folded ("collapsed") stacks: one line per distinct stack.

    frame;frame;frame VALUE

Frames are root first, each written `qualname (file:line)`. VALUE is the sampled time in
microseconds (so profiles taken at different intervals compare; flamegraph.pl shows it with
`--countname=us`). Inside a frame, `%`, `;` and line breaks are percent-encoded (`%25`,
`%3B`, `%0A`) so a name can never split a stack; spaces stay, since the folded format only
splits on the last space of a line. Lines are sorted, as flamegraph.pl's own output is.

Threads are merged by default. `render(profile, thread_roots=True)` (or
`render_with_thread_roots`) starts every stack with its thread, `name (tid N)`, as py-spy's
raw format does, so the flame graph splits by thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._model import Frame, ProfileData


NO_PYTHON_FRAME = "<no Python frame>"


def escape(text: str) -> str:
    return text.replace("%", "%25").replace(";", "%3B").replace("\n", "%0A").replace("\r", "%0D")


def frame_label(f: Frame) -> str:
    if not f.filename:
        return escape(f.display_name)
    return escape(f"{f.display_name} ({f.filename}:{f.lineno})")


def thread_label(name: str, native_id: int) -> str:
    return escape(f"{name} (tid {native_id})")


def render(profile: ProfileData, thread_roots: bool = False) -> bytes:
    # (thread root or "", frames) -> time; one OS thread whose Python thread state was
    # recreated has several serials but one label, and with --native one function's samples
    # at several addresses are several stacks of the same frames: one line each.
    weights: dict[tuple[str, tuple[int, ...]], int] = {}
    threads = profile.thread_table
    for (serial, stack), (_, w) in profile.stack_weights().items():
        t = threads[serial]
        key = (thread_label(t.label, t.native_id) if thread_roots else "", profile.stacks[stack])
        weights[key] = weights.get(key, 0) + w
    lines = []
    for (root, ids), w in weights.items():
        us = max(1, round(w / 1000))
        if ids:
            folded = ";".join(frame_label(profile.frame_table[i]) for i in ids)
        else:  # a thread caught outside any Python frame (C code before its first call)
            folded = NO_PYTHON_FRAME
        lines.append(f"{root};{folded} {us}" if root else f"{folded} {us}")
    lines.sort()
    return ("\n".join(lines) + ("\n" if lines else "")).encode("utf-8")


def render_with_thread_roots(profile: ProfileData) -> bytes:
    """Folded stacks with each thread as the root frame (py-spy's raw format)."""
    return render(profile, thread_roots=True)
