"""Short labels for native function names, where a line or a box has little room.

Demangled C++ names carry every template argument (Arrow's kernels make 700-character summary
lines) and Rust's legacy mangling ends in a hash. Rust names (legacy and v0) may begin with a
qualified segment, `<alloc::vec::Vec<u8> as std::io::Write>::write_fmt`: that segment stays,
with its own arguments elided, since it is what names the method. The summary and the flame
graphs' boxes show `short_name(name)`; tooltips, pprof, speedscope and every saved format
keep the full name.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

ELLIPSIS = "…"
# Rust legacy mangling, demangled by the C++ demangler: "crate::path::name::h0123456789abcdef"
_RUST_HASH = re.compile(r"::h[0-9a-f]{16}$")
_ANON = "(anonymous namespace)"
# Past this many characters the parameter list goes too.
PARAMS_KEPT_UP_TO = 80


def _elide(name: str, open_: str, close: str) -> str:
    """Each outermost open_...close group becomes open_ + ELLIPSIS + close. C++'s
    `operator<`, `operator<<`, `operator()`... are names, not groups."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(name):
        c = name[i]
        if depth == 0 and name.endswith("operator", 0, i):
            # the operator's own characters: copy them through (e.g. "<<=", "()", "->")
            j = i
            while j < len(name) and name[j] in "<>=!+-*/%^&|~[]()," and j - i < 3:
                j += 1
            if name[i:j] in ("()", "[]") or j > i:
                out.append(name[i:j])
                i = j
                continue
        if c == open_:
            if depth == 0:
                out.append(open_ + ELLIPSIS)
            depth += 1
        elif c == close and depth > 0 and not (c == ">" and name.endswith("-", 0, i)):
            # (Rust's `fn(u8) -> u8` inside arguments: "->" closes nothing)
            depth -= 1
            if depth == 0:
                out.append(close)
        elif depth == 0:
            out.append(c)
        i += 1
    return "".join(out) if depth == 0 else name  # unbalanced: leave it as it is


def _angle_depths(text: str) -> Iterator[tuple[int, int]]:
    """(index, depth after it) for each character of `text`: the depth of its `<`/`>`
    brackets, where the `>` of an arrow `->` is not one."""
    depth = 0
    for i, c in enumerate(text):
        if c == "<":
            depth += 1
        elif c == ">" and not text.endswith("-", 0, i):
            depth -= 1
        yield i, depth


def _short_qualified(name: str) -> str:
    """Rust's `<Type as Trait>::rest` (or `<Type>::rest`): the qualified segment kept, each part
    shortened; `rest` elided as usual."""
    for i, depth in _angle_depths(name):
        if depth == 0:  # `name` starts with "<": the first depth 0 is its closing ">"
            inner, rest = name[1:i], name[i + 1 :]
            # "<A<..> as T<..>>": each side shortened; an " as " inside brackets is not split
            head = " as ".join(short_name(p) for p in _split_as(inner))
            return "<" + head + ">" + (_elide(rest, "<", ">") if "<" in rest else rest)
    return name  # unbalanced: left alone


def _split_as(inner: str) -> list[str]:
    """`inner` split at its one " as " outside brackets (Type as Trait), else [inner]."""
    for i, depth in _angle_depths(inner):
        if depth == 0 and inner.startswith(" as ", i):
            return [inner[:i], inner[i + 4 :]]
    return [inner]


def short_name(name: str) -> str:
    """`name` with template arguments elided (`std::vector<…>::push_back(…)`) and a Rust hash
    dropped; the parameter list elided too when the name is still long."""
    short = _RUST_HASH.sub("", name).replace(_ANON, "\0")  # a name, not a parameter list
    if short.startswith("<"):
        short = _short_qualified(short)
    elif "<" in short:
        short = _elide(short, "<", ">")
    if len(short) > PARAMS_KEPT_UP_TO and "(" in short:
        short = _elide(short, "(", ")")
    return short.replace("\0", _ANON)
