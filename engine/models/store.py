"""The local model store: installed target/draft pairs (a model of the user's own may have no draft), their
registry, import, file checks, removal."""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Any

from engine.core.paths import model_store_dir
from engine.errors import DiskFullError, EngineError

from . import offline, registry
from .checks import check_pairs
from .installed import InstalledPair
from .pairfiles import check_model_file, check_pair_files, own_draft

log = logging.getLogger(__name__)

REGISTRY = "registry.json"
SOURCES = ("offline", "hub", "import")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-") or "model"


def _sha256(path: Path) -> str:
    try:
        return offline.sha256_file(path)
    except OSError as exc:
        raise EngineError(f"cannot read {path} ({exc.strerror or exc})") from exc


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class ModelStore:
    """Installed pairs under one folder, listed in ``registry.json`` (written atomically).

    Hub downloads live in ``hub/<owner>--<repo>/``; imported files stay where the user keeps them;
    the offline pair is found in ``offline/`` (see :mod:`engine.offline`) without being registered.
    """

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or model_store_dir()
        self._lock = threading.Lock()

    @property
    def registry_path(self) -> Path:
        """The registry file."""
        return self.root / REGISTRY

    def hub_dir(self, repo: str) -> Path:
        """Folder for the files of one Hub repository."""
        return self.root / "hub" / repo.replace("/", "--")

    # -- registry ---------------------------------------------------------------------------
    def _load(self) -> dict[str, dict[str, Any]]:
        return registry.load(self.registry_path)

    def _save(self, entries: dict[str, dict[str, Any]]) -> None:
        registry.save(self.registry_path, entries)

    def entries(self) -> dict[str, dict[str, Any]]:
        """The registry's entries by pair id, as recorded (paths, sizes, SHA-256)."""
        return self._load()

    def _path(self, stored: str) -> Path:
        p = Path(stored)
        return p if p.is_absolute() else self.root / p

    def _stored(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return str(path.resolve())

    def _pair(self, e: dict[str, Any]) -> InstalledPair:
        t, d = self._path(e["target_path"]), self._path(e["draft_path"]) if e.get("draft_path") else None
        return InstalledPair(str(e["id"]), str(e["name"]), t, d, _size(t), _size(d) if d else 0, str(e["source"]))

    def register(
        self,
        pair_id: str,
        name: str,
        target: Path,
        draft: Path | None,
        source: str,
        *,
        target_sha256: str | None = None,
        draft_sha256: str | None = None,
    ) -> InstalledPair:
        """Add (or replace) a registry entry; the caller has already checked the files.

        Returns:
            The registered pair.
        """
        if source not in SOURCES:
            raise ValueError(f"unknown source {source!r}")
        entry = {
            "id": pair_id, "name": name, "source": source,
            "target_path": self._stored(target), "draft_path": self._stored(draft) if draft else None,
            "target_size": _size(target), "draft_size": _size(draft) if draft else None,
            "target_sha256": target_sha256, "draft_sha256": draft_sha256,
        }
        with self._lock:
            entries = self._load()
            entries[pair_id] = entry
            self._save(entries)
        log.info("registered pair %s (%s)", pair_id, source)
        return self._pair(entry)

    # -- queries ----------------------------------------------------------------------------
    def _offline(self) -> InstalledPair | None:
        pair = offline.installed_pair(self.root / "offline")
        if pair is None:
            return None
        return InstalledPair(
            offline.PAIR_ID, "Qwen2.5-Coder 1.5B Instruct + 0.5B (offline)", pair.target, pair.draft,
            _size(pair.target), _size(pair.draft), "offline",
        )

    def installed(self) -> list[InstalledPair]:
        """Every installed pair: the offline pair first (when assembled), then the registry in order."""
        pairs = [self._pair(e) for e in self._load().values()]
        off = self._offline()
        return ([off] if off is not None else []) + [p for p in pairs if p.id != offline.PAIR_ID]

    def get(self, pair_id: str) -> InstalledPair | None:
        """The installed pair with this id, or None."""
        return next((p for p in self.installed() if p.id == pair_id), None)

    # -- import -----------------------------------------------------------------------------
    def import_pair(self, target: Path, draft: Path | None = None, name: str | None = None) -> InstalledPair:
        """Register GGUF files the user already has; they stay where they are.

        Their SHA-256 is recorded (reading both files: seconds for GB-sized models, so call this off a
        UI thread), so ``check`` finds a file changed later.

        Args:
            target: The target GGUF.
            draft: The draft GGUF, or None: the target alone (it runs with the lookup and ar modes).
            name: Display name (default: ``"<target stem> + <draft stem>"``, or the target's stem alone).

        Returns:
            The registered pair (the existing one if these exact files are already registered).

        Raises:
            ModelLoadError: A file is missing, not GGUF, or llama.cpp refuses it.
            VocabMismatchError: The draft cannot draft for the target (the reason says why).
            EngineError: The draft is the target's own file.
        """
        target = Path(target).expanduser().resolve()
        draft = Path(draft).expanduser().resolve() if draft is not None else None
        if draft == target:
            raise own_draft(target)
        if draft is None:
            check_model_file(target)
        else:
            check_pair_files(target, draft)
        entries = self._load()
        stored = (self._stored(target), self._stored(draft) if draft else None)
        same = next((e for e in entries.values() if (e["target_path"], e.get("draft_path")) == stored), None)
        if same is not None and same.get("target_sha256") and (draft is None or same.get("draft_sha256")):
            return self._pair(same)
        sums = {f"{role}_sha256": _sha256(path) for role, path in (("target", target), ("draft", draft)) if path}
        if same is not None:  # registered before imports recorded checksums
            return self.register(same["id"], same["name"], target, draft, "import", **sums)
        base = f"local-{_slug(target.stem)}" + (f"+{_slug(draft.stem)}" if draft else "")
        pair_id, n = base, 2
        while pair_id in entries or pair_id == offline.PAIR_ID:
            pair_id, n = f"{base}-{n}", n + 1
        default = f"{target.stem} + {draft.stem}" if draft else target.stem
        return self.register(pair_id, name or default, target, draft, "import", **sums)

    # -- removal ----------------------------------------------------------------------------
    def _referenced(self, entries: dict[str, dict[str, Any]]) -> set[Path]:
        return {self._path(e[k]).resolve() for e in entries.values() for k in ("target_path", "draft_path") if e.get(k)}

    def discard_files(self, paths: list[Path]) -> None:
        """Delete downloaded files (and their stamps) that no registered pair uses."""
        with self._lock:
            used = self._referenced(self._load())
        self._discard(paths, used)

    @staticmethod
    def _discard(paths: list[Path], used: set[Path]) -> None:
        for p in paths:
            if p.resolve() in used:
                continue
            for f in (p, p.with_name(p.name + ".verified")):
                f.unlink(missing_ok=True)
            try:
                p.parent.rmdir()  # only when empty
            except OSError:
                pass

    def remove(self, pair_id: str) -> None:
        """Forget a pair and delete the files the store owns.

        Hub files are deleted unless another pair uses them; imported files are only unregistered;
        the offline pair's assembled files are deleted (``models offline`` rebuilds them).

        Raises:
            EngineError: No installed pair has this id.
        """
        if pair_id == offline.PAIR_ID:
            off = self._offline()
            if off is None:
                raise EngineError(f"no installed pair {pair_id!r}")
            for p in (off.target_path, off.draft_path):
                for f in (p, p.with_name(p.name + ".verified")) if p else ():
                    f.unlink(missing_ok=True)
            return
        with self._lock:
            entries = self._load()
            entry = entries.pop(pair_id, None)
            if entry is None:
                raise EngineError(
                    f"no installed pair {pair_id!r}; see: python -m engine models list --installed"
                )
            files = [self._path(entry[k]) for k in ("target_path", "draft_path") if entry.get(k)]
            owned = entry["source"] == "hub"
            try:
                self._save(entries)
            except DiskFullError:
                if not owned:
                    raise
                self._discard(files, self._referenced(entries))  # its own files make room for the registry
                try:
                    self._save(entries)
                except DiskFullError as exc:
                    raise DiskFullError(f"{exc} (the files of {pair_id} were deleted; the registry still "
                                        "lists the pair)") from exc
        if owned:
            self.discard_files(files)
        log.info("removed pair %s", pair_id)

    # -- file checks --------------------------------------------------------------------------
    def check(self) -> list[tuple[str, bool, str]]:
        """Check every installed pair: files present, sizes and SHA-256 as recorded, vocabularies compatible.

        Returns:
            ``(pair_id, ok, message)`` per pair; the message is one line.
        """
        return check_pairs(self.entries(), self.installed())
