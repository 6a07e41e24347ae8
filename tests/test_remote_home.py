"""A remote target keeps its output layer here (engine.core.devices): a decode brings back each row's hidden state,
not its logits, and the rows read here equal a local load's. Real RPC server children on 127.0.0.1 and the tiny
models; the RPC client runs in a child, since any RPC failure aborts the process that holds the connection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.tiny.models import TinyPair
from tests.rpc_helpers import needs_rpc, rpc_server

pytestmark = [needs_rpc, pytest.mark.timeout(300)]

DECODES = """
import json, sys
import llama_cpp as ll
import numpy as np
from engine.core.backend import Model
from engine.core.context import Context, ContextParams
from engine.remote.proxy import DelayProxy
target, upstream, split = sys.argv[1], sys.argv[2], tuple(float(s) for s in sys.argv[3:])
host, port = upstream.rsplit(":", 1)
prompt = list(range(10, 30))
with DelayProxy((host, int(port)), 0.0) as px:
    local = Context(Model(target), ContextParams(n_ctx=256))
    model = Model(target, gpu_layers=-1, remote=(px.endpoint,), split=split)
    ctx = Context(model, ContextParams(n_ctx=256))
    ctx.decode_out(prompt, list(range(len(prompt))))
    local.decode_out(prompt, list(range(len(prompt))))
    down, same, gap = {}, True, 0.0
    for w in (1, 5, 5):
        batch, pos = list(range(40, 40 + w)), list(range(len(prompt), len(prompt) + w))
        ctx.seq_rm(0, len(prompt))
        local.seq_rm(0, len(prompt))
        before = px.counts()[1]
        out = ctx.decode_out(batch, pos, 0, list(range(w)))
        rows = np.stack([out.row(r).copy() for r in range(w)])
        down[w] = px.counts()[1] - before
        here = local.decode(batch, pos, 0, list(range(w)))
        same = same and bool((rows.argmax(axis=1) == here.argmax(axis=1)).all())
        gap = max(gap, float(np.abs(rows - here).max()))
    print(json.dumps({"down": down, "same": same, "gap": gap, "on_gpu": ctx.on_gpu, "n_vocab": model.n_vocab,
                      "n_embd": int(ll.llama_model_n_embd(model.ptr)), "remote": list(model.remote)}))
"""


def _decodes(tiny: TinyPair, endpoint: str, *split: str) -> dict[str, object]:
    r = subprocess.run([sys.executable, "-c", DECODES, str(tiny.target), endpoint, *split], capture_output=True,
                       text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    out: dict[str, object] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


@pytest.mark.parametrize("split", [(), ("1",)], ids=["by-free-memory", "tensor-split"])
def test_a_remote_decode_brings_back_hidden_states_not_logits(tiny: TinyPair, tmp_path: Path,
                                                              split: tuple[str, ...]) -> None:
    with rpc_server(tmp_path) as (endpoint, _proc):
        got = _decodes(tiny, endpoint, *split)
    n_embd, n_vocab = int(got["n_embd"]), int(got["n_vocab"])  # type: ignore[call-overload]
    down = {int(k): int(v) for k, v in got["down"].items()}  # type: ignore[attr-defined]
    row = 4 * n_embd  # one float32 hidden state
    assert n_vocab > 4 * n_embd  # so a logits row could not pass for a hidden state
    for width in (1, 5):
        assert width * row <= down[width] < width * row + 256, down  # the hidden states and a reply header
    assert got["on_gpu"] is False  # logits are made here, so rounds sample on the host path
    assert got["same"] is True, got["gap"]  # every row's best token equals a local load's
    assert len(got["remote"]) == 1  # type: ignore[arg-type]  # the proxy's endpoint: the target is remote


def test_a_local_gpu_keeps_room_for_the_targets_output_layer(tiny: TinyPair, tmp_path: Path) -> None:
    """The draft's auto layers on this machine's GPU leave the remote target's output layer and logits room."""
    from engine.core.options import AUTO_LAYERS
    from engine.core.placement import DRAFT_EXTRA, HEADROOM, Device, place_layers, read_size

    target, draft = read_size(tiny.target), read_size(tiny.draft_related)
    whole_draft = draft.bytes_for(draft.n_layers, 512 + DRAFT_EXTRA)
    home = target.head_bytes + target.compute_bytes
    with rpc_server(tmp_path) as (endpoint, _proc):
        def draft_layers(needed: int) -> int:
            free = int(needed / (1.0 - HEADROOM)) + 1  # placement keeps HEADROOM of the free memory unused
            return place_layers(tiny.target, tiny.draft_related, AUTO_LAYERS, AUTO_LAYERS, 512, Device(True, free),
                                remote=(endpoint,)).draft_layers
        assert draft_layers(whole_draft + home) == -1  # every draft layer, and the output layer beside them
        assert 0 <= draft_layers(whole_draft) < draft.n_layers  # the draft alone would fit, not with the output layer
