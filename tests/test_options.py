"""The settings declarations (engine.options): one bound and one default per setting, read by validation."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import pytest

from engine import OPTIONS, EngineConfig, GenerationParams, Option, ParameterError, SamplingParams


def _declared(cls: type) -> list[str]:
    return [f.name for f in fields(cls) if f.name in OPTIONS]


@pytest.mark.parametrize("cls", [EngineConfig, GenerationParams, SamplingParams])
def test_dataclass_defaults_are_the_declared_defaults(cls: type) -> None:
    instance = cls("t.gguf") if cls is EngineConfig else cls()
    for name in _declared(cls):
        assert getattr(instance, name) == OPTIONS[name].default, name


def test_every_declaration_belongs_to_one_parameter_class() -> None:
    owners = [*_declared(EngineConfig), *_declared(GenerationParams), *_declared(SamplingParams)]
    assert sorted(owners) == sorted(OPTIONS)


def _build(name: str, value: Any) -> object:
    if name in _declared(EngineConfig):
        return EngineConfig("t.gguf", **{name: value})
    if name in _declared(SamplingParams):
        return SamplingParams(**{name: value})
    return GenerationParams(**{name: value})


def _outside(o: Option[Any]) -> list[Any]:
    if o.choices:
        return ["no-such-" + str(o.choices[0])]
    if o.minimum is None or o.maximum is None:
        return ["yes"]  # a bool setting given a word
    step = 1 if o.kind is int else 0.5
    low = o.minimum if o.above_minimum else o.minimum - step
    high = o.maximum if o.below_maximum else o.maximum + step
    return [low, high]


def _inside(o: Option[Any]) -> list[Any]:
    if o.choices:
        return list(o.choices)
    if o.minimum is None or o.maximum is None:
        return [True, False]
    lo = o.minimum if not o.above_minimum else o.minimum + (1 if o.kind is int else 0.01)
    hi = o.maximum if not o.below_maximum else o.maximum - (1 if o.kind is int else 0.01)
    return [lo, hi]


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_validation_follows_the_declared_bounds(name: str) -> None:
    o = OPTIONS[name]
    for value in _inside(o):
        _build(name, value)
    for value in _outside(o):
        with pytest.raises(ParameterError, match=o.noun.split()[0]):
            _build(name, value)


def test_messages_name_the_setting_and_its_bounds() -> None:
    assert OPTIONS["k"].problem(0) == "draft length K must be between 1 and 16, got 0"
    assert OPTIONS["top_p"].problem(1.5) == "top-p must be above 0 and at most 1, got 1.5"
    assert OPTIONS["mode"].problem("fast") == "mode must be one of ar, sd, ssd, lookup, auto, got 'fast'"
    assert OPTIONS["n_ctx"].problem(4096) is None
    assert "whole number" in str(OPTIONS["k"].problem(2.5))
    assert OPTIONS["temperature"].problem(1) is None  # an int is a valid float


def test_parse_reads_typed_text() -> None:
    assert OPTIONS["k"].parse(" 7 ") == 7
    assert OPTIONS["temperature"].parse("0.25") == 0.25
    assert OPTIONS["adaptive"].parse("false") is False
    with pytest.raises(ParameterError, match="enter a whole number"):
        OPTIONS["k"].parse("seven")


def test_chat_defaults_are_valid() -> None:
    for o in OPTIONS.values():
        assert o.problem(o.app_default) is None, o.name


@pytest.mark.parametrize("name", ["temperature", "top_p", "min_p"])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_sampling_number_that_is_not_finite_is_refused(name: str, value: float) -> None:
    with pytest.raises(ParameterError, match="finite"):
        SamplingParams(**{name: value})
    assert "finite" in (OPTIONS[name].problem(OPTIONS[name].parse(str(value))) or "")
