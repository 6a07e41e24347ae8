"""A reply's tool calls in the chat: a card per call (the tool's name, its arguments pretty-printed, and while it
waits for the user Allow once / Always allow for this tool / Deny), and under it the call's result, collapsed
(its header, "▸ Result", is a link that opens it), as the thinking block is.

The view is one rich-text document, so cards are HTML with links ``tool:<action>:<call id>`` (``allow``,
``always``, ``deny``; ``result`` opens or closes a result) that the view turns into :meth:`ToolCards.link`.
"""

from __future__ import annotations

import html
import json
from typing import Any

from app.chat.thinking import CLOSED_MARK, OPEN_MARK
from app.history.records import Message

CARD_BG = "#fff8e6"
RESULT_BG = "#f6f8fa"
MUTED = "#57606a"
PENDING, RUNNING = "pending", "running"
DENIED = "The user denied this call."
ERROR_PREFIX = "Error: "
ACTIONS = ("allow", "always", "deny")


def pretty_arguments(arguments: str) -> str:
    """A call's JSON arguments indented (as they came where they are not JSON)."""
    try:
        return json.dumps(json.loads(arguments or "{}"), indent=2, ensure_ascii=False)
    except ValueError:
        return arguments


def _pre(text: str) -> str:
    body = "<br/>".join(html.escape(line).replace(" ", "&nbsp;") for line in text.split("\n"))
    return f'<p style="font-family:monospace; font-size:small; margin:4px 0">{body}</p>'


class ToolCards:
    """Each call's state while it waits or runs (``pending``, ``running``; a call with neither and no result was
    not run), and which results the user opened (they start closed)."""

    def __init__(self) -> None:
        self.state: dict[str, str] = {}
        self.opened: set[str] = set()

    def toggle(self, call_id: str) -> None:
        if call_id in self.opened:
            self.opened.discard(call_id)
        else:
            self.opened.add(call_id)

    def calls_html(self, m: Message) -> str:
        """A reply's cards ("" where it called no tool)."""
        return "".join(self.card_html(call) for call in m.tool_calls or [])

    def card_html(self, call: dict[str, Any]) -> str:
        fn = call.get("function") or {}
        call_id = html.escape(str(call.get("id", "")))
        state = self.state.get(str(call.get("id", "")))
        if state == PENDING:
            foot = " &nbsp;·&nbsp; ".join(
                f'<a href="tool:{a}:{call_id}">{label}</a>' for a, label in
                zip(ACTIONS, ("Allow once", "Always allow for this tool", "Deny"), strict=True))
        elif state == RUNNING:
            foot = f'<span style="color:{MUTED}"><i>Running…</i> (Stop ends it)</span>'
        else:
            foot = ""
        return (f'<table width="100%" cellspacing="0" cellpadding="8" style="background-color:{CARD_BG};'
                f' margin:4px 0"><tr><td><b>Tool call: {html.escape(str(fn.get("name", "")))}</b>'
                f"{_pre(pretty_arguments(str(fn.get('arguments', ''))))}{foot}</td></tr></table>")

    def result_html(self, m: Message) -> str:
        """A call's result: a header link, and (opened) its text."""
        key = m.tool_call_id
        expanded = key in self.opened
        title = ("Denied" if m.content == DENIED else "Error" if m.content.startswith(ERROR_PREFIX)
                 else f"Result ({len(m.content)} characters)")
        head = (f'<p style="margin:2px 0 6px 12px"><a href="tool:result:{html.escape(key)}" style="color:{MUTED}">'
                f"{OPEN_MARK if expanded else CLOSED_MARK} {title}</a></p>")
        if not expanded:
            return head
        return (f'{head}<table width="100%" cellspacing="0" cellpadding="8" style="background-color:{RESULT_BG};'
                f' margin:0 0 6px 12px"><tr><td style="color:{MUTED}">{_pre(m.content)}</td></tr></table>')
