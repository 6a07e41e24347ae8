"""Constraints on real tiny vocabularies: the grammar's answers, the constrained argmax / best ids / distribution
against a brute-force mask of the whole row, the penalties' arithmetic, schema refusals."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

from engine.core import constraints
from engine.core.backend import Model
from engine.core.constraints import Constraint
from engine.core.grammar import Grammar, GrammarError
from engine.core.jsonschema import JSON_OBJECT_GRAMMAR, SchemaError, schema_grammar
from engine.core.sampling import SamplingParams, to_dist
from engine.errors import ParameterError
from tests.tiny_models import TinyPair

LETTERS = 'root ::= [a-c]+ "d"'  # the 16-token vocabulary's single letters


@pytest.fixture(scope="module")
def small(tiny: TinyPair) -> Iterator[Model]:
    with Model(tiny.small_target) as m:
        yield m


@pytest.fixture(scope="module")
def spm(tiny: TinyPair) -> Iterator[Model]:
    with Model(tiny.target) as m:
        yield m


def _id(m: Model, ch: str) -> int:
    return next(t for t in range(m.n_vocab) if m.token_text(t) == ch.encode())


def _masked(c: Constraint, row: np.ndarray) -> np.ndarray:
    """The adjusted row with every id the grammar refuses at -inf: what the constraint must act as."""
    eff = c.adjusted(row).astype(np.float32)
    if c.grammar is not None:
        eff = np.where(c.grammar.allowed(np.arange(len(row))), eff, -np.inf).astype(np.float32)
    return eff


def test_grammar_allows_and_refuses(small: Model) -> None:
    g = Grammar.for_model(small.ptr, LETTERS)
    a, d, e = _id(small, "a"), _id(small, "d"), _id(small, "e")
    assert g.allows(a) and not g.allows(d) and not g.allows(e) and not g.allows(small.eos)
    g.accept(a)
    assert g.allows(d)
    twin = g.clone()
    twin.accept(d)
    assert twin.allows(small.eos) and not twin.allows(a)  # complete: only the end
    assert g.allows(a)  # the original did not move
    with pytest.raises(GrammarError):
        g.accept(e)  # refused with an error, not llama.cpp's abort
    with pytest.raises(GrammarError):
        Grammar.for_model(small.ptr, "root ::= (")


@pytest.mark.parametrize("params", [SamplingParams(), SamplingParams(temperature=0.9, top_k=5, top_p=0.9),
                                    SamplingParams(temperature=1.3, top_k=0, min_p=0.02)])
def test_constrained_rows_equal_a_masked_row(small: Model, params: SamplingParams) -> None:
    rng = np.random.default_rng(4)
    c = Constraint(small.n_vocab, {_id(small, "b"): -3.0}, 0.5, 0.7, Grammar.for_model(small.ptr, LETTERS))
    path = [_id(small, ch) for ch in "abcab"]
    for tok in [*path, None]:
        row = rng.normal(0, 3, small.n_vocab).astype(np.float32)
        eff = _masked(c, row)
        assert c.argmax(row) == int(np.argmax(eff))
        if not params.greedy:
            want = to_dist(eff, params).dense(small.n_vocab)
            np.testing.assert_allclose(c.dist(row, params).dense(small.n_vocab), want, atol=1e-12)
        if tok is not None:
            c.accept(tok)
    assert c.counts[_id(small, "a")] == 2


def test_penalties_follow_openai(small: Model) -> None:
    c = Constraint(small.n_vocab, {3: 2.0}, presence=0.5, frequency=0.25, grammar=None)
    for tok in (4, 4, 5):
        c.accept(tok)
    row = np.zeros(small.n_vocab, dtype=np.float32)
    eff = c.adjusted(row)
    assert eff[3] == 2.0 and eff[4] == pytest.approx(-1.0) and eff[5] == pytest.approx(-0.75) and eff[6] == 0.0
    assert not row.any()  # the row itself is never written


def test_the_head_and_the_whole_vocabulary_agree(spm: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first allowed ids found in a widening head of the order are those of the whole vocabulary's mask."""
    rng = np.random.default_rng(7)
    c = Constraint(spm.n_vocab, {}, 0.0, 0.0, Grammar.for_model(spm.ptr, JSON_OBJECT_GRAMMAR))
    rows = [rng.normal(0, 2, spm.n_vocab).astype(np.float32) for _ in range(3)]
    fast = [c.ranked(r, k)[0].tolist() for r in rows for k in (1, 5, 40)]
    monkeypatch.setattr(constraints, "_HEAD", spm.n_vocab)
    assert fast == [c.ranked(r, k)[0].tolist() for r in rows for k in (1, 5, 40)]
    assert all(spm.token_text(ids[0]) == b"<0x7B>" for ids in fast)  # a JSON object opens with "{"


def test_bias_and_penalty_bounds(small: Model) -> None:
    with pytest.raises(ParameterError, match="token id 99999"):
        Constraint(small.n_vocab, {99999: 1.0}, 0.0, 0.0, None)
    with pytest.raises(ParameterError, match="between -100 and 100"):
        Constraint(small.n_vocab, {3: -101.0}, 0.0, 0.0, None)
    with pytest.raises(ParameterError, match="presence_penalty"):
        Constraint(small.n_vocab, {}, 2.5, 0.0, None)


@pytest.mark.parametrize(("schema", "construct"), [
    ({"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 2}}}, "'multipleOf' at properties.age"),
    ({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, "'uniqueItems'"),
    ({"type": "object", "properties": {"mail": {"type": "string", "format": "email"}}}, "format 'email'"),
    ({"not": {"type": "string"}}, "'not'"),
    ({"$ref": "https://example.com/s.json"}, "$ref"),
    ({"type": "decimal"}, "type 'decimal'"),
    ([1, 2], "root"),
])
def test_schemas_the_grammar_cannot_express_are_named(schema: object, construct: str) -> None:
    with pytest.raises(SchemaError, match=construct.replace("[", r"\[").replace("$", r"\$")):
        schema_grammar(schema)


def test_a_pydantic_style_schema_becomes_a_grammar(small: Model) -> None:
    schema = {"$defs": {"Colour": {"enum": ["red", "blue"], "type": "string"}},
              "properties": {"name": {"type": "string", "maxLength": 8}, "colour": {"$ref": "#/$defs/Colour"},
                             "tags": {"type": "array", "items": {"type": "string"}},
                             "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}},
              "required": ["name", "colour", "tags", "note"], "additionalProperties": False, "type": "object"}
    gbnf = schema_grammar(json.loads(json.dumps(schema)))
    Grammar.for_model(small.ptr, gbnf).close()  # llama.cpp parses it
    assert '"\\"red\\""' in gbnf or "red" in gbnf


def test_json_object_grammar_parses(small: Model) -> None:
    g = Grammar.for_model(small.ptr, JSON_OBJECT_GRAMMAR)
    assert not g.allowed(np.arange(small.n_vocab)).any()  # letters only: nothing can open an object


def test_json_strings_stay_valid_utf8(spm: Model) -> None:
    """llama.cpp's grammar decoder would take a 0xF8 lead byte as the start of a character; the JSON grammars
    here do not, so a reply's strings always decode."""
    byte = {spm.token_text(t): t for t in range(spm.n_vocab)}
    g = Grammar.for_model(spm.ptr, JSON_OBJECT_GRAMMAR)
    for b in b'{"':
        g.accept(byte[f"<0x{b:02X}>".encode()])
    assert g.allows(byte[b"<0xE3>"]) and g.allows(byte[b"<0xF0>"])
    assert not g.allows(byte[b"<0xF8>"]) and not g.allows(byte[b"<0x0A>"])  # nor a raw newline
