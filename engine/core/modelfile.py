"""The model files a loaded engine maps, as they were when it loaded them.

llama.cpp maps a GGUF file into memory. If the file is then cut short (a copy over it, a download
restarted in place), reading its weights raises SIGBUS, which kills the process and no Python code
can catch. :class:`ModelFiles` records each file's size and modification time at load and
:meth:`ModelFiles.check` refuses a generation when either has changed. The check runs before a
generation starts: a file cut short while a generation is running can still end the process.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from engine.errors import ModelFileChangedError


@dataclass(frozen=True, slots=True)
class Stamp:
    """One file's size and modification time."""

    path: str
    size: int
    mtime_ns: int


def _stamp(path: str) -> Stamp:
    st = os.stat(path)
    return Stamp(path, st.st_size, st.st_mtime_ns)


class ModelFiles:
    """Size and modification time of each model file, taken now (call it right after loading)."""

    def __init__(self, paths: Sequence[str | None]) -> None:
        self.stamps = tuple(_stamp(p) for p in dict.fromkeys(paths) if p)

    def check(self) -> None:
        """Raise :class:`ModelFileChangedError` if a file is gone or its size or modification time changed."""
        for was in self.stamps:
            try:
                now = _stamp(was.path)
            except OSError as exc:
                raise ModelFileChangedError(
                    f"the model file {was.path} is gone or unreadable since it was loaded ({exc.strerror}): "
                    "load the model pair again") from None
            if now.size != was.size:
                raise ModelFileChangedError(
                    f"the model file {was.path} changed size since it was loaded ({was.size:,} -> {now.size:,} "
                    "bytes); generating from it could crash: load the model pair again")
            if now.mtime_ns != was.mtime_ns:
                raise ModelFileChangedError(
                    f"the model file {was.path} was rewritten since it was loaded; generating from it could "
                    "crash: load the model pair again")

