"""asyncio task names (`--async`): a task the program named (`create_task(coro, name="poller")`,
`task.set_name`) is shown as `<task> poller` instead of `<task> COROUTINE`.

A sample knows its frames, not its task: the asyncio view roots a running task's samples at
its outermost coroutine (_async_view.py) and the census roots a waiting one's there too
(_async_census.py). So names are kept per outermost coroutine, as the census meets tasks: a
coroutine's root is renamed when every task seen running it had the same name of the
program's. One task with asyncio's default name (`Task-12`) or another name makes that
coroutine's root stay its qualname: four `worker-N` tasks of one `worker()` are `<task>
worker`, running or waiting alike, and a default-named handler per request is one root,
not one per request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ._model import Frame, ProfileData

MAX_NAME = 80  # characters of a name shown; a longer one is cut, with "..."


def is_default(name: str) -> bool:
    """asyncio's own name for a task the program did not name: `Task-N`; or "None", which
    CPython 3.13.0's `loop.create_task` gives every task a task factory makes (it calls
    `task.set_name(None)`, and a name is made a string)."""
    return name == "None" or (name.startswith("Task-") and name[5:].isdigit())


@dataclass
class TaskNames:
    """Per `<task> QUALNAME` root: the program's name for its tasks, or None where it has
    none or several."""

    names: dict[str, Optional[str]] = field(default_factory=dict)

    def settled(self, head: str) -> bool:
        """Whether the head has no name to learn any more (a default or a second name met):
        the census skips reading the task's name, a string made on demand on 3.12+."""
        return head in self.names and self.names[head] is None

    def see(self, head: str, name: object) -> None:
        """A task whose outermost coroutine's root is `head` is named `name`."""
        if not isinstance(name, str) or is_default(name):
            self.names[head] = None
        elif head not in self.names:
            self.names[head] = name
        elif self.names[head] != name:
            self.names[head] = None

    def rename(self, profile: ProfileData) -> int:
        """The profile's `<task> QUALNAME` frames of named coroutines as `<task> NAME`; returns
        how many roots were renamed."""
        renamed: dict[str, str] = {}
        for head, name in self.names.items():
            if name is not None:
                renamed[head] = head[: head.index(" ") + 1] + _shown(name)
        if not renamed:
            return 0
        table = profile.frame_table
        count = 0
        for i, f in enumerate(table):
            new = renamed.get(f.function_name) if not f.filename else None
            if new is not None:
                table[i] = Frame(function_name=new, filename="", lineno=0, qualname=new)
                count += 1
        if count:
            profile._samples = None
        return count


def _shown(name: str) -> str:
    """The name as one line of at most MAX_NAME characters."""
    flat = "".join(c if c.isprintable() else " " for c in name)
    return flat if len(flat) <= MAX_NAME else flat[: MAX_NAME - 3] + "..."
