"""The SQLite history: conversations, messages with stats and draft runs, search, export."""

from __future__ import annotations

import errno
import os
import random
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from app.history.db import SCHEMA_VERSION
from app.history.opening import HistoryOpenError
from app.history.store import DiskFullError, History


def test_conversations_messages_and_search(data_dir: Path) -> None:
    h = History()
    a = h.create_conversation("Rust lifetimes", system_prompt="Be brief.")
    b = h.create_conversation("Pasta")
    h.add_message(a.id, "user", "what is 'a?")
    reply = h.add_message(a.id, "assistant", "", complete=False)
    h.update_message(reply.id, "A lifetime.", stats={"mode": "ssd", "new_tokens": 3}, runs=[(2, True), (9, False)])
    h.add_message(b.id, "user", "carbonara 100%")
    assert [c.title for c in h.conversations("lifetime")] == ["Rust lifetimes"]
    assert [c.title for c in h.conversations("100%")] == ["Pasta"]
    assert h.conversations("_") == []
    msgs = h.messages(a.id)
    assert [m.role for m in msgs] == ["user", "assistant"]
    assert msgs[1].stats == {"mode": "ssd", "new_tokens": 3} and msgs[1].runs == [(2, True), (9, False)]
    h.delete_from(a.id, msgs[1].id)
    assert len(h.messages(a.id)) == 1
    h.rename(b.id, "Carbonara")
    h.delete(a.id)
    assert [c.title for c in h.conversations()] == ["Carbonara"]
    h.close()
    db = sqlite3.connect(data_dir / "history.sqlite3")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_exports(data_dir: Path) -> None:
    h = History()
    c = h.create_conversation("Demo", system_prompt="You are terse.")
    h.add_message(c.id, "user", "hi")
    h.add_message(
        c.id,
        "assistant",
        "```py\nprint(1)\n```",
        stats={"mode": "ssd", "new_tokens": 5, "tokens_per_second": 8.0, "hit_rate": 0.5},
    )
    md = h.export_markdown(c.id)
    assert md.startswith("# Demo") and "**System:** You are terse." in md and "print(1)" in md
    assert "hit rate 50%" in md
    data = h.export_json(c.id)
    assert data["system_prompt"] == "You are terse." and data["messages"][1]["stats"]["mode"] == "ssd"


# -- reply versions -------------------------------------------------------------------------------
def test_reply_versions_switch_drop_and_export(data_dir: Path) -> None:
    h = History()
    c = h.create_conversation("Versions")
    reply = h.add_turn(c.id, "name a fruit")
    h.update_message(reply.id, "apple", stats={"mode": "ar", "new_tokens": 1})
    for text in ("pear", "plum"):
        h.begin_version(reply.id)
        assert h.message(reply.id).content == "" and not h.message(reply.id).complete
        h.update_message(reply.id, text, stats={"mode": "ssd", "new_tokens": 1})
    shown = h.message(reply.id)
    assert (shown.content, shown.version, shown.versions) == ("plum", 3, 3)
    assert h.show_version(reply.id, -1) and h.message(reply.id).content == "pear"
    assert h.show_version(reply.id, -1) and (h.message(reply.id).content, h.message(reply.id).version) == ("apple", 1)
    assert not h.show_version(reply.id, -1)  # nothing before the first
    assert h.show_version(reply.id, 2) and h.message(reply.id).content == "plum"
    assert not h.show_version(reply.id, 1)
    h.begin_version(reply.id)
    h.drop_version(reply.id)  # the new version produced nothing: the last one shows again
    assert (h.message(reply.id).content, h.message(reply.id).versions) == ("plum", 3)
    h.show_version(reply.id, -1)
    assert [(v.content, v.shown) for v in h.versions(reply.id)] == [("apple", False), ("pear", True), ("plum", False)]
    assert [m.content for m in h.messages(c.id)] == ["name a fruit", "pear"]

    data = h.export_json(c.id)
    assert data["messages"][1]["content"] == "pear" and data["messages"][1]["version"] == 2
    assert [v["content"] for v in data["messages"][1]["versions"]] == ["apple", "pear", "plum"]
    assert "versions" not in data["messages"][0]
    md = h.export_markdown(c.id)
    assert "## Assistant (version 2 of 3, shown)\n\npear" in md
    assert "### Assistant, version 1 of 3\n\napple" in md and "### Assistant, version 3 of 3\n\nplum" in md
    h.delete(c.id)
    assert h._db.execute("SELECT COUNT(*) FROM versions").fetchone()[0] == 0
    h.close()


def test_a_version_1_database_is_migrated(data_dir: Path) -> None:
    path = data_dir / "history.sqlite3"
    path.parent.mkdir(parents=True)
    old = sqlite3.connect(path)
    old.executescript(V1_SCHEMA)
    old.execute("INSERT INTO conversations (title, system_prompt, created, updated) VALUES ('Old', '', 1, 1)")
    old.execute("INSERT INTO messages (conversation_id, role, content, created) VALUES (1, 'user', 'hi', 1)")
    old.execute("INSERT INTO messages (conversation_id, role, content, stats, created)"
                " VALUES (1, 'assistant', 'hello', '{\"mode\": \"ar\"}', 2)")
    old.commit()
    old.close()
    h = History()
    assert h.recovery is None
    assert [(m.content, m.version, m.versions) for m in h.messages(1)] == [("hi", 1, 1), ("hello", 1, 1)]
    h.begin_version(2)
    h.update_message(2, "hello again")
    assert h.show_version(2, -1) and h.message(2).content == "hello" and h.message(2).versions == 2
    assert h._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    h.close()


# -- a full disk ----------------------------------------------------------------------------------
def fill(h: History) -> None:
    """Injected ENOSPC at the write layer: SQLite's own size limit makes every write that grows the file
    fail with SQLITE_FULL ("database or disk is full"), exactly as a full disk does."""
    pages = h._db.execute("PRAGMA page_count").fetchone()[0]
    h._db.execute(f"PRAGMA max_page_count = {pages}")


def unfill(h: History) -> None:
    h._db.execute("PRAGMA max_page_count = 1073741823")


def test_a_full_disk_is_one_error_and_changes_nothing(data_dir: Path) -> None:
    h = History()
    c = h.create_conversation("Full")
    reply = h.add_turn(c.id, "write a lot")
    fill(h)
    with pytest.raises(DiskFullError) as caught:
        h.update_message(reply.id, "x" * 50_000)
    assert caught.value.errno == errno.ENOSPC and "database or disk is full" in str(caught.value)
    with pytest.raises(DiskFullError):
        h.add_turn(c.id, "y" * 50_000)
    assert [m.content for m in h.messages(c.id)] == ["write a lot", ""]  # nothing half-written
    unfill(h)
    h.update_message(reply.id, "x" * 50_000)
    assert h.message(reply.id).content == "x" * 50_000
    h.close()


# -- a damaged database ---------------------------------------------------------------------------
def build(data_dir: Path) -> dict[int, str]:
    """A history big enough to span many pages; returns message id -> content."""
    h = History()
    for n in range(40):
        c = h.create_conversation(f"Chat {n}")
        for k in range(3):
            reply = h.add_turn(c.id, f"question {n}.{k} " + "q" * 300)
            h.update_message(reply.id, f"answer {n}.{k} " + "a" * 600, stats={"mode": "ar", "new_tokens": 9})
    h.begin_version(reply.id)
    h.update_message(reply.id, "a second version")
    contents = {m.id: m.content for c in h.conversations() for m in h.messages(c.id)}
    h.close()
    assert not (data_dir / "history.sqlite3-wal").exists()  # closed cleanly: everything is in the file
    return contents


def overwrite_header(path: Path) -> None:
    with path.open("r+b") as f:
        f.write(random.Random(1).randbytes(100))


def truncate(path: Path) -> None:
    os.truncate(path, path.stat().st_size // 2)


def garbage_mid_file(path: Path) -> None:
    with path.open("r+b") as f:
        f.seek(path.stat().st_size // 2 // 4096 * 4096)
        f.write(random.Random(2).randbytes(3 * 4096))


@pytest.mark.parametrize("damage", [overwrite_header, truncate, garbage_mid_file])
def test_a_damaged_database_is_moved_aside_and_salvaged(data_dir: Path, damage: Callable[[Path], None]) -> None:
    contents = build(data_dir)
    path = data_dir / "history.sqlite3"
    damage(path)
    broken = path.read_bytes()
    h = History()
    assert h.recovery is not None
    aside = h.recovery.damaged
    assert aside.parent == data_dir and aside.name.startswith("history-damaged-") and aside.read_bytes() == broken
    assert h._db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    kept = {m.id: m.content for c in h.conversations() for m in h.messages(c.id)}
    assert kept and all(contents[i] == text for i, text in kept.items())  # what is kept is intact
    if damage is overwrite_header:
        assert kept == contents and h.message(max(kept)).versions == 2  # a rebuilt header reads everything
    else:
        assert len(kept) >= len(contents) // 3
    assert h.recovery.messages == len(kept)
    text = h.recovery.text
    assert text.startswith("The chat history was damaged (") and str(aside) in text
    assert f"with {len(kept)} messages could be read and were kept" in text
    c = h.create_conversation("after")  # the fresh database works
    h.add_turn(c.id, "still usable")
    count = len(h.conversations())
    h.close()
    again = History()
    assert again.recovery is None and len(again.conversations()) == count
    again.close()


def test_a_file_that_is_not_a_database_at_all(data_dir: Path) -> None:
    path = data_dir / "history.sqlite3"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"this is a note, not a database\n" * 400)
    h = History()
    assert h.recovery is not None and h.recovery.conversations == 0
    assert "nothing in it could be read" in h.recovery.text and h.conversations() == []
    h.close()


def test_an_unopenable_path_is_not_called_damage(data_dir: Path) -> None:
    (data_dir / "history.sqlite3").mkdir(parents=True)  # a folder where the file should be
    with pytest.raises(HistoryOpenError, match="it is a folder, not a file"):
        History()
    assert (data_dir / "history.sqlite3").is_dir() and len(list(data_dir.iterdir())) == 1


V1_SCHEMA = """
CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL,
    system_prompt TEXT NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE, role TEXT NOT NULL,
    content TEXT NOT NULL, stats TEXT, runs TEXT, complete INTEGER NOT NULL DEFAULT 1, created REAL NOT NULL);
CREATE INDEX messages_by_conversation ON messages(conversation_id, id);
"""
