"""An installed target/draft pair, as the store lists it, and which installed pair a catalog entry is."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .catalog import PairSpec


@dataclass(frozen=True)
class InstalledPair:
    """A target/draft pair ready to load.

    Attributes:
        id: Pair id (the catalog id for hub pairs).
        name: Display name.
        target_path: The target GGUF.
        draft_path: The draft GGUF, or None for a target imported alone (it runs with lookup and ar).
        target_size: Target file size in bytes (0 if the file is missing).
        draft_size: Draft file size in bytes (0 if the file is missing or there is none).
        source: ``"offline"``, ``"hub"`` or ``"import"``.
    """

    id: str
    name: str
    target_path: Path
    draft_path: Path | None
    target_size: int
    draft_size: int
    source: str


def installed_as(spec: PairSpec, pairs: list[InstalledPair]) -> InstalledPair | None:
    """The installed pair that is ``spec``: the same id, or files of the catalog's exact sizes with the
    target's file name (the offline pair is the catalog's Qwen2.5-Coder pair under another id)."""
    same = [p for p in pairs if p.target_path.name == spec.target.filename
            and (p.target_size, p.draft_size) == (spec.target.size, spec.draft.size)]
    return next((p for p in pairs if p.id == spec.id), same[0] if same else None)
