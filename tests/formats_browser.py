"""Headless Chromium for the format tests: find it (never install it), load a page with the
network off, and return the DOM after the page's script ran plus Chromium's log."""

from __future__ import annotations

import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Optional

import pytest

from conftest import EVERY_VERSION
from test_formats_common import tool_env

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def chromium_or_skip() -> str:
    # The pages are pure-Python output and the browser's script: the same on every interpreter
    # (~21 s a version, the ASan run's included).
    if sys.version_info[:2] != (3, 12) and not EVERY_VERSION:
        pytest.skip(
            "runs on 3.12 only (SPPROF_TEST_EVERY_VERSION=1 for all): a page in the browser"
        )
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip("Chromium is not installed (the CI image installs the apt package chromium)")


def _base_cmd(chrome: str, tmp_path: Path) -> list[str]:
    return [
        chrome,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
        # No network: any request the page made would fail and be logged.
        "--proxy-server=127.0.0.1:9",
        "--proxy-bypass-list=<-loopback>",
    ]


def dump_dom(chrome: str, page: Path, tmp_path: Path, fragment: str = "") -> tuple[str, str]:
    """(the DOM after the page's scripts ran, Chromium's stderr log)."""
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    cmd = [
        *_base_cmd(chrome, tmp_path),
        "--window-size=1280,900",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        url,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, check=True, env=tool_env()
    )
    return proc.stdout, proc.stderr


def screenshot(chrome: str, page: Path, out: Path, tmp_path: Path, size: str = "1280,640") -> bytes:
    url = page.resolve().as_uri()
    subprocess.run(
        [
            *_base_cmd(chrome, tmp_path),
            "--hide-scrollbars",
            f"--window-size={size}",
            f"--screenshot={out}",
            url,
        ],
        capture_output=True,
        timeout=120,
        check=True,
        env=tool_env(),
    )
    return out.read_bytes()


def console_errors(log: str) -> list[str]:
    return [
        line
        for line in log.splitlines()
        if "CONSOLE" in line or "Uncaught" in line or ("ERR_" in line and "net::" in line)
    ]


class Element:
    def __init__(self, tag: str, attrs: dict[str, Optional[str]], parent: Optional[Element]):
        self.tag = tag
        self.attrs = attrs
        self.parent = parent
        self.children: list[Element] = []
        self.text = ""

    @property
    def classes(self) -> list[str]:
        return (self.attrs.get("class") or "").split()

    def all_text(self) -> str:
        return self.text + "".join(c.all_text() for c in self.children)

    def find(self, tag: str) -> Optional[Element]:
        return next((c for c in self.children if c.tag == tag), None)


VOID = {"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "wbr", "source"}


class Dom(HTMLParser):
    """A small tree of the dumped DOM (HTML or SVG): elements with attributes and text."""

    def __init__(self, text: str) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {}, None)
        self.cur = self.root
        self.elements: list[Element] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        el = Element(tag, dict(attrs), self.cur)
        self.cur.children.append(el)
        self.elements.append(el)
        if tag not in VOID:
            self.cur = el

    def handle_startendtag(self, tag, attrs):
        el = Element(tag, dict(attrs), self.cur)
        self.cur.children.append(el)
        self.elements.append(el)

    def handle_endtag(self, tag):
        node = self.cur
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.cur = node.parent

    def handle_data(self, data):
        self.cur.text += data

    def by_id(self, ident: str) -> Optional[Element]:
        return next((e for e in self.elements if e.attrs.get("id") == ident), None)

    def by_class(self, cls: str, tag: Optional[str] = None) -> list[Element]:
        return [e for e in self.elements if cls in e.classes and (tag is None or e.tag == tag)]
