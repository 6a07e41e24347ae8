"""Opening the history database: the schema and its migrations, a damage check, and salvage.

A damaged file (its header overwritten, the file cut short, garbage written over pages) must not
lock the user out. :func:`open_database` runs ``PRAGMA quick_check`` first; when SQLite reports
damage, the file is moved aside (next to it, with a ``damaged-<time>`` name), every row that can
still be read from a copy of it is put into a fresh database, and a :class:`Recovery` says what
happened. Only damage moves a file: a locked or unreadable file is left alone and its error raised.
"""

from __future__ import annotations

import datetime
import logging
import shutil
import sqlite3
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.history.damaged import read_tables

log = logging.getLogger(__name__)

SCHEMA_VERSION = 4  # 1: conversations and messages; 2: reply versions (messages.position, versions);
# 3: a reply's thinking apart from its answer (messages.reasoning, versions.reasoning); 4: tool calls (a reply's
# messages.tool_calls, OpenAI's JSON) and their results (role "tool" messages with messages.tool_call_id)
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
    created REAL NOT NULL,
    position INTEGER NOT NULL DEFAULT 0,
    reasoning TEXT NOT NULL DEFAULT '',
    tool_calls TEXT,
    tool_call_id TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS messages_by_conversation ON messages(conversation_id, id);
CREATE TABLE IF NOT EXISTS versions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
    position INTEGER NOT NULL,
    content TEXT NOT NULL,
    stats TEXT,
    runs TEXT,
    complete INTEGER NOT NULL DEFAULT 1,
    created REAL NOT NULL,
    reasoning TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS versions_by_message ON versions(message_id, position);
"""
# The columns salvage copies, per table, with the type each value must have (None: may be NULL).
COLUMNS: dict[str, dict[str, tuple[type, ...]]] = {
    "conversations": {"id": (int,), "title": (str,), "system_prompt": (str,), "created": (float, int),
                      "updated": (float, int)},
    "messages": {"id": (int,), "conversation_id": (int,), "role": (str,), "content": (str,),
                 "stats": (str, type(None)), "runs": (str, type(None)), "complete": (int,),
                 "created": (float, int), "position": (int,), "reasoning": (str,), "tool_calls": (str, type(None)),
                 "tool_call_id": (str,)},
    "versions": {"id": (int,), "message_id": (int,), "position": (int,), "content": (str,),
                 "stats": (str, type(None)), "runs": (str, type(None)), "complete": (int,),
                 "created": (float, int), "reasoning": (str,)},
}
INDEXES = {"messages_by_conversation", "versions_by_message"}
DAMAGE_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
ADDED = {"messages": {"position": "INTEGER NOT NULL DEFAULT 0", "reasoning": "TEXT NOT NULL DEFAULT ''",
                      "tool_calls": "TEXT", "tool_call_id": "TEXT NOT NULL DEFAULT ''"},
         "versions": {"reasoning": "TEXT NOT NULL DEFAULT ''"}}  # columns later schemas added, per table


@dataclass(frozen=True, slots=True)
class Recovery:
    """A damaged database was moved aside and what could be read was kept."""

    damaged: Path  # where the damaged file now is
    problem: str  # what SQLite said
    conversations: int
    messages: int

    @property
    def text(self) -> str:
        """One paragraph for the banner."""
        kept = (f"{_count(self.conversations, 'conversation')} with {_count(self.messages, 'message')}"
                " could be read and were kept" if self.conversations else "nothing in it could be read")
        return (f"The chat history was damaged ({self.problem}), so ssd-chat started a fresh one: {kept}."
                f" The damaged file was moved to {self.damaged}.")


def open_database(path: Path) -> tuple[sqlite3.Connection, Recovery | None]:
    """Open (creating or migrating) the history at ``path``; a damaged file is moved aside and salvaged."""
    problem = damage(path)
    recovery: Recovery | None = None
    if problem is not None:
        log.error("the history database %s is damaged: %s", path, problem)
        aside = _move_aside(path)
        db = _connect(path)
        counts = salvage(aside, db)
        recovery = Recovery(aside, problem, *counts)
        log.warning("%s", recovery.text)
    else:
        db = _connect(path)
    migrate(db)
    return db, recovery


def damage(path: Path) -> str | None:
    """What SQLite reports as damage in the database at ``path``, or None when it is sound (or absent)."""
    if not path.exists():
        return None
    db = sqlite3.connect(path)
    try:
        rows = db.execute("PRAGMA quick_check").fetchall()
    except sqlite3.DatabaseError as exc:
        if getattr(exc, "sqlite_errorcode", None) in DAMAGE_CODES:
            return str(exc)
        raise
    finally:
        db.close()
    problems = [str(r[0]) for r in rows if r[0] != "ok"]
    return problems[0] if problems else None


def migrate(db: sqlite3.Connection) -> None:
    """Bring any earlier schema up to :data:`SCHEMA_VERSION` (old rows become single-version replies); a file
    already there is not written (another program may hold a write lock on it)."""
    names = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master")}
    if db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION and set(COLUMNS) | INDEXES <= names:
        return
    db.executescript(_schema_without_indexes())
    for table, added in ADDED.items():
        columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
        for name, kind in added.items():
            if name not in columns:
                db.execute(f"ALTER TABLE {table} ADD COLUMN {name} {kind}")
    db.executescript(SCHEMA)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    db.commit()


def salvage(damaged: Path, db: sqlite3.Connection) -> tuple[int, int]:
    """Copy every readable row of ``damaged`` into ``db`` (a fresh database); (conversations, messages) kept."""
    db.executescript(SCHEMA)
    with tempfile.TemporaryDirectory(prefix="ssd-chat-salvage-") as tmp:
        copy = Path(tmp) / "copy.sqlite3"
        for suffix in ("", "-wal"):
            source = Path(f"{damaged}{suffix}")
            if source.exists():
                shutil.copyfile(source, Path(f"{copy}{suffix}"))
        tables = read_tables(copy, COLUMNS)
    conversations = {r["id"]: r for r in tables.get("conversations", [])}
    messages = tables.get("messages", [])
    orphans = sorted({m["conversation_id"] for m in messages} - set(conversations))
    for n, conv_id in enumerate(orphans, 1):  # messages whose conversation row was lost
        created = min(m["created"] for m in messages if m["conversation_id"] == conv_id)
        conversations[conv_id] = {"id": conv_id, "title": f"Recovered messages {n}", "system_prompt": "",
                                  "created": created, "updated": created}
    _insert(db, "conversations", list(conversations.values()))
    _insert(db, "messages", messages)
    kept = {m["id"] for m in messages}
    _insert(db, "versions", [v for v in tables.get("versions", []) if v["message_id"] in kept])
    db.commit()
    return len(conversations), len(messages)


# -- helpers --------------------------------------------------------------------------------------
def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path)
    db.row_factory = sqlite3.Row
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA foreign_keys=ON")
    return db


def _schema_without_indexes() -> str:
    return ";".join(s for s in SCHEMA.split(";") if "CREATE INDEX" not in s)


def _insert(db: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    names = list(COLUMNS[table])
    sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    db.executemany(sql, [[r[n] for n in names] for r in rows])


def _move_aside(path: Path) -> Path:
    """Rename the damaged file (and its WAL and shared-memory files) to ``<stem>-damaged-<time><suffix>``."""
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = path.with_name(f"{path.stem}-damaged-{stamp}{path.suffix}")
    n = 1
    while aside.exists():
        n += 1
        aside = path.with_name(f"{path.stem}-damaged-{stamp}-{n}{path.suffix}")
    for suffix in ("-wal", "-shm", ""):
        source = Path(f"{path}{suffix}")
        if source.exists():
            source.replace(Path(f"{aside}{suffix}"))
    return aside


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
