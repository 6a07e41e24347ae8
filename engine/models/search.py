"""Search the Hub for GGUF models: repositories most downloaded first, paged; a repository's models by quantisation.

A model is one GGUF file, or the shards ``NAME-00001-of-0000N.gguf`` of one split model (counted once, their sizes
added). Its fit on this machine is the catalog's estimate: the weights plus an f16 KV cache at the default
context, the numbers of which come from the header of the repository's first model (one range request).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from itertools import islice
from pathlib import PurePosixPath

from huggingface_hub import HfApi
from huggingface_hub.hf_api import RepoFile

from engine.errors import EngineError

from . import hubapi
from .catalog import Arch, fit_bytes, model_bytes
from .headers import HeaderReader, NotGgufError
from .hub_http import DownloadError
from .hub_http import OfflineError as OfflineError  # the search pane tells it apart
from .hubnames import MAX_FILE, count, repo_id, shown

DEFAULT_LIMIT = 20  # repositories per page: one screen of results
MAX_LIMIT = 100
DEFAULT_CONTEXT = 4096  # the context the fit estimate assumes, as the catalog's pairs do
NO_ARCH_OVERHEAD = 1.10  # weights x this when the header cannot be read: a small model's cache at 4k context
_SHARD = re.compile(r"^(?P<stem>.+)-(?P<i>\d{5})-of-(?P<n>\d{5})\.gguf$", re.IGNORECASE)
_QUANT = re.compile(
    r"(?<![A-Za-z0-9])(I?Q\d(?:_[0-9A-Z]+)*|BF16|F16|F32|FP16|FP32|MXFP4(?:_MOE)?|TQ\d_\d)(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SKIP = ("mmproj",)  # vision projectors: GGUF, but not a model to chat with


@dataclass(frozen=True)
class RepoHit:
    """One repository of a search."""

    repo: str
    downloads: int
    likes: int
    gated: bool
    private: bool


@dataclass(frozen=True)
class SearchPage:
    """One page of a search: ``more`` says whether a next page exists."""

    query: str
    page: int
    hits: list[RepoHit]
    more: bool


@dataclass(frozen=True)
class GgufModel:
    """One GGUF model in a repository: a file, or the shards of a split model in order."""

    repo: str
    name: str
    files: tuple[str, ...]
    size: int
    quant: str
    sha256: tuple[str | None, ...] = ()

    @property
    def first(self) -> str:
        """The file llama.cpp opens (the first shard)."""
        return self.files[0]


@dataclass(frozen=True)
class ModelFit:
    """A model with what running it needs and whether that fits this machine."""

    model: GgufModel
    ram_bytes: int
    vram_bytes: int
    label: str
    reason: str


@dataclass(frozen=True)
class RepoModels:
    """A repository's GGUF models, smallest first, with fit; ``gated`` repositories need HF_TOKEN to download."""

    repo: str
    gated: bool
    base_models: list[str]
    models: list[ModelFit] = field(default_factory=list)
    note: str = ""


def quant_of(filename: str) -> str:
    """The quantisation named in a file name (``Q4_K_M``, ``IQ3_XS``, ``F16``...), or ``"?"``."""
    found = _QUANT.findall(PurePosixPath(filename).name.removesuffix(".gguf"))
    quant = found[-1].upper() if found else "?"
    return {"FP16": "F16", "FP32": "F32"}.get(quant, quant)


def group_models(repo: str, files: list[tuple[str, int, str | None]]) -> list[GgufModel]:
    """``(path, size, sha256)`` of a repository's files as GGUF models, smallest first; shards joined."""
    groups: dict[str, list[tuple[int, str, int, str | None]]] = {}
    for path, size, sha in files:
        name = PurePosixPath(path).name
        if not name.lower().endswith(".gguf") or name.lower().startswith(_SKIP):
            continue
        m = _SHARD.match(name)
        key = str(PurePosixPath(path).parent / m["stem"]) + ".gguf" if m else path
        groups.setdefault(key.removeprefix("./"), []).append((int(m["i"]) if m else 1, path, size, sha))
    models = []
    for key, parts in groups.items():
        parts.sort()
        models.append(GgufModel(repo, PurePosixPath(key).name, tuple(p for _, p, _, _ in parts),
                                sum(s for _, _, s, _ in parts), quant_of(key), tuple(h for *_, h in parts)))
    return sorted(models, key=lambda m: (m.size, m.name))


def search(query: str, *, limit: int = DEFAULT_LIMIT, page: int = 0) -> SearchPage:
    """GGUF repositories whose names contain every word of ``query``, most downloaded first.

    Raises:
        EngineError: An empty query or a limit out of range.
        RateLimitError, AuthError, DownloadError: The Hub's answer.
    """
    words = " ".join(query.split())
    if not words:
        raise EngineError("type what to search for, e.g.: python -m engine models search qwen2.5 7b")
    if not 1 <= limit <= MAX_LIMIT or page < 0:
        raise EngineError(f"the limit must be 1 to {MAX_LIMIT} and the page 0 or more")
    end = (page + 1) * limit

    def listing(api: HfApi) -> list[RepoHit]:
        found = api.list_models(search=words, filter="gguf", sort="downloads", limit=end + 1,
                                expand=["downloads", "likes", "gated", "private"])
        return [RepoHit(shown(m.id), count(m.downloads), count(m.likes), bool(m.gated), bool(m.private))
                for m in islice(found, end + 1)]

    hits = hubapi.call(listing)
    return SearchPage(words, page, hits[page * limit : end], len(hits) > end)


def _base_models(card: object) -> list[str]:
    base = getattr(card, "base_model", None) if card is not None else None
    if isinstance(base, str):
        return [shown(base)]
    return [shown(b) for b in base if isinstance(b, str)] if isinstance(base, list) else []


def list_models(repo: str) -> tuple[list[GgufModel], bool, list[str]]:
    """A repository's GGUF models, whether it is gated, and the base models its card names.

    Raises:
        NotFoundError, AuthError, RateLimitError, DownloadError: The Hub's answer.
        EngineError: The repository has no GGUF file.
    """
    repo = repo_id(repo)
    info = hubapi.call(lambda api: api.model_info(repo), repo)
    tree = hubapi.call(lambda api: list(api.list_repo_tree(repo, recursive=True)), repo)
    files = [(f.path, count(f.size), f.lfs.sha256 if f.lfs else None) for f in tree
             if isinstance(f, RepoFile) and isinstance(f.path, str) and f.path == shown(f.path, MAX_FILE)]
    models = group_models(repo, files)
    if not models:
        raise EngineError(f"{repo} has no GGUF files; llama.cpp needs GGUF: search for a GGUF version, "
                          f"e.g. python -m engine models search {repo.split('/')[1]}")
    return models, bool(info.gated), _base_models(info.card_data)


def estimate(size: int, arch: Arch | None, n_ctx: int = DEFAULT_CONTEXT) -> tuple[int, int]:
    """RAM and VRAM one model needs: weights and an f16 KV cache (and the logits buffer on a GPU)."""
    if arch is None:
        ram = int(size * NO_ARCH_OVERHEAD)
        return ram, ram
    return model_bytes(size, arch, n_ctx)


def repo_models(repo: str, memory: tuple[int, int | None]) -> RepoModels:
    """:func:`list_models` with each model's fit on a machine with ``memory`` (free RAM, free VRAM or None)."""
    models, gated, bases = list_models(repo)
    note = ("gated: downloading needs its licence accepted on the Hub and HF_TOKEN set" if gated else "")
    try:
        arch = HeaderReader.hub_file(repo, models[0].first, models[0].size).architecture()
    except (NotGgufError, DownloadError):
        arch = None  # gated without a token, or no range support: the fit counts the weights and a margin
    ram, vram = memory
    fits = []
    for m in models:
        need_ram, need_vram = estimate(m.size, arch)
        label, reason = fit_bytes(need_ram, need_vram, ram, vram)
        fits.append(ModelFit(m, need_ram, need_vram, label, reason))
    return RepoModels(repo, gated, bases, fits, note)


def find_model(models: list[GgufModel], filename: str) -> GgufModel:
    """The model that ``filename`` names (a file, its first shard, or the split model's name).

    Raises:
        EngineError: No model of the repository has that name (the message lists some).
    """
    for m in models:
        if filename in (m.name, *m.files) or PurePosixPath(m.first).name == filename:
            return m
    some = ", ".join(m.first for m in models[:6])
    repo = models[0].repo if models else "the repository"
    raise EngineError(f"{filename} is not a GGUF model in {repo}; it has: {some}")
