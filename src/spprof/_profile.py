"""spprof.Profile: the profile data (_model.ProfileData) plus save(), which needs the writers.

It sits above both, so the dependency runs one way: _profile -> output -> _model. The model
cannot reach the writers (no import, no lazy import, no registry the writers fill); a
ProfileData is all a writer sees.
"""

from __future__ import annotations

from ._model import ProfileData
from .output import PathLike, write


class Profile(ProfileData):
    """The result of a profiling session (see ProfileData), savable in every output format."""

    def save(self, path: PathLike, format: str = "speedscope") -> None:
        """Write the profile to `path` in `format`.

        Formats: spprof, speedscope, collapsed, pprof, chrome, html (docs/formats.md).
        """
        write(self, path, format)
