"""``models check``: every installed pair's files against what was recorded when it was installed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.core.gguffile import check_gguf_file
from engine.errors import EngineError

from . import offline
from .installed import InstalledPair
from .pairfiles import check_pair_files


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def check_pairs(entries: dict[str, dict[str, Any]], pairs: list[InstalledPair]) -> list[tuple[str, bool, str]]:
    """``(pair_id, ok, message)`` per installed pair: files present, sizes and SHA-256 as the registry's
    ``entries`` recorded them (pulled and imported pairs record them; the offline pair's are pinned), vocabularies
    compatible."""
    recorded = {
        pid: (e.get("target_sha256"), e.get("draft_sha256"), e.get("target_size"), e.get("draft_size"))
        for pid, e in entries.items()
    }
    t, d = offline.TARGET, offline.DRAFT
    recorded[offline.PAIR_ID] = (t.sha256, d.sha256, t.size, d.size)
    results = []
    for pair in pairs:
        t_sha, d_sha, t_size, d_size = recorded.get(pair.id, (None, None, None, None))
        try:
            checked = []
            for role, path, want_sha, want_size in (
                ("target", pair.target_path, t_sha, t_size), ("draft", pair.draft_path, d_sha, d_size)
            ):
                if path is None:  # a target imported alone
                    continue
                check_gguf_file(path)
                if want_size is not None and _size(path) != want_size:
                    raise EngineError(f"{role} {path.name} is {_size(path):,} bytes, expected {want_size:,}")
                if want_sha:
                    got = offline.sha256_file(path)
                    if got != want_sha:
                        raise EngineError(f"{role} {path.name} has SHA-256 {got}, expected {want_sha}: the file "
                                          "changed since it was installed")
                    checked.append("sha256")
            if pair.draft_path is not None:
                check_pair_files(pair.target_path, pair.draft_path)
        except EngineError as exc:
            results.append((pair.id, False, str(exc)))
        except OSError as exc:
            results.append((pair.id, False, f"cannot read the files ({exc.strerror or exc})"))
        else:
            what = ("checksums" if checked else "sizes") + (" and vocabularies" if pair.draft_path else "")
            results.append((pair.id, True, f"{what} ok"))
    return results
