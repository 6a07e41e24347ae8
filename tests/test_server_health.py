"""The server's view of an engine that stopped: a restarting engine's 503 carries the supervisor's Retry-After,
and once a start has failed the reply and /health give its cause instead of "retry shortly"."""

from __future__ import annotations

import time

import pytest

from engine.process import EngineProcess
from engine.server.errors import APIError
from engine.server.health import check_engine, engine_health


def _stopped(start_error: str) -> EngineProcess:
    eng = EngineProcess.__new__(EngineProcess)  # the supervisor's state alone: no process is started
    eng.state, eng.cause, eng.start_error = "restarting", "killed by SIGKILL", start_error
    eng._start_at = time.monotonic() + 7.5
    return eng


def test_restarting_engine_gives_the_supervisors_retry_after() -> None:
    with pytest.raises(APIError) as err:
        check_engine(_stopped(""), retry_after_s=2)
    assert err.value.status == 503 and err.value.code == "engine_restarting"
    assert err.value.headers["Retry-After"] == "8"


def test_a_failed_start_says_why() -> None:
    eng = _stopped("the model file is gone: /models/t.gguf")
    with pytest.raises(APIError) as err:
        check_engine(eng, retry_after_s=2)
    assert err.value.code == "engine_down" and "the model file is gone" in err.value.message
    assert engine_health(eng) == {"engine": "restarting", "cause": "killed by SIGKILL",
                                  "start_error": "the model file is gone: /models/t.gguf"}
