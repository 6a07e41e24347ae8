"""Structured output, tools, logit bias, FIM and /v1/responses through the real server and the official ``openai``
client, on a tiny pair whose template is Qwen2.5's (it renders tools) and whose vocabulary has FIM tokens.

The tiny models write gibberish: every structure checked here comes from the grammar, and every mode must give
ar's constrained greedy reply token for token.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel, Field

from engine import Engine, EngineConfig, GenerationParams, SamplingParams
from engine.core.fim import fim_tokens
from engine.server import LocalServer
from tests.server_helpers import client, error_of, module_client, module_server, serve, tools_engine
from tests.tiny_models import TinyPair

pytestmark = pytest.mark.timeout(300)

MODES = ["ar", "sd", "ssd", "lookup", "auto"]
WEATHER: Any = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12}},
                   "required": ["city"], "additionalProperties": False}}}
ASK: Any = [{"role": "user", "content": "What is the weather in Paris?"}]


class Person(BaseModel):
    name: str = Field(max_length=12)  # bounded: a gibberish model would otherwise write the string to max_tokens
    age: int


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    with tools_engine(tmp_path_factory.mktemp("tools-pair")) as eng:
        yield eng


server = module_server()
oai = module_client()


def test_parse_a_pydantic_model_in_every_mode(server: LocalServer, oai: openai.OpenAI) -> None:
    texts = []
    for mode in MODES:
        done = oai.chat.completions.parse(model=server.model_id, messages=ASK, response_format=Person, temperature=0,
                                          max_tokens=120, extra_body={"mode": mode})
        person = done.choices[0].message.parsed
        assert isinstance(person, Person), done.choices[0].message.content
        texts.append(done.choices[0].message.content)
    assert len(set(texts)) == 1, texts  # the constrained greedy reply is ar's in every mode


def test_json_object_and_refused_schemas(server: LocalServer, oai: openai.OpenAI) -> None:
    done = oai.chat.completions.create(model=server.model_id, messages=ASK, temperature=0, max_tokens=200,
                                       response_format={"type": "json_object"})
    if done.choices[0].finish_reason == "stop":
        assert isinstance(json.loads(done.choices[0].message.content or ""), dict)
    else:
        assert (done.choices[0].message.content or "").startswith("{")
    bad = {"type": "json_schema", "json_schema": {"name": "n", "schema": {
        "type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}}}
    err = error_of(httpx.post(f"{server.url}/chat/completions", json={
        "model": server.model_id, "messages": ASK, "response_format": bad}), 400)
    assert "'multipleOf' at properties.n" in err["message"] and err["param"] == "response_format.json_schema.schema"


def test_a_tool_round_trip(server: LocalServer, oai: openai.OpenAI) -> None:
    first = oai.chat.completions.create(model=server.model_id, messages=ASK, tools=[WEATHER], tool_choice="required",
                                        temperature=0, max_tokens=60)
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    call = (choice.message.tool_calls or [])[0]
    assert call.function.name == "get_weather" and call.id.startswith("call_")  # type: ignore[union-attr]
    args = json.loads(call.function.arguments)  # type: ignore[union-attr]
    assert set(args) == {"city"} and isinstance(args["city"], str)
    history: Any = [*ASK, choice.message.model_dump(exclude_none=True),
                    {"role": "tool", "tool_call_id": call.id, "content": "18C and sunny"}]
    final = oai.chat.completions.create(model=server.model_id, messages=history, tools=[WEATHER],
                                        tool_choice="none", temperature=0, max_tokens=8)
    assert final.choices[0].message.content and not final.choices[0].message.tool_calls


def test_a_streamed_named_tool_call_equals_the_whole_one(server: LocalServer, oai: openai.OpenAI) -> None:
    named: Any = {"type": "function", "function": {"name": "get_weather"}}
    whole = oai.chat.completions.create(model=server.model_id, messages=ASK, tools=[WEATHER], tool_choice=named,
                                        temperature=0, max_tokens=60, extra_body={"mode": "sd"})
    stream = oai.chat.completions.create(model=server.model_id, messages=ASK, tools=[WEATHER], tool_choice=named,
                                         temperature=0, max_tokens=60, stream=True, extra_body={"mode": "ssd"})
    name, arguments, finish = "", "", None
    for chunk in stream:
        for c in chunk.choices:
            for d in c.delta.tool_calls or ():
                name += (d.function.name or "") if d.function else ""
                arguments += (d.function.arguments or "") if d.function else ""
            finish = c.finish_reason or finish
    call = (whole.choices[0].message.tool_calls or [])[0]
    assert finish == "tool_calls" and name == "get_weather"
    assert arguments == call.function.arguments  # type: ignore[union-attr]


def test_auto_tools_with_a_schema_give_a_call_or_the_json(server: LocalServer, oai: openai.OpenAI) -> None:
    done = oai.chat.completions.create(model=server.model_id, messages=ASK, tools=[WEATHER], temperature=0,
                                       max_tokens=120, response_format=_schema_format())
    message = done.choices[0].message
    if message.tool_calls:
        assert done.choices[0].finish_reason == "tool_calls"
    else:
        Person.model_validate_json(message.content or "")


def _schema_format() -> Any:
    return {"type": "json_schema", "json_schema": {"name": "person", "strict": True,
                                                   "schema": Person.model_json_schema()}}


def test_legacy_functions_come_back_as_function_call(server: LocalServer) -> None:
    body = {"model": server.model_id, "messages": ASK, "functions": [WEATHER["function"]],
            "function_call": {"name": "get_weather"}, "temperature": 0, "max_tokens": 60}
    done = httpx.post(f"{server.url}/chat/completions", json=body, timeout=120).json()["choices"][0]
    assert done["finish_reason"] == "function_call" and done["message"]["function_call"]["name"] == "get_weather"


def test_logit_bias_bans_and_penalties_apply(server: LocalServer, oai: openai.OpenAI, engine: Engine) -> None:
    free = engine.generate(engine.messages_tokens(ASK), GenerationParams(mode="ar", max_tokens=6)).run().tokens
    ban = {str(t): -100 for t in free[:2]}
    for mode in MODES:
        done = oai.chat.completions.create(model=server.model_id, messages=ASK, temperature=0, max_tokens=6,
                                           logit_bias=ban, presence_penalty=1.0, extra_body={"mode": mode})
        sampling = SamplingParams(logit_bias=tuple((int(t), -100.0) for t in ban), presence_penalty=1.0)
        want = engine.generate(engine.messages_tokens(ASK), GenerationParams(mode="ar", max_tokens=6,
                                                                             sampling=sampling)).run()
        assert not set(want.tokens) & set(free[:2])
        assert done.choices[0].message.content == want.text, mode
    err = error_of(httpx.post(f"{server.url}/chat/completions", json={
        "model": server.model_id, "messages": ASK, "logit_bias": {"99999999": 5}}), 400)
    assert err["param"] == "logit_bias" and "99999999" in err["message"]


def test_fim_completion(server: LocalServer, oai: openai.OpenAI, engine: Engine) -> None:
    prefix, suffix = "def add(a, b):\n    ", "\n    return c\n"
    want = engine.generate(fim_tokens(engine.target_model, prefix, suffix),
                           GenerationParams(mode="ar", max_tokens=12)).run().text
    for mode in ("ar", "lookup", "sd"):
        done = oai.completions.create(model=server.model_id, prompt=prefix, suffix=suffix, max_tokens=12,
                                      temperature=0, extra_body={"mode": mode})
        assert done.choices[0].text == want, mode


def test_refused_fields_are_named(server: LocalServer) -> None:
    from openai.types import completion_create_params as legacy
    from openai.types.chat import completion_create_params as chat_params

    from engine.server import fields

    for table, params in ((fields.CHAT, chat_params.CompletionCreateParamsBase),
                          (fields.COMPLETIONS, legacy.CompletionCreateParamsBase)):
        missing = set(params.__annotations__) - set(table)
        assert not missing, f"OpenAI fields with no decision: {sorted(missing)}"
    docs = (Path(__file__).resolve().parents[1] / "docs" / "server.md").read_text(encoding="utf-8")
    assert all(f"| `{name}` | {status} |" in docs for name, (status, _) in fields.CHAT.items())
    assert all(f"`{name}`" in docs for name in fields.COMPLETIONS)
    asks = {"logprobs": True, "top_logprobs": 2, "audio": {"voice": "alloy"}, "modalities": ["audio"],
            "prediction": {"type": "content", "content": "x"}, "web_search_options": {}, "verbosity": "low",
            "moderation": True, "echo": True, "best_of": 3}
    for path, table, base in (("chat/completions", fields.CHAT, {"messages": ASK}),
                              ("completions", fields.COMPLETIONS, {"prompt": "x"})):
        for name, (status, _why) in table.items():
            if status == fields.REFUSED:
                body = {"model": server.model_id, **base, name: asks[name]}
                err = error_of(httpx.post(f"{server.url}/{path}", json=body), 400)
                assert err["param"] == name and name in err["message"], err


def test_max_tokens_is_capped_and_any_model_name(engine: Engine) -> None:
    with serve(engine, any_model_name=True) as srv:
        done = client(srv).chat.completions.create(model="gpt-3.5-turbo", messages=ASK, max_tokens=100_000,
                                                   temperature=0, extra_body={"mode": "ar"})
        assert done.choices[0].message.content is not None


def test_responses_text_and_a_tool_call(server: LocalServer, oai: openai.OpenAI) -> None:
    text = oai.responses.create(model=server.model_id, input="Say hi", max_output_tokens=8, temperature=0)
    assert text.output_text and text.usage is not None and text.usage.output_tokens > 0
    tool: Any = {"type": "function", "name": "get_weather", "parameters": WEATHER["function"]["parameters"],
                 "strict": True}
    called = oai.responses.create(model=server.model_id, input="Weather in Oslo?", tools=[tool],
                                  tool_choice="required", max_output_tokens=60, temperature=0)
    calls = [o for o in called.output if o.type == "function_call"]
    assert calls and calls[0].name == "get_weather" and "city" in json.loads(calls[0].arguments)


def test_a_model_without_tool_or_fim_support_says_so(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(Path(tiny.target)), None, n_ctx=512, threads=1)) as eng, serve(eng) as srv:
        err = error_of(httpx.post(f"{srv.url}/chat/completions", json={
            "model": srv.model_id, "messages": ASK, "tools": [WEATHER]}), 400)
        assert err["code"] == "tools_unsupported" and "no tool-call format" in err["message"]
        err = error_of(httpx.post(f"{srv.url}/completions", json={
            "model": srv.model_id, "prompt": "a", "suffix": "b"}), 400)
        assert err["param"] == "suffix" and "fill-in-the-middle" in err["message"]


def test_the_engine_in_its_own_process_serves_tools_and_schemas(engine: Engine, oai: openai.OpenAI,
                                                                server: LocalServer) -> None:
    """As ``serve`` runs it: tools and FIM prompts are built here from the target's vocabulary, the grammar crosses
    the pipe inside the sampling settings; the replies equal the in-process engine's."""
    from engine.process import EngineProcess

    with EngineProcess(EngineConfig(engine.config.target_path, n_ctx=2048, threads=1)) as proc, \
            serve(proc) as srv:
        assert _three_replies(client(srv), srv.model_id) == _three_replies(oai, server.model_id)


def _three_replies(api: openai.OpenAI, model: str) -> tuple[str, str | None, str]:
    """A named tool call's arguments, a parsed schema reply's text and a FIM completion, greedy in ar."""
    named: Any = {"type": "function", "function": {"name": "get_weather"}}
    ar: Any = {"mode": "ar"}
    call = api.chat.completions.create(model=model, messages=ASK, tools=[WEATHER], tool_choice=named,
                                       temperature=0, max_tokens=60, extra_body=ar)
    person = api.chat.completions.parse(model=model, messages=ASK, response_format=Person, temperature=0,
                                        max_tokens=120, extra_body=ar)
    fim = api.completions.create(model=model, prompt="def f(", suffix=")", max_tokens=6, temperature=0,
                                 extra_body=ar)
    args = (call.choices[0].message.tool_calls or [])[0].function.arguments  # type: ignore[union-attr]
    return args, person.choices[0].message.content, fim.choices[0].text


def test_an_assistant_turn_without_content_has_empty_text() -> None:
    """The openai client drops a tool-calling turn's null content; it must not render as the word None."""
    from engine.server.schemas import ChatCompletionRequest

    body = ChatCompletionRequest.model_validate({"model": "m", "messages": [
        *ASK, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                    "function": {"name": "get_weather", "arguments": "{}"}}]}]})
    assert body.messages[1].text == ""
