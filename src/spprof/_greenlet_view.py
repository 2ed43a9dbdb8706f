"""The greenlet view (`--greenlets`): pure-Python gevent's root frame left out.

Under pure-Python gevent (PyPy, `PURE_PYTHON=1`) every Greenlet's frames begin with gevent's
Python `Greenlet.run`, which compiled gevent runs in C, with no frame. A pass over the
profile's stacks when it is tidied (_session._tidy, or _load for a file written without
Python) leaves that frame out of every stack rooted at it, so both builds give a greenlet's
samples the same root: its own function. The greenlet census leaves it out of its chains.
Pure Python, without _ext: the loader uses it.
"""

from __future__ import annotations

import os

from ._model import ProfileData

_GREENLET_PY = os.sep + os.path.join("gevent", "greenlet.py")


def is_greenlet_run(filename: str, name: str) -> bool:
    """gevent's `Greenlet.run`, which pure-Python gevent (PyPy, `PURE_PYTHON=1`) runs as the
    root of every Greenlet's frames; compiled gevent's is C, with no frame."""
    return name == "run" and filename.endswith(_GREENLET_PY)


def drop_greenlet_run(profile: ProfileData) -> int:
    """The stacks rooted at pure-Python gevent's Greenlet.run, rooted at the greenlet's own
    function instead (the next frame), as under compiled gevent; returns how many stacks."""
    table = profile.frame_table
    runs = {i for i, f in enumerate(table) if is_greenlet_run(f.filename, f.function_name)}
    if not runs:
        return 0
    count = 0
    for sid, ids in enumerate(profile.stacks):
        if len(ids) > 1 and ids[0] in runs:
            profile.stacks[sid] = ids[1:]
            count += 1
    if count:
        profile._samples = None
    return count
