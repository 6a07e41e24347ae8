"""``models search``, ``models files``, ``models drafts`` and ``models pull REPO FILE --draft REPO FILE``.

Each prints lines for people, or one JSON document with ``--json``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import EngineError
from engine.models.catalog import format_bytes, system_memory

if TYPE_CHECKING:
    from engine.models.installed import InstalledPair


def register(msub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    s = msub.add_parser("search", help="GGUF repositories on the Hub, most downloaded first")
    s.add_argument("query", nargs="*", metavar="QUERY", help="words the repository name contains")
    s.add_argument("--limit", type=int, default=20, metavar="N", help="repositories per page (default: 20)")
    s.add_argument("--page", type=int, default=0, metavar="P", help="page, from 0 (default: 0)")
    s.set_defaults(func=cmd_search)
    f = msub.add_parser("files", help="a Hub repository's GGUF models by quantisation, with size and fit")
    f.add_argument("repo", metavar="REPO")
    f.set_defaults(func=cmd_files)
    d = msub.add_parser("drafts", help="drafts for a Hub model (REPO FILE) or a GGUF file on disk (FILE), checked "
                        "from GGUF headers, best first")
    d.add_argument("repo", metavar="REPO|FILE", help="the target's Hub repository, or alone: a GGUF file on disk")
    d.add_argument("filename", nargs="?", metavar="FILE", help="with REPO: the target's file in it")
    d.set_defaults(func=cmd_drafts)
    for p in (s, f, d):
        p.add_argument("--json", action="store_true", help="print one JSON document")


def add_pull_args(pull: argparse.ArgumentParser) -> None:
    """``pull REPO FILE --draft REPO FILE`` beside ``pull PAIR_ID``."""
    pull.add_argument("filename", nargs="?", metavar="FILE", help="with REPO in place of PAIR_ID: a Hub target")
    pull.add_argument("--draft", nargs=2, metavar=("REPO", "FILE"), help="the draft for a Hub target")
    pull.add_argument("--json", action="store_true", help="print the installed pair as JSON")


def _print_json(data: Any) -> None:
    print(json.dumps(data, indent=1))


def cmd_search(args: argparse.Namespace) -> int:
    from engine.models.search import search

    page = search(" ".join(args.query), limit=args.limit, page=args.page)
    if args.json:
        _print_json({"query": page.query, "page": page.page, "more": page.more,
                     "repositories": [asdict(h) for h in page.hits]})
        return 0
    if not page.hits:
        print(f"no GGUF repositories match {page.query!r}")
    for h in page.hits:
        marks = "".join(f"  [{m}]" for m, on in (("gated: needs HF_TOKEN", h.gated), ("private", h.private)) if on)
        print(f"{h.repo}  {h.downloads:,} downloads  {h.likes:,} likes{marks}")
    if page.more:
        print(f"more: --page {page.page + 1}")
    return 0


def cmd_files(args: argparse.Namespace) -> int:
    from engine.models.search import repo_models

    found = repo_models(args.repo, system_memory())
    if args.json:
        _print_json({"repo": found.repo, "gated": found.gated, "base_models": found.base_models, "note": found.note,
                     "models": [asdict(m.model) | {"ram_bytes": m.ram_bytes, "vram_bytes": m.vram_bytes,
                                                   "fit": m.label, "why": m.reason} for m in found.models]})
        return 0
    print(f"{found.repo}: {len(found.models)} GGUF models" + (f" ({found.note})" if found.note else ""))
    for m in found.models:
        parts = f" in {len(m.model.files)} files" if len(m.model.files) > 1 else ""
        print(f"  {m.model.quant:<8} {format_bytes(m.model.size):>9}  [{m.label}]  {m.model.first}{parts}")
        print(f"      {m.reason}")
    return 0


def cmd_drafts(args: argparse.Namespace) -> int:
    from engine.models.archs import arch_info
    from engine.models.drafts import find_drafts, find_drafts_for_file
    from engine.models.hubnames import is_repo_id

    if args.filename is None:  # one argument: a file of the user's own
        if not Path(args.repo).exists() and is_repo_id(args.repo) and not args.repo.endswith(".gguf"):
            raise EngineError(f"{args.repo} is not a file here: for a Hub model name its file too (models drafts "
                              f"REPO FILE; models files {args.repo} lists them)")
        found = find_drafts_for_file(Path(args.repo))
    else:
        found = find_drafts(args.repo, args.filename)
    if args.json:
        _print_json({"target": asdict(found.target), "arch": found.arch, "advice": found.advice,
                     "candidates": [asdict(c) for c in found.candidates]})
        return 0
    t = found.target
    where = f"{t.repo}/{t.first}" if t.repo else t.first
    arch = arch_info(found.arch)
    print(f"drafts for {where} ({format_bytes(t.size)}, {arch.label}: {arch.cost}), best first:")
    for c in found.candidates:
        where = f"{c.repo}/{c.filename}" if c.repo else f"{c.filename} (on disk)"
        size = format_bytes(c.size) if c.size else "?"
        print(f"  {c.verdict:<12} {where}  {c.quant} {size}" + (f"  {arch_info(c.arch).label}" if c.arch else ""))
        print(f"      {c.reason}")
    if found.advice:
        print(found.advice)
    return 0


def cmd_pull_hub(args: argparse.Namespace, progress: Any) -> int:
    """``pull REPO FILE --draft REPO FILE``: both models as one unit, registered as a pair."""
    from engine.models.hubpair import HubPair, download_hub_pair
    from engine.models.search import find_model, list_models
    from engine.models.store import ModelStore

    if args.filename is None or args.draft is None:
        raise EngineError("pull a Hub pair as: models pull REPO FILE --draft REPO FILE (or pull PAIR_ID)")
    target = find_model(list_models(args.pair_id)[0], args.filename)
    draft = find_model(list_models(args.draft[0])[0], args.draft[1])
    pair = download_hub_pair(HubPair(target, draft), ModelStore(), progress=progress)
    if not args.json:
        print(f"installed {pair.id}: {pair.name}")
    print_pair(pair, args.json)
    return 0


def print_pair(pair: InstalledPair, as_json: bool) -> None:
    """What ``pull`` prints of the pair it installed: its files' paths, or its id, name and files as JSON."""
    if as_json:
        _print_json({"id": pair.id, "name": pair.name, "target": str(pair.target_path),
                     "draft": str(pair.draft_path)})
        return
    print(f"target: {pair.target_path}")
    print(f"draft: {pair.draft_path}")
