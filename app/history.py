"""Conversation history in SQLite (WAL): conversations, messages, per-message stats and draft runs."""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine import user_data_dir

from .stats_text import stats_text

SCHEMA = """
CREATE TABLE IF NOT EXISTS conversations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS messages (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
    role TEXT NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    runs TEXT,
    complete INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
"""

# A reply's text as runs of (length in characters, came from an accepted draft).
Runs = list[tuple[int, bool]]


@dataclass(frozen=True, slots=True)
class Conversation:
    """One conversation's row."""

    id: int
    title: str
    system_prompt: str
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class Message:
    """One message; ``stats`` and ``runs`` only for assistant replies, ``complete`` False if cut short."""

    id: int
    conversation_id: int
    role: str
    content: str
    stats: dict[str, Any] | None
    runs: Runs | None
    complete: bool
    created: float


def history_path() -> Path:
    """The database file under the user data folder."""
    return user_data_dir() / "history.sqlite3"


class History:
    """Read and write conversations; every write commits at once, so a crash loses nothing written."""

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or history_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA foreign_keys=ON")
        self._db.executescript(SCHEMA)
        self._db.commit()

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._db.close()

    # -- conversations ----------------------------------------------------------------------------
    def create_conversation(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        """A new, empty conversation."""
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO conversations (title, system_prompt, created, updated) VALUES (?, ?, ?, ?)",
            (title, system_prompt, now, now))
        self._db.commit()
        return self.conversation(_rowid(cur))

    def conversation(self, conversation_id: int) -> Conversation:
        """One conversation by id (``KeyError`` if it does not exist)."""
        row = self._db.execute("SELECT * FROM conversations WHERE id = ?", (conversation_id,)).fetchone()
        if row is None:
            raise KeyError(conversation_id)
        return _conversation(row)

    def conversations(self, search: str = "") -> list[Conversation]:
        """Conversations, most recently updated first, whose title or messages contain ``search``."""
        if search:
            like = f"%{_escape_like(search)}%"
            rows = self._db.execute(
                "SELECT * FROM conversations c WHERE c.title LIKE ? ESCAPE '\\' OR EXISTS ("
                " SELECT 1 FROM messages m WHERE m.conversation_id = c.id AND m.content LIKE ? ESCAPE '\\')"
                " ORDER BY c.updated DESC, c.id DESC", (like, like)).fetchall()
        else:
            rows = self._db.execute("SELECT * FROM conversations ORDER BY updated DESC, id DESC").fetchall()
        return [_conversation(r) for r in rows]

    def rename(self, conversation_id: int, title: str) -> None:
        """Change a conversation's title."""
        self._db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))
        self._db.commit()

    def set_system_prompt(self, conversation_id: int, prompt: str) -> None:
        """Change a conversation's system prompt."""
        self._db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", (prompt, conversation_id))
        self._db.commit()

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation and its messages."""
        self._db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))
        self._db.commit()

    # -- messages ---------------------------------------------------------------------------------
    def add_message(self, conversation_id: int, role: str, content: str, *,
                    stats: dict[str, Any] | None = None, runs: Runs | None = None,
                    complete: bool = True) -> Message:
        """Append a message and touch the conversation."""
        now = time.time()
        cur = self._db.execute(
            "INSERT INTO messages (conversation_id, role, content, stats, runs, complete, created)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (conversation_id, role, content, _dump(stats), _dump(runs), int(complete), now))
        self._db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        self._db.commit()
        return self.message(_rowid(cur))

    def update_message(self, message_id: int, content: str, *, stats: dict[str, Any] | None = None,
                       runs: Runs | None = None, complete: bool = True) -> None:
        """Overwrite a message (used while a reply streams, and when it ends)."""
        self._db.execute(
            "UPDATE messages SET content = ?, stats = ?, runs = ?, complete = ? WHERE id = ?",
            (content, _dump(stats), _dump(runs), int(complete), message_id))
        self._db.commit()

    def message(self, message_id: int) -> Message:
        """One message by id (``KeyError`` if absent)."""
        row = self._db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            raise KeyError(message_id)
        return _message(row)

    def messages(self, conversation_id: int) -> list[Message]:
        """A conversation's messages, oldest first."""
        rows = self._db.execute(
            "SELECT * FROM messages WHERE conversation_id = ? ORDER BY id", (conversation_id,)).fetchall()
        return [_message(r) for r in rows]

    def delete_from(self, conversation_id: int, message_id: int) -> None:
        """Delete ``message_id`` and every later message of the conversation (regenerate, edit)."""
        self._db.execute("DELETE FROM messages WHERE conversation_id = ? AND id >= ?",
                         (conversation_id, message_id))
        self._db.commit()

    # -- export -----------------------------------------------------------------------------------
    def export_json(self, conversation_id: int) -> dict[str, Any]:
        """The conversation as a JSON-ready dict (system prompt, messages with stats)."""
        conv = self.conversation(conversation_id)
        return {
            "title": conv.title,
            "system_prompt": conv.system_prompt,
            "created": conv.created,
            "messages": [
                {"role": m.role, "content": m.content, "stats": m.stats, "complete": m.complete,
                 "created": m.created}
                for m in self.messages(conversation_id)
            ],
        }

    def export_file(self, conversation_id: int, path: Path) -> None:
        """Write a conversation as Markdown (``.md``) or JSON (any other suffix)."""
        if path.suffix.lower() == ".md":
            path.write_text(self.export_markdown(conversation_id), encoding="utf-8")
        else:
            text = json.dumps(self.export_json(conversation_id), indent=2, ensure_ascii=False)
            path.write_text(text, encoding="utf-8")

    def export_markdown(self, conversation_id: int) -> str:
        """The conversation as a Markdown document."""
        conv = self.conversation(conversation_id)
        parts = [f"# {conv.title}\n"]
        if conv.system_prompt:
            parts.append(f"**System:** {conv.system_prompt}\n")
        for m in self.messages(conversation_id):
            who = "You" if m.role == "user" else "Assistant"
            parts.append(f"## {who}\n\n{m.content}\n")
            if m.stats:
                parts.append(f"_{stats_text(m.stats)}_\n")
        return "\n".join(parts)


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(row["id"], row["title"], row["system_prompt"], row["created"], row["updated"])


def _message(row: sqlite3.Row) -> Message:
    runs = json.loads(row["runs"]) if row["runs"] else None
    return Message(row["id"], row["conversation_id"], row["role"], row["content"],
                   json.loads(row["stats"]) if row["stats"] else None,
                   [(int(n), bool(d)) for n, d in runs] if runs is not None else None,
                   bool(row["complete"]), row["created"])


def _dump(value: object) -> str | None:
    return None if value is None else json.dumps(value)


def _rowid(cur: sqlite3.Cursor) -> int:
    assert cur.lastrowid is not None
    return cur.lastrowid


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
