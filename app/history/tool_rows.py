"""A reply's tool calls and the results that answer them, in the history (schema 4); regenerating from before
them."""

from __future__ import annotations

import json
import time
from typing import Any

from app.history.records import Message
from app.history.store import History


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


def rewind_tool_rounds(history: History, conversation_id: int) -> int:
    """The reply that regenerating the conversation's last one writes again: the first reply after the user's last
    message. Where tool calls, their results and later replies follow it, they go and the final answer becomes that
    reply's shown version (kept, with its own earlier versions, as Regenerate keeps any), so the model is asked
    again from the user's message and may call the tools again, not answer from stale results."""
    messages = history.messages(conversation_id)
    last_user = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    after = messages[last_user + 1:]
    if len(after) < 2 or after[0].role != "assistant" or after[-1].role != "assistant":
        return messages[-1].id
    first, final = after[0].id, after[-1].id
    with history._write() as db:
        top = db.execute("SELECT MAX(p) FROM (SELECT position AS p FROM messages WHERE id = ?"
                         " UNION ALL SELECT position FROM versions WHERE message_id = ?)", (first, first)).fetchone()[0]
        moved = db.execute("SELECT id FROM versions WHERE message_id = ? ORDER BY position", (final,)).fetchall()
        for i, row in enumerate(moved, start=1):
            db.execute("UPDATE versions SET message_id = ?, position = ? WHERE id = ?", (first, top + i, row["id"]))
        db.execute("UPDATE messages SET (content, stats, runs, complete, created, reasoning) = (SELECT content, stats,"
                   " runs, complete, created, reasoning FROM messages WHERE id = ?), tool_calls = NULL, position = ?"
                   " WHERE id = ?", (final, top + len(moved) + 1, first))
        db.execute("DELETE FROM messages WHERE conversation_id = ? AND id > ?", (conversation_id, first))
    return first
