"""What the census scripts write for their tests (async_waits.py, greenlet_waits.py,
census_window.py): the profile's samples as [thread name, weight_ns, [[function, file, line],
...]] and its stats, with whatever the script measured."""

import json
from typing import Any


def write(path: str, profiler: Any, **measured: Any) -> None:
    samples = [
        [s.thread_name, s.weight_ns, [[f.function_name, f.filename, f.lineno] for f in s.frames]]
        for s in profiler.get_samples()
    ]
    with open(path, "w") as f:
        json.dump({**measured, "stats": profiler.profile.stats, "samples": samples}, f)
