"""A self-contained HTML flame graph: one file, no network, opens in any browser.

The page (markup, CSS and script in _html_template.py) gets the profile folded by stack:
functions (name, file, first line, native), frames (function, line), stacks (frame ids,
root first) and, per thread, (stack, samples, time) triples. The browser builds the call tree
for the thread chosen in the selector (or all threads) when it is chosen, so the file grows
with distinct stacks, not with samples: a 100,000-sample profile is a few hundred kB at most.
"""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING, Any

from ._html_template import PAGE

if TYPE_CHECKING:
    from .._model import ProfileData


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:.2f} s"


def page_data(profile: ProfileData) -> dict[str, Any]:
    """The JSON the page reads (also handy for tests of the numbers it shows)."""
    funcs: list[list[Any]] = []
    func_ids: dict[tuple[str, str, int], int] = {}
    frames: list[list[int]] = []
    frame_ids: dict[int, int] = {}

    def frame(fid: int) -> int:
        idx = frame_ids.get(fid)
        if idx is None:
            f = profile.frame_table[fid]
            key = (f.display_name, f.filename, f.first_lineno)
            fn = func_ids.get(key)
            if fn is None:
                fn = func_ids[key] = len(funcs)
                funcs.append([f.display_name, f.filename, f.first_lineno, 1 if f.is_native else 0])
            idx = frame_ids[fid] = len(frames)
            frames.append([fn, f.lineno])
        return idx

    stacks: list[list[int]] = []
    # By frames: with --native one function's samples at several addresses are several
    # stacks of the same frames, drawn once.
    stack_ids: dict[tuple[int, ...], int] = {}
    # Threads by logical identity, like Profile.threads (a recreated thread state is one thread).
    infos = profile.threads
    thread_index = {t.key: i for i, t in enumerate(infos)}
    counts: list[list[int]] = [[] for _ in infos]
    for (serial, stack), (n, weight) in sorted(profile.stack_weights().items()):
        sid = stack_ids.get(profile.stacks[stack])
        if sid is None:
            sid = stack_ids[profile.stacks[stack]] = len(stacks)
            stacks.append([frame(fid) for fid in profile.stacks[stack]])
        t = profile.thread_table[serial]
        counts[thread_index[t.key]].extend((sid, n, weight))

    duration = profile.duration_ns or 1
    meta = profile.metadata
    summary = (
        f"{profile.sample_count} samples over {_seconds(profile.duration_ns)} \u00b7 "
        f"{profile.mode} mode, {profile.interval_ms:g} ms interval \u00b7 "
        f"{profile.dropped_count} dropped{_left_out(profile)} \u00b7 "
        f"Python {meta.get('python', '?')} on "
        f"{meta.get('platform', '?')} {meta.get('machine', '')}".rstrip()
    )
    return {
        "funcs": funcs,
        "frames": frames,
        "stacks": stacks,
        "threads": [
            {
                "name": t.label,
                "tid": t.native_thread_id,
                "samples": t.samples - t.left_out,  # in the profile, as the flame graph
                "weight_ns": t.weight_ns,
                "cpu_ns": t.cpu_ns,
                "cpu_pct": round(100.0 * t.cpu_ns / duration, 1),
            }
            for t in infos
        ],
        "counts": counts,
        "summary": summary,
    }


def _left_out(profile: ProfileData) -> str:
    left = profile.left_out_count
    return (
        f" \u00b7 {left} left out (filtered: {', '.join(profile.metadata.get('left_out_why', []))})"
        if left
        else ""
    )


def render(profile: ProfileData) -> bytes:
    data = json.dumps(page_data(profile), separators=(",", ":"), ensure_ascii=False)
    # "</" would end the script element early ("</script>" in a function name); "<\/" is
    # the same JSON string. "<!--" would start an HTML comment state inside the script.
    data = data.replace("</", "<\\/").replace("<!--", "<\\u0021--")
    title = f"spprof \u2014 {profile.metadata.get('name', 'profile')}"
    page = PAGE.replace("__TITLE__", html.escape(title)).replace("__DATA__", data, 1)
    return page.encode("utf-8")
