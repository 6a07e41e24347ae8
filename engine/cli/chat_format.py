"""``python -m engine chat-format``: what the engine makes of a model's chat format, for users debugging a model:
the prompt an OpenAI chat request renders to, and the message a model output parses to."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.errors import ParameterError

from .help import HelpFormatter


def register(sub: Any) -> None:
    p = sub.add_parser("chat-format", help="show the prompt a chat request renders to, and how a reply parses",
                       formatter_class=HelpFormatter,
                       description="Render an OpenAI chat request (messages, tools, reasoning_effort, "
                                   "chat_template_kwargs) with the model's chat template and print the prompt; "
                                   "with --parse, print the assistant message a model output parses to.")
    p.add_argument("--model", required=True, help="GGUF file (only its vocabulary and template are read)")
    p.add_argument("--request", required=True, help="a JSON file holding an OpenAI chat request body")
    p.add_argument("--parse", metavar="OUTPUT.txt", help="a model output to parse as this request's reply")
    p.add_argument("--chat-template", metavar="NAME|FILE", help="a template instead of the model's (builtin or file)")
    p.set_defaults(func=cmd_chat_format)


def _read(path: str, what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ParameterError(f"{what} {path}: cannot be read ({getattr(exc, 'strerror', None) or exc})") from None


def _request(path: str) -> Any:
    from pydantic import ValidationError

    from engine.server.errors import APIError
    from engine.server.schemas import ChatCompletionRequest

    try:
        data = json.loads(_read(path, "--request"))
    except json.JSONDecodeError as exc:
        raise ParameterError(f"--request {path}: not JSON ({exc.msg} at line {exc.lineno})") from None
    if isinstance(data, dict):
        data.setdefault("model", "-")
    try:
        return ChatCompletionRequest.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise ParameterError(f"--request {path}: {where}: {err['msg']}") from None
    except APIError as exc:
        raise ParameterError(f"--request {path}: {exc.message}") from None


def cmd_chat_format(args: argparse.Namespace) -> int:
    from engine.chat import builtin, rendering
    from engine.chat.format import chat_format, reply_section
    from engine.chat.stream import split_whole
    from engine.core.backend import Model
    from engine.server.errors import APIError
    from engine.server.structured import chat_plan

    body = _request(args.request)
    template = builtin.source(args.chat_template) if args.chat_template else None
    with Model(args.model, vocab_only=True) as model:
        fmt = chat_format(model, template)
        try:
            plan = chat_plan(body, fmt)
        except APIError as exc:
            raise ParameterError(exc.message) from None
        prompt = rendering.render(model, plan.messages, plan.tools, plan.variables, template)
        section = reply_section(model, plan.messages, plan.variables, template, plan.tools)
    if args.parse is None:
        print(f"# family: {fmt.family} ({fmt.label}); thinking switch: {'yes' if fmt.thinking_switch else 'no'}; "
              f"reply starts in: {section}", file=sys.stderr)
        sys.stdout.write(prompt)
        return 0
    content, reasoning, calls = split_whole(plan.family, _read(args.parse, "--parse"), plan.names, section)
    message: dict[str, Any] = {"role": "assistant", "content": content if content or not calls else None}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}} for c in calls]
    print(json.dumps(message, ensure_ascii=False, indent=2))
    return 0
