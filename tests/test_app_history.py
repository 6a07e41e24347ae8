"""The SQLite history: conversations, messages with stats and draft runs, search, export."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from app.history import History


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
