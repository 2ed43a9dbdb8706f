"""The .spprof files a command reads: one, or several merged into one profile (workers of a
service profiled separately, or a --subprocesses child written after its root ended)."""

from __future__ import annotations

from collections.abc import Sequence

from .._load import load
from .._process_merge import merge
from .._profile import Profile
from .errors import CliError


def load_inputs(paths: Sequence[str], command: str) -> Profile:
    profiles = [load(p) for p in paths]
    first = profiles[0]
    for path, p in zip(paths[1:], profiles[1:]):
        if (p.mode, p.interval_ms) != (first.mode, first.interval_ms):
            raise CliError(
                f"{command}: cannot merge {path} ({p.mode} mode, {p.interval_ms:g} ms) with "
                f"{paths[0]} ({first.mode} mode, {first.interval_ms:g} ms): record them alike"
            )
    return first if len(profiles) == 1 else merge(first, profiles[1:])
