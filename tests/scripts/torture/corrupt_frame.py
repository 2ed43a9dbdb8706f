"""Torture: a thread whose frame link is wild while it runs (tests/test_torture.py).

    corrupt_frame.py SECONDS unmapped|low

A `scratch` thread repeatedly enters `spin_with_wild_link`, which overwrites its OWN frame's
link to its caller with ctypes, computes for WINDOW seconds while the link is wild, and puts
the link back in a `finally` before it returns: the interpreter never follows the bad link,
a profiler that walks the chain from a signal handler does. The main thread computes in
`steady_work` meanwhile.

- `unmapped`: the link is 0x900000000, canonical but unmapped: reading it faults.
- `low`: the link is 0xEC00, inside the first 64 KiB, which is never mapped.

The link is `PyFrameObject.f_back` on 3.9/3.10 (offset 24: PyObject_VAR_HEAD before it) and
`_PyInterpreterFrame.previous` on 3.11+, reached through the frame object's `f_frame`
(offset 24, after PyObject_HEAD and f_back); `previous` is at offset 48 on 3.11 (after
f_func, f_globals, f_builtins, f_locals, f_code, frame_obj) and at offset 8 on 3.12-3.14
(after f_code / f_executable). Before writing, the script checks that the link it found
points at its caller's frame; if not, it exits with status 3 without touching anything.
Nothing that walks the chain (tracebacks, f_back, sys._current_frames) runs while it is wild,
and the garbage collector is off during each window.

Prints `CORRUPT variant=V windows=N` on stdout.
"""

from __future__ import annotations

import ctypes
import gc
import sys
import threading
import time

WILD = {"unmapped": 0x900000000, "low": 0xEC00}
WINDOW = 0.05  # seconds with the link wild, per window
POINTER = ctypes.sizeof(ctypes.c_void_p)


class OffsetsUnverified(Exception):
    """The link found is not the caller's frame: the offsets are wrong for this build."""


def _word(address: int) -> ctypes.c_void_p:
    return ctypes.c_void_p.from_address(address)


def _link_of(frame_address: int) -> tuple[int, int]:
    """(address of the link field, address of the frame it must point to when intact) for the
    frame object at `frame_address`."""
    if sys.version_info < (3, 11):
        return frame_address + 3 * POINTER, frame_address  # f_back links frame objects
    interp = _word(frame_address + 3 * POINTER).value or 0  # f_frame
    previous = 6 * POINTER if sys.version_info < (3, 12) else POINTER
    return interp + previous, interp


def _expected_target(caller_address: int) -> int:
    if sys.version_info < (3, 11):
        return caller_address
    return _word(caller_address + 3 * POINTER).value or 0  # the caller's f_frame


def spin_with_wild_link(wild: int, seconds: float) -> int:
    me = sys._getframe()
    caller = sys._getframe(1)  # read before the link is touched
    link_address, _ = _link_of(id(me))
    expected = _expected_target(id(caller))
    del me, caller
    link = _word(link_address)
    saved = link.value
    if saved != expected or not saved:
        raise OffsetsUnverified(f"link={saved!r} expected={expected:#x}")
    total = 0
    gc.disable()
    link.value = wild
    try:
        end = time.monotonic() + seconds
        for _ in range(1_000_000):  # bounded: ends by the clock long before
            for i in range(200):
                total += (i * 3) & 7
            if time.monotonic() >= end:
                break
    finally:
        link.value = saved
        gc.enable()
    return total


def intact_work(n: int) -> int:
    total = 0
    for i in range(n):
        total += (i * 5) % 9
    return total


def scratch(wild: int, deadline: float, windows: list[int], errors: list[str]) -> None:
    try:
        while time.monotonic() < deadline:
            spin_with_wild_link(wild, WINDOW)
            windows[0] += 1
            intact_work(2000)
    except OffsetsUnverified as exc:
        errors.append(str(exc))


def steady_work(deadline: float) -> int:
    total = 0
    while time.monotonic() < deadline:
        total += intact_work(1000)
    return total


def main(seconds: float, variant: str) -> None:
    wild = WILD[variant]
    deadline = time.monotonic() + seconds
    windows = [0]
    errors: list[str] = []
    t = threading.Thread(target=scratch, args=(wild, deadline, windows, errors), name="scratch")
    t.start()
    steady_work(deadline)
    t.join()
    if errors:
        print(f"CORRUPT offsets-unverified {errors[0]}", flush=True)
        sys.exit(3)
    print(f"CORRUPT variant={variant} windows={windows[0]}", flush=True)


if __name__ == "__main__":
    main(float(sys.argv[1]), sys.argv[2])
