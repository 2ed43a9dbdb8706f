"""Build spprof's manylinux2014 wheels without containers, then install and use each one.

    python tools/wheels.py build --python ~/.pyenv/versions/3.12.1/bin/python \
        --cross aarch64:build/sysroot/bookworm-arm64:3.11 --out dist
    python tools/wheels.py check --python ~/.pyenv/versions/3.12.1/bin/python \
        --bullseye build/sysroot/bullseye-amd64 --cross aarch64:build/sysroot/bookworm-arm64:3.11 \
        --wheels dist

`make wheels` / `make wheels-all` run both (docs/portability.md, "Wheels"). This script runs in
a venv holding the pinned tools: ziglang (zig's clang, lld, libc++ and the headers and stub
libraries of every glibc, so it targets glibc 2.17 from any machine), auditwheel and setuptools.

build, for each target:
  1. The Extension that setup.py declares (sources, flags, libraries), read by running setup.py
     with `setup()` captured, so that a wheel and `pip install .` compile the same thing.
  2. Every source compiled by `zig c++ -target <arch>-linux-gnu.2.17` against that CPython's
     headers, plus what setuptools adds from CPython's release CFLAGS (-DNDEBUG -fwrapv -fPIC);
     linked with zig's libc++ statically (its symbols kept out of the dynamic table), so the
     module needs glibc >= 2.17 and nothing else.
  3. Stripped; the symbols and DWARF go to a .debug file in --debug-dir, not shipped
     (build/wheels/debug; the module keeps a .gnu_debuglink to it).
  4. Packed with the pure-Python files (setup.py build_py) and the metadata setuptools writes
     (prepare_metadata_for_build_wheel) as <name>-cpXY-cpXY-manylinux_2_17_<arch>.
     manylinux2014_<arch>.whl; `auditwheel show` must call it manylinux_2_17, the module may
     need no library but glibc's, and import no unversioned symbol but CPython's.

check, for each wheel and each interpreter given that can run it: a fresh venv, `pip install`
of the wheel (pip decides whether the tags fit), then `python -m spprof -o x.speedscope.json -c
<workload>`, plain and with --native, run from outside the source tree; each profile must name
the workload's function in enough samples, and `spprof._ext` must be the wheel's.
Interpreters: host CPythons (--python), Debian bullseye's CPython 3.9 on its own glibc 2.31
(--bullseye), and an arm64 CPython under qemu-user (--cross). Any failure exits non-zero.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import hashlib
import json
import os
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "wheels"
GLIBC = "2.17"  # manylinux2014
# What a manylinux wheel may need at run time besides itself: glibc's own libraries.
GLIBC_LIBS = frozenset(
    {"libc.so.6", "libm.so.6", "libpthread.so.0", "librt.so.1", "libdl.so.2"}
) | {"ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
# Fixed zip timestamps: the same sources give the same wheel bytes.
ZIP_DATE = (2020, 1, 1, 0, 0, 0)
QEMU = os.environ.get("ARM64_QEMU", "qemu-aarch64-static")
WORKLOAD_FUNC = "spprof_wheel_workload"
# 0.6 s of CPU at spprof's default interval: about 60 samples; 20 leaves room for qemu.
WORKLOAD = (
    "import time\n"
    f"def {WORKLOAD_FUNC}():\n"
    "    end = time.process_time() + 0.6\n"
    "    n = 0\n"
    "    while time.process_time() < end:\n"
    "        n += 1\n"
    "    return n\n"
    f"{WORKLOAD_FUNC}()\n"
)
MIN_SAMPLES = 20


class Failure(Exception):
    """A wheel that cannot be built, fails auditwheel, or does not install or profile."""


def run(cmd: list[str], **kw: Any) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise Failure(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}"
        )
    return str(proc.stdout)


@dataclass(frozen=True)
class Target:
    """One wheel: a CPython version on an architecture, and where its headers are."""

    arch: str
    version: str  # "3.12"
    include: Path  # the directory holding Python.h
    sysroot: Path | None  # a Debian sysroot (its multiarch pyconfig.h lives there)

    @property
    def cp(self) -> str:
        return "cp" + self.version.replace(".", "")

    @property
    def ext_suffix(self) -> str:
        return f".{self.cp.replace('cp', 'cpython-')}-{MULTIARCH[self.arch]}.so"

    @property
    def platform_tags(self) -> list[str]:
        return [f"manylinux_2_17_{self.arch}", f"manylinux2014_{self.arch}"]

    def wheel_name(self, version: str) -> str:
        return f"spprof-{version}-{self.cp}-{self.cp}-{'.'.join(self.platform_tags)}.whl"


def host_target(python: str) -> Target:
    """A CPython this machine runs: its version and headers, from its own sysconfig."""
    out = run(
        [
            python,
            "-c",
            "import sys, sysconfig, platform; print(platform.machine()); "
            "print('%d.%d' % sys.version_info[:2]); print(sysconfig.get_paths()['include']); "
            "print(int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))))",
        ]
    ).split("\n")
    arch, version, include, free_threaded = out[:4]
    if free_threaded == "1":
        raise Failure(f"{python}: free-threaded CPython is not supported by spprof")
    include_path = Path(include)
    sysroot = None
    # Debian's interpreters (make pythons-debian) live in a sysroot: <sysroot>/usr/bin/python3.X.
    if (
        include_path.parts[-3:-1] == ("usr", "include")
        and (include_path.parent.parent.parent / "usr").is_dir()
    ):
        sysroot = include_path.parent.parent.parent
    return Target(arch, version, include_path, sysroot)


def cross_target(spec: str) -> Target:
    """ARCH:SYSROOT:VERSION, a Debian sysroot holding libpython3.X-dev for another arch."""
    arch, sysroot, version = spec.split(":")
    if arch not in MULTIARCH:
        raise Failure(f"--cross {spec}: architecture must be one of {sorted(MULTIARCH)}")
    root = Path(sysroot).resolve()
    include = root / "usr" / "include" / f"python{version}"
    if not (include / "Python.h").is_file():
        raise Failure(f"--cross {spec}: no {include}/Python.h (libpython{version}-dev)")
    return Target(arch, version, include, root)


def declared_extension() -> Any:
    """The setuptools Extension setup.py declares, with the flags it computes here."""
    import setuptools

    captured: dict[str, Any] = {}
    real_setup = setuptools.setup
    setuptools.setup = lambda **kw: captured.update(kw)
    cwd = Path.cwd()
    try:
        os.chdir(ROOT)
        runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    finally:
        setuptools.setup = real_setup
        os.chdir(cwd)
    (ext,) = captured["ext_modules"]
    return ext


def zig(*args: str) -> list[str]:
    return [sys.executable, "-m", "ziglang", *args]


def include_flags(target: Target, ext: Any) -> list[str]:
    flags = [f"-I{ROOT / d}" for d in ext.include_dirs] + [f"-I{target.include}"]
    if target.sysroot is not None:
        # Debian's pyconfig.h includes <MULTIARCH/python3.X/pyconfig.h>: a folder holding just
        # that, since the sysroot's whole /usr/include would bring its own libc headers.
        multiarch = MULTIARCH[target.arch]
        shim = WORK / "include" / f"{target.arch}-{target.version}"
        link = shim / multiarch / f"python{target.version}"
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(
                target.sysroot / "usr" / "include" / multiarch / f"python{target.version}"
            )
        # Debian builds 3.9/3.10 with HAVE_CRYPT_H, so their Python.h includes <crypt.h>
        # (for the _crypt module's crypt_r; no extension uses it). zig's glibc headers have
        # none (libxcrypt's): an empty one stands in.
        crypt = shim / "crypt.h"
        if not crypt.is_file():
            crypt.write_text("/* tools/wheels.py: Python.h's <crypt.h>, unused by spprof. */\n")
        flags.append(f"-I{shim}")
    return flags


def compile_module(target: Target, ext: Any, objdir: Path, jobs: int) -> Path:
    triple = f"{target.arch}-linux-gnu.{GLIBC}"
    base = [
        *zig("c++", "-target", triple),
        *ext.extra_compile_args,
        "-DNDEBUG",
        "-fwrapv",
        "-fPIC",
        "-pthread",
        *include_flags(target, ext),
    ]
    # Objects are reused by the next run while the flags, the source and every header are
    # older than they are (the flags are kept in .flags; new flags start afresh).
    stamp = objdir / ".flags"
    if not stamp.is_file() or stamp.read_text() != " ".join(base):
        shutil.rmtree(objdir, ignore_errors=True)
        objdir.mkdir(parents=True)
        stamp.write_text(" ".join(base))
    newest_header = max((ROOT / h).stat().st_mtime for h in ext.depends)
    objects = [objdir / (src.replace("/", "_").removesuffix(".cpp") + ".o") for src in ext.sources]

    def one(pair: tuple[str, Path]) -> None:
        src, obj = ROOT / pair[0], pair[1]
        if obj.is_file() and obj.stat().st_mtime > max(newest_header, src.stat().st_mtime):
            return
        run([*base, "-c", str(src), "-o", str(obj)])

    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        list(pool.map(one, zip(ext.sources, objects)))
    so = objdir / ("_ext" + target.ext_suffix)
    libs = [f"-l{lib}" for lib in ext.libraries]
    # zig links its libc++ statically. A CPython module needs to export PyInit__ext only: the
    # version script keeps libc++'s weak operator new/delete out of the dynamic symbol table,
    # so they never stand in for another library's.
    exports = objdir / "exports.map"
    exports.write_text("{ global: PyInit__ext; local: *; };\n")
    run(
        [
            *zig("c++", "-target", triple),
            "-shared",
            "-o",
            str(so),
            *map(str, objects),
            *ext.extra_link_args,
            *libs,
            f"-Wl,--version-script={exports}",
            "-Wl,--build-id=sha1",
        ]
    )
    return so


def strip_module(so: Path, debug: Path, arch: str) -> tuple[int, int]:
    """Strip `so` in place, its symbols and DWARF saved to `debug`; (size before, after)."""
    before = so.stat().st_size
    # binutils' objcopy for the target (Debian: binutils, binutils-aarch64-linux-gnu, which g++
    # and g++-aarch64-linux-gnu bring); zig's objcopy lacks --only-keep-debug.
    objcopy = shutil.which(f"{MULTIARCH[arch]}-objcopy")
    if objcopy is None:
        raise Failure(f"strip: no {MULTIARCH[arch]}-objcopy (Debian: binutils-{MULTIARCH[arch]})")
    run([objcopy, "--only-keep-debug", str(so), str(debug)])
    run([objcopy, "--strip-all", f"--add-gnu-debuglink={debug}", str(so)])
    return before, so.stat().st_size


def needed_libraries(so: Path) -> list[str]:
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile

    with so.open("rb") as f:
        elf = ELFFile(f)
        return [
            tag.needed
            for section in elf.iter_sections()
            if isinstance(section, DynamicSection)
            for tag in section.iter_tags()
            if tag.entry.d_tag == "DT_NEEDED"
        ]


def unversioned_imports(so: Path) -> list[str]:
    """Undefined dynamic symbols with no version that are not CPython's (Py*, _Py*).

    Every glibc symbol zig links carries its GLIBC_x version; one without any would be a
    function glibc 2.17 lacks, found only at call time on an old system."""
    out = run(["nm", "-D", "--undefined-only", str(so)])
    # "U name[@version]"; weak ones ("w", e.g. __gmon_start__) may stay unresolved.
    strong = [f[-1] for f in (line.split() for line in out.splitlines()) if f and f[-2] == "U"]
    return [n for n in strong if "@" not in n and not n.startswith(("Py", "_Py"))]


@dataclass(frozen=True)
class PureParts:
    """What every wheel shares: the Python files and the .dist-info setuptools writes."""

    purelib: Path
    dist_info: Path
    version: str


def pure_parts(tmp: Path) -> PureParts:
    purelib = tmp / "purelib"
    run([sys.executable, "setup.py", "-q", "build_py", "-d", str(purelib)], cwd=ROOT)
    meta = tmp / "meta"
    meta.mkdir()
    out = run(
        [
            sys.executable,
            "-c",
            "import sys; from setuptools import build_meta; "
            "print(build_meta.prepare_metadata_for_build_wheel(sys.argv[1]))",
            str(meta),
        ],
        cwd=ROOT,
    )
    name = out.strip().splitlines()[-1]
    match = re.fullmatch(r"spprof-(.+)\.dist-info", name)
    if not match:
        raise Failure(f"unexpected metadata folder {name!r}")
    return PureParts(purelib, meta / name, match.group(1))


def record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def pack_wheel(target: Target, parts: PureParts, so: Path, out: Path) -> Path:
    files: dict[str, tuple[bytes, int]] = {}
    for path in sorted(parts.purelib.rglob("*")):
        if path.is_file():
            files[path.relative_to(parts.purelib).as_posix()] = (path.read_bytes(), 0o644)
    files["spprof/_ext" + target.ext_suffix] = (so.read_bytes(), 0o755)
    dist_info = parts.dist_info.name
    for path in sorted(parts.dist_info.rglob("*")):
        rel = path.relative_to(parts.dist_info).as_posix()
        if path.is_file() and rel not in ("WHEEL", "RECORD"):
            files[f"{dist_info}/{rel}"] = (path.read_bytes(), 0o644)
    tags = "".join(f"Tag: {target.cp}-{target.cp}-{plat}\n" for plat in target.platform_tags)
    wheel_meta = (
        "Wheel-Version: 1.0\nGenerator: spprof tools/wheels.py\nRoot-Is-Purelib: false\n" + tags
    )
    files[f"{dist_info}/WHEEL"] = (wheel_meta.encode(), 0o644)
    record = [record_line(name, data) for name, (data, _) in files.items()]
    record.append(f"{dist_info}/RECORD,,")
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode(), 0o644
    wheel = out / target.wheel_name(parts.version)
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, (data, mode) in files.items():
            info = zipfile.ZipInfo(name, ZIP_DATE)
            info.external_attr = (0o100000 | mode) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return wheel


def auditwheel_show(wheel: Path, target: Target) -> None:
    out = run([str(Path(sys.executable).parent / "auditwheel"), "show", str(wheel)])
    print("\n".join("    " + line for line in out.strip().splitlines()))
    tag = f'"manylinux_2_17_{target.arch}"'
    if f"consistent with the following platform tag: {tag}" not in " ".join(out.split()):
        raise Failure(f"auditwheel show does not call {wheel.name} manylinux_2_17:\n{out}")


def build(args: argparse.Namespace) -> None:
    os.environ.setdefault("SPPROF_WERROR", "1")
    # zig builds libc++ for each target once (minutes) and keeps it here; `make clean` drops it.
    os.environ.setdefault("ZIG_GLOBAL_CACHE_DIR", str(WORK / "zig-cache"))
    os.environ.setdefault("ZIG_LOCAL_CACHE_DIR", str(WORK / "zig-cache"))
    targets = [host_target(p) for p in args.python] + [cross_target(s) for s in args.cross]
    if not targets:
        raise Failure("build: no target (give --python and/or --cross)")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    debug_dir = Path(args.debug_dir).resolve()
    debug_dir.mkdir(parents=True, exist_ok=True)
    ext = declared_extension()
    shutil.rmtree(WORK / "tmp", ignore_errors=True)
    (WORK / "tmp").mkdir(parents=True)
    parts = pure_parts(WORK / "tmp")
    for target in targets:
        print(f"=== wheel: CPython {target.version} {target.arch} ({target.include})", flush=True)
        so = compile_module(
            target, ext, WORK / "obj" / f"{target.arch}-{target.version}", args.jobs
        )
        wheel_path = out / target.wheel_name(parts.version)
        debug = debug_dir / (wheel_path.name.removesuffix(".whl") + ".debug")
        before, after = strip_module(so, debug, target.arch)
        needed = needed_libraries(so)
        print(f"  _ext{target.ext_suffix}: {before:,} bytes -> {after:,} stripped; needs {needed}")
        extra = sorted(set(needed) - GLIBC_LIBS)
        if extra:
            raise Failure(f"{so.name} needs {extra}: a manylinux wheel may need glibc only")
        unversioned = unversioned_imports(so)
        if unversioned:
            raise Failure(f"{so.name} imports {unversioned} with no symbol version")
        wheel = pack_wheel(target, parts, so, out)
        print(f"  {wheel.name}: {wheel.stat().st_size:,} bytes; debug file {debug.name}")
        auditwheel_show(wheel, target)


# ---------------------------------------------------------------------------------------- check


@dataclass(frozen=True)
class Runner:
    """An interpreter that can run a wheel, and how to give it a venv."""

    label: str
    arch: str
    version: str
    python: str  # the interpreter (for qemu: the arm64 binary)
    kind: str  # "host", "debian" (a sysroot interpreter run through its loader), "qemu"
    sysroot: Path | None = None
    libc: str | None = None  # the glibc it must report, when it runs on a sysroot's


def host_runner(python: str) -> Runner:
    t = host_target(python)
    kind = "debian" if t.sysroot is not None else "host"
    return Runner(f"CPython {t.version} ({python})", t.arch, t.version, python, kind, t.sysroot)


def bullseye_runner(sysroot: str) -> Runner:
    """Debian bullseye's CPython 3.9 on the sysroot's glibc 2.31 (its loader, its libraries)."""
    root = Path(sysroot).resolve()
    python = root / "usr" / "bin" / "python3.9"
    lib = root / "lib" / "x86_64-linux-gnu"
    loader = lib / "ld-linux-x86-64.so.2"
    rpath = f"{root / 'usr' / 'lib' / 'x86_64-linux-gnu'}:{lib}"
    if shutil.which("patchelf") is None:
        raise Failure("check --bullseye needs patchelf (apt-get install patchelf)")
    current = run(["patchelf", "--print-interpreter", str(python)]).strip()
    if current != str(loader) or run(["patchelf", "--print-rpath", str(python)]).strip() != rpath:
        run(
            [
                "patchelf",
                "--set-interpreter",
                str(loader),
                "--force-rpath",
                "--set-rpath",
                rpath,
                str(python),
            ]
        )
    return Runner(
        f"Debian bullseye CPython 3.9, glibc 2.31 ({python})",
        "x86_64",
        "3.9",
        str(python),
        "debian",
        root,
        "2.31",
    )


def qemu_runner(spec: str) -> Runner:
    t = cross_target(spec)
    assert t.sysroot is not None
    if shutil.which(QEMU) is None:
        raise Failure(f"check --cross needs {QEMU} (apt-get install qemu-user-static)")
    python = t.sysroot / "usr" / "bin" / f"python{t.version}"
    return Runner(
        f"{t.arch} CPython {t.version} under {QEMU} ({python})",
        t.arch,
        t.version,
        str(python),
        "qemu",
        t.sysroot,
    )


def make_venv(runner: Runner, venv: Path) -> Path:
    """A fresh venv for `runner` with pip in it; returns its python."""
    shutil.rmtree(venv, ignore_errors=True)
    py = venv / "bin" / "python"
    if runner.kind == "qemu":
        # As `make test-arm64` does: a hand-made venv whose bin/python runs the arm64 interpreter
        # under qemu with itself as argv[0], so sys.prefix is the venv. pip is the host CPython's
        # bundled one, run by the arm64 interpreter.
        assert runner.sysroot is not None
        (venv / "bin").mkdir(parents=True)
        (venv / "pyvenv.cfg").write_text(
            f"home = {runner.sysroot}/usr/bin\ninclude-system-site-packages = false\n"
            f"version = {runner.version}\n"
        )
        qemu = f"{shutil.which(QEMU)} -L {runner.sysroot}"
        py.write_text(f'#!/bin/sh\nexec {qemu} -0 "$0" {runner.python} "$@"\n')
        py.chmod(0o755)
        return py
    if runner.kind == "debian":
        run([runner.python, "-m", "venv", "--without-pip", str(venv)])
    else:
        run([runner.python, "-m", "venv", str(venv)])
    return py


def bundled_pip(runner: Runner) -> Path | None:
    """A pip wheel to run from (Debian's python-wheels; for qemu, a host CPython's ensurepip)."""
    if runner.kind == "debian":
        assert runner.sysroot is not None
        found = sorted((runner.sysroot / "usr" / "share" / "python-wheels").glob("pip-*.whl"))
    elif runner.kind == "qemu":
        # The sysroot's own pip when it has one (python3-pip-whl: a pip as new as its CPython;
        # the host's bundled pip 23.2 cannot install on 3.15), else the host's.
        assert runner.sysroot is not None
        found = sorted((runner.sysroot / "usr" / "share" / "python-wheels").glob("pip-*.whl"))
        found = found or sorted(
            Path(sys.base_prefix).glob("lib/python3*/ensurepip/_bundled/pip-*.whl")
        )
        if not found:  # Debian's CPython has no bundled pip: the tools venv's own (pure Python)
            import pip

            return Path(pip.__file__).parent.parent
    else:
        return None
    if not found:
        raise Failure(f"{runner.label}: no pip wheel to install with")
    return found[-1]


def install_wheel(runner: Runner, py: Path, wheel: Path) -> str:
    pip = bundled_pip(runner)
    cmd = [str(py), f"{pip}/pip"] if pip else [str(py), "-m", "pip"]
    flags = ["install", "--no-index", "--no-deps", "--disable-pip-version-check", "--no-compile"]
    return run([*cmd, *flags, str(wheel)], env={**os.environ, "PIP_NO_INPUT": "1"})


def speedscope_samples(path: Path, func: str) -> int:
    """How many samples of the speedscope file have `func` on their stack."""
    doc = json.loads(path.read_text())
    frames = doc["shared"]["frames"]
    wanted = {i for i, f in enumerate(frames) if f.get("name") == func}
    total = 0
    for prof in doc["profiles"]:
        if prof.get("type") == "sampled":
            total += sum(1 for s in prof["samples"] if wanted.intersection(s))
        else:  # evented: count the open/close pairs of func as a stand-in
            total += sum(1 for e in prof["events"] if e["type"] == "O" and e["frame"] in wanted)
    return total


def exercise(runner: Runner, wheel: Path) -> str:
    """Install `wheel` for `runner` and record a profile with it; a one-line result."""
    venv = WORK / "check" / f"{runner.kind}-{runner.arch}-{runner.version}"
    py = make_venv(runner, venv)
    install_wheel(runner, py, wheel)
    tmp = Path(tempfile.mkdtemp(prefix="spprof-wheel-check-"))
    try:
        # Run from outside the source tree: the spprof imported must be the installed one.
        probe = run(
            [
                str(py),
                "-c",
                "import os, spprof, spprof._ext as e; "
                "print(e.__file__); print(os.confstr('CS_GNU_LIBC_VERSION'))",
            ],
            cwd=tmp,
        ).split("\n")
        ext_file, libc = probe[0], probe[1]
        if not Path(ext_file).resolve().is_relative_to(venv.resolve()):
            raise Failure(f"{runner.label}: spprof._ext came from {ext_file}, not the venv")
        if runner.libc and libc != f"glibc {runner.libc}":
            raise Failure(f"{runner.label}: runs on {libc}, expected glibc {runner.libc}")
        counts = []
        # Python frames only, then with native frames (spprof's own unwinder, as zig built it).
        for mode in ([], ["--native"]):
            out = tmp / "x.speedscope.json"
            run([str(py), "-m", "spprof", "-q", *mode, "-o", str(out), "-c", WORKLOAD], cwd=tmp)
            samples = speedscope_samples(out, WORKLOAD_FUNC)
            if samples < MIN_SAMPLES:
                raise Failure(
                    f"{runner.label}: spprof {' '.join(mode)}: the profile has {samples} samples "
                    f"in {WORKLOAD_FUNC}, expected at least {MIN_SAMPLES}"
                )
            counts.append(samples)
        return f"{libc}; samples in {WORKLOAD_FUNC}: {counts[0]}, with --native {counts[1]}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(args: argparse.Namespace) -> None:
    runners = [host_runner(p) for p in args.python]
    runners += [bullseye_runner(s) for s in args.bullseye]
    runners += [qemu_runner(s) for s in args.cross]
    wheels = sorted(Path(args.wheels).glob("spprof-*.whl"))
    if not wheels:
        raise Failure(f"check: no wheel in {args.wheels}")
    failures: list[str] = []
    tried: set[Path] = set()
    for runner in runners:
        cp = "cp" + runner.version.replace(".", "")
        fit = [
            w for w in wheels if f"-{cp}-{cp}-" in w.name and w.name.endswith(f"_{runner.arch}.whl")
        ]
        if not fit:
            failures.append(f"{runner.label}: no {cp} {runner.arch} wheel in {args.wheels}")
            continue
        for wheel in fit:
            tried.add(wheel)
            try:
                print(f"ok   {wheel.name} on {runner.label}: {exercise(runner, wheel)}", flush=True)
            except Failure as e:
                print(f"FAIL {wheel.name} on {runner.label}", flush=True)
                failures.append(str(e))
    for wheel in wheels:
        if wheel not in tried:
            failures.append(f"{wheel.name}: no interpreter given to check it on")
    if failures:
        raise Failure("\n".join(failures))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build, strip, pack and auditwheel-check wheels")
    b.add_argument("--python", action="append", default=[], help="a CPython of this machine")
    b.add_argument("--cross", action="append", default=[], metavar="ARCH:SYSROOT:VERSION")
    b.add_argument("--out", default="dist", help="folder for the wheels")
    b.add_argument(
        "--debug-dir",
        default=str(WORK / "debug"),
        help="folder for each module's symbols and DWARF (not shipped)",
    )
    b.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    c = sub.add_parser("check", help="install each wheel and record a profile with it")
    c.add_argument("--python", action="append", default=[], help="a CPython of this machine")
    c.add_argument("--bullseye", action="append", default=[], metavar="SYSROOT")
    c.add_argument("--cross", action="append", default=[], metavar="ARCH:SYSROOT:VERSION")
    c.add_argument("--wheels", default="dist")
    args = p.parse_args(argv)
    try:
        build(args) if args.command == "build" else check(args)
    except Failure as e:
        print(f"wheels: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
