"""Stop within one draft step: the drafter checks the generation's stop Events between its draft steps and
tree levels (real llama.cpp on the tiny pair; counted in steps, not timed)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest

from engine import Engine, EngineConfig, GenerationParams, SamplingParams, TinyPair
from engine.speculative.fanout import fanout_fn
from engine.speculative.steps import ARMode, SDMode, Steps
from engine.speculative.worker import InlineDrafts

K = 8  # a long draft: a stop after its second step leaves six steps undone
STOP_AFTER = 2  # draft steps (tokens drafted) before the test sets the stop Event
PROMPT = [1, 5, 9, 13, 17, 21]


@pytest.fixture
def engine(tiny: TinyPair) -> Iterator[Engine]:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=1,
                             draft_threads=1)) as eng:
        yield eng


def stop_after(eng: Engine, steps: int, seen: list[int] | None = None) -> threading.Event:
    """An Event the drafter watches, set as its ``steps``-th drafted token is checked for end-of-generation;
    ``seen[0]`` counts the drafted tokens checked."""
    assert eng.drafter is not None
    drafter = eng.drafter
    stop = threading.Event()
    drafter.stop_when(stop)
    is_eog: Callable[[int], bool] = drafter.is_eog
    seen = [0] if seen is None else seen

    def counting(token: int) -> bool:
        seen[0] += 1
        if seen[0] == steps:
            stop.set()
        return is_eog(token)

    drafter.is_eog = counting
    return stop


def start(eng: Engine) -> None:
    assert eng.drafter is not None
    greedy = SamplingParams(temperature=0.0)
    eng.drafter.configure(greedy, np.random.default_rng(0), top_count=1)
    eng.target.start(PROMPT, greedy, np.random.default_rng(0))


def test_a_stop_cuts_the_draft_after_the_step_in_progress(engine: Engine) -> None:
    start(engine)
    assert engine.drafter is not None
    full = engine.drafter.draft_sequential(engine.target.committed, K).tokens
    assert len(full) == K  # the tiny draft reaches no end-of-generation token here: the cut below is the stop's
    stop_after(engine, STOP_AFTER)
    cut = engine.drafter.draft_sequential(engine.target.committed, K).tokens
    assert cut == full[:STOP_AFTER]


def test_a_round_cut_by_a_stop_stays_exact(engine: Engine) -> None:
    start(engine)
    assert engine.drafter is not None
    stop = stop_after(engine, STOP_AFTER)
    rr = SDMode(Steps(engine.target, InlineDrafts(engine.drafter)), K).step()
    assert stop.is_set() and rr.drafted == STOP_AFTER
    got = list(engine.target.committed)
    engine.drafter.stop_when()
    start(engine)
    ar = ARMode(Steps(engine.target, None))
    while len(engine.target.committed) < len(got):
        ar.step()
    assert engine.target.committed[: len(got)] == got  # the tokens up to the stop are plain decoding's


def test_a_stop_ends_the_tree_before_its_next_level(engine: Engine) -> None:
    start(engine)
    assert engine.drafter is not None
    drafter = engine.drafter
    drafter.configure(SamplingParams(temperature=0.0), np.random.default_rng(0), top_count=4)
    draft = drafter.draft_sequential(engine.target.committed, K)
    built = drafter.build_tree(engine.target.committed, draft, K, 6, fanout_fn(False, 0.8), lambda: False)
    assert built.levels == K
    stop = threading.Event()
    drafter.stop_when(stop)
    draft = drafter.draft_sequential(engine.target.committed, K)
    stop.set()
    cut = drafter.build_tree(engine.target.committed, draft, K, 6, fanout_fn(False, 0.8), lambda: False)
    assert cut.levels == 0 and built.branches > 0


def test_engine_generate_hands_its_stop_to_the_drafter(engine: Engine) -> None:
    """Through Engine.generate: a stop set during sd's draft ends that draft after the step in progress, and the
    reply ends as stopped with plain decoding's tokens."""
    params = GenerationParams(mode="sd", k=K, max_tokens=64, sampling=SamplingParams(temperature=0.0))
    assert engine.drafter is not None
    is_eog = engine.drafter.is_eog
    seen = [0]
    stop = stop_after(engine, STOP_AFTER, seen)
    gen = engine.generate(PROMPT, params, stop)
    tokens = [event.token for event in gen]
    assert gen.stats.finish_reason == "stopped"
    assert seen[0] == STOP_AFTER  # no draft step ran after the one that saw the stop
    engine.drafter.is_eog = is_eog
    plain = [event.token for event in engine.generate(PROMPT, GenerationParams(mode="ar", max_tokens=len(tokens),
                                                                             sampling=SamplingParams()))]
    assert tokens == plain[: len(tokens)]
