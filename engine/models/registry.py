"""The model store's registry file (``registry.json``): read with its shape checked, written atomically."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.core.diskio import atomic_write_text
from engine.errors import EngineError

TEXT_FIELDS = ("id", "name", "source", "target_path")
OPTIONAL = {"draft_path": str, "target_size": int, "draft_size": int, "target_sha256": str, "draft_sha256": str}


def _damaged(path: Path, what: str) -> EngineError:
    return EngineError(f"the model registry {path} is damaged ({what}); move it aside, then import or pull "
                       "your pairs again")


def load(path: Path) -> dict[str, dict[str, Any]]:
    """The registry's entries by pair id; {} when there is no registry yet.

    Raises:
        EngineError: The file cannot be read, is not JSON, or does not have the registry's shape.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise EngineError(f"the model registry {path} is unreadable: {exc}") from exc
    pairs = data.get("pairs", []) if isinstance(data, dict) else None
    if not isinstance(pairs, list):
        raise _damaged(path, "expected an object with a list of pairs")
    entries: dict[str, dict[str, Any]] = {}
    for n, e in enumerate(pairs, 1):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) and e[k] for k in TEXT_FIELDS):
            raise _damaged(path, f"pair {n} lacks an id, name, source or file path")
        for key, kind in OPTIONAL.items():
            if e.get(key) is not None and (not isinstance(e[key], kind) or isinstance(e[key], bool)):
                raise _damaged(path, f"pair {n}: {key} is not a {'number' if kind is int else 'text'}")
        entries[e["id"]] = e
    return entries


def save(path: Path, entries: dict[str, dict[str, Any]]) -> None:
    """Replace the registry with ``entries`` (all or nothing; DiskFullError when the disk is full)."""
    text = json.dumps({"version": 1, "pairs": list(entries.values())}, indent=2) + "\n"
    atomic_write_text(path, text, "the model registry")
