"""Tool requests OpenAI refuses are refused here too (400 naming the field), and tool_choice auto's lazy grammar:
free text until the family's call marker, then a call that follows the tool's schema."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine import Engine, EngineConfig
from engine.chat.families import hermes
from engine.core.grammar import Grammar
from engine.server import LocalServer
from tests.server_helpers import chat_body, error_of, serve
from tests.tool_models import write_tools_model

WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}


@pytest.fixture(scope="module")
def tool_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    folder = tmp_path_factory.mktemp("tools")
    path, draft = write_tools_model(folder / "t.gguf"), write_tools_model(folder / "d.gguf", noise=0.05)
    with Engine(EngineConfig(str(path), str(draft), n_ctx=1024)) as eng, serve(eng) as server:
        yield server


@pytest.mark.parametrize(("extra", "param"), [
    ({"tools": []}, "tools"),
    ({"tool_choice": "required"}, "tool_choice"),
    ({"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}, "tool_choice"),
    ({"tools": [WEATHER, WEATHER]}, "tools"),
])
def test_tool_requests_openai_refuses(tool_server: LocalServer, extra: dict[str, object], param: str) -> None:
    r = httpx.post(f"{tool_server.url}/chat/completions", json=chat_body(tool_server.model_id, **extra), timeout=60)
    assert error_of(r, 400)["param"] == param


@pytest.mark.parametrize("mode", ["sd", "ssd", "lookup", "auto"])
def test_auto_tools_reply_is_the_same_in_every_mode(tool_server: LocalServer, mode: str) -> None:
    def reply(m: str) -> object:
        r = httpx.post(f"{tool_server.url}/chat/completions", json=chat_body(
            tool_server.model_id, tools=[WEATHER], temperature=0, max_tokens=24, mode=m), timeout=60)
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["message"]

    assert reply(mode) == reply("ar")


def test_lazy_grammar_is_free_until_the_marker(tmp_path: Path) -> None:
    from engine.core.backend import Model

    call = 'Sure. <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    with Model(str(write_tools_model(tmp_path / "t.gguf")), vocab_only=True) as model:
        grammar = Grammar.for_model(model.ptr, hermes.call_grammar([WEATHER], None), hermes.FAMILY.call_open)
        ids = list(range(model.n_vocab))
        assert grammar.allowed(ids).all()  # nothing written yet: every token may come
        tokens = model.tokenize(call, add_special=False)
        opened = len(model.tokenize("Sure. <tool_call>", add_special=False))
        for i, tok in enumerate(tokens):
            if i == opened + 1:  # inside the call: the grammar holds the reply to the call's shape
                assert 0 < grammar.allowed(ids).sum() < model.n_vocab
            assert grammar.allows(tok), (i, model.token_bytes(tok))
            grammar.accept(tok)
        assert grammar.allows(model.eos)  # the call is complete: the reply may end
