"""The line heatmap (-f heatmap, *.heatmap.html): self and total time per source line,
files ranked by self time, the source beside the numbers; opened in headless Chromium."""

from __future__ import annotations

import re

import pytest

from formats_browser import Dom, chromium_or_skip, console_errors, dump_dom
from spprof import Frame
from spprof.output import FORMATS, guess_format, render
from spprof.output.diff import render_diff_html
from spprof.output.heatmap import line_heat
from spprof.output.heatmap import render as render_heatmap
from test_formats_common import MS, real_profile, small_profile, synthetic_profile

# The hand-made profile's /app/prog.py, as it could have looked (lines 5-30 matter).
PROG = ["# prog.py\n"] * 40
PROG[4] = "def wait():\n"
PROG[6] = "    time.sleep(1)\n"
PROG[9] = "class Work:\n"
PROG[11] = "    x = sum(range(1000))  # hot 12\n"
PROG[12] = "    y = x * x  # hot 13\n"
PROG[16] = "    z = 1  # cold 17\n"
PROG[24] = "    Work().hot()  # main 25\n"
PROG[29] = "main()  # module 30\n"


def fake_source(path: str) -> list[str]:
    if path == "/app/prog.py":
        return PROG
    raise FileNotFoundError(path)


@pytest.fixture(scope="module")
def chrome() -> str:
    return chromium_or_skip()


def test_registered_before_html():
    assert FORMATS["heatmap"][1] == ".heatmap.html"
    assert guess_format("run.heatmap.html") == "heatmap"
    assert guess_format("run.html") == "html"


def test_line_times_self_and_total():
    heat = line_heat(small_profile())
    prog = heat["/app/prog.py"]
    assert prog.self_ns == {12: 5 * MS, 13: 3 * MS, 17: 2 * MS, 7: 3 * MS}
    assert prog.total_ns == {
        30: 10 * MS,
        25: 10 * MS,
        12: 5 * MS,
        13: 3 * MS,
        17: 2 * MS,
        7: 3 * MS,
    }
    assert prog.self_samples == {12: 5, 13: 3, 17: 2, 7: 3}
    assert prog.file_total_ns == 13 * MS  # every sample has a frame in prog.py
    threading = heat["/usr/lib/threading.py"]
    assert threading.self_ns == {} and threading.total_ns == {1012: 3 * MS}


def _rows(dom: Dom, section) -> list[dict]:
    out = []
    for tr in (e for e in dom.elements if e.tag == "tr" and "line" in e.classes):
        node = tr.parent
        while node is not None and node is not section:
            node = node.parent
        if node is None:
            continue
        cells = [td.all_text() for td in tr.children if td.tag == "td"]
        out.append(
            {
                "line": int(tr.attrs["data-line"]),
                "self": cells[1],
                "self_pct": cells[2],
                "total": cells[3],
                "total_pct": cells[4],
                "code": cells[5],
                "shaded": "background" in (tr.attrs.get("style") or ""),
            }
        )
    return out


def test_hand_made_profile_in_chromium(chrome, tmp_path):
    path = tmp_path / "small.heatmap.html"
    path.write_bytes(render_heatmap(small_profile(), read_source=fake_source))
    data = path.read_text(encoding="utf-8")
    assert not re.search(r"<(script|link|img)[^>]*\s(src|href)=", data)
    assert "http://" not in data and "https://" not in data

    dom_text, log = dump_dom(chrome, path, tmp_path)
    assert console_errors(log) == []
    dom = Dom(dom_text)
    body = next(e for e in dom.elements if e.tag == "body")
    assert body.attrs.get("data-ready") == "1"
    html_el = next(e for e in dom.elements if e.tag == "html")
    assert "data-errors" not in html_el.attrs
    sections = dom.by_class("file", "section")
    # prog.py has all the self time; threading.py only calls (total 3 ms), and its source
    # cannot be read here.
    assert [s.attrs["data-path"] for s in sections] == ["/app/prog.py", "/usr/lib/threading.py"]
    rows = {r["line"]: r for r in _rows(dom, sections[0])}
    assert rows[12]["self"] == "5.0 ms" and rows[12]["self_pct"] == "38.5%"
    assert rows[12]["total"] == "5.0 ms"
    assert rows[12]["code"] == "    x = sum(range(1000))  # hot 12"
    assert rows[7]["self"] == "3.0 ms" and rows[7]["code"] == "    time.sleep(1)"
    assert rows[25]["self"] == "" and rows[25]["total"] == "10.0 ms"
    assert rows[25]["total_pct"] == "76.9%"
    assert rows[30]["code"] == "main()  # module 30"
    assert rows[12]["shaded"] and rows[17]["shaded"] and not rows[25]["shaded"]
    # Context: 3 lines either side of sampled lines, the rest folded.
    assert 1 not in rows and 4 in rows and 20 in rows and 21 not in rows
    gaps = [e.all_text() for e in dom.elements if e.tag == "tr" and "gap" in e.classes]
    assert any("3 lines without samples" in g for g in gaps)
    threading = _rows(dom, sections[1])
    assert [(r["line"], r["total"], r["code"]) for r in threading] == [(1012, "3.0 ms", "")]
    assert "Source not available" in sections[1].all_text()


def test_real_profile_hot_line_first(chrome, tmp_path):
    p = real_profile(tmp_path)
    path = tmp_path / "real.heatmap.html"
    p.save(path, "heatmap")
    dom_text, log = dump_dom(chrome, path, tmp_path)
    assert console_errors(log) == []
    dom = Dom(dom_text)
    sections = dom.by_class("file", "section")
    assert sections[0].attrs["data-path"].endswith("hot_prog.py")
    rows = _rows(dom, sections[0])
    by_self = sorted((r for r in rows if r["self"]), key=lambda r: -float(r["self"].split()[0]))
    # The hottest line is in hot_function's inner loop, read from the script on disk.
    assert "for i in range(2000)" in by_self[0]["code"] or "n += i * i" in by_self[0]["code"]
    call = next(r for r in rows if "hot_function(1.2)" in r["code"])
    assert call["self"] == ""  # main() waits on this call: total time, no self time
    assert float(call["total_pct"].rstrip("%")) > 50
    worker = next(r for r in rows if "n += sum(range(500))" in r["code"])
    assert worker["self"]  # the warm-worker thread's line is there too


def test_only_the_hottest_files():
    p = synthetic_profile(seconds=0.2, threads=1)  # frames in 40 files, no source on disk
    heat = line_heat(p)
    assert len(heat) > 10
    html = render(p, "heatmap").decode()
    shown = re.findall(r'<section class="file" id="file-\d+" data-path="([^"]+)"', html)
    hottest = sorted(heat.values(), key=lambda h: (-h.file_self_ns, -h.file_total_ns, h.path))
    assert shown == [h.path for h in hottest[:10]]
    assert f"The 10 hottest of {len(heat)} files." in html


def test_names_cannot_break_out(chrome, tmp_path):
    p = small_profile()
    evil_file = "/app/</script><script>document.title='pwned'</script>.py"
    p.frame_table[5] = Frame("wait", evil_file, 7, qualname="<b>wait</b>", first_lineno=5)
    path = tmp_path / "evil.heatmap.html"
    path.write_bytes(render_heatmap(p, read_source=lambda f: ["<i>x</i>\n"] * 9))
    dom_text, log = dump_dom(chrome, path, tmp_path)
    assert console_errors(log) == []
    dom = Dom(dom_text)
    assert next(e for e in dom.elements if e.tag == "body").attrs.get("data-ready") == "1"
    assert evil_file in [s.attrs["data-path"] for s in dom.by_class("file", "section")]
    assert next(e for e in dom.elements if e.tag == "title").all_text() != "pwned"
    assert not [e for e in dom.elements if e.tag in ("b", "i")]  # names stay text

    diff_path = tmp_path / "evil-diff.html"
    diff_path.write_bytes(render_diff_html(small_profile(), p))
    dom_text, log = dump_dom(chrome, diff_path, tmp_path)
    assert console_errors(log) == []
    dom = Dom(dom_text)
    assert dom.by_id("spprof-flame").attrs.get("data-ready") == "1"
    assert "<b>wait</b>" in {g.attrs["data-n"] for g in dom.by_class("f", "g")}
    assert not [e for e in dom.elements if e.tag in ("b", "i")]
