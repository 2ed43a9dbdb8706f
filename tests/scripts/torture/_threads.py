"""What every torture workload does with its threads: start them all, let the main thread do
its own part meanwhile (if any), then join them all."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence


def run_threads(
    threads: Sequence[threading.Thread], main: Callable[[], object] | None = None
) -> None:
    for t in threads:
        t.start()
    if main is not None:
        main()
    for t in threads:
        t.join()
