"""Bench scenario ``R`` (remote): the real pair's target on one or two RPC servers on this machine, each reached
through a proxy that adds a delay each way (0, 5 and 25 ms by default), the draft local; ar, sd, ssd, lookup and
auto, greedy, and llama.cpp's own ar over the same link as the peer.

Per server count and delay: fresh ``python -m engine rpc-server`` children (one thread each, :mod:`.remote_link`)
each behind its own :class:`DelayProxy`; the engine here is the RPC client (one target thread, one draft thread),
the target's layers in equal shares over the servers. Each prompt runs every mode back to back, the order rotated
per prompt. Then the peer (:mod:`.remote_peer`) on fresh servers. Bytes are counted by the proxies (summed
over the servers): client to server and back, per round and per target row. Latency is the only thing shaped:
everything runs over loopback.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from engine.core.mode import Mode
from engine.core.options import cpu_cores
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig, GenerationParams
from engine.errors import ParameterError
from engine.native.rpc import require

from .remote_link import SERVER_THREADS, proxies, servers, since, snapshot
from .remote_peer import PEER, run_peer

N = TypeVar("N", int, float)

GREEDY = SamplingParams(temperature=0.0)
WARM_PROMPT = "Say hello."
WARM_TOKENS = 24  # auto's warm-up reply: it measures this machine once, as in the user's earlier replies
# Scenario R's own prompt after the bench's set: a chat request whose reply the draft seldom guesses (issue 63: over a
# link a first chat reply under auto ran at 0.79x ar). Real pair, sd K 4, greedy, 64 tokens, on the 2-core host: 0.21
# of its drafted tokens accepted, against chat-git's 0.53 and chat-sql's 0.48
CHAT_LOW = {"id": "chat-poem", "prompt": "Write a short poem about a lighthouse keeper who collects lost letters."}


def run_setup(n_servers: int, delay_ms: float, target: Path, draft: Path, prompts: list[dict[str, str]],
              modes: list[str], args: argparse.Namespace,
              folder: Path) -> tuple[list[dict[str, Any]], list[tuple[str, list[int]]], list[int]]:
    """Every prompt in every mode with the target on ``n_servers`` servers behind ``delay_ms`` each way: one record
    per reply; and the prompts' chat tokens and the warm-up's, for the peer."""
    from .common import record

    records: list[dict[str, Any]] = []
    with servers(n_servers, folder) as ports, proxies(ports, delay_ms) as links:
        cfg = EngineConfig(str(target), str(draft), n_ctx=args.ctx, threads=1, draft_threads=1,
                           rpc=tuple(p.endpoint for p in links), tensor_split=(1.0,) * n_servers)
        with Engine(cfg) as eng:
            warm = eng.chat_tokens(WARM_PROMPT)
            eng.generate(warm, GenerationParams(mode=Mode.AUTO, max_tokens=WARM_TOKENS, k=args.k)).run()
            chat = [(pr["id"], eng.chat_tokens(pr["prompt"])) for pr in prompts]
            for i, (pid, toks) in enumerate(chat):
                for m in modes[i % len(modes):] + modes[: i % len(modes)]:
                    before = snapshot(links)
                    gen = eng.generate(toks, GenerationParams(mode=Mode(m), max_tokens=args.max_tokens, sampling=GREEDY,
                                                              k=args.k, fanout=1, budget=1)).run()
                    rec = record(gen.stats, gen.tokens, pid, m)
                    rec.update(since(links, before), drafted=gen.stats.drafted, sampling_path=gen.stats.sampling_path,
                               placement=eng.placement.text)
                    records.append(_tag(rec, n_servers, delay_ms))
    return records, chat, warm


def _tag(rec: dict[str, Any], n_servers: int, delay_ms: float) -> dict[str, Any]:
    """A record's setting, and its target rows: the prompt's last row, then each round's drafted tokens and one."""
    rec.update(servers=n_servers, delay_ms=delay_ms, rows=1 + rec["rounds"] + rec["drafted"])
    print(f"R {n_servers} server(s) {delay_ms:g} ms {rec['prompt']} {rec['mode']}: "
          f"{rec['tokens_per_second']:.2f} tok/s, {rec['rounds']} rounds, "
          f"{rec['bytes_down'] / max(rec['rows'], 1):,.0f} B down a target row", file=sys.stderr, flush=True)
    return rec


def peer_setup(n_servers: int, delay_ms: float, target: Path, chat: list[tuple[str, list[int]]], warm: list[int],
               args: argparse.Namespace, folder: Path) -> list[dict[str, Any]]:
    """The peer's records on fresh servers (the engine's process may still hold its own servers' connections)."""
    with servers(n_servers, folder) as ports:
        return [_tag(rec, n_servers, delay_ms) for rec in run_peer(ports, delay_ms, target, chat, warm, args)]


def table(records: list[dict[str, Any]], modes: list[str]) -> list[str]:
    """Markdown rows: per server count, delay and mode (then the peer), tok/s over all prompts, × ar (the engine's
    ar at that setting), tokens and bytes per round each way, bytes down per target row, and whether every reply
    equals ar's tokens."""
    lines = ["| servers | delay each way | mode | tok/s | × ar | tokens/round | KB up/round | KB down/round | "
             "B down/target row | same tokens as ar |", "|---|---|---|---|---|---|---|---|---|---|"]
    for n, delay in sorted({(r["servers"], r["delay_ms"]) for r in records}):
        rs = [r for r in records if r["servers"] == n and r["delay_ms"] == delay]
        ar = {r["prompt"]: r["tokens"] for r in rs if r["mode"] == "ar"}
        ar_rate = _rate([r for r in rs if r["mode"] == "ar"])
        for m in [*modes, PEER]:
            mr = [r for r in rs if r["mode"] == m]
            if not mr:
                continue
            rounds = max(sum(r["rounds"] for r in mr), 1)
            rows = max(sum(r["rows"] for r in mr), 1)
            exact = all(r["tokens"] == ar.get(r["prompt"], r["tokens"]) for r in mr)
            rate = _rate(mr)
            lines.append(f"| {n} | {delay:g} ms | {m} | {rate:.2f} | {rate / max(ar_rate, 1e-9):.2f} | "
                         f"{sum(r['new_tokens'] for r in mr) / rounds:.2f} | "
                         f"{sum(r['bytes_up'] for r in mr) / rounds / 1000:.1f} | "
                         f"{sum(r['bytes_down'] for r in mr) / rounds / 1000:.1f} | "
                         f"{sum(r['bytes_down'] for r in mr) / rows:,.0f} | {'yes' if exact else 'no'} |")
    return lines


def _rate(rs: list[dict[str, Any]]) -> float:
    seconds = float(sum(r["decode_s"] for r in rs))
    return float(sum(r["decode_tokens"] for r in rs)) / max(seconds, 1e-9)


def notes(server_counts: list[int]) -> list[str]:
    """What the table's settings were, said under it."""
    lines = [f"Each server: `python -m engine rpc-server --threads {SERVER_THREADS}` on this machine, behind its own "
             f"proxy with the delay each way; the engine and its draft here, one thread each; {cpu_cores()} cores in "
             "all."]
    if any(n > 1 for n in server_counts):
        lines.append("With 2 servers the target's layers are split in equal shares, and the two servers, the "
                     f"engine and the draft share the same {cpu_cores()} cores; bytes are summed over both proxies.")
    lines.append("B down/target row: bytes server to client over the target rows the replies decoded (the prompt's "
                 "last row, then each round's drafted tokens and one).")
    lines.append(f"{PEER}: llama-cpp-python's Llama, every layer on the same servers (fresh ones, same delay), one "
                 "thread, greedy (temperature 0, top-k 1), on the engine's chat tokens and max tokens; × ar is "
                 "against the engine's ar at the same setting.")
    return lines


def _numbers(text: str, kind: Callable[[str], N], lowest: N, error: str) -> list[N]:
    """A comma list of ``kind`` values, each at least ``lowest``; ParameterError(``error``) otherwise."""
    try:
        values = [kind(x) for x in text.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or min(values) < lowest:
        raise ParameterError(error)
    return values


def remote_prompts(bench: list[dict[str, str]], limit: int | None = None,
                   ids: list[str] | None = None) -> list[dict[str, str]]:
    """Scenario R's prompts: the bench's set, then CHAT_LOW; ``ids`` picks from them, ``limit`` takes the first."""
    data = [*bench, CHAT_LOW]
    if ids:
        known = {p["id"]: p for p in data}
        missing = [i for i in ids if i not in known]
        if missing:
            raise ParameterError(f"unknown prompt id(s): {', '.join(missing)}")
        data = [known[i] for i in ids]
    return data[:limit] if limit else data


def cmd_remote(args: argparse.Namespace) -> int:
    from engine.core.options import MODES
    from engine.models import offline

    from .common import load_prompts, machine

    require()
    server_counts = _numbers(args.servers, int, 1,
                             f"--servers must be a comma list of whole numbers from 1, got {args.servers!r}")
    delays = _numbers(args.delays, float, 0.0,
                      f"--delays must be a comma list of milliseconds (0 or more), got {args.delays!r}")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()] or list(MODES)
    bad = [m for m in modes if m not in MODES]
    if bad:
        raise ParameterError(f"unknown mode {bad[0]!r} (use {', '.join(MODES)})")
    if args.target and args.draft:
        target, draft = Path(args.target), Path(args.draft)
    else:
        pair = offline.ensure_pair()
        target, draft = pair.target, pair.draft
    prompts = remote_prompts(load_prompts(), args.prompts, args.prompt_ids.split(",") if args.prompt_ids else None)
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in server_counts:
            for delay in delays:
                recs, chat, warm = run_setup(n, delay, target, draft, prompts, modes, args, Path(tmp))
                records += recs + peer_setup(n, delay, target, chat, warm, args, Path(tmp))
    lines = table(records, modes)
    print("\n".join(lines + [""] + [f"- {n}" for n in notes(server_counts)]))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = sys.argv[[*sys.argv, "bench"].index("bench") + 1:]
    result = {"scenario": "R", "command": "python -m engine bench " + " ".join(argv), "started": started,
              "machine": machine(), "models": {"target": str(target), "draft": str(draft)},
              "settings": {"servers": server_counts, "delays_ms": delays, "modes": modes, "max_tokens": args.max_tokens,
                           "k": args.k, "ctx": args.ctx, "prompts": [p["id"] for p in prompts]},
              "table": lines, "notes": notes(server_counts), "records": records}
    out.write_text(json.dumps(result, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0
