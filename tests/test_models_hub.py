"""Downloads against a real local HTTP server speaking the Hub's resolve endpoints (engine.hub)."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import hub
from engine.errors import VocabMismatchError
from engine.models.catalog import FileSpec, PairSpec
from engine.models.hub import (
    AuthError,
    ChecksumError,
    DownloadCancelled,
    DownloadProgress,
    NotEnoughSpaceError,
    NotFoundError,
)
from engine.models.store import ModelStore
from tests.hub_server import HubServer, HubState, hub_environment
from tests.tiny_models import TinyPair

T_REPO, D_REPO, BAD_REPO = "acme/tiny-target-GGUF", "acme/tiny-draft-GGUF", "acme/tiny-small-GGUF"
T_FILE, D_FILE, BAD_FILE = "tiny-target-F32.gguf", "tiny-draft-F32.gguf", "tiny-small-F32.gguf"


@pytest.fixture
def server(
    tiny: TinyPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HubState]:
    """The local Hub with a compatible target/draft pair and an incompatible 16-token draft."""
    with HubServer() as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        srv.state.add(T_REPO, T_FILE, tiny.target.read_bytes())
        srv.state.add(D_REPO, D_FILE, tiny.draft_related.read_bytes())
        srv.state.add(BAD_REPO, BAD_FILE, tiny.small_draft.read_bytes())
        yield srv.state


def spec(server: HubState, draft: tuple[str, str] = (D_REPO, D_FILE), sha: bool = False) -> PairSpec:
    def fs(repo: str, name: str) -> FileSpec:
        data = server.files[(repo, name)]
        return FileSpec(repo, name, len(data), hashlib.sha256(data).hexdigest() if sha else None, "F32")

    return PairSpec("tiny-pair", "Tiny target + draft", fs(T_REPO, T_FILE), fs(*draft), 2048, "mit", 1, 1)


def full_gets(server: HubState) -> list[str]:
    """GETs that asked for a whole file or its rest (not the header range requests)."""
    return [r.path for r in server.gets() if r.range is None or r.range.endswith("-")]


def test_pair_downloads_as_one_unit_with_progress(server: HubState, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    reports: list[DownloadProgress] = []
    pair = hub.download_pair(spec(server), store, progress=reports.append)

    assert pair.source == "hub" and pair.id == "tiny-pair"
    assert pair.target_path.read_bytes() == server.files[(T_REPO, T_FILE)]
    assert pair.draft_path.read_bytes() == server.files[(D_REPO, D_FILE)]
    assert pair.target_path.parent == store.hub_dir(T_REPO)
    assert store.get("tiny-pair") == pair
    total = len(server.files[(T_REPO, T_FILE)]) + len(server.files[(D_REPO, D_FILE)])
    assert reports and reports[-1].done == total and reports[-1].total == total
    assert [r.done for r in reports] == sorted(r.done for r in reports)
    assert {r.filename for r in reports} == {T_FILE, D_FILE}
    assert all(r.rate_bps >= 0 for r in reports) and reports[-1].eta_s == 0.0
    assert not list(store.root.rglob("*.incomplete"))
    # the header check read the GGUF headers with range requests before the files came
    ranged = [r for r in server.gets() if r.range and not r.range.endswith("-")]
    assert ranged and server.requests.index(ranged[0]) < server.requests.index(server.gets(D_FILE)[-1])

    # a second pull finds both files verified and transfers nothing
    n = len(full_gets(server))
    assert hub.download_pair(spec(server), store) == pair
    assert full_gets(server)[n:] == []


def test_download_cut_mid_file_resumes_with_a_range_request(server: HubState, tmp_path: Path) -> None:
    data = server.files[(T_REPO, T_FILE)]
    server.cut_after[(T_REPO, T_FILE)] = len(data) // 2
    path = hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d")

    assert path.read_bytes() == data
    gets = server.gets(T_FILE)
    assert [r.range for r in gets] == [None, f"bytes={len(data) // 2}-"]
    assert hub.stamped_sha256(path) == hashlib.sha256(data).hexdigest()


def test_cancel_keeps_a_partial_that_the_next_call_resumes(server: HubState, tmp_path: Path) -> None:
    data = server.files[(T_REPO, T_FILE)]
    server.slow_s = 0.01
    cancel = threading.Event()
    cancelled_at: list[float] = []

    def progress(p: DownloadProgress) -> None:
        if p.done > 64 << 10 and not cancel.is_set():
            cancelled_at.append(time.monotonic())
            cancel.set()

    with pytest.raises(DownloadCancelled, match="resume"):
        hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d", progress=progress, cancel=cancel)
    assert time.monotonic() - cancelled_at[0] < 1.0  # stops within a chunk or two, not at the end of the file
    partials = list((tmp_path / "d").glob("*.incomplete"))
    assert len(partials) == 1 and 0 < partials[0].stat().st_size < len(data)
    assert not (tmp_path / "d" / T_FILE).exists()

    kept = partials[0].stat().st_size
    server.slow_s = 0.0
    path = hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d")
    assert path.read_bytes() == data
    assert server.gets(T_FILE)[-1].range == f"bytes={kept}-"


def test_checksum_mismatch_discards_the_file(server: HubState, tmp_path: Path) -> None:
    server.advertised_sha[(T_REPO, T_FILE)] = "ab" * 32
    with pytest.raises(ChecksumError, match=r"mismatch for tiny-target-F32.gguf: expected SHA-256 abab"):
        hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d")
    assert list((tmp_path / "d").iterdir()) == []


def test_checksum_given_by_the_caller_wins(server: HubState, tmp_path: Path) -> None:
    with pytest.raises(ChecksumError, match="discarded"):
        hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d", sha256="cd" * 32)
    assert list((tmp_path / "d").iterdir()) == []


def test_missing_file_is_a_404(server: HubState, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"nope.gguf was not found in acme/tiny-target-GGUF .*HTTP 404"):
        hub.download_file(T_REPO, "nope.gguf", dest_dir=tmp_path / "d")
    assert server.gets() == []


def test_private_repo_is_a_401_until_hf_token_is_set(
    server: HubState, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server.tokens[T_REPO] = "hf_secret"
    with pytest.raises(AuthError, match=r"HTTP 401.*HF_TOKEN"):
        hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d")
    monkeypatch.setenv("HF_TOKEN", "hf_secret")
    path = hub.download_file(T_REPO, T_FILE, dest_dir=tmp_path / "d")
    assert path.read_bytes() == server.files[(T_REPO, T_FILE)]
    assert server.gets(T_FILE)[-1].headers["authorization"] == "Bearer hf_secret"


def test_not_enough_space_is_refused_before_any_download(server: HubState, tmp_path: Path) -> None:
    need = len(server.files[(T_REPO, T_FILE)]) + len(server.files[(D_REPO, D_FILE)])
    seen: list[Path] = []

    def free(path: Path) -> int:
        seen.append(path)
        return need + hub.DISK_RESERVE - 1

    with pytest.raises(NotEnoughSpaceError, match="not enough disk space"):
        hub.download_pair(spec(server), ModelStore(tmp_path / "store"), free=free)
    assert seen == [tmp_path / "store"]
    assert server.gets() == []  # only HEADs for the sizes
    assert {r.method for r in server.requests if "/resolve/" in r.path} == {"HEAD"}

    # one byte more and it goes through
    store = ModelStore(tmp_path / "store")
    pair = hub.download_pair(spec(server), store, free=lambda p: need + hub.DISK_RESERVE)
    assert pair.target_size + pair.draft_size == need


def test_incompatible_pair_is_rejected_from_the_headers_before_download(
    server: HubState, tmp_path: Path
) -> None:
    bad = spec(server, draft=(BAD_REPO, BAD_FILE))
    with pytest.raises(VocabMismatchError) as err:
        hub.check_remote_pair(bad)
    assert str(err.value).startswith(
        f"{BAD_FILE} cannot be the draft for {T_FILE}: vocabulary sizes differ by 4080 (target 4096, draft 16"
    )
    assert "share one tokenizer" in str(err.value)

    store = ModelStore(tmp_path / "store")
    with pytest.raises(VocabMismatchError, match="vocabulary sizes differ by 4080"):
        hub.download_pair(bad, store)
    assert full_gets(server) == []  # only header ranges were read
    assert store.installed() == [] and not (tmp_path / "store" / "hub").exists()


def test_incompatible_pair_without_range_support_is_rejected_after_download(
    server: HubState, tmp_path: Path
) -> None:
    server.ranges = False
    store = ModelStore(tmp_path / "store")
    hub.check_remote_pair(spec(server, draft=(BAD_REPO, BAD_FILE)))  # cannot read headers: skipped
    with pytest.raises(VocabMismatchError, match=f"{BAD_FILE} cannot be the draft for {T_FILE}: vocabulary"):
        hub.download_pair(spec(server, draft=(BAD_REPO, BAD_FILE)), store)
    assert server.gets(BAD_FILE)  # it was downloaded, checked, then discarded
    assert store.installed() == []
    assert not list((tmp_path / "store").rglob("*.gguf"))


def test_catalog_checksums_are_used_and_files_shared_between_pairs(server: HubState, tmp_path: Path) -> None:
    store = ModelStore(tmp_path / "store")
    with_sha = spec(server, sha=True)
    first = hub.download_pair(with_sha, store)
    n = len(server.gets())
    other = PairSpec("tiny-pair-2", "Same files again", with_sha.target, with_sha.draft, 2048, "mit", 1, 1)
    second = hub.download_pair(other, store)
    assert full_gets(server)[n:] == []  # already there and verified
    assert (second.target_path, second.draft_path) == (first.target_path, first.draft_path)
    ok = "checksums and vocabularies ok"
    assert store.check() == [("tiny-pair", True, ok), ("tiny-pair-2", True, ok)]
    store.remove("tiny-pair")
    assert second.target_path.is_file()  # still used by tiny-pair-2
    store.remove("tiny-pair-2")
    assert not second.target_path.exists() and not second.draft_path.exists()
    assert store.installed() == []
