"""``/v1/responses`` streamed (the Responses API's events, through the official client's raw stream and its strict
``responses.stream`` helper, and openai-agents' ``Runner.run_streamed``), and the cached prompt tokens in usage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from engine import Engine, EngineConfig
from engine.core.options import PREFILL_GRID
from engine.server import LocalServer
from tests.server_helpers import client, module_client, module_server, serve, tools_engine
from tests.test_server_thinking import THINKING_TEMPLATE, _thinking_vocab
from tests.tiny_models import write_model

pytestmark = pytest.mark.timeout(300)

TOOL: Any = {"type": "function", "name": "get_weather", "strict": True, "parameters": {
    "type": "object", "properties": {"city": {"type": "string", "maxLength": 12}}, "required": ["city"],
    "additionalProperties": False}}
THINKING_BUDGET = 6


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with tools_engine(tmp_path_factory.mktemp("responses-pair")) as eng:
        yield eng


server = module_server()
oai = module_client()


def _events(oai: openai.OpenAI, model: str, **kw: Any) -> list[Any]:
    events = list(oai.responses.create(model=model, stream=True, temperature=0, **kw))
    assert [e.sequence_number for e in events] == list(range(1, len(events) + 1))
    assert events[0].type == "response.created" and events[-1].type in ("response.completed",
                                                                        "response.incomplete")
    assert len({e.response.id for e in events if e.type.startswith("response.") and hasattr(e, "response")}) == 1
    return events


def test_streamed_text_is_the_whole_reply(server: LocalServer, oai: openai.OpenAI) -> None:
    whole = oai.responses.create(model=server.model_id, input="Say hi", max_output_tokens=12, temperature=0)
    for mode in ("ar", "ssd"):
        events = _events(oai, server.model_id, input="Say hi", max_output_tokens=12, extra_body={"mode": mode})
        kinds = [e.type for e in events]
        assert kinds[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                             "response.content_part.added"]
        assert kinds[-4:-1] == ["response.output_text.done", "response.content_part.done",
                                "response.output_item.done"]
        text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
        assert text == whole.output_text and text
        final = events[-1].response
        assert final.output_text == text and final.usage is not None and final.usage.output_tokens > 0
        assert final.status == ("incomplete" if events[-1].type == "response.incomplete" else "completed")
    with oai.responses.stream(model=server.model_id, input="Say hi", max_output_tokens=12, temperature=0) as s:
        seen = list(s)  # the helper checks each event against the items before it
    deltas = [e.delta for e in seen if e.type == "response.output_text.delta"]
    end: Any = seen[-1]  # cut at max_output_tokens: incomplete, as OpenAI ends such a stream
    assert end.type in ("response.completed", "response.incomplete")
    assert "".join(deltas) == end.response.output_text == whole.output_text


def test_a_streamed_call_has_its_argument_events(server: LocalServer, oai: openai.OpenAI) -> None:
    kw: Any = {"input": "Weather in Oslo?", "tools": [TOOL], "tool_choice": "required", "max_output_tokens": 60}
    whole = oai.responses.create(model=server.model_id, temperature=0, **kw)
    want = next(o for o in whole.output if o.type == "function_call")
    events = _events(oai, server.model_id, **kw)
    added = [e.item for e in events if e.type == "response.output_item.added" and e.item.type == "function_call"]
    assert added and added[0].name == "get_weather" and added[0].status == "in_progress"
    args = "".join(e.delta for e in events if e.type == "response.function_call_arguments.delta")
    done = [e for e in events if e.type == "response.function_call_arguments.done"]
    assert args == done[0].arguments == want.arguments and "city" in json.loads(args)
    final = [o for o in events[-1].response.output if o.type == "function_call"]
    assert final[0].arguments == args and final[0].call_id.startswith("call_")
    with oai.responses.stream(model=server.model_id, temperature=0, **kw) as s:
        calls = [o for o in s.get_final_response().output if o.type == "function_call"]
        assert calls[0].arguments == want.arguments


def test_cached_prompt_tokens_in_usage(server: LocalServer, oai: openai.OpenAI) -> None:
    system = "You are a terse assistant who answers in one word. " * 8
    ask: Any = [{"role": "system", "content": system}, {"role": "user", "content": "Hi"}]
    oai.chat.completions.create(model=server.model_id, messages=[{"role": "user", "content": "other"}], max_tokens=2)
    first = oai.chat.completions.create(model=server.model_id, messages=ask, max_tokens=2, temperature=0)
    again = oai.chat.completions.create(model=server.model_id, messages=ask, max_tokens=2, temperature=0)
    assert first.usage and again.usage and first.usage.prompt_tokens_details and again.usage.prompt_tokens_details
    cold, warm = first.usage.prompt_tokens_details.cached_tokens, again.usage.prompt_tokens_details.cached_tokens
    assert cold is not None and warm is not None and cold < warm < again.usage.prompt_tokens
    assert warm >= again.usage.prompt_tokens - PREFILL_GRID  # the prompt's whole grid chunks
    reply = oai.responses.create(model=server.model_id, instructions=system, input="Hi", max_output_tokens=2)
    assert reply.usage and reply.usage.input_tokens_details.cached_tokens >= warm - PREFILL_GRID
    streamed = httpx.post(f"{server.url}/chat/completions", timeout=60, json={
        "model": server.model_id, "messages": ask, "max_tokens": 2, "stream": True,
        "stream_options": {"include_usage": True}}).text
    usage = json.loads(streamed.split("data: ")[-2])["usage"]
    assert usage["prompt_tokens_details"]["cached_tokens"] >= warm - PREFILL_GRID


def test_streamed_reasoning(tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("thinking-responses")
    target = write_model(folder / "t.gguf", vocab=_thinking_vocab(), seed=3, n_layer=2, logit_scale=4.0,
                         chat_template=THINKING_TEMPLATE)
    with Engine(EngineConfig(str(target), None, n_ctx=1024)) as eng, \
            serve(eng, thinking_budget=THINKING_BUDGET) as srv:
        oai = client(srv)
        whole = oai.responses.create(model=srv.model_id, input="Think, then answer.", max_output_tokens=24,
                                     temperature=0)
        events = _events(oai, srv.model_id, input="Think, then answer.", max_output_tokens=24)
        thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
        kinds = [e.type for e in events]
        assert thought.strip() and kinds.index("response.reasoning_text.done") < kinds.index(
            "response.output_text.delta")  # the thinking's item closes before the answer's opens
        reasoning = next(o for o in whole.output if o.type == "reasoning")
        assert thought.strip() == (reasoning.content or [])[0].text.strip()
        final = events[-1].response.output
        assert final[0].type == "reasoning" and (final[0].content or [])[0].text == thought
        assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == whole.output_text


class Month(BaseModel):
    month: int = Field(ge=1, le=12)


def test_openai_agents_run_streamed(server: LocalServer) -> None:
    """Its default streamed run, with a typed output (the grammar ends the reply: a gibberish model would be cut
    at max_tokens, which the agents SDK raises on, as it does against OpenAI)."""
    agents = pytest.importorskip("agents")
    agents.set_tracing_disabled(True)  # no trace export: nothing leaves the machine

    async def run() -> tuple[str, Any]:
        async with openai.AsyncOpenAI(base_url=server.url, api_key="unused", max_retries=0) as api:
            model = agents.OpenAIResponsesModel(model=server.model_id, openai_client=api)
            agent = agents.Agent(name="a", instructions="Pick a month.", model=model, output_type=Month,
                                 model_settings=agents.ModelSettings(temperature=0, max_tokens=40))
            result = agents.Runner.run_streamed(agent, "Which month?")
            deltas = [e.data.delta async for e in result.stream_events()
                      if e.type == "raw_response_event" and e.data.type == "response.output_text.delta"]
            return "".join(deltas), result.final_output

    text, final = asyncio.run(run())
    assert isinstance(final, Month) and Month.model_validate_json(text) == final
