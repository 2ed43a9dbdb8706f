"""mypyc-compiled code named as Python (issue 28, "mypyc"): a native frame `CPyDef_checker___
TypeChecker___check_first_pass` becomes `TypeChecker.check_first_pass [mypyc]` in
pkg/checker.py at its def line; wrappers, glue and module bodies are marked; other frames are
left alone."""

from __future__ import annotations

import ast
import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest

from conftest import run_python
from spprof import Frame
from spprof._load import loads
from spprof._mypyc_names import MypycName, def_lines, parse, rename_frames
from spprof.output import render
from test_formats_common import small_profile

CHECKER = '''\
import os


class TypeChecker:
    """A stand-in for mypy's."""

    def check_first_pass(self) -> None:
        pass

    def accept(self) -> None:
        def inner() -> None:
            pass


if os.sep:
    def conditional() -> None:
        pass
'''


@pytest.mark.parametrize(
    "c_name,parsed",
    [
        (
            "CPyDef_checker___TypeChecker___check_first_pass",
            MypycName(("checker", "TypeChecker", "check_first_pass"), False),
        ),
        (
            "CPyPy_checker___TypeChecker___check_first_pass",
            MypycName(("checker", "TypeChecker", "check_first_pass"), True),
        ),
        (
            "CPyPy_checker___DisjointDict_____init__",
            MypycName(("checker", "DisjointDict", "__init__"), True),
        ),
        (
            "CPyDef_checker___DisjointDict____lookup_root_id",
            MypycName(("checker", "DisjointDict", "_lookup_root_id"), False),
        ),
        ("CPyDef_mod___a___3_b", MypycName(("mod", "a___b"), False)),  # a "___" in a name
        ("CPyDef_mypy___build___build", MypycName(("mypy", "build", "build"), False)),
        ("CPyDef_checker", None),  # a module prefix alone
        ("CPyDef_", None),
        ("CPyDef_a___b.cold", None),
        ("PyObject_Call", None),
        # a dunder's slot wrapper: the dunder after the class's name
        (
            "CPyDunder___hash__checker___TypeChecker",
            MypycName(("checker", "TypeChecker", "__hash__"), True),
        ),
        (
            "CPyDunder___init_subclass__a___B",
            MypycName(("a", "B", "__init_subclass__"), True),
        ),
        (
            "CPyDunder__RichCompare_constraints___Constraint",
            MypycName(("constraints", "Constraint", "<comparison>"), True),
        ),
        # a module's import: its full name ("____" is "___" then a name that begins with "_")
        ("CPyInit_mypy___main", MypycName(("mypy", "main"), False, init=True)),
        ("CPyExec_web3____utils___abi", MypycName(("web3", "_utils", "abi"), False, init=True)),
        ("CPyDunder_nothing", None),
    ],
)
def test_parse(c_name, parsed):
    assert parse(c_name) == parsed


TRICKY = '''\
class A:
    """Doc with a def f(): inside
def not_a_def(): and a dedented line
    """
    x = ("(",
  "def g():", \'\'\'
  def h(): \'\'\')
    def m(self):  # a comment with a ( bracket
        s = "\'\'\'"
        return s
    async def am(self): ...
def f(): pass
if True:
    class B:
        def m(self): pass
'''


def _ast_lines(source: str) -> dict[str, int]:
    found: dict[str, int] = {}
    todo: list[tuple[str, ast.AST]] = [("", ast.parse(source))]
    while todo:
        prefix, node = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                q = prefix + child.name
                found[q] = min(found.get(q, child.lineno), child.lineno)
                todo.append((q + ".", child))
            elif not isinstance(child, ast.expr):
                todo.append((prefix, child))
    return found


@pytest.mark.parametrize("module", ["tricky", "ast", "typing", "argparse", "spprof._session"])
def test_def_lines_are_the_lines_ast_gives(module):
    if module == "tricky":
        source = TRICKY
    else:
        spec = importlib.util.find_spec(module)
        assert spec is not None and spec.origin is not None
        source = Path(spec.origin).read_text(encoding="utf-8")
    assert def_lines(source) == _ast_lines(source)


def test_def_lines_of_the_tricky_source():
    assert def_lines(TRICKY) == {"A": 1, "A.m": 8, "A.am": 11, "f": 12, "B": 14, "B.m": 15}


def _native(name: str, library: str) -> Frame:
    return Frame(name, library, 0, is_native=True, qualname=name)


@pytest.fixture
def installed(tmp_path):
    """A fake install: site/pkg/checker.py beside its compiled shim, the group's library in
    site/, a package pkg.irbuild and its module pkg.irbuild.builder, and an unrelated
    `elsewhere.checker` outside the install."""
    site = tmp_path / "site"
    (site / "pkg" / "irbuild").mkdir(parents=True)
    (site / "pkg" / "checker.py").write_text(CHECKER)
    (site / "pkg" / "irbuild" / "builder.py").write_text(
        "class IRBuilder:\n    def accept(self):\n        pass\n"
    )

    def module(name: str, file: Path) -> types.ModuleType:
        m = types.ModuleType(name)
        m.__file__ = str(file)
        return m

    modules = {
        "pkg": module("pkg", site / "pkg" / "__init__.cpython-312-x86_64-linux-gnu.so"),
        "pkg.checker": module(
            "pkg.checker", site / "pkg" / "checker.cpython-312-x86_64-linux-gnu.so"
        ),
        "pkg.irbuild": module("pkg.irbuild", site / "pkg" / "irbuild" / "__init__.py"),
        "pkg.irbuild.builder": module(
            "pkg.irbuild.builder",
            site / "pkg" / "irbuild" / "builder.cpython-312-x86_64-linux-gnu.so",
        ),
        "elsewhere.checker": module("elsewhere.checker", tmp_path / "other" / "checker.py"),
        "not_a_module": object(),
    }
    return site, str(site / "0aca9ce3d91742c5b361__mypyc.cpython-312-x86_64-linux-gnu.so"), modules


def test_native_body_wrapper_glue_and_module_body_named_as_python(installed):
    site, lib, modules = installed
    frames = [
        _native("CPyDef_checker___TypeChecker___check_first_pass", lib),
        _native("CPyPy_checker___TypeChecker___check_first_pass", lib),
        _native("CPyDef_checker___TypeChecker___accept__Node_glue", lib),
        _native("CPyDef_checker_____top_level__", lib),
        _native("CPyDef_checker___conditional", lib),
        _native("CPyDef_irbuild___builder___IRBuilder___accept", lib),
    ]
    out = rename_frames(frames, modules)
    checker = str(site / "pkg" / "checker.py")
    assert [(f.function_name, f.qualname, f.filename, f.lineno, f.is_native) for f in out] == [
        ("check_first_pass [mypyc]", "TypeChecker.check_first_pass [mypyc]", checker, 7, True),
        (
            "check_first_pass [mypyc wrapper]",
            "TypeChecker.check_first_pass [mypyc wrapper]",
            checker,
            7,
            True,
        ),
        ("accept [mypyc glue]", "TypeChecker.accept [mypyc glue]", checker, 10, True),
        ("<module> [mypyc]", "<module> [mypyc]", checker, 1, True),
        ("conditional [mypyc]", "conditional [mypyc]", checker, 16, True),  # a def inside an if
        # the longest module suffix wins: pkg.irbuild.builder, not the package pkg.irbuild
        (
            "accept [mypyc]",
            "IRBuilder.accept [mypyc]",
            str(site / "pkg" / "irbuild" / "builder.py"),
            2,
            True,
        ),
    ]
    assert all(f.first_lineno == f.lineno for f in out)


def test_nested_functions_lambdas_generators_dunders_and_imports_named_as_python(installed):
    # What mypy 1.20's own library holds: nested functions and lambdas are callable classes
    # ({inner}_{outer}_obj, a method's outer being {method}_{Class}), generators {name}_gen,
    # special methods CPyDunder_ slots, imports CPyInit_/CPyExec_. Before, each kept its C name.
    site, lib, modules = installed
    frames = [
        _native("CPyDef_checker___inner_accept_TypeChecker_obj_____call__", lib),
        _native("CPyPy_checker___inner_accept_TypeChecker_obj_____call__", lib),
        _native("CPyDunder___get__checker___inner_accept_TypeChecker_obj", lib),
        _native(
            "CPyDef_checker_____mypyc_lambda__0_check_first_pass_TypeChecker_obj_____call__", lib
        ),
        _native("CPyDef_checker___conditional_gen_____mypyc_generator_helper__", lib),
        _native("CPyDef_checker___conditional_gen_____next__", lib),
        _native("CPyDunder___hash__checker___TypeChecker", lib),
        _native("CPyInit_pkg___checker", lib),
        _native("CPyExec_pkg___gone", lib),
        _native("CPyDef_checker___nowhere_obj_____call__", lib),  # no such def: kept as read
    ]
    checker = str(site / "pkg" / "checker.py")
    inner = "TypeChecker.accept.<locals>.inner"
    lam = "TypeChecker.check_first_pass.<locals>.<lambda>"
    assert [
        (f.function_name, f.qualname, f.filename, f.lineno) for f in rename_frames(frames, modules)
    ] == [
        ("inner [mypyc]", inner + " [mypyc]", checker, 11),
        ("inner [mypyc wrapper]", inner + " [mypyc wrapper]", checker, 11),
        ("inner [mypyc wrapper]", inner + " [mypyc wrapper]", checker, 11),
        ("<lambda> [mypyc]", lam + " [mypyc]", checker, 7),
        ("conditional [mypyc]", "conditional [mypyc]", checker, 16),
        ("conditional [mypyc wrapper]", "conditional [mypyc wrapper]", checker, 16),
        (
            "__hash__ [mypyc wrapper]",
            "TypeChecker.__hash__ [mypyc wrapper]",
            checker,
            4,
        ),  # the class's line
        ("<module> [mypyc init]", "<module> [mypyc init]", checker, 1),
        ("<module> [mypyc init]", "pkg.gone.<module> [mypyc init]", lib, 0),
        ("__call__ [mypyc]", "nowhere_obj.__call__ [mypyc]", checker, 0),
    ]


def test_a_profile_written_without_python_is_named_when_loaded(installed):
    # The exit-signal path's dump (written without the GIL, so without Python) kept mypyc's C
    # names in every format made from it; loading it reads the modules back from the disk.
    site, lib, _ = installed
    for shim in ("pkg/__init__", "pkg/checker", "pkg/irbuild/__init__", "pkg/irbuild/builder"):
        (site / f"{shim}.cpython-312-x86_64-linux-gnu.so").write_bytes(b"")
    (site / "pkg" / "__init__.py").write_text("")
    (site / "pkg" / "irbuild" / "__init__.py").write_text("")
    p = small_profile()
    p.frame_table[2] = _native("CPyDef_checker___TypeChecker___check_first_pass", lib)
    p.frame_table[3] = _native("CPyDef_irbuild___builder___IRBuilder___accept", lib)
    p.frame_table[5] = _native("CPyDef_checker___inner_accept_TypeChecker_obj_____call__", lib)
    p.stats["written_without_gil"] = 1
    got = loads(render(p, "spprof")).frame_table
    checker = str(site / "pkg" / "checker.py")
    assert [(f.qualname, f.filename, f.lineno) for f in (got[2], got[3], got[5])] == [
        ("TypeChecker.check_first_pass [mypyc]", checker, 7),
        ("IRBuilder.accept [mypyc]", str(site / "pkg" / "irbuild" / "builder.py"), 2),
        ("TypeChecker.accept.<locals>.inner [mypyc]", checker, 11),
    ]
    assert got[0] == p.frame_table[0]  # the Python frames as they were
    # A profile from a live session was named at stop: loading leaves names alone.
    del p.stats["written_without_gil"]
    assert loads(render(p, "spprof")).frame_table[2].qualname.startswith("CPyDef_")


def test_module_outside_the_library_folder_is_not_taken(installed):
    _, lib, modules = installed
    del modules["pkg.checker"]  # only elsewhere.checker is left with that suffix
    (f,) = rename_frames([_native("CPyDef_checker___TypeChecker___check_first_pass", lib)], modules)
    # still read as Python, kept in the library
    assert (f.function_name, f.qualname, f.filename, f.lineno) == (
        "check_first_pass [mypyc]",
        "checker.TypeChecker.check_first_pass [mypyc]",
        lib,
        0,
    )


def test_other_frames_untouched(installed):
    _, lib, modules = installed
    frames = [
        _native("PyObject_Call", "/usr/lib/libpython3.12.so"),
        _native("CPyDef_", lib),
        Frame("CPyDef_checker___TypeChecker___check_first_pass", "/src/app.py", 3),  # Python code
        Frame("main", "/src/app.py", 3),
    ]
    assert rename_frames(frames, modules) == frames


MYPY_RUN = """
import sys
import spprof
from mypy import api
with spprof.Profiler(interval_ms=1, native=True) as p:
    api.run(["--no-incremental", "--cache-dir=/dev/null", sys.argv[1]])
frames = [f for s in p.profile.samples for f in s.frames]
import json
print(json.dumps({
    "mypyc": sorted({f.qualname for f in frames if f.qualname.endswith("[mypyc]")}),
    "c_names": sorted({f.qualname for f in frames if f.qualname.startswith(
        ("CPyDef_", "CPyPy_", "CPyDunder_", "CPyInit_", "CPyExec_"))}),
    "init": sorted({f.filename for f in frames if f.qualname.endswith("[mypyc init]")}),
    "files": sorted({f.filename for f in frames if f.qualname.endswith("[mypyc]")}),
}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="native frames: Linux here")
def test_real_mypy_frames_are_its_python_functions(tmp_path):
    pytest.importorskip("mypy")  # in DEV_DEPS (3.10+)
    spec = importlib.util.find_spec("mypy.build")
    if spec is None or not str(spec.origin).endswith(".so"):
        pytest.skip("mypy is not compiled with mypyc on this interpreter (no binary wheel)")
    target = tmp_path / "t.py"
    target.write_text("def f(x: int) -> str:\n    return str(x)\n")
    r = run_python("-c", MYPY_RUN, str(target))
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout.splitlines()[-1])
    assert got["c_names"] == [], got["c_names"][:10]  # old code: every compiled frame
    # mypy.build.build is on every stack of the run
    assert "build [mypyc]" in got["mypyc"], got["mypyc"][:40]
    assert any(f.endswith("/mypy/build.py") for f in got["files"]), got["files"]
    # api.run imports mypy.main and mypy.build in the block: their import is theirs
    assert any(f.endswith("/mypy/main.py") for f in got["init"]), got["init"]
