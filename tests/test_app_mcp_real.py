"""The issue's "done when" on the real Qwen2.5-Coder pair (``realmodels``): a filesystem-style server imported from
an mcp.json in Settings > Tools, a question that needs it, the call allowed, and the round after it, with the card
and the collapsed result in the window. The 1.5B target calls the tool again with the result in its prompt; that
repeat gets the earlier result and the model is asked without tools; it then writes the call as text (docs/tools.md),
and an answer in text must use the result. With SSD_CHAT_SCREENSHOTS set, the window's
picture is saved there as mcp-tools.png (docs/screenshots when refreshed, under Xvfb)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from pytestqt.qtbot import QtBot

from app.main_window import MainWindow
from app.settings.store import ActivePair
from app.settings.tools_page import open_tools
from engine import offline
from engine.core.options import PREFILL_GRID
from tests.app_helpers import QT_STRICT, REPLY_MS, closing, fast_settings, open_window, send
from tests.test_app_mcp import SCREENSHOT_ENV, answer, shown

__all__ = ["closing"]
pytestmark = [*QT_STRICT, pytest.mark.realmodels]
FILES = Path(__file__).resolve().parent / "mcp_files_server.py"
LIST = "oat milk\nrye bread\n12 eggs\ncoffee beans\n"
SYSTEM = "You can read the user's files with the tools. Once a tool has returned what you need, answer in plain text."


def test_a_filesystem_server_from_an_mcp_json_in_the_window(qtbot: QtBot, data_dir: Path,
                                                             real_pair: offline.OfflinePair,
                                                             closing: list[MainWindow], tmp_path: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "shopping.txt").write_text(LIST, encoding="utf-8")
    mcp_json = tmp_path / "claude_desktop_config.json"
    mcp_json.write_text(json.dumps({"mcpServers": {"files": {"command": sys.executable,
                                                             "args": [str(FILES), str(notes)]}}}), encoding="utf-8")
    pair = ActivePair(offline.PAIR_ID, "Qwen2.5-Coder (offline)", str(real_pair.target), str(real_pair.draft))
    w = open_window(qtbot, pair, fast_settings(mode="auto", max_tokens=64, n_ctx=4096))
    closing.append(w)
    w.resize(1280, 860)
    dialog = open_tools(w, w.tools.toolbox)
    dialog.import_file(mcp_json)
    qtbot.waitUntil(lambda: len(w.tools.toolbox.tools_of("files")) == 2, timeout=REPLY_MS)
    dialog.close()
    w.system_edit.setText(SYSTEM)
    first = w.history.message(send(qtbot, w, f"What is on my shopping list? It is the file {notes}/shopping.txt.",
                                   REPLY_MS))
    assert first.tool_calls is not None and first.stats is not None
    call = first.tool_calls[0]["function"]
    assert call["name"] == "read_text_file" and json.loads(call["arguments"]) == {"path": f"{notes}/shopping.txt"}
    assert "Allow once" in shown(w) and "Tool call: read_text_file" in shown(w)
    reply = w.history.message(answer(qtbot, w, "allow", str(first.tool_calls[0]["id"])))
    assert [m.content for m in w.history.messages(w.conversation_id or 0) if m.role == "tool"] == [LIST]
    assert f"Result ({len(LIST)} characters)" in shown(w) and "rye bread" not in shown(w)  # collapsed
    stats = reply.stats
    assert stats is not None and int(stats["prompt_cached"]) >= int(first.stats["prompt_tokens"]) - PREFILL_GRID
    assert "from the cache" in w.readout.text()
    again = bool(reply.tool_calls)
    if again:  # the same call again: it gets the earlier result, and the model is asked without tools
        assert reply.tool_calls is not None and reply.tool_calls[0]["function"] == call
        with qtbot.waitSignal(w.reply_saved, timeout=REPLY_MS) as blocker:
            pass
        reply = w.history.message(int(blocker.args[0]))
    assert not reply.tool_calls  # no tools were offered this time
    if not reply.content.lstrip().startswith("{"):  # an answer in text (not a call written as text) uses the result
        assert "eggs" in reply.content.lower(), reply.content
    print(f"first prompt {first.stats['prompt_tokens']} tokens; after the result {stats['prompt_tokens']}:"
          f" {stats['prompt_cached']} cached; lookup drafted {stats['accepted_lookup']} of {stats['accepted']}"
          f" accepted; called again: {again}; the answer: {reply.content!r}; readout: {w.readout.text()}")
    if os.environ.get(SCREENSHOT_ENV):  # the suite itself never writes into the checkout
        qtbot.wait(200)
        w.grab().save(str(Path(os.environ[SCREENSHOT_ENV]) / "mcp-tools.png"))
