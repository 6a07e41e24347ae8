"""Read a GGUF file's tokenizer metadata from its header alone, locally or over HTTP range requests."""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.core.vocab import VocabInfo

log = logging.getLogger(__name__)

BLOCK = 1 << 20
MAX_HEADER_BYTES = 96 << 20  # Gemma's 256k-token vocabulary plus merges fits well inside this
GGUF_MAGIC = b"GGUF"
# llama.cpp's reader refuses an array of arrays (gguf.cpp: "invalid GGUF type"); other writers may nest a level
# or two. The parse recurses once per level, so the limit also keeps a hostile header from exhausting the stack.
MAX_ARRAY_DEPTH = 4
# The largest vocabularies have 262,144 tokens: a kept array four times that is not a tokenizer's.
MAX_KEPT_ITEMS = 1 << 20

# GGUF value types: fixed-size ones map to a struct format.
_FIXED = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9

# tokenizer.ggml.model -> llama_vocab_type, and llama.cpp's defaults when a key is absent
# (llama-vocab.cpp, ``llama_vocab::impl::load``): (type, bos, eos, add_bos, add_eos).
_MODELS: dict[str, tuple[int, int, int, bool, bool]] = {
    "no_vocab": (0, -1, -1, False, False),
    "llama": (1, 1, 2, True, False),
    "gpt2": (2, 11, 11, False, False),
    "t5": (4, -1, 1, False, True),
}
_WANTED = {
    "tokenizer.ggml.model",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
}

Fetch = Callable[[int, int], bytes]
"""``fetch(start, length)`` returns exactly ``length`` bytes from ``start`` (fewer only at end of file)."""


class HeaderUnavailable(Exception):
    """The header cannot be read this way (no range support, too large, not GGUF): skip the early check."""


class HeaderDamaged(HeaderUnavailable):
    """The header is one llama.cpp cannot load either: the file is refused, not merely left unchecked."""


@dataclass
class _Reader:
    """Reads forward through the header, holding one block: a value that is skipped is never kept anywhere."""

    fetch: Fetch
    pos: int = 0
    fetched: int = 0
    block: tuple[int, bytes] = (-1, b"")

    def _block(self, i: int) -> bytes:
        if self.block[0] != i:
            if self.fetched + BLOCK > MAX_HEADER_BYTES:
                raise HeaderUnavailable(f"GGUF header is larger than {MAX_HEADER_BYTES >> 20} MiB")
            data = self.fetch(i * BLOCK, BLOCK)
            self.fetched += len(data)
            self.block = (i, data)
        return self.block[1]

    def read(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            i, off = divmod(self.pos + len(out), BLOCK)
            chunk = self._block(i)[off : off + n - len(out)]
            if not chunk:
                raise HeaderUnavailable("file ends inside its GGUF header")
            out += chunk
        self.pos += n
        return bytes(out)

    def unpack(self, fmt: str) -> object:
        size = struct.calcsize("<" + fmt)
        return struct.unpack("<" + fmt, self.read(size))[0]

    def u32(self) -> int:
        value: int = struct.unpack("<I", self.read(4))[0]
        return value

    def u64(self) -> int:
        value: int = struct.unpack("<Q", self.read(8))[0]
        return value

    def skip(self, n: int) -> None:
        self.pos += n  # blocks that are skipped over are never fetched


def _value(r: _Reader, vtype: int, keep: bool, depth: int = 0) -> object:
    """One value; one not kept is stepped over (its strings and arrays are never built)."""
    if vtype in _FIXED:
        if not keep:
            r.skip(struct.calcsize("<" + _FIXED[vtype]))
            return None
        return r.unpack(_FIXED[vtype])
    if vtype == _STRING:
        n = r.u64()
        if not keep:
            r.skip(n)
            return None
        return r.read(n)
    if vtype == _ARRAY:
        if depth == MAX_ARRAY_DEPTH:
            raise HeaderDamaged(f"its GGUF header nests arrays more than {MAX_ARRAY_DEPTH} deep")
        itype, count = r.u32(), r.u64()
        if not keep:
            if itype in _FIXED:
                r.skip(struct.calcsize("<" + _FIXED[itype]) * count)
            else:
                for _ in range(count):
                    _value(r, itype, False, depth + 1)
            return None
        if count > MAX_KEPT_ITEMS:
            raise HeaderUnavailable(f"a GGUF header array of {count:,} items is not read before download")
        return [_value(r, itype, True, depth + 1) for _ in range(count)]
    raise HeaderUnavailable(f"unknown GGUF value type {vtype}")


def read_metadata(fetch: Fetch, keys: set[str] | None = None) -> dict[str, object]:
    """Parse the key/value section of a GGUF header.

    Args:
        fetch: Reads bytes of the file (see :data:`Fetch`); called for 1 MiB blocks, lazily.
        keys: Keys whose values to keep (default: the tokenizer keys the pairing rule needs).

    Returns:
        The kept keys and their values (strings as ``bytes``, arrays as lists).

    Raises:
        HeaderUnavailable: Not a GGUF v2/v3 file, truncated, or header over the size cap.
        HeaderDamaged: Arrays nested past :data:`MAX_ARRAY_DEPTH`.
    """
    wanted = _WANTED if keys is None else keys
    r = _Reader(fetch)
    if r.read(4) != GGUF_MAGIC:
        raise HeaderUnavailable("not a GGUF file")
    version = r.u32()
    if version not in (2, 3):
        raise HeaderUnavailable(f"unsupported GGUF version {version}")
    r.u64()  # tensor count
    n_kv = r.u64()
    out: dict[str, object] = {}
    for _ in range(n_kv):
        key = r.read(r.u64()).decode("utf-8", "replace")
        vtype = r.u32()
        keep = key in wanted
        value = _value(r, vtype, keep)
        if keep:
            out[key] = value
        if wanted <= out.keys():
            break
    log.debug("read %d header bytes", r.fetched)
    return out


def vocab_from_metadata(meta: dict[str, object]) -> VocabInfo:
    """Build the pairing rule's :class:`VocabInfo` from header metadata, with llama.cpp's defaults.

    Raises:
        HeaderUnavailable: The tokenizer model is one whose defaults this reader does not know.
    """
    model_raw = meta.get("tokenizer.ggml.model")
    model = model_raw.decode("utf-8", "replace") if isinstance(model_raw, bytes) else ""
    if model not in _MODELS:
        raise HeaderUnavailable(f"tokenizer model {model!r} is not checked before download")
    vtype, bos, eos, add_bos, add_eos = _MODELS[model]
    tokens = meta.get("tokenizer.ggml.tokens")
    token_list: list[bytes] = [t for t in tokens if isinstance(t, bytes)] if isinstance(tokens, list) else []

    def text(t: int) -> bytes:
        return token_list[t] if 0 <= t < len(token_list) else b""

    def num(key: str, default: int) -> int:
        v = meta.get(key)
        return int(v) if isinstance(v, int) else default

    def flag(key: str, default: bool) -> bool:
        v = meta.get(key)
        return bool(v) if isinstance(v, bool) else default

    return VocabInfo(
        vocab_type=vtype,
        n_vocab=len(token_list),
        bos=num("tokenizer.ggml.bos_token_id", bos),
        eos=num("tokenizer.ggml.eos_token_id", eos),
        add_bos=flag("tokenizer.ggml.add_bos_token", add_bos),
        add_eos=flag("tokenizer.ggml.add_eos_token", add_eos),
        token_text=text,
    )


def file_fetch(path: Path) -> Fetch:
    """A :data:`Fetch` over a local file."""

    def fetch(start: int, length: int) -> bytes:
        with path.open("rb") as f:
            f.seek(start)
            return f.read(length)

    return fetch


def local_vocab(path: Path) -> VocabInfo:
    """The :class:`VocabInfo` of a local GGUF file, read from its header without llama.cpp."""
    return vocab_from_metadata(read_metadata(file_fetch(path)))
