"""Qwen3-Coder, Llama 3, Mistral, DeepSeek R1 and V3.1, GPT-OSS, Granite and Command R replies split whole and
streamed in small chunks, their templates detected, their call grammars parsed, and loose JSON calls read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.chat.calls import loose_calls
from engine.chat.families import by_name, detect
from engine.chat.family import CONTENT, THINKING, Family, ToolCall
from engine.chat.stream import ReplySplitter, split_whole
from engine.core.backend import Model
from engine.core.grammar import Grammar
from engine.tiny.models import TinyPair

TEMPLATES = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates")
CHUNKS = range(1, 8)  # every chunk size from one character to past the longest marker's usual split
T, C = THINKING, CONTENT
Call = tuple[str, dict[str, Any]]
Q = "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n</tool_call>"
DS1 = ("<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
       "```json\n{\"city\": \"Oslo\"}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>")
DS3 = "<｜tool▁call▁begin｜>{}<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
W = [("get_weather", {"city": "Oslo"})]
NAMES = ["get_weather", "get_time", "run", "brave_search"]

# (family, reply, section it starts in, content, reasoning, calls)
CASES: list[tuple[str, str, str, str, str, list[Call]]] = [
    ("qwen3_coder", "Sunny today.", C, "Sunny today.", "", []),
    ("qwen3_coder", "Weighing it\n</think>\n\nIt rains.", T, "It rains.", "Weighing it", []),
    ("qwen3_coder", Q, C, "", "", W),
    ("qwen3_coder", "Let me look.\n</think>\n\n" + Q, T, "", "Let me look.", W),
    ("qwen3_coder", "I check first.\n" + Q, T, "", "I check first.", W),  # a call ends an open thinking block
    ("qwen3_coder", "Checking.\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
     "</tool_call>", C, "Checking.", "", W),
    ("qwen3_coder", Q + "\n" + Q.replace("get_weather", "get_time").replace("Oslo", "Lima"), C, "", "",
     [*W, ("get_time", {"city": "Lima"})]),
    ("qwen3_coder", "<tool_call>\n<function=run>\n<parameter=code>\n    x = 1\nprint(x)\n\n</parameter>\n"
     "<parameter=n>\n3\n</parameter>\n<parameter=opts>\n{\"v\": true}\n</parameter>\n<parameter=s>\nnull\n"
     "</parameter>\n<parameter=t>\n{broken\n</parameter>\n</function>\n</tool_call>", C, "", "",
     [("run", {"code": "    x = 1\nprint(x)\n", "n": 3, "opts": {"v": True}, "s": None, "t": "{broken"})]),
    ("qwen3_coder", "<tool_call>\n<function=run>\n</function>\n</tool_call>", C, "", "", [("run", {})]),
    ("llama3", "Sunny today.", C, "Sunny today.", "", []),
    ("llama3", '{"name": "get_weather", "parameters": {"city": "Oslo"}}', C, "", "", W),
    ("llama3", 'Let me check. {"name": "get_weather", "parameters": {"city": "Oslo"}}', C, "Let me check.", "", W),
    ("llama3", '{"type": "function", "name": "get_weather", "parameters": {"city": "Oslo"}}; '
     '{"name": "get_time", "parameters": {"city": "Lima"}}', C, "", "", [*W, ("get_time", {"city": "Lima"})]),
    ("llama3", '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Oslo"}}', C, "", "", W),
    ("llama3", '<|python_tag|>brave_search.call(query="weather in Oslo")', C, "", "",
     [("brave_search", {"query": "weather in Oslo"})]),
    ("mistral", "Sunny today.", C, "Sunny today.", "", []),
    ("mistral", '[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Oslo"}, "id": "abc123def"}]', C, "",
     "", W),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}', C, "", "", W),
    ("mistral", 'Looking.[TOOL_CALLS]get_weather[CALL_ID]a00000001[ARGS]{"city": "Oslo"}'
     '[TOOL_CALLS]get_time[CALL_ID]a00000002[ARGS]{"city": "Lima"}', C, "Looking.", "",
     [*W, ("get_time", {"city": "Lima"})]),
    ("mistral", "[THINK]Hmm,\nrain?[/THINK]It rains.", C, "It rains.", "Hmm,\nrain?", []),
    ("mistral", '[THINK]Maybe [TOOL_CALLS]get_time[ARGS]{"city": "X"} first[/THINK][TOOL_CALLS]get_weather[ARGS]'
     '{"city": "Oslo"}', C, "", 'Maybe [TOOL_CALLS]get_time[ARGS]{"city": "X"} first', W),
    ("deepseek_r1", "Weighing\nit</think>It rains.", T, "It rains.", "Weighing\nit", []),
    ("deepseek_r1", "</think>It rains.", T, "It rains.", "", []),
    ("deepseek_r1", "</think>" + DS1, T, "", "", W),
    ("deepseek_r1", DS1.replace("\n```<", "```<"), C, "", "", W),
    ("deepseek_r1", "<｜tool▁calls▁begin｜>" + "\n".join(
        f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{{\"city\": \"{c}\"}}\n```<｜tool▁call▁end｜>"
        for n, c in (("get_weather", "Oslo"), ("get_time", "Lima"))) + "<｜tool▁calls▁end｜>", C, "", "",
     [*W, ("get_time", {"city": "Lima"})]),
    ("deepseek_v31", "It rains.", C, "It rains.", "", []),
    ("deepseek_v31", "Hmm</think>\nIt rains.", T, "It rains.", "Hmm", []),
    ("deepseek_v31", "Hmm</think>Both:<｜tool▁calls▁begin｜>" + DS3.format("get_weather", '{"city": "Oslo"}')
     + DS3.format("get_time", '{"city": "Lima", "at": {"h": 9}}') + "<｜tool▁calls▁end｜>", T, "Both:", "Hmm",
     [*W, ("get_time", {"city": "Lima", "at": {"h": 9}})]),
    ("gpt_oss", "<|channel|>final<|message|>It rains.", C, "It rains.", "", []),
    ("gpt_oss", "<|channel|>analysis<|message|>Rain\nlikely<|end|><|start|>assistant<|channel|>final<|message|>"
     "It rains.", C, "It rains.", "Rain\nlikely", []),
    ("gpt_oss", ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Oslo"}', C, "", "", W),
    ("gpt_oss", '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}', C,
     "", "", W),
    ("gpt_oss", '<|channel|>analysis<|message|>Look it up<|end|><|start|>assistant to=functions.get_weather'
     '<|channel|>commentary <|constrain|>json<|message|>{"city": "Oslo"}', C, "", "Look it up", W),
    ("gpt_oss", "<|channel|>commentary to=assistant<|channel|>analysis<|message|>Hmm<|end|><|start|>assistant"
     "<|channel|>final<|message|>It rains.", C, "It rains.", "Hmm", []),
    ("gpt_oss", "<|channel|>analysis<|message|>Run it<|end|><|start|>assistant to=python<|channel|>commentary"
     "<|message|>print(1)", C, "print(1)", "Run it", []),  # a built-in tool's message stays its text
    ("granite", "It rains.", C, "It rains.", "", []),
    ("granite", "<think>Hmm\nrain</think><response>It rains.</response>", C, "It rains.", "Hmm\nrain", []),
    ("granite", '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}, '
     '{"name": "get_time", "arguments": {"city": "Lima"}}]', C, "", "", [*W, ("get_time", {"city": "Lima"})]),
    ("granite", '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>', C, "", "", W),
    ("command_r", "<|START_RESPONSE|>It rains.<|END_RESPONSE|>", C, "It rains.", "", []),
    ("command_r", "<|START_THINKING|>Hmm<|END_THINKING|><|START_RESPONSE|>It rains.<|END_RESPONSE|>", C,
     "It rains.", "Hmm", []),
    ("command_r", "Hmm<|END_THINKING|><|START_TEXT|>It rains.<|END_TEXT|>", T, "It rains.", "Hmm", []),
    ("command_r", '<|START_THINKING|>Look<|END_THINKING|><|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": '
     '"get_weather", "parameters": {"city": "Oslo"}},\n    {"tool_call_id": "1", "tool_name": "get_time", '
     '"parameters": {"city": "Lima"}}\n]<|END_ACTION|>', C, "", "Look", [*W, ("get_time", {"city": "Lima"})]),
]

UNKNOWN = {  # a call of a tool not offered: left as the text it was
    "qwen3_coder": Q.replace("get_weather", "delete_all"),
    "llama3": '{"name": "delete_all", "parameters": {}}',
    "mistral": '[TOOL_CALLS]delete_all[ARGS]{"x": 1}',
    "deepseek_r1": DS1.replace("get_weather", "delete_all"),
    "deepseek_v31": "<｜tool▁calls▁begin｜>" + DS3.format("delete_all", "{}") + "<｜tool▁calls▁end｜>",
    "granite": '<|tool_call|>[{"name": "delete_all", "arguments": {}}]',
    "command_r": '<|START_ACTION|>[{"tool_call_id": "0", "tool_name": "delete_all", "parameters": {}}]'
                 "<|END_ACTION|>",
}

IN_THINKING = {  # a call written inside a thinking block the model closes is thinking, not a call
    "mistral": ("[THINK]", '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}', "[/THINK]"),
    "deepseek_r1": ("<think>", DS1, "</think>"),
    "deepseek_v31": ("<think>", "<｜tool▁calls▁begin｜>" + DS3.format("get_weather", "{}"), "</think>"),
    "gpt_oss": ("<|channel|>analysis<|message|>", '<|channel|>commentary to=functions.get_weather<|message|>{}',
                "<|end|>"),
    "granite": ("<think>", '<|tool_call|>[{"name": "get_weather", "arguments": {}}]', "</think>"),
    "command_r": ("<|START_THINKING|>", '<|START_ACTION|>[{"tool_name": "get_weather"}]<|END_ACTION|>',
                  "<|END_THINKING|>"),
    "qwen3_coder": ("<think>", "maybe <tool_call> later", "</think>"),  # only a whole call's start ends thinking
}

TEMPLATE_FAMILIES = {
    "Qwen3-Coder.jinja": "qwen3_coder", "Qwen3.5-4B.jinja": "qwen3_coder", "StepFun3.5-Flash.jinja": "qwen3_coder",
    "NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.jinja": "qwen3_coder",
    "meta-llama-Llama-3.1-8B-Instruct.jinja": "llama3", "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
    "mistralai-Mistral-Nemo-Instruct-2407.jinja": "mistral", "Mistral-Small-3.2-24B-Instruct-2506.jinja": "mistral",
    "unsloth-mistral-Devstral-Small-2507.jinja": "mistral", "mistralai-Ministral-3-14B-Reasoning-2512.jinja": "mistral",
    "deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja": "deepseek_r1", "llama-cpp-deepseek-r1.jinja": "deepseek_r1",
    "deepseek-ai-DeepSeek-V3.1.jinja": "deepseek_v31", "openai-gpt-oss-120b.jinja": "gpt_oss",
    "ibm-granite-granite-3.3-2B-Instruct.jinja": "granite", "ibm-granite-granite-4.0.jinja": "granite",
    "ibm-granite-granite-4.1.jinja": "granite", "Cohere2MoE.jinja": "command_r",
    "CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": "command_r",
}
MINE = frozenset(TEMPLATE_FAMILIES.values())

SAMPLE_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}},
]
SAMPLE_CALL = {  # one call of get_weather in each family's markup, as its grammar must allow
    "qwen3_coder": "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n</function>\n"
                   "</tool_call>",
    "llama3": '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
    "mistral": '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo"}',
    "deepseek_r1": DS1,
    "deepseek_v31": "<｜tool▁calls▁begin｜>" + DS3.format("get_weather", '{"city": "Oslo"}') + "<｜tool▁calls▁end｜>",
    "gpt_oss": '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city": "Oslo"}',
    "granite": '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]',
    "command_r": '<|START_ACTION|>[\n{"tool_call_id": "0", "tool_name": "get_weather", "parameters": '
                 '{"city": "Oslo"}}\n]<|END_ACTION|>',
}


def _family(name: str) -> Family:
    fam = by_name(name)
    assert fam is not None, name
    return fam


def _template(name: str) -> str:
    path = TEMPLATES / name
    if not path.is_file():
        pytest.skip(f"llama.cpp's templates are not unpacked at {TEMPLATES}")
    return path.read_text(encoding="utf-8")


def _markers(fam: Family) -> set[str]:
    return {m for rules in fam.transitions.values() for m, _ in rules}


def _calls(calls: list[ToolCall]) -> list[Call]:
    return [(c.name, json.loads(c.arguments)) for c in calls]


def _streamed(fam: Family, text: str, section: str, size: int) -> Iterator[tuple[str, str, list[ToolCall]]]:
    s = ReplySplitter(fam, NAMES, section)
    pieces = [p for i in range(0, len(text), size) for p in s.feed(text[i:i + size])]
    rest, calls = s.finish()
    for p in [*pieces, *rest]:
        yield p.kind, p.text, []
    yield "", "", calls


@pytest.mark.parametrize(("family", "text", "section", "content", "reasoning", "calls"), CASES)
def test_a_reply_splits_whole_and_streamed(family: str, text: str, section: str, content: str, reasoning: str,
                                           calls: list[Call]) -> None:
    fam = _family(family)
    got = split_whole(fam, text, NAMES, section)
    assert (got[0], got[1], _calls(got[2])) == (content, reasoning, calls)
    whole = content + reasoning
    for size in CHUNKS:
        parts = list(_streamed(fam, text, section, size))
        for _, piece, _ in parts:
            assert not any(m in piece for m in _markers(fam) if m not in whole), (size, piece)
        streamed = "".join(p for k, p, _ in parts if k == CONTENT)
        assert (streamed.strip() if calls else streamed) == content, size
        assert "".join(p for k, p, _ in parts if k == THINKING).strip() == reasoning, size
        assert _calls(parts[-1][2]) == calls, size


@pytest.mark.parametrize("family", sorted(UNKNOWN))
def test_a_call_of_a_tool_not_offered_stays_content(family: str) -> None:
    text = UNKNOWN[family]
    assert split_whole(_family(family), text, NAMES) == (text, "", [])


@pytest.mark.parametrize("family", sorted(IN_THINKING))
def test_a_call_inside_thinking_is_thinking(family: str) -> None:
    opens, call, closes = IN_THINKING[family]
    content, reasoning, calls = split_whole(_family(family), f"{opens}{call}{closes}Done.", NAMES)
    assert (content, reasoning, calls) == ("Done.", call, [])


def test_without_tools_a_call_marker_is_text() -> None:
    assert split_whole(_family("mistral"), '[TOOL_CALLS]get_weather[ARGS]{}') == ('[TOOL_CALLS]get_weather[ARGS]{}',
                                                                                   "", [])


def test_mistral_keeps_the_models_call_ids_and_makes_nine_character_ones() -> None:
    _, _, calls = split_whole(_family("mistral"), '[TOOL_CALLS]get_time[CALL_ID]a00000007[ARGS]{}'
                              '[TOOL_CALLS]get_time[ARGS]{}', NAMES)
    assert calls[0].id == "a00000007" and len(calls[1].id) == 9 and calls[1].id.isalnum()


@pytest.mark.parametrize("name", sorted(TEMPLATE_FAMILIES))
def test_detect_picks_the_family_of_a_real_template(name: str) -> None:
    assert detect(_template(name)).name == TEMPLATE_FAMILIES[name]


def test_no_other_real_template_is_taken_by_these_families() -> None:
    _template(next(iter(TEMPLATE_FAMILIES)))
    others = [p.name for p in TEMPLATES.glob("*.jinja") if p.name not in TEMPLATE_FAMILIES]
    taken = {n: detect(_template(n)).name for n in others}
    # functionary v3.1 also writes Llama 3's header: its own family comes first in the registry when present
    taken.pop("meetkai-functionary-medium-v3.1.jinja", None)
    assert {n: f for n, f in taken.items() if f in MINE} == {}


def test_the_prompt_opens_thinking_where_the_template_does() -> None:
    assert _family("deepseek_v31").first_section("<｜Assistant｜><think>") == THINKING
    assert _family("deepseek_v31").first_section("<｜Assistant｜><think></think>") == CONTENT
    assert _family("deepseek_r1").first_section("<｜Assistant｜><think>\n") == THINKING
    assert _family("command_r").first_section("<|CHATBOT_TOKEN|><|START_THINKING|>") == THINKING
    assert _family("gpt_oss").effort_key == "reasoning_effort"


@pytest.fixture(scope="module")
def spm(tiny: TinyPair) -> Iterator[Model]:
    with Model(tiny.target) as m:
        yield m


def _byte_tokens(m: Model) -> dict[int, int]:
    """Byte value -> the vocabulary's byte-fallback token ``<0xNN>`` for it (the grammar reads it as that byte)."""
    names = {m.token_text(t): t for t in range(m.n_vocab)}
    return {b: names[f"<0x{b:02X}>".encode()] for b in range(256) if f"<0x{b:02X}>".encode() in names}


@pytest.mark.parametrize("family", sorted(SAMPLE_CALL))
def test_the_call_grammar_parses_and_takes_a_call(family: str, spm: Model) -> None:
    fam = _family(family)
    assert fam.call_grammar is not None
    for only in (None, "get_weather"):
        g = Grammar.for_model(spm.ptr, fam.call_grammar(SAMPLE_TOOLS, only))  # raises where llama.cpp cannot parse
        tokens = _byte_tokens(spm)
        data = SAMPLE_CALL[family].encode("utf-8")
        if not all(b in tokens for b in data):
            pytest.skip("the tiny vocabulary lacks a one-byte token for some byte of the sample")
        for b in data:
            g.accept(tokens[b])
        assert g.allows(spm.eos)  # the call is complete


LOOSE: list[tuple[str, list[Call] | None]] = [
    ('{"name": "get_weather", "arguments": {"city": "Oslo"}}', W),
    ('  \n{"name": "get_weather", "parameters": {"city": "Oslo"}}\n', W),
    ('```json\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n```', W),
    ('```\n[{"name": "get_weather", "arguments": {"city": "Oslo"}}, {"name": "get_time", "arguments": {}}]\n```',
     [*W, ("get_time", {})]),
    ('{{"name": "get_weather", "arguments": {{"city": "Oslo"}}}}', W),
    ('{"name": "get_weather", "arguments": "{\\"city\\": \\"Oslo\\"}"}', W),
    ('{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}', W),
    ('{"name": "delete_all", "arguments": {}}', None),
    ('[{"name": "get_weather", "arguments": {}}, {"name": "delete_all", "arguments": {}}]', None),
    ('Here: {"name": "get_weather", "arguments": {"city": "Oslo"}}', None),
    ('{"name": "get_weather"}', None),
    ('{"city": "Oslo"}', None),
    ("It rains.", None),
    ("[]", None),
]


@pytest.mark.parametrize(("text", "calls"), LOOSE)
def test_loose_calls(text: str, calls: list[Call] | None) -> None:
    got = loose_calls(text, NAMES)
    assert (None if got is None else _calls(got)) == calls
