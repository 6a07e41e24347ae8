"""Four replies at once on the real Qwen2.5-Coder target: each greedy reply is token for token its reply alone,
and a reply is the same after any earlier one (the prompt read on the grid, no repacked kernels)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from engine import Engine, EngineConfig, GenerationParams, offline

pytestmark = pytest.mark.realmodels

QUESTIONS = ("Write a Python function that checks whether a number is prime.",
             "Explain what a hash map is in two sentences.",
             "Write a bash one-liner that counts the lines of every .py file.",
             "What does the SQL keyword JOIN do?")
N = 64
GREEDY = GenerationParams(mode="ar", max_tokens=N)


@pytest.fixture(scope="module")
def engine(real_pair: offline.OfflinePair) -> Iterator[Engine]:
    with Engine(EngineConfig(str(real_pair.target), n_ctx=1024, parallel=len(QUESTIONS))) as eng:
        yield eng


def test_four_at_once_are_their_replies_alone(engine: Engine) -> None:
    prompts = [engine.chat_tokens(q) for q in QUESTIONS]
    together: list[list[int]] = [[] for _ in prompts]
    start = threading.Barrier(len(prompts))

    def one(i: int) -> None:
        start.wait()
        together[i] = list(engine.generate(prompts[i], GREEDY).run().tokens)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert engine._rounds.rows > engine._rounds.decodes  # the replies shared their decodes
    alone = [list(engine.generate(p, GREEDY).run().tokens) for p in prompts]
    assert together == alone


def test_a_reply_is_the_same_after_any_earlier_one(engine: Engine) -> None:
    """The issue's case: a greedy request answered differently depending on the request before it."""
    long = engine.chat_tokens(QUESTIONS[0] + " Use trial division up to the square root, and explain each step.")
    fresh = list(engine.generate(long, GREEDY).run().tokens)
    engine.generate(engine.chat_tokens(QUESTIONS[0]), GREEDY).run()  # shares the system prompt and a first line
    engine.generate(long[: len(long) - 7], GenerationParams(mode="ar", max_tokens=5)).run()  # a prefix of it
    assert list(engine.generate(long, GREEDY).run().tokens) == fresh
