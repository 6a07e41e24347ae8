"""Hub search, a repository's GGUF models and the draft finder: the real HfApi against the stand-in Hub."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import EngineError
from engine.models import drafts, gguf_remote, hubapi, search
from engine.models.drafts import find_drafts
from engine.models.headers import HeaderReader, NotGgufError
from engine.models.hub_http import AuthError, NotFoundError
from engine.models.search import group_models, quant_of, repo_models
from engine.models.store import ModelStore
from tests.hub_models import (
    BIG_REPO,
    CHANGED_TOKEN,
    DRAFT_FILE,
    DRAFT_REPO,
    GATED_FILE,
    GATED_REPO,
    JUNK_FILE,
    JUNK_REPO,
    NO_GGUF_REPO,
    SMALL_REPO,
    SPLIT_FILES,
    TARGET_FILE,
    TARGET_REPO,
    TOKEN,
    TOKEN_REPO,
    hub,
    hub_models,
)
from tests.hub_server import HubState

__all__ = ["hub", "hub_models"]  # fixtures
GB = 10**9


def test_quantisations_and_split_files_group_into_models() -> None:
    assert [quant_of(n) for n in ("a-Q4_K_M.gguf", "b.IQ3_XS.gguf", "c-f16-00001-of-00003.gguf", "d.gguf")] == [
        "Q4_K_M", "IQ3_XS", "F16", "?"]
    models = group_models("o/r", [("x-Q8_0.gguf", 30, "a"), ("x-F16-00002-of-00002.gguf", 20, "c"),
                                  ("x-F16-00001-of-00002.gguf", 50, "b"), ("mmproj-F16.gguf", 5, None),
                                  ("README.md", 1, None)])
    assert [(m.name, m.files, m.size, m.quant) for m in models] == [
        ("x-Q8_0.gguf", ("x-Q8_0.gguf",), 30, "Q8_0"),
        ("x-F16.gguf", ("x-F16-00001-of-00002.gguf", "x-F16-00002-of-00002.gguf"), 70, "F16")]
    assert models[1].sha256 == ("b", "c")


def test_search_lists_gguf_repositories_most_downloaded_first_in_pages(hub: HubState) -> None:
    hub.page_size = 2  # HfApi follows the Hub's Link header from page to page
    page = search.search("qwen2.5 instruct", limit=3)
    assert [h.repo for h in page.hits] == [TARGET_REPO, DRAFT_REPO, TOKEN_REPO] and page.more
    assert page.hits[0].downloads == 90_000 and not page.hits[0].gated
    nxt = search.search("qwen2.5 instruct", limit=3, page=1)
    assert [h.repo for h in nxt.hits] == [JUNK_REPO, SMALL_REPO, BIG_REPO] and not nxt.more
    assert NO_GGUF_REPO not in {h.repo for h in page.hits + nxt.hits}  # no GGUF file: not listed
    assert [h.gated for h in search.search("llama").hits] == [True]
    listed = [r.path for r in hub.requests if r.path.startswith("/api/models?")]
    assert any("cursor=" in p for p in listed) and all("filter=gguf" in p for p in listed)


def test_repo_files_have_sizes_and_fit(hub: HubState) -> None:
    target = len(hub.files[(TARGET_REPO, TARGET_FILE)])
    found = repo_models(TARGET_REPO, (16 * GB, None))
    split = sum(len(hub.files[(TARGET_REPO, f)]) for f in SPLIT_FILES)
    assert [(m.model.first, m.model.size, m.model.quant, m.label) for m in found.models] == [
        (TARGET_FILE, target, "Q8_0", "fits"), (SPLIT_FILES[0], split, "F16", "fits")]
    assert found.models[1].model.files == SPLIT_FILES  # two files, one model
    assert found.base_models == ["Qwen/Qwen2.5-7B-Instruct"] and not found.gated
    # the fit counts the weights and the KV cache the header describes (3 layers x 384 x 4k context x K, V x f16)
    kv = 3 * 4 * 96 * 2 * 2 * 4096
    assert found.models[0].ram_bytes == target + kv
    assert "of 16.0 GB free RAM" in found.models[0].reason
    tight = repo_models(TARGET_REPO, (target + kv + 1, None)).models[0]
    assert (tight.label, repo_models(TARGET_REPO, (target, None)).models[0].label) == ("tight", "too large")
    on_gpu = repo_models(TARGET_REPO, (1, 8 * GB)).models[0]
    assert on_gpu.label == "fits" and on_gpu.reason.startswith("runs on the GPU")


def test_bad_repositories_give_clear_errors(hub: HubState) -> None:
    with pytest.raises(EngineError, match=r"^type what to search for"):
        search.search("   ")
    with pytest.raises(EngineError, match=f"^{NO_GGUF_REPO} has no GGUF files; llama.cpp needs GGUF"):
        repo_models(NO_GGUF_REPO, (GB, None))
    with pytest.raises(NotFoundError, match=r"^no repository acme/nothing on http://127.0.0.1:\d+ \(HTTP 404\)"):
        repo_models("acme/nothing", (GB, None))
    with pytest.raises(EngineError, match="not a repository id"):
        repo_models("just-a-name", (GB, None))
    gated = repo_models(GATED_REPO, (GB, None))  # listed and described; its header needs the token
    assert gated.gated and "HF_TOKEN" in gated.note and gated.models[0].label == "fits"
    private = "acme/private-GGUF"
    hub.add(private, "p-Q4_0.gguf", b"GGUF")
    hub.tokens[private] = "hf_x"
    with pytest.raises(AuthError, match=r"refused \(HTTP 401\).*set HF_TOKEN"):
        repo_models(private, (GB, None))
    with pytest.raises(NotGgufError, match="not a GGUF file"):
        HeaderReader.hub_file(JUNK_REPO, JUNK_FILE).vocab()


def test_a_rate_limit_is_waited_out_once_then_reported(hub: HubState) -> None:
    waits: list[float] = []
    hub.rate_limited, hub.retry_after = 1, "3"
    assert hubapi.call(lambda api: api.model_info(TARGET_REPO), sleep=waits.append).id == TARGET_REPO
    assert waits == [3.0]
    hub.rate_limited = 2
    with pytest.raises(hubapi.RateLimitError, match=r"HTTP 429\); try again in 3 s, or set HF_TOKEN"):
        hubapi.call(lambda api: list(api.list_models(search="qwen", limit=5)), sleep=waits.append)
    assert waits == [3.0, 3.0] and hub.rate_limited == 0  # two requests: no retries of huggingface_hub's own
    hub.rate_limited, hub.retry_after = 1, "600"  # longer than anyone waits for a search: said at once
    with pytest.raises(hubapi.RateLimitError, match="try again in 600 s"):
        hubapi.call(lambda api: api.model_info(TARGET_REPO), sleep=waits.append)
    assert waits == [3.0, 3.0]
    hub.rate_limited, hub.retry_after = 1, "1"  # the real wait
    assert search.search("qwen2.5 7b").hits[0].repo == TARGET_REPO


def test_drafts_compatible_first_with_reasons_and_headers_only(hub: HubState, tmp_path: Path) -> None:
    seen: list[drafts.Candidate] = []
    found = find_drafts(TARGET_REPO, TARGET_FILE, store=ModelStore(tmp_path / "store"), on_candidate=seen.append)
    by_repo = {c.repo: c for c in found.candidates}
    assert found.candidates[0].repo == DRAFT_REPO and found.candidates[0].compatible
    assert found.candidates[0].filename == DRAFT_FILE  # Q8_0 picked over Q4_K_M
    ratio = len(hub.files[(TARGET_REPO, TARGET_FILE)]) / len(hub.files[(DRAFT_REPO, DRAFT_FILE)])
    assert found.candidates[0].reason == f"same tokenizer; 1/{ratio:.0f} of the target's size"
    assert by_repo[TOKEN_REPO].verdict == "incompatible"
    assert by_repo[TOKEN_REPO].reason.startswith(f"vocabulary differs: token {CHANGED_TOKEN} differs")
    assert by_repo[SMALL_REPO].reason.startswith("vocabulary differs: vocabulary sizes differ by 4080")
    assert (by_repo[JUNK_REPO].verdict, by_repo[JUNK_REPO].reason) == ("unchecked", "not a GGUF file")
    assert BIG_REPO not in by_repo  # named larger than the target: not a draft, never read
    assert sorted(seen, key=lambda c: c.repo) == sorted(found.candidates, key=lambda c: c.repo)
    assert found.advice == ""
    # headers only: each candidate cost one header block of its file, and no file was fetched whole
    block = gguf_remote.BLOCK
    for c in found.candidates:
        assert c.header_bytes == min(block, len(hub.files[(c.repo, c.filename)])), c
    assert {r.range for r in hub.gets()} == {f"bytes=0-{block - 1}"}
    assert len(hub.gets(TARGET_FILE)) == 1 and len(hub.files[(TARGET_REPO, TARGET_FILE)]) > 25 * block


def test_drafts_on_disk_are_candidates_and_no_draft_says_what_runs(hub: HubState, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    disk = store.hub_dir("someone/else") / "own-draft-Q8_0.gguf"
    disk.parent.mkdir(parents=True)
    disk.write_bytes(hub.files[(DRAFT_REPO, DRAFT_FILE)])
    found = find_drafts(TARGET_REPO, TARGET_FILE, store=store)
    local = [c for c in found.candidates if c.source == "disk"]
    assert [(c.filename, c.verdict) for c in local] == [(str(disk), "compatible")]
    for repo in (DRAFT_REPO, TOKEN_REPO, SMALL_REPO, JUNK_REPO, BIG_REPO):
        hub.files = {k: v for k, v in hub.files.items() if k[0] != repo}
    alone = find_drafts(TARGET_REPO, TARGET_FILE, store=ModelStore(tmp_path / "empty"))
    assert alone.candidates == [] and "runs with the lookup and ar modes" in alone.advice
    with pytest.raises(EngineError, match=f"^nope.gguf is not a GGUF model in {TARGET_REPO}; it has: "):
        find_drafts(TARGET_REPO, "nope.gguf", store=store)


def test_a_gated_candidate_says_to_set_hf_token(hub: HubState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reader = HeaderReader.hub_file(GATED_REPO, GATED_FILE)
    with pytest.raises(AuthError, match="HF_TOKEN"):
        reader.vocab()
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert HeaderReader.hub_file(GATED_REPO, GATED_FILE).vocab().n_vocab == 4096


def test_family_and_ranking_rules() -> None:
    assert drafts.family("Qwen/Qwen2.5-7B-Instruct-GGUF") == "Qwen2.5"
    assert drafts.family("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF") == "Meta-Llama-3.1"
    assert (drafts.params_b("Qwen2.5-0.5B-Instruct"), drafts.params_b("phi-4-GGUF")) == (0.5, None)

    def cand(size: int, quant: str, verdict: str = "compatible") -> drafts.Candidate:
        return drafts.Candidate("hub", f"r{size}{quant}", "f", size, quant, verdict, "", 1)

    ranked = sorted([cand(50, "Q8_0"), cand(10, "Q4_K_M"), cand(10, "Q8_0"), cand(5, "Q8_0", "incompatible"),
                     cand(3, "Q8_0")], key=lambda c: drafts.rank_key(c, 120))
    assert [(c.size, c.quant) for c in ranked] == [(10, "Q8_0"), (10, "Q4_K_M"), (3, "Q8_0"), (50, "Q8_0"),
                                                  (5, "Q8_0")]
