"""The HTML flame graph, opened in headless Chromium: it loads without errors, draws the hot
function widest, highlights search matches with their share, switches threads, and a
100,000-sample profile renders in well under a second."""

from __future__ import annotations

import json
import re
import struct
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import on_one_version
from spprof import Frame
from spprof.output import render
from spprof.output.html import page_data
from test_formats_common import find_tool, real_profile, small_profile, synthetic_profile, tool_env

ROW = 18  # px per depth in the page


class Page(HTMLParser):
    """The parts of the dumped DOM the tests look at."""

    def __init__(self, dom: str) -> None:
        super().__init__()
        self.boxes: list[dict] = []
        self.body: dict = {}
        self.root: dict = {}
        self.matchinfo: dict = {}
        self._in_match = False
        self.match_text = ""
        self.feed(dom)

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "html":
            self.root = a
        elif tag == "body":
            self.body = a
        elif a.get("id") == "matchinfo":
            self.matchinfo = a
            self._in_match = True
        elif "box" in (a.get("class") or "").split():
            style = dict(
                (k.strip(), v.strip())
                for k, v in (p.split(":", 1) for p in a["style"].split(";") if ":" in p)
            )
            self.boxes.append(
                {
                    "name": a["data-name"],
                    "classes": a["class"].split(),
                    "left": float(style["left"][:-2]),
                    "top": float(style["top"][:-2]),
                    "width": float(style["width"][:-2]),
                }
            )

    def handle_data(self, data):
        if self._in_match:
            self.match_text += data

    def handle_endtag(self, tag):
        self._in_match = False

    def at_depth(self, depth: int) -> list[dict]:
        return [b for b in self.boxes if b["top"] == (depth - 1) * ROW]


@pytest.fixture(scope="module")
def chrome() -> str:
    path = find_tool(("chromium", "chromium-browser", "google-chrome", "chrome"), "chromium")
    if path is None:
        pytest.skip(
            "Chromium is not installed and could not be installed (apt-get install chromium)"
        )
    return path


def open_page(chrome: str, page: Path, tmp_path: Path, fragment: str = "") -> tuple[Page, str]:
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    cmd = [
        chrome,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'chrome-profile'}",
        "--window-size=1200,900",
        "--enable-logging=stderr",
        "--v=0",
        "--dump-dom",
        url,
    ]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=120, check=True, env=tool_env()
    )
    return Page(proc.stdout), proc.stderr


def assert_clean_load(page: Page, log: str) -> None:
    assert page.body.get("data-ready") == "1", "the page script did not finish"
    assert "data-errors" not in page.root, page.root.get("data-errors")
    console = [line for line in log.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == [], console


def test_page_is_self_contained(tmp_path):
    data = render(small_profile(), "html").decode()
    assert "http://" not in data and "https://" not in data
    assert not re.search(r"<(script|link|img)[^>]*\s(src|href)=", data)
    assert "@import" not in data


@on_one_version("a hand-made profile in the browser")
def test_hand_made_profile_in_chromium(chrome, tmp_path):
    path = tmp_path / "small.html"
    small_profile().save(path, "html")
    page, log = open_page(chrome, path, tmp_path)
    assert_clean_load(page, log)
    # All threads: the two roots side by side, <module> (10 ms) wider than Thread.run (3 ms).
    roots = sorted(page.at_depth(1), key=lambda b: -b["width"])
    assert [b["name"] for b in roots] == ["<module>", "Thread.run"]
    assert roots[0]["width"] == pytest.approx(roots[1]["width"] * 10 / 3, rel=0.02)
    under_main = sorted(page.at_depth(3), key=lambda b: -b["width"])
    assert [b["name"] for b in under_main] == ["Work.hot", "cold"]

    page, log = open_page(chrome, path, tmp_path, "search=hot")
    assert_clean_load(page, log)
    assert [b["name"] for b in page.boxes if "match" in b["classes"]] == ["Work.hot"]
    assert float(page.matchinfo["data-share"]) == pytest.approx(8 / 13, abs=1e-3)
    assert "61.5%" in page.match_text

    page, log = open_page(chrome, path, tmp_path, "thread=1")  # the worker only
    assert_clean_load(page, log)
    assert {b["name"] for b in page.boxes} == {"Thread.run", "wait"}


def test_thread_selector_lists_names_and_cpu_share():
    data = page_data(small_profile())
    assert [(t["name"], t["tid"], t["samples"]) for t in data["threads"]] == [
        ("MainThread", 4000, 10),
        ("worker", 4001, 3),
    ]
    # cpu_ns 10 ms and 1 ms over a 12 ms session
    assert [t["cpu_pct"] for t in data["threads"]] == [83.3, 8.3]


@on_one_version("5 s: a sampled profile drawn in the browser, the page the same on every version")
def test_real_profile_in_chromium_and_screenshot(chrome, tmp_path):
    p = real_profile(tmp_path)
    path = tmp_path / "real.html"
    p.save(path, "html")
    page, log = open_page(chrome, path, tmp_path)
    assert_clean_load(page, log)
    module = next(b for b in page.at_depth(1) if b["name"] == "<module>")
    below_module = [
        b
        for b in page.boxes
        if b["top"] >= ROW and module["left"] <= b["left"] < module["left"] + module["width"]
    ]
    # <module> only calls main(); below that the widest box is the hot function.
    widest = sorted(below_module, key=lambda b: -b["width"])
    assert widest[0]["name"] == "main"
    assert widest[1]["name"] == "hot_function"
    assert widest[1]["width"] > 0.5 * module["width"]

    page, log = open_page(chrome, path, tmp_path, "search=hot_function")
    assert_clean_load(page, log)
    assert {b["name"] for b in page.boxes if "match" in b["classes"]} == {"hot_function"}
    hot = next(f for f in p.aggregate() if f.function_name == "hot_function")
    share = float(page.matchinfo["data-share"])
    assert share == pytest.approx(hot.total_ns / p.total_weight_ns, abs=0.002)
    assert share > 0.5

    workers = [i for i, t in enumerate(page_data(p)["threads"]) if t["name"] == "warm-worker"]
    page, log = open_page(chrome, path, tmp_path, f"thread={workers[0]}")
    assert_clean_load(page, log)
    names = {b["name"] for b in page.boxes}
    assert "warm_function" in names and "hot_function" not in names

    shot = tmp_path / "flame.png"
    subprocess.run(
        [
            chrome,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'chrome-profile'}",
            "--window-size=1280,640",
            f"--screenshot={shot}",
            path.resolve().as_uri() + "#search=hot_function",
        ],
        capture_output=True,
        timeout=120,
        check=True,
        env=tool_env(),
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1280, 640)


def test_names_cannot_break_out_of_the_page(chrome, tmp_path):
    p = small_profile()
    evil = '</script><script>document.title="pwned"</script><!--'
    p.frame_table[2] = Frame("hot", "/app/<b>x</b>.py", 12, qualname=evil, first_lineno=10)
    p.metadata["name"] = "<i>prog</i>"
    path = tmp_path / "evil.html"
    p.save(path, "html")
    page, log = open_page(chrome, path, tmp_path)
    assert_clean_load(page, log)
    assert evil in {b["name"] for b in page.boxes}
    assert "<title>spprof — &lt;i&gt;prog&lt;/i&gt;</title>" in path.read_text(encoding="utf-8")


@on_one_version("4 s: a synthetic profile in the browser")
def test_hundred_thousand_samples_open_in_about_a_second(chrome, tmp_path, capsys):
    p = synthetic_profile(seconds=12.8, threads=8)
    assert p.sample_count >= 100_000
    path = tmp_path / "big.html"
    t0 = time.perf_counter()
    p.save(path, "html")
    write_s = time.perf_counter() - t0
    size = path.stat().st_size
    t0 = time.perf_counter()
    page, log = open_page(chrome, path, tmp_path)
    browser_s = time.perf_counter() - t0
    assert_clean_load(page, log)
    render_ms = float(page.body["data-render-ms"])
    with capsys.disabled():
        print(
            f"\n[html 100k] {p.sample_count} samples -> {size} bytes, write {write_s:.2f}s, "
            f"page script {render_ms:.0f} ms, headless browser run {browser_s:.1f}s"
        )
    assert render_ms < 1000
    assert size < 5_000_000
    assert len(page.at_depth(1)) >= 8  # each thread's stacks start with their own frame
    data = json.loads(
        re.search(r'id="spprof-data">(.*?)</script>', path.read_text(), re.S).group(1)
    )
    assert sum(t["samples"] for t in data["threads"]) == p.sample_count
