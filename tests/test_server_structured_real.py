"""The structured-output and tool flows of ``test_server_structured`` on the real Qwen2.5-Coder pair (its own chat
template and FIM tokens), through the real server and the official ``openai`` client: a schema reply parsed into a
pydantic model, and a tool round trip, the same in ar and in sd."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from engine import Engine, EngineConfig
from engine.models.offline import OfflinePair
from engine.server import LocalServer
from tests.server_helpers import client, serve
from tests.test_server_structured import WEATHER

pytestmark = [pytest.mark.realmodels, pytest.mark.timeout(900)]


class City(BaseModel):
    name: str
    country: str


@pytest.fixture(scope="module")
def server(real_pair: OfflinePair) -> Iterator[LocalServer]:
    cfg = EngineConfig(str(real_pair.target), str(real_pair.draft), n_ctx=2048, threads=1, draft_threads=1)
    with Engine(cfg) as eng, serve(eng) as srv:
        yield srv


def test_real_pair_schema_and_tool_round_trip(server: LocalServer) -> None:
    oai = client(server)
    ask: Any = [{"role": "user", "content": "Which city is the capital of France?"}]
    parsed = [oai.chat.completions.parse(model=server.model_id, messages=ask, response_format=City, temperature=0,
                                         max_tokens=40, extra_body={"mode": mode}) for mode in ("ar", "sd")]
    cities = [p.choices[0].message.parsed for p in parsed]
    assert cities[0] == cities[1] and cities[0] is not None and cities[0].name == "Paris"
    weather: Any = [{"role": "user", "content": "What is the weather in Oslo?"}]
    # required: the grammar writes the template's <tool_call> markup (under auto this 1.5B model answers with a
    # fenced JSON block instead, which comes back as text)
    first = oai.chat.completions.create(model=server.model_id, messages=weather, tools=[WEATHER], temperature=0,
                                        max_tokens=60, tool_choice="required", extra_body={"mode": "sd"})
    call = (first.choices[0].message.tool_calls or [])[0]
    assert first.choices[0].finish_reason == "tool_calls" and call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments)["city"] == "Oslo"  # type: ignore[union-attr]
    history: Any = [*weather, first.choices[0].message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": "12C, light rain"}]
    final = oai.chat.completions.create(model=server.model_id, messages=history, tools=[WEATHER], temperature=0,
                                        max_tokens=40, tool_choice="none", extra_body={"mode": "sd"})
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls  # what it says is the model's
