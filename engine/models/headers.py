"""GGUF headers of Hub files read with range requests, counting the bytes they cost; and the same on disk.

A :class:`HeaderReader` keeps the blocks it fetched, so the architecture (for the fit estimate) and then the
vocabulary (for the pairing rule) of one file cost the blocks of one header read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from huggingface_hub import hf_hub_url

from engine.core.vocab import VocabInfo
from engine.errors import EngineError

from . import archs, gguf_remote, hub
from .catalog import Arch
from .hub_http import RemoteFile, endpoint


class NotGgufError(EngineError):
    """A file's first bytes are not a GGUF header (or its header cannot be parsed)."""


@dataclass
class HeaderReader:
    """Reads one GGUF header, from the Hub (``remote``) or from disk (``path``); ``fetched`` counts the bytes."""

    name: str
    remote: RemoteFile | None = None
    path: Path | None = None
    fetched: int = 0
    _blocks: dict[tuple[int, int], bytes] = field(default_factory=dict)

    @classmethod
    def hub_file(cls, repo: str, filename: str, size: int | None = None) -> HeaderReader:
        """A reader of ``repo/filename`` on the Hub in force (no request until something is read)."""
        url = hf_hub_url(repo, filename, endpoint=endpoint())
        return cls(f"{repo}/{filename}", RemoteFile(repo, filename, url, size, None, None))

    @classmethod
    def local(cls, path: Path) -> HeaderReader:
        return cls(str(path), path=path)

    def _fetch(self, start: int, length: int) -> bytes:
        key = (start, length)
        if key not in self._blocks:
            if self.remote is not None:
                data = hub.range_fetch(self.remote)(start, length)
            else:
                assert self.path is not None
                data = gguf_remote.file_fetch(self.path)(start, length)
            self.fetched += len(data)
            self._blocks[key] = data
        return self._blocks[key]

    def metadata(self, keys: set[str] | None) -> dict[str, object]:
        """The header's values of ``keys`` (None: the tokenizer keys of the pairing rule).

        Raises:
            NotGgufError: Not a GGUF file, or a header this reader cannot parse.
            AuthError, NotFoundError, DownloadError: The Hub refused the range request.
        """
        try:
            return gguf_remote.read_metadata(self._fetch, keys)
        except gguf_remote.HeaderUnavailable as exc:
            raise NotGgufError(f"{self.name}: {exc}") from exc
        except OSError as exc:
            raise NotGgufError(f"{self.name}: cannot read it ({exc.strerror or exc})") from exc

    def architecture(self) -> Arch | None:
        """The numbers of the KV-cache estimate, or None when the header lacks them."""
        arch_raw = self.metadata({"general.architecture"}).get("general.architecture")
        arch = arch_raw.decode("utf-8", "replace") if isinstance(arch_raw, bytes) else ""
        # Keys every converter writes; the reading stops at the last of them (key_length and vocab_size, when
        # present, come with them), so the tokenizer's arrays further on are not fetched for this.
        names = ("block_count", "attention.head_count_kv", "attention.head_count", "embedding_length")
        meta = self.metadata({f"{arch}.{n}" for n in names}) if arch else {}

        def num(name: str) -> int:
            v = meta.get(f"{arch}.{name}")
            return int(v) if isinstance(v, int) else 0

        heads, embd = num("attention.head_count"), num("embedding_length")
        layers, kv_heads = num("block_count"), num("attention.head_count_kv") or heads
        per_layer = meta.get(f"{arch}.attention.head_count_kv")
        # a hybrid names its KV heads per layer, 0 for a recurrent layer: only its attention layers have a cache
        if isinstance(per_layer, list) and all(isinstance(n, int) for n in per_layer):
            layers, kv_heads = sum(n > 0 for n in per_layer), max(per_layer, default=0)
        head_dim = num("attention.key_length") or (embd // heads if heads else 0)
        n_vocab = num("vocab_size")
        if archs.arch_info(arch).kind == "recurrent":  # no KV cache: a state of a few MiB at most
            return Arch(0, 0, 0, n_vocab)
        if not (layers and kv_heads and head_dim):
            return None
        return Arch(layers, kv_heads, head_dim, n_vocab)

    def vocab(self) -> VocabInfo:
        """The tokenizer as llama.cpp's pairing rule sees it.

        Raises:
            NotGgufError: Not GGUF, or a tokenizer model the header reader does not know.
        """
        try:
            return gguf_remote.vocab_from_metadata(self.metadata(None))
        except gguf_remote.HeaderUnavailable as exc:
            raise NotGgufError(f"{self.name}: {exc}") from exc


def file_size(path: Path) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0
