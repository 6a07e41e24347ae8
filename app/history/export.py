"""A conversation as Markdown or JSON, with every version of a regenerated reply; a reply's thinking is its own
part (``reasoning_content`` in JSON, as OpenAI-style APIs carry it; a collapsed ``<details>`` block in Markdown)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from app.chat.stats_text import stats_text
from app.chat.thinking import thought_for
from app.history.records import Conversation, Message, Version

# A reply's versions by its message id (History.versions).
Versions = Callable[[int], list[Version]]

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")  # a CommonMark code fence line: its run and the rest


def export_json(conv: Conversation, shown: list[Message], versions: Versions) -> dict[str, Any]:
    """The conversation as a JSON-ready dict; a reply with several versions lists them all under ``versions``."""
    messages = []
    for m in shown:
        item: dict[str, Any] = {"role": m.role, "content": m.content, "stats": m.stats, "complete": m.complete,
                                "created": m.created}
        if m.reasoning:
            item["reasoning_content"] = m.reasoning
        if m.tool_calls:
            item["tool_calls"] = m.tool_calls
        if m.role == "tool":
            item["tool_call_id"] = m.tool_call_id
        if m.versions > 1:
            item["version"] = m.version
            item["versions"] = [{"content": v.content, "stats": v.stats, "complete": v.complete, "created": v.created,
                                 "shown": v.shown, **({"reasoning_content": v.reasoning} if v.reasoning else {})}
                                for v in versions(m.id)]
        messages.append(item)
    return {"title": conv.title, "system_prompt": conv.system_prompt, "created": conv.created,
            "messages": messages}


def export_markdown(conv: Conversation, shown: list[Message], versions: Versions) -> str:
    """The conversation as a Markdown document; the other versions of a reply follow the shown one."""
    parts = [f"# {conv.title}\n"]
    if conv.system_prompt:
        parts.append(f"**System:** {conv.system_prompt}\n")
    for m in shown:
        if m.role == "user":
            parts.append(f"## You\n\n{closed(m.content)}\n")
            continue
        if m.role == "tool":
            parts.append(f"<details>\n<summary>Tool result</summary>\n\n```text\n{m.content}\n```\n\n</details>\n")
            continue
        parts.append(_reply("##", m, None) + tool_calls_markdown(m.tool_calls))
        if m.versions > 1:
            for n, v in enumerate(versions(m.id), 1):
                if not v.shown:
                    parts.append(_reply("###", m, (n, v)))
    return "\n".join(parts)


def _reply(heading: str, m: Message, other: tuple[int, Version] | None) -> str:
    if other is None:
        title = f"Assistant (version {m.version} of {m.versions}, shown)" if m.versions > 1 else "Assistant"
        content, stats, reasoning = m.content, m.stats, m.reasoning
    else:
        n, version = other
        title = f"Assistant, version {n} of {m.versions}"
        content, stats, reasoning = version.content, version.stats, version.reasoning
    text = f"{heading} {title}\n\n{thinking_details(reasoning, stats)}{closed(content)}\n"
    return f"{text}\n_{stats_text(stats)}_\n" if stats else text


def tool_calls_markdown(calls: list[dict[str, Any]] | None) -> str:
    """A reply's tool calls, each a heading and its arguments as a JSON block ("" where it made none)."""
    out = ""
    for call in calls or []:
        fn = call.get("function") or {}
        try:
            args = json.dumps(json.loads(fn.get("arguments") or "{}"), indent=2, ensure_ascii=False)
        except ValueError:
            args = str(fn.get("arguments"))
        out += f"\n**Tool call:** `{fn.get('name', '')}`\n\n```json\n{args}\n```\n"
    return out


def thinking_details(reasoning: str, stats: dict[str, Any] | None) -> str:
    """A reply's thinking as a collapsed HTML ``<details>`` block (Markdown renderers show it closed), or ""."""
    if not reasoning.strip():
        return ""
    summary = thought_for((stats or {}).get("thinking_s"))
    return f"<details>\n<summary>{summary}</summary>\n\n{closed(reasoning.strip())}\n\n</details>\n\n"


def closed(text: str) -> str:
    """``text`` with a code fence it leaves open (a reply stopped inside a code block) closed at its end, so
    what follows it in the document (the stats line, the next message) is not read as code."""
    fence = ""
    for line in text.split("\n"):
        match = _FENCE.match(line)
        if match is None:
            continue
        run, rest = match.groups()
        if not fence:
            if not (run[0] == "`" and "`" in rest):  # a backtick fence's info string holds no backtick
                fence = run
        elif run[0] == fence[0] and len(run) >= len(fence) and not rest.strip():
            fence = ""
    return f"{text.rstrip(chr(10))}\n{fence}" if fence else text
