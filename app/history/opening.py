"""Opening the history file, or saying plainly why it cannot be opened and what the user can do.

Every check that can refuse runs before anything is written: a file made by a newer ssd-chat or by
another program is only ever read (through a read-only connection), never migrated or converted to
WAL, so the user can go back to the version that made it.
"""

from __future__ import annotations

import logging
import sqlite3
import tempfile
from pathlib import Path

from app.history.db import ADDED, COLUMNS, SCHEMA_VERSION, Recovery, open_database

log = logging.getLogger(__name__)

LOCK_WAIT_S = 5.0  # how long a start waits for another program's write to the history before it says so
OPTIONAL = {table: set(added) for table, added in ADDED.items()}  # columns older schemas lack (migrate adds them)


class HistoryOpenError(Exception):
    """The history cannot be opened; ``text`` says why and what to do, for a dialog."""

    def __init__(self, path: Path, problem: str, advice: str) -> None:
        self.path = path
        self.text = f"ssd-chat cannot open its chat history, {path}: {problem}.\n\n{advice}"
        super().__init__(self.text)


def open_history(path: Path) -> tuple[sqlite3.Connection, Recovery | None]:
    """:func:`~app.history.db.open_database` after the checks; every refusal is a :class:`HistoryOpenError`."""
    if path.is_dir():
        raise HistoryOpenError(path, "it is a folder, not a file",
                               "Move or rename that folder, then start ssd-chat again.")
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _read_only(path, exc) from None
    if path.exists():
        _check_existing(path)
    try:
        with tempfile.TemporaryFile(dir=folder):  # SQLite writes its journal beside the file
            pass
    except OSError as exc:
        raise _read_only(path, exc) from None
    try:
        return open_database(path)
    except sqlite3.OperationalError as exc:
        raise _explain(path, exc) from None


def _check_existing(path: Path) -> None:
    """Read the file's version and tables without writing anything; refuse a newer or foreign file."""
    try:
        db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=LOCK_WAIT_S)
    except sqlite3.OperationalError as exc:
        raise _explain(path, exc) from None
    try:
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        tables = {str(r[0]): {str(c[1]) for c in db.execute(f"PRAGMA table_info('{r[0]}')")}
                  for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()}
    except sqlite3.OperationalError as exc:
        raise _explain(path, exc) from None
    except sqlite3.DatabaseError:
        return  # damage: open_database moves the file aside and salvages it
    finally:
        db.close()
    if version > SCHEMA_VERSION:
        raise HistoryOpenError(path, f"it was made by a newer ssd-chat (history version {version}; this one reads "
                               f"up to {SCHEMA_VERSION})", "Start the newer ssd-chat, or move the file aside to "
                               "start a fresh history with this one. The file was not changed.")
    ours = {t: set(cols) - OPTIONAL.get(t, set()) for t, cols in COLUMNS.items()}
    required = ("conversations", "messages")
    if (tables and any(t not in tables or not ours[t] <= tables[t] for t in required)) \
            or any(t in tables and not ours[t] <= tables[t] for t in ours):
        raise HistoryOpenError(path, "it holds tables that are not ssd-chat's history (another program's file, "
                               "or one edited by hand)", "Move the file aside (rename it) to start a fresh "
                               "history. The file was not changed.")


def _read_only(path: Path, exc: OSError) -> HistoryOpenError:
    return HistoryOpenError(path, f"its folder cannot be written ({exc.strerror or exc})",
                            "Make the folder writable, or point SSD_CHAT_DATA_DIR at a folder you can write to.")


def _explain(path: Path, exc: sqlite3.OperationalError) -> HistoryOpenError:
    text = str(exc)
    log.error("cannot open the history %s: %s", path, text)
    if "locked" in text or "busy" in text:
        return HistoryOpenError(path, f"another program kept it locked for more than {LOCK_WAIT_S:g} s",
                                "Close the other program using it (another ssd-chat?), then start ssd-chat again.")
    if "readonly" in text or "read-only" in text:
        return _read_only(path, OSError(text))
    return HistoryOpenError(path, f"SQLite says: {text}", "Move the file aside (rename it) to start a fresh "
                            "history, or check the disk.")
