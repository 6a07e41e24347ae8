"""What the engine process costs per token: events per second through its pipe, and time per token against
the in-thread engine on scenario O's tiny models (a millisecond-scale decode, the real pair's vocabulary).

``python -m engine.bench.process [--tokens 96] [--repeats 6]`` prints both. The two engines are
loaded side by side and run the same greedy ``ar`` and ``sd`` prompts alternately; each figure is the
median over the runs of the time from the first token to the last, read where the caller reads it.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy as np

from engine.config import EngineConfig, GenerationParams
from engine.core.mode import Mode
from engine.core.sampling import SamplingParams
from engine.engine import Engine
from engine.process import EngineProcess
from engine.process import protocol as p
from engine.process.faults import spawn_context

from .overhead import tiny_pair

ROUND_MS = 3.0  # the round the target is stated at: an accelerator's short round, where overhead shows most
TARGET_SHARE = 0.02  # the bound on the added time per token at that round
FLOOD = 50_000  # events sent for the pipe's rate


def _flood(conn: Connection, n: int) -> None:  # pragma: no cover - runs in a child
    for i in range(n):
        conn.send(p.Round(1, i, (i,), (" word",), (bool(i & 1),), 0.0))  # a one-token round: ar's
    conn.send(p.Done(1, None))


def pipe_rate(n: int = FLOOD) -> float:
    """One-token rounds per second one child's pipe carries to a reading parent."""
    ctx = spawn_context()
    ours, theirs = ctx.Pipe()
    child = ctx.Process(target=_flood, args=(theirs, n))
    child.start()
    theirs.close()
    first = ours.recv()
    assert isinstance(first, p.Round)
    t0 = time.perf_counter()
    while not isinstance(ours.recv(), p.Done):
        pass
    rate = (n - 1) / (time.perf_counter() - t0)
    child.join()
    return rate


def per_token(engine: Any, prompt: list[int], params: GenerationParams) -> tuple[float, float, float]:
    """Milliseconds per token as the caller receives them (first token to last), CPU milliseconds per token of
    the engine's generating thread (sending included, in the engine process), and of the caller's process."""
    gen = engine.generate(prompt, params)
    first = last = 0.0
    n = 0
    cpu0 = time.process_time()
    for _ in gen:
        last = time.perf_counter()
        n += 1
        if n == 1:
            first, cpu0 = last, time.process_time()
    caller_cpu = time.process_time() - cpu0
    per = max(n - 1, 1)
    return 1000 * (last - first) / per, 1000 * (gen.stats.loop_cpu_s or 0.0) / per, 1000 * caller_cpu / per


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--repeats", type=int, default=6)
    ap.add_argument("--model-dir", help="where the tiny models are written (default: a temporary folder)")
    args = ap.parse_args(argv)
    rate = pipe_rate()
    print(f"pipe: {rate:,.0f} one-token rounds/s ({1e6 / rate:.1f} us an event)")
    with tempfile.TemporaryDirectory() as tmp:
        target, draft, source = tiny_pair(Path(args.model_dir or tmp))
        cfg = EngineConfig(str(target), str(draft), n_ctx=1024, threads=1, draft_threads=1, sampling_path="host")
        prompt = np.random.default_rng(0).integers(1000, 100_000, size=32).tolist()
        with Engine(cfg) as here, EngineProcess(cfg) as there:
            for mode in ("ar", "sd"):
                params = GenerationParams(mode=Mode(mode), max_tokens=args.tokens, sampling=SamplingParams())
                for eng in (here, there):  # warm-up
                    per_token(eng, prompt, params)
                runs: dict[str, list[tuple[float, float, float]]] = {"thread": [], "process": []}
                for rep in range(args.repeats):
                    order: list[tuple[str, Any]] = [("thread", here), ("process", there)]
                    for name, eng in order if rep % 2 == 0 else order[::-1]:
                        runs[name].append(per_token(eng, prompt, params))
                a, b = (tuple(statistics.median(r[i] for r in runs[k]) for i in range(3)) for k in runs)
                added, added_cpu = b[0] - a[0], b[1] - a[1]
                print(f"{mode} ({source} vocabulary), ms a token, in-thread / engine process: wall {a[0]:.3f} / "
                      f"{b[0]:.3f} (added {1000 * added:+.0f} us = {100 * added / ROUND_MS:+.2f} % of a "
                      f"{ROUND_MS:.0f} ms round); engine thread's CPU {a[1]:.3f} / {b[1]:.3f} (added "
                      f"{1000 * added_cpu:+.0f} us = {100 * added_cpu / ROUND_MS:+.2f} %); the parent's CPU with "
                      f"the engine process {b[2]:.3f} (target: added <= {100 * TARGET_SHARE:.0f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
