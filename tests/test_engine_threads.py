"""Stopping and closing from any thread: within one round, never 'generator already executing'."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from engine import Engine, EngineConfig, Generation, GenerationParams
from tests.tiny_models import TinyPair

K = 4


def _draft_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ssd-draft" and t.is_alive()]


@dataclass
class Consumer:
    """Iterates a generation on its own thread; records what it saw and any exception."""

    gen: Generation
    seen: int = 0
    error: BaseException | None = None
    started: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._run, name="consumer")
        self.thread.start()

    def _run(self) -> None:
        try:
            for _ in self.gen:
                self.seen += 1
                if self.seen == 20:
                    self.started.set()
        except BaseException as exc:
            self.error = exc
        finally:
            self.started.set()


@pytest.mark.parametrize("mode", ["ar", "sd", "ssd", "auto"])
def test_close_from_another_thread_mid_generation(tiny: TinyPair, mode: str) -> None:
    eng = Engine(EngineConfig(str(tiny.target), str(tiny.draft_random), n_ctx=2048))
    gen = eng.generate(eng.tokenize("Once upon a time"), GenerationParams(mode=mode, k=K, max_tokens=1800))
    consumer = Consumer(gen)
    assert consumer.started.wait(60)
    eng.close()  # from this thread, while the consumer's thread runs rounds
    at_close = len(gen.tokens)
    consumer.thread.join(60)
    assert not consumer.thread.is_alive()
    assert consumer.error is None, repr(consumer.error)
    assert len(gen.tokens) == at_close < 1800  # nothing more after close returned
    assert gen.stats.finish_reason == "stopped"
    assert _draft_threads() == []
    eng.close()  # idempotent


@pytest.mark.parametrize("mode", ["ar", "ssd"])
def test_stop_from_another_thread_ends_within_one_round(tiny: TinyPair, mode: str) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_random), n_ctx=2048)) as eng:
        gen = eng.generate(eng.tokenize("abc"), GenerationParams(mode=mode, k=K, max_tokens=1800))
        seen_at_stop: list[int] = []
        for ev in gen:
            if len(gen.tokens) == 25:
                threading.Thread(target=gen.stop).start()
                seen_at_stop.append(len(gen.tokens))
            assert ev.text is not None
        assert gen.stats.finish_reason == "stopped"
        assert len(gen.tokens) - seen_at_stop[0] <= K + 1  # the rest of one round at most
        assert _draft_threads() == []


def test_abandoned_generation_does_not_block_the_next(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_same), n_ctx=1024)) as eng:
        prompt = eng.tokenize("abc")
        old = eng.generate(prompt, GenerationParams(mode="ssd", max_tokens=200))
        it = iter(old)
        for _ in range(10):
            next(it)
        # ``old`` is still referenced and suspended holding the engine; the next generation closes it
        ar = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=30)).run()
        assert old.stats.finish_reason == "stopped" and len(old.tokens) >= 10
        assert list(it) == []  # the abandoned iterator just ends
        ssd = eng.generate(prompt, GenerationParams(mode="ssd", max_tokens=30)).run()
        assert ar.tokens == ssd.tokens
        assert _draft_threads() == []


def test_a_generation_started_elsewhere_is_closed_by_the_next(tiny: TinyPair) -> None:
    """A new generation while another thread still iterates one: the first ends within one round."""
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_random), n_ctx=2048)) as eng:
        first = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ssd", k=K, max_tokens=1800))
        consumer = Consumer(first)
        assert consumer.started.wait(60)
        second = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ar", max_tokens=20)).run()
        consumer.thread.join(60)
        assert consumer.error is None, repr(consumer.error)
        assert first.stats.finish_reason == "stopped" and len(second.tokens) == 20


def test_close_an_engine_whose_generation_was_abandoned(tiny: TinyPair) -> None:
    eng = Engine(EngineConfig(str(tiny.target), str(tiny.draft_same), n_ctx=1024))
    gen = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ssd", max_tokens=200))
    it = iter(gen)
    next(it)
    closer = threading.Thread(target=eng.close)
    closer.start()
    closer.join(60)
    assert not closer.is_alive()
    assert gen.stats.finish_reason == "stopped"
    assert _draft_threads() == []
