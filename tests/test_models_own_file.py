"""A model of the user's own (issue 62 item 9) and recurrent or hybrid targets in the draft finder (issue 58 item
5): ``models import --target FILE`` alone, a file refused as its own draft, ``models drafts FILE`` over the store
and the stand-in Hub by the vocabulary rule, each model's architecture and what speculation costs on it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.core.recurrent import ROLLBACK_ARCHS
from engine.models import archs
from engine.models.catalog import Arch
from engine.models.drafts import find_drafts_for_file
from engine.models.headers import HeaderReader, NotGgufError
from engine.models.store import ModelStore
from engine.tiny.recurrent import write_lfm2, write_mamba
from tests.hub_models import DRAFT_FILE, DRAFT_REPO, TOKEN_FILE, TOKEN_REPO, hub, hub_models
from tests.hub_server import HubState
from tests.tiny_models import TinyPair

__all__ = ["hub", "hub_models"]  # fixtures
HYBRID = {"n_layer": 3, "n_embd": 384, "n_ff": 768}  # 30 MB: 12 times the stand-in Hub's 2.5 MB draft


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["models", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_each_architecture_says_how_it_goes_back() -> None:
    assert archs.arch_info("llama").undo == archs.ATTENTION and archs.arch_info("llama").label == "llama"
    assert all(archs.arch_info(a).undo == archs.ROLLBACK for a in ROLLBACK_ARCHS)
    for arch in ("mamba", "mamba2", "granitehybrid", "jamba", "falcon-h1", "rwkv7"):
        assert archs.arch_info(arch).undo == archs.CHECKPOINT, arch
    assert archs.arch_info("lfm2").label == "lfm2 (hybrid)" and archs.arch_info("mamba").label == "mamba (recurrent)"
    assert archs.arch_info("").label == "?"
    assert archs.pair_note(archs.arch_info("qwen2"), archs.arch_info("llama")) == ""
    assert archs.pair_note(archs.arch_info("granitehybrid"), archs.arch_info("llama")) == (
        "target granitehybrid (hybrid): a rejected draft costs one more decode of the accepted tokens (a checkpoint)")
    assert "draft mamba (recurrent): ssd's tree branches only after its whole draft" in archs.pair_note(
        archs.arch_info("llama"), archs.arch_info("mamba"))


def test_architectures_are_read_from_the_files(tiny: TinyPair, tmp_path: Path) -> None:
    assert archs.of_file(tiny.target) == archs.ArchInfo("llama", archs.ATTENTION)
    assert archs.of_file(write_lfm2(tmp_path / "h.gguf")) == archs.ArchInfo("lfm2", archs.ROLLBACK)
    assert archs.of_file(write_mamba(tmp_path / "m.gguf")) == archs.ArchInfo("mamba", archs.CHECKPOINT)
    (tmp_path / "junk.gguf").write_bytes(b"not a model" * 50)
    assert archs.of_file(tmp_path / "junk.gguf").arch == "" and archs.of_file(tmp_path / "none.gguf").arch == ""


def test_the_fit_estimate_counts_only_a_caches_layers(tmp_path: Path) -> None:
    hybrid = HeaderReader.local(write_lfm2(tmp_path / "h.gguf", n_layer=6)).architecture()
    assert hybrid == Arch(2, 4, 16, 0)  # every third lfm2 layer is attention; the others keep a state
    recurrent = HeaderReader.local(write_mamba(tmp_path / "m.gguf")).architecture()
    assert recurrent is not None and recurrent.kv_bytes(4096) == 0


def test_a_target_imports_alone_and_never_as_its_own_draft(
    tiny: TinyPair, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["import", "--target", str(tiny.target), "--draft", str(tiny.target)], capsys)
    assert code == 2 and out == "" and err.strip() == (
        "error: target.gguf cannot be its own draft: a draft is a smaller model of the same family (the target "
        "drafting for itself costs as much as it saves); import it without a draft to run it with the lookup and "
        "ar modes")
    assert ModelStore().installed() == []

    code, out, _ = run(["import", "--target", str(tiny.target)], capsys)
    assert code == 0 and out.startswith("imported local-target: target (no draft: it runs with lookup and ar; ")
    [pair] = ModelStore().installed()
    assert (pair.id, pair.draft_path, pair.draft_size, pair.target_path) == ("local-target", None, 0,
                                                                             tiny.target.resolve())
    assert run(["import", "--target", str(tiny.target)], capsys)[1].startswith("imported local-target:")  # same one
    code, out, _ = run(["list", "--installed"], capsys)
    assert "    draft:  none (lookup and ar; find one: python -m engine models drafts TARGET)" in out.splitlines()
    assert run(["check"], capsys)[:2] == (0, "ok  local-target: checksums ok\n")

    # with a draft it is another pair; removing the lone target keeps the user's file
    assert run(["import", "--target", str(tiny.target), "--draft", str(tiny.draft_related)], capsys)[0] == 0
    assert [p.id for p in ModelStore().installed()] == ["local-target", "local-target+draft-related"]
    assert run(["remove", "local-target"], capsys)[0] == 0 and tiny.target.is_file()
    (tiny.target.parent / "not-gguf.gguf").write_bytes(b"x" * 100)
    code, _, err = run(["import", "--target", str(tiny.target.parent / "not-gguf.gguf")], capsys)
    assert code == 2 and "not a GGUF file" in err


def test_drafts_for_a_hybrid_file_on_disk_from_the_store_and_the_hub(
    hub: HubState, tiny: TinyPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = write_lfm2(tmp_path / "qwen2.5-7b-instruct-lfm2-f32.gguf", seed=5, **HYBRID)  # the Hub's vocabulary
    ModelStore().import_pair(mine)  # in the store: never its own candidate
    ModelStore().import_pair(tiny.target, tiny.draft_related)  # the store's files: llama, the same vocabulary
    code, out, _ = run(["drafts", str(mine)], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == (
        f"drafts for {mine} (30.4 MB, lfm2 (hybrid): llama.cpp rolls its state back (n_rs_seq): the state "
        "kept 17 times over in memory), best first:")
    assert str(mine) not in out.replace(lines[0], "")
    hub_line = next(i for i, line in enumerate(lines) if f"{DRAFT_REPO}/{DRAFT_FILE}" in line)
    assert lines[hub_line].startswith("  compatible") and lines[hub_line].endswith("  llama")
    assert lines[hub_line + 1].strip() == (
        "same tokenizer; 1/12 of the target's size; target lfm2 (hybrid): llama.cpp rolls its state back (n_rs_seq): "
        "the state kept 17 times over in memory")  # a hybrid target with an attention-only draft: a valid pair
    assert f"incompatible {TOKEN_REPO}/{TOKEN_FILE}" in out  # the vocabulary rule, as for a Hub target
    assert f"compatible   {tiny.draft_related} (on disk)  ? " in out
    searched = [r.path for r in hub.requests if "search=" in r.path]
    assert searched and all("author=" not in q for q in searched)  # anyone's repositories of the family

    data = json.loads(run(["drafts", str(mine), "--json"], capsys)[1])
    assert data["arch"] == "lfm2" and data["target"]["repo"] == "" and data["advice"] == ""
    assert {c["arch"] for c in data["candidates"] if c["verdict"] == "compatible"} == {"llama"}


def test_drafts_for_a_recurrent_file_say_what_a_checkpoint_costs(
    hub: HubState, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = write_mamba(tmp_path / "qwen2.5-7b-mamba.gguf", seed=2, n_layer=2, n_embd=512)
    found = find_drafts_for_file(mine, store=ModelStore(tmp_path / "empty"))
    assert found.arch == "mamba" and found.candidates[0].compatible
    assert found.candidates[0].reason.endswith(
        "target mamba (recurrent): a rejected draft costs one more decode of the accepted tokens (a checkpoint)")
    alone = tmp_path / "unknown-family-q8_0.gguf"
    shutil.copy(mine, alone)
    found = find_drafts_for_file(alone, store=ModelStore(tmp_path / "empty"))
    assert found.candidates == [] and found.advice == (
        "no compatible draft found: the target runs with the lookup and ar modes")
    with pytest.raises(NotGgufError, match="cannot read it"):
        find_drafts_for_file(tmp_path / "missing.gguf")
    code, out, err = run(["drafts", str(tmp_path / "missing.gguf")], capsys)
    assert code == 2 and out == "" and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert run(["drafts", "Qwen/Qwen2.5-7B-Instruct-GGUF"], capsys)[2].strip() == (
        "error: Qwen/Qwen2.5-7B-Instruct-GGUF is not a file here: for a Hub model name its file too (models drafts "
        "REPO FILE; models files Qwen/Qwen2.5-7B-Instruct-GGUF lists them)")
