"""A damaged planner memory file means a fresh start and one log line; a model with a bad figure is never written."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

from engine import Engine, EngineConfig, GenerationParams
from engine.speculative import memory
from engine.speculative.costmodel import CostModel
from engine.speculative.plan import Plan
from engine.speculative.planner import AutoPlanner
from tests.costmodels import measured
from tests.tiny_models import TinyPair


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(memory, "memory_dir", lambda: tmp_path / "auto")
    return tmp_path / "auto"


def _measured() -> CostModel:
    m = measured({1: 0.03, 5: 0.05}, 0.01)
    m.observe(Plan("sd", 4), 3.0, 0.09, 3.2, 0.09)
    return m


def _good() -> str:
    import json

    return json.dumps(memory.dump(_measured()))


DAMAGE: dict[str, bytes] = {
    "non-UTF-8 bytes": b'{"version": 7, "verify": {"1": [0.03, 2]}}\xff\xfe',
    "deep nesting": b"[" * 100_000 + b"]" * 100_000,
    "1e999": _good().replace("0.03", "1e999", 1).encode(),
    "NaN": _good().replace("0.03", "NaN", 1).encode(),
    "Infinity": _good().replace("0.03", "Infinity", 1).encode(),
    "a zero figure": _good().replace("0.03", "0", 1).encode(),
    "a negative figure": _good().replace("0.03", "-0.03", 1).encode(),
    "a string figure": _good().replace("0.03", '"fast"', 1).encode(),
    "a count of true": _good().replace('"rounds": 0', '"rounds": true', 1).encode(),
    "a list at the top": b"[1, 2, 3]",
    "a probability of 2": _good().replace('"hit": [null, 0]', '"hit": [2.0, 5]', 1).encode(),
    "a plan of another mode": _good().replace("sd:4:0", "xx:4:0", 1).encode(),
    "empty": b"",
}


@pytest.mark.parametrize("damage", list(DAMAGE), ids=list(DAMAGE))
def test_a_damaged_file_is_a_fresh_model_and_one_log_line(tmp_path: Path, damage: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(DAMAGE[damage])
    with caplog.at_level(logging.WARNING):
        m = memory.load(path, split=False)
    assert not m.verify and not m.tallies and not m.stale
    lines = [r for r in caplog.records if "auto starts afresh" in r.getMessage()]
    assert len(lines) == 1 and str(path) in lines[0].getMessage()


def test_the_good_file_the_damage_is_made_from_loads() -> None:
    assert memory.restore(__import__("json").loads(_good()), split=False).verify[1].value == pytest.approx(0.03)


@pytest.mark.parametrize("damage", ["a zero figure", "non-UTF-8 bytes", "deep nesting", "NaN"])
def test_an_engine_with_a_damaged_file_runs_auto_and_ssd_and_writes_it_whole(
        tiny: TinyPair, cache: Path, damage: str) -> None:
    cfg = EngineConfig(str(tiny.target), str(tiny.draft_related), n_ctx=1024, remember_machine=True)
    with Engine(cfg) as eng:
        path = eng._memory
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(DAMAGE[damage])
    with Engine(cfg) as eng:
        for mode in ("auto", "ssd", "sd"):
            gen = eng.generate([eng.target_model.bos, 5, 6, 7], GenerationParams(mode=mode, max_tokens=12)).run()
            assert len(gen.tokens) > 0
    back = memory.load(path, split=eng._cost_model.split)
    assert back.verify[1].value is not None and math.isfinite(back.verify[1].value)


def test_a_model_with_a_bad_figure_is_not_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    for bad in (math.nan, math.inf, 0.0, -1.0):
        m = _measured()
        m.draft_token.value = bad
        path = tmp_path / "m.json"
        with caplog.at_level(logging.WARNING):
            memory.save(m, path)
        assert not path.exists(), bad
    assert "not kept" in caplog.text
    memory.save(_measured(), path)
    assert memory.load(path, split=False).draft_token.value == pytest.approx(_measured().draft_token.value)


def test_a_model_path_with_non_utf8_bytes_names_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "memory_dir", lambda: tmp_path)
    odd = str(tmp_path / "mod\udcffel.gguf")  # how the OS hands Python a file name that is not UTF-8
    a = memory.memory_file([odd, None], "threads 2 2")
    b = memory.memory_file([str(tmp_path / "mod\udcfeel.gguf"), None], "threads 2 2")
    assert a.parent == tmp_path and a != b
    memory.save(_measured(), a)
    assert memory.load(a, split=False).verify


def test_figures_read_back_are_replaced_by_their_first_fresh_sample_and_ar_is_measured_again(
        tmp_path: Path) -> None:
    busy = _measured()
    for _ in range(30):  # written while the machine was busy: 1 token took 117 ms
        busy.add_verify(1, 0.117)
    path = tmp_path / "m.json"
    memory.save(busy, path)
    m = memory.load(path, split=False)
    assert m.stale
    planner = AutoPlanner(m, 4)
    assert planner.next_plan() == Plan("ar")  # the first round re-measures ar
    m.add_verify(1, 0.033)
    assert m.t_verify(1) == pytest.approx(0.033)
