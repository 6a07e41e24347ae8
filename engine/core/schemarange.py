"""JSON Schema bounds (``minimum``, ``maximum`` and their exclusive forms) on numbers, written into the grammar."""

from __future__ import annotations

import json
import math
from typing import Any

from llama_cpp.llama_grammar import RESERVED_NAMES, SchemaConverter

from .schemabounds import SchemaError

BOUNDS = ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum")
NUMERIC = ("integer", "number")
UNBOUNDED_DIGITS = 16  # digits of an integer part with no upper bound: the converter's own integral-part allows 16
FRACTION_DIGITS = 16  # digits after a bounded number's point: the converter's own decimal-part allows 16
_ELSEWHERE = ("$ref", "anyOf", "oneOf", "allOf")  # the converter takes these before a node's type

Interval = tuple[int | None, bool, int | None, bool]  # low, low exclusive, high, high exclusive; None: unbounded


def check_bounds(node: dict[str, Any], where: str) -> None:
    """Refuse bounds the grammar cannot enforce on ``node`` (beside a ``$ref`` or alternatives, on a node of no
    type, a fraction on a ``number``) and bounds that no number satisfies."""
    present = [key for key in BOUNDS if key in node]
    if not present:
        return
    first = f"'{present[0]}'"
    types = node.get("type")
    types = types if isinstance(types, list) else [types]
    if any(key in node for key in _ELSEWHERE):
        raise SchemaError(first, where, "sits beside '$ref' or alternatives; put it on the schema it bounds")
    values = node["enum"] if isinstance(node.get("enum"), list) else [node["const"]] if "const" in node else None
    if values is None and not any(t in NUMERIC or t is None for t in types):
        return  # bounds on a string, an object, ...: JSON Schema ignores them
    if values is None and None in types:
        raise SchemaError(first, where, "is enforced only with \"type\": \"integer\" or \"number\" beside it")
    if values is not None:  # the values decide; bounds only refuse those outside them
        for value in values:
            if isinstance(value, int | float) and not isinstance(value, bool) and not _within(value, node, where):
                raise SchemaError("'enum'" if "enum" in node else "'const'", where,
                                  f"has {json.dumps(value)}, outside its own bounds ({_show(node)})")
        return
    for integer in {t == "integer" for t in types if t in NUMERIC}:
        low, low_ex, high, high_ex = interval(node, integer, where)
        if low is not None and high is not None and (low > high or (low == high and (low_ex or high_ex))):
            raise SchemaError(first, where, f"and the other bounds ({_show(node)}) leave no "
                              f"{'integer' if integer else 'number'} between them")


def interval(node: dict[str, Any], integer: bool, where: str = "") -> Interval:
    """``node``'s tightest bounds as whole numbers: an integer's rounded inwards to inclusive ones, a number's kept
    exclusive or not (a fraction is refused)."""
    lows, highs = _bounds(node, where)
    low = max(lows, key=lambda b: b) if lows else None  # at a tie the exclusive bound is the tighter
    high = min(highs, key=lambda b: (b[0], not b[1])) if highs else None
    if integer:  # an integer bound is inclusive: the first whole number inside
        lo = None if low is None else math.floor(low[0]) + 1 if low[1] else math.ceil(low[0])
        hi = None if high is None else math.ceil(high[0]) - 1 if high[1] else math.floor(high[0])
        return lo, False, hi, False
    for bound in (low, high):
        if bound is not None and bound[0] != int(bound[0]):
            raise SchemaError(f"bound {json.dumps(bound[0])}", where, "has a fraction: a \"number\" is bounded by "
                              "the grammar only at whole numbers (or use \"integer\")")
    return (None if low is None else int(low[0]), bool(low and low[1]),
            None if high is None else int(high[0]), bool(high and high[1]))


def range_rule(bounds: Interval, fraction: bool) -> str:
    """GBNF for the numbers within ``bounds``, written without an exponent: whole ones (``fraction`` false) or
    with up to :data:`FRACTION_DIGITS` digits after the point."""
    low, low_ex, high, high_ex = bounds
    alts: list[str] = []
    if high is None or high > 0 or (high == 0 and not high_ex):  # zero and above
        start = (low, low_ex) if low is not None and low >= 0 else (0, False)
        alts += _pieces(*start, high, high_ex, fraction)
    if low is None or low < 0:  # below zero: a minus and the magnitude, whose bounds are the negated, swapped ones
        start = (-high, high_ex) if high is not None and high <= 0 else (0, False)
        negative = _pieces(*start, None if low is None else -low, low_ex, fraction)
        if negative:
            alts.append(f'"-" ({" | ".join(negative)})')
    return f"({' | '.join(alts)}) space"


def _pieces(low: int, low_ex: bool, high: int | None, high_ex: bool, fraction: bool) -> list[str]:
    """The magnitudes from ``low`` (0 or more) to ``high``: the integer parts whose every fraction is inside, and
    at each whole bound the fractions that are (none past an inclusive high, all but .0 past an exclusive low)."""
    if high == low:
        return [] if low_ex or high_ex else [_digits(low, low) + _fraction("0", fraction)]
    out = []
    if low_ex:
        out.append(_digits(low, low) + _fraction("nonzero", fraction))
    first = low + 1 if low_ex else low
    if high is None or first <= high - 1:
        out.append(_digits(first, None if high is None else high - 1) + _fraction("any", fraction))
    if high is not None and not high_ex:
        out.append(_digits(high, high) + _fraction("0", fraction))
    return out


def _fraction(kind: str, fraction: bool) -> str:
    if not fraction:  # an integer's bounds are inclusive (see interval): no piece of it needs a fraction
        return ""
    return {"any": f' ("." [0-9]{{1,{FRACTION_DIGITS}}})?', "0": f' ("." "0"{{1,{FRACTION_DIGITS}}})?',
            "nonzero": f' "." [0-9]{{0,{FRACTION_DIGITS - 1}}} [1-9]'}[kind]


def _digits(low: int, high: int | None) -> str:
    """The whole numbers from ``low`` to ``high`` (``None``: up to :data:`UNBOUNDED_DIGITS` digits), one
    alternative per length, written without leading zeros."""
    top = high if high is not None else 10 ** max(len(str(low)), UNBOUNDED_DIGITS) - 1
    alts = []
    for n in range(len(str(low)), len(str(top)) + 1):
        lo, hi = max(low, 10 ** (n - 1) if n > 1 else 0), min(top, 10 ** n - 1)
        alts.append(_same_length(str(lo), str(hi)))
    return alts[0] if len(alts) == 1 else f"({' | '.join(alts)})"


def _same_length(x: str, y: str) -> str:
    """The digit strings from ``x`` to ``y``, both of one length: their common first digit and the rest, or
    ``x``'s first digit and what may follow it, the digits between with any tail, and ``y``'s likewise."""
    if not x:
        return ""
    n = len(x) - 1
    if x[0] == y[0]:
        return _join(f'"{x[0]}"', _same_length(x[1:], y[1:]))
    if x[1:] == "0" * n and y[1:] == "9" * n:
        return _join(f"[{x[0]}-{y[0]}]", _any(n))
    alts = [_join(f'"{x[0]}"', _same_length(x[1:], "9" * n))]
    if int(x[0]) + 1 <= int(y[0]) - 1:
        alts.append(_join(f"[{int(x[0]) + 1}-{int(y[0]) - 1}]", _any(n)))
    alts.append(_join(f'"{y[0]}"', _same_length("0" * n, y[1:])))
    return f"({' | '.join(alts)})"


def _any(n: int) -> str:
    return "" if n == 0 else "[0-9]" if n == 1 else f"[0-9]{{{n}}}"


def _join(*parts: str) -> str:
    return " ".join(p for p in parts if p)


def _bounds(node: dict[str, Any], where: str) -> tuple[list[tuple[float, bool]], list[tuple[float, bool]]]:
    """``node``'s lower and upper bounds, each a value and whether it is exclusive."""
    lows: list[tuple[float, bool]] = []
    highs: list[tuple[float, bool]] = []
    for key in BOUNDS:
        value = node.get(key)
        if value is None or (isinstance(value, bool) and key.startswith("exclusive")):
            continue  # draft 4's boolean exclusiveMinimum modifies minimum, read with it
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise SchemaError(f"'{key}'", where, f"must be a number, not {json.dumps(value)[:40]}")
        exclusive = key.startswith("exclusive") or node.get(f"exclusive{key.title()}") is True
        (lows if key.endswith("inimum") else highs).append((value, exclusive))
    return lows, highs


def _within(value: float, node: dict[str, Any], where: str) -> bool:
    lows, highs = _bounds(node, where)
    return (all(value > low or (value == low and not ex) for low, ex in lows)
            and all(value < high or (value == high and not ex) for high, ex in highs))


def _show(node: dict[str, Any]) -> str:
    return ", ".join(f"{key} {json.dumps(node[key])}" for key in BOUNDS if key in node)


_Converter: Any = SchemaConverter  # unannotated upstream: typed here as Any, its methods with it


class RangeConverter(_Converter):  # type: ignore[misc]
    """llama.cpp's converter, with a bounded integer or number written by :func:`range_rule`."""

    def visit(self, schema: Any, name: str) -> Any:
        if not isinstance(schema, dict) or not any(k in schema for k in BOUNDS) or any(
                k in schema for k in (*_ELSEWHERE, "const", "enum")):
            return super().visit(schema, name)
        kind = schema.get("type")
        rule_name = name + "-" if name in RESERVED_NAMES else name or "root"
        if isinstance(kind, list):  # the converter's union of bare types would drop the bounds
            alts = [{**schema, "type": t} if t in NUMERIC else {"type": t} for t in kind]
            return self._add_rule(rule_name, self._generate_union_rule(name, alts))
        if kind in NUMERIC:
            return self._add_rule(rule_name, range_rule(interval(schema, kind == "integer"), kind == "number"))
        return super().visit(schema, name)


def schema_to_gbnf(text: str) -> str:
    """GBNF for the JSON Schema ``text``, as llama-cpp-python's ``json_schema_to_gbnf`` builds it, bounds kept."""
    converter: Any = RangeConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    converter.visit(converter.resolve_refs(json.loads(text), "stdin"), "")
    return str(converter.format_grammar())
