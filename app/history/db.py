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
import struct
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2  # 1: conversations and messages; 2: reply versions (messages.position, versions)
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
    position INTEGER NOT NULL DEFAULT 0
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
    created REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS versions_by_message ON versions(message_id, position);
"""
# The columns salvage copies, per table, with the type each value must have (None: may be NULL).
COLUMNS: dict[str, dict[str, tuple[type, ...]]] = {
    "conversations": {"id": (int,), "title": (str,), "system_prompt": (str,), "created": (float, int),
                      "updated": (float, int)},
    "messages": {"id": (int,), "conversation_id": (int,), "role": (str,), "content": (str,),
                 "stats": (str, type(None)), "runs": (str, type(None)), "complete": (int,),
                 "created": (float, int), "position": (int,)},
    "versions": {"id": (int,), "message_id": (int,), "position": (int,), "content": (str,),
                 "stats": (str, type(None)), "runs": (str, type(None)), "complete": (int,),
                 "created": (float, int)},
}
INDEXES = {"messages_by_conversation", "versions_by_message"}
DAMAGE_CODES = {sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB}
SCAN_PAST_LAST = 500  # rowids tried past the last readable one when the table's end is unreadable
MAGIC = b"SQLite format 3\x00"
PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536)


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
    columns = {row[1] for row in db.execute("PRAGMA table_info(messages)")}
    if "position" not in columns:
        db.execute("ALTER TABLE messages ADD COLUMN position INTEGER NOT NULL DEFAULT 0")
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
        tables = _read_tables(copy)
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


# -- reading a damaged file -----------------------------------------------------------------------
def _read_tables(copy: Path) -> dict[str, list[dict[str, Any]]]:
    """The readable rows of each known table; a file whose header is gone is read with a rebuilt one."""
    for attempt in _readable_copies(copy):
        db = sqlite3.connect(attempt)
        db.text_factory = lambda b: b.decode("utf-8", "replace")
        try:
            names = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            log.info("salvage: %s unreadable as is (%s)", attempt.name, exc)
            db.close()
            continue
        try:
            return {t: _read_rows(db, t) for t in COLUMNS if t in names}
        finally:
            db.close()
    return {}


def _readable_copies(copy: Path) -> Iterator[Path]:
    """``copy`` cut to whole pages, or (if its header is not SQLite's) copies with a rebuilt header per page size.

    The header's page count is set to the pages the file has, so SQLite reports a page past the end
    as damage instead of reading it as zeros (a file cut short would otherwise yield rows whose
    text ends in NULs).
    """
    data = copy.read_bytes()
    if data[:16] == MAGIC:
        size = struct.unpack_from(">H", data, 16)[0]
        size = 65536 if size == 1 else size
        if size in PAGE_SIZES:
            pages = len(data) // size
            whole = bytearray(data[:pages * size])
            struct.pack_into(">I", whole, 28, pages)
            whole[92:96] = whole[24:28]  # the page count is valid for this change counter
            copy.write_bytes(bytes(whole))
        yield copy
        return
    if len(data) < 512:
        return
    wal = Path(f"{copy}-wal").exists()
    for size in PAGE_SIZES:
        if len(data) % size == 0 or size == PAGE_SIZES[0]:
            fixed = copy.with_name(f"header-{size}.sqlite3")
            pages = len(data) // size
            fixed.write_bytes(_header(size, pages, wal=wal) + data[100:pages * size])
            if wal:
                shutil.copyfile(f"{copy}-wal", f"{fixed}-wal")
            yield fixed


def _header(page_size: int, pages: int, *, wal: bool) -> bytes:
    """A standard 100-byte SQLite header (file format 3, UTF-8) for a file of ``pages`` pages."""
    h = bytearray(100)
    h[0:16] = MAGIC
    struct.pack_into(">H", h, 16, 1 if page_size == 65536 else page_size)
    h[18] = h[19] = 2 if wal else 1  # write and read versions: 2 = WAL
    h[21:24] = bytes((64, 32, 32))  # payload fractions, fixed by the format
    struct.pack_into(">IIIIIIIII", h, 24, 1, pages, 0, 0, 1, 4, 0, 0, 1)  # counter, size, freelist, cookie...
    struct.pack_into(">II", h, 92, 1, sqlite3.sqlite_version_info[0] * 1_000_000
                     + sqlite3.sqlite_version_info[1] * 1000 + sqlite3.sqlite_version_info[2])
    return bytes(h)


def _read_rows(db: sqlite3.Connection, table: str) -> list[dict[str, Any]]:
    """Every row of ``table`` that can be read: a scan, then one rowid at a time past where it broke."""
    rows: dict[int, dict[str, Any]] = {}
    try:
        for row in _select(db, table, ""):
            rows[row["id"]] = row
        return _valid(table, rows)
    except sqlite3.DatabaseError as exc:
        log.info("salvage: reading %s stopped after %d rows: %s", table, len(rows), exc)
    last = max(rows, default=0)
    for query in (f"SELECT seq FROM sqlite_sequence WHERE name = '{table}'", f"SELECT max(rowid) FROM {table}"):
        try:
            found = db.execute(query).fetchone()
        except sqlite3.DatabaseError:
            continue
        if found and isinstance(found[0], int):
            last = max(last, found[0])
    rowid, misses = 0, 0
    while rowid < last or misses < SCAN_PAST_LAST:
        rowid += 1
        if rowid in rows:
            misses = 0
            continue
        try:
            found_rows = list(_select(db, table, f" WHERE rowid = {rowid}"))
        except sqlite3.DatabaseError:
            found_rows = []
        for row in found_rows:
            rows[row["id"]] = row
        misses = 0 if found_rows else misses + 1
    return _valid(table, rows)


def _select(db: sqlite3.Connection, table: str, where: str) -> Iterator[dict[str, Any]]:
    cur = db.execute(f"SELECT * FROM {table}{where} ORDER BY rowid")
    names = [d[0] for d in cur.description]
    for values in cur:
        yield dict(zip(names, values, strict=True))


def _valid(table: str, rows: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows whose known columns hold values of the right type (a damaged page can yield odd ones)."""
    spec = COLUMNS[table]
    out = []
    for rowid in sorted(rows):
        row = {"position": 0, **rows[rowid]} if table == "messages" else rows[rowid]
        zeroed = any(isinstance(v, str) and "\x00" in v for v in row.values())  # text from a zeroed page
        if not zeroed and all(isinstance(row.get(name), kinds) for name, kinds in spec.items()):
            out.append({name: row[name] for name in spec})
    return out


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
