"""Bench scenario ``R`` (remote): the real pair's target on an RPC server on this machine, reached through a proxy
that adds a delay each way (0, 5 and 25 ms by default), the draft local; ar, sd, ssd, lookup and auto, greedy.

Per delay: one ``python -m engine rpc-server`` child (one thread) and one :class:`DelayProxy`; the engine
here is the RPC client (one target thread, one draft thread). Each prompt runs every mode back to back,
the order rotated per prompt. Bytes are counted by the proxy: client to server and back, per round and
per generated token. Latency is the only thing shaped: everything runs over loopback.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from engine.core.errors import EngineError
from engine.core.sampling import SamplingParams
from engine.engine import Engine, EngineConfig, GenerationParams
from engine.remote.native import require
from engine.remote.proxy import DelayProxy

GREEDY = SamplingParams(temperature=0.0)


def _server(port: int, log: Path) -> subprocess.Popen[bytes]:
    from engine.remote import RemoteError, parse_endpoint, probe

    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "engine", "rpc-server", "--port", str(port), "--threads", "1"],
                                stdout=out, stderr=subprocess.STDOUT)
    for _ in range(300):
        try:
            probe(parse_endpoint(f"127.0.0.1:{port}"), devices=False)
            return proc
        except RemoteError:
            if proc.poll() is not None:
                break
            import time

            time.sleep(0.2)
    proc.kill()
    raise EngineError(f"the RPC server for scenario R did not start: {log.read_text(errors='replace')[-500:]}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_delay(delay_ms: float, target: Path, draft: Path, prompts: list[dict[str, str]], modes: list[str],
              args: argparse.Namespace, folder: Path) -> list[dict[str, Any]]:
    """Every prompt in every mode with the target behind ``delay_ms`` each way; one record per reply."""
    from .bench import _record

    port = _free_port()
    server = _server(port, folder / f"rpc-{port}.log")
    records: list[dict[str, Any]] = []
    try:
        with DelayProxy(("127.0.0.1", port), delay_ms / 1000) as proxy:
            cfg = EngineConfig(str(target), str(draft), n_ctx=args.ctx, threads=1, draft_threads=1,
                               rpc=(proxy.endpoint,))
            with Engine(cfg) as eng:
                warm = eng.chat_tokens("Say hello.")
                eng.generate(warm, GenerationParams(mode="auto", max_tokens=24, k=args.k)).run()
                for i, pr in enumerate(prompts):
                    toks = eng.chat_tokens(pr["prompt"])
                    for m in modes[i % len(modes):] + modes[: i % len(modes)]:
                        up0, down0 = proxy.counts()
                        gen = eng.generate(toks, GenerationParams(mode=m, max_tokens=args.max_tokens, sampling=GREEDY,
                                                                  k=args.k, fanout=1, budget=1)).run()
                        up, down = proxy.counts()
                        rec = _record(gen.stats, gen.tokens, pr["id"], m)
                        rec.update(delay_ms=delay_ms, bytes_up=up - up0, bytes_down=down - down0)
                        records.append(rec)
                        print(f"R {delay_ms:g} ms {pr['id']} {m}: {rec['tokens_per_second']:.2f} tok/s, "
                              f"{rec['rounds']} rounds, {(down - down0) / max(rec['rounds'], 1) / 1000:.1f} KB down "
                              "a round", file=sys.stderr, flush=True)
    finally:
        server.kill()
        server.wait()
    return records


def table(records: list[dict[str, Any]], modes: list[str]) -> list[str]:
    """Markdown rows: per delay and mode, tok/s over all prompts, × ar, rounds and bytes per round each way."""
    lines = ["| delay each way | mode | tok/s | × ar | tokens/round | KB up/round | KB down/round | exact |",
             "|---|---|---|---|---|---|---|---|"]
    for delay in sorted({r["delay_ms"] for r in records}):
        rs = [r for r in records if r["delay_ms"] == delay]
        rate = {m: sum(r["decode_tokens"] for r in rs if r["mode"] == m) /
                max(sum(r["decode_s"] for r in rs if r["mode"] == m), 1e-9) for m in modes}
        ar = {r["prompt"]: r["tokens"] for r in rs if r["mode"] == "ar"}
        for m in modes:
            mr = [r for r in rs if r["mode"] == m]
            rounds = max(sum(r["rounds"] for r in mr), 1)
            exact = all(r["tokens"] == ar.get(r["prompt"], r["tokens"]) for r in mr)
            lines.append(f"| {delay:g} ms | {m} | {rate[m]:.2f} | {rate[m] / max(rate.get('ar', 0), 1e-9):.2f} | "
                         f"{sum(r['new_tokens'] for r in mr) / rounds:.2f} | "
                         f"{sum(r['bytes_up'] for r in mr) / rounds / 1000:.1f} | "
                         f"{sum(r['bytes_down'] for r in mr) / rounds / 1000:.1f} | {'yes' if exact else 'no'} |")
    return lines


def cmd_remote(args: argparse.Namespace) -> int:
    from engine.core.options import MODES
    from engine.models import offline

    from .bench import load_prompts

    require()
    if args.target and args.draft:
        target, draft = Path(args.target), Path(args.draft)
    else:
        pair = offline.ensure_pair()
        target, draft = pair.target, pair.draft
    modes = [m.strip() for m in args.modes.split(",") if m.strip()] or list(MODES)
    prompts = load_prompts(args.prompts, args.prompt_ids.split(",") if args.prompt_ids else None)
    delays = [float(d) for d in args.delays.split(",")]
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for delay in delays:
            records += run_delay(delay, target, draft, prompts, modes, args, Path(tmp))
    print("\n".join(table(records, modes)))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"scenario": "R", "records": records}, indent=1), encoding="utf-8")
    return 0
