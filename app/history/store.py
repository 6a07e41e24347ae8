"""Conversation history in SQLite (WAL): conversations, messages, reply versions, per-message stats and draft runs."""

from __future__ import annotations

import errno
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.history.db import Recovery
from app.history.export import export_json, export_markdown
from app.history.opening import open_history
from app.history.records import Conversation, Message, Runs, Version
from engine import user_data_dir

MESSAGE_COLUMNS = (
    "m.*, (SELECT COUNT(*) FROM versions v WHERE v.message_id = m.id) AS others,"
    " (SELECT COUNT(*) FROM versions v WHERE v.message_id = m.id AND v.position < m.position) AS before")


class DiskFullError(OSError):
    """A write to the history failed because the disk (or the database's size limit) is full."""

    def __init__(self, detail: str) -> None:
        super().__init__(errno.ENOSPC, f"the disk is full ({detail})")


def history_path() -> Path:
    """The database file under the user data folder."""
    return user_data_dir() / "history.sqlite3"


class History:
    """Read and write conversations; every write commits at once, so a crash loses nothing written.

    A write that finds the disk full raises :class:`DiskFullError` and leaves the database as it was.
    ``recovery`` is set when the file was damaged at open and a fresh one was started from what was readable.
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or history_path()
        self._db, self.recovery = open_history(self.path)  # HistoryOpenError says why it cannot

    def close(self) -> None:
        """Close the database (idempotent)."""
        self._db.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One transaction: committed at the end, rolled back on any error; a full disk is a DiskFullError."""
        try:
            yield self._db
            self._db.commit()
        except BaseException as exc:
            self._db.rollback()
            if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
                raise DiskFullError(str(exc)) from exc
            raise

    # -- conversations ----------------------------------------------------------------------------
    def create_conversation(self, title: str = "New chat", system_prompt: str = "") -> Conversation:
        """A new, empty conversation."""
        now = time.time()
        with self._write() as db:
            cur = db.execute("INSERT INTO conversations (title, system_prompt, created, updated) VALUES (?, ?, ?, ?)",
                             (title, system_prompt, now, now))
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
        with self._write() as db:
            db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))

    def set_system_prompt(self, conversation_id: int, prompt: str) -> None:
        """Change a conversation's system prompt."""
        with self._write() as db:
            db.execute("UPDATE conversations SET system_prompt = ? WHERE id = ?", (prompt, conversation_id))

    def delete(self, conversation_id: int) -> None:
        """Delete a conversation with its messages and their versions."""
        with self._write() as db:
            db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    # -- messages ---------------------------------------------------------------------------------
    def add_message(self, conversation_id: int, role: str, content: str, *,
                    stats: dict[str, Any] | None = None, runs: Runs | None = None,
                    complete: bool = True) -> Message:
        """Append a message and touch the conversation."""
        with self._write() as db:
            message_id = self._insert(db, conversation_id, role, content, stats, runs, complete)
        return self.message(message_id)

    def add_turn(self, conversation_id: int, text: str) -> Message:
        """Append the user's ``text`` and an empty, incomplete reply in one transaction; returns the reply."""
        with self._write() as db:
            self._insert(db, conversation_id, "user", text, None, None, True)
            reply_id = self._insert(db, conversation_id, "assistant", "", None, None, False)
        return self.message(reply_id)

    def update_message(self, message_id: int, content: str, *, stats: dict[str, Any] | None = None,
                       runs: Runs | None = None, complete: bool = True, reasoning: str = "") -> None:
        """Overwrite a message's shown version (used while a reply streams, and when it ends)."""
        with self._write() as db:
            db.execute("UPDATE messages SET content = ?, stats = ?, runs = ?, complete = ?, reasoning = ? WHERE id = ?",
                       (content, _dump(stats), _dump(runs), int(complete), reasoning, message_id))

    def message(self, message_id: int) -> Message:
        """One message by id (``KeyError`` if absent)."""
        row = self._db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?", (message_id,)).fetchone()
        if row is None:
            raise KeyError(message_id)
        return _message(row)

    def messages(self, conversation_id: int) -> list[Message]:
        """A conversation's messages (each reply as its shown version), oldest first."""
        rows = self._db.execute(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.conversation_id = ? ORDER BY m.id",
                                (conversation_id,)).fetchall()
        return [_message(r) for r in rows]

    def delete_from(self, conversation_id: int, message_id: int) -> None:
        """Delete ``message_id`` and every later message of the conversation (edit, a failed reply)."""
        with self._write() as db:
            db.execute("DELETE FROM messages WHERE conversation_id = ? AND id >= ?", (conversation_id, message_id))

    # -- reply versions ---------------------------------------------------------------------------
    def begin_version(self, message_id: int) -> None:
        """Keep the reply's shown version and make its row an empty, incomplete new version (Regenerate)."""
        with self._write() as db:
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise KeyError(message_id)
            self._keep(db, row)
            top = db.execute("SELECT MAX(position) FROM versions WHERE message_id = ?", (message_id,)).fetchone()[0]
            db.execute("UPDATE messages SET content = '', reasoning = '', stats = NULL, runs = NULL, complete = 0,"
                       " tool_calls = NULL,"
                       " position = ?,"
                       " created = ? WHERE id = ?", (top + 1, time.time(), message_id))

    def drop_version(self, message_id: int) -> None:
        """Undo :meth:`begin_version`: the newest kept version is shown again (the new one produced nothing)."""
        with self._write() as db:
            row = db.execute("SELECT id FROM versions WHERE message_id = ? ORDER BY position DESC LIMIT 1",
                             (message_id,)).fetchone()
            if row is not None:
                self._restore(db, message_id, row["id"])

    def show_version(self, message_id: int, step: int) -> bool:
        """Show the version ``step`` places after (negative: before) the shown one; False if there is none."""
        with self._write() as db:
            shown = db.execute("SELECT position FROM messages WHERE id = ?", (message_id,)).fetchone()
            if shown is None:
                return False
            op, order = (">", "ASC") if step > 0 else ("<", "DESC")
            rows = db.execute(f"SELECT id FROM versions WHERE message_id = ? AND position {op} ? ORDER BY position"
                              f" {order}", (message_id, shown["position"])).fetchall()
            if not step or len(rows) < abs(step):
                return False
            row = db.execute("SELECT * FROM messages WHERE id = ?", (message_id,)).fetchone()
            self._keep(db, row)
            self._restore(db, message_id, rows[abs(step) - 1]["id"])
        return True

    def versions(self, message_id: int) -> list[Version]:
        """Every version of a message, oldest first (``shown`` marks the one the conversation shows)."""
        rows = self._db.execute(
            "SELECT content, stats, complete, created, position, 1 AS shown, reasoning FROM messages WHERE id = ?"
            " UNION ALL SELECT content, stats, complete, created, position, 0, reasoning FROM versions"
            " WHERE message_id = ? ORDER BY position", (message_id, message_id)).fetchall()
        return [Version(r["content"], _load(r["stats"]), bool(r["complete"]), r["created"], bool(r["shown"]),
                        r["reasoning"]) for r in rows]

    def _keep(self, db: sqlite3.Connection, row: sqlite3.Row) -> None:
        db.execute("INSERT INTO versions (message_id, position, content, stats, runs, complete, created, reasoning)"
                   " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (row["id"], row["position"], row["content"], row["stats"],
                                                        row["runs"], row["complete"], row["created"], row["reasoning"]))

    def _restore(self, db: sqlite3.Connection, message_id: int, version_id: int) -> None:
        db.execute("UPDATE messages SET (content, stats, runs, complete, created, position, reasoning) = (SELECT"
                   " content, stats, runs, complete, created, position, reasoning FROM versions WHERE id = ?)"
                   " WHERE id = ?",
                   (version_id, message_id))
        db.execute("DELETE FROM versions WHERE id = ?", (version_id,))

    def _insert(self, db: sqlite3.Connection, conversation_id: int, role: str, content: str,
                stats: dict[str, Any] | None, runs: Runs | None, complete: bool) -> int:
        now = time.time()
        cur = db.execute("INSERT INTO messages (conversation_id, role, content, stats, runs, complete, created)"
                         " VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (conversation_id, role, content, _dump(stats), _dump(runs), int(complete), now))
        db.execute("UPDATE conversations SET updated = ? WHERE id = ?", (now, conversation_id))
        return _rowid(cur)

    # -- export -----------------------------------------------------------------------------------
    def export_json(self, conversation_id: int) -> dict[str, Any]:
        """The conversation as a JSON-ready dict (system prompt, messages with stats and reply versions)."""
        return export_json(self.conversation(conversation_id), self.messages(conversation_id), self.versions)

    def export_markdown(self, conversation_id: int) -> str:
        """The conversation as a Markdown document (every version of a regenerated reply)."""
        return export_markdown(self.conversation(conversation_id), self.messages(conversation_id), self.versions)

    def export_file(self, conversation_id: int, path: Path) -> None:
        """Write a conversation as Markdown (``.md``) or JSON (any other suffix)."""
        if path.suffix.lower() == ".md":
            path.write_text(self.export_markdown(conversation_id), encoding="utf-8")
        else:
            path.write_text(json.dumps(self.export_json(conversation_id), indent=2, ensure_ascii=False),
                            encoding="utf-8")


def _conversation(row: sqlite3.Row) -> Conversation:
    return Conversation(row["id"], row["title"], row["system_prompt"], row["created"], row["updated"])


def _message(row: sqlite3.Row) -> Message:
    runs = _load(row["runs"])
    return Message(row["id"], row["conversation_id"], row["role"], row["content"], _load(row["stats"]),
                   [(int(n), bool(d)) for n, d in runs] if runs is not None else None,
                   bool(row["complete"]), row["created"], row["before"] + 1, row["others"] + 1,
                   reasoning=row["reasoning"], tool_calls=_load(row["tool_calls"]), tool_call_id=row["tool_call_id"])


def _dump(value: object) -> str | None:
    return None if value is None else json.dumps(value)


def _load(text: str | None) -> Any:
    return json.loads(text) if text else None


def _rowid(cur: sqlite3.Cursor) -> int:
    assert cur.lastrowid is not None
    return cur.lastrowid


def _escape_like(text: str) -> str:
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


__all__ = ["DiskFullError", "History", "Recovery", "history_path"]
