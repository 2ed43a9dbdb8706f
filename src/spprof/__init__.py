"""spprof: a sampling profiler for Python that runs inside the profiled process.

    import spprof
    with spprof.Profiler(interval_ms=10) as p:
        work()
    p.profile.save("profile.speedscope.json")

or `python -m spprof script.py`. See docs/usage.md.
"""

from ._load import ProfileFormatError, load
from ._model import Frame, FunctionStats, Sample, ThreadInfo, ThreadRecord
from ._profile import Profile
from ._session import Profiler, __version__, is_active, profile, start, stats, stop
from ._stats import SessionStats

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
    "is_active",
    "load",
    "profile",
    "start",
    "stats",
    "stop",
]
