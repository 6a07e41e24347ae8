"""Offline, the Hub's calls say so at once: a Hub name that does not resolve is one "offline: …" line, with no
HTTP request sent and none of huggingface_hub's retries (five, about 23 s, before it said "[Errno -2] Name or
service not known"); the CLI exits 2 with that line, and the model manager's search pane shows it."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from huggingface_hub import get_session
from huggingface_hub.utils import _http as hf_http
from pytestqt.qtbot import QtBot

from engine.models import drafts, hub, search
from engine.models.hub_http import OFFLINE, OfflineError, check_online, transport_error
from tests.app_helpers import TIMEOUT_MS
from tests.hub_server import hub_environment

UNRESOLVABLE = "http://nonexistent.invalid"  # .invalid never resolves (RFC 2606)
pytestmark = pytest.mark.timeout(120)
BOUND_S = 10.0  # generous for a loaded machine, and far below the 23 s of the library's retries


class Attempts:
    """What huggingface_hub tried: requests sent on its shared session and back-off sleeps."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.sleeps: list[float] = []

    def hook(self, request: httpx2.Request) -> None:
        self.requests.append(str(request.url))


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Attempts]:
    """HF_ENDPOINT at a name that does not resolve; every request and retry sleep of huggingface_hub counted."""
    hub_environment(monkeypatch, UNRESOLVABLE, str(tmp_path / "hf-home"))
    seen = Attempts()
    monkeypatch.setattr(hf_http.time, "sleep", lambda s: seen.sleeps.append(s))  # a retry would wait here
    real = hf_http.get_session

    def counted() -> httpx2.Client:  # the session is rebuilt after a connection error: hook each one
        session = real()
        if seen.hook not in session.event_hooks["request"]:
            session.event_hooks["request"].append(seen.hook)
        return session

    monkeypatch.setattr(hf_http, "get_session", counted)
    yield seen
    hooks = get_session().event_hooks["request"]
    if seen.hook in hooks:
        hooks.remove(seen.hook)


@pytest.mark.parametrize("call", [
    lambda: search.search("qwen2.5 7b"),
    lambda: search.list_models("Qwen/Qwen2.5-7B-Instruct-GGUF"),
    lambda: hub.remote_file("Qwen/Qwen2.5-7B-Instruct-GGUF", "qwen2.5-7b-instruct-q8_0.gguf"),
    lambda: drafts.find_drafts("Qwen/Qwen2.5-7B-Instruct-GGUF", "qwen2.5-7b-instruct-q8_0.gguf"),
], ids=["search", "files", "metadata", "drafts"])
def test_an_unresolvable_hub_is_offline_at_once(offline: Attempts, call: object) -> None:
    t0 = time.monotonic()
    with pytest.raises(OfflineError) as caught:
        call()  # type: ignore[operator]
    assert str(caught.value).startswith(f"{OFFLINE} (nonexistent.invalid does not resolve")
    assert "Errno" not in str(caught.value)
    assert offline.requests == [] and offline.sleeps == []  # no attempt, so no retry
    assert time.monotonic() - t0 < BOUND_S


def test_a_slow_lookup_lets_the_call_go_on_and_a_failed_one_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.example:8443")
    asked: list[tuple[str, int]] = []
    release = threading.Event()

    def slow(host: str, port: int) -> object:
        asked.append((host, port))
        release.wait(30)
        return []

    t0 = time.monotonic()
    check_online(0.2, slow)  # no answer within the wait: not called offline
    assert time.monotonic() - t0 < BOUND_S and asked == [("hub.example", 8443)]
    release.set()

    def missing(host: str, port: int) -> object:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    with pytest.raises(OfflineError, match=r"hub\.example does not resolve"):
        check_online(1.0, missing)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    check_online(1.0, missing)  # an address is not a name: nothing to look up


def test_a_name_lost_mid_call_is_offline_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_ENDPOINT", UNRESOLVABLE)
    try:
        try:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        except socket.gaierror as exc:
            raise httpx2.ConnectError("[Errno -2] Name or service not known") from exc
    except httpx2.ConnectError as err:
        assert isinstance(transport_error(err), OfflineError)
    assert not isinstance(transport_error(httpx2.ConnectError("refused")), OfflineError)


def test_the_cli_says_offline_in_one_line(tmp_path: Path) -> None:
    env = {"HF_ENDPOINT": UNRESOLVABLE, "HF_HOME": str(tmp_path / "hf-home"), "HF_HUB_DISABLE_TELEMETRY": "1",
           "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "engine", "models", "search", "qwen"], capture_output=True,
                          text=True, env=env, timeout=60, check=False)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [f"error: {OFFLINE} (nonexistent.invalid does not resolve; "
                                                "check the network connection)"]
    assert time.monotonic() - t0 < BOUND_S + 10  # the interpreter's start on a loaded machine included


@pytest.mark.qt_log_level_fail("WARNING")
@pytest.mark.qt_log_ignore("propagateSizeHints")
def test_the_search_pane_says_offline(qtbot: QtBot, offline: Attempts, data_dir: Path) -> None:
    from app.models.manager import ModelManagerDialog

    dialog = ModelManagerDialog(memory=(16 * 10**9, None))
    qtbot.addWidget(dialog)
    dialog.show()
    pane = dialog.search
    t0 = time.monotonic()
    qtbot.keyClicks(pane.search_box, "qwen2.5 7b")
    pane.search_box.returnPressed.emit()
    qtbot.waitUntil(lambda: pane.note.text().startswith(OFFLINE), timeout=TIMEOUT_MS)
    assert time.monotonic() - t0 < BOUND_S and offline.requests == [] and offline.sleeps == []
    assert "Search failed" not in pane.note.text() and pane.repos_table.rowCount() == 0
    dialog.close()

