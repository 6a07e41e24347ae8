"""GGUF headers built to hurt the reader, served by the stand-in Hub over real HTTP (engine.models.gguf_remote)."""

from __future__ import annotations

import json
import struct
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import hub
from engine.cli.main import main
from engine.errors import ModelLoadError
from engine.models.gguf_remote import MAX_ARRAY_DEPTH
from tests.hub_server import HubServer, HubState, hub_environment

REPO, FILE = "acme/hostile-GGUF", "hostile.gguf"
DEPTH = 5_000  # past Python's recursion limit: a reader that recurses per level without a limit fails
ENTRIES = 400_000  # strings of a key nobody keeps: 4 MiB as header bytes, about 14 MiB as Python objects
ARRAY, STRING, U8 = 9, 8, 0


def gstr(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def gguf(*kvs: bytes) -> bytes:
    """A GGUF v3 header (no tensors) holding the given key/value records."""
    return b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs)


def kv(key: str, vtype: int, value: bytes) -> bytes:
    return gstr(key.encode()) + struct.pack("<I", vtype) + value


TOKENIZER = (
    kv("tokenizer.ggml.model", STRING, gstr(b"llama")),
    kv("tokenizer.ggml.tokens", ARRAY, struct.pack("<IQ", STRING, 3) + gstr(b"<unk>") + gstr(b"<s>") + gstr(b"</s>")),
)


def nested(depth: int) -> bytes:
    """An array of arrays ``depth`` levels deep, the innermost empty."""
    return struct.pack("<IQ", ARRAY, 1) * (depth - 1) + struct.pack("<IQ", U8, 0)


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubState]:
    with HubServer() as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        yield srv.state


def test_arrays_nested_5000_deep_are_refused_before_download(
    served: HubState, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = gguf(kv("evil.nest", ARRAY, nested(DEPTH)), *TOKENIZER)
    served.add(REPO, FILE, data)
    served.add("acme/draft-GGUF", FILE, gguf(*TOKENIZER))
    with pytest.raises(ModelLoadError, match=f"nests arrays more than {MAX_ARRAY_DEPTH} deep; nothing was"):
        hub.remote_vocab(hub.remote_file(REPO, FILE))

    def entry(repo: str, blob: bytes) -> dict[str, object]:
        return {"repo": repo, "filename": FILE, "size": len(blob), "sha256": None, "quant": "F32"}

    pair = {"id": "evil", "name": "Evil", "target": entry(REPO, data),
            "draft": entry("acme/draft-GGUF", gguf(*TOKENIZER)), "context_length": 2048, "licence": "mit",
            "ram_bytes": 1_000_000, "vram_bytes": 1_000_000}
    catalog = tmp_path / "catalog.json"
    catalog.write_text(json.dumps({"pairs": [pair]}))
    monkeypatch.setenv("SSD_CHAT_CATALOG", str(catalog))
    assert main(["models", "pull", "evil", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: hostile.gguf in acme/hostile-GGUF is not a model llama.cpp")
    assert all(r.range and not r.range.endswith("-") for r in served.gets())  # header ranges only, no download


def test_a_nesting_within_the_limit_is_read(served: HubState) -> None:
    served.add(REPO, FILE, gguf(kv("odd.nest", ARRAY, nested(MAX_ARRAY_DEPTH)), *TOKENIZER))
    vocab = hub.remote_vocab(hub.remote_file(REPO, FILE))
    assert vocab is not None and vocab.n_vocab == 3 and vocab.token_text(2) == b"</s>"


def test_strings_of_keys_not_kept_are_skipped_without_being_built(served: HubState) -> None:
    junk = struct.pack("<IQ", STRING, ENTRIES) + gstr(b"ab") * ENTRIES
    served.add(REPO, FILE, gguf(kv("junk.strings", ARRAY, junk), *TOKENIZER))
    remote = hub.remote_file(REPO, FILE)
    tracemalloc.start()
    try:
        vocab = hub.remote_vocab(remote)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert vocab is not None and vocab.n_vocab == 3
    # one 1 MiB block of the header in flight (held on both ends of the socket: about 3 MiB); keeping the
    # blocks read, or the strings as objects, takes 20 MiB
    assert peak < 6 << 20, f"peak {peak / 2**20:.1f} MiB"
