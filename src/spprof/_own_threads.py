"""spprof's own Python threads (the pprof endpoint's): never sampled, their CPU named as
spprof's in the CPU balance, like the extension's native threads (own_threads.h).

A thread made by own_thread() is an OwnThread; the session's thread-start hook (its C
registrar, _ext.thread_registrar) sees the class and makes the thread one of spprof's before its
target runs, instead of registering it for sampling; the thread leaves as its target ends. A
class rather than an attribute: the registrar checks it for every thread the program starts,
and a type check costs nothing where a missing attribute costs an exception."""

from __future__ import annotations

import signal
import threading
from typing import Any, Callable

from . import _ext


class OwnThread(threading.Thread):
    """One of spprof's threads (never sampled). It starts with the asynchronous signals
    blocked, as the extension's threads do: a signal sent to the process (SIGINT, SIGTERM,
    SIGCHLD) must reach the program's threads, not run its handler here (or kill the process
    where the program blocks it everywhere and waits for it with sigwait)."""

    def start(self) -> None:
        # The new thread inherits the mask at creation; start() returns once it runs.
        # The extension's list (platform/thread_signals_posix.cpp): every signal but those a
        # faulting instruction raises.
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _ext.own_thread_signals())
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)


def own_thread(target: Callable[..., None], name: str, args: tuple[Any, ...] = ()) -> OwnThread:
    """A daemon thread of spprof's running target(*args); not started."""

    def run(*call_args: Any) -> None:
        try:
            target(*call_args)
        finally:
            _ext._own_thread_leave()

    return OwnThread(target=run, args=args, name=name, daemon=True)
