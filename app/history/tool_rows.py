"""A reply's tool calls and the results that answer them, in the history (schema 4)."""

from __future__ import annotations

import json
import time
from typing import Any

from app.history.store import History, Message


def set_tool_calls(history: History, message_id: int, calls: list[dict[str, Any]]) -> None:
    """Record the calls a saved reply made (OpenAI's form: ``id``, ``type``, ``function`` with JSON arguments)."""
    with history._write() as db:
        db.execute("UPDATE messages SET tool_calls = ? WHERE id = ?", (json.dumps(calls), message_id))


def add_tool_result(history: History, conversation_id: int, call_id: str, text: str) -> Message:
    """Append a call's result as a ``tool`` message answering ``call_id``."""
    now = time.time()
    with history._write() as db:
        cur = db.execute("INSERT INTO messages (conversation_id, role, content, complete, created, tool_call_id)"
                         " VALUES (?, 'tool', ?, 1, ?, ?)", (conversation_id, text, now, call_id))
        db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
    assert cur.lastrowid is not None
    return history.message(cur.lastrowid)
