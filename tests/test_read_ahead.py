"""A draft on cores of its own reads the prompt while the target prefills it (engine.speculative.drafter.PromptRead)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.core.options import cpu_cores
from engine.generation import Generation
from engine.speculative.drafter import Drafter, PromptRead
from engine.speculative.exactness import first_difference
from engine.speculative.planner import AutoPlanner
from engine.speculative.types import Draft
from tests.cores import ALL_CORES
from tests.test_planner import drive, world
from tests.tiny_models import TinyPair

needs_two_cores = pytest.mark.skipif(len(ALL_CORES) < 2, reason="the target and the draft need a core each")


def _prompt(seed: int, vocab: int) -> list[int]:
    return [1, *np.random.default_rng(seed).integers(3, vocab, size=30).tolist()]


@needs_two_cores
@pytest.mark.usefixtures("all_cores")  # every core of the run, not the process's own one
def test_the_draft_reads_the_prompt_while_the_target_does(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=1,
                             draft_threads=1)) as eng:
        prompt = _prompt(1, eng.target_model.n_vocab)
        eng.generate(prompt, GenerationParams(mode="sd", max_tokens=1)).run()  # the first token only: no round
        assert eng.drafter is not None and eng.drafter.lag(prompt) == 0


def test_a_draft_sharing_the_cores_waits_for_its_first_round(tiny: TinyPair) -> None:
    cores = cpu_cores()
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=512, threads=cores,
                             draft_threads=cores)) as eng:
        prompt = _prompt(1, eng.target_model.n_vocab)
        eng.generate(prompt, GenerationParams(mode="sd", max_tokens=1)).run()
        assert eng.drafter is not None and eng.drafter.lag(prompt) == len(prompt)  # it would slow the prefill


@needs_two_cores
@pytest.mark.usefixtures("all_cores")
def test_greedy_replies_with_the_draft_reading_ahead_match_ar(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, threads=1,
                             draft_threads=1)) as eng:
        for seed in range(4):  # a new prompt each time: the draft has it all to read
            prompt = _prompt(seed, eng.target_model.n_vocab)
            ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=30)).run()
            for mode in ("sd", "ssd", "auto"):
                other = _prompt(100 + seed, eng.target_model.n_vocab)
                eng.generate(other, GenerationParams(mode="sd", max_tokens=2)).run()  # the draft now holds another
                got = eng.generate(prompt, GenerationParams(mode=mode, max_tokens=30)).run()
                assert got.tokens == ref.tokens, f"{mode}: diverges at {first_difference(got.tokens, ref.tokens)}"


def _reply_while_the_read_is_held(eng: Engine, prompt: list[int], monkeypatch: pytest.MonkeyPatch,
                                  release_after: int) -> tuple[Generation, list[int], list[bool]]:
    """An auto reply whose draft prompt read ends only once the reply has emitted ``release_after`` tokens (or after
    10 s); its stats, its tokens, and whether the read was released in time."""
    released = threading.Event()
    released_in_time: list[bool] = []
    read = PromptRead._read

    def held_read(self: PromptRead) -> None:
        released_in_time.append(released.wait(timeout=10))
        read(self)

    monkeypatch.setattr(PromptRead, "_read", held_read)
    gen = eng.generate(prompt, GenerationParams(mode="auto", max_tokens=24))
    got = []
    for ev in gen:
        got.append(ev.token)
        if len(got) == release_after:
            released.set()
    return gen, got, released_in_time


@needs_two_cores
@pytest.mark.usefixtures("all_cores")
def test_auto_on_ar_does_not_wait_for_the_drafts_prompt_read(tiny: TinyPair, monkeypatch: pytest.MonkeyPatch) -> None:
    # Where the draft has a core of its own and auto plans ar (drafting does not pay here), the reply's rounds run
    # while the draft still reads the prompt; the read is waited for at the first round that drafts (or the end).
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, threads=1,
                             draft_threads=1)) as eng:
        slow_and_wrong = world(verify=lambda width: 0.002 * (1 + 0.3 * (width - 1)), draft_token_s=0.05,
                               accepted=lambda k: 0)
        drive(AutoPlanner(eng._cost_model, k=4), slow_and_wrong, rounds=40)  # what auto learnt of this machine
        prompt = _prompt(7, eng.target_model.n_vocab)
        ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=24)).run()
        gen, got, released_in_time = _reply_while_the_read_is_held(eng, prompt, monkeypatch, release_after=6)
        assert released_in_time == [True]  # six tokens came while the draft was still reading
        assert got == ref.tokens
        assert set(gen.stats.rounds_by_mode) <= {"ar", "lookup"}
        assert eng.drafter is not None and eng.drafter.lag(prompt) == 0  # the read was done before the reply ended


@needs_two_cores
@pytest.mark.usefixtures("all_cores")
def test_auto_drafts_only_once_the_drafts_prompt_read_is_done(tiny: TinyPair, monkeypatch: pytest.MonkeyPatch) -> None:
    # A machine where drafting pays: the reply's first rounds run ar while the draft reads, then it drafts, and the
    # drafter is never served while the read still runs.
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, threads=1,
                             draft_threads=1)) as eng:
        cheap_and_right = world(verify=lambda width: 0.02 * (1 + 0.02 * (width - 1)), draft_token_s=0.0005,
                                accepted=lambda k: k)
        drive(AutoPlanner(eng._cost_model, k=4), cheap_and_right, rounds=40)
        prompt = _prompt(8, eng.target_model.n_vocab)
        serve = Drafter.serve
        served_while_reading: list[bool] = []

        def watched_serve(self: Drafter, *args: Any) -> Draft:
            served_while_reading.append(any(t.name == "draft-prompt" for t in threading.enumerate()))
            return serve(self, *args)

        monkeypatch.setattr(Drafter, "serve", watched_serve)
        gen, got, _ = _reply_while_the_read_is_held(eng, prompt, monkeypatch, release_after=3)
        assert served_while_reading and not any(served_while_reading)
        assert gen.stats.rounds_by_mode.get("ar", 0) >= 2  # the rounds before the read was done
        monkeypatch.undo()
        assert got == eng.generate(prompt, GenerationParams(mode="ar", max_tokens=24)).run().tokens
