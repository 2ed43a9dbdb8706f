"""The kernel's cost per signal and per timer expiry, on its own: builds and runs
benchmarks/kernel_signal.c (C, no Python, no spprof; its header says what each mode times).

    python -m benchmarks.kernel [--smoke]

Prints one JSON line: `ops` (a bare system call, tgkill of an ignored signal, tgkill delivered
to an empty handler; ns each, minimum over repeats) and `timer_cpu` / `timer_mono` (ns of CPU
per timer expiry and delivery, for a thread CPU-clock timer at 1 kHz and a CLOCK_MONOTONIC
timer at 10 kHz).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SOURCE = Path(__file__).resolve().parent / "kernel_signal.c"


def build(out: Path, shared: bool = False) -> bool:
    """kernel_signal.c compiled to `out` (a shared library for ctypes with `shared`); False
    when there is no C compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        return False
    extra = ["-shared", "-fPIC"] if shared else []
    subprocess.run(
        [cc, "-O2", *extra, "-o", str(out), str(SOURCE)], check=True, capture_output=True
    )
    return True


def measure(smoke: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        exe = str(Path(tmp) / "kernel_signal")
        if not build(Path(exe)):
            return {"skipped": "no C compiler"}

        def run(*args: object) -> dict[str, Any]:
            out = subprocess.run(
                [exe, *map(str, args)], capture_output=True, text=True, check=True
            ).stdout
            res: dict[str, Any] = json.loads(out)
            return res

        n, repeats = (20_000, 2) if smoke else (500_000, 7)
        # ~2.2 s of spinning per half at full size: about 600 CPU-timer signals.
        cpu_iters, mono_iters = (50_000_000, 50_000_000) if smoke else (2_000_000_000, 300_000_000)
        return {
            "ops": run("ops", n, repeats),
            "timer_cpu": run("timer", "cpu", 1000, cpu_iters, repeats),
            "timer_mono": run("timer", "mono", 10_000, mono_iters, repeats),
        }


def main(argv: list[str]) -> int:
    print(json.dumps(measure("--smoke" in argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
