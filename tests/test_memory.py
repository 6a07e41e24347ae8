"""auto's picture of the machine outlives the session: kept on disk per machine and setup, read back whole."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.speculative import memory
from engine.speculative.costmodel import CostModel
from engine.speculative.plan import Plan
from tests.cores import ALL_CORES
from tests.tiny_models import TinyPair


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(memory, "memory_dir", lambda: tmp_path / "auto")  # the CPU check's verdict stays where it is
    return tmp_path


def _config(tiny: TinyPair, **kw: object) -> EngineConfig:
    return EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, remember_machine=True, **kw)  # type: ignore[arg-type]


def _files(cache: Path) -> list[Path]:
    return sorted((cache / "auto").glob("*.json")) if (cache / "auto").is_dir() else []


def test_the_dump_restores_every_figure() -> None:
    m = CostModel(split=True)
    for w, t in ((1, 0.1), (5, 0.3)):
        m.add_verify(w, t)
        m.add_verify(w, t, split=True)
    m.add_level(6, 0.02)
    m.draft_token.add(0.01)
    m.acceptance.add(0.7)
    m.hit.add(1.0)
    m.top1.add(0.5)
    m.learn_lookup([4, 3], 1)
    m.observe(Plan("ssd", 3, 4), 3, 0.2, 3.5, 0.25)
    m.observe(Plan("lookup"), 2, 0.1, 2.0, 0.1)
    m.probe_gap["sd"] = 64
    m.rounds = 17
    m.last_run["ssd"] = 16
    back = memory.restore(memory.dump(m), split=True)
    assert memory.dump(back) == memory.dump(m)
    for plan in (Plan("ar"), Plan("sd", 4), Plan("ssd", 3, 4), Plan("lookup")):
        assert back.rate(plan) == m.rate(plan)
    assert back.lookup_best([4, 3, 3]) == m.lookup_best([4, 3, 3])


@pytest.mark.skipif(len(ALL_CORES) < 2, reason="another setup here is one thread on a host of several cores")
@pytest.mark.usefixtures("all_cores")  # the default threads are every core, not the test process's one
def test_a_new_session_starts_from_what_the_last_one_measured(tiny: TinyPair, cache: Path) -> None:
    prompt = list(range(20, 40))
    with Engine(_config(tiny)) as eng:
        list(eng.generate([eng.target_model.bos, *prompt], GenerationParams(mode="sd", max_tokens=24)))
        list(eng.generate([eng.target_model.bos, *prompt], GenerationParams(mode="auto", max_tokens=24)))
        before = eng.measured_rates()
        kept = memory.dump(eng._cost_model)
    assert len(_files(cache)) == 1 and {"ar", "sd"} <= set(before)
    with Engine(_config(tiny)) as eng:  # read back as priors: the same figures, each to be replaced when measured
        assert memory.dump(eng._cost_model) == memory.dump(memory.age(memory.restore(kept, split=False)))
        assert eng._cost_model.stale
        after = eng.measured_rates()
        assert after.keys() == before.keys()
        # the same figures, aged: the pace is folded into the verify times and the plans' own tallies weigh less,
        # which moves a prediction a little where the host's pace drifted (a lost figure would fall to the priors)
        assert all(after[m].tokens_per_second == pytest.approx(before[m].tokens_per_second, rel=0.25) for m in before)
    with Engine(_config(tiny, threads=1, draft_threads=1)) as eng:  # another setup: measured anew
        assert eng.measured_rates() == {}
    with Engine(EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024)) as eng:  # not asked to remember
        assert eng.measured_rates() == {}
        list(eng.generate([eng.target_model.bos, *prompt], GenerationParams(mode="ar", max_tokens=4)))
    assert len(_files(cache)) == 1


def test_a_damaged_file_means_a_fresh_start_and_is_rewritten(tiny: TinyPair, cache: Path,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with Engine(_config(tiny)) as eng:
        list(eng.generate([eng.target_model.bos, 5, 6, 7], GenerationParams(mode="ar", max_tokens=4)))
    (path,) = _files(cache)
    for damage in ('{"version": 1, "verify": {"1": ["x", 2]}}', "not json", '{"version": 99}'):
        path.write_text(damage, encoding="utf-8")
        with caplog.at_level(logging.WARNING), Engine(_config(tiny)) as eng:
            assert eng.measured_rates() == {}
            list(eng.generate([eng.target_model.bos, 5, 6, 7], GenerationParams(mode="ar", max_tokens=4)))
        assert "auto starts afresh" in caplog.text
        assert memory.load(path, split=False).verify[1].value is not None  # rewritten whole after the reply
