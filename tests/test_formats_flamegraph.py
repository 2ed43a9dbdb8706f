"""The SVG flame graph (-f flamegraph, *.svg): well-formed standalone SVG whose frames,
widths and tooltips match the profile, threads merged or as roots; opened in headless
Chromium, search highlights the matches with their share and a click-zoom (via the URL
hash) rescales the subtree. Also the collapsed format's thread roots (the same split by
thread, for flamegraph.pl)."""

from __future__ import annotations

import dataclasses
import re
import struct
import xml.etree.ElementTree as ET

import pytest

from formats_browser import Dom, chromium_or_skip, console_errors, dump_dom, screenshot
from spprof import Frame
from spprof.output import FORMATS, OPEN_HINTS, collapsed, guess_format, render
from spprof.output.flamegraph import render as render_svg
from test_formats_common import real_profile, small_profile

SVG = "{http://www.w3.org/2000/svg}"
FULL = 1180.0  # drawing width in px (1200 minus the margins)


def frames(svg: bytes) -> list[dict]:
    """Every frame box: name, depth, x, width, tooltip text."""
    root = ET.fromstring(svg)
    out = []
    for g in root.iter(f"{SVG}g"):
        if g.get("class") != "f":
            continue
        out.append(
            {
                "name": g.get("data-n"),
                "depth": int(g.get("data-d")),
                "x": float(g.get("data-x")),
                "w": float(g.get("data-w")),
                "tip": g.find(f"{SVG}title").text,
                "fill": g.find(f"{SVG}rect").get("fill"),
            }
        )
    return out


@pytest.fixture(scope="module")
def chrome() -> str:
    return chromium_or_skip()


def test_registered_with_suffix_and_hint():
    assert FORMATS["flamegraph"][1] == ".svg"
    assert guess_format("flame.svg") == "flamegraph"
    assert guess_format("FLAME.SVG") == "flamegraph"
    assert set(OPEN_HINTS) == set(FORMATS)
    assert all(h.startswith("open it with") for h in OPEN_HINTS.values())


def test_frames_widths_and_tooltips_merged_threads():
    boxes = frames(render(small_profile(), "flamegraph"))
    roots = sorted((b for b in boxes if b["depth"] == 0), key=lambda b: -b["w"])
    # Threads merged: the roots are the two threads' outermost frames, 10 ms and 3 ms.
    assert [b["name"] for b in roots] == ["<module>", "Thread.run"]
    assert roots[0]["w"] + roots[1]["w"] == pytest.approx(FULL, abs=0.02)
    assert roots[0]["w"] / roots[1]["w"] == pytest.approx(10 / 3, rel=1e-3)
    hot = next(b for b in boxes if b["name"] == "Work.hot")
    assert hot["depth"] == 2
    # Line 12 had 5 of its 8 ms: the tooltip names it.
    assert hot["tip"].split("\n") == [
        "Work.hot",
        "/app/prog.py:12",
        "Total: 8.0 ms (61.54%)",
        "Self: 8.0 ms (61.54%)",
        "Samples: 8",
    ]
    main = next(b for b in boxes if b["name"] == "main")
    assert "Self: 0 \u00b5s (0.00%)" in main["tip"]
    assert {b["name"] for b in boxes if b["depth"] == 2} == {"Work.hot", "cold"}


def test_thread_roots_split_by_thread():
    boxes = frames(render_svg(small_profile(), thread_roots=True))
    roots = sorted((b for b in boxes if b["depth"] == 0), key=lambda b: -b["w"])
    assert [b["name"] for b in roots] == ["MainThread (tid 4000)", "worker (tid 4001)"]
    assert sorted(b["name"] for b in boxes if b["depth"] == 1) == ["<module>", "Thread.run"]
    assert "Samples: 3" in roots[1]["tip"]


def test_self_contained():
    data = render(small_profile(), "flamegraph").decode()
    urls = set(re.findall(r"https?://[^\s\"'<>]+", data))
    assert urls == {"http://www.w3.org/2000/svg"}  # the namespace name, never fetched
    assert not re.search(r"\s(src|href|xlink:href)=", data)
    assert "@import" not in data


def test_names_cannot_break_out(chrome, tmp_path):
    p = small_profile()
    evil = ']]></script><script>document.title="pwned"</script><!-- & "q"'
    p.frame_table[2] = Frame("hot", "/app/<b>x</b>.py", 12, qualname=evil, first_lineno=10)
    data = render(p, "flamegraph")
    assert evil in {b["name"] for b in frames(data)}  # still well-formed XML
    path = tmp_path / "evil.svg"
    path.write_bytes(data)
    dom, log = dump_dom(chrome, path, tmp_path)
    svg = Dom(dom).by_id("spprof-flame")
    assert svg.attrs.get("data-ready") == "1"
    assert "data-errors" not in svg.attrs
    assert console_errors(log) == []


def _boxes_in_browser(dom: str) -> dict[str, dict]:
    out = {}
    for g in Dom(dom).by_class("f", "g"):
        rect = g.find("rect")
        out.setdefault(g.attrs["data-n"], []).append(
            {
                "classes": g.classes,
                "x": float(rect.attrs["x"]),
                "w": float(rect.attrs["width"]),
                "fill": rect.attrs["fill"],
                "label": g.find("text").all_text(),
            }
        )
    return out


def test_search_and_zoom_in_chromium(chrome, tmp_path):
    path = tmp_path / "small.svg"
    small_profile().save(path, "flamegraph")

    dom, log = dump_dom(chrome, path, tmp_path, "search=hot")
    svg = Dom(dom).by_id("spprof-flame")
    assert svg.attrs.get("data-ready") == "1", "the script did not finish"
    assert "data-errors" not in svg.attrs, svg.attrs.get("data-errors")
    assert console_errors(log) == []
    boxes = _boxes_in_browser(dom)
    assert [n for n, bs in boxes.items() if "match" in bs[0]["classes"]] == ["Work.hot"]
    assert boxes["Work.hot"][0]["fill"] == "rgb(230,0,230)"
    assert float(svg.attrs["data-matched"]) == pytest.approx(8 / 13, abs=1e-3)
    assert "Matched: 61.5%" in Dom(dom).by_id("matched").all_text()

    dom, log = dump_dom(chrome, path, tmp_path, "zoom=main")
    assert console_errors(log) == []
    boxes = _boxes_in_browser(dom)
    # main fills the width, its callees share it 8:2, <module> above it stays (dimmed),
    # the other thread's frames hide.
    assert boxes["main"][0]["w"] == pytest.approx(FULL, abs=0.05)
    assert boxes["Work.hot"][0]["w"] == pytest.approx(FULL * 0.8, abs=0.1)
    assert boxes["cold"][0]["w"] == pytest.approx(FULL * 0.2, abs=0.1)
    assert boxes["cold"][0]["label"] == "cold"
    assert "parent" in boxes["<module>"][0]["classes"]
    assert "hide" in boxes["Thread.run"][0]["classes"]
    assert "hide" in boxes["wait"][0]["classes"]
    assert Dom(dom).by_id("reset").attrs.get("display") == "inline"


def test_real_profile_in_chromium(chrome, tmp_path):
    p = real_profile(tmp_path)
    path = tmp_path / "real.svg"
    p.save(path, "flamegraph")
    dom, log = dump_dom(chrome, path, tmp_path, "search=hot_function")
    svg = Dom(dom).by_id("spprof-flame")
    assert svg.attrs.get("data-ready") == "1"
    assert console_errors(log) == []
    boxes = _boxes_in_browser(dom)
    assert [n for n, bs in boxes.items() if "match" in bs[0]["classes"]] == ["hot_function"]
    hot = next(f for f in p.aggregate() if f.function_name == "hot_function")
    assert float(svg.attrs["data-matched"]) == pytest.approx(
        hot.total_ns / p.total_weight_ns, abs=0.002
    )
    # The widest frame above the root is main -> hot_function; the worker thread's
    # function is there too, narrower.
    assert max(boxes["hot_function"], key=lambda b: b["w"])["w"] > max(
        b["w"] for b in boxes["warm_function"]
    )
    png = screenshot(chrome, path, tmp_path / "flame.png", tmp_path, "1200,400")
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert struct.unpack(">II", png[16:24]) == (1200, 400)


def test_collapsed_with_thread_roots():
    p = small_profile()
    plain = collapsed.render(p).decode().splitlines()
    rooted = collapsed.render_with_thread_roots(p).decode().splitlines()
    assert collapsed.render(p, thread_roots=True).decode().splitlines() == rooted
    assert rooted == [
        "MainThread (tid 4000);<module> (/app/prog.py:30);main (/app/prog.py:25);"
        "Work.hot (/app/prog.py:12) 5000",
        "MainThread (tid 4000);<module> (/app/prog.py:30);main (/app/prog.py:25);"
        "Work.hot (/app/prog.py:13) 3000",
        "MainThread (tid 4000);<module> (/app/prog.py:30);main (/app/prog.py:25);"
        "cold (/app/prog.py:17) 2000",
        "worker (tid 4001);Thread.run (/usr/lib/threading.py:1012);wait (/app/prog.py:7) 3000",
    ]
    assert [line.split(";", 1)[1] for line in rooted] == sorted(plain)
    # A thread name with the folded format's separators cannot split a stack.
    p.thread_table[1] = dataclasses.replace(p.thread_table[1], name="pool;worker 1")
    line = collapsed.render_with_thread_roots(p).decode().splitlines()[-1]
    assert line.startswith("pool%3Bworker 1 (tid 4001);Thread.run")
