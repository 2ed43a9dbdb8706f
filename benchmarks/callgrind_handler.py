"""Instructions per capture, counted exactly by callgrind (not timed: load does not move it).

    python -m benchmarks.callgrind_handler [DEPTH] [SECONDS] [RATE_HZ]

Runs `benchmarks.micro handler DEPTH SECONDS RATE_HZ` (a CPU-bound loop at Python stack
depth DEPTH, profiled in CPU mode) under `valgrind --tool=callgrind`, then divides the
inclusive instruction count of the capture function (`capture_into`: the walk, the native
unwind if any, the record) by the samples the run captured. Prints one JSON line. Needs
valgrind (Debian's package); callgrind serialises threads, so only the counts are meaningful.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def instructions_per_capture(depth: int, seconds: float, rate_hz: int) -> dict:
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        return {"skipped": "valgrind is not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--fair-sched=yes",
                f"--callgrind-out-file={out}",
                sys.executable,
                "-m",
                "benchmarks.micro",
                "handler",
                str(depth),
                str(seconds),
                str(rate_hz),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(run.stdout.strip().splitlines()[-1])
        annotated = subprocess.run(
            ["callgrind_annotate", "--inclusive=yes", "--threshold=100", out],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    inclusive = 0
    for line in annotated.splitlines():
        # "  1,341,107 ( 0.14%)  src/.../signal_handler.cpp:spprof::...::capture_into(...) [...]"
        m = re.match(r"\s*([\d,]+)\s.*signal_handler\.cpp:.*::capture_into\(", line)
        if m:
            inclusive = max(inclusive, int(m.group(1).replace(",", "")))
    samples = int(result.get("samples", 0))
    return {
        "python": "{}.{}".format(*sys.version_info[:2]),
        "depth": depth,
        "rate_hz": rate_hz,
        "samples": samples,
        "capture_instructions": inclusive,
        "instructions_per_capture": round(inclusive / samples) if samples else None,
    }


def main() -> None:
    depth = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    rate = int(sys.argv[3]) if len(sys.argv) > 3 else 500
    print(json.dumps(instructions_per_capture(depth, seconds, rate)))


if __name__ == "__main__":
    main()
