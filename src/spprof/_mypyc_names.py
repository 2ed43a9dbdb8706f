"""Native frames of mypyc-compiled modules named as the Python functions they were compiled from.

mypyc (mypy, black and others ship compiled with it) turns each Python function into C functions
named from its module and qualified name (mypyc/namegen.py, mypyc/common.py):

- `CPyDef_` + name: the native body; `CPyPy_` + name: the wrapper Python calls through
  (argument parsing and boxing);
- name: `module_prefix.Class.function` with "." written "___" (and a literal "___" written
  "___3_"); the module prefix is the shortest dotted suffix of the module's name that is
  unique among the modules compiled together (`checker` for mypy.checker), or the full name.

- `CPyInit_`/`CPyExec_` + the module's full name ("." written "___"): its import;
- `CPyDunder_` + a dunder (or `_RichCompare_`) + a class's name: the slot wrapper of a special
  method;
- a nested function or lambda is a callable class `{inner}_{outer}_obj` whose `__call__` is the
  body (`{outer}` being the enclosing function's own such name, a method's `{method}_{Class}`);
  a generator is a class `{name}_gen` whose `__mypyc_generator_helper__` is the body.

So `CPyDef_checker___TypeChecker___check_first_pass` becomes `TypeChecker.check_first_pass`
in mypy/checker.py, at its `def` line, marked `[mypyc]` (`[mypyc wrapper]` for `CPyPy_`, a
dunder's slot and a generator's `__next__`, `[mypyc glue]` for the glue of an override,
`<module>` for a module's body, `<module> [mypyc init]` for its import). A nested function
is named as CPython names it (`outer.<locals>.inner`), read back against the source's defs. The
module is found among the loaded modules (a compiled module is loaded whenever its code ran):
the longest run of leading parts that is the dotted suffix of exactly one of them installed
under the folder of the library that holds the code. Without a match the name still
reads as Python (`checker.TypeChecker.check_first_pass [mypyc]`) and keeps the library as its
file.

Done in the profile's frame table when a session stops, so every format gets the Python name:
the C name says nothing a Python developer needs beyond "compiled" and "wrapper", which the
mark keeps. The decoding is ambiguous only where Python names begin or end with "_" next to a
separator (`Foo_.bar` and `Foo._bar` are written alike): the split takes the first reading.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from types import ModuleType
from typing import Optional

from ._model import Frame

NATIVE = "CPyDef_"  # mypyc/common.py NATIVE_PREFIX
WRAPPER = "CPyPy_"  # mypyc/common.py PREFIX
DUNDER = "CPyDunder_"  # mypyc/common.py DUNDER_PREFIX
MODULE_INIT = ("CPyInit_", "CPyExec_")  # the module's init (single- and multi-phase)
PREFIXES = (NATIVE, WRAPPER, DUNDER, *MODULE_INIT)
MARK = " [mypyc]"
WRAPPER_MARK = " [mypyc wrapper]"
GLUE_MARK = " [mypyc glue]"
INIT_MARK = " [mypyc init]"
# The special-method slot a CPyDunder_ function fills: a dunder, or mypyc's rich comparison.
_DUNDER = re.compile(r"^(_RichCompare_|__[a-z0-9][a-z0-9_]*?__)(\w+)$")
# Classes mypyc makes for a nested function or lambda (`_obj`) and a generator (`_gen`), and
# which of their methods is the function's body.
_IMPLICIT = re.compile(r"^(\w+)_(obj|gen)$")
_BODY = {"obj": "__call__", "gen": "__mypyc_generator_helper__"}
_LAMBDA = re.compile(r"^__mypyc_lambda__\d+_(\w+)$")
# A method overriding one of `Base` with another signature is reached through a glue function
# named `method__Base_glue` (mypyc/irbuild/function.py).
_GLUE = re.compile(r"^(\w+?)__[A-Za-z_]\w*_glue$")
# Source files past this size are not parsed for a def line (the name is kept without it).
MAX_SOURCE_BYTES = 8 << 20


@dataclasses.dataclass(frozen=True)
class MypycName:
    """A mypyc C function name read back: the dotted parts after the prefix."""

    parts: tuple[str, ...]
    wrapper: bool
    init: bool = False  # CPyInit_/CPyExec_: parts are the module's full dotted name


def _split(body: str) -> list[str]:
    parts: list[str] = []
    for piece in body.split("___"):
        if parts and piece.startswith("3_"):  # "___3_": a "___" inside a name
            parts[-1] += "___" + piece[2:]
        else:
            parts.append(piece)
    return parts


def parse(c_name: str) -> Optional[MypycName]:
    """`CPyDef_a___B___c` -> parts ("a", "B", "c"); None for any other name. A dunder's slot
    (`CPyDunder___hash__a___B`) reads as ("a", "B", "__hash__"), a wrapper; a module's init
    (`CPyInit_a___b`) as ("a", "b") with `init`."""
    dunder = ""
    if c_name.startswith(NATIVE):
        body, wrapper = c_name[len(NATIVE) :], False
    elif c_name.startswith(WRAPPER):
        body, wrapper = c_name[len(WRAPPER) :], True
    elif c_name.startswith(DUNDER):
        m = _DUNDER.match(c_name[len(DUNDER) :])
        if m is None:
            return None
        dunder = "<comparison>" if m.group(1) == "_RichCompare_" else m.group(1)
        body, wrapper = m.group(2), True
    elif c_name.startswith(MODULE_INIT):
        parts = _split(c_name[len(MODULE_INIT[0]) :])
        if not all(p.isidentifier() for p in parts):
            return None
        return MypycName(tuple(parts), False, init=True)
    else:
        return None
    parts = _split(body)
    if len(parts) < (1 if dunder else 2) or not all(p.isidentifier() for p in parts):
        return None  # a module prefix and a name at least, each a Python identifier
    return MypycName((*parts, dunder) if dunder else tuple(parts), wrapper)


class _ModuleIndex:
    """Loaded modules by every dotted suffix of their names ("checker", "mypy.checker")."""

    def __init__(self, modules: Mapping[str, object]) -> None:
        self._by_suffix: dict[str, list[tuple[str, ModuleType]]] = {}
        for name, m in list(modules.items()):
            if not isinstance(m, ModuleType):
                continue
            pieces = name.split(".")
            for i in range(len(pieces)):
                self._by_suffix.setdefault(".".join(pieces[i:]), []).append((name, m))

    def find(self, parts: tuple[str, ...], library: str) -> Optional[tuple[ModuleType, int]]:
        """(module, number of parts its prefix takes) for the longest leading run of `parts`
        that is the dotted suffix of exactly one loaded module installed beside `library`
        (any module when the library is unknown)."""
        near = os.path.dirname(library) + os.sep if library else ""
        for k in range(len(parts) - 1, 0, -1):
            found = [
                m
                for _, m in self._by_suffix.get(".".join(parts[:k]), ())
                if not near or _file_of(m).startswith(near)
            ]
            if len(found) == 1:
                return found[0], k
        return None


def _file_of(module: ModuleType) -> str:
    f = getattr(module, "__file__", None)
    return f if isinstance(f, str) else ""


def _source_of(module: ModuleType) -> str:
    """The module's .py beside its compiled shim (mypy and black ship both), else ""."""
    f = _file_of(module)
    if f.endswith(".py"):
        return f
    if not f:
        return ""
    stem = os.path.basename(f).split(".", 1)[0]  # checker.cpython-312-x86_64-linux-gnu.so
    py = os.path.join(os.path.dirname(f), stem + ".py")
    return py if os.path.isfile(py) else ""


class _DefLines:
    """`def`/`class` lines by qualified name, one scan per source file (`def_lines`).

    A line scan, not `ast.parse`: parsing the 56 mypy modules of a small mypy run took 1.4 s
    of CPU at stop, the scan 0.3 s. It follows indentation, skipping blank and comment lines,
    the inside of triple-quoted strings and the continuation lines of open brackets. Against
    `ast`: the same lines on all 323 modules of mypy and mypyc, and on 2,218 of the standard
    library's 2,221 (the 3 others: tokenizer tests with strings built to confuse tokenizers).
    """

    def __init__(self) -> None:
        self._by_file: dict[str, tuple[dict[str, int], dict[str, str]]] = {}
        self._namespaced: dict[str, dict[str, str]] = {}

    def line(self, path: str, qualname: str) -> int:
        return self._scan(path)[0].get(qualname, 0)

    def namespaced(self, path: str) -> dict[str, str]:
        """mypyc's name for each function of the file (`inner_outer`) -> its qualified name."""
        if path not in self._namespaced:
            self._namespaced[path] = namespaced_names(self._scan(path)[1])
        return self._namespaced[path]

    def _scan(self, path: str) -> tuple[dict[str, int], dict[str, str]]:
        if path not in self._by_file:
            kinds: dict[str, str] = {}
            self._by_file[path] = (self._read(path, kinds), kinds)
        return self._by_file[path]

    @staticmethod
    def _read(path: str, kinds: dict[str, str]) -> dict[str, int]:
        try:
            if os.path.getsize(path) > MAX_SOURCE_BYTES:
                return {}
            with open(path, encoding="utf-8", errors="replace") as f:
                return def_lines(f.read(), kinds)
        except OSError:
            return {}


_HEADER = re.compile(r"(?:async\s+)?(def|class)\s+(\w+)")
# Left to right on one line: a whole triple-quoted string, an opening triple quote (groups 1,
# 2: the string goes on), a one-line string, a comment. What they cover holds no brackets.
_SKIPPED = re.compile(
    r'"""(?:\\.|[^\\])*?"""|\'\'\'(?:\\.|[^\\])*?\'\'\'|(""")|(\'\'\')'
    r'|"(?:\\.|[^"\\])*"|\'(?:\\.|[^\'\\])*\'|#.*'
)


def def_lines(source: str, kinds: Optional[dict[str, str]] = None) -> dict[str, int]:
    """Qualified name (`Class.method`, `outer.inner`) -> the line of its `def` or `class`; the
    first one where a name is defined twice. `kinds`, when given, gets "def" or "class" for each."""
    lines: dict[str, int] = {}
    scope: list[tuple[int, str]] = []  # (indent, qualified name) of the enclosing defs
    in_string = ""  # the open triple quote
    depth = 0  # open brackets carried from earlier lines
    for number, text in enumerate(source.splitlines(), 1):
        if in_string:
            at = text.find(in_string)
            if at < 0:
                continue
            text, in_string = text[at + 3 :], ""
        elif depth == 0:  # a new statement
            stripped = text.lstrip()
            if not stripped or stripped[0] == "#":
                continue
            indent = len(text) - len(stripped)
            while scope and scope[-1][0] >= indent:
                scope.pop()
            m = _HEADER.match(stripped)
            if m:
                q = (scope[-1][1] + "." if scope else "") + m.group(2)
                lines.setdefault(q, number)
                if kinds is not None:
                    kinds.setdefault(q, m.group(1))
                scope.append((indent, q))
        # What stays open past this line: a triple-quoted string, brackets.
        if "'" in text or '"' in text or "#" in text:
            pieces, at = [], 0
            for t in _SKIPPED.finditer(text):
                pieces.append(text[at : t.start()])
                at = t.end()
                if t.group(1) or t.group(2):
                    in_string = t.group(1) or t.group(2)
                    break
            else:
                pieces.append(text[at:])
            text = "".join(pieces)
        opened = text.count("(") + text.count("[") + text.count("{")
        closed = text.count(")") + text.count("]") + text.count("}")
        depth = max(0, depth + opened - closed)
    return lines


def namespaced_names(kinds: Mapping[str, str]) -> dict[str, str]:
    """mypyc's namespaced name of every function (mypyc/irbuild/context.py, FuncInfo: its name,
    its class's if a method, then the enclosing function's namespaced name) -> the function's
    qualified name in CPython's form (`outer.<locals>.inner`). Lambdas are not in `kinds`:
    `_LAMBDA` reads those."""
    own: dict[str, str] = {}  # qualname (dotted, as def_lines) -> namespaced name
    out: dict[str, str] = {}
    for q, kind in kinds.items():  # parents come before their children
        if kind != "def":
            continue
        parent, _, name = q.rpartition(".")
        if not parent:
            ns, shown = name, name
        elif kinds.get(parent) == "class":
            grand = parent.rpartition(".")[0]
            if grand and kinds.get(grand) == "def":
                continue  # a class inside a function: not named here
            ns, shown = f"{name}_{parent.rpartition('.')[2]}", q
        elif parent in own:
            ns, shown = f"{name}_{own[parent]}", f"{out[own[parent]]}.<locals>.{name}"
        else:
            continue
        own[q] = ns
        out.setdefault(ns, shown)
    return out


def _implicit(
    parts: tuple[str, ...], source: str, def_lines: _DefLines
) -> Optional[tuple[str, int, bool]]:
    """For a method of a class mypyc made (a nested function's `_obj`, a generator's `_gen`):
    (the function's qualified name, its def line, whether this method is its body)."""
    if len(parts) != 2 or not source:
        return None
    m = _IMPLICIT.match(parts[0])
    if m is None:
        return None
    ns, kind = m.groups()
    names = def_lines.namespaced(source)
    lam = _LAMBDA.match(ns)
    if lam and lam.group(1) in names:
        outer = names[lam.group(1)]
        qualname = f"{outer}.<locals>.<lambda>"
        line = def_lines.line(source, outer.replace(".<locals>", ""))
    elif ns in names:
        qualname = names[ns]
        line = def_lines.line(source, qualname.replace(".<locals>", ""))
    else:
        return None
    return qualname, line, parts[1] == _BODY[kind]


def _module_init(name: MypycName, frame: Frame, modules: Mapping[str, object]) -> Frame:
    dotted = ".".join(name.parts)
    module = modules.get(dotted)
    source = _source_of(module) if isinstance(module, ModuleType) else ""
    file = source or (_file_of(module) if isinstance(module, ModuleType) else "") or frame.filename
    qualname = "<module>" + INIT_MARK if source else f"{dotted}.<module>{INIT_MARK}"
    line = 1 if source else 0
    return Frame(
        "<module>" + INIT_MARK, file, line, is_native=True, qualname=qualname, first_lineno=line
    )


def python_frame(
    frame: Frame,
    modules: _ModuleIndex,
    def_lines: _DefLines,
    loaded: Optional[Mapping[str, object]] = None,
) -> Optional[Frame]:
    """The Python-named frame for a native frame of mypyc code, or None when it is not one."""
    if not frame.is_native:
        return None
    name = parse(frame.function_name)
    if name is None:
        return None
    if name.init:
        return _module_init(name, frame, loaded or {})
    mark = WRAPPER_MARK if name.wrapper else MARK
    parts = name.parts
    glue = _GLUE.match(parts[-1])
    if glue:
        parts, mark = (*parts[:-1], glue.group(1)), GLUE_MARK
    found = modules.find(parts, frame.filename)
    if found is None:
        qualname = ".".join(parts)
        return dataclasses.replace(frame, function_name=parts[-1] + mark, qualname=qualname + mark)
    module, k = found
    qualname = ".".join(parts[k:])
    source = _source_of(module)
    implicit = _implicit(parts[k:], source, def_lines)
    if qualname == "__top_level__":  # mypyc's name for a module's body
        qualname, line = "<module>", 1
    elif implicit is not None:
        qualname, line, body = implicit
        mark = mark if body else WRAPPER_MARK
    else:
        line = def_lines.line(source, qualname) if source else 0
        if line == 0 and source and frame.function_name.startswith(DUNDER):
            line = def_lines.line(source, qualname.rpartition(".")[0])  # the class's
    return Frame(
        function_name=qualname.rpartition(".<locals>.")[2].rsplit(".", 1)[-1] + mark,
        filename=source or _file_of(module) or frame.filename,
        lineno=line,
        is_native=True,
        qualname=qualname + mark,
        first_lineno=line,
    )


# Entries a walk of a library's folder looks at, at most (modules_on_disk).
MAX_WALK_ENTRIES = 200_000
_SKIPPED_DIRS = ("__pycache__", ".git")
_SKIPPED_SUFFIXES = (".dist-info", ".egg-info")


def modules_on_disk(frames: Iterable[Frame]) -> dict[str, ModuleType]:
    """The compiled modules beside the libraries that hold mypyc frames, found on disk: for a
    profile written without Python (the exit-signal path's dump), named when it is loaded.
    A module is a compiled shim (`checker.cpython-312-x86_64-linux-gnu.so`) with its `.py`
    beside it, named by its path under the library's folder (site-packages)."""
    folders = {
        os.path.dirname(f.filename)
        for f in frames
        if f.is_native and f.function_name.startswith(PREFIXES) and os.path.isabs(f.filename)
    }
    found: dict[str, ModuleType] = {}
    seen = 0
    for folder in sorted(folders):
        for root, dirs, files in os.walk(folder):
            dirs[:] = [
                d for d in dirs if d not in _SKIPPED_DIRS and not d.endswith(_SKIPPED_SUFFIXES)
            ]
            seen += len(dirs) + len(files)
            if seen > MAX_WALK_ENTRIES:
                return found
            names = set(files)
            for f in files:
                stem, dot, rest = f.partition(".")
                if not (dot and rest.endswith(("so", "pyd")) and stem + ".py" in names):
                    continue
                rel = os.path.relpath(os.path.join(root, stem), folder).split(os.sep)
                if rel[-1] == "__init__":
                    rel = rel[:-1]
                if rel and all(p.isidentifier() for p in rel):
                    m = ModuleType(".".join(rel))
                    m.__file__ = os.path.join(root, f)
                    found.setdefault(m.__name__, m)
    return found


def rename_frames(frames: Iterable[Frame], modules: Mapping[str, object]) -> list[Frame]:
    """`frames` with every mypyc frame given its Python name; the others as they are."""
    frames = list(frames)
    if not any(f.is_native and f.function_name.startswith(PREFIXES) for f in frames):
        return frames  # the common case: no index built
    index, def_lines = _ModuleIndex(modules), _DefLines()
    return [python_frame(f, index, def_lines, modules) or f for f in frames]
