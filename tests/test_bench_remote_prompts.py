"""Scenario R's prompts: the bench's set and a low-acceptance chat question of its own (issue 63 item 6)."""

from __future__ import annotations

import pytest

from engine.bench.common import load_prompts
from engine.bench.remote import CHAT_LOW, remote_prompts
from engine.errors import ParameterError


def test_scenario_r_runs_the_bench_prompts_then_its_chat_question() -> None:
    bench = load_prompts()
    prompts = remote_prompts(bench)
    assert prompts[:-1] == bench and prompts[-1] == CHAT_LOW
    assert CHAT_LOW["id"] not in {p["id"] for p in bench}


def test_its_chat_question_is_picked_by_id_and_an_unknown_id_is_refused() -> None:
    bench = load_prompts()
    assert remote_prompts(bench, ids=[CHAT_LOW["id"], "chat-git"]) == [CHAT_LOW, *load_prompts(ids=["chat-git"])]
    assert remote_prompts(bench, limit=2) == bench[:2]
    with pytest.raises(ParameterError, match="no-such"):
        remote_prompts(bench, ids=["no-such"])
