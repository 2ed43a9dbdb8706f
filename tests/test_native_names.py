"""Native names where room is short (issue 28, "readable names"): the summary and the flame
graph's boxes show C++ names without template arguments and Rust names without their hash;
tooltips, search, zoom and every saved format keep the full name."""

from __future__ import annotations

import dataclasses
import json
import xml.etree.ElementTree as ET

import pytest

from spprof import Frame
from spprof.output import render
from spprof.output.flamegraph import render as render_svg
from spprof.output.native_names import short_name
from spprof.output.report import summary
from test_formats_common import small_profile

ARROW = (
    "arrow::compute::internal::(anonymous namespace)::GroupedReducingAggregator<arrow::Int64Type,"
    " arrow::compute::internal::(anonymous namespace)::GroupedSumImpl<arrow::Int64Type>,"
    " arrow::Int64Type>::Consume(arrow::compute::ExecSpan const&)"
)


@pytest.mark.parametrize(
    "name,short",
    [
        (
            "std::vector<int, std::allocator<int> >::push_back(int const&)",
            "std::vector<…>::push_back(int const&)",
        ),
        (
            ARROW,
            "arrow::compute::internal::(anonymous namespace)::GroupedReducingAggregator<…>"
            "::Consume(…)",
        ),
        ("std::ostream::operator<<(int)", "std::ostream::operator<<(int)"),
        ("Foo::operator()(int) const", "Foo::operator()(int) const"),
        ("bool operator< <int>(Foo<int> const&)", "bool operator< <…>(Foo<…> const&)"),
        ("core::fmt::write::h0123456789abcdef", "core::fmt::write"),
        ("PyObject_Call", "PyObject_Call"),
        ("libfoo.so+0x1234", "libfoo.so+0x1234"),
        ("a<b", "a<b"),  # unbalanced: left alone
        # Rust (v0, demangled by spprof): the qualified segment names the method and stays
        ("<zoo::Sq as zoo::Shape>::area", "<zoo::Sq as zoo::Shape>::area"),
        (
            "<alloc::vec::Vec<u8> as std::io::Write>::write_fmt",
            "<alloc::vec::Vec<…> as std::io::Write>::write_fmt",
        ),
        ("<std::path::Path>::new::<str>", "<std::path::Path>::new::<…>"),
        ("zoo::tuples::<for<'a> fn(u8, &'a str) -> !>", "zoo::tuples::<…>"),  # "->" closes nothing
        ("mycrate::main::{closure#0}", "mycrate::main::{closure#0}"),
        ("<zoo::Sq as zoo::Shape>::area::h0123456789abcdef", "<zoo::Sq as zoo::Shape>::area"),
    ],
)
def test_short_name(name, short):
    assert short_name(name) == short


def _with_native_leaf() -> object:
    p = small_profile()
    table = list(p.frame_table)
    # "cold" (2 ms of MainThread) becomes a native C++ function with a 215-character name
    table[3] = Frame(ARROW, "/usr/lib/libarrow.so.1900", 0, is_native=True, qualname=ARROW)
    return dataclasses.replace(p, frame_table=table)


def test_summary_shows_the_short_name_and_python_names_stay():
    text = summary(_with_native_leaf(), top=10)
    assert "GroupedReducingAggregator<…>::Consume(…) (" in text, text
    assert "arrow::Int64Type" not in text
    # the full name made 255-character lines
    assert max(len(line) for line in text.splitlines() if "Consume" in line) < 140
    # Python names with angle brackets are not native names: untouched
    assert "<module> (" in text


def test_flame_box_is_short_tooltip_and_search_name_full():
    root = ET.fromstring(render_svg(_with_native_leaf()))
    svg = "{http://www.w3.org/2000/svg}"
    boxes = [g for g in root.iter(f"{svg}g") if g.get("data-n") == ARROW]
    assert len(boxes) == 1
    g = boxes[0]
    assert g.get("data-l") == short_name(ARROW)
    assert ARROW in g.find(f"{svg}title").text
    text = g.find(f"{svg}text").text or ""
    assert "Int64Type" not in text  # the label shows (part of) the short name only
    # a Python box has no short label
    assert all(x.get("data-l") is None for x in root.iter(f"{svg}g") if x.get("data-n") == "main")


def test_saved_formats_keep_the_full_name():
    doc = json.loads(render(_with_native_leaf(), "speedscope"))
    assert any(f["name"].startswith(ARROW) for f in doc["shared"]["frames"])
