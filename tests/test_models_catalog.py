"""The curated catalog and the memory-fit estimate (engine.catalog)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from engine.core.paths import resources_dir
from engine.errors import EngineError
from engine.models.catalog import (
    Arch,
    PairSpec,
    catalog_path,
    estimate_bytes,
    fit_label,
    get_pair,
    load_catalog,
    system_memory,
)

REQUIRED = {
    "qwen2.5-coder-1.5b+0.5b",
    "qwen2.5-7b+0.5b",
    "qwen2.5-coder-7b+0.5b",
    "llama3.1-8b+llama3.2-1b",
    "qwen3-8b+0.6b",
}


def test_catalog_has_the_required_pairs_with_complete_data() -> None:
    pairs = load_catalog()
    ids = [p.id for p in pairs]
    assert REQUIRED <= set(ids) and len(ids) == len(set(ids))
    for p in pairs:
        for f in (p.target, p.draft):
            assert re.fullmatch(r"(bartowski|Qwen)/[\w.-]+-GGUF", f.repo), f.repo
            assert f.filename.endswith(".gguf") and f.size > 100_000_000 and f.quant
            assert f.sha256 is None or re.fullmatch(r"[0-9a-f]{64}", f.sha256)
        assert p.target.size > p.draft.size
        assert p.context_length >= 8192 and p.licence and p.notes
        assert p.vram_bytes > p.ram_bytes > p.target.size + p.draft.size


def test_memory_estimates_follow_from_the_recorded_architecture() -> None:
    data = json.loads((resources_dir() / "catalog.json").read_text(encoding="utf-8"))
    for e in data["pairs"]:
        est = e["estimate"]
        ram, vram = estimate_bytes(
            e["target"]["size"],
            e["draft"]["size"],
            Arch(**est["target"]),
            Arch(**est["draft"]),
            est["context"],
        )
        assert (e["ram_bytes"], e["vram_bytes"]) == (ram, vram), e["id"]
        # llama.cpp's pairing rule on the recorded vocabulary sizes
        assert abs(est["target"]["n_vocab"] - est["draft"]["n_vocab"]) <= 128, e["id"]
    # Qwen2.5 1.5B: 28 layers x 2 KV heads x 128 x (K+V) x f16 x 4096 positions
    assert Arch(28, 2, 128, 151936).kv_bytes(4096) == 117_440_512


def test_get_pair_and_unknown_ids() -> None:
    assert get_pair("qwen3-8b+0.6b").draft.filename == "Qwen3-0.6B-Q8_0.gguf"
    with pytest.raises(EngineError, match=r"unknown pair 'nope'; known pairs: qwen2.5-coder-1.5b\+0.5b, "):
        get_pair("nope")


def test_catalog_path_can_be_overridden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    alt = tmp_path / "catalog.json"
    alt.write_text('{"pairs": [{"id": "x"}]}')
    monkeypatch.setenv("SSD_CHAT_CATALOG", str(alt))
    assert catalog_path() == alt
    with pytest.raises(EngineError, match="malformed"):
        load_catalog()
    monkeypatch.setenv("SSD_CHAT_CATALOG", str(tmp_path / "missing.json"))
    with pytest.raises(EngineError, match="cannot read the model catalog"):
        load_catalog()


def _spec(ram: int, vram: int) -> PairSpec:
    pair = load_catalog()[0]
    return PairSpec(pair.id, pair.name, pair.target, pair.draft, 4096, "x", ram, vram)


def test_fit_labels() -> None:
    gb = 1_000_000_000
    assert fit_label(_spec(2 * gb, 3 * gb), 16 * gb, None) == (
        "fits",
        "needs about 2.0 GB of 16.0 GB free RAM",
    )
    assert fit_label(_spec(2 * gb, 3 * gb), 1 * gb, 8 * gb) == (
        "fits",
        "runs on the GPU: needs about 3.0 GB of 8.0 GB free VRAM",
    )
    label, reason = fit_label(_spec(7 * gb, 8 * gb), 8 * gb, 4 * gb)
    assert label == "tight" and "close other programs" in reason
    assert fit_label(_spec(9 * gb, 10 * gb), 8 * gb, None) == (
        "too large",
        "needs about 9.0 GB but only 8.0 GB of RAM is free",
    )


def test_system_memory_reports_this_machine() -> None:
    ram, vram = system_memory()
    assert ram > 100_000_000
    assert vram is None or vram >= 0
