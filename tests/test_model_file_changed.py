"""A model file cut short or rewritten on disk while loaded: the next generation is refused with a clear error
(reading the mapped file past its new end would be SIGBUS, which no Python code can catch), in the server
(a real ``serve`` process) and in the app's worker, and the process lives on."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from pytestqt.qtbot import QtBot

import engine
from app.worker.engine_worker import EngineState
from app.worker.host import EngineHost
from engine import Engine, EngineConfig, GenerationParams, SamplingParams, TinyPair
from engine.core.modelfile import ModelFiles
from engine.errors import ModelFileChangedError
from tests.app_helpers import QT_STRICT, TIMEOUT_MS
from tests.server_helpers import start_serve, stop

pytestmark = [pytest.mark.timeout(180), *QT_STRICT]

CHAT = [("user", "Hello there")]
GREEDY = GenerationParams(mode="ar", max_tokens=2, sampling=SamplingParams(temperature=0.0))


def cut_short(path: Path) -> None:
    """What a copy or a download restarted over the file does: the same file, now shorter."""
    os.truncate(path, path.stat().st_size // 2)


def test_model_files_see_a_cut_a_rewrite_and_a_removal(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"x" * 1000)
    files = ModelFiles([str(path), None])
    files.check()  # unchanged
    cut_short(path)
    with pytest.raises(ModelFileChangedError, match=r"changed size since it was loaded \(1,000 -> 500 bytes\)"):
        files.check()
    path.write_bytes(b"y" * 1000)
    os.utime(path, ns=(0, files.stamps[0].mtime_ns + 1_000_000_000))
    with pytest.raises(ModelFileChangedError, match="rewritten since it was loaded"):
        files.check()
    path.unlink()
    with pytest.raises(ModelFileChangedError, match="gone or unreadable"):
        files.check()


def test_serve_refuses_a_model_cut_short_and_stays_up(tiny: TinyPair, tmp_path: Path) -> None:
    model = Path(shutil.copy(tiny.target, tmp_path / "target.gguf"))
    proc, line, rest = start_serve(tiny, "--target", str(model))  # the later --target wins
    try:
        url = line.split()[1]
        with openai.OpenAI(base_url=url, api_key="x", max_retries=0) as oai:
            ask: Any = {"model": "target", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 2}
            assert oai.chat.completions.create(**ask).choices[0].finish_reason == "length"
            cut_short(model)
            with pytest.raises(openai.InternalServerError) as info:
                oai.chat.completions.create(**ask)
            assert info.value.status_code == 503 and info.value.code == "model_file_changed"
            assert "changed size" in info.value.message and "load the model pair again" in info.value.message
        assert proc.poll() is None
        assert httpx.get(url.removesuffix("/v1") + "/health").json()["status"] == "ok"
    finally:
        assert stop(proc) == 0, "".join(rest)[-2000:]


def test_the_app_worker_refuses_a_model_cut_short(qtbot: QtBot, tiny: TinyPair, tmp_path: Path) -> None:
    model = Path(shutil.copy(tiny.target, tmp_path / "target.gguf"))
    host = EngineHost()
    try:
        with qtbot.waitSignal(host.state_changed, timeout=TIMEOUT_MS, check_params_cb=lambda s: s == EngineState.READY):
            host.load(EngineConfig(str(model), None, n_ctx=256, threads=1), "tiny")
        with qtbot.waitSignal(host.generation_finished, timeout=TIMEOUT_MS):
            host.generate(CHAT, GREEDY)
        cut_short(model)
        with qtbot.waitSignal(host.failed, timeout=TIMEOUT_MS) as failed:
            host.generate(CHAT, GREEDY)
        message = str(failed.args[0] if failed.args else "")
        assert message.startswith("Generation failed: the model file") and "changed size" in message
        with qtbot.waitSignal(host.failed, timeout=TIMEOUT_MS):
            host.verify(CHAT, GREEDY)  # "Verify exactness" is refused too
    finally:
        host.shutdown()


def test_engine_generate_refuses_a_model_file_cut_short_since_load(tiny: TinyPair, tmp_path: Path) -> None:
    """Every caller of Engine.generate (the CLI included) gets the check, not only the server and the app."""
    target = tmp_path / "target.gguf"
    shutil.copy(tiny.target, target)
    with Engine(EngineConfig(str(target), None, n_ctx=256)) as eng:
        params = GenerationParams(mode="ar", max_tokens=2, sampling=SamplingParams())
        assert eng.generate([1, 2, 3], params).run().tokens
        os.truncate(target, target.stat().st_size // 2)
        with pytest.raises(engine.ModelFileChangedError, match=r"target\.gguf"):
            eng.generate([1, 2, 3], params)
    assert engine.ModelFileChangedError is ModelFileChangedError
