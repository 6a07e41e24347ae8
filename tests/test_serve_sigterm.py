"""SIGTERM (a service manager's stop, ``kill``) stops ``serve`` as Ctrl+C does: a stream in flight ends with an
error event and ``[DONE]``, then the process exits 0. The real ``serve`` on 127.0.0.1 over the tiny target."""

from __future__ import annotations

import signal
import sys
from typing import Any

import httpx
import pytest

from tests.server_helpers import chat_body, sse_events, start_serve, stop
from tests.tiny_models import TinyPair

pytestmark = [pytest.mark.timeout(180),
              pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM is not sent to processes on Windows")]

KEY = "k"
CUT_AFTER = 5  # chunks read before the signal


def test_sigterm_mid_stream_ends_it_with_an_error_event_and_done(tiny: TinyPair) -> None:
    proc, line, rest = start_serve(tiny, "--api-key", KEY)
    events: list[dict[str, Any] | str] = []
    try:
        body = chat_body("target", "Hi", max_tokens=1800, temperature=0, stream=True)
        with httpx.stream("POST", line.split()[1] + "/chat/completions", json=body, timeout=60,
                          headers={"Authorization": f"Bearer {KEY}"}) as reply:
            assert reply.status_code == 200
            for event in sse_events(reply.iter_lines()):
                events.append(event)
                if len(events) == CUT_AFTER:
                    proc.send_signal(signal.SIGTERM)
        code = stop(proc, signalled=True)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert code == 0, "".join(rest)[-2000:]
    assert events[-1] == "[DONE]"
    error = events[-2]
    assert isinstance(error, dict) and "error" in error, events[-3:]
    assert "stopped before the reply was finished" in error["error"]["message"]
    chunks = [e for e in events[:-2] if isinstance(e, dict)]
    assert CUT_AFTER <= len(chunks) < 1800
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)  # no "stop", no "length": it was cut
