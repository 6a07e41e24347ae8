"""Files written whole or not at all, and write failures said in one line (a full disk by name)."""

from __future__ import annotations

import errno
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from engine.errors import DiskFullError, EngineError

NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def free_bytes(path: Path) -> int:
    """Free bytes on the disk holding ``path`` (or its nearest existing parent)."""
    p = path
    while not p.exists() and p != p.parent:
        p = p.parent
    return shutil.disk_usage(p).free


def write_error(exc: OSError, path: Path, what: str) -> EngineError:
    """The one-line error for ``exc`` raised while writing ``what`` at ``path``."""
    if exc.errno in NO_SPACE:
        return DiskFullError(f"the disk is full: {what} could not be written in {path.parent}; "
                             "free some space and try again")
    return EngineError(f"{what} could not be written to {path} ({exc.strerror or exc})")


@contextmanager
def writing(path: Path, what: str) -> Iterator[None]:
    """Turn an :class:`OSError` inside the block into :func:`write_error`'s one line."""
    try:
        yield
    except OSError as exc:
        raise write_error(exc, path, what) from exc


def atomic_write_text(path: Path, text: str, what: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, sync it and rename it into place.

    On any failure the temporary file is removed and ``path`` keeps its old content.

    Raises:
        DiskFullError: The disk (or quota) is full.
        EngineError: Any other write failure, in one line.
    """
    with writing(path, what):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            Path(tmp).unlink(missing_ok=True)
