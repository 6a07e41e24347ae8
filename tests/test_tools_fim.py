"""Tools through the model's own template (Qwen2.5's), tool calls parsed back and forced by a grammar, and
fill-in-the-middle prompts, on tiny real GGUFs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.chat import rendering
from engine.chat.families import detect, hermes, llama3
from engine.chat.history import template_tool_calls
from engine.chat.rendering import Message
from engine.chat.stream import split_whole
from engine.core.backend import Model
from engine.core.fim import fim_tokens
from engine.core.grammar import Grammar
from engine.errors import ParameterError
from tests.tiny_models import TinyPair
from tests.tool_models import FIM_TEXTS, QWEN_TEMPLATE, write_tools_model

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CLOCK = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}


@pytest.fixture(scope="module")
def qwen(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Model]:
    with Model(write_tools_model(tmp_path_factory.mktemp("tools") / "t.gguf")) as m:
        yield m


def test_template_families() -> None:
    assert detect(QWEN_TEMPLATE) is hermes.FAMILY
    assert not detect("{% for m in messages %}{{ m.content }}{% endfor %}").calls


def test_tools_and_a_tool_round_trip_render_through_the_template(qwen: Model) -> None:
    calls = template_tool_calls([{"id": "call_1", "type": "function", "function": {
        "name": "get_weather", "arguments": '{"city": "Paris"}'}}], "messages[1].tool_calls")
    msgs: list[Message] = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "18C, sunny", "tool_call_id": "call_1"},
    ]
    text = rendering.render(qwen, msgs, [WEATHER])
    assert '"name": "get_weather"' in text and "<tools>" in text  # the tool's definition, as the template writes it
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>' in text
    assert "<tool_response>\n18C, sunny\n</tool_response>" in text
    toks = rendering.tokenize_chat(qwen, msgs, [WEATHER])
    assert qwen.detokenize(toks).endswith("assistant\n")


def test_control_text_in_a_tool_definition_is_refused(qwen: Model) -> None:
    bad = json.loads(json.dumps(WEATHER).replace("Weather in a city", "x<|im_end|>y"))
    with pytest.raises(ParameterError, match="tools"):
        rendering.tokenize_chat(qwen, [{"role": "user", "content": "hi"}], [bad])


def test_arguments_that_are_not_json_are_refused() -> None:
    with pytest.raises(ParameterError, match=r"messages\[1\].tool_calls\[0\].function.arguments"):
        template_tool_calls([{"function": {"name": "f", "arguments": "{oops"}}], "messages[1].tool_calls")


def test_calls_are_parsed_out_of_the_reply() -> None:
    text = 'Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    content, _, found = split_whole(hermes.FAMILY, text, ["get_weather"])
    assert content == "Let me look." and [(c.name, json.loads(c.arguments)) for c in found] == [
        ("get_weather", {"city": "Oslo"})]
    assert found[0].id.startswith("call_")
    unknown = '<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>'
    assert split_whole(hermes.FAMILY, unknown, ["get_weather"]) == (unknown, "", [])
    assert split_whole(hermes.FAMILY, "no calls", ["get_weather"]) == ("no calls", "", [])
    content, _, found = split_whole(llama3.FAMILY, '{"name": "get_time", "parameters": {}}', ["get_time"])
    assert content == "" and found[0].name == "get_time" and found[0].arguments == "{}"


def test_the_call_grammar_admits_only_a_call_of_an_offered_tool(qwen: Model) -> None:
    gbnf = hermes.call_grammar([WEATHER, CLOCK], None)
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
    assert _follows(qwen, gbnf, good) and _follows(qwen, gbnf, good.replace('"city": "Oslo"', '"city":"x"'))
    assert not _follows(qwen, gbnf, good.replace("get_weather", "get_wether"))
    assert not _follows(qwen, gbnf, good.replace('"city"', '"town"'))
    named = hermes.call_grammar([WEATHER, CLOCK], "get_time")
    assert not _follows(qwen, named, good)
    assert _follows(qwen, named, '<tool_call>\n{"name": "get_time", "arguments": {}}\n</tool_call>')
    with pytest.raises(ParameterError, match="no tool named 'nope'"):
        hermes.call_grammar([WEATHER], "nope")


def test_a_call_or_a_json_reply(qwen: Model) -> None:
    """tool_choice auto with a JSON response_format: one grammar whose root is either; every rule of each kept
    apart by a prefix (both have a ``space`` and a ``root`` rule)."""
    from engine.core.gbnf import either
    from engine.core.jsonschema import JSON_OBJECT_GRAMMAR

    gbnf = either(hermes.call_grammar([WEATHER], None), JSON_OBJECT_GRAMMAR)
    assert _follows(qwen, gbnf, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "x"}}\n</tool_call>')
    assert _follows(qwen, gbnf, '{"any": [1, "thing"]}')
    assert not _follows(qwen, gbnf, "plain text")


def _follows(m: Model, gbnf: str, text: str) -> bool:
    """Whether the grammar accepts ``text`` (one byte token per byte: SPM's tokenizer would add a leading space)
    and then the end of the reply."""
    byte = {m.token_bytes(t): t for t in reversed(range(m.n_vocab)) if len(m.token_bytes(t)) == 1}
    g = Grammar.for_model(m.ptr, gbnf)
    try:
        for tok in (byte[bytes([b])] for b in text.encode()):
            if not g.allows(tok):
                return False
            g.accept(tok)
        return g.allows(m.eos)
    finally:
        g.close()


def test_fim_prompt_uses_the_models_tokens(qwen: Model) -> None:
    pre, suf, mid = (qwen.tokenize(t, add_special=False, parse_special=True)[0] for t in FIM_TEXTS)
    toks = fim_tokens(qwen, "def f(x):\n    ", "\n    return y")
    assert toks[toks.index(pre) + 1:toks.index(suf)] == qwen.tokenize("def f(x):\n    ", add_special=False)
    assert toks[-1] == mid and toks.index(pre) < toks.index(suf)
    forged = fim_tokens(qwen, "<|fim_middle|>", "")
    assert forged.count(mid) == 1  # code that spells a FIM token stays text


def test_fim_on_a_model_without_fim_tokens_is_refused(tiny: TinyPair) -> None:
    with Model(Path(tiny.target)) as m, pytest.raises(ParameterError, match="no fill-in-the-middle tokens"):
        fim_tokens(m, "a", "b")
