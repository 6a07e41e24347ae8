"""Bench scenario F end to end on the tiny models: first replies from fresh memory, auto against ar, over a real RPC
server behind a delaying proxy and held to a JSON Schema here; skipped in a build without RPC."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.tiny.models import TinyPair
from tests.rpc_helpers import needs_rpc

pytestmark = [pytest.mark.long, needs_rpc, pytest.mark.timeout(600)]

TRIALS = 2  # one of each order


def test_each_first_reply_is_timed_against_ars_and_gives_ars_tokens(tiny: TinyPair, tmp_path: Path) -> None:
    out = tmp_path / "f.json"
    r = subprocess.run([sys.executable, "-m", "engine", "bench", "--scenarios", "F", "--target", str(tiny.target),
                        "--draft", str(tiny.draft_related), "--delays", "5", "--repeats", str(TRIALS),
                        "--max-tokens", "12", "--out", str(out)],
                       capture_output=True, text=True, timeout=540, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    trials = json.loads(out.read_text(encoding="utf-8"))["trials"]
    assert [(t["case"], t["order"][0]) for t in trials] == [(case, first) for case in ("link 5 ms", "structured")
                                                            for first in ("auto", "ar")]
    assert all(t["same"] and t["auto_tok_s"] > 0 and t["ar_tok_s"] > 0 for t in trials)
    assert all(case in r.stdout for case in ("link 5 ms", "structured"))
