"""Tools in the chat window (issue 61), with the real test MCP server over stdio: a call's card and the user's
consent (allowed, denied, always), the result collapsed under the card and sent back as a ``tool`` message, a
crashing server, a timeout, Stop, a second round, the round cap, and a server that will not start."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from PySide6.QtCore import QUrl
from pytestqt.qtbot import QtBot

from app.chat import tool_turns
from app.chat.tool_cards import DENIED, PENDING, RUNNING
from app.main_window import MainWindow
from app.tools.toolbox import STOPPED
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, send, stepping_window
from tests.mcp_helpers import ToolEngine, call_text, configure, stdio_spec

__all__ = ["closing"]
pytestmark = QT_STRICT
SCREENSHOT_ENV = "SSD_CHAT_SCREENSHOTS"  # a folder to save the window's picture in (docs/screenshots when refreshed)
ANSWER = "The notes say: buy milk."


def shown(w: MainWindow) -> str:
    return w.chat_view.document().toPlainText()


def window(qtbot: QtBot, closing: list[Any], engine: ToolEngine, **spec: Any) -> MainWindow:
    configure(stdio_spec(**spec))
    w = stepping_window(qtbot, engine)
    closing.append(w)
    return w


def last_call_id(w: MainWindow) -> str:
    assert w.conversation_id is not None
    calls = [m.tool_calls for m in w.history.messages(w.conversation_id) if m.tool_calls]
    return str(calls[-1][0]["id"])


def answer(qtbot: QtBot, w: MainWindow, action: str, call_id: str) -> int:
    """Click ``action`` on a card; wait for the next reply's save (the model continued)."""
    with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS) as blocker:
        w.chat_view.anchorClicked.emit(QUrl(f"tool:{action}:{call_id}"))
    return int(blocker.args[0])


def test_an_allowed_call_runs_its_result_shows_collapsed_and_the_model_answers_with_it(
        qtbot: QtBot, closing: list[Any], tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("buy milk", encoding="utf-8")
    engine = ToolEngine(call_text("read_file", path=str(notes)), ANSWER)
    w = window(qtbot, closing, engine)
    first = w.history.message(send(qtbot, w, "What do my notes say?"))
    assert first.content.strip() == "Let me check." and first.tool_calls is not None
    assert [t["function"]["name"] for t in engine.tools[-1] or []][:2] == ["read_file", "echo"]  # offered
    call_id = last_call_id(w)
    assert w.chat_view.tools.state[call_id] == PENDING
    text = shown(w)
    assert "Tool call: read_file" in text and "Allow once" in text and "Deny" in text and str(notes) in text
    assert engine.generated == 1  # nothing runs unasked
    final = w.history.message(answer(qtbot, w, "allow", call_id))
    assert final.content.strip() == ANSWER
    sent = engine.sent[-1]
    assert sent[-1] == {"role": "tool", "content": "buy milk", "tool_call_id": call_id}
    assert sent[-2]["tool_calls"][0]["function"] == {"name": "read_file", "arguments": {"path": str(notes)}}
    text = shown(w)
    assert "Result (8 characters)" in text and "buy milk" not in text.split("Result (8")[1].split(ANSWER)[0]
    assert "Allow once" not in text
    w.resize(900, 640)
    if os.environ.get(SCREENSHOT_ENV):  # the suite itself never writes into the checkout
        w.chat_view.grab().save(str(Path(os.environ[SCREENSHOT_ENV]) / "tools.png"))
    w.chat_view.anchorClicked.emit(QUrl(f"tool:result:{call_id}"))
    assert "buy milk" in shown(w)
    exported = w.history.export_json(w.conversation_id or 0)["messages"]
    assert exported[1]["tool_calls"][0]["id"] == call_id and exported[2]["tool_call_id"] == call_id
    assert "**Tool call:** `read_file`" in w.history.export_markdown(w.conversation_id or 0)


def test_a_denied_call_does_not_run_and_the_model_is_told(qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine(call_text("echo", text="hi"), "I will not use it.")
    w = window(qtbot, closing, engine)
    send(qtbot, w, "Echo hi")
    call_id = last_call_id(w)
    answer(qtbot, w, "deny", call_id)
    assert engine.sent[-1][-1] == {"role": "tool", "content": DENIED, "tool_call_id": call_id}
    assert "Denied" in shown(w)


def test_a_server_that_crashes_mid_call_is_a_clear_line_and_the_chat_goes_on(qtbot: QtBot,
                                                                            closing: list[Any]) -> None:
    engine = ToolEngine(call_text("crash"), "It failed.")
    w = window(qtbot, closing, engine)
    send(qtbot, w, "Crash it")
    with qtbot.waitSignal(w.error_shown, timeout=REPLY_MS,
                          check_params_cb=lambda m: "stopped during crash" in m) as shown_error:
        answer(qtbot, w, "allow", last_call_id(w))
    assert "\n" not in str(shown_error.args[0])
    assert engine.sent[-1][-1]["content"].startswith("Error: The tool server files stopped during crash")
    assert w.history.message(int(w.history.messages(w.conversation_id or 0)[-1].id)).content.strip() == "It failed."


def test_a_call_past_its_timeout_is_stopped(qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine(call_text("sleep", seconds=30), "Too slow.")
    w = window(qtbot, closing, engine)
    w.tools.toolbox.call_timeout_s = 0.5
    send(qtbot, w, "Sleep")
    answer(qtbot, w, "allow", last_call_id(w))
    assert engine.sent[-1][-1]["content"] == "Error: sleep on files took longer than 0.5 s and was stopped."
    assert "took longer than 0.5 s" in w.error_banner.text()


def test_stop_ends_a_running_call_and_the_model_does_not_continue(qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine(call_text("sleep", seconds=30), "never")
    w = window(qtbot, closing, engine)
    send(qtbot, w, "Sleep")
    call_id = last_call_id(w)
    w.chat_view.anchorClicked.emit(QUrl(f"tool:allow:{call_id}"))
    assert w.chat_view.tools.state[call_id] == RUNNING and w.stop_button.isEnabled()
    with qtbot.waitSignal(w.tools.call_saved, timeout=REPLY_MS):
        w.stop_button.click()
    assert w.history.messages(w.conversation_id or 0)[-1].content == STOPPED
    qtbot.wait(300)
    assert engine.generated == 1


def test_a_second_round_and_always_allow(qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine(call_text("echo", text="one"), call_text("echo", text="two"), "Both done.")
    w = window(qtbot, closing, engine)
    send(qtbot, w, "Echo twice")
    answer(qtbot, w, "always", last_call_id(w))  # the second round's call runs without asking
    qtbot.waitUntil(lambda: engine.generated == 3 and w.replies.reply_id is None, timeout=REPLY_MS)
    assert w.history.messages(w.conversation_id or 0)[-1].content.strip() == "Both done."
    results = [m.content for m in w.history.messages(w.conversation_id or 0) if m.role == "tool"]
    assert results == ["one", "two"] and engine.generated == 3
    assert "echo" in w.tools.toolbox.specs[0].always_allow  # kept (revocable in Settings > Tools)


def test_the_rounds_are_capped(qtbot: QtBot, closing: list[Any], monkeypatch: Any) -> None:
    monkeypatch.setattr(tool_turns, "MAX_TOOL_ROUNDS", 2)
    engine = ToolEngine(call_text("echo", text="one"), call_text("echo", text="two"), call_text("echo", text="three"))
    w = window(qtbot, closing, engine, always_allow=frozenset({"echo"}))
    w.prompt_edit.setPlainText("Loop")
    with qtbot.waitSignal(w.error_shown, timeout=REPLY_MS, check_params_cb=lambda m: "times in a row" in m):
        w.send()
    qtbot.waitUntil(lambda: engine.generated == 3 and w.replies.reply_id is None, timeout=REPLY_MS)
    assert engine.tools[-1] is None  # the last request offered no tools


def test_a_repeated_call_gets_its_earlier_result_and_the_model_answers_without_tools(
        qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine(call_text("echo", text="one"), call_text("echo", text="one"), "It said one.")
    w = window(qtbot, closing, engine)
    send(qtbot, w, "Echo one")
    answer(qtbot, w, "allow", last_call_id(w))  # the same call again: no card waits, nothing runs again
    qtbot.waitUntil(lambda: engine.generated == 3 and w.replies.reply_id is None, timeout=REPLY_MS)
    messages = w.history.messages(w.conversation_id or 0)
    assert [m.content for m in messages if m.role == "tool"] == ["one", "one"]
    assert messages[-1].content.strip() == "It said one."
    assert engine.tools[1] is not None and engine.tools[-1] is None  # asked without tools after the repeat
    assert PENDING not in w.chat_view.tools.state.values()


def test_a_server_that_will_not_start_is_a_clear_line(qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine("Hello.")
    w = window(qtbot, closing, engine, mode="broken")
    w.prompt_edit.setPlainText("Hi")
    with qtbot.waitSignal(w.error_shown, timeout=REPLY_MS,
                          check_params_cb=lambda m: "could not start: cannot open the database" in m):
        w.send()
    qtbot.waitUntil(lambda: w.replies.reply_id is None, timeout=REPLY_MS)
    assert w.history.messages(w.conversation_id or 0)[-1].content.strip() == "Hello."


def test_regenerate_after_tool_calls_asks_again_from_the_users_message(qtbot: QtBot, closing: list[Any]) -> None:
    engine = ToolEngine(call_text("echo", text="old"), "The old answer.", call_text("echo", text="new"),
                        "The new answer.")
    w = window(qtbot, closing, engine)
    send(qtbot, w, "Echo something")
    answer(qtbot, w, "allow", first_call := last_call_id(w))
    assert [m.role for m in w.history.messages(w.conversation_id or 0)] == ["user", "assistant", "tool", "assistant"]
    with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS):
        w.regen_button.click()
    assert engine.sent[-1][-1] == {"role": "user", "content": "Echo something"}  # no stale call nor result
    messages = w.history.messages(w.conversation_id or 0)
    assert [m.role for m in messages] == ["user", "assistant"] and messages[1].tool_calls is not None
    call_id = last_call_id(w)
    assert call_id != first_call and w.chat_view.tools.state[call_id] == PENDING  # asked again, nothing runs unasked
    assert "Allow once" in shown(w) and "The old answer." not in shown(w)
    assert [v.content.strip() for v in w.history.versions(messages[1].id)] == ["The old answer.", "Let me check."]
    final = w.history.message(answer(qtbot, w, "allow", call_id))
    assert final.content.strip() == "The new answer."
    assert engine.sent[-1][-1] == {"role": "tool", "content": "new", "tool_call_id": call_id}
