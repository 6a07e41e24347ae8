"""Bounded integers and numbers (pydantic's ``Field(ge=..., le=...)``, zod's ``.int().min().max()``) through the real
server and the official client, on the tiny tools pair: every mode's reply parses, lies in range and is ar's."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from pydantic import BaseModel, Field

from engine import Engine
from engine.server import LocalServer
from tests.server_helpers import module_client, module_server, tools_engine

pytestmark = pytest.mark.timeout(300)

MODES = ["ar", "sd", "ssd", "lookup", "auto"]
ASK: Any = [{"role": "user", "content": "Pick a month and a score."}]
# What zod-to-json-schema writes for z.object({score: z.number().int().min(0).max(100), ratio: z.number().positive()
# .max(1), level: z.number().int().min(-5).max(5).optional()}).strict()
ZOD: Any = {"type": "object", "properties": {
    "score": {"type": "integer", "minimum": 0, "maximum": 100},
    "ratio": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    "level": {"type": "integer", "minimum": -5, "maximum": 5}},
    "required": ["score", "ratio"], "additionalProperties": False, "$schema": "http://json-schema.org/draft-07/schema#"}


class Pick(BaseModel):
    month: int = Field(ge=1, le=12)
    day: int = Field(gt=0, lt=32)
    offset: int | None = Field(default=None, ge=-12, le=14)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with tools_engine(tmp_path_factory.mktemp("bounds-pair")) as eng:
        yield eng


server = module_server()
oai = module_client()


def test_a_pydantic_model_with_bounds_in_every_mode(server: LocalServer, oai: openai.OpenAI) -> None:
    texts = []
    for mode in MODES:
        done = oai.chat.completions.parse(model=server.model_id, messages=ASK, response_format=Pick, temperature=0,
                                          max_tokens=80, extra_body={"mode": mode})
        pick = done.choices[0].message.parsed  # pydantic validated it: the bounds held
        assert isinstance(pick, Pick), done.choices[0].message.content
        texts.append(done.choices[0].message.content)
    assert len(set(texts)) == 1, texts  # greedy: every mode's constrained reply is ar's


def test_a_zod_style_schema_in_every_mode_greedy_and_sampled(server: LocalServer, oai: openai.OpenAI) -> None:
    fmt: Any = {"type": "json_schema", "json_schema": {"name": "score", "strict": True, "schema": ZOD}}
    greedy = []
    for mode in MODES:
        for temperature, seed in ((0.0, 0), (1.0, 1), (1.0, 2)):
            done = oai.chat.completions.create(model=server.model_id, messages=ASK, response_format=fmt,
                                               temperature=temperature, seed=seed, max_tokens=80,
                                               extra_body={"mode": mode})
            text = done.choices[0].message.content or ""
            value = json.loads(text)
            assert 0 <= value["score"] <= 100 and isinstance(value["score"], int), text
            assert 0 < value["ratio"] <= 1 and -5 <= value.get("level", 0) <= 5, text
            if temperature == 0:
                greedy.append(text)
    assert len(set(greedy)) == 1, greedy
