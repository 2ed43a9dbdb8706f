"""speedscope's file format (https://www.speedscope.app/file-format-schema.json).

One "sampled" profile per thread, named after the thread; every sample lists frame indices
root first (speedscope builds stacks from the root) and is weighted by its sampled time in
nanoseconds. Frames are shared across threads: one per (function, file, line).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._model import ProfileData

SCHEMA_URL = "https://www.speedscope.app/file-format-schema.json"


def render(profile: ProfileData) -> bytes:
    frames: list[dict[str, Any]] = []
    frame_index: dict[int, int] = {}

    def shared(fid: int) -> int:
        idx = frame_index.get(fid)
        if idx is None:
            f = profile.frame_table[fid]
            entry: dict[str, Any] = {"name": f.display_name}
            if f.filename:
                entry["file"] = f.filename
            if f.lineno > 0:
                entry["line"] = f.lineno
            idx = frame_index[fid] = len(frames)
            frames.append(entry)
        return idx

    # per thread serial, samples in time order
    per_thread: dict[int, tuple[list[list[int]], list[int]]] = {}
    stack_cache: dict[int, list[int]] = {}
    # A folded wait (one row, many samples) is one sample of the whole wait's weight: the same
    # widths in every view as its samples side by side.
    for _, weight, stack, serial, _, _ in profile.iter_counted():
        s = stack_cache.get(stack)
        if s is None:
            s = stack_cache[stack] = [shared(fid) for fid in profile.stacks[stack]]
        samples, weights = per_thread.setdefault(serial, ([], []))
        samples.append(s)
        weights.append(weight)

    threads = profile.thread_table
    profiles = []
    for serial in sorted(per_thread, key=lambda k: (threads[k].registered_ns, k)):
        samples, weights = per_thread[serial]
        t = threads[serial]
        profiles.append(
            {
                "type": "sampled",
                "name": f"{t.label} (tid {t.native_id})",
                "unit": "nanoseconds",
                "startValue": 0,
                "endValue": sum(weights),
                "samples": samples,
                "weights": weights,
            }
        )
    doc = {
        "$schema": SCHEMA_URL,
        "shared": {"frames": frames},
        "profiles": profiles,
        "name": profile.metadata.get("name", "spprof profile"),
        "activeProfileIndex": 0,
        "exporter": f"spprof {profile.metadata.get('spprof_version', '')}".strip(),
    }
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")
