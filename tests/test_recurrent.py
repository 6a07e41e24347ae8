"""Recurrent (mamba) and hybrid (lfm2) models: every cut-back checks its answer; every mode's greedy reply is ar's."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.core.kvtrack import KVTrack
from engine.core.recurrent import PROMPT, ROLLBACK_DEPTH, memory_kind
from engine.speculative.exactness import first_difference
from engine.tiny.recurrent import write_lfm2, write_mamba
from tests.server_helpers import client, serve
from tests.tiny_models import TinyPair

N_TOKENS = 30
CTX = 512
ARCHS = ["mamba", "lfm2"]
WRITERS = {"mamba": write_mamba, "lfm2": write_lfm2}
MODES = [
    GenerationParams(mode="sd", k=1), GenerationParams(mode="sd", k=4), GenerationParams(mode="ssd", k=3, fanout=2),
    GenerationParams(mode="ssd", k=2, fanout=3, backup="ngram"), GenerationParams(mode="lookup"),
    GenerationParams(mode="auto", k=4, fanout=2), GenerationParams(mode="auto", k=3, fanout=1, adaptive=False),
]


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("recurrent")
    return {arch: (WRITERS[arch](folder / f"{arch}_target.gguf", seed=1),
                   WRITERS[arch](folder / f"{arch}_draft.gguf", seed=1, noise=0.05)) for arch in ARCHS}


def _engine(pair: tuple[Path, Path]) -> Engine:
    return Engine(EngineConfig(str(pair[0]), str(pair[1]), n_ctx=CTX, threads=1, draft_threads=1))


@pytest.fixture(scope="module", params=ARCHS)
def engine(request: pytest.FixtureRequest, pairs: dict[str, tuple[Path, Path]]) -> Iterator[tuple[str, Engine]]:
    with _engine(pairs[request.param]) as eng:
        yield request.param, eng


def _prompts(n: int, vocab: int) -> list[list[int]]:
    rng = np.random.default_rng(58)
    return [[1, *rng.integers(3, vocab, size=int(rng.integers(3, 30))).tolist()] for _ in range(n)]


def test_memory_kind_per_architecture(pairs: dict[str, tuple[Path, Path]], tiny: TinyPair) -> None:
    kinds = {}
    for name, path in [("mamba", pairs["mamba"][0]), ("lfm2", pairs["lfm2"][0]), ("llama", tiny.target)]:
        with Model(str(path)) as model:
            kinds[name] = memory_kind(model.ptr)
    assert (kinds["mamba"].recurrent, kinds["mamba"].rollback) == (True, 0)  # checkpoints only
    assert (kinds["lfm2"].recurrent, kinds["lfm2"].rollback) == (True, ROLLBACK_DEPTH)  # n_rs_seq, and checkpoints
    assert (kinds["llama"].recurrent, kinds["llama"].rollback) == (False, 0)


def _row_after(path: Path, tokens: list[int]) -> np.ndarray:
    with Model(str(path)) as model, Context(model, ContextParams(n_ctx=CTX, n_batch=64)) as ctx:
        return KVTrack(ctx).sync(tokens)


@pytest.mark.parametrize("arch", ARCHS)
def test_cut_back_goes_to_a_checkpoint_or_to_nothing(pairs: dict[str, tuple[Path, Path]], arch: str) -> None:
    path = pairs[arch][0]
    tokens = [1, *range(10, 30)]
    with Model(str(path)) as model, Context(model, ContextParams(n_ctx=CTX, n_batch=64)) as ctx:
        kv = KVTrack(ctx)
        kv.sync(tokens[:8])
        kv.decode_one(tokens[8])
        kv.decode_one(tokens[9])
        assert not ctx.seq_rm(0, 8, -1)  # two single-token decodes: no snapshot reaches back two
        kv.trim(8)
        assert kv.tokens == []  # no checkpoint: nothing is held, never a wrong state
        kv.sync(tokens[:12])
        kv.keep_prompt()
        kv.sync(tokens)
        kv.decode_one(99)
        kv.trim(15)
        assert kv.tokens == tokens[:12] and kv.restores == 2
        row = kv.sync(tokens[:16])
    np.testing.assert_allclose(row, _row_after(path, tokens[:16]), rtol=1e-4, atol=1e-4)


def test_rollback_removes_the_last_decode_once(pairs: dict[str, tuple[Path, Path]]) -> None:
    tokens = [1, *range(10, 30)]
    with Model(str(pairs["lfm2"][0])) as model, Context(model, ContextParams(n_ctx=CTX, n_batch=64)) as ctx:
        kv = KVTrack(ctx)
        kv.sync(tokens[:6])
        ctx.decode_out(tokens[6:11], range(6, 11), 0, range(5))  # a verify batch of five
        kv.tokens.extend(tokens[6:11])
        kv.trim(8)
        assert kv.tokens == tokens[:8] and kv.restores == 0  # llama.cpp's snapshots gave three back
        assert not ctx.seq_rm(0, 7, -1)  # once per decode
        row = kv.sync(tokens[:12])
    np.testing.assert_allclose(row, _row_after(pairs["lfm2"][0], tokens[:12]), rtol=1e-4, atol=1e-4)


def test_greedy_every_mode_matches_ar(engine: tuple[str, Engine]) -> None:
    arch, eng = engine
    for prompt in _prompts(4, eng.target_model.n_vocab):
        ref = eng.generate(prompt, GenerationParams(mode="ar", max_tokens=N_TOKENS)).run()
        for base in MODES:
            params = GenerationParams(mode=base.mode, k=base.k, fanout=base.fanout, backup=base.backup,
                                      adaptive=base.adaptive, max_tokens=N_TOKENS)
            got = eng.generate(prompt, params).run()
            assert got.tokens == ref.tokens, f"{arch} {params}: diverges at {first_difference(got.tokens, ref.tokens)}"


def _turns(edited: bool) -> list[Any]:
    first = "an edited first question" if edited else "the first question"
    return [{"role": "user", "content": first}, {"role": "assistant", "content": "a reply"},
            {"role": "user", "content": "and a second one"}]


@pytest.mark.parametrize("mode", ["ar", "sd", "ssd", "auto"])
def test_second_turn_equals_a_fresh_engine(engine: tuple[str, Engine], pairs: dict[str, tuple[Path, Path]],
                                           mode: str) -> None:
    arch, eng = engine
    params = GenerationParams(mode=mode, k=3, max_tokens=N_TOKENS)
    chats = [_turns(False)[:1], _turns(False), _turns(True)]
    got = [eng.generate(eng.messages_tokens(m), params).run().tokens for m in chats]
    with _engine(pairs[arch]) as fresh:
        want = [fresh.generate(fresh.messages_tokens(m), params).run().tokens for m in chats[1:]]
    assert got[1:] == want, arch


def test_server_second_request_sharing_a_prefix(engine: tuple[str, Engine]) -> None:
    _, eng = engine
    with serve(eng, max_queue=2) as server:
        oai = client(server)
        replies = [oai.chat.completions.create(model=server.model_id, messages=m, max_tokens=12, temperature=0,
                                               extra_body={"mode": "sd"}).choices[0].message.content
                   for m in (_turns(False)[:1], _turns(False), _turns(False)[:1])]
    assert replies[0] == replies[2]
    assert eng.target.kv.marks.get(eng.target_ctx.spare[PROMPT]) is not None


def test_checkpoint_cost_is_in_the_stats(engine: tuple[str, Engine]) -> None:
    arch, eng = engine
    prompt = _prompts(1, eng.target_model.n_vocab)[0]
    stats = eng.generate(prompt, GenerationParams(mode="sd", k=4, max_tokens=N_TOKENS)).run().stats
    if arch == "mamba":  # checkpoints: their cost is part of the verify's
        assert stats.mean_restore_ms is not None and 0 < stats.mean_restore_ms < stats.mean_verify_ms
    else:  # llama.cpp's snapshots give the rejected drafts back
        assert stats.mean_restore_ms is None
    assert eng.generate(prompt, GenerationParams(mode="ar", max_tokens=N_TOKENS)).run().stats.mean_restore_ms is None


def test_an_unrelated_prompt_frees_the_old_checkpoint(engine: tuple[str, Engine]) -> None:
    _, eng = engine
    rng = np.random.default_rng(7)
    long = [[1, *rng.integers(3, eng.target_model.n_vocab, size=300).tolist()] for _ in range(2)]
    for prompt in long:  # 600 cells would not fit CTX if the first prompt's checkpoint kept its own
        assert eng.generate(prompt, GenerationParams(mode="sd", k=3, max_tokens=8)).run().tokens
