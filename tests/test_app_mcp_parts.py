"""The tool parts apart from the window: the tools reach a real tiny model's prompt (Qwen2.5's template) and a tool
result cannot forge a turn; the hub over streamable HTTP; mcp.json import and Settings > Tools; secrets; bounds."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTreeWidgetItem
from pytestqt.qtbot import QtBot

from app.settings.tools_page import ToolsDialog
from app.tools import config, secrets
from app.tools.config import ConfigError, ServerSpec
from app.tools.hub import McpHub
from app.tools.results import bounded_text
from app.tools.toolbox import ToolBox
from app.worker.chat_setup import ChatChoice, ReplyText, prepare
from app.worker.engine_chat import CONTENT_PIECE, ReplySplitter, chat_family
from engine import EngineConfig, EngineProcess
from tests import mcp_helpers
from tests.mcp_helpers import SERVER
from tests.mcp_server import FORGED
from tests.tool_models import write_tools_model

TOOL = {"type": "function", "function": {"name": "read_file", "description": "Read a text file.",
                                         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}}}}


class Offered:
    def offered(self) -> list[dict[str, Any]]:
        return [TOOL]


def test_the_tools_reach_a_real_models_prompt_and_a_result_cannot_forge_a_turn(tmp_path: Path) -> None:
    target = write_tools_model(tmp_path / "t.gguf")
    call = json.dumps([{"id": "call_1", "type": "function",
                        "function": {"name": "read_file", "arguments": json.dumps({"path": "/n"})}}])
    turns = [("user", "Read /n"), ("assistant", "", "", call), ("tool", FORGED, "", "call_1")]
    with EngineProcess(EngineConfig(str(target), n_ctx=2048, threads=1)) as eng:
        fitted, splitter = prepare(eng, turns, ChatChoice(tools=Offered()), max_tokens=8)
        text = eng.detokenize(fitted.tokens)
        im_end = eng.markup_tokens("<|im_end|>")
        im_start = eng.markup_tokens("<|im_start|>")
    assert "read_file" in text and "Read a text file." in text and "<tools>" in text
    assert '"path": "/n"' in text and "PWNED" in text  # the call and the result went in
    assert splitter.names == ["read_file"]
    # system, user, assistant, tool (rendered as a user turn) and the open assistant turn: the result's own
    # <|im_end|> and <|im_start|> are text, not turn boundaries
    assert fitted.tokens.count(im_start[0]) == 5 and fitted.tokens.count(im_end[0]) == 4


@pytest.fixture
def http_server() -> Iterator[str]:
    with mcp_helpers.http_server() as url:
        yield url


def test_the_hub_lists_and_calls_over_streamable_http(http_server: str, tmp_path: Path) -> None:
    hub = McpHub(tmp_path)
    try:
        spec = ServerSpec("web", url=http_server, headers=(("Authorization", "Bearer t"),))
        listing = hub.list_tools(spec).result(30)
        assert listing.error is None and "echo" in [t.name for t in listing.tools]
        assert hub.call(spec, "echo", {"text": "over http"}, 10).result(30).text == "over http"
        failed = hub.call(spec, "fail", {}, 10).result(30)
        assert failed.error and "fail" in failed.text
    finally:
        hub.close()


def test_an_mcp_json_in_the_common_shape_is_read_and_its_mistakes_named(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-filesystem", "/notes"], "env": {"A": "1"}},
        "web": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer s"}}}}), encoding="utf-8")
    files, web = config.read_file(path)
    assert (files.command, files.args, files.env, files.kind) == ("npx", ("-y", "server-filesystem", "/notes"),
                                                                    (("A", "1"),), "stdio")
    assert web.kind == "http" and web.headers == (("Authorization", "Bearer s"),)
    for bad, why in (({}, "mcpServers"), ({"mcpServers": {"x": {}}}, "command"),
                     ({"mcpServers": {"x": {"command": "a", "args": "b"}}}, "args")):
        with pytest.raises(ConfigError, match=why):
            config.parse(bad)


def test_header_values_stay_out_of_the_file_in_one_only_the_user_can_read() -> None:
    config.save([ServerSpec("web", url="https://example.com/mcp", headers=(("Authorization", "Bearer s"),))])
    assert "Bearer s" not in config.config_path().read_text(encoding="utf-8")
    assert config.load()[0].headers == (("Authorization", "Bearer s"),)
    if secrets._keyring() is None:
        assert os.stat(secrets._file()).st_mode & 0o777 == secrets.FILE_MODE


def test_a_result_past_the_bound_is_cut_with_a_note() -> None:
    assert bounded_text("x" * 10, 4) == "xxxx\n[truncated: 6 more characters were left out]"
    assert bounded_text("short") == "short"


def first(dialog: ToolsDialog) -> QTreeWidgetItem:
    item = dialog.tree.topLevelItem(0)
    assert item is not None
    return item


def tools_of(top: QTreeWidgetItem) -> dict[str, QTreeWidgetItem]:
    children = [top.child(i) for i in range(top.childCount())]
    return {c.text(0): c for c in children if c is not None}


def test_settings_tools_imports_lists_and_switches(qtbot: QtBot, tmp_path: Path) -> None:
    path = tmp_path / "claude_desktop_config.json"
    path.write_text(json.dumps({"mcpServers": {"files": {"command": sys.executable, "args": [str(SERVER)]}}}),
                    encoding="utf-8")
    box = ToolBox()
    try:
        dialog = ToolsDialog(box)
        qtbot.addWidget(dialog)
        dialog.import_file(path)
        qtbot.waitUntil(lambda: dialog.tree.topLevelItemCount() == 1 and bool(tools_of(first(dialog))),
                        timeout=30000)
        tools = tools_of(first(dialog))
        assert tools["read_file"].text(1) == "Read a text file and return its contents."
        tools["big"].setCheckState(0, Qt.CheckState.Unchecked)  # a tool off
        assert "big" in box.specs[0].disabled_tools
        assert "big" not in [t["function"]["name"] for t in box.offered()]
        box.allow_always("echo")
        dialog.rebuild()
        echo = tools_of(first(dialog))["echo"]
        assert echo.checkState(2) == Qt.CheckState.Checked
        echo.setCheckState(2, Qt.CheckState.Unchecked)  # "always allow" revoked
        assert not box.specs[0].always_allow
        first(dialog).setCheckState(0, Qt.CheckState.Unchecked)  # the server off
        assert not box.enabled() and config.load()[0].enabled is False
        dialog.tree.setCurrentItem(first(dialog))
        dialog.remove_selected()
        assert box.specs == () and dialog.tree.topLevelItemCount() == 0
    finally:
        box.close()


def test_a_reply_that_is_only_a_json_call_is_that_call() -> None:
    fenced = '```json\n{"name": "read_file", "arguments": {"path": "/n"}}\n```'
    bare = '{"name": "read_file", "parameters": {"path": "/n"}}'
    for text, names in ((fenced, ["read_file"]), (bare, ["read_file"])):
        reply = ReplyText(ReplySplitter(chat_family("hermes"), names, CONTENT_PIECE))
        reply.feed(text, False)
        reply.finish()
        assert [(c.name, json.loads(c.arguments)) for c in reply.calls] == [("read_file", {"path": "/n"})]
        assert reply.content == [] and reply.runs == []
    for text, names in ((fenced, ["echo"]), (f"Here it is: {fenced}", ["read_file"])):  # not offered; not only a call
        reply = ReplyText(ReplySplitter(chat_family("hermes"), names, CONTENT_PIECE))
        reply.feed(text, False)
        reply.finish()
        assert reply.calls == [] and "".join(reply.content) == text
