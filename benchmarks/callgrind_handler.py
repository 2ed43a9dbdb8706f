"""Instructions per capture, counted exactly by callgrind (not timed: load does not move it).

    python -m benchmarks.callgrind_handler [DEPTH] [SECONDS] [RATE_HZ] [--native]
        [--imports numpy,pandas,torch] [--compare]

Runs `benchmarks.micro handler DEPTH SECONDS RATE_HZ` (a CPU-bound loop at Python stack
depth DEPTH, profiled in CPU mode) under `valgrind --tool=callgrind`, then divides the
inclusive instruction count of the capture function (`capture_into`: the walk, the native
unwind if any, the record) by the samples the run captured. With `--native` the session
unwinds native frames too, and the result says where the unwinder's instructions went, per
capture: looking up the module of a pc (`UnwindSnapshot::find`), the CFI search
(`find_fde`), running the CFI (`run_cfi`), the step cache (`StepCache::lookup`/`insert`),
and the rest of `unwind_native` (reading the stack, copying registers). `--imports` loads
those modules first (the native walk looks pcs up among every loaded image); `--compare`
runs both modes and prints the ratio native / Python-only, issue 28's measure (at most 3x).
Prints one JSON line. Needs valgrind (Debian's package); callgrind serialises threads, so
only the counts are meaningful.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Optional

# The unwinder's parts: (key, a regular expression matching callgrind_annotate's function).
PARTS = (
    ("unwind_native", r"unwinder\.cpp:spprof::unwind_native\("),
    ("module_lookup", r"spprof::UnwindSnapshot::find\("),
    ("cfi_search", r"eh_frame\.cpp:spprof::find_fde\("),
    ("cfi_run", r"eh_frame\.cpp:spprof::run_cfi\("),
    ("step_cache_lookup", r"step_cache\.cpp:spprof::StepCache::lookup\("),
    ("step_cache_insert", r"step_cache\.cpp:spprof::StepCache::insert\("),
)


def _inclusive(annotated: str, pattern: str) -> int:
    best = 0
    for line in annotated.splitlines():
        m = re.match(r"\s*([\d,]+)\s.*" + pattern, line)
        if m:
            best = max(best, int(m.group(1).replace(",", "")))
    return best


def instructions_per_capture(
    depth: int,
    seconds: float,
    rate_hz: int,
    native: bool = False,
    imports: tuple[str, ...] = (),
    python: Optional[str] = None,
) -> dict:
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        return {"skipped": "valgrind is not installed"}
    args = ["handler", str(depth), str(seconds), str(rate_hz)]
    if native or imports:
        args += ["native" if native else "python", ",".join(imports)]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "callgrind.out")
        run = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--fair-sched=yes",
                f"--callgrind-out-file={out}",
                python or sys.executable,
                "-m",
                "benchmarks.micro",
                *args,
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
    # "  1,341,107 ( 0.14%)  src/.../signal_handler.cpp:spprof::...::capture_into(...) [...]"
    inclusive = _inclusive(annotated, r"signal_handler\.cpp:.*::capture_into\(")
    samples = int(result.get("samples", 0))
    report = {
        "python": "{}.{}".format(*sys.version_info[:2]) if python is None else python,
        "depth": depth,
        "rate_hz": rate_hz,
        "native": native,
        "imports": list(imports),
        "samples": samples,
        "capture_instructions": inclusive,
        "instructions_per_capture": round(inclusive / samples) if samples else None,
    }
    if native and samples:
        parts = {key: _inclusive(annotated, pattern) for key, pattern in PARTS}
        per = {key: round(v / samples) for key, v in parts.items()}
        # What unwind_native did itself, besides the parts it called (stack reads, registers).
        called = sum(v for key, v in parts.items() if key != "unwind_native")
        per["unwind_own"] = round((parts["unwind_native"] - called) / samples)
        report["unwinder_per_capture"] = per
    return report


def main(argv: Optional[list[str]] = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("depth", nargs="?", type=int, default=50)
    ap.add_argument("seconds", nargs="?", type=float, default=3.0)
    ap.add_argument("rate", nargs="?", type=int, default=500)
    ap.add_argument("--native", action="store_true", help="unwind native frames too")
    ap.add_argument("--imports", default="", help="modules to import first, comma-separated")
    ap.add_argument("--python", help="the interpreter to measure (default: this one)")
    ap.add_argument("--compare", action="store_true", help="both modes, and their ratio")
    a = ap.parse_args(argv)
    imports = tuple(x for x in a.imports.split(",") if x)
    if a.compare:
        py = instructions_per_capture(a.depth, a.seconds, a.rate, False, imports, a.python)
        nat = instructions_per_capture(a.depth, a.seconds, a.rate, True, imports, a.python)
        ratio = None
        if py.get("instructions_per_capture") and nat.get("instructions_per_capture"):
            ratio = round(nat["instructions_per_capture"] / py["instructions_per_capture"], 2)
        print(json.dumps({"python_only": py, "native": nat, "native_over_python": ratio}))
        return
    print(
        json.dumps(
            instructions_per_capture(a.depth, a.seconds, a.rate, a.native, imports, a.python)
        )
    )


if __name__ == "__main__":
    main()
