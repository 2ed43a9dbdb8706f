"""spprof: a sampling profiler for Python that runs inside the profiled process.

    import spprof
    with spprof.Profiler(interval_ms=10) as p:
        work()
    p.profile.save("profile.speedscope.json")

or `python -m spprof script.py`; in IPython / Jupyter `%load_ext spprof`, then `%%spprof`.
See docs/usage.md.

PYTEST_DONT_REWRITE: `spprof -m pytest` imports this package before pytest loads its plugin
(spprof.pytest_plugin); this marker tells pytest not to warn that it cannot rewrite it.
"""

from typing import Any

from ._load import ProfileFormatError, load
from ._model import Frame, FunctionStats, Sample, ThreadInfo, ThreadRecord
from ._profile import Profile
from ._session import Profiler, http_address, is_active, profile, start, stats, stop
from ._stats import SessionStats
from ._version import __version__

__all__ = [
    "Frame",
    "FunctionStats",
    "Profile",
    "ProfileFormatError",
    "Profiler",
    "Sample",
    "SessionStats",
    "ThreadInfo",
    "ThreadRecord",
    "__version__",
    "http_address",
    "is_active",
    "load",
    "load_ipython_extension",
    "profile",
    "start",
    "stats",
    "stop",
]


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext spprof`: the %spprof / %%spprof magics (spprof.ipython, imported only now)."""
    from .ipython import load_ipython_extension as load

    load(ipython)
