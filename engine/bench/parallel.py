"""Bench P: 1, 2 and 4 concurrent streamed greedy chat requests against this project's server and llama.cpp's own
(``llama-server -np 4``, with and without its draft), one server at a time, the counts and servers interleaved.

Each request is timed from its send: the first content chunk (first-token latency) and the last; a stream's rate is
its tokens over its own time, the aggregate is every token over the wall time of the round. A reply is compared
with the same server's reply to the same prompt alone (``same_as_alone``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from engine import offline
from engine.core.options import cpu_cores
from engine.errors import EngineError

COUNTS = (1, 2, 4)  # concurrent streams; the bar is at 4
PLACES = 4  # every server is started with room for the largest count
READY_S = 600.0  # loading a pair (and our server's first CPU check) may take minutes on a loaded 2-core host
SERVER_ENV = "SSD_CHAT_LLAMA_SERVER"  # where llama.cpp's llama-server is, when not given and not on PATH


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[bytes], name: str) -> None:
    end = time.monotonic() + READY_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise EngineError(f"{name} exited with code {proc.returncode} before it was ready")
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise EngineError(f"{name} was not ready after {READY_S:.0f} s")


@contextmanager
def _server(name: str, argv: list[str], port: int, log: Path) -> Iterator[str]:
    url = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_ready(url, proc, name)
            yield url + "/v1"
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def servers(target: Path, draft: Path, peer: str, ctx: int, threads: int) -> dict[str, tuple[list[str], int]]:
    """Each server's command line and port: ours (``serve --parallel``, auto and ar) and llama.cpp's, alone and with its
    draft."""
    ours, ours_ar, plain, drafted = _port(), _port(), _port(), _port()
    llama = [peer, "-m", str(target), "-np", str(PLACES), "-c", str(ctx * PLACES), "-t", str(threads),
             "--host", "127.0.0.1", "--no-webui"]
    serve = [sys.executable, "-m", "engine", "serve", "--target", str(target), "--parallel", str(PLACES),
             "--ctx", str(ctx), "--any-model-name"]
    return {
        "ssd-chat": ([*serve, "--draft", str(draft), "--port", str(ours)], ours),
        # every reply in ar: alone too, so a reply beside others is its reply alone token for token
        "ssd-chat ar": ([*serve, "--mode", "ar", "--port", str(ours_ar)], ours_ar),
        "llama.cpp": ([*llama, "--port", str(plain)], plain),
        "llama.cpp+draft": ([*llama, "-md", str(draft), "--spec-draft-n-max", "4", "--port", str(drafted)], drafted),
    }


def _stream(base: str, question: str, max_tokens: int) -> dict[str, Any]:
    body = {"model": "any", "messages": [{"role": "user", "content": question}], "max_tokens": max_tokens,
            "temperature": 0, "stream": True, "stream_options": {"include_usage": True}}
    t0 = time.perf_counter()
    first = None
    parts: list[str] = []
    tokens = 0
    with httpx.stream("POST", base + "/chat/completions", json=body, timeout=600) as r:
        r.raise_for_status()
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            chunk = json.loads(line[6:])
            if chunk.get("usage"):
                tokens = int(chunk["usage"].get("completion_tokens") or 0)
            for choice in chunk.get("choices") or []:
                text = (choice.get("delta") or {}).get("content") or ""
                if text:
                    first = first if first is not None else time.perf_counter() - t0
                    parts.append(text)
    seconds = time.perf_counter() - t0
    tokens = tokens or len(parts)
    return {"text": "".join(parts), "tokens": tokens, "first_token_s": first, "seconds": seconds,
            "tok_s": tokens / seconds if seconds else 0.0}


def round_of(base: str, questions: list[str], max_tokens: int) -> dict[str, Any]:
    """Every question sent at once; the streams and the aggregate."""
    out: list[dict[str, Any]] = [{} for _ in questions]
    gate = threading.Barrier(len(questions))

    def one(i: int) -> None:
        gate.wait()
        out[i] = _stream(base, questions[i], max_tokens)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(questions))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    total = sum(s.get("tokens", 0) for s in out)
    return {"streams": out, "wall_s": wall, "aggregate_tok_s": total / wall if wall else 0.0}


def _questions() -> list[str]:
    data = json.loads(resources.files("resources").joinpath("bench_prompts.json").read_text(encoding="utf-8"))
    return [p["prompt"] for p in data][:PLACES]


def run(urls: dict[str, str], repeats: int, max_tokens: int) -> list[dict[str, Any]]:
    """Every (server, count) ``repeats`` times, the servers' order rotated per count and repeat."""
    questions = _questions()
    names = list(urls)
    rows: list[dict[str, Any]] = []
    for rep in range(repeats):
        for ci, count in enumerate(COUNTS):
            shift = (rep + ci) % len(names)
            for name in names[shift:] + names[:shift]:
                r = round_of(urls[name], questions[:count], max_tokens)
                rows.append({"server": name, "count": count, "repeat": rep, **r})
                print(f"  {name:16s} x{count}: {r['aggregate_tok_s']:.2f} tok/s aggregate", flush=True)
    return rows


def solo(urls: dict[str, str], max_tokens: int) -> dict[str, list[str]]:
    """Each server's reply to each question alone: what its replies beside others are compared with."""
    return {name: [_stream(url, q, max_tokens)["text"] for q in _questions()] for name, url in urls.items()}


def summarize(rows: list[dict[str, Any]], alone: dict[str, list[str]]) -> list[dict[str, Any]]:
    """One line per (server, count): mean aggregate and per-stream rates, worst first token, replies as alone."""
    out = []
    for name in dict.fromkeys(r["server"] for r in rows):
        base = None
        for count in COUNTS:
            mine = [r for r in rows if r["server"] == name and r["count"] == count]
            agg = sum(r["aggregate_tok_s"] for r in mine) / len(mine)
            streams = [s for r in mine for s in r["streams"]]
            base = agg if count == 1 else base
            firsts = [s["first_token_s"] for s in streams if s["first_token_s"] is not None]
            same = [s["text"] == alone[name][i] for r in mine for i, s in enumerate(r["streams"])]
            out.append({"server": name, "count": count, "aggregate_tok_s": agg,
                        "per_stream_tok_s": sum(s["tok_s"] for s in streams) / len(streams),
                        "vs_one_stream": agg / base if base else None,
                        "worst_first_token_s": max(firsts) if firsts else None,
                        "same_as_alone": f"{sum(same)}/{len(same)}"})
    return out


def print_table(lines: list[dict[str, Any]]) -> None:
    print(f"{'server':16s} {'streams':>7s} {'aggregate':>10s} {'per stream':>10s} {'vs 1':>6s} {'1st token':>9s} "
          f"{'as alone':>8s}")
    for ln in lines:
        print(f"{ln['server']:16s} {ln['count']:7d} {ln['aggregate_tok_s']:10.2f} {ln['per_stream_tok_s']:10.2f} "
              f"{ln['vs_one_stream']:6.2f} {ln['worst_first_token_s']:8.2f}s {ln['same_as_alone']:>8s}")


def cmd_parallel(args: argparse.Namespace) -> int:
    peer = args.peer_server or os.environ.get(SERVER_ENV) or shutil.which("llama-server")
    if not peer:
        raise EngineError(f"bench P needs llama.cpp's llama-server: pass --peer-server PATH or set {SERVER_ENV}")
    if args.target and args.draft:
        target, draft = Path(args.target), Path(args.draft)
    else:
        pair = offline.ensure_pair()
        target, draft = pair.target, pair.draft
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    threads = args.threads or cpu_cores()
    with ExitStack() as stack:
        urls = {name: stack.enter_context(_server(name, argv, port, out.with_suffix(f".{name}.log")))
                for name, (argv, port) in servers(target, draft, peer, args.ctx, threads).items()}
        alone = solo(urls, args.max_tokens)
        rows = run(urls, args.repeats or 2, args.max_tokens)
    lines = summarize(rows, alone)
    print_table(lines)
    out.write_text(json.dumps({"bench": "P", "target": str(target), "draft": str(draft), "threads": threads,
                               "summary": lines, "alone": alone, "rounds": rows}, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0
