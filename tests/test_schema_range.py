"""Bounds on integers and numbers as grammar: every number fed byte by byte through llama.cpp's grammar is taken
exactly when it lies within the bounds; contradicting or unenforceable bounds are refused by name."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import pytest

from engine.core.backend import Model
from engine.core.grammar import Grammar
from engine.core.jsonschema import SchemaError, schema_grammar
from tests.tool_models import write_tools_model

EDGES = [None, -1000, -101, -100, -99, -10, -9, -1, 0, 1, 7, 9, 10, 11, 99, 100, 250, 999, 1000, 12345]
PAIRS = [(lo, hi) for lo, hi in itertools.product(EDGES, EDGES)
         if (lo is not None or hi is not None) and (lo is None or hi is None or lo <= hi)]
SAMPLE = sorted({*range(-130, 131), *(s * v + d for v in (999, 1000, 10**4, 12345, 10**5, 10**15)
                                       for s in (1, -1) for d in (-1, 0, 1))})


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Model]:
    with Model(write_tools_model(tmp_path_factory.mktemp("range") / "t.gguf")) as m:
        yield m


class Checker:
    """Whether a grammar takes a text, one byte token per byte, and then the end of the reply."""

    def __init__(self, m: Model) -> None:
        self.m = m
        self.byte = {m.token_bytes(t): t for t in reversed(range(m.n_vocab)) if len(m.token_bytes(t)) == 1}

    def takes(self, g: Grammar, text: str) -> bool:
        g = g.clone()
        try:
            for tok in (self.byte[bytes([b])] for b in text.encode()):
                if not g.allows(tok):
                    return False
                g.accept(tok)
            return g.allows(self.m.eos)
        finally:
            g.close()


def _bounds(lo: int | None, hi: int | None, low_key: str = "minimum", high_key: str = "maximum") -> dict[str, Any]:
    return {k: v for k, v in ((low_key, lo), (high_key, hi)) if v is not None}


def test_integer_ranges_take_exactly_the_numbers_inside(model: Model) -> None:
    check = Checker(model)
    for lo, hi in PAIRS:
        g = Grammar.for_model(model.ptr, schema_grammar({"type": "integer", **_bounds(lo, hi)}))
        try:
            for n in SAMPLE:
                inside = (lo is None or n >= lo) and (hi is None or n <= hi)
                assert check.takes(g, str(n)) == inside, (lo, hi, n)
            for n in {lo, hi} - {None, 0}:  # no leading zeros, no fraction, no exponent
                assert not check.takes(g, f"0{n}") and not check.takes(g, f"{n}.0") and not check.takes(g, f"{n}e0")
        finally:
            g.close()


def test_exclusive_and_fractional_integer_bounds_round_inwards(model: Model) -> None:
    check = Checker(model)
    cases: list[tuple[dict[str, Any], int, int]] = [
        ({"exclusiveMinimum": 0, "exclusiveMaximum": 10}, 1, 9),
        ({"minimum": 0.5, "maximum": 9.5}, 1, 9),
        ({"exclusiveMinimum": -3.5, "maximum": 4, "exclusiveMaximum": 4}, -3, 3),  # the tighter bound holds
        ({"minimum": -5, "exclusiveMinimum": True, "maximum": 5, "exclusiveMaximum": True}, -4, 4),  # draft 4
    ]
    for bounds, lo, hi in cases:
        g = Grammar.for_model(model.ptr, schema_grammar({"type": "integer", **bounds}))
        try:
            assert [n for n in range(-12, 13) if check.takes(g, str(n))] == list(range(lo, hi + 1)), bounds
        finally:
            g.close()


def test_number_ranges_with_whole_bounds(model: Model) -> None:
    check = Checker(model)
    values = ["-2", "-1.5", "-1", "-1.0", "-0.25", "0", "0.0", "0.001", "0.5", "1", "1.00", "1.75", "2", "2.5",
              "10", "10.0", "10.5", "11"]
    for (lo, hi), (low_key, high_key) in itertools.product(
            [(0, 1), (-1, 1), (-1, 0), (0, None), (None, 0), (1, 10), (-1, None), (0, 0)],
            [("minimum", "maximum"), ("exclusiveMinimum", "maximum"), ("minimum", "exclusiveMaximum"),
             ("exclusiveMinimum", "exclusiveMaximum")]):
        if lo == hi and "exclusive" in low_key + high_key:
            continue
        g = Grammar.for_model(model.ptr, schema_grammar({"type": "number", **_bounds(lo, hi, low_key, high_key)}))
        try:
            for text in values:
                x = float(text)
                inside = ((lo is None or x > lo or (x == lo and low_key == "minimum"))
                          and (hi is None or x < hi or (x == hi and high_key == "maximum")))
                assert check.takes(g, text) == inside, (lo, hi, low_key, high_key, text)
        finally:
            g.close()


def test_bounds_inside_objects_arrays_and_type_lists(model: Model) -> None:
    check = Checker(model)
    schema = {"type": "object", "properties": {
        "month": {"type": "integer", "minimum": 1, "maximum": 12},
        "scores": {"type": "array", "items": {"$ref": "#/$defs/Score"}, "maxItems": 3},
        "maybe": {"type": ["integer", "null"], "minimum": 0}},
        "required": ["month", "scores", "maybe"], "additionalProperties": False,
        "$defs": {"Score": {"type": "number", "minimum": 0, "maximum": 1}}}
    g = Grammar.for_model(model.ptr, schema_grammar(schema))
    try:
        assert check.takes(g, '{"month": 12, "scores": [0.5, 1], "maybe": null}')
        assert check.takes(g, '{"month": 1, "scores": [], "maybe": 3}')
        assert not check.takes(g, '{"month": 13, "scores": [], "maybe": 3}')
        assert not check.takes(g, '{"month": 1, "scores": [1.5], "maybe": 3}')
        assert not check.takes(g, '{"month": 1, "scores": [], "maybe": -3}')
    finally:
        g.close()


@pytest.mark.parametrize(("schema", "message"), [
    ({"type": "integer", "minimum": 5, "maximum": 2}, "'minimum' and the other bounds .* leave no integer"),
    ({"type": "integer", "exclusiveMinimum": 1, "exclusiveMaximum": 2}, "leave no integer"),
    ({"type": "number", "exclusiveMinimum": 1, "maximum": 1}, "leave no number"),
    ({"type": "number", "minimum": 0.5}, "bound 0.5 has a fraction"),
    ({"type": "integer", "minimum": "1"}, "'minimum' must be a number"),
    ({"minimum": 0}, "'minimum' is enforced only with"),
    ({"anyOf": [{"type": "integer"}], "maximum": 3}, "'maximum' sits beside"),
    ({"enum": [1, 5], "maximum": 3}, "'enum' has 5, outside its own bounds"),
])
def test_bounds_that_cannot_hold_are_refused(schema: dict[str, Any], message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        schema_grammar(schema)


def test_bounds_on_other_types_and_on_values_are_kept() -> None:
    assert "root ::=" in schema_grammar({"type": "string", "minimum": 3})  # JSON Schema ignores it on a string
    assert "root ::=" in schema_grammar({"enum": [1, 2, "x"], "maximum": 3})
    assert "root ::=" in schema_grammar({"type": "integer", "minimum": -10**40, "maximum": 10**40})
