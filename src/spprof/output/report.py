"""The terminal summary of a profile (`spprof record`, `spprof report`): fits 80 columns."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._model import ProfileData


# Thread rows in the summary: the busiest; the rest are one line.
THREAD_ROWS = 12


def _short_path(path: str, width: int) -> str:
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return path if len(path) <= width else "..." + path[-(width - 3) :]


def _seconds(ns: int) -> str:
    return f"{ns / 1e9:.2f}s"


def summary(profile: ProfileData, top: int = 10, output: str = "", fmt: str = "") -> str:
    lines: list[str] = []
    n = profile.sample_count
    total = profile.total_weight_ns or 1
    lines.append(
        f"spprof: {n} samples over {_seconds(profile.duration_ns)} "
        f"({profile.mode} mode, {profile.interval_ms:g} ms interval, "
        f"timer {profile.stats.get('timer', '?')}), {profile.dropped_count} dropped"
    )
    if profile.dropped_count:
        lines.append(
            "  warning: samples were dropped (see spprof.stats(): ring full / memory limit)"
        )
    unknown = profile.stats.get("unknown_frames", 0)
    if unknown:
        lines.append(f"  note: {unknown} frames could not be resolved and show as <unknown>")

    lines.append("")
    lines.append(
        f"  {'THREAD':<22} {'TID':>7} {'SAMPLES':>7} {'CPU TIME':>8} {'CPU%':>6} "
        f"{'GIL%':>6} {'IDLE%':>6}"
    )
    duration = profile.duration_ns or 1
    ranked_threads = sorted(profile.threads, key=lambda t: t.weight_ns, reverse=True)
    for t in ranked_threads[:THREAD_ROWS]:
        name = t.name if len(t.name) <= 22 else t.name[:19] + "..."
        cpu_pct = 100.0 * t.cpu_ns / duration
        gil = "-" if t.gil_fraction is None else f"{100.0 * t.gil_fraction:.1f}%"
        lines.append(
            f"  {name:<22} {t.native_thread_id:>7} {t.samples:>7} "
            f"{_seconds(t.cpu_ns):>8} {cpu_pct:>5.1f}% {gil:>6} {100.0 * t.idle_fraction:>5.1f}%"
        )
    rest = ranked_threads[THREAD_ROWS:]
    if rest:
        lines.append(
            f"  ... and {len(rest):,} more threads, {_seconds(sum(t.weight_ns for t in rest))} "
            f"sampled, {_seconds(sum(t.cpu_ns for t in rest))} CPU"
        )
    unsampled = profile.stats.get("threads_unsampled", 0)
    if unsampled:
        cpu = profile.stats.get("threads_unsampled_cpu_ns", 0)
        lines.append(
            f"  ({unsampled:,} threads ended without a sample, {_seconds(cpu)} CPU: not listed)"
        )
    refused = profile.stats.get("threads_refused", 0)
    if refused:
        lines.append(
            f"  warning: {refused:,} threads were not sampled: more than "
            f"{profile.stats.get('threads_alive_limit', '?')} alive at once"
        )

    funcs = profile.aggregate()
    for title, key in (("self", "self_ns"), ("total", "total_ns")):
        lines.append("")
        lines.append(f"  Top functions by {title} time")
        lines.append(f"  {'%':>6} {'TIME':>8}  FUNCTION (FILE:LINE)")
        ranked = sorted(funcs, key=lambda f: getattr(f, key), reverse=True)
        for f in ranked[:top]:
            value = getattr(f, key)
            if value == 0:
                break
            where = _short_path(f.filename, 40) + f":{f.hottest_line}" if f.filename else ""
            label = f"{f.qualname} ({where})" if where else f.qualname
            if len(label) > 62:
                label = label[:59] + "..."
            lines.append(f"  {100.0 * value / total:>5.1f}% {_seconds(value):>8}  {label}")
    if output:
        lines.append("")
        lines.append(f"  Profile written to {output} ({fmt})")
        if fmt == "speedscope":
            lines.append("  Open it at https://www.speedscope.app (drag and drop the file)")
    return "\n".join(lines)
