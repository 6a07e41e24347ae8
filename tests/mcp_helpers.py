"""Helpers for the tool tests: the test MCP server as a configured server, and a stand-in engine (hermes format)
whose replies are scripted, tool calls included, and which records the chats and tools it was sent."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from app.tools import config
from app.tools.config import ServerSpec
from engine import ChatFormat, Generation, GenerationParams
from tests.app_helpers import SteppingEngine

SERVER = Path(__file__).resolve().parent / "mcp_server.py"


def stdio_spec(name: str = "files", mode: str = "stdio", **changes: Any) -> ServerSpec:
    return ServerSpec(name, sys.executable, (str(SERVER), mode), **changes)


START_S = 30.0  # the server's process imports the SDK and binds its port: seconds on a loaded 2-core machine


@contextmanager
def http_server() -> Iterator[str]:
    """The test server over streamable HTTP on a free port of 127.0.0.1, as its URL; ended on exit."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, str(SERVER), "http", str(port)], stderr=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and proc.poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


def configure(*specs: ServerSpec) -> None:
    """Write the servers to the data folder's mcp.json, as Settings > Tools would."""
    config.save(list(specs))


def call_text(name: str, **arguments: Any) -> str:
    """A reply that calls ``name`` in the hermes form."""
    return f'Let me check. <tool_call> {json.dumps({"name": name, "arguments": arguments})} </tool_call>'


class ToolEngine(SteppingEngine):
    """Answers each request with the next of ``replies`` (the last one repeats)."""

    def __init__(self, *replies: str) -> None:
        super().__init__(replies[0], step_s=0.0, per_round=3)
        self.replies = list(replies)
        self.sent: list[list[Any]] = []
        self.tools: list[list[dict[str, Any]] | None] = []
        self.generated = 0
        self.lock = threading.Lock()

    def messages_tokens(self, messages: Sequence[Any], variables: Mapping[str, Any] | None = None,
                        template: str | None = None, tools: list[dict[str, Any]] | None = None) -> list[int]:
        self.sent.append(list(messages))
        self.tools.append(tools)
        return list(range(4 * len(messages)))

    def chat_format(self, template: str | None = None) -> ChatFormat:
        return ChatFormat("hermes", "Hermes, Qwen 2.5, Qwen 3, QwQ", True, False, False, True)

    def reply_section(self, messages: Sequence[Any], variables: Mapping[str, Any] | None = None,
                      template: str | None = None, tools: list[dict[str, Any]] | None = None) -> str:
        return "content"

    def generate(self, prompt: Sequence[int], params: GenerationParams, stop: threading.Event) -> Generation:
        reply = self.replies[min(self.generated, len(self.replies) - 1)]
        self.generated += 1
        self.words = [w + " " for w in reply.split(" ")]
        return super().generate(prompt, params, stop)
