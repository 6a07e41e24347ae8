"""A stand-in Hub with GGUF repositories for search and draft tests: a Qwen2.5-like family of tiny models.

The target (Qwen2.5-7B) and the 0.5B draft share the 4k SentencePiece vocabulary; the 1.5B has one token
changed, the bartowski 0.5B a 16-token vocabulary, the 3B a file that is not GGUF; the 14B is larger than the
target (never a candidate); ``Qwen2.5-7B-Instruct`` has no GGUF file; the Llama repository is gated.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gguf
import pytest

from tests.hub_server import HubServer, HubState, hub_environment
from tests.tiny_models import TinyPair, Vocab, small_vocab, spm_vocab, write_model

TARGET_REPO = "Qwen/Qwen2.5-7B-Instruct-GGUF"
TARGET_FILE = "qwen2.5-7b-instruct-q8_0.gguf"
SPLIT_FILES = ("qwen2.5-7b-instruct-fp16-00001-of-00002.gguf", "qwen2.5-7b-instruct-fp16-00002-of-00002.gguf")
DRAFT_REPO = "Qwen/Qwen2.5-0.5B-Instruct-GGUF"
DRAFT_FILE = "qwen2.5-0.5b-instruct-q8_0.gguf"
DRAFT_Q4 = "qwen2.5-0.5b-instruct-q4_k_m.gguf"
TOKEN_REPO, TOKEN_FILE = "Qwen/Qwen2.5-1.5B-Instruct-GGUF", "qwen2.5-1.5b-instruct-q8_0.gguf"
SMALL_REPO, SMALL_FILE = "bartowski/Qwen2.5-0.5B-Instruct-GGUF", "Qwen2.5-0.5B-Instruct-Q8_0.gguf"
JUNK_REPO, JUNK_FILE = "Qwen/Qwen2.5-3B-Instruct-GGUF", "qwen2.5-3b-instruct-q8_0.gguf"
BIG_REPO, BIG_FILE = "Qwen/Qwen2.5-14B-Instruct-GGUF", "qwen2.5-14b-instruct-q4_k_m.gguf"
NO_GGUF_REPO = "Qwen/Qwen2.5-7B-Instruct"
GATED_REPO, GATED_FILE = "meta-llama/Llama-3.2-1B-Instruct-GGUF", "llama-3.2-1b-instruct-q4_k_m.gguf"
CHANGED_TOKEN = 1000
TOKEN = "hf_gated_secret"


@dataclass(frozen=True)
class HubModels:
    """Paths of the generated files."""

    target: Path  # about 30 MB: 1/12 of it is the draft's 2.5 MB
    split: tuple[Path, Path]  # the same model as two shards, as llama.cpp's gguf-split writes them
    draft: Path
    token_changed: Path
    small: Path


def _token_changed() -> Vocab:
    v = spm_vocab()
    tokens = list(v.tokens)
    tokens[CHANGED_TOKEN] = "▁zzzchanged"
    return Vocab(v.model, tokens, v.scores, v.types, v.bos, v.eos, v.unk)


@pytest.fixture(scope="session")
def hub_models(tmp_path_factory: pytest.TempPathFactory, tiny: TinyPair) -> HubModels:
    folder = tmp_path_factory.mktemp("hub-models")
    shape = {"seed": 1, "n_layer": 3, "n_embd": 384, "n_ff": 768, "logit_scale": 6.0}
    target = write_model(folder / "target.gguf", **shape)
    writer = gguf.GGUFWriter
    gguf.GGUFWriter = functools.partial(writer, split_max_tensors=20)
    try:  # 30 tensors: two shards, NAME-00001-of-00002.gguf and NAME-00002-of-00002.gguf
        write_model(folder / "split.gguf", **shape)
    finally:
        gguf.GGUFWriter = writer
    split = (folder / "split-00001-of-00002.gguf", folder / "split-00002-of-00002.gguf")
    changed = write_model(folder / "changed.gguf", vocab=_token_changed(), seed=4, n_layer=2)
    small = write_model(folder / "small.gguf", vocab=small_vocab(), seed=3, n_layer=2)
    return HubModels(target, split, tiny.draft_random, changed, small)


def fill(st: HubState, m: HubModels) -> None:
    """Put the repositories on the stand-in Hub."""
    target = m.target.read_bytes()
    st.add(TARGET_REPO, TARGET_FILE, target)
    for name, path in zip(SPLIT_FILES, m.split, strict=True):
        st.add(TARGET_REPO, name, path.read_bytes())
    st.add(TARGET_REPO, "README.md", b"# Qwen2.5 7B GGUF\n")
    st.add(DRAFT_REPO, DRAFT_FILE, m.draft.read_bytes())
    st.add(DRAFT_REPO, DRAFT_Q4, m.draft.read_bytes())
    st.add(TOKEN_REPO, TOKEN_FILE, m.token_changed.read_bytes())
    st.add(SMALL_REPO, SMALL_FILE, m.small.read_bytes())
    st.add(JUNK_REPO, JUNK_FILE, b"PK\x03\x04 not a gguf file" * 1000)
    st.add(BIG_REPO, BIG_FILE, target)
    st.add(NO_GGUF_REPO, "model.safetensors", b"\0" * 4096)
    st.add(NO_GGUF_REPO, "config.json", b"{}")
    st.add(GATED_REPO, GATED_FILE, m.draft.read_bytes())
    st.gated.add(GATED_REPO)
    st.tokens[GATED_REPO] = TOKEN
    downloads = {TARGET_REPO: 90_000, DRAFT_REPO: 80_000, TOKEN_REPO: 70_000, JUNK_REPO: 60_000,
                 SMALL_REPO: 50_000, BIG_REPO: 40_000, NO_GGUF_REPO: 100_000, GATED_REPO: 30_000}
    for repo, n in downloads.items():
        st.repo_meta[repo] = {"downloads": n, "likes": n // 1000}
    st.repo_meta[SMALL_REPO]["base_model"] = "Qwen/Qwen2.5-0.5B-Instruct"
    st.repo_meta[TARGET_REPO]["base_model"] = "Qwen/Qwen2.5-7B-Instruct"


@pytest.fixture
def hub(hub_models: HubModels, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    """The stand-in Hub with the repositories above, HF_ENDPOINT pointing at it, a private data dir."""
    with HubServer() as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        fill(srv.state, hub_models)
        yield srv.state
