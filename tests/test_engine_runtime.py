"""Engine behaviour around the decoding loop: stop, threads, UTF-8 streaming, tiny models."""

from __future__ import annotations

import json
import threading
import time

import gguf
import pytest

from engine import ContextFullError, Engine, EngineConfig, GenerationParams
from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.tiny.models import VOCAB_JSON, extract_vocab
from tests.tiny_models import TinyPair, make_pair


def _draft_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "ssd-draft" and t.is_alive()]


def test_tiny_models_load_and_decode(tiny: TinyPair) -> None:
    # The 16-token vocabulary has no byte pieces, so llama.cpp cannot tokenize free text with it:
    # it is driven by token ids only.
    for path, text in ((tiny.target, "hello world"), (tiny.draft_random, "hello world"), (tiny.small_target, None)):
        with Model(path) as m, Context(m, ContextParams(n_ctx=128, n_batch=64)) as ctx:
            toks = m.tokenize(text) if text else [1, 3, 4, 5]
            row = ctx.prefill(toks, 0)
            assert row.shape == (m.n_vocab,)
            assert ctx.seq_pos_max(0) == len(toks) - 1


def test_tiny_models_are_deterministic_and_gguf(tmp_path_factory: pytest.TempPathFactory) -> None:
    a = make_pair(tmp_path_factory.mktemp("a"))
    b = make_pair(tmp_path_factory.mktemp("b"))
    assert a.target.read_bytes() == b.target.read_bytes()
    assert a.target.read_bytes() == a.draft_same.read_bytes()
    assert a.target.read_bytes() != a.draft_related.read_bytes()
    reader = gguf.GGUFReader(a.small_target)
    assert reader.fields["general.architecture"].contents() == "llama"


def test_vocab_json_matches_the_vocab_gguf() -> None:
    """The committed 4k-token extraction is exactly the head of llama.cpp's vocab-only GGUF."""
    assert json.loads(VOCAB_JSON.read_text(encoding="utf-8")) == extract_vocab()


def test_stop_mid_ssd_round_returns_promptly(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=2048)) as eng:
        stop = threading.Event()
        prompt = eng.tokenize("Once upon a time")
        gen = eng.generate(prompt, GenerationParams(mode="ssd", k=4, fanout=3, max_tokens=1500), stop)
        seen_at_stop = None
        t_stop = 0.0
        for ev in gen:
            if len(gen.tokens) == 30 and seen_at_stop is None:
                stop.set()
                t_stop = time.perf_counter()
                seen_at_stop = len(gen.tokens)
                assert ev.round >= 0
        elapsed = time.perf_counter() - t_stop
        assert seen_at_stop is not None
        assert gen.stats.finish_reason == "stopped"
        # Stop is honoured between rounds: at most the rest of the current round is delivered.
        assert len(gen.tokens) - seen_at_stop <= 4 + 1
        assert elapsed < 5.0  # generous bound: a hang guard, not a benchmark
        assert _draft_threads() == []


def test_stop_from_another_thread_leaves_no_thread(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_random), n_ctx=2048)) as eng:
        stop = threading.Event()
        gen = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ssd", max_tokens=1800), stop)
        timer = threading.Timer(0.05, stop.set)
        timer.start()
        gen.run()
        timer.join()
        assert gen.stats.finish_reason in ("stopped", "length")
        assert _draft_threads() == []


def test_abandoned_generator_cleans_up(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_same), n_ctx=1024)) as eng:
        gen = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ssd", max_tokens=200))
        it = iter(gen)
        for _ in range(10):
            next(it)
        it.close()  # type: ignore[attr-defined]
        assert _draft_threads() == []
        # the engine is usable again and still exact
        a = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ar", max_tokens=30)).run()
        b = eng.generate(eng.tokenize("abc"), GenerationParams(mode="ssd", max_tokens=30)).run()
        assert a.tokens == b.tokens


def test_utf8_split_across_tokens_streams_whole_characters(tiny: TinyPair) -> None:
    """Byte-fallback tokens split 'é' into two pieces: the event texts must rebuild the string."""
    with Model(tiny.target) as m:
        toks = m.tokenize("é✓", add_special=False)
        assert len(toks) >= 3  # byte pieces
    import codecs

    dec = codecs.getincrementaldecoder("utf-8")("replace")
    with Model(tiny.target) as m:
        pieces = [dec.decode(m.token_bytes(t)) for t in toks]
    assert "".join(pieces).lstrip(" ") == "é✓"  # SPM renders the leading word boundary as a space
    assert "" in pieces  # some token ended mid-character and produced no text yet


def test_generation_stops_when_context_fills(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_same), n_ctx=256)) as eng:
        gen = eng.generate(eng.tokenize("hi"), GenerationParams(mode="ssd", max_tokens=5000)).run()
        assert gen.stats.finish_reason == "context"
        assert 200 < len(gen.tokens) < 256


def test_prompt_that_does_not_fit(tiny: TinyPair) -> None:
    with Engine(EngineConfig(str(tiny.target), None, n_ctx=256)) as eng, pytest.raises(ContextFullError):
        eng.generate(list(range(3, 400)), GenerationParams(mode="ar"))


def test_engine_does_not_import_qt() -> None:
    import subprocess
    import sys

    code = (
        "import engine, engine.cli.main, engine.models.offline, sys; "
        "assert not any(m.startswith('PySide6') for m in sys.modules)"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
