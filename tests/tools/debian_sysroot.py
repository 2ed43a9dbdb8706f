"""Unpack Debian packages, with everything they depend on, into a folder: a sysroot.

The CPython 3.14/3.15 interpreters and the arm64 CPython that `make test` and `make test-arm64`
run come from Debian's archive. This fetches them with a private apt configuration (its own
sources list, package lists, cache and an empty dpkg status), so the machine's apt, its dpkg
database and its lock are never touched, and unpacks each .deb with `dpkg-deb -x`. Nothing is
installed into the system; nothing runs as a maintainer script.

    python tests/tools/debian_sysroot.py --suite unstable --arch amd64 \
        --dest build/sysroot/unstable-amd64 python3.14 libpython3.14-dev

A finished sysroot holds a stamp naming what it was made from; the same request again is a
no-op, so make can call this every time.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

MIRROR = "http://deb.debian.org/debian"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# Pulled in only through "debconf | debconf-2.0" alternatives: installer UI, never run here.
SKIP = frozenset(
    {"cdebconf", "debconf", "libdebian-installer4", "libnewt0.52", "libslang2", "libtextwrap1"}
)


@dataclass(frozen=True)
class Request:
    suite: str
    arch: str
    packages: tuple[str, ...]

    def stamp(self) -> str:
        return f"{self.suite} {self.arch} {' '.join(sorted(self.packages))}\n"


class Apt:
    """apt-get / apt-cache run against a configuration that lives under `root` only."""

    def __init__(self, root: Path, req: Request) -> None:
        self.root = root
        self.req = req
        for sub in ("lists/partial", "cache/archives/partial", "debs"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        (root / "sources.list").write_text(f"deb [signed-by={KEYRING}] {MIRROR} {req.suite} main\n")
        (root / "status").touch()

    def options(self) -> list[str]:
        r = self.root
        settings = {
            "Dir::Etc::SourceList": r / "sources.list",
            "Dir::Etc::SourceParts": "/dev/null",
            "Dir::Etc::Preferences": "/dev/null",
            "Dir::Etc::PreferencesParts": "/dev/null",
            "Dir::State::Lists": r / "lists",
            "Dir::State::status": r / "status",
            "Dir::Cache": r / "cache",
            "APT::Architecture": self.req.arch,
            "APT::Architectures": self.req.arch,
            "Debug::NoLocking": "1",
        }
        out: list[str] = []
        for key, value in settings.items():
            out += ["-o", f"{key}={value}"]
        return out

    def run(self, tool: str, *args: str, cwd: Path | None = None) -> str:
        cmd = [tool, *self.options(), *args]
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"debian_sysroot: {' '.join(cmd[:1] + list(args[:2]))} failed:\n{proc.stderr}")
        return proc.stdout

    def closure(self) -> list[str]:
        """The requested packages and everything they depend on, recursively (no recommends)."""
        out = self.run(
            "apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
            "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances",
            *self.req.packages,
        )  # fmt: skip
        names = {
            line.strip() for line in out.splitlines() if line and not line.startswith((" ", "<"))
        }
        return sorted(names - SKIP)


def merge_usr(dest: Path) -> None:
    """/lib, /bin and /sbin as links into /usr, as on a merged-/usr system (trixie and later
    ship their files under /usr only; base-files, which makes the links, is not unpacked): an
    arm64 interpreter asks qemu for /lib/ld-linux-aarch64.so.1."""
    for name in ("bin", "sbin", "lib"):
        link = dest / name
        if not link.exists() and not link.is_symlink() and (dest / "usr" / name).is_dir():
            link.symlink_to(Path("usr") / name)


def build(req: Request, dest: Path) -> None:
    # apt reads a relative Dir::* value as relative to its own /etc/apt or /var/lib/apt.
    dest = dest.resolve()
    stamp = dest / ".sysroot-stamp"
    if stamp.is_file() and stamp.read_text() == req.stamp():
        merge_usr(dest)  # a sysroot made before the links were
        return
    if not shutil.which("dpkg-deb") or not shutil.which("apt-get"):
        sys.exit("debian_sysroot: needs apt-get and dpkg-deb (a Debian or Ubuntu machine)")
    if dest.exists():
        shutil.rmtree(dest)
    apt = Apt(dest.parent / f".apt-{dest.name}", req)
    apt.run("apt-get", "-q", "update")
    names = apt.closure()
    debs = apt.root / "debs"
    for old in debs.glob("*.deb"):
        old.unlink()
    apt.run("apt-get", "-q", "download", *names, cwd=debs)
    dest.mkdir(parents=True)
    for deb in sorted(debs.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True)
    merge_usr(dest)
    stamp.write_text(req.stamp())
    print(f"debian_sysroot: {len(names)} packages from {req.suite}/{req.arch} in {dest}")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--suite", required=True, help="Debian suite, e.g. unstable or bookworm")
    p.add_argument("--arch", required=True, help="Debian architecture, e.g. amd64 or arm64")
    p.add_argument("--dest", required=True, type=Path, help="folder to unpack into")
    p.add_argument("packages", nargs="+")
    args = p.parse_args(argv)
    build(Request(args.suite, args.arch, tuple(args.packages)), args.dest)


if __name__ == "__main__":
    main()
