"""llama.cpp's own tools on the bench's prompts: llama-completion and llama-speculative-simple (``--peer DIR``)."""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .common import Row, Scenario


def run_peer(peer: Path, sc: Scenario, draft: Path, eng_prompts: list[str], args: argparse.Namespace) -> list[Row]:
    """llama.cpp's llama-completion and llama-speculative-simple on the same prompts and token counts."""
    rows = []
    tools = {
        "llama-completion": ["-m", str(sc.target), "-no-cnv", "-n", str(args.max_tokens), "--temp", "0", "--top-k", "1",
                             "--seed", "42", "-t", str(sc.threads), "-tb", str(sc.threads), "-c", str(args.ctx)],
        "llama-speculative-simple": ["-m", str(sc.target), "-md", str(draft), "--spec-type", "draft-simple",
                                     "--spec-draft-n-max", str(args.k), "-n", str(args.max_tokens), "--temp", "0",
                                     "--top-k", "1", "--seed", "42", "-t", str(sc.threads), "-td",
                                     str(sc.draft_threads), "-c", str(args.ctx)],
    }
    for tool, base in tools.items():
        row = _row(sc.name, f"peer:{tool}")
        exe = peer / tool
        for i, text in enumerate(eng_prompts):
            r = subprocess.run([str(exe), *base, "-p", text], capture_output=True, text=True, timeout=1800, check=False)
            out = r.stdout + r.stderr
            tps = _parse_peer_speed(tool, out)
            row.runs.append({"prompt": i, "mode": row.mode, "returncode": r.returncode, "tokens_per_second": tps,
                             "decode_tokens": args.max_tokens if tps else 0,
                             "decode_s": args.max_tokens / tps if tps else 0.0, "tail": out[-3000:]})
        rows.append(row)
    return rows


def _parse_peer_speed(tool: str, out: str) -> float | None:
    if tool == "llama-speculative-simple":
        m = re.search(r"decoded\s+\d+ tokens in\s+[0-9.]+ seconds, speed:\s*([0-9.]+)\s*t/s", out)
    else:
        m = re.search(r"eval time =.*?([0-9.]+) tokens per second", out.split("prompt eval time")[-1])
    return float(m.group(1)) if m else None




def _row(scenario: str, mode: str) -> Row:
    from .common import Row

    return Row(scenario, "greedy", mode)
