"""Scenario R's peer: llama.cpp's own ar through llama-cpp-python's high-level ``Llama`` over the same link (RPC
servers of their own, behind proxies with the same delay), greedy, on the engine's chat tokens.

llama-cpp-python does not build llama.cpp's speculative tools, so the peer is plain decoding. It runs in a child
process (:func:`main`, the job as JSON on stdin, the records as JSON on the last line of stdout): an RPC failure
aborts the process that holds the connection, and llama.cpp may keep a connection to the engine's servers until its
process ends. The child hosts its own proxies, so their counts cover its
replies alone. 0.3.36's ``Llama`` has no ``rpc_servers`` argument (its ``**kwargs`` take one and ignore it, and
the model loads here), so the child gives the model parameters the RPC devices, as the engine does.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from engine.errors import EngineError

PEER = "peer: llama.cpp ar (Llama, RPC)"
TIMEOUT_S = 3600  # the peer's whole run at one setting: its load (about 1 GB over the link) and every reply
WARM_TOKENS = 8  # the warm-up reply: the graph built and the weights paged in on the servers
CHILD = "import sys; from engine.bench.remote_peer import main; sys.exit(main())"  # not a tool of its own


def run_peer(ports: list[int], delay_ms: float, target: Path, prompts: list[tuple[str, list[int]]],
             warm: list[int], args: argparse.Namespace) -> list[dict[str, Any]]:
    """The peer's records on servers at ``ports``, through proxies adding ``delay_ms`` each way (made in the child)."""
    job = {"target": str(target), "ports": ports, "delay_ms": delay_ms, "ctx": args.ctx,
           "max_tokens": args.max_tokens, "prompts": prompts, "warm": warm}
    try:
        r = subprocess.run([sys.executable, "-c", CHILD], input=json.dumps(job), capture_output=True, text=True,
                           timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise EngineError(f"the peer (llama-cpp-python's Llama over RPC) did not finish within {TIMEOUT_S} s") from None
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise EngineError(f"the peer (llama-cpp-python's Llama over RPC) failed with exit status {r.returncode}: "
                          f"{(r.stderr or r.stdout)[-800:]}")
    records: list[dict[str, Any]] = json.loads(lines[-1])
    return records


def _load(target: str, endpoints: list[str], n_ctx: int) -> tuple[Any, ctypes.Array[ctypes.c_void_p]]:
    """``Llama`` with every layer on the RPC devices of ``endpoints`` (equal shares), one thread here; and the
    device array, which must live as long as the model."""
    import llama_cpp
    import llama_cpp.llama_cpp as ll

    from engine.native import rpc
    from engine.remote import parse_endpoint, relay

    devices = [d for ep in endpoints for d in relay.add_server(parse_endpoint(ep))]
    arr = rpc.device_array(devices)
    base = ll.llama_model_default_params

    def params() -> Any:
        mp = base()
        mp.devices = ctypes.addressof(arr)
        mp.use_extra_bufts = False  # only the embedding lookup runs here: no repacked CPU weights to fault on
        return mp

    ll.llama_model_default_params = params  # Llama asks for the defaults once, then sets its own fields on them
    try:
        llm = llama_cpp.Llama(model_path=target, n_gpu_layers=-1, n_threads=1, n_threads_batch=1, n_ctx=n_ctx,
                              tensor_split=[1.0] * len(devices) if len(devices) > 1 else None, verbose=False)
    finally:
        ll.llama_model_default_params = base
    return llm, arr


def _reply(llm: Any, tokens: list[int], max_tokens: int) -> dict[str, Any]:
    """One greedy reply as the engine's ar gives it: the end token stops it and is left out."""
    import llama_cpp.llama_cpp as ll

    t0 = time.perf_counter()
    first = last = t0
    out: list[int] = []
    decodes = 0  # target decodes: the prompt's, then one per token sampled after it (an end token included)
    for tok in llm.generate(list(tokens), top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        decodes += 1
        if ll.llama_vocab_is_eog(llm._model.vocab, tok):
            break
        last = time.perf_counter()
        if not out:
            first = last
        out.append(int(tok))
        if len(out) >= max_tokens:
            break
    decode_s = max(last - first, 1e-9)
    n = len(out)
    return {"mode": PEER, "tokens": out, "new_tokens": n, "decode_tokens": max(n - 1, 0), "decode_s": decode_s,
            "seconds": last - t0, "ttft_s": first - t0, "tokens_per_second": max(n - 1, 0) / decode_s,
            "rounds": max(decodes - 1, 0), "drafted": 0}


def main() -> int:
    from .remote_link import proxies, since, snapshot

    job = json.loads(sys.stdin.read())
    records = []
    with proxies(job["ports"], job["delay_ms"]) as links:
        llm, _devices = _load(job["target"], [p.endpoint for p in links], job["ctx"])
        _reply(llm, job["warm"], WARM_TOKENS)
        for pid, tokens in job["prompts"]:
            before = snapshot(links)
            rec = _reply(llm, tokens, job["max_tokens"])
            rec.update(since(links, before), prompt=pid)
            records.append(rec)
        llm.close()
    print(json.dumps(records), flush=True)
    return 0
