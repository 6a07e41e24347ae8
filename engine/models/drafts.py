"""Find drafts for a target GGUF on the Hub: candidates checked against llama.cpp's pairing rule from headers only.

Candidates are GGUF repositories of the target's publisher and family, the family of the base model its card
names, and the GGUF files already in the model store. For each, one model is picked (the best draft
quantisation), its header is read with range requests (no weights) and held to the vocabulary rule. The
ranking puts compatible drafts first, then those whose size is 1/8 to 1/20 of the target's, then by
quantisation.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import HfApi

from engine.core.vocab import VocabInfo, check_vocab_rule
from engine.errors import EngineError, VocabMismatchError

from . import hubapi, search
from .headers import HeaderReader, NotGgufError, file_size
from .hub_http import DownloadError
from .hubnames import is_repo_id
from .store import ModelStore

log = logging.getLogger(__name__)

MAX_HUB_CANDIDATES = 8  # repositories whose headers are read: each costs a header (about 1 MiB) and a listing
QUERY_LIMIT = 30  # repositories each family search returns, before the size filter
RATIO_BAND = (8.0, 20.0)  # target/draft size ratios that pay best: cheap to run, still predicts the target
# Draft quantisations best first: 8 bits keep the draft's acceptance close to full precision at half F16's
# bytes; fewer bits lose acceptance; F16/F32 cost bandwidth for nothing.
QUANT_ORDER = ("Q8_0", "Q6_K", "Q5_K_M", "Q5_K_S", "Q4_K_M", "Q4_K_S", "Q4_0", "IQ4_XS", "F16", "BF16", "F32")
_SIZE = re.compile(r"(?<![A-Za-z0-9.])(\d+(?:\.\d+)?)[Bb](?![A-Za-z0-9])")

Report = Callable[["Candidate"], None]


@dataclass(frozen=True)
class Candidate:
    """One draft candidate and its verdict.

    Attributes:
        source: ``"hub"`` or ``"disk"``.
        repo: Hub repository ("" on disk).
        filename: The model's first file on the Hub, or the path on disk.
        size: Bytes of the model.
        quant: Quantisation named in its file name.
        verdict: ``"compatible"``, ``"incompatible"`` or ``"unchecked"``.
        reason: One line: why (the rule's first failing check), or the size ratio when compatible.
        header_bytes: Bytes read to decide (header blocks only).
        files: The model's files on the Hub (several for a split model).
    """

    source: str
    repo: str
    filename: str
    size: int
    quant: str
    verdict: str
    reason: str
    header_bytes: int
    files: tuple[str, ...] = ()

    @property
    def compatible(self) -> bool:
        return self.verdict == "compatible"


@dataclass(frozen=True)
class DraftSearch:
    """The target and its candidates, best first; ``advice`` says what runs when none is compatible."""

    target: search.GgufModel
    candidates: list[Candidate]
    advice: str


def family(name: str) -> str:
    """The family part of a model name: what comes before its parameter count (``Qwen2.5-7B-...`` -> ``Qwen2.5``)."""
    stem = name.split("/")[-1].removesuffix("-GGUF").removesuffix("-gguf")
    m = _SIZE.search(stem)
    return stem[: m.start()].strip("-_ .") if m and m.start() > 0 else stem


def params_b(name: str) -> float | None:
    """The parameter count in billions named in a model name (``0.5B`` -> 0.5), or None."""
    m = _SIZE.search(name.split("/")[-1])
    return float(m[1]) if m else None


def _quant_rank(quant: str) -> int:
    return QUANT_ORDER.index(quant) if quant in QUANT_ORDER else len(QUANT_ORDER)


def rank_key(c: Candidate, target_size: int) -> tuple[int, int, float, int]:
    """Compatible first; then a size ratio inside the band; then nearest the band; then quantisation."""
    ratio = target_size / max(c.size, 1)
    lo, hi = RATIO_BAND
    off = 0.0 if lo <= ratio <= hi else min(abs(math.log(ratio / lo)), abs(math.log(ratio / hi)))
    order = {"compatible": 0, "unchecked": 1}.get(c.verdict, 2)
    return order, 0 if off == 0 else 1, off, _quant_rank(c.quant)


def verdict(target: VocabInfo, reader: HeaderReader, size: int, target_size: int) -> tuple[str, str]:
    """The pairing rule on one candidate's header: ``(verdict, reason)``."""
    if size >= target_size:
        return "incompatible", "not smaller than the target: it would be slower than the target alone"
    try:
        check_vocab_rule(target, reader.vocab())
    except VocabMismatchError as exc:
        return "incompatible", f"vocabulary differs: {exc}"
    except NotGgufError as exc:
        return "unchecked", str(exc).split(": ", 1)[-1]
    except DownloadError as exc:
        return "unchecked", f"header not readable: {exc}"
    return "compatible", f"same tokenizer; 1/{target_size / max(size, 1):.0f} of the target's size"


def _hub_repos(target: search.GgufModel, bases: list[str]) -> list[str]:
    owner = target.repo.split("/")[0]
    fam = family(target.repo)
    queries = [(owner, fam), *((None, family(b)) for b in bases)]
    t_params = params_b(target.repo)
    seen: list[str] = []
    for author, q in queries:
        if not q:
            continue
        for repo in _family_repos(author, q):
            p = params_b(repo)
            smaller = t_params is None or p is None or p < t_params
            if repo != target.repo and repo not in seen and smaller:
                seen.append(repo)
    return seen[:MAX_HUB_CANDIDATES]


def _family_repos(author: str | None, query: str) -> list[str]:
    def listing(api: HfApi) -> list[str]:
        found = api.list_models(author=author, search=query, filter="gguf", sort="downloads", limit=QUERY_LIMIT)
        return [m.id for m in found if isinstance(m.id, str) and is_repo_id(m.id)]  # others cannot be asked for

    return hubapi.call(listing)


def _pick(models: list[search.GgufModel]) -> search.GgufModel:
    return min(models, key=lambda m: (_quant_rank(m.quant), m.size))


def _hub_candidate(repo: str, t_vocab: VocabInfo, t_size: int) -> Candidate:
    try:
        models, _, _ = search.list_models(repo)
    except (EngineError, DownloadError) as exc:
        return Candidate("hub", repo, "", 0, "?", "unchecked", str(exc), 0)
    m = _pick(models)
    reader = HeaderReader.hub_file(repo, m.first, m.size)
    v, why = verdict(t_vocab, reader, m.size, t_size)
    return Candidate("hub", repo, m.first, m.size, m.quant, v, why, reader.fetched, m.files)


def _disk_paths(store: ModelStore) -> list[Path]:
    paths: list[Path] = []
    try:
        for pair in store.installed():
            paths += [pair.target_path, pair.draft_path]
    except EngineError as exc:
        log.info("installed pairs not listed for drafts: %s", exc)
    hub_dir = store.root / "hub"
    paths += sorted(hub_dir.rglob("*.gguf")) if hub_dir.is_dir() else []
    unique: dict[Path, Path] = {}
    for p in paths:
        unique.setdefault(p.resolve(), p)
    return [p for p in unique.values() if p.is_file() and not search._SHARD.match(p.name)]


def find_drafts(repo: str, filename: str, *, store: ModelStore | None = None,
                on_candidate: Report | None = None) -> DraftSearch:
    """Candidates for drafting ``repo/filename``, best first, each with its verdict.

    Args:
        repo: The target's repository.
        filename: The target model (a file or a split model's first shard).
        store: Where to look for models on disk (default: the user's store).
        on_candidate: Called with each candidate as it is decided (the app shows them as they come).

    Raises:
        NotFoundError, AuthError, RateLimitError, DownloadError: The Hub refused the target's listing or header.
        EngineError: The target is not a GGUF model of the repository, or its header is not GGUF.
    """
    models, _, bases = search.list_models(repo)
    target = search.find_model(models, filename)
    t_vocab = HeaderReader.hub_file(repo, target.first, target.size).vocab()
    found: list[Candidate] = []

    def add(c: Candidate) -> None:
        found.append(c)
        if on_candidate is not None:
            on_candidate(c)

    for path in _disk_paths(store or ModelStore()):
        reader = HeaderReader.local(path)
        v, why = verdict(t_vocab, reader, file_size(path), target.size)
        add(Candidate("disk", "", str(path), file_size(path), search.quant_of(path.name), v, why, reader.fetched,
                      (str(path),)))
    for cand in _hub_repos(target, bases):
        add(_hub_candidate(cand, t_vocab, target.size))
    found.sort(key=lambda c: rank_key(c, target.size))
    advice = "" if any(c.compatible for c in found) else (
        "no compatible draft found: the target still downloads alone and runs with the lookup and ar modes")
    return DraftSearch(target, found, advice)
