"""Find drafts for a target GGUF, on the Hub or on disk: candidates checked against llama.cpp's pairing rule from
headers only.

Candidates are GGUF repositories of the target's publisher and family (for a file on disk: the family its header
or file name gives), the family of the base model its card names, and the GGUF files already in the model store.
For each, one model is picked (the best draft quantisation), its header is read with range requests (no weights)
and held to the vocabulary rule. The ranking puts compatible drafts first, then those whose size is 1/8 to 1/20
of the target's, then by quantisation. A compatible candidate's reason says what the two architectures mean for
speculation (a recurrent or hybrid model: :mod:`engine.models.archs`).
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

from . import archs, hubapi, search
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
        arch: Its ``general.architecture`` ("" when its header was not read).
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
    arch: str = ""

    @property
    def compatible(self) -> bool:
        return self.verdict == "compatible"


@dataclass(frozen=True)
class DraftSearch:
    """The target and its candidates, best first; ``advice`` says what runs when none is compatible; ``arch`` is
    the target's architecture (a file on disk has no ``repo``)."""

    target: search.GgufModel
    candidates: list[Candidate]
    advice: str
    arch: str = ""


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


def _arch(reader: HeaderReader) -> archs.ArchInfo:
    try:
        return archs.from_metadata(reader.metadata({"general.architecture"}))
    except (NotGgufError, DownloadError):
        return archs.arch_info("")


def _decide(target: VocabInfo, t_arch: archs.ArchInfo, reader: HeaderReader, size: int,
            target_size: int) -> tuple[str, str, str]:
    """:func:`verdict`, with what the two architectures mean for speculation added to a compatible one."""
    v, why = verdict(target, reader, size, target_size)
    d_arch = _arch(reader) if v != "unchecked" else archs.arch_info("")
    note = archs.pair_note(t_arch, d_arch) if v == "compatible" else ""
    return v, f"{why}; {note}" if note else why, d_arch.arch


def _hub_repos(name: str, owner: str | None, bases: list[str], exclude: str = "") -> list[str]:
    """Repositories of ``name``'s family (by ``owner``, or anyone's when None) and of its base models' families."""
    queries = [(owner, family(name)), *((None, family(b)) for b in bases)]
    t_params = params_b(name)
    seen: list[str] = []
    for author, q in queries:
        if not q:
            continue
        for repo in _family_repos(author, q):
            p = params_b(repo)
            smaller = t_params is None or p is None or p < t_params
            if repo != exclude and repo not in seen and smaller:
                seen.append(repo)
    return seen[:MAX_HUB_CANDIDATES]


def _family_repos(author: str | None, query: str) -> list[str]:
    def listing(api: HfApi) -> list[str]:
        found = api.list_models(author=author, search=query, filter="gguf", sort="downloads", limit=QUERY_LIMIT)
        return [m.id for m in found if isinstance(m.id, str) and is_repo_id(m.id)]  # others cannot be asked for

    return hubapi.call(listing)


def _pick(models: list[search.GgufModel]) -> search.GgufModel:
    return min(models, key=lambda m: (_quant_rank(m.quant), m.size))


def _hub_candidate(repo: str, t_vocab: VocabInfo, t_arch: archs.ArchInfo, t_size: int) -> Candidate:
    try:
        models, _, _ = search.list_models(repo)
    except (EngineError, DownloadError) as exc:
        return Candidate("hub", repo, "", 0, "?", "unchecked", str(exc), 0)
    m = _pick(models)
    reader = HeaderReader.hub_file(repo, m.first, m.size)
    v, why, arch = _decide(t_vocab, t_arch, reader, m.size, t_size)
    return Candidate("hub", repo, m.first, m.size, m.quant, v, why, reader.fetched, m.files, arch)


def _disk_paths(store: ModelStore) -> list[Path]:
    paths: list[Path] = []
    try:
        for pair in store.installed():
            paths += [pair.target_path] + ([pair.draft_path] if pair.draft_path else [])
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
    reader = HeaderReader.hub_file(repo, target.first, target.size)
    t_vocab = reader.vocab()
    hub = _hub_repos(repo, repo.split("/")[0], bases, exclude=repo)
    return _search(target, t_vocab, _arch(reader), hub, store or ModelStore(), on_candidate)


def find_drafts_for_file(path: Path, *, store: ModelStore | None = None,
                         on_candidate: Report | None = None) -> DraftSearch:
    """Candidates for drafting a GGUF file on disk: the store's files and the Hub's repositories of the family
    its header names (``general.basename``, else its file name), held to the same vocabulary rule.

    Raises:
        NotGgufError: The file is missing, not GGUF, or its tokenizer cannot be read.
        NotFoundError, AuthError, RateLimitError, DownloadError: The Hub refused a family search.
    """
    path = Path(path).expanduser()
    reader = HeaderReader.local(path)
    t_vocab = reader.vocab()
    meta = reader.metadata({"general.basename", "general.size_label", "general.architecture"})
    words = [v.decode("utf-8", "replace") for k in ("general.basename", "general.size_label")
             if isinstance(v := meta.get(k), bytes)]
    name = "-".join(words) if words else path.stem
    size = file_size(path)
    target = search.GgufModel("", path.name, (str(path),), size, search.quant_of(path.name))
    return _search(target, t_vocab, archs.from_metadata(meta), _hub_repos(name, None, []), store or ModelStore(),
                   on_candidate, skip=path.resolve())


def _search(target: search.GgufModel, t_vocab: VocabInfo, t_arch: archs.ArchInfo, hub_repos: list[str],
            store: ModelStore, on_candidate: Report | None, skip: Path | None = None) -> DraftSearch:
    found: list[Candidate] = []

    def add(c: Candidate) -> None:
        found.append(c)
        if on_candidate is not None:
            on_candidate(c)

    for path in _disk_paths(store):
        if skip is not None and path.resolve() == skip:
            continue  # the target itself: a model cannot draft for itself
        reader = HeaderReader.local(path)
        v, why, arch = _decide(t_vocab, t_arch, reader, file_size(path), target.size)
        add(Candidate("disk", "", str(path), file_size(path), search.quant_of(path.name), v, why, reader.fetched,
                      (str(path),), arch))
    for cand in hub_repos:
        add(_hub_candidate(cand, t_vocab, t_arch, target.size))
    found.sort(key=lambda c: rank_key(c, target.size))
    alone = "still downloads alone and " if target.repo else ""
    advice = "" if any(c.compatible for c in found) else (
        f"no compatible draft found: the target {alone}runs with the lookup and ar modes")
    return DraftSearch(target, found, advice, t_arch.arch)
