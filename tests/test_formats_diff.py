"""Comparing profiles (spprof.output.diff): top changes by share of self time, the
difffolded lines flamegraph.pl reads (normalised to NEW's total), and the differential flame
graph page in headless Chromium: red where NEW spends a larger share, blue a smaller one,
both shares in the tooltip."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from formats_browser import Dom, chromium_or_skip, console_errors, dump_dom
from spprof.output.diff import (
    Change,
    format_top_changes,
    render_diff_collapsed,
    render_diff_html,
    top_changes,
)
from test_formats_common import real_profile, small_profile, tool_env


def profiles():
    """BASE: only MainThread (hot 8 ms, cold 2 ms); NEW: the same plus the worker's 3 ms
    in wait(). Shares of 10 and 13 ms."""
    return small_profile().filter(idle=False), small_profile()


def test_top_changes_by_share_of_self_time():
    base, new = profiles()
    changes = top_changes(base, new)
    assert [(c.function, c.file, c.line) for c in changes] == [
        ("wait", "/app/prog.py", 5),
        ("Work.hot", "/app/prog.py", 10),
        ("cold", "/app/prog.py", 15),
    ]  # <module>, main and Thread.run have no self time in either: no change
    wait, hot, cold = changes
    assert (wait.base_pct, wait.new_pct) == (0.0, pytest.approx(300 / 13))
    assert hot.base_pct == pytest.approx(80.0) and hot.new_pct == pytest.approx(800 / 13)
    assert hot.delta_pct == pytest.approx(800 / 13 - 80)
    assert cold.delta_pct == pytest.approx(200 / 13 - 20)
    assert top_changes(base, new, limit=1) == [wait]
    assert top_changes(new, new) == []
    assert isinstance(wait, Change)


def test_format_top_changes():
    base, new = profiles()
    text = format_top_changes(top_changes(base, new))
    lines = text.splitlines()
    assert lines[0].split() == ["BASE%", "NEW%", "CHANGE", "FUNCTION", "(self", "time)"]
    assert lines[1].split() == ["0.0", "23.1", "+23.1", "wait", "(/app/prog.py:5)"]
    assert lines[2].split() == ["80.0", "61.5", "-18.5", "Work.hot", "(/app/prog.py:10)"]
    assert lines[3].split() == ["20.0", "15.4", "-4.6", "cold", "(/app/prog.py:15)"]
    assert "no function's share of self time changed" in format_top_changes([])


def test_difffolded_lines_normalised_to_new_total():
    base, new = profiles()
    lines = render_diff_collapsed(base, new).decode().splitlines()
    parsed = {line.rsplit(" ", 2)[0]: tuple(map(int, line.rsplit(" ", 2)[1:])) for line in lines}
    main = "<module> (/app/prog.py:30);main (/app/prog.py:25)"
    assert parsed == {
        f"{main};Work.hot (/app/prog.py:12)": (6500, 5000),  # base 5 ms * 13/10
        f"{main};Work.hot (/app/prog.py:13)": (3900, 3000),
        f"{main};cold (/app/prog.py:17)": (2600, 2000),
        "Thread.run (/usr/lib/threading.py:1012);wait (/app/prog.py:7)": (0, 3000),
    }
    assert lines == sorted(lines)
    assert sum(b for b, _ in parsed.values()) == sum(n for _, n in parsed.values()) == 13000


def test_flamegraph_pl_draws_the_difference(tmp_path):
    tool = shutil.which("flamegraph.pl")
    if tool is None:
        pytest.skip("flamegraph.pl (FlameGraph) is not on PATH")
    base, new = profiles()
    folded = tmp_path / "diff.folded"
    folded.write_bytes(render_diff_collapsed(base, new))
    svg = subprocess.run(
        [tool, "--countname=us", str(folded)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=tool_env(),
    ).stdout
    boxes = dict(re.findall(r"<title>([^<]*)</title><rect[^>]*fill=\"([^\"]*)\"", svg))
    wait = next(k for k in boxes if k.startswith("wait "))
    assert "3,000 us" in wait and "+23.08%" in wait
    assert boxes[wait] == "rgb(255,0,0)"  # the largest increase: full red
    hot12 = next(k for k in boxes if k.startswith("Work.hot (/app/prog.py:12)"))
    assert "-11.54%" in hot12
    r, g, b = map(int, re.findall(r"\d+", boxes[hot12]))
    assert b == 255 and r == g < 255  # blue: a smaller share in NEW


@pytest.fixture(scope="module")
def chrome() -> str:
    return chromium_or_skip()


def _frames(dom: str) -> dict[str, dict]:
    out = {}
    for g in Dom(dom).by_class("f", "g"):
        out[g.attrs["data-n"]] = {
            "fill": g.find("rect").attrs["fill"],
            "tip": g.find("title").all_text(),
            "classes": g.classes,
        }
    return out


def test_diff_page_in_chromium(chrome, tmp_path):
    base, new = profiles()
    path = tmp_path / "diff.html"
    path.write_bytes(render_diff_html(base, new))
    data = path.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img)[^>]*\s(src|href)=", data)
    assert "https://" not in data

    dom, log = dump_dom(chrome, path, tmp_path)
    assert console_errors(log) == []
    page = Dom(dom)
    svg = page.by_id("spprof-flame")
    assert svg.attrs.get("data-ready") == "1"
    assert "data-errors" not in svg.attrs
    frames = _frames(dom)
    # The largest change is 23.08 points: the worker's frames full red (new), main's full
    # blue (from 100% to 76.9%); Work.hot (80% -> 61.5%) a lighter blue, cold lighter still.
    assert frames["wait"]["fill"] == frames["Thread.run"]["fill"] == "rgb(250,60,60)"
    assert frames["main"]["fill"] == frames["<module>"]["fill"] == "rgb(60,60,250)"
    assert frames["Work.hot"]["fill"] == "rgb(98,98,250)"
    assert frames["cold"]["fill"] == "rgb(212,212,250)"
    assert frames["Work.hot"]["tip"].split("\n")[:5] == [
        "Work.hot",
        "/app/prog.py:12",
        "NEW: 61.54% of total (8.0 ms)",
        "BASE: 80.00% of total (8.0 ms)",
        "Change: -18.46 points",
    ]
    table = page.by_id("changes")
    body = table.find("tbody") or table  # Chromium adds the implied <tbody>
    rows = [
        [td.all_text() for td in tr.children if td.tag == "td"]
        for tr in body.children
        if tr.tag == "tr"
    ]
    rows = [r for r in rows if r]  # the header row has <th> cells only
    assert rows[0] == ["0.0%", "23.1%", "+23.1", "wait (/app/prog.py:5)"]
    assert rows[1][3] == "Work.hot (/app/prog.py:10)" and rows[1][2] == "-18.5"

    dom, log = dump_dom(chrome, path, tmp_path, "search=wait")
    assert console_errors(log) == []
    svg = Dom(dom).by_id("spprof-flame")
    assert float(svg.attrs["data-matched"]) == pytest.approx(3 / 13, abs=1e-3)


def test_a_profile_against_itself_shows_no_change(chrome, tmp_path):
    a = real_profile(tmp_path)
    assert top_changes(a, a) == []
    lines = render_diff_collapsed(a, a).decode().splitlines()
    assert len(lines) == len({line.rsplit(" ", 2)[0] for line in lines})
    for line in lines:
        _, b, n = line.rsplit(" ", 2)
        assert b == n
    path = tmp_path / "same.html"
    path.write_bytes(render_diff_html(a, a))
    dom, log = dump_dom(chrome, path, tmp_path)
    assert console_errors(log) == []
    frames = _frames(dom)
    assert "hot_function" in frames and "warm_function" in frames
    assert {f["fill"] for f in frames.values()} == {"rgb(250,250,250)"}
    assert "Change: +0.00 points" in frames["hot_function"]["tip"]
