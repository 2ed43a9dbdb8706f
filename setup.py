"""Build spprof._ext, the C++17 core, with setuptools.

Every .cpp under src/spprof/_ext is compiled except the OS layer, of which exactly one side
is chosen: platform/linux.cpp and every platform/*_linux.cpp on Linux, platform/darwin.cpp,
platform/darwin_mach.cpp and every platform/*_darwin.cpp on macOS;
platform/exit_signals_posix.cpp, platform/fd_poll_posix.cpp and platform/thread_signals_posix.cpp
(POSIX) are built on both. Environment switches (used
by the Makefile and CI):
  SPPROF_WERROR=1    -Wall -Wextra -Werror on our own code
  SPPROF_SANITIZE=1  AddressSanitizer + UndefinedBehaviorSanitizer build
  SPPROF_DEBUG_BUILD=1  -O0 -g
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
EXT_DIR = Path("src") / "spprof" / "_ext"


def _sources() -> list[str]:
    portable = sorted(
        str(p.relative_to(HERE))
        for p in (HERE / EXT_DIR).rglob("*.cpp")
        if "platform" not in p.relative_to(HERE / EXT_DIR).parts
    )
    # Both: the CLI's exit-signal handler, the control socket's poll.
    posix = [
        "platform/exit_signals_posix.cpp",
        "platform/fd_poll_posix.cpp",
        "platform/thread_signals_posix.cpp",
    ]
    if sys.platform == "darwin":
        os_layer = ["platform/darwin.cpp", "platform/darwin_mach.cpp", *posix]
        suffix = "_darwin.cpp"
    elif sys.platform.startswith("linux"):
        os_layer = ["platform/linux.cpp", *posix]
        suffix = "_linux.cpp"
    else:
        raise SystemExit(f"spprof supports Linux and macOS, not {sys.platform}")
    # Every platform/*_linux.cpp or *_darwin.cpp piece of the chosen side.
    os_layer += sorted(
        str(p.relative_to(HERE / EXT_DIR)) for p in (HERE / EXT_DIR / "platform").glob("*" + suffix)
    )
    return portable + [str(EXT_DIR / p) for p in os_layer]


def _headers() -> list[str]:
    # setuptools only rebuilds when a listed file changed: list every header.
    return sorted(str(p.relative_to(HERE)) for p in (HERE / EXT_DIR).rglob("*.h"))


def _long_description() -> str:
    """README.md with its relative links and images made absolute against [project.urls] Source,
    so that they work on PyPI too: the one place a maintainer writes the address."""
    readme = (HERE / "README.md").read_text(encoding="utf-8")
    match = re.search(r'^Source\s*=\s*"([^"]+)"', (HERE / "pyproject.toml").read_text(), re.M)
    if match is None:
        return readme
    source = match.group(1).rstrip("/")

    def absolute(m: re.Match[str]) -> str:
        bang, text, target = m.group(1), m.group(2), m.group(3)
        if re.match(r"[a-z][a-z0-9+.-]*:|#", target):  # already absolute, or an anchor
            return m.group(0)
        kind = "raw" if bang else "blob"
        return f"{bang}[{text}]({source}/{kind}/main/{target})"

    return re.sub(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)", absolute, readme)


def _flag(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


if sysconfig.get_config_var("Py_GIL_DISABLED"):
    # The frame walker reads the GIL build's structures (free-threaded frames and code objects
    # differ): refuse here, with the reason, rather than in the middle of the compile.
    raise SystemExit(
        "spprof does not support free-threaded CPython (3.13t/3.14t/3.15t) yet: "
        "install it into a default (GIL) CPython"
    )

compile_args = ["-std=c++17", "-fvisibility=hidden"]
link_args: list[str] = []
if _flag("SPPROF_DEBUG_BUILD"):
    compile_args += ["-O0", "-g"]
else:
    compile_args += ["-O2", "-g"]
if _flag("SPPROF_WERROR"):
    compile_args += ["-Wall", "-Wextra", "-Werror"]
if _flag("SPPROF_SANITIZE"):
    san = [
        "-fsanitize=address,undefined",
        "-fno-omit-frame-pointer",
        "-fno-sanitize-recover=undefined",
    ]
    compile_args += san
    link_args += san
libraries: list[str] = []
if sys.platform.startswith("linux"):
    link_args += ["-pthread"]
    # glibc < 2.34 (Ubuntu 20.04, Debian 11, RHEL 8, manylinux2014) keeps timer_create & co. in
    # librt: without it the module fails at import with "undefined symbol: timer_create". On
    # newer glibc librt is an empty stub, so linking it costs nothing.
    libraries += ["rt"]


class BuildExt(build_ext):
    """build_ext that says which package to install when there is no C++ compiler."""

    def build_extensions(self) -> None:
        # The compile and link commands setuptools will run for a C++ extension (names vary
        # across setuptools releases; absent ones are skipped).
        commands = [
            getattr(self.compiler, name, None)
            for name in ("compiler_so_cxx", "compiler_cxx", "compiler_so", "linker_so_cxx")
        ]
        missing = [cmd[0] for cmd in commands if cmd and shutil.which(cmd[0]) is None]
        if missing:
            cxx = missing
            hint = (
                "xcode-select --install"
                if sys.platform == "darwin"
                else "Debian/Ubuntu: apt-get install g++; Fedora/RHEL: dnf install gcc-c++; "
                "Alpine: apk add g++"
            )
            raise SystemExit(
                f"spprof: no C++ compiler found ({cxx[0]!r} is not on PATH). spprof's native "
                "core is C++17 and is compiled when no wheel matches this platform. Install one "
                f"({hint}), or set CXX to a C++17 compiler, then install spprof again."
            )
        super().build_extensions()


# Beside the package in site-packages: the start-up hook of --subprocesses (one environment
# lookup per Python start; src/spprof/_subprocess_hook.py).
PTH = Path("src") / "pth" / "spprof-subprocesses.pth"


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        self.copy_file(str(PTH), os.path.join(self.build_lib, PTH.name))


setup(
    long_description=_long_description(),
    long_description_content_type="text/markdown",
    # Separate build trees per target (make test, test-asan, bench) so that concurrent builds
    # for the same interpreter never share object files.
    options={"build": {"build_base": os.environ.get("SPPROF_BUILD_BASE", "build")}},
    ext_modules=[
        Extension(
            "spprof._ext",
            sources=_sources(),
            depends=_headers(),
            include_dirs=[str(EXT_DIR)],
            extra_compile_args=compile_args,
            extra_link_args=link_args,
            libraries=libraries,
            language="c++",
        )
    ],
    cmdclass={"build_ext": BuildExt, "build_py": BuildPy},
)
