"""Compare spprof's Rust v0 demangler with rustc's own, over symbols rustc emits.

Not run by the test suite (it needs rustc, which CI does not have): the figure in
docs/native-unwinding.md ("Names") comes from it. It builds, in a temporary directory,

- an oracle: a Rust program printing `format!("{:#}", rustc_demangle::demangle(line))` for each
  line of stdin (the `rustc_demangle` crate in rustc's sysroot, reached with RUSTC_BOOTSTRAP=1);
- the same for spprof (`unwind/rust_demangle.cpp` behind a small main);
- `rust_demangle_zoo.rs` (beside this file) as an object and as a cdylib with
  `-C symbol-mangling-version=v0`, and `rust_demangle_zoo_consts.rs` (const generics of
  `adt_const_params` values) as an object, whose `_R` symbols (`nm`) are the input, plus random
  mutations of them;

and prints how many outputs agree. Usage: python tests/tools/rust_demangle_compare.py
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ORACLE = """#![feature(rustc_private)]
extern crate rustc_demangle;
use std::io::BufRead;
fn main() {
    for line in std::io::stdin().lock().lines() {
        println!("{:#}", rustc_demangle::demangle(&line.unwrap()));
    }
}
"""
MINE = """#include <iostream>
#include <string>
#include "unwind/rust_demangle.h"
int main() {
    std::string l;
    while (std::getline(std::cin, l)) {
        std::string o;
        const bool ok = spprof::rust_v0_demangle(l.c_str(), &o) ||
                        spprof::rust_legacy_demangle(l.c_str(), &o);
        std::cout << (ok ? o : l) << "\\n";
    }
}
"""
ALPHABET = "_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ$."
LEGACY_HASH = re.compile(r"::h[0-9a-f]{16}(?=$|\.)")
# rustc's demangler marks what it could not read inside its output instead of failing.
UNCLEAN = ("{invalid", "{recursion", "?", "punycode{", "{size limit")


def run(cmd: list[str], **kw: object) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout  # type: ignore[call-overload, no-any-return]


def main() -> int:
    with tempfile.TemporaryDirectory() as d:
        t = Path(d)
        (t / "oracle.rs").write_text(ORACLE)
        run(
            ["rustc", "-O", str(t / "oracle.rs"), "-o", str(t / "oracle")],
            env={**os.environ, "RUSTC_BOOTSTRAP": "1"},
        )
        (t / "mine.cpp").write_text(MINE)
        run(
            [
                "g++",
                "-std=c++17",
                "-O1",
                f"-I{ROOT / 'src/spprof/_ext'}",
                str(t / "mine.cpp"),
                str(ROOT / "src/spprof/_ext/unwind/rust_demangle.cpp"),
                "-o",
                str(t / "mine"),
            ]
        )
        zoo = HERE / "rust_demangle_zoo.rs"
        base = ["rustc", "--edition", "2021", "-C", "symbol-mangling-version=v0", str(zoo)]
        run([*base, "--crate-type=lib", "--emit=obj", "-C", "opt-level=0", "-o", str(t / "zoo.o")])
        run([*base, "--crate-type=cdylib", "-C", "opt-level=1", "-o", str(t / "libzoo.so")])
        # Const generics of str, reference, array, tuple and ADT values (adt_const_params,
        # unstable: RUSTC_BOOTSTRAP=1 lets the stable compiler take the feature).
        consts = HERE / "rust_demangle_zoo_consts.rs"
        run(
            [*base[:-1], str(consts), "--crate-type=lib", "--emit=obj", "-o", str(t / "consts.o")],
            env={**os.environ, "RUSTC_BOOTSTRAP": "1"},
        )
        # The same zoo in the legacy mangling (stable rustc's default for a crate's own code;
        # choosing it explicitly is unstable).
        run(
            [
                *base[:3],
                "-Z",
                "unstable-options",
                "-C",
                "symbol-mangling-version=legacy",
                str(zoo),
                "--crate-type=lib",
                "--emit=obj",
                "-o",
                str(t / "legacy.o"),
            ],
            env={**os.environ, "RUSTC_BOOTSTRAP": "1"},
        )

        def symbols(files: tuple[str, ...], prefix: str) -> list[str]:
            return sorted(
                {
                    line.split()[-1]
                    for f in files
                    for line in run(["nm", str(t / f)]).splitlines()
                    if line.split() and line.split()[-1].startswith(prefix)
                }
            )

        syms = symbols(("zoo.o", "libzoo.so", "consts.o"), "_R")
        legacy = [s for s in symbols(("legacy.o",), "_ZN") if re.search(r"17h[0-9a-f]{16}E", s)]
        rng = random.Random(1)

        def mutate(pool: list[str], n: int) -> list[str]:
            out = []
            for _ in range(n):
                s = list(rng.choice(pool))
                for _ in range(rng.randint(1, 2)):
                    s[rng.randrange(2, len(s))] = rng.choice(ALPHABET)
                out.append("".join(s))
            return out

        mutated = mutate(syms, 20000)
        legacy_mutated = mutate(legacy, 5000)
        for title, names in (
            ("emitted", syms),
            ("mutated", mutated),
            ("legacy emitted", legacy),
            ("legacy mutated", legacy_mutated),
        ):
            text = "\n".join(names) + "\n"
            want = run([str(t / "oracle")], input=text).splitlines()
            # rustc's alternate form drops a legacy name's hash: so does the comparison
            got = [LEGACY_HASH.sub("", g) for g in run([str(t / "mine")], input=text).splitlines()]
            clean = same = only_mine = 0
            for name, w, g in zip(names, want, got):
                ok_w = w != name and not any(u in w for u in UNCLEAN)
                if ok_w:
                    clean += 1
                    same += w == g
                elif g != name:
                    only_mine += 1
            print(
                f"{title}: {len(names)} symbols, {clean} read cleanly by rustc's demangler, "
                f"{same} of them the same text here; {only_mine} accepted here only"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
