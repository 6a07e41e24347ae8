"""Reply formats of Functionary, GLM, Kimi K2, LFM2, Gemma 4, Phi-4, Nemotron, MiniMax, SmolLM3 and Seed-OSS: each
model output splits into the content, thinking and calls its family means, whole and streamed; templates find them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.chat.families import by_name, detect
from engine.chat.family import CONTENT, DROP, THINKING, Family
from engine.chat.stream import ReplySplitter, split_whole

TEMPLATES = Path("/tmp/sdist/llama_cpp_python-0.3.36/vendor/llama.cpp/models/templates")
CHUNKS = range(1, 8)  # every chunk size up to one past the longest marker prefix a test splits at random points
NAMES = ("special_function", "special_function_with_opt", "get_time", "get_weather", "python", "empty_args",
         "toggle", "set_config", "todo_list", "amount", "Calendar.create_event", "set_nullable", "html")
Call = tuple[str, dict[str, Any]]


def _template(name: str) -> str:
    path = TEMPLATES / name
    if not path.is_file():
        pytest.skip(f"no llama.cpp template {name} here")
    return path.read_text(encoding="utf-8")


def _family(name: str) -> Family:
    fam = by_name(name)
    assert fam is not None, name
    return fam


F31, F32 = "functionary", "functionary_v32"
AT = ">>>"  # where a Functionary v3.2 prompt leaves the reply: at a recipient
SF = "special_function"
ONE: list[Call] = [(SF, {"arg1": 1})]
TWO: list[Call] = [(SF, {"arg1": 1}), ("special_function_with_opt", {"arg1": 1, "arg2": 2})]
KIMI_ONE = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0"
            "<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_calls_section_end|>")
GLM_CITY = "<tool_call>get_time\n<arg_key>city</arg_key>\n<arg_value>Oslo</arg_value>\n</tool_call>"

# (family, start section, model output, content, reasoning, calls)
CASES: list[tuple[str, str, str, str, str, list[Call]]] = [
    # Functionary v3.1
    (F31, CONTENT, "Good day!\nAnything else?", "Good day!\nAnything else?", "", []),
    (F31, CONTENT, "<function=special_function>{\"arg1\": 1}</function>", "", "", ONE),
    (F31, CONTENT, "Checking.<function=get_time>{\"city\": \"Lima\"}</function>", "Checking.", "",
     [("get_time", {"city": "Lima"})]),
    (F31, CONTENT, "<function=special_function>{\"arg1\": 1}</function>"
     "<function=special_function_with_opt>{\"arg1\": 1, \"arg2\": 2}</function>", "", "", TWO),
    (F31, CONTENT, "<|python_tag|>print(6 * 7)", "", "", [("python", {"code": "print(6 * 7)"})]),
    (F31, CONTENT, "<function=launch>{\"x\": 1}</function>", "<function=launch>{\"x\": 1}</function>", "", []),
    # Functionary v3.2
    (F32, DROP, "all\nGood day!\nAnything else?", "Good day!\nAnything else?", "", []),
    (F32, DROP, "special_function\n{\"arg1\": 1}", "", "", ONE),
    (F32, DROP, "all\nOne moment.>>>get_time\n{\"city\": \"Lima\"}", "One moment.", "",
     [("get_time", {"city": "Lima"})]),
    (F32, DROP, "special_function\n{\"arg1\": 1}>>>special_function_with_opt\n{\"arg1\": 1, \"arg2\": 2}",
     "", "", TWO),
    (F32, DROP, "allocate\n{\"n\": 2}", "allocate\n{\"n\": 2}", "", []),
    (F32, DROP, "all\nWe are all\nhere.", "We are all\nhere.", "", []),
    # GLM-4.6 (newlines between tags) and GLM-4.7 (none; the prompt opens thinking)
    ("glm45", CONTENT, "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n"
     "</tool_call>", "", "", ONE),
    ("glm45", THINKING, "Let me\nsee</think>Good day!", "Good day!", "Let me\nsee", []),
    ("glm45", THINKING, "Look it up.</think><tool_call>get_time<arg_key>city</arg_key><arg_value>Oslo</arg_value>"
     "</tool_call>", "", "Look it up.", [("get_time", {"city": "Oslo"})]),
    ("glm45", CONTENT, "<tool_call>special_function<arg_key>arg1</arg_key><arg_value>1</arg_value></tool_call>"
     "<tool_call>special_function_with_opt<arg_key>arg1</arg_key><arg_value>1</arg_value>"
     "<arg_key>arg2</arg_key><arg_value>2</arg_value></tool_call>", "", "", TWO),
    ("glm45", THINKING, "Read it.</think><tool_call>empty_args</tool_call>", "", "Read it.", [("empty_args", {})]),
    ("glm45", CONTENT, "Updating.<tool_call>set_config<arg_key>config</arg_key><arg_value>{\"level\": 3}"
     "</arg_value></tool_call>", "Updating.", "", [("set_config", {"config": {"level": 3}})]),
    ("glm45", CONTENT, GLM_CITY + "\nDone with it.", "Done with it.", "", [("get_time", {"city": "Oslo"})]),
    ("glm45", CONTENT, "<tool_call>nuke<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>",
     "<tool_call>nuke<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", "", []),
    # Kimi K2
    ("kimi_k2", CONTENT, "Good day!\nAnything else?", "Good day!\nAnything else?", "", []),
    ("kimi_k2", CONTENT, KIMI_ONE, "", "", ONE),
    ("kimi_k2", CONTENT, "<think>Weighing it</think>" + KIMI_ONE, "", "Weighing it", ONE),
    ("kimi_k2", CONTENT, "Right away." + KIMI_ONE, "Right away.", "", ONE),
    ("kimi_k2", CONTENT, "<|tool_calls_section_begin|><|tool_call_begin|>functions.special_function:0"
     "<|tool_call_argument_begin|>{\"arg1\": 1}<|tool_call_end|><|tool_call_begin|>"
     "functions.special_function_with_opt:1<|tool_call_argument_begin|>{\"arg1\": 1, \"arg2\": 2}"
     "<|tool_call_end|><|tool_calls_section_end|>", "", "", TWO),
    ("kimi_k2", CONTENT, "<|tool_call_begin|>functions.html:0<|tool_call_argument_begin|>{\"markup\": \"<b>x</b>\"}",
     "", "", [("html", {"markup": "<b>x</b>"})]),
    # LFM2 / LFM2.5
    ("lfm2", CONTENT, "Good day!\nAnything else?", "Good day!\nAnything else?", "", []),
    ("lfm2", CONTENT, "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", "", "", ONE),
    ("lfm2", CONTENT, "<|tool_call_start|>[toggle(enabled=False)]<|tool_call_end|>", "", "",
     [("toggle", {"enabled": False})]),
    ("lfm2", CONTENT, "<|tool_call_start|>[set_nullable(value=None)]<|tool_call_end|>", "", "",
     [("set_nullable", {"value": None})]),
    ("lfm2", CONTENT, "<|tool_call_start|>[set_config(config={\"on\": true, \"n\": -4, \"x\": null})]"
     "<|tool_call_end|>", "", "", [("set_config", {"config": {"on": True, "n": -4, "x": None}})]),
    ("lfm2", CONTENT, "<|tool_call_start|>[Calendar.create_event(title='sync', people=['Ann', 'Bo'])]"
     "<|tool_call_end|>", "", "", [("Calendar.create_event", {"title": "sync", "people": ["Ann", "Bo"]})]),
    ("lfm2", CONTENT, "<|tool_call_start|>[python(code=\"a = 1\\nprint(\\\"a\\\")\")]<|tool_call_end|>", "", "",
     [("python", {"code": "a = 1\nprint(\"a\")"})]),
    ("lfm2", CONTENT, "<|tool_call_start|>[special_function(arg1=1), special_function_with_opt(arg1=1, arg2=2)]"
     "<|tool_call_end|>", "", "", TWO),
    ("lfm2", CONTENT, "<think>Time, then.</think>Asking.<|tool_call_start|>[get_time(city=\"Rome\")]"
     "<|tool_call_end|>", "Asking.", "Time, then.", [("get_time", {"city": "Rome"})]),
    ("lfm2", CONTENT, "See [docs](https://example.org) and [x](y).", "See [docs](https://example.org) and [x](y).",
     "", []),
    ("lfm2", CONTENT, "<|tool_call_start|>[empty_args()]<|tool_call_end|>", "", "", [("empty_args", {})]),
    ("lfm2", CONTENT, "<|tool_call_start|>[special_function(arg1=__import__('os'))]<|tool_call_end|>",
     "<|tool_call_start|>[special_function(arg1=__import__('os'))]<|tool_call_end|>", "", []),
    # Gemma 4
    ("gemma4", CONTENT, "Good day!", "Good day!", "", []),
    ("gemma4", CONTENT, "<|channel>thought\nHm,\nlet me see<channel|>Good day!", "Good day!", "Hm,\nlet me see", []),
    ("gemma4", CONTENT, "<|channel>thought<channel|>Good day!", "Good day!", "", []),
    ("gemma4", CONTENT, "<|channel><|channel>thought\n<channel|>Good day!<channel|>", "Good day!", "", []),
    ("gemma4", CONTENT, "Good day!<|channel>thought\n<channel|>", "Good day!", "", []),
    ("gemma4", CONTENT, "<|tool_call>call:get_time{city:<|\"|>New York<|\"|>}<tool_call|>", "", "",
     [("get_time", {"city": "New York"})]),
    ("gemma4", CONTENT, "<|tool_call>call:empty_args{}<tool_call|>", "", "", [("empty_args", {})]),
    ("gemma4", CONTENT, "Sure.<|tool_call>call:amount{orig:-2.5e3}<tool_call|>", "Sure.", "",
     [("amount", {"orig": -2500.0})]),
    ("gemma4", CONTENT, "<|tool_call>call:toggle{enabled:false}<tool_call|>"
     "<|tool_call>call:set_nullable{value:null}<tool_call|>", "", "",
     [("toggle", {"enabled": False}), ("set_nullable", {"value": None})]),
    ("gemma4", CONTENT, "<|tool_call>call:todo_list{todos:[<|\"|>eat<|\"|>,<|\"|>sleep<|\"|>]}<tool_call|>", "", "",
     [("todo_list", {"todos": ["eat", "sleep"]})]),
    ("gemma4", CONTENT, "<|tool_call>call:set_config{config:{mode:<|\"|>a, b<|\"|>,depth:2,tags:[]}}<tool_call|>",
     "", "", [("set_config", {"config": {"mode": "a, b", "depth": 2, "tags": []}})]),
    ("gemma4", CONTENT, "<|channel>thought\nNeed time<channel|><|tool_call>call:get_time{city:<|\"|>Rome<|\"|>}"
     "<tool_call|>", "", "Need time", [("get_time", {"city": "Rome"})]),
    # Phi-4-mini
    ("phi4", CONTENT, "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]<|/tool_call|>",
     "", "", ONE),
    ("phi4", CONTENT, "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}, {\"name\": "
     "\"special_function_with_opt\", \"arguments\": {\"arg1\": 1, \"arg2\": 2}}]<|/tool_call|>", "", "", TWO),
    # Nemotron Nano v2 (the prompt opens thinking)
    ("nemotron", THINKING, "Hm,\nfine\n</think>\n<TOOLCALL>[{\"name\": \"special_function\", \"arguments\": "
     "{\"arg1\": 1}}]</TOOLCALL>", "", "Hm,\nfine", ONE),
    ("nemotron", THINKING, "Two\n</think>\n\n<TOOLCALL>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}"
     ", {\"name\": \"special_function_with_opt\", \"arguments\": {\"arg1\": 1, \"arg2\": 2}}]</TOOLCALL>\n",
     "", "Two", TWO),
    ("nemotron", THINKING, "Easy\n</think>\nGood day!", "Good day!", "Easy", []),
    # MiniMax M2 (the prompt opens thinking)
    ("minimax", THINKING, "\n</think>\n\nGood day!\nAnything else?", "Good day!\nAnything else?", "", []),
    ("minimax", THINKING, "Hm\nright\n</think>\n\nGood day!", "Good day!", "Hm\nright", []),
    ("minimax", THINKING, "A tool, then:\n</think>\n\n<minimax:tool_call>\n<invoke name=\"empty_args\">\n</invoke>\n"
     "</minimax:tool_call>", "", "A tool, then:", [("empty_args", {})]),
    ("minimax", THINKING, "\n</think>\n\n<minimax:tool_call>\n<invoke name=\"special_function\">\n<parameter "
     "name=\"arg1\">1</parameter>\n</invoke>\n<invoke name=\"get_time\">\n<parameter name=\"city\">Lyon</parameter>"
     "\n</invoke>\n</minimax:tool_call>", "", "", [(SF, {"arg1": 1}), ("get_time", {"city": "Lyon"})]),
    # Seed-OSS
    ("seed_oss", CONTENT, "<seed:think>Weighing it</seed:think>\nGood day!", "Good day!", "Weighing it", []),
    ("seed_oss", CONTENT, "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</parameter>\n"
     "</function>\n</seed:tool_call>", "", "", ONE),
    ("seed_oss", CONTENT, "<seed:tool_call>\n<function=special_function>\n<parameter=arg1>1</parameter>\n</function>"
     "\n</seed:tool_call>\n<seed:tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>1</parameter>\n"
     "<parameter=arg2>2</parameter>\n</function>\n</seed:tool_call>", "", "", TWO),
    ("seed_oss", CONTENT, "<seed:tool_call>\n<function=todo_list>\n<parameter=todos>[{\"t\": \"a\", \"done\": false}]"
     "</parameter>\n</function>\n</seed:tool_call>", "", "", [("todo_list", {"todos": [{"t": "a", "done": False}]})]),
    # SmolLM3
    ("smollm3", CONTENT, "<think>\nQuick one\n</think>\nGood day!", "Good day!", "Quick one", []),
    ("smollm3", CONTENT, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>",
     "", "", ONE),
]


def _streamed(fam: Family, text: str, size: int, section: str) -> tuple[str, str, list[Call], list[str]]:
    s = ReplySplitter(fam, NAMES, section)
    pieces = [p for i in range(0, len(text), size) for p in s.feed(text[i:i + size])]
    rest, calls = s.finish()
    pieces += rest
    content = "".join(p.text for p in pieces if p.kind == CONTENT)
    reasoning = "".join(p.text for p in pieces if p.kind == THINKING)
    return ((content.strip() if calls else content), reasoning.strip(),
            [(c.name, json.loads(c.arguments)) for c in calls], [p.text for p in pieces])


@pytest.mark.parametrize(("name", "section", "text", "content", "reasoning", "calls"), CASES)
def test_reply_splits_whole_and_streamed(name: str, section: str, text: str, content: str, reasoning: str,
                                         calls: list[Call]) -> None:
    fam = _family(name)
    got_content, got_reasoning, got_calls = split_whole(fam, text, NAMES, section)
    assert (got_content, got_reasoning) == (content, reasoning)
    assert [(c.name, json.loads(c.arguments)) for c in got_calls] == calls
    markers = [m for m in (*fam.preserved, *fam.call_open) if m not in content and m not in reasoning]
    for size in CHUNKS:
        s_content, s_reasoning, s_calls, texts = _streamed(fam, text, size, section)
        assert (s_content, s_reasoning, s_calls) == (content, reasoning, calls), size
        assert not [t for t in texts for m in markers if m in t], size


@pytest.mark.parametrize(("name", "section", "text", "reasoning"), [
    ("glm45", THINKING, "Maybe " + GLM_CITY + " later</think>Fine.", "Maybe " + GLM_CITY + " later"),
    ("kimi_k2", CONTENT, "<think>Maybe " + KIMI_ONE + "</think>Fine.", "Maybe " + KIMI_ONE),
    ("lfm2", CONTENT, "<think>Try <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|> hm</think>Fine.",
     "Try <|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|> hm"),
    ("minimax", THINKING, "Use <minimax:tool_call><invoke name=\"empty_args\"></invoke></minimax:tool_call>?</think>"
     "Fine.", "Use <minimax:tool_call><invoke name=\"empty_args\"></invoke></minimax:tool_call>?"),
    ("nemotron", THINKING, "Or <TOOLCALL>[{\"name\": \"empty_args\", \"arguments\": {}}]</TOOLCALL></think>Fine.",
     "Or <TOOLCALL>[{\"name\": \"empty_args\", \"arguments\": {}}]</TOOLCALL>"),
])
def test_call_inside_thinking_is_thinking(name: str, section: str, text: str, reasoning: str) -> None:
    assert split_whole(_family(name), text, NAMES, section) == ("Fine.", reasoning, [])


@pytest.mark.parametrize(("name", "section", "text"), [
    (F31, CONTENT, "<function=special_function>{\"arg1\": 1}</function>"),
    (F32, DROP, "special_function\n{\"arg1\": 1}"),
    ("kimi_k2", CONTENT, KIMI_ONE),
    ("lfm2", CONTENT, "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>"),
    ("gemma4", CONTENT, "<|tool_call>call:special_function{arg1:1}<tool_call|>"),
    ("phi4", CONTENT, "<|tool_call|>[{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}]<|/tool_call|>"),
    ("minimax", CONTENT, "<minimax:tool_call><invoke name=\"special_function\"><parameter name=\"arg1\">1"
     "</parameter></invoke></minimax:tool_call>"),
    ("smollm3", CONTENT, "<tool_call>{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>"),
    ("seed_oss", CONTENT, "<seed:tool_call><function=special_function><parameter=arg1>1</parameter></function>"
     "</seed:tool_call>"),
])
def test_call_of_a_tool_not_offered_stays_content(name: str, section: str, text: str) -> None:
    content, _, calls = split_whole(_family(name), text, ["other_tool"], section)
    assert calls == []
    assert "special_function" in content
    assert split_whole(_family(name), text, (), section)[2] == []  # no tools: a call marker is text


FOUND = [
    ("meetkai-functionary-medium-v3.1.jinja", F31), ("meetkai-functionary-medium-v3.2.jinja", F32),
    ("GLM-4.6.jinja", "glm45"), ("GLM-4.7-Flash.jinja", "glm45"), ("inclusionai-ling-3.0-flash.jinja", "glm45"),
    ("poolside-Laguna-XS.2.jinja", "glm45"), ("poolside-Laguna-XS-2.1.jinja", "glm45"),
    ("poolside-Laguna-S-2.1.jinja", "glm45"), ("Spark2.5.jinja", "glm45"),
    ("Kimi-K2-Instruct.jinja", "kimi_k2"), ("Kimi-K2-Thinking.jinja", "kimi_k2"),
    ("moonshotai-Kimi-K2.jinja", "kimi_k2"),
    ("LFM2-8B-A1B.jinja", "lfm2"), ("LFM2.5-Instruct.jinja", "lfm2"), ("LFM2.5-8B-A1B.jinja", "lfm2"),
    ("google-gemma-4-31B-it.jinja", "gemma4"), ("google-gemma-4-31B-it-interleaved.jinja", "gemma4"),
    ("NVIDIA-Nemotron-Nano-v2.jinja", "nemotron"), ("MiniMax-M2.jinja", "minimax"),
    ("HuggingFaceTB-SmolLM3-3B.jinja", "smollm3"), ("ByteDance-Seed-OSS.jinja", "seed_oss"),
]
"""Each real template these families take; no other template may take one of them."""
MINE = (F31, F32, "glm45", "kimi_k2", "lfm2", "gemma4", "phi4", "nemotron", "minimax", "smollm3", "seed_oss")


@pytest.mark.parametrize(("template", "name"), [*FOUND, ("google-gemma-2-2b-it.jinja", "plain")])
def test_template_finds_its_family(template: str, name: str) -> None:
    assert detect(_template(template)).name == name


def test_no_other_template_takes_these_families() -> None:
    if not TEMPLATES.is_dir():
        pytest.skip("no llama.cpp templates here")
    taken = {p.name: detect(p.read_text(encoding="utf-8")).name for p in TEMPLATES.glob("*.jinja")}
    assert {t: n for t, n in taken.items() if n in MINE} == dict(FOUND)


def test_v32_reply_starts_at_a_recipient() -> None:
    fam = _family(F32)
    assert fam.first_section("<|start_header_id|>assistant<|end_header_id|>\n\n>>>") == DROP
    assert fam.first_section("<|start_header_id|>assistant<|end_header_id|>\n\n") == CONTENT


TOOLS = [
    {"type": "function", "function": {"name": SF, "parameters": {
        "type": "object", "properties": {"arg1": {"type": "integer"}}, "required": ["arg1"]}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "utc": {"type": "boolean"},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["city"]}}},
]


@pytest.mark.parametrize("name", MINE)
@pytest.mark.parametrize("only", [None, "get_time"])
def test_call_grammar_parses_as_gbnf(name: str, only: str | None) -> None:
    llama_cpp = pytest.importorskip("llama_cpp")
    fam = _family(name)
    assert fam.call_grammar is not None and fam.call_open
    gbnf = fam.call_grammar(TOOLS, only)
    llama_cpp.LlamaGrammar.from_string(gbnf, verbose=False)
