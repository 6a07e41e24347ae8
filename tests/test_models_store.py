"""The model store: import of local files, listing, verification, removal, the offline pair (engine.store)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from engine import offline
from engine.core.backend import Model
from engine.core.vocab import check_compatible, check_vocab_rule
from engine.errors import EngineError, ModelLoadError, VocabMismatchError
from engine.models.gguf_remote import local_vocab
from engine.models.store import ModelStore
from tests.tiny_models import TinyPair


def test_import_registers_files_in_place(tiny: TinyPair, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    pair = store.import_pair(tiny.target, tiny.draft_related, name="My tiny pair")

    assert pair.source == "import" and pair.name == "My tiny pair"
    assert pair.id == "local-target+draft-related"
    assert (pair.target_path, pair.draft_path) == (tiny.target.resolve(), tiny.draft_related.resolve())
    assert (pair.target_size, pair.draft_size) == (
        tiny.target.stat().st_size,
        tiny.draft_related.stat().st_size,
    )
    assert store.installed() == [pair] and store.get(pair.id) == pair
    registry = json.loads(store.registry_path.read_text())
    assert registry["pairs"][0]["target_path"] == str(tiny.target.resolve())
    assert not list(store.root.glob(".registry.*"))  # the atomic write left no temp file

    # the same files again: the same pair; other files with the same stems: a new id
    assert store.import_pair(tiny.target, tiny.draft_related) == pair
    other = tmp_path / "elsewhere"
    other.mkdir()
    shutil.copy(tiny.target, other / "target.gguf")
    second = store.import_pair(other / "target.gguf", tiny.draft_related)
    assert second.id == "local-target+draft-related-2"
    assert second.name == "target + draft_related"
    assert ModelStore(tmp_path / "store").installed() == [pair, second]  # survives a new store object


def test_import_rejects_an_incompatible_draft_with_its_reason(tiny: TinyPair, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    with pytest.raises(VocabMismatchError) as err:
        store.import_pair(tiny.target, tiny.small_draft)
    assert str(err.value) == (
        "small_draft.gguf cannot be the draft for target.gguf: vocabulary sizes differ by 4080 "
        "(target 4096, draft 16; at most 128 allowed). Speculative decoding needs both models to share "
        "one tokenizer; pick a draft from the target's model family"
    )
    assert store.installed() == [] and not store.registry_path.exists()


def test_import_rejects_missing_and_non_gguf_files(tiny: TinyPair, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    with pytest.raises(ModelLoadError, match="model file not found"):
        store.import_pair(tmp_path / "missing.gguf", tiny.draft_same)
    junk = tmp_path / "notes.gguf"
    junk.write_bytes(b"this is not a model" * 10)
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        store.import_pair(tiny.target, junk)


def test_header_rule_and_loaded_rule_agree(tiny: TinyPair) -> None:
    """The pre-download check (GGUF header) and check_compatible (llama.cpp) give the same verdicts."""
    cases = [
        (tiny.target, tiny.draft_same),
        (tiny.target, tiny.draft_random),
        (tiny.target, tiny.small_draft),
        (tiny.small_target, tiny.target),
        (tiny.small_target, tiny.small_draft),
    ]
    for target, draft in cases:
        with Model(target, vocab_only=True) as t, Model(draft, vocab_only=True) as d:
            try:
                check_compatible(t, d)
                loaded = "ok"
            except VocabMismatchError as exc:
                loaded = str(exc)
        try:
            check_vocab_rule(local_vocab(target), local_vocab(draft))
            header = "ok"
        except VocabMismatchError as exc:
            header = str(exc)
        assert header == loaded, (target.name, draft.name)
    assert {local_vocab(tiny.target).n_vocab, local_vocab(tiny.small_draft).n_vocab} == {4096, 16}


def test_verify_reports_each_pair(tiny: TinyPair, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    for p in (tiny.target, tiny.draft_same):
        shutil.copy(p, mine / p.name)
    store = ModelStore(tmp_path / "store")
    pair = store.import_pair(mine / "target.gguf", mine / "draft_same.gguf")
    assert store.check() == [(pair.id, True, "checksums and vocabularies ok")]

    with (mine / "draft_same.gguf").open("ab") as f:
        f.write(b"\0" * 10)
    [(pair_id, ok, message)] = store.check()
    assert (pair_id, ok) == (pair.id, False)
    assert message.startswith("draft draft_same.gguf is ")

    (mine / "target.gguf").unlink()
    assert store.check()[0][2].startswith("model file not found")


def test_remove_import_keeps_the_users_files(tiny: TinyPair, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    pair = store.import_pair(tiny.target, tiny.draft_same)
    store.remove(pair.id)
    assert store.installed() == [] and tiny.target.is_file() and tiny.draft_same.is_file()
    with pytest.raises(EngineError, match="no installed pair 'nope'"):
        store.remove("nope")


def _fake_offline(folder: Path) -> tuple[Path, Path]:
    """Sparse files of the offline pair's exact sizes with valid stamps (no real weights needed to list)."""
    folder.mkdir(parents=True)
    paths = []
    for model in (offline.TARGET, offline.DRAFT):
        path = folder / model.filename
        with path.open("wb") as f:
            f.truncate(model.size)
        st = path.stat()
        path.with_name(path.name + ".verified").write_text(f"{model.sha256} {st.st_size} {st.st_mtime_ns}\n")
        paths.append(path)
    return paths[0], paths[1]


def test_offline_pair_appears_as_installed_and_can_be_removed(tiny: TinyPair, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    target, draft = _fake_offline(tmp_path / "store" / "offline")
    imported = store.import_pair(tiny.target, tiny.draft_same)

    listed = store.installed()
    assert [p.id for p in listed] == [offline.PAIR_ID, imported.id]
    off = listed[0]
    assert (off.source, off.target_path, off.draft_path) == ("offline", target, draft)
    assert (off.target_size, off.draft_size) == (offline.TARGET.size, offline.DRAFT.size)

    store.remove(offline.PAIR_ID)
    assert not target.exists() and not draft.exists()
    assert [p.id for p in store.installed()] == [imported.id]


def test_default_store_is_under_the_user_data_dir(data_dir: Path) -> None:
    assert ModelStore().root == data_dir / "models"
    assert os.fspath(ModelStore().registry_path).startswith(os.fspath(data_dir))
