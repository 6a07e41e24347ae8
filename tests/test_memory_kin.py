"""The planner memory's kin (issue 63 item 3): what was learnt for a pair on this machine is the start of the same
pair in another quantization, or of a replaced file, scaled by the files' sizes and aged, instead of nothing."""

from __future__ import annotations

import dataclasses
import math
import os
from pathlib import Path

import pytest

from engine.sim import bench as simbench
from engine.sim.machine import Profile
from engine.sim.profiles import PROFILES
from engine.speculative import kin, memory
from engine.speculative.costmodel import CostModel
from engine.speculative.knobs import AGE_WEIGHT
from engine.speculative.plan import Plan
from tests.costmodels import measured

SETUP = "threads 2 2, GPU layers False False"
NEARBY = 1.3  # the target's Q5_K_M against its Q4_K_M (bytes), as the simulated machine's verify times below


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(memory, "memory_dir", lambda: tmp_path / "auto")
    return tmp_path


def _model(folder: Path, name: str, size: int) -> str:
    path = folder / name
    with path.open("wb") as f:
        f.truncate(size)
    return str(path)


def _measured() -> CostModel:
    m = measured({1: 0.1, 5: 0.2}, 0.02)
    m.observe(Plan("sd", 4), 3.0, 0.3, 3.2, 0.3)
    m.probe_gap["ssd"] = 256
    return m


def _pair(folder: Path, quant: str, size: int) -> list[str | None]:
    return [_model(folder, f"Qwen2.5-Coder-1.5B-Instruct-{quant}.gguf", size),
            _model(folder, "qwen2.5-coder-0.5b-instruct-q8_0.gguf", 500)]


@pytest.mark.parametrize("name", ["Qwen2.5-Coder-1.5B-Instruct-Q5_K_M.gguf", "qwen2.5-coder-1.5b-instruct-f16.gguf",
                                  "Qwen2.5-Coder-1.5B-Instruct-IQ3_XS-00001-of-00002.gguf",
                                  "/models/Qwen2.5-Coder-1.5B-Instruct.Q8_0.gguf"])
def test_a_quantization_is_no_part_of_a_models_stem(name: str) -> None:
    assert kin.stem(name) == kin.stem("Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf") == "qwen2.5-coder-1.5b-instruct"


def test_another_quantization_of_the_pair_starts_from_its_memory_scaled_and_aged(folder: Path) -> None:
    q4 = memory.memory_file(_pair(folder, "Q4_K_M", 1000), SETUP)
    memory.save(_measured(), q4)
    q5 = memory.memory_file(_pair(folder, "Q5_K_M", 1300), SETUP)
    assert q5 != q4 and q5.name[:8] == q4.name[:8]  # one kin, two files
    m = memory.load(q5, split=False)
    own = memory.load(q4, split=False)
    assert m.stale
    assert m.t_verify(5) == pytest.approx(1.3 * own.t_verify(5))  # a decode reads every weight: 1.3x the bytes
    assert m.draft_token.value == pytest.approx(own.draft_token.value)  # the same draft file
    assert m.tallies[Plan("sd", 4)].tokens == pytest.approx(AGE_WEIGHT * own.tallies[Plan("sd", 4)].tokens)
    assert m.tallies[Plan("sd", 4)].factor(tokens=False) == pytest.approx(own.tallies[Plan("sd", 4)].factor(
        tokens=False))  # its seconds scaled with its predictions
    assert not m.probe_gap  # a mode that lost on the other file is measured again soon


def test_the_files_own_memory_comes_before_a_kins(folder: Path) -> None:
    memory.save(_measured(), memory.memory_file(_pair(folder, "Q4_K_M", 1000), SETUP))
    q5 = memory.memory_file(_pair(folder, "Q5_K_M", 1300), SETUP)
    mine = _measured()
    mine.add_verify(1, 0.9)  # learnt on this very file
    memory.save(mine, q5)
    assert memory.load(q5, split=False).probe_gap == {"ssd": 256}  # not adopted (which clears it)


def test_a_replaced_model_file_starts_from_what_the_old_one_taught(folder: Path) -> None:
    models = _pair(folder, "Q4_K_M", 1000)
    memory.save(_measured(), memory.memory_file(models, SETUP))
    assert models[0] is not None
    os.utime(models[0], (1, 1))  # another download of the same file: another time, so another exact key
    m = memory.load(memory.memory_file(models, SETUP), split=False)
    assert m.stale and m.t_verify(1) == pytest.approx(0.1)  # what the old file measured (sizes the same)


def test_a_quantization_far_in_size_starts_afresh(folder: Path) -> None:
    memory.save(_measured(), memory.memory_file(_pair(folder, "F16", 5000), SETUP))  # 5x: beyond KIN_SIZE_RATIO
    assert not memory.load(memory.memory_file(_pair(folder, "Q4_K_M", 1000), SETUP), split=False).verify


def test_another_setup_is_no_kin(folder: Path) -> None:
    memory.save(_measured(), memory.memory_file(_pair(folder, "Q5_K_M", 1300), SETUP))
    other = memory.memory_file(_pair(folder, "Q4_K_M", 1000), "threads 1 1, GPU layers False False")
    assert not memory.load(other, split=False).verify


def test_another_model_is_no_kin(folder: Path) -> None:
    memory.save(_measured(), memory.memory_file(_pair(folder, "Q4_K_M", 1000), SETUP))
    other = [_model(folder, "Llama-3.2-1B-Instruct-Q4_K_M.gguf", 1000),
             _model(folder, "qwen2.5-coder-0.5b-instruct-q8_0.gguf", 500)]
    assert not memory.load(memory.memory_file(other, SETUP), split=False).verify


def test_a_file_kept_under_the_name_before_the_kin_key_is_read_as_its_own(folder: Path) -> None:
    path = memory.memory_file(_pair(folder, "Q4_K_M", 1000), SETUP)
    old = kin.legacy(path)
    assert old is not None and old.name == f"{path.name.split('-')[1]}.json"
    memory.save(_measured(), old)
    assert memory.load(path, split=False).probe_gap == {"ssd": 256}


def _nearby(profile: Profile) -> Profile:
    """``profile``'s machine with its target NEARBY times the bytes: every verify NEARBY times slower."""
    m = profile.machine
    slower = dataclasses.replace(m, name=f"{m.name}-q5", verify=tuple((w, NEARBY * t) for w, t in m.verify))
    return dataclasses.replace(profile, name=f"{profile.name}-q5", machine=slower)


def test_simulated_a_kins_memory_makes_a_nearby_quantizations_first_reply_faster_than_none() -> None:
    """cpu-B-distilled (its fresh first reply 0.75x-0.88x the best fixed plan's): the same pair's Q5 starts from
    what three replies on the Q4 taught, adopted as the memory adopts a kin's, against a fresh start."""
    q4 = PROFILES["cpu-B-distilled"]
    q5 = _nearby(q4)
    gains = []
    for seed in range(4):
        learnt = CostModel(split=q4.machine.split)
        simbench.run_auto(q4, replies=3, model=learnt, seed=100 + seed)
        start = kin.adopt(memory.age(memory.restore(memory.dump(learnt), q5.machine.split)), [NEARBY, 1.0])
        fresh = simbench.run_auto(q5, replies=1, seed=seed).rates[0]
        gains.append(simbench.run_auto(q5, replies=1, model=start, seed=seed).rates[0] / fresh)
    assert min(gains) > 1.0
    assert math.exp(sum(map(math.log, gains)) / len(gains)) > 1.05
