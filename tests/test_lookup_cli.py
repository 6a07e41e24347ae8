"""``generate --mode lookup`` (and auto) with a target alone: no --draft needed, same greedy tokens as ar."""

from __future__ import annotations

import json

import pytest

from engine.cli.main import main
from tests.tiny_models import TinyPair

PROMPT = "one two three four one two three four one two three"


def _run(tiny: TinyPair, capsys: pytest.CaptureFixture[str], *extra: str) -> dict[str, object]:
    argv = ["generate", "--target", str(tiny.target), "--prompt", PROMPT, "--max-tokens", "32", "--ctx", "512",
            "--json", *extra]
    assert main(argv) == 0
    out: dict[str, object] = json.loads(capsys.readouterr().out)
    return out


def test_lookup_and_auto_run_without_a_draft_and_match_ar(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    ar = _run(tiny, capsys, "--mode", "ar")
    for mode in ("lookup", "auto"):
        got = _run(tiny, capsys, "--mode", mode)
        assert got["tokens"] == ar["tokens"], mode
        stats = got["stats"]
        assert isinstance(stats, dict) and stats["mode"] == mode


def test_modes_that_need_a_draft_still_say_so(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--target", str(tiny.target), "--prompt", "hi", "--mode", "sd"]
    assert main(argv) == 2
    assert "needs --draft" in capsys.readouterr().err
