"""%load_ext spprof in a real IPython InteractiveShell (no notebook server): the magics run the
code in the user's namespace and display the HTML flame graph naming its functions."""

from __future__ import annotations

import html
import json
import re
import textwrap

import pytest

from conftest import run_python

pytest.importorskip("IPython", reason="ipython is a pinned dev dependency (Makefile DEV_DEPS)")

# Each scenario runs in a fresh interpreter: one profiling session per process.
SHELL = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "spprof")

    def run(cell):
        with capture_output() as cap:
            result = shell.run_cell(cell)
        htmls = [o.data["text/html"] for o in cap.outputs if "text/html" in o.data]
        return {
            "ok": result.success,
            "error": repr(result.error_in_exec or result.error_before_exec),
            "stdout": cap.stdout,
            "stderr": cap.stderr,
            "html": htmls,
        }
    """
)


def _run(body: str) -> dict:
    r = run_python("-c", SHELL + textwrap.dedent(body))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _page(inline: str) -> str:
    """The flame graph page inside the displayed iframe."""
    assert inline.startswith("<iframe srcdoc=")
    return html.unescape(inline.split('srcdoc="', 1)[1].split('"', 1)[0])


CELL = (
    "%%spprof -i 1\n"
    "import time\n"
    "def hot_in_cell():\n"
    "    end = time.thread_time() + 0.3\n"
    "    while time.thread_time() < end:\n"
    "        pass\n"
    "hot_in_cell()\n"
    "answer = 42\n"
)


def test_cell_magic_shows_the_flame_graph_of_the_cell_and_keeps_its_namespace():
    out = _run(
        f"""
        res = run({CELL!r})
        res["answer"] = shell.user_ns.get("answer")
        print(json.dumps(res))
        """
    )
    assert out["ok"], out
    assert out["answer"] == 42  # the cell ran in the user's namespace
    [inline] = out["html"]
    page = _page(inline)
    assert page.startswith("<!DOCTYPE html>") or page.lstrip().lower().startswith("<!doctype")
    assert "hot_in_cell" in page
    # IPython's own frames (run_cell, the magic) are not the profile's roots or functions.
    assert "run_cell" not in page and "interactiveshell.py" not in page
    # the summary names the function and its loop's line (4) in the cell, the call's (6)
    assert re.search(r"hot_in_cell \(<ipython-input-[\w-]+>:4\)", out["stdout"]), out["stdout"]
    assert re.search(r"<module> \(<ipython-input-[\w-]+>:6\)", out["stdout"]), out["stdout"]


def test_line_magic_takes_the_command_line_options_and_writes_the_file(tmp_path):
    target = tmp_path / "line.collapsed.txt"
    cell = (
        "def hot_line():\n"
        "    import time\n"
        "    end = time.thread_time() + 0.2\n"
        "    while time.thread_time() < end:\n"
        "        pass\n"
        f"%spprof -q --rate 500 --out={target} hot_line()\n"
    )
    out = _run(f"print(json.dumps(run({cell!r})))")
    assert out["ok"], out
    assert out["stdout"] == ""  # -q
    assert "hot_line" in _page(out["html"][0])
    lines = target.read_text().splitlines()
    assert lines and all(";hot_line (" in line for line in lines), lines


def test_line_magic_runs_the_statement_exactly_as_typed():
    out = _run(
        """
        res = run('%spprof -q -i 5 spaced = len("a  b") + len(\\'c\\')')
        res["spaced"] = shell.user_ns.get("spaced")
        print(json.dumps(res))
        """
    )
    assert out["ok"], out
    assert out["spaced"] == 5  # quotes and the two spaces kept


def test_bad_options_are_a_usage_error_and_nothing_runs():
    out = _run(
        """
        res = [run("%spprof --mode gpu print('RAN')"), run("%spprof --top 0 1"),
               run("%spprof -q")]
        print(json.dumps(res))
        """
    )
    gpu, sub, empty = out
    assert not gpu["ok"] and "invalid choice: 'gpu'" in gpu["stderr"]
    assert "RAN" not in gpu["stdout"]
    assert not sub["ok"] and "--top must be at least 1" in sub["stderr"]
    assert not empty["ok"] and "nothing to profile" in empty["stderr"]
    assert gpu["html"] == sub["html"] == empty["html"] == []


def test_an_exception_in_the_cell_is_the_cells_and_the_profile_is_still_shown():
    cell = (
        "%%spprof -q -i 1\n"
        "import time\n"
        "def burn_then_fail():\n"
        "    end = time.thread_time() + 0.2\n"
        "    while time.thread_time() < end:\n"
        "        pass\n"
        "    raise ValueError('from the cell')\n"
        "burn_then_fail()\n"
    )
    out = _run(
        f"""
        res = run({cell!r})
        res["again"] = run("%spprof -q sum(range(10))")["ok"]  # the session was stopped
        print(json.dumps(res))
        """
    )
    assert not out["ok"] and "ValueError('from the cell')" in out["error"]
    assert "burn_then_fail" in _page(out["html"][0])
    assert out["again"]


def test_the_flame_graph_is_shown_without_a_warning_and_as_text_where_html_cannot_be():
    out = _run(
        """
        import warnings
        warnings.simplefilter("error")  # IPython's HTML() warned on every <iframe page
        with capture_output() as cap:
            res = shell.run_cell("%%spprof -q -i 1\\nsum(range(100000))\\n")
        plain = [o.data.get("text/plain", "") for o in cap.outputs]
        print(json.dumps({"ok": res.success, "error": repr(res.error_in_exec), "plain": plain}))
        """
    )
    assert out["ok"], out["error"]
    [plain] = out["plain"]
    assert plain.startswith("spprof: ") and "samples" in plain, plain
    assert "IPython.core.display" not in plain


def test_terminal_ipython_prints_text_not_an_html_object_repr():
    cell = "%%spprof -q -i 1\\nsum(range(100000))\\n"
    r = run_python(
        "-m",
        "IPython",
        "--quick",
        "--no-banner",
        "--colors=NoColor",
        "-c",
        f"get_ipython().run_line_magic('load_ext', 'spprof'); get_ipython().run_cell('{cell}')",
    )
    assert r.returncode == 0, r.stderr
    assert "spprof: " in r.stdout and "the flame graph shows in a notebook" in r.stdout, r.stdout
    assert "<IPython.core.display.HTML object>" not in r.stdout
    assert "Warning" not in r.stderr, r.stderr
