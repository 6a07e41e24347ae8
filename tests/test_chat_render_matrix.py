"""Every real chat template of the sdist renders every message shape as transformers renders it, or refuses alike.

The reference is a plain Jinja2 sandbox set up as transformers' ``apply_chat_template`` sets it up; the project's
render is :class:`engine.chat.sandbox.ChatTemplate`. Per template and shape the outcome is one of :data:`OUTCOMES`.
``python -m tests.test_chat_render_matrix`` prints the table of docs/families.md.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import jinja2
import jinja2.ext
import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment

from engine import ChatTemplateError
from engine.chat import rendering, sandbox
from engine.chat.format import template_format
from engine.core.backend import Model

pytestmark = pytest.mark.long

CLOCK = datetime(2026, 1, 2, 3, 4, 5)  # strftime_now's time in both renders
BOS, EOS = "<s>", "</s>"  # the same special-token texts for both renders
N_TEMPLATES = 70  # the sdist's models/templates/*.jinja (the folder's 71st file is its README)
MATCH, BOTH_REFUSE, LACKS = "match", "both refuse", "sandbox lacks"
OUTCOMES = (MATCH, BOTH_REFUSE, LACKS)
CALL_ID = "a1b2C3d4E"  # nine letters and digits: Mistral's templates refuse any other id
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
SYSTEM = {"role": "system", "content": "Be brief."}
ASK = {"role": "user", "content": "What is the weather in Oslo?"}
CALL = {"id": CALL_ID, "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}
RESULT = {"role": "tool", "tool_call_id": CALL_ID, "name": "get_weather", "content": json.dumps({"temp_c": 3})}


@dataclass(frozen=True)
class Shape:
    """One request: its messages, tools and template variables."""

    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[Mapping[str, Any], ...] = ()
    variables: Mapping[str, Any] | None = None


SHAPES = {
    "system+user": Shape((SYSTEM, ASK)),
    "turns": Shape((ASK, {"role": "assistant", "content": "Cold: 3 degrees."}, {"role": "user", "content": "Rain?"})),
    "tools": Shape((SYSTEM, ASK), (WEATHER,)),
    "tool call+result": Shape((ASK, {"role": "assistant", "content": None, "tool_calls": [CALL]}, RESULT),
                              (WEATHER,)),
    "reasoning history": Shape((ASK, {"role": "assistant", "content": None, "reasoning_content": "Look it up.",
                                      "tool_calls": [CALL]}, RESULT), (WEATHER,)),
    "thinking on": Shape((ASK,), variables={"enable_thinking": True}),
    "thinking off": Shape((ASK,), variables={"enable_thinking": False}),
    "effort low": Shape((ASK,), variables={"reasoning_effort": "low"}),
    "effort high": Shape((ASK,), variables={"reasoning_effort": "high"}),
    "chat_template_kwargs": Shape((ASK,), variables={"thinking": True, "keep_all_reasoning": True}),
}


class _Generation(jinja2.ext.Extension):
    """transformers' ``{% generation %}`` tag (it only marks the assistant's tokens: the body renders as usual)."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's declaration

    def parse(self, parser: Any) -> Any:
        parser.stream.skip(1)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _raise(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def reference(source: str, shape: Shape, bos: str = BOS, eos: str = EOS) -> str:
    """The render transformers' apply_chat_template gives (its environment, globals and keyword arguments)."""
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[_Generation, jinja2.ext.loopcontrols])
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise
    env.globals["strftime_now"] = lambda fmt: CLOCK.strftime(fmt)
    return env.from_string(source).render(
        messages=[dict(m) for m in shape.messages], tools=[dict(t) for t in shape.tools] or None, documents=None,
        add_generation_prompt=True, **{"bos_token": bos, "eos_token": eos, **(shape.variables or {})})


def project(source: str, shape: Shape) -> str:
    return sandbox.ChatTemplate(source).render([dict(m) for m in shape.messages], BOS, EOS, True,
                                               [dict(t) for t in shape.tools] or None, variables=shape.variables)


@dataclass(frozen=True)
class Outcome:
    kind: str  # one of OUTCOMES
    why: str = ""  # the refusal's line


def compare(source: str, shape: Shape) -> Outcome:
    """How the project's render of ``shape`` compares with the reference's (AssertionError on a difference)."""
    try:
        expected: str | None = reference(source, shape)
        ref_error = ""
    except Exception as exc:  # the template refuses the shape (or cannot run in Jinja at all)
        expected, ref_error = None, f"{type(exc).__name__}: {exc}"
    try:
        got = project(source, shape)
    except ChatTemplateError as exc:
        line = str(exc)
        assert "\n" not in line, line
        return Outcome(BOTH_REFUSE if expected is None else LACKS, ref_error.splitlines()[0] if ref_error else line)
    assert expected is not None, f"the reference refused ({ref_error}), the project rendered {got!r}"
    assert got == expected
    return Outcome(MATCH)


def templates(src: Path) -> list[Path]:
    return sorted((src / "models" / "templates").glob("*.jinja"))


@pytest.fixture(autouse=True)
def _fixed_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sandbox, "clock", lambda: CLOCK)


def test_the_sdist_has_every_template(llama_src: Path) -> None:
    assert len(templates(llama_src)) == N_TEMPLATES


@pytest.mark.parametrize("shape", SHAPES)
def test_every_template_renders_as_the_reference(llama_src: Path, shape: str) -> None:
    outcomes = {path.name: compare(path.read_text(encoding="utf-8"), SHAPES[shape]) for path in templates(llama_src)}
    lacking = {name: o.why for name, o in outcomes.items() if o.kind == LACKS}
    assert not lacking, lacking  # every feature real templates use is in the sandbox
    assert sum(o.kind == MATCH for o in outcomes.values()) >= N_TEMPLATES // 2


def test_a_refusal_raises_chat_template_error(llama_src: Path) -> None:
    """Where the reference raises (a template without a system role), the project raises ChatTemplateError."""
    gemma2 = (llama_src / "models" / "templates" / "google-gemma-2-2b-it.jinja").read_text(encoding="utf-8")
    with pytest.raises(jinja2.exceptions.TemplateError, match="System role not supported"):
        reference(gemma2, SHAPES["system+user"])
    with pytest.raises(ChatTemplateError, match="refused these messages: System role not supported"):
        project(gemma2, SHAPES["system+user"])


@pytest.mark.parametrize("key", ["messages", "tools", "documents", "add_generation_prompt", "raise_exception",
                                 "ssd_iter"])
def test_a_variable_cannot_stand_in_for_what_the_render_sets(key: str) -> None:
    from engine import ParameterError

    with pytest.raises(ParameterError, match=f"'{key}' is set by the chat itself"):
        project("{{ messages }}", Shape((ASK,), variables={key: 1}))


def test_variables_and_none_content_reach_the_template() -> None:
    source = ("{{ enable_thinking }} {{ reasoning_effort }} {{ bos_token }}"
              "{% for m in messages %}{{ m.content is none }}{{ m.reasoning_content }}{% endfor %}")
    shape = Shape(({"role": "assistant", "content": None, "reasoning_content": "r"},),
                  variables={"enable_thinking": False, "reasoning_effort": "low", "bos_token": "B"})
    assert project(source, shape) == reference(source, shape) == "False low BTruer"


ADAPTED = "renders via adaptation"  # the project's render, after the reference refused what a client sends
HISTORY = ("tool call+result", "reasoning history")  # the shapes with a None content and arguments as objects


def through_project(model: Model, source: str, shape: Shape) -> str:
    """How :func:`engine.chat.rendering.render` does where the reference refuses ``shape`` (AssertionError on a render
    no adaptation of the messages explains)."""
    bos, eos = rendering.special_texts(model)
    try:
        got = rendering.render(model, cast(list[rendering.Message], list(shape.messages)),
                               [dict(t) for t in shape.tools], template=source)
    except ChatTemplateError:
        return BOTH_REFUSE
    def empty(ms: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [{**m, "content": "" if m.get("content", "") is None else m["content"]} for m in ms]

    def texts(ms: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [{**m, "tool_calls": [{**c, "function": {**c["function"], "arguments": json.dumps(
            c["function"]["arguments"])}} for c in m["tool_calls"]]} if "tool_calls" in m else m for m in ms]

    original = list(shape.messages)
    candidates = []
    for messages in (empty(original), texts(original), texts(empty(original))):
        try:
            candidates.append(reference(source, Shape(tuple(messages), shape.tools), bos, eos))
        except Exception:  # this adaptation is refused too
            continue
    assert got in candidates
    return ADAPTED


@pytest.fixture(scope="module")
def vocab(llama_src: Path) -> Iterator[Model]:
    with Model(llama_src / "models" / "ggml-vocab-qwen2.gguf", vocab_only=True) as m:
        yield m


@pytest.mark.parametrize("shape", HISTORY)
def test_a_template_gets_the_history_it_can_take(llama_src: Path, vocab: Model, shape: str) -> None:
    """Qwen3 and others refuse a None content (or arguments as objects), which OpenAI clients send: the project
    renders what llama.cpp renders, "" or JSON text, and refuses only where that is refused too."""
    outcomes = {}
    for path in templates(llama_src):
        source = path.read_text(encoding="utf-8")
        if compare(source, SHAPES[shape]).kind != MATCH:
            outcomes[path.stem] = through_project(vocab, source, SHAPES[shape])
    assert outcomes["Qwen-Qwen3-0.6B"] == outcomes["openai-gpt-oss-120b"] == ADAPTED


def rows(src: Path, model: Model) -> Iterator[tuple[str, ...]]:
    """Per template: its file, family, the shapes it renders, its refusals, the project's tool history, and its
    switches."""
    for path in templates(src):
        text = path.read_text(encoding="utf-8")
        outcomes = {name: compare(text, shape) for name, shape in SHAPES.items()}
        history = [through_project(model, text, SHAPES[n]) if outcomes[n].kind != MATCH else MATCH for n in HISTORY]
        refused = {o.why: [n for n, p in outcomes.items() if p == o] for o in outcomes.values() if o.kind != MATCH}
        fmt = template_format(text, bos=BOS, eos=EOS)
        renders = sum(o.kind == MATCH for o in outcomes.values())
        why = "; ".join(f"{', '.join(names)}: {reason}" for reason, names in refused.items())
        switches = ", ".join(n for n, on in (("thinking", fmt.thinking_switch), ("effort", fmt.effort_switch),
                                             ("tools", fmt.tools)) if on) or "none"
        project_history = "yes" if all(h != BOTH_REFUSE for h in history) else "no"
        if project_history == "yes" and ADAPTED in history:
            project_history = "yes, with an empty content or arguments as JSON text"
        yield (path.stem, f"{fmt.label} ({fmt.family})", f"{renders} of {len(SHAPES)}", why or "-", project_history,
               switches)


def main(src: str) -> None:
    sandbox.clock = lambda: CLOCK
    out = ["| Template | Family | Renders as the reference | Refused by the template itself (the reference too) | "
           "Tool history in the project | Switches |", "|---|---|---|---|---|---|"]
    with Model(Path(src) / "models" / "ggml-vocab-qwen2.gguf", vocab_only=True) as model:
        out += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(Path(src), model)]
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
