"""Bench scenario R end to end on the tiny models: the target on one and on two real RPC servers (child processes
on 127.0.0.1) behind delaying proxies, every mode and the llama.cpp peer; skipped in a build without RPC."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from engine.bench.remote_peer import PEER
from engine.cli.main import main
from engine.tiny.models import TinyPair
from tests.rpc_helpers import needs_rpc

pytestmark = [pytest.mark.long, needs_rpc, pytest.mark.timeout(600)]

MODES = ("ar", "sd", "ssd", "lookup", "auto")
N = 12  # tokens per reply: a few rounds in every mode
SETTINGS = {(n, d) for n in (1, 2) for d in (0.0, 5.0)}
VOCAB_ROW = 4096 * 4  # one full logits row of the tiny target (4,096 float32 logits)


@pytest.fixture(scope="module")
def run(tiny: TinyPair, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, Any]]:
    """``bench --scenarios R`` once, in a child (an RPC failure aborts the process that holds the connection)."""
    out = tmp_path_factory.mktemp("bench-r") / "r.json"
    r = subprocess.run([sys.executable, "-m", "engine", "bench", "--scenarios", "R", "--target", str(tiny.target),
                        "--draft", str(tiny.draft_related), "--servers", "1,2", "--delays", "0,5", "--prompts", "2",
                        "--max-tokens", str(N), "--ctx", "512", "--out", str(out)],
                       capture_output=True, text=True, timeout=540, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout, json.loads(out.read_text(encoding="utf-8"))


def _records(result: dict[str, Any], n: int, delay: float) -> list[dict[str, Any]]:
    return [r for r in result["records"] if r["servers"] == n and r["delay_ms"] == delay]


def test_every_mode_and_the_peer_give_ars_tokens_on_one_and_two_servers(run: tuple[str, dict[str, Any]]) -> None:
    _, result = run
    assert {(r["servers"], r["delay_ms"]) for r in result["records"]} == SETTINGS
    ar_everywhere = {}
    for n, delay in SETTINGS:
        recs = _records(result, n, delay)
        assert sorted(r["mode"] for r in recs) == sorted([*MODES, PEER] * 2)  # two prompts
        ar = {r["prompt"]: r["tokens"] for r in recs if r["mode"] == "ar"}
        for r in recs:
            assert r["tokens"] == ar[r["prompt"]], (n, delay, r["prompt"], r["mode"])
            assert 0 < r["new_tokens"] <= N
        ar_everywhere[(n, delay)] = ar
    first = next(iter(ar_everywhere.values()))
    assert all(ar == first for ar in ar_everywhere.values())  # the split and the delay change no token


def test_the_table_has_a_row_for_every_setting_and_mode_and_the_peer(run: tuple[str, dict[str, Any]]) -> None:
    stdout, result = run
    rows = [line for line in stdout.splitlines() if line.startswith("| ") and not line.startswith("| servers")]
    assert rows == result["table"][2:]
    assert len(rows) == len(SETTINGS) * (len(MODES) + 1)
    for n, delay in SETTINGS:
        for mode in (*MODES, PEER):
            row = [c.strip() for c in next(r for r in rows if r.startswith(f"| {n} | {delay:g} ms | {mode} |"))
                   .strip("|").split("|")]
            assert row[-1] == "yes"  # same tokens as ar
            assert float(row[3]) > 0  # tok/s
            assert float(row[4]) > 0  # × ar
            if mode == "ar":
                assert row[4] == "1.00"
    assert any("the two servers, the engine and the draft share the same" in line for line in stdout.splitlines())


def test_bytes_are_counted_over_every_server_and_only_the_peer_fetches_whole_logits_rows(
        run: tuple[str, dict[str, Any]]) -> None:
    _, result = run
    for r in result["records"]:
        each = r["bytes_by_server"]
        assert len(each) == r["servers"]
        assert all(up > 0 and down > 0 for up, down in each), r  # every server took part in every reply
        assert [sum(x) for x in zip(*each, strict=True)] == [r["bytes_up"], r["bytes_down"]]
        assert r["rows"] == 1 + r["rounds"] + r["drafted"]
        per_row = r["bytes_down"] / r["rows"]
        if r["mode"] == PEER:  # llama.cpp's high-level path fetches the whole logits row of every decode
            assert per_row >= VOCAB_ROW
        else:  # the engine samples on the remote device and fetches what the sampler picked
            assert per_row < VOCAB_ROW / 4, r["mode"]


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--servers", "0", "--servers must be a comma list of whole numbers from 1, got '0'"),
    ("--servers", "one", "--servers must be a comma list of whole numbers from 1, got 'one'"),
    ("--delays", "5,-1", "--delays must be a comma list of milliseconds (0 or more), got '5,-1'"),
])
def test_a_bad_setting_is_said_in_one_line(tiny: TinyPair, capsys: pytest.CaptureFixture[str], option: str,
                                           value: str, said: str) -> None:
    code = main(["bench", "--scenarios", "R", "--target", str(tiny.target), "--draft", str(tiny.draft_related),
                 option, value])
    assert code == 2
    assert capsys.readouterr().err.strip() == f"error: {said}"
