"""Whether a path is a GGUF file at all: present, readable, the magic, more than a header's first bytes."""

from __future__ import annotations

from pathlib import Path

from engine.errors import ModelLoadError

GGUF_MAGIC = b"GGUF"


def check_gguf_file(path: Path) -> None:
    """Raise :class:`ModelLoadError` unless ``path`` looks like a complete GGUF file."""
    try:
        if not path.exists():
            raise ModelLoadError(f"model file not found: {path}")
        if not path.is_file():
            raise ModelLoadError(f"model path is not a file: {path}")
        size = path.stat().st_size
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as exc:  # unreadable: permissions, a failing disk
        raise ModelLoadError(f"cannot read the model file ({exc.strerror or exc}): {path}") from None
    if magic != GGUF_MAGIC:
        raise ModelLoadError(f"not a GGUF file (bad magic {magic!r}): {path}")
    if size < 64:
        raise ModelLoadError(f"GGUF file is truncated ({size} bytes): {path}")
