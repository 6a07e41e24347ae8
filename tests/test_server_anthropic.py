"""Anthropic's Messages API (/v1/messages) through a real server, driven by the official ``anthropic`` client: the
same reply as chat for the same turns, tools (tool_use out, tool_result back in), streaming events in Anthropic's
order, thinking blocks from the family's splitter, stop sequences, JSON output, count_tokens, the x-api-key header
and errors in Anthropic's shape (the guards' refusals in front of the routes too)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import openai
import pytest

from engine import Engine, EngineConfig
from engine.server import LocalServer
from tests.server_helpers import client, module_client, module_server, serve, tools_engine
from tests.test_server_thinking import THINKING_TEMPLATE, _thinking_vocab
from tests.tiny_models import write_model

pytestmark = pytest.mark.timeout(240)

KEY = "sesame"
GREEDY: Any = {"temperature": 0, "mode": "ar"}  # this client version has no temperature argument
TOOLS: Any = [{"name": "get_weather", "description": "The weather in a city",
               "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
ASK: Any = [{"role": "user", "content": "Weather in Oslo?"}]
BLOCK_EVENTS = ("content_block_start", "content_block_delta", "content_block_stop")


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with tools_engine(tmp_path_factory.mktemp("anthropic-pair")) as eng:
        yield eng


server = module_server(api_key=KEY)
oai = module_client(KEY)


@pytest.fixture(scope="module")
def claude(server: LocalServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key=KEY, max_retries=0, timeout=60.0)


def test_a_text_reply_is_chats_reply(server: LocalServer, claude: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    msg = claude.messages.create(model=server.model_id, max_tokens=12, system="Be brief.", extra_body=GREEDY,
                                 messages=[{"role": "user", "content": [{"type": "text", "text": "Hello"}]}])
    chat = oai.chat.completions.create(model=server.model_id, max_tokens=12, temperature=0, extra_body={"mode": "ar"},
                                       messages=[{"role": "system", "content": "Be brief."},
                                                 {"role": "user", "content": "Hello"}])
    assert msg.type == "message" and msg.role == "assistant" and msg.id.startswith("msg_")
    assert [b.type for b in msg.content] == ["text"]
    assert msg.content[0].text == chat.choices[0].message.content  # type: ignore[union-attr]
    assert msg.stop_reason == {"length": "max_tokens", "stop": "end_turn"}[chat.choices[0].finish_reason]
    u = msg.usage
    assert chat.usage is not None and u.input_tokens + (u.cache_read_input_tokens or 0) == chat.usage.prompt_tokens
    assert u.output_tokens == chat.usage.completion_tokens


def test_streamed_events_in_anthropics_order(server: LocalServer, claude: anthropic.Anthropic) -> None:
    body: Any = {"model": server.model_id, "max_tokens": 12, "messages": [{"role": "user", "content": "Hello"}],
                 "extra_body": GREEDY}
    whole = claude.messages.create(**body)
    kinds = [ev.type for ev in claude.messages.create(stream=True, **body)]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    middle = kinds[1:-2]
    assert middle[0] == "content_block_start" and middle[-1] == "content_block_stop"
    assert set(middle[1:-1]) == {"content_block_delta"}
    with claude.messages.stream(**body) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == whole.content[0].text == final.content[0].text  # type: ignore[union-attr]
    assert final.stop_reason == whole.stop_reason and final.usage.output_tokens == whole.usage.output_tokens


def test_a_tool_use_and_its_result(server: LocalServer, claude: anthropic.Anthropic, oai: openai.OpenAI) -> None:
    msg = claude.messages.create(model=server.model_id, max_tokens=60, tools=TOOLS, tool_choice={"type": "any"},
                                 messages=ASK, extra_body=GREEDY)
    use = msg.content[-1]
    assert msg.stop_reason == "tool_use" and use.type == "tool_use" and use.name == "get_weather"
    assert isinstance(use.input, dict) and "city" in use.input
    turns: Any = [*ASK, {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in msg.content]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18 C"}]}]
    counted = claude.messages.count_tokens(model=server.model_id, messages=turns, tools=TOOLS)
    call: Any = {"id": use.id, "type": "function", "function": {"name": use.name, "arguments": json.dumps(use.input)}}
    chat = oai.chat.completions.create(
        model=server.model_id, max_tokens=8, temperature=0, extra_body={"mode": "ar"},
        tools=[{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                                 "parameters": TOOLS[0]["input_schema"]}}],
        messages=[*ASK, {"role": "assistant", "content": None, "tool_calls": [call]},
                  {"role": "tool", "tool_call_id": use.id, "content": "18 C"}])
    assert chat.usage is not None and counted.input_tokens == chat.usage.prompt_tokens  # the same prompt as chat's
    answer = claude.messages.create(model=server.model_id, max_tokens=8, tools=TOOLS, messages=turns,
                                    extra_body=GREEDY)
    assert answer.content and answer.stop_reason in ("end_turn", "max_tokens", "tool_use")


def test_a_streamed_named_tool_call(server: LocalServer, claude: anthropic.Anthropic) -> None:
    whole = claude.messages.create(model=server.model_id, max_tokens=60, tools=TOOLS, messages=ASK,
                                   tool_choice={"type": "tool", "name": "get_weather"}, extra_body=GREEDY)
    with claude.messages.stream(model=server.model_id, max_tokens=60, tools=TOOLS, messages=ASK,
                                tool_choice={"type": "tool", "name": "get_weather"}, extra_body=GREEDY) as stream:
        deltas = [ev.delta.type for ev in stream if ev.type == "content_block_delta"]
        final = stream.get_final_message()
    assert "input_json_delta" in deltas and final.stop_reason == "tool_use"
    got = next(b.model_dump() for b in final.content if b.type == "tool_use")
    assert got["input"] == whole.content[-1].model_dump()["input"]


def test_stop_sequences_and_json_output(server: LocalServer, claude: anthropic.Anthropic) -> None:
    free = claude.messages.create(model=server.model_id, max_tokens=16, messages=ASK, extra_body=GREEDY)
    text = free.content[0].text  # type: ignore[union-attr]
    stop = text.strip()[2:4]
    cut = claude.messages.create(model=server.model_id, max_tokens=16, messages=ASK, stop_sequences=[stop],
                                 extra_body=GREEDY)
    assert cut.stop_reason == "stop_sequence" and cut.stop_sequence == stop
    assert stop not in cut.content[0].text and text.startswith(cut.content[0].text)  # type: ignore[union-attr]
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    out = claude.messages.create(model=server.model_id, max_tokens=40, messages=ASK, extra_body=GREEDY,
                                 output_config={"format": {"type": "json_schema", "schema": schema}})
    assert set(json.loads(out.content[0].text)) == {"ok"}  # type: ignore[union-attr]


def test_errors_have_anthropics_shape(server: LocalServer, claude: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        claude.messages.create(model="claude-nope", max_tokens=4, messages=ASK)
    assert missing.value.body == {"type": "error", "error": {"type": "not_found_error", "message": missing.value
                                                            .body["error"]["message"]}}  # type: ignore[index]
    image: Any = [{"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "http://x"}}]}]
    with pytest.raises(anthropic.BadRequestError) as bad:
        claude.messages.create(model=server.model_id, max_tokens=4, messages=image)
    err: Any = bad.value.body
    assert err["type"] == "error" and err["error"]["type"] == "invalid_request_error"
    assert "messages[0].content[0].type" in err["error"]["message"]
    with pytest.raises(anthropic.BadRequestError):
        claude.messages.create(model=server.model_id, max_tokens=4, messages=ASK,
                               tools=[{"type": "web_search_20250305", "name": "web_search"}])
    r = httpx.post(f"{server.url}/messages", headers={"x-api-key": KEY},
                   json={"model": server.model_id, "messages": ASK}, timeout=60)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in r.json()["error"]["message"] and "Traceback" not in r.text


def test_a_refused_key_is_anthropics_authentication_error(server: LocalServer) -> None:
    """The key's check runs before the routes: its 401 on the Messages API's paths is in Anthropic's shape."""
    with anthropic.Anthropic(base_url=server.url.removesuffix("/v1"), api_key="wrong", max_retries=0,
                             timeout=60.0) as bad:
        with pytest.raises(anthropic.AuthenticationError) as refused:
            bad.messages.create(model=server.model_id, max_tokens=4, messages=ASK)
        with pytest.raises(anthropic.AuthenticationError) as counted:
            bad.messages.count_tokens(model=server.model_id, messages=ASK)
    for err in (refused.value, counted.value):
        assert err.status_code == 401 and err.body == {"type": "error", "error": {
            "type": "authentication_error", "message": "the API key is not valid"}}
    none = httpx.post(f"{server.url}/messages", json={}, timeout=60)  # no key at all
    assert none.status_code == 401 and none.json()["error"]["type"] == "authentication_error"
    assert "x-api-key" in none.json()["error"]["message"]
    r = httpx.post(f"{server.url}/chat/completions", json={}, timeout=60)
    assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key"  # OpenAI's shape elsewhere
    other = httpx.post(f"{server.url}/messages", headers={"x-api-key": KEY, "Host": "evil.example"}, json={},
                       timeout=60)
    assert other.status_code == 403 and other.json()["error"]["type"] == "permission_error"  # the Host guard


@pytest.fixture(scope="module")
def thinking(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalServer]:
    folder = tmp_path_factory.mktemp("anthropic-thinking")
    kw: Any = {"vocab": _thinking_vocab(), "seed": 3, "n_layer": 2, "logit_scale": 4.0,
               "chat_template": THINKING_TEMPLATE}
    target, draft = write_model(folder / "t.gguf", **kw), write_model(folder / "d.gguf", noise=0.05, **kw)
    with Engine(EngineConfig(str(target), str(draft), n_ctx=1024)) as eng, serve(eng) as srv:
        yield srv


def test_thinking_blocks_whole_and_streamed(thinking: LocalServer) -> None:
    claude = anthropic.Anthropic(base_url=thinking.url.removesuffix("/v1"), api_key="x", max_retries=0)
    body: Any = {"model": thinking.model_id, "max_tokens": 24, "extra_body": GREEDY,
                 "thinking": {"type": "enabled", "budget_tokens": 6},
                 "messages": [{"role": "user", "content": "Think, then answer."}]}
    chat = client(thinking).chat.completions.create(
        model=thinking.model_id, max_tokens=24, temperature=0, messages=body["messages"],
        extra_body={"mode": "ar", "thinking_budget": 6, "reasoning_effort": "high"})
    want = chat.choices[0].message
    msg = claude.messages.create(**body)
    assert msg.content[0].type == "thinking"
    assert msg.content[0].thinking == (want.model_extra or {})["reasoning_content"]
    assert [b.text for b in msg.content if b.type == "text"] == ([want.content.strip()] if want.content else [])
    with claude.messages.stream(**body) as stream:
        deltas = [ev.delta.type for ev in stream if ev.type == "content_block_delta"]
        final = stream.get_final_message()
    assert deltas[0] == "thinking_delta" and final.content[0].type == "thinking"
    assert final.content[0].thinking == msg.content[0].thinking
