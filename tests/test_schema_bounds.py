"""Hostile JSON Schemas are refused before a grammar is built: each a fast 400 naming the keyword and the limit,
through ``serve``'s shape (the engine in a process of its own), which stays up with the same engine after."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine import EngineConfig
from engine.core import jsonschema, schemabounds
from engine.core.jsonschema import SchemaError, schema_grammar
from engine.process import EngineProcess
from engine.server import LocalServer
from tests.server_helpers import error_of, serve
from tests.tool_models import write_tools_model

pytestmark = pytest.mark.timeout(180)

FAST_S = 5.0  # a refusal's bound: the schema is checked, not built (the took 66 s and 87 s, or killed)
ASK: Any = [{"role": "user", "content": "Hello"}]
INTS = {"type": "integer"}
HOSTILE: list[tuple[dict[str, Any], str]] = [  # (schema, what the refusal names)
    ({"type": "array", "items": INTS, "minItems": 1000000000}, "'minItems' is 1000000000; the most this server"),
    ({"type": "array", "items": INTS, "maxItems": 20000}, "'maxItems' is 20000; the most this server takes is 1000"),
    ({"enum": [f"v{i}" for i in range(100_000)]}, "'enum' has 100000 values; the most this server takes is 1000"),
    ({"type": "string", "minLength": 5, "maxLength": 2}, "'minLength' is 5, more than its 'maxLength' 2"),
    ({"type": "array", "items": INTS, "minItems": -1}, "'minItems' is -1; it cannot be negative"),
    ({"type": "string", "pattern": "^a{1000000000}$"}, "'pattern' has the quantifier '{1000000000}': more than 1000"),
]


def _tool(parameters: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": "fill", "parameters": parameters}}


def _object(schema: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": schema}, "required": ["x"]}


@pytest.mark.parametrize(("schema", "named"), HOSTILE)
def test_a_hostile_schema_is_refused_naming_its_keyword_and_limit(schema: dict[str, Any], named: str) -> None:
    start = time.monotonic()
    with pytest.raises(SchemaError, match=named.replace("{", r"\{").replace("(", r"\(")):
        schema_grammar(schema)
    assert time.monotonic() - start < FAST_S


@pytest.mark.parametrize("schema", [
    {"type": "array", "items": INTS, "minItems": 1.5}, {"type": "string", "maxLength": "5"},
    {"type": "string", "maxLength": True}, {"anyOf": [INTS] * 300},
    {"type": "object", "properties": {f"p{i}": INTS for i in range(600)}}, {"type": "string", "pattern": "a" * 2000},
])
def test_counts_that_are_not_counts_and_too_many_alternatives_are_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        schema_grammar(schema)


def test_the_limits_themselves_are_taken() -> None:
    assert "root ::=" in schema_grammar({"type": "array", "items": INTS, "minItems": 2, "maxItems": 1000})
    assert "root ::=" in schema_grammar({"enum": list(range(1000))})
    assert "root ::=" in schema_grammar({"type": "string", "minLength": 1000, "maxLength": 1000})


def test_the_build_runs_under_a_size_budget() -> None:
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string", "minLength": 1000} for i in range(300)}}
    with pytest.raises(SchemaError, match="over 1048576 bytes in all"):
        schema_grammar(wide)
    one = {"type": "object", "properties": {f"p{i}": {"type": "string", "minLength": 1000} for i in range(30)}}
    schema_grammar(one)  # a tenth of it fits, alone...
    with schemabounds.grammar_budget(), pytest.raises(SchemaError, match="in all"):  # ...but not twenty in one budget
        for _ in range(20):
            schema_grammar(one)


def test_a_schema_nested_past_the_limit_is_refused_without_recursing() -> None:
    deep: dict[str, Any] = INTS
    for _ in range(100_000):
        deep = {"type": "array", "items": deep}
    with pytest.raises(SchemaError, match="deeper than 64 levels"):
        schema_grammar(deep)


def test_running_out_of_memory_gives_a_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(_text: str) -> str:
        raise MemoryError

    monkeypatch.setattr(jsonschema, "json_schema_to_gbnf", exhausted)
    with pytest.raises(SchemaError, match="needs more memory") as caught:
        schema_grammar(INTS)
    assert str(caught.value).strip()


def test_group_depth_skips_literals_and_classes() -> None:
    assert schemabounds.group_depth('root ::= ("(" [(] (a (b)?)?)?  # (((') == 3


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EngineProcess, LocalServer]]:
    target = write_tools_model(Path(tmp_path_factory.mktemp("bounds")) / "target.gguf")
    eng = EngineProcess(EngineConfig(str(target), n_ctx=2048, threads=1), auto_restart=True)
    try:
        with serve(eng) as server:
            yield eng, server
    finally:
        eng.close()


def _names(message: str, named: str) -> bool:
    """Whether ``message`` says ``named``, with where it sits (`` at properties.x``) after the keyword."""
    keyword, _, rest = named.partition(" ")
    return keyword in message and rest in message


def _post(server: LocalServer, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{server.url}/chat/completions", timeout=60,
                      json={"model": server.model_id, "messages": ASK, "max_tokens": 4, **body})


@pytest.mark.parametrize(("schema", "named"), HOSTILE)
def test_a_hostile_schema_is_a_fast_400_and_the_engine_stays_up(served: tuple[EngineProcess, LocalServer],
                                                                schema: dict[str, Any], named: str) -> None:
    eng, server = served
    pid = eng.pid
    fmt = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema}}
    start = time.monotonic()
    err = error_of(_post(server, {"response_format": fmt}), 400)
    assert time.monotonic() - start < FAST_S
    assert _names(err["message"], named) and err["param"] == "response_format.json_schema.schema", err
    start = time.monotonic()
    err = error_of(_post(server, {"tools": [_tool(_object(schema))], "tool_choice": "required"}), 400)
    assert time.monotonic() - start < FAST_S
    assert _names(err["message"], named) and err["param"] == "tools", err
    ok = _post(server, {})
    assert ok.status_code == 200, ok.text
    assert ok.json()["choices"][0]["message"]["role"] == "assistant"
    assert eng.pid == pid  # the same engine child answered: none of it reached the engine
