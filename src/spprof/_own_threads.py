"""spprof's own Python threads (the pprof endpoint's): never sampled, their CPU named as
spprof's in the CPU balance, like the extension's native threads (own_threads.h).

A thread made by own_thread() carries OWN_THREAD; the session's thread-start hook
(_session._register_thread) sees it and makes the thread one of spprof's before its target
runs, instead of registering it for sampling; the thread leaves as its target ends."""

from __future__ import annotations

import threading
from typing import Any, Callable

from . import _ext

OWN_THREAD = "_spprof_own_thread"


def own_thread(
    target: Callable[..., None], name: str, args: tuple[Any, ...] = ()
) -> threading.Thread:
    """A daemon thread of spprof's running target(*args); not started."""

    def run(*call_args: Any) -> None:
        try:
            target(*call_args)
        finally:
            _ext._own_thread_leave()

    t = threading.Thread(target=run, args=args, name=name, daemon=True)
    setattr(t, OWN_THREAD, True)
    return t
