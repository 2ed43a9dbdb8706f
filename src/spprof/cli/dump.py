"""`spprof dump PID [--json]`: every thread's current Python stack in a process that runs
spprof, with the thread's name, id and whether it was on a CPU (py-spy dump's view, with no
ptrace and no root: the process answers itself, cli/remote.py); for a thread sampled in the
dump's span, whether it held the GIL, and with --native sessions its last sample's stack with
native frames."""

from __future__ import annotations

import json
import sys
from typing import Any, Optional

from .errors import Parser, guarded
from .remote import ask, parse_pid

TIMEOUT_S = 10.0


def _parser() -> Parser:
    p = Parser(
        prog="spprof dump",
        description="Print every thread's current stack in a process that runs spprof.",
    )
    p.add_argument("pid", type=str, help="the process id")
    p.add_argument("--json", action="store_true", help="the answer as JSON, for tools")
    return p


def format_dump(answer: dict[str, Any]) -> str:
    lines = [f"Process {answer['pid']}: {' '.join(answer.get('argv') or [])}".rstrip()]
    for t in answer["threads"]:
        tid = t["native_id"] if t["native_id"] is not None else t["ident"]
        name = f' "{t["name"]}"' if t["name"] is not None else ""
        how = [t["state"]]
        if t.get("cpu_pct") is not None:
            how.append(f"{t['cpu_pct']}% CPU")
        last = t.get("last_sample")
        if last is not None and last.get("gil") is not None:
            how.append("holding the GIL" if last["gil"] else "not holding the GIL")
        if t.get("daemon"):
            how.append("daemon")
        lines.append("")
        lines.append(f"Thread {tid}{name} ({', '.join(how)})")
        lines.extend(f"    {f['function']} ({f['file']}:{f['line']})" for f in t["frames"])
        if last is not None and any(f["native"] for f in last["frames"]):
            # The session unwinds native frames: the last sample's stack, C and Python
            # interleaved, as py-spy dump --native shows it.
            lines.append(f"  last sample, {last['age_ms']} ms ago, with native frames:")
            lines.extend(_frame_line(f) for f in last["frames"])
    return "\n".join(lines) + "\n"


def _frame_line(f: dict[str, Any]) -> str:
    if f["native"]:
        lib = f["file"].rsplit("/", 1)[-1]
        named = lib and not f["function"].startswith(lib + "+")  # lib.so+0x... names it already
        return f"    {f['function']} ({lib})" if named else f"    {f['function']}"
    return f"    {f['function']} ({f['file']}:{f['line']})"


def _dump(argv: list[str]) -> int:
    opts = _parser().parse_args(argv)
    answer = ask(parse_pid(opts.pid), {"cmd": "dump"}, TIMEOUT_S)
    if opts.json:
        del answer["ok"]
        sys.stdout.write(json.dumps(answer, indent=1) + "\n")
    else:
        sys.stdout.write(format_dump(answer))
    return 0


def main(argv: Optional[list[str]] = None) -> int:
    return guarded(_dump, list(sys.argv[2:] if argv is None else argv))
