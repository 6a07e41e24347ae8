"""``models search / files / drafts / pull REPO FILE --draft REPO FILE`` end to end against the stand-in Hub."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli.main import main
from tests.hub_models import (
    DRAFT_FILE,
    DRAFT_REPO,
    GATED_FILE,
    GATED_REPO,
    JUNK_FILE,
    JUNK_REPO,
    NO_GGUF_REPO,
    SPLIT_FILES,
    TARGET_FILE,
    TARGET_REPO,
    TOKEN_REPO,
    hub,
    hub_models,
)
from tests.hub_server import HubState

__all__ = ["hub", "hub_models"]  # fixtures


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["models", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(code: int, out: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: "), (code, out, err)
    return lines[0]


def test_search_then_files_then_drafts(hub: HubState, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["search", "qwen2.5", "7b"], capsys)
    assert code == 0 and out.splitlines()[0] == f"{TARGET_REPO}  90,000 downloads  90 likes"
    assert len(out.splitlines()) == 1  # the 7B GGUF repository only: the others are not 7B or not GGUF
    code, out, _ = run(["search", "qwen", "--limit", "2"], capsys)
    assert out.splitlines() == [f"{TARGET_REPO}  90,000 downloads  90 likes",
                                f"{DRAFT_REPO}  80,000 downloads  80 likes", "more: --page 1"]
    assert json.loads(run(["search", "llama", "--json"], capsys)[1])["repositories"][0]["gated"] is True

    code, out, _ = run(["files", TARGET_REPO], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"{TARGET_REPO}: 2 GGUF models"
    assert lines[1].startswith("  Q8_0       30.4 MB  [") and lines[1].endswith(TARGET_FILE)
    assert "free RAM" in lines[2] or "free VRAM" in lines[2]
    assert lines[3].startswith("  F16        30.4 MB  [") and lines[3].endswith(f"{SPLIT_FILES[0]} in 2 files")
    data = json.loads(run(["files", TARGET_REPO, "--json"], capsys)[1])
    assert [m["quant"] for m in data["models"]] == ["Q8_0", "F16"] and data["models"][0]["fit"] in ("fits", "tight")

    code, out, _ = run(["drafts", TARGET_REPO, TARGET_FILE], capsys)
    lines = out.splitlines()
    assert code == 0 and lines[0] == (f"drafts for {TARGET_REPO}/{TARGET_FILE} (30.4 MB, llama: a rejected draft "
                                     "costs nothing to undo), best first:")
    assert lines[1].startswith(f"  compatible   {DRAFT_REPO}/{DRAFT_FILE}  Q8_0 2.5 MB")
    assert lines[2].startswith("      same tokenizer; 1/12 of the target's size")
    assert f"incompatible {TOKEN_REPO}/" in out and "vocabulary differs: token 1000 differs" in out
    assert "unchecked" in out and "not a GGUF file" in out
    data = json.loads(run(["drafts", TARGET_REPO, TARGET_FILE, "--json"], capsys)[1])
    assert data["candidates"][0]["verdict"] == "compatible" and data["advice"] == ""
    assert all(c["header_bytes"] <= 1 << 20 for c in data["candidates"])


def test_pull_a_pair_resumes_after_a_cut_registers_it_and_generates(
    hub: HubState, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    size = len(hub.files[(TARGET_REPO, TARGET_FILE)])
    hub.cut_after[(TARGET_REPO, TARGET_FILE)] = size // 3
    hub.cut_after[(DRAFT_REPO, DRAFT_FILE)] = 1000
    code, out, err = run(["pull", TARGET_REPO, TARGET_FILE, "--draft", DRAFT_REPO, DRAFT_FILE, "--json"], capsys)
    assert code == 0, err
    pair = json.loads(out)
    assert pair["id"] == "hub-qwen2.5-7b-instruct-q8-0+qwen2.5-0.5b-instruct-q8-0"
    target, draft = Path(pair["target"]), Path(pair["draft"])
    assert target.read_bytes() == hub.files[(TARGET_REPO, TARGET_FILE)]
    assert draft.read_bytes() == hub.files[(DRAFT_REPO, DRAFT_FILE)]
    assert [r.range for r in hub.gets(TARGET_FILE) if r.range != "bytes=0-1048575"] == [None, f"bytes={size // 3}-"]
    code, out, _ = run(["list", "--installed"], capsys)
    assert out.splitlines()[0].startswith(f"{pair['id']}  [hub]  qwen2.5-7b-instruct-q8_0 + qwen2.5-0.5b")
    assert run(["check"], capsys)[1] == f"ok  {pair['id']}: checksums and vocabularies ok\n"

    assert main(["generate", "--target", str(target), "--draft", str(draft), "--mode", "sd", "--prompt", "Hello",
                 "--max-tokens", "8", "--ctx", "256", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["tokens"]) == 8

    n = len(hub.gets())  # a second pull finds both files checked and transfers nothing
    assert run(["pull", TARGET_REPO, TARGET_FILE, "--draft", DRAFT_REPO, DRAFT_FILE, "--quiet"], capsys)[0] == 0
    assert [r.range for r in hub.gets()[n:] if r.range is None or r.range.endswith("-")] == []


def test_bad_input_is_one_line_and_nothing_half_written(
    hub: HubState, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert error_line(*run(["search"], capsys)) == (
        "error: type what to search for, e.g.: python -m engine models search qwen2.5 7b")
    assert error_line(*run(["files", NO_GGUF_REPO], capsys)).startswith(f"error: {NO_GGUF_REPO} has no GGUF files")
    assert "(HTTP 404)" in error_line(*run(["files", "acme/missing-GGUF"], capsys))
    assert error_line(*run(["drafts", JUNK_REPO, JUNK_FILE], capsys)) == (
        f"error: {JUNK_REPO}/{JUNK_FILE}: not a GGUF file")
    hub.rate_limited, hub.retry_after = 2, "1"
    assert error_line(*run(["search", "qwen"], capsys)) == (
        "error: the Hub is limiting requests (HTTP 429); try again in 1 s, or set HF_TOKEN: signed-in requests "
        "have a higher limit")
    line = error_line(*run(["pull", GATED_REPO, GATED_FILE, "--draft", DRAFT_REPO, DRAFT_FILE], capsys))
    assert "(HTTP 401)" in line and "HF_TOKEN" in line
    line = error_line(*run(["pull", TARGET_REPO, TARGET_FILE, "--draft", TOKEN_REPO, "x.gguf"], capsys))
    assert line.startswith(f"error: x.gguf is not a GGUF model in {TOKEN_REPO}")
    assert error_line(*run(["pull", TARGET_REPO, TARGET_FILE], capsys)).startswith("error: pull a Hub pair as:")
    store = data_dir / "models"
    assert not list(store.rglob("*.gguf")) and not (store / "registry.json").exists()


def test_a_split_target_downloads_all_its_shards_and_generates(
    hub: HubState, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["pull", TARGET_REPO, SPLIT_FILES[0], "--draft", DRAFT_REPO, DRAFT_FILE, "--json"], capsys)
    assert code == 0, err
    target = Path(json.loads(out)["target"])
    assert target.name == SPLIT_FILES[0]
    for name in SPLIT_FILES:
        assert (target.parent / name).read_bytes() == hub.files[(TARGET_REPO, name)]
    assert main(["generate", "--target", str(target), "--draft", json.loads(out)["draft"], "--mode", "sd",
                 "--prompt", "Hello", "--max-tokens", "8", "--ctx", "256", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["tokens"]) == 8
