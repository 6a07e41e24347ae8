"""A model's thinking in the app (issue 57): a collapsible block above the answer, open while it streams and closed
once the answer starts; kept apart in the history and the export; sent back in ``reasoning_content``; the Settings
switch; the tokens/s readout counts thinking tokens too."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import QUrl
from pytestqt.qtbot import QtBot

from app.chat.thinking import LiveThinking
from app.chat.view import ChatView
from app.history.db import SCHEMA_VERSION
from app.history.records import Message
from app.history.store import History
from app.settings.dialog import SettingsDialog
from app.settings.values import Settings
from engine import ChatFormat
from tests.app_helpers import QT_STRICT, SteppingEngine, closing, send, stepping_window

__all__ = ["closing"]
pytestmark = QT_STRICT

THOUGHT = "The user greets me. I should greet back."
REPLY = f"<think> {THOUGHT} </think> Hello there, friend."
CALLED = f'<think> {THOUGHT} </think> Sure. <tool_call> {{"name": "search", "arguments": {{}}}} </tool_call>'


class ThinkingEngine(SteppingEngine):
    """A stand-in whose replies think first, with a Qwen 3-like (hermes) chat format; it records the chats sent."""

    def __init__(self, reply: str = REPLY) -> None:
        super().__init__(reply, step_s=0.0, per_round=2)
        self.sent: list[list[Any]] = []
        self.variables: list[Mapping[str, Any] | None] = []

    def messages_tokens(self, messages: Sequence[Any], variables: Mapping[str, Any] | None = None,
                        template: str | None = None, tools: list[dict[str, Any]] | None = None) -> list[int]:
        self.sent.append(list(messages))
        self.variables.append(variables)
        return list(range(4 * len(messages)))

    def chat_format(self, template: str | None = None) -> ChatFormat:
        return ChatFormat("hermes", "Hermes, Qwen 2.5, Qwen 3, QwQ", True, True, False, True)

    def reply_section(self, messages: Sequence[Any], variables: Mapping[str, Any] | None = None,
                      template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        return "content"


def shown(view: ChatView) -> str:
    return view.document().toPlainText()


def test_the_live_block_is_open_while_thinking_streams_and_closed_once_the_answer_starts(qtbot: QtBot) -> None:
    view = ChatView()
    qtbot.addWidget(view)
    view.begin_stream()
    view.append_thinking("Let me think about this.")
    view._repaint()
    assert "Let me think about this." in shown(view) and "Thinking…" in shown(view)
    view.append_token("The answer is 4.", False)
    view._repaint()
    assert "The answer is 4." in shown(view) and "Thought for" in shown(view)
    assert "Let me think" not in shown(view)  # closed once the answer started
    view.anchorClicked.emit(QUrl("think:live"))  # a click opens it again
    assert "Let me think about this." in shown(view)
    view.anchorClicked.emit(QUrl("think:live"))
    assert "Let me think" not in shown(view)


def test_the_thinking_time_runs_from_its_first_text_to_the_answers_first_text() -> None:
    now = [10.0]
    live = LiveThinking(lambda: now[0])
    live.add("hmm")
    now[0] = 13.2
    assert live.expanded and live.seconds == pytest.approx(3.2)
    live.answer_began()
    now[0] = 20.0
    assert not live.expanded and live.seconds == pytest.approx(3.2)
    assert "Thought for 3.2 s" in live.html()


def test_a_saved_replys_block_starts_closed_and_a_click_opens_it(qtbot: QtBot) -> None:
    view = ChatView()
    qtbot.addWidget(view)
    reply = Message(7, 1, "assistant", "Four.", {"thinking_s": 1.25}, None, True, 0.0, reasoning="Two and two.")
    view.set_messages([reply])
    assert "Four." in shown(view) and "Thought for 1.2 s" in shown(view) and "Two and two." not in shown(view)
    view.anchorClicked.emit(QUrl("think:7"))
    assert "Two and two." in shown(view)


def test_a_thinking_reply_is_shown_saved_and_exported_apart_from_its_answer(qtbot: QtBot, closing: list[Any],
                                                                          tmp_path: Path) -> None:
    engine = ThinkingEngine()
    w = stepping_window(qtbot, engine)
    closing.append(w)
    reply_id = send(qtbot, w, "Hi")
    m = w.history.message(reply_id)
    assert m.content.strip() == "Hello there, friend." and "<think>" not in m.content and "</think>" not in m.content
    assert m.reasoning.strip() == THOUGHT
    assert m.stats is not None and isinstance(m.stats.get("thinking_s"), float)
    assert m.stats["new_tokens"] == len(REPLY.split(" "))  # the thinking's tokens were generated: they count
    text = shown(w.chat_view)
    assert "Thought for" in text and "Hello there, friend." in text and THOUGHT not in text and "<think>" not in text
    assert w.conversation_id is not None
    exported = w.history.export_json(w.conversation_id)["messages"][-1]
    assert exported["content"].strip() == "Hello there, friend." and exported["reasoning_content"].strip() == THOUGHT
    md = w.history.export_markdown(w.conversation_id)
    assert "<details>\n<summary>Thought for" in md and THOUGHT in md.split("</details>")[0]
    assert "Hello there, friend." in md.split("</details>")[1]
    path = tmp_path / "chat.json"
    w.history.export_file(w.conversation_id, path)
    assert json.loads(path.read_text(encoding="utf-8"))["messages"][-1]["reasoning_content"].strip() == THOUGHT

    send(qtbot, w, "And now?")  # the earlier turn's thinking goes back to the template in reasoning_content
    earlier = [msg for msg in engine.sent[-1] if msg["role"] == "assistant"]
    assert earlier and earlier[0]["reasoning_content"].strip() == THOUGHT
    assert "<think>" not in earlier[0]["content"]


def test_a_tool_calls_markup_never_shows_as_text(qtbot: QtBot, closing: list[Any]) -> None:
    w = stepping_window(qtbot, ThinkingEngine(CALLED))
    closing.append(w)
    m = w.history.message(send(qtbot, w, "Look it up"))
    assert m.content.strip() == "Sure." and "tool_call" not in shown(w.chat_view)


@pytest.mark.parametrize(("choice", "sent"), [("on", {"enable_thinking": True}), ("off", {"enable_thinking": False}),
                                              ("default", {})])
def test_the_thinking_switch_reaches_the_template(qtbot: QtBot, closing: list[Any], choice: str,
                                                   sent: dict[str, Any]) -> None:
    engine = ThinkingEngine()
    w = stepping_window(qtbot, engine)
    closing.append(w)
    w.apply_settings(w.settings.with_values(thinking=choice))
    send(qtbot, w, "Hi")
    assert dict(engine.variables[-1] or {}) == sent
    assert w.store.load().thinking == choice  # kept in the settings


def test_the_thinking_switch_is_greyed_out_with_a_note_where_the_model_has_none(qtbot: QtBot) -> None:
    for switch, enabled in ((False, False), (True, True), (None, True)):
        dialog = SettingsDialog(Settings(), gpu_offload=False, thinking_switch=switch)
        qtbot.addWidget(dialog)
        combo = dialog.choices["thinking"]
        assert combo.isEnabled() is enabled and dialog.thinking_note.isHidden() is enabled
        assert [combo.itemText(i) for i in range(combo.count())] == ["model default", "on", "off"]


def test_history_keeps_the_thinking_apart_through_versions_and_a_schema_2_file(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite3"
    db = sqlite3.connect(path)  # a file as schema 2 wrote it: no reasoning columns
    db.executescript(
        "CREATE TABLE conversations (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, system_prompt TEXT"
        " NOT NULL DEFAULT '', created REAL NOT NULL, updated REAL NOT NULL);"
        "CREATE TABLE messages (id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id INTEGER NOT NULL, role TEXT"
        " NOT NULL, content TEXT NOT NULL, stats TEXT, runs TEXT, complete INTEGER NOT NULL DEFAULT 1, created REAL"
        " NOT NULL, position INTEGER NOT NULL DEFAULT 0);"
        "CREATE TABLE versions (id INTEGER PRIMARY KEY AUTOINCREMENT, message_id INTEGER NOT NULL, position INTEGER"
        " NOT NULL, content TEXT NOT NULL, stats TEXT, runs TEXT, complete INTEGER NOT NULL DEFAULT 1, created REAL"
        " NOT NULL);"
        "INSERT INTO conversations VALUES (1, 'old', '', 1.0, 1.0);"
        "INSERT INTO messages VALUES (1, 1, 'user', 'hi', NULL, NULL, 1, 1.0, 0);"
        "INSERT INTO messages VALUES (2, 1, 'assistant', 'hello', NULL, NULL, 1, 1.0, 0);"
        "PRAGMA user_version = 2;")
    db.close()
    h = History(path)
    assert h._db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION >= 3
    assert h.message(2).reasoning == "" and h.message(2).content == "hello"
    h.update_message(2, "Four.", reasoning="Two and two.")
    h.begin_version(2)
    assert h.message(2).reasoning == "" and h.message(2).content == ""
    h.update_message(2, "4", reasoning="Add them.")
    assert [(v.content, v.reasoning) for v in h.versions(2)] == [("Four.", "Two and two."), ("4", "Add them.")]
    assert h.show_version(2, -1) and (h.message(2).content, h.message(2).reasoning) == ("Four.", "Two and two.")
    exported = h.export_json(1)["messages"][1]
    assert exported["reasoning_content"] == "Two and two."
    assert [v.get("reasoning_content") for v in exported["versions"]] == ["Two and two.", "Add them."]
    h.close()
    again = History(path)
    assert again.message(2).reasoning == "Two and two."
    again.close()
