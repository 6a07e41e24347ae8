"""A chat request's structure, turned into what the engine takes: the history in the template's form, the tools
to render, the grammar the reply must follow, and the bias and penalties; every problem a 400 naming its field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.chat.families import by_name, plain
from engine.chat.family import CONTENT, Family
from engine.chat.format import ChatFormat, thinking_variables
from engine.chat.history import template_tool_calls
from engine.chat.rendering import Message
from engine.core.constraints import check_bias
from engine.core.gbnf import either
from engine.core.jsonschema import JSON_OBJECT_GRAMMAR, SchemaError, schema_grammar
from engine.core.schemabounds import grammar_budget
from engine.errors import ParameterError

from .errors import APIError
from .formats import NamedChoice
from .schemas import ChatCompletionRequest, ChatMessage, CompletionRequest

SCHEMA_PARAM = "response_format.json_schema.schema"
OFF_EFFORTS = ("none", "minimal")  # reasoning_effort values that ask for no thinking where a template has a switch


@dataclass(slots=True)
class ChatPlan:
    """What a chat request asks of the prompt and of the reply."""

    messages: list[Message]
    family: Family = field(default_factory=lambda: plain.FAMILY)  # the reply's format
    tools: list[dict[str, Any]] | None = None  # rendered by the template
    names: list[str] = field(default_factory=list)  # the tools the reply may call
    grammar: str = ""  # GBNF the reply must follow ("" = free)
    legacy: bool = False  # the request used ``functions``: the reply carries ``function_call``
    variables: dict[str, Any] = field(default_factory=dict)  # the template's switches (enable_thinking...)
    section: str = CONTENT  # where the reply starts: thinking when the prompt opened a thinking block
    thinking_budget: int | None = None  # thinking tokens before the block is closed
    triggers: tuple[str, ...] = ()  # the grammar is lazy: it holds the reply from the first of these texts on

    @property
    def calls_possible(self) -> bool:
        return self.family.calls and bool(self.names)


def _tool_history(body: ChatCompletionRequest) -> bool:
    """Whether the request's history holds tool calls or results."""
    return any(m.role in ("tool", "function") or m.tool_calls or m.function_call for m in body.messages)


def uses_tools(body: ChatCompletionRequest) -> bool:
    """Whether the request offers tools or its history holds tool calls or results."""
    return bool(body.tool_list) or _tool_history(body)


def chat_plan(body: ChatCompletionRequest, fmt: ChatFormat) -> ChatPlan:
    """The plan for ``body`` on a model with this chat format (which decides whether tools can be offered)."""
    family = by_name(fmt.family) or plain.FAMILY
    _check_tools(body)
    offered = body.tool_list
    choice, name = body.choice
    tool_field = "tools" if body.tools else "functions"
    if not family.calls and (_tool_history(body) or (offered and choice != "none")):
        raise APIError(400, f"{tool_field if offered else 'messages'}: this model's chat template ({fmt.label}) has "
                       "no tool-call format this server knows, so the model cannot be offered tools",
                       param=tool_field if offered else "messages", code="tools_unsupported")
    plan = ChatPlan([_message(m, i) for i, m in enumerate(body.messages)], family=family, legacy=body.legacy,
                    variables=_variables(body, fmt), thinking_budget=body.thinking_budget)
    if offered:
        plan.tools = offered
        if choice != "none":
            plan.names = [t["function"]["name"] for t in offered]
    fmt_ = body.response_format
    wants_json = fmt_ is not None and fmt_.type != "text"
    if choice in ("required", "named") and offered:
        plan.grammar = _call_grammar(family, offered, name, tool_field)
    elif wants_json:
        plan.grammar = _json_grammar(body)
        if plan.calls_possible:  # auto: the reply is either one tool call or the JSON asked for
            plan.grammar = either(_call_grammar(family, offered, None, tool_field), plan.grammar)
    elif plan.calls_possible and family.call_grammar is not None and family.call_open:
        # auto: free text, until the reply opens a call in its family's markup; the call then follows its schema
        plan.grammar, plan.triggers = _call_grammar(family, offered, None, tool_field), family.call_open
    return plan


def _check_tools(body: ChatCompletionRequest) -> None:
    """400s as OpenAI answers them: an empty tool list, a forced call with no tools, two tools of one name."""
    if body.tools is not None and not body.tools:
        raise APIError(400, "tools: an empty list; leave tools out to offer none", param="tools",
                       code="invalid_value")
    forced = body.tool_choice == "required" or isinstance(body.tool_choice, NamedChoice)
    if forced and not body.tools:
        raise APIError(400, "tool_choice: a forced tool call needs tools, and the request offers none",
                       param="tool_choice", code="invalid_value")
    names = [t["function"]["name"] for t in body.tool_list]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        field_ = "tools" if body.tools else "functions"
        raise APIError(400, f"{field_}: the name {twice[0]!r} is given to more than one tool", param=field_,
                       code="invalid_value")


def _call_grammar(family: Family, offered: list[dict[str, Any]], name: str | None, tool_field: str) -> str:
    if family.call_grammar is None:
        raise APIError(400, f"tool_choice: this model's format ({family.label}) cannot be forced to call a tool",
                       param="tool_choice", code="invalid_value")
    try:
        with grammar_budget():  # every tool's parameter grammar draws on one size budget
            return family.call_grammar(offered, name)
    except SchemaError as exc:  # before ParameterError, its base
        raise APIError(400, f"{tool_field}: a parameter schema: {exc}", param=tool_field,
                       code="unsupported_schema") from exc
    except ParameterError as exc:
        raise APIError(400, str(exc), param="tool_choice", code="invalid_value") from exc


def _variables(body: ChatCompletionRequest, fmt: ChatFormat) -> dict[str, Any]:
    """The template's switches: ``reasoning_effort`` in the family's terms, then the request's own kwargs."""
    out: dict[str, Any] = {}
    effort = body.reasoning_effort
    if effort is not None:
        out.update(thinking_variables(fmt, effort not in OFF_EFFORTS, effort if effort not in OFF_EFFORTS else None))
    out.update(body.chat_template_kwargs or {})
    return out


def _json_grammar(body: ChatCompletionRequest) -> str:
    fmt = body.response_format
    assert fmt is not None
    if fmt.type == "json_object":
        return JSON_OBJECT_GRAMMAR
    if fmt.json_schema is None:
        raise APIError(400, "response_format.json_schema is required for type json_schema",
                       param="response_format.json_schema", code="missing_field")
    try:
        return schema_grammar(fmt.json_schema.schema_)
    except SchemaError as exc:
        raise APIError(400, f"{SCHEMA_PARAM}: {exc}", param=SCHEMA_PARAM, code="unsupported_schema") from exc


def _message(m: ChatMessage, i: int) -> Message:
    role = {"developer": "system", "function": "tool"}.get(m.role, m.role)
    out = Message(role=role, content=m.content)
    if m.thinking is not None and role == "assistant":
        out["reasoning_content"] = m.thinking
    calls = [c.model_dump() for c in m.tool_calls or ()]
    if m.function_call is not None:
        calls.append({"id": "", "type": "function", "function": m.function_call.model_dump()})
    if calls:
        try:
            out["tool_calls"] = template_tool_calls(calls, f"messages[{i}].tool_calls")
        except ParameterError as exc:
            raise APIError(400, str(exc), param=f"messages[{i}].tool_calls", code="invalid_value") from exc
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    if m.name is not None:
        out["name"] = m.name
    return out


def sampling_extras(body: ChatCompletionRequest | CompletionRequest, grammar: str, n_vocab: int,
                    triggers: tuple[str, ...] = ()) -> dict[str, Any]:
    """The constraint fields of :class:`~engine.core.sampling.SamplingParams` for this request."""
    bias = dict(body.logit_bias or {})
    try:
        check_bias(bias, n_vocab)
    except ParameterError as exc:
        raise APIError(400, str(exc), param="logit_bias", code="invalid_value") from exc
    extras = {"logit_bias": tuple(sorted(bias.items())), "presence_penalty": body.presence_penalty,
              "frequency_penalty": body.frequency_penalty, "grammar": grammar, "grammar_triggers": triggers}
    return {name: value for name, value in extras.items() if value}  # the defaults stay the defaults
