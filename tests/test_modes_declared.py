"""The modes are declared once (engine.core.mode): what each needs decides every command and request alike.

A target alone runs ar, lookup and auto (auto then picks between plain rounds and the pool's drafts); sd and ssd
need a draft model, and every entry point (generate, serve, a request's ``mode``) says so the same way.
"""

from __future__ import annotations

import json

import httpx
import pytest

from engine import MODES, OPTIONS, GenerationParams, Mode, ParameterError
from engine.cli.main import main
from tests.server_helpers import start_serve, stop
from tests.tiny_models import TinyPair


def test_every_list_of_modes_is_the_declared_one() -> None:
    assert MODES == tuple(Mode) == OPTIONS["mode"].choices == ("ar", "sd", "ssd", "lookup", "auto")
    assert Mode.runnable(has_draft=False) == (Mode.AR, Mode.LOOKUP, Mode.AUTO)
    assert Mode.runnable(has_draft=True) == tuple(Mode)
    assert Mode.drafting() == (Mode.SD, Mode.SSD)
    assert all(m.may_draft for m in Mode.drafting()) and Mode.AUTO.may_draft and not Mode.LOOKUP.may_draft
    assert [m for m in Mode if m.drafts_inline] == [Mode.SD]


def test_a_mode_word_becomes_the_mode_and_any_other_word_is_refused() -> None:
    params = GenerationParams(mode="ssd")  # type: ignore[arg-type]  # requests and settings files give words
    assert params.mode is Mode.SSD and params.mode == "ssd" and json.dumps({"mode": params.mode}) == '{"mode": "ssd"}'
    with pytest.raises(ParameterError, match="mode"):
        GenerationParams(mode="fast")  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match="ar, sd, ssd, lookup, auto"):
        Mode.parse("fast")


@pytest.mark.parametrize("mode", MODES)
def test_generate_without_a_draft_runs_exactly_the_modes_a_target_runs_alone(
    tiny: TinyPair, capsys: pytest.CaptureFixture[str], mode: str
) -> None:
    code = main(["generate", "--target", str(tiny.target), "--prompt", "hi", "--max-tokens", "2", "--mode", mode,
                 "--threads", "1"])
    err = capsys.readouterr().err
    if Mode(mode).needs_draft:
        assert code == 2 and "needs --draft" in err
    else:
        assert code == 0, err


def test_serve_without_a_draft_takes_auto_as_generate_does(tiny: TinyPair) -> None:
    proc, line, rest = start_serve(tiny, "--mode", "auto")
    try:
        assert line.startswith("serving ") and "mode auto" in line, "".join(rest)
        url = line.split()[1]
        card = httpx.get(f"{url}/models", timeout=30).json()["data"][0]
        assert card["modes"] == ["ar", "lookup", "auto"]
        reply = httpx.post(f"{url}/chat/completions", timeout=60, json={
            "model": card["id"], "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 3, "mode": "sd"})
        assert reply.status_code == 400 and "needs a draft model" in reply.json()["error"]["message"]
    finally:
        code = stop(proc)
    assert code == 0, "".join(rest)[-2000:]
