# _ext.pyi: what the C++ extension spprof._ext exports (module.cpp's method table and constants).
from typing import Any, Callable, Optional, TypedDict

# The packed sample row stop() exports (spprof/_rows.py must agree; tests/test_rows.py).
SAMPLE_ROW_FORMAT: str
SAMPLE_SERIAL_BITS: int
SAMPLE_FLAGS: dict[str, int]

class RawThread(TypedDict):
    serial: int
    ident: int
    native_id: int
    name: str
    cpu_ns: int
    registered_ns: int
    ended_ns: int

class RawProfile(TypedDict):
    # (name, qualname, filename, line, first line, is native) per frame id
    frames: list[tuple[str, str, str, int, int, bool]]
    stacks: list[tuple[int, ...]]  # frame ids, root first, per stack id
    samples: bytes  # packed rows, SAMPLE_ROW_FORMAT each
    threads: list[RawThread]
    stats: dict[str, Any]
    start_ns: int
    end_ns: int
    interval_ns: int

def start(
    interval_ns: int,
    timer: str = "auto",
    memory_limit_bytes: int = 0,
    ring_bytes: int = 262144,
    drain_interval_ms: int = 50,
    mode: str = "cpu",
    progress: bool = False,
    native: bool = False,
    interpreter_frames: bool = False,
    max_overhead_pct: float = 0.0,
) -> None: ...
def stop() -> RawProfile: ...
def is_active() -> bool: ...
def stats() -> dict[str, Any]: ...
def register_current_thread(
    entry_code: object = None, skip_code: object = None, name: object = None, /
) -> None: ...
def thread_start_hook(
    original: Callable[..., Any], register_thread: Callable[[Any], object], /
) -> Any: ...
def thread_start_hook_original(obj: object, /) -> Any: ...
def stop_threads_for_fork() -> None: ...
def restart_threads_after_fork(then: Optional[Callable[[], object]] = None, /) -> None: ...
def drain() -> None: ...
def after_fork_child() -> None: ...
def set_debug(on: object, /) -> None: ...
def _watch_exit_signals(callback: Callable[[int], object], /) -> None: ...
def _unwatch_exit_signals() -> None: ...
def _hook_exit_calls(
    hook: Callable[[str, str, tuple[Any, ...], Optional[dict[str, Any]]], object], /
) -> None: ...
def _unhook_exit_calls() -> None: ...
def _arm_exit_dump(path: str, meta_members: str, /) -> None: ...
def window_export(t0_ns: int, t1_ns: int, native_tid: int, /) -> RawProfile: ...
def monotonic_ns() -> int: ...
