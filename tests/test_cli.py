"""``python -m engine generate``: JSON output, streaming, and one-line errors with exit code 2."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from engine.cli.main import main
from tests.tiny_models import TinyPair, small_vocab, write_model


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "engine", *args], capture_output=True, text=True, timeout=120, check=False
    )


def gen_args(tiny: TinyPair, *extra: str, draft: Path | None = None) -> list[str]:
    return ["generate", "--target", str(tiny.target), "--draft", str(draft or tiny.draft_related),
            "--prompt", "Hello there", "--max-tokens", "24", "--ctx", "512", *extra]


def test_json_output_all_modes_agree(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    outs = {}
    for mode in ("ar", "sd", "ssd"):
        assert main([*gen_args(tiny, "--mode", mode, "--json")]) == 0
        outs[mode] = json.loads(capsys.readouterr().out)
    assert outs["sd"]["tokens"] == outs["ar"]["tokens"] == outs["ssd"]["tokens"]
    assert outs["ar"]["stats"]["hit_rate"] is None
    assert outs["sd"]["stats"]["hit_rate"] is None
    assert outs["ssd"]["stats"]["hit_rate"] is not None
    for key in ("tokens_per_second", "ttft_s", "rounds", "drafted", "accepted", "acceptance_rate",
                "mean_accepted", "hit_rate", "backup_uses"):
        assert key in outs["ssd"]["stats"]
    assert isinstance(outs["ssd"]["text"], str) and len(outs["ssd"]["tokens"]) == 24


def test_chat_and_streaming(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*gen_args(tiny, "--mode", "ssd", "--chat", "--system", "be brief")]) == 0
    cap = capsys.readouterr()
    assert cap.out.strip()
    assert "[ssd]" in cap.err and "tok/s" in cap.err


@pytest.mark.parametrize("mode", ["ar", "sd"])
def test_sampled_generation_is_seeded(tiny: TinyPair, capsys: pytest.CaptureFixture[str], mode: str) -> None:
    """Same seed, same output. (ssd draws its acceptance coins per served draft, and which draft
    is served depends on timing, so its samples are exact in distribution, not seed-reproducible.)"""
    args = gen_args(tiny, "--mode", mode, "--temperature", "0.8", "--top-p", "0.9", "--seed", "3", "--json")
    assert main(args) == 0
    first = json.loads(capsys.readouterr().out)["tokens"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] == first
    assert main([*args[:-2], "4", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tokens"] != first


def _error_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    return err[-1]


def test_missing_file(tiny: TinyPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    line = _error_line(capsys, gen_args(tiny, draft=tmp_path / "nope.gguf"))
    assert "not found" in line and "nope.gguf" in line


def test_not_gguf(tiny: TinyPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "notes.gguf"
    bad.write_text("this is a text file, not a model")
    assert "not a GGUF file" in _error_line(capsys, gen_args(tiny, draft=bad))


def test_truncated_gguf(tiny: TinyPair, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.gguf"
    data = tiny.target.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    line = _error_line(capsys, gen_args(tiny, draft=cut))
    assert "could not load" in line and "cut.gguf" in line


def test_truncated_gguf_in_subprocess_is_not_a_crash(tiny: TinyPair, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    data = tiny.target.read_bytes()
    cut.write_bytes(data[:1000])
    r = run_cli(*gen_args(tiny, draft=cut))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("error: ")


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda v: replace(v, tokens=[*v.tokens[:7], "zz", *v.tokens[8:]]), "token 7 differs"),
        (lambda v: replace(v, bos=2, eos=1), "BOS token differs"),
        (lambda v: replace(v, tokens=[*v.tokens, *[f"x{i}" for i in range(200)]],
                           scores=[*v.scores, *[-50.0] * 200], types=[*v.types, *[1] * 200]),
         "vocabulary sizes differ by 200"),
    ],
    ids=["token-text", "bos", "size"],
)
def test_vocab_mismatch_names_the_check(
    tiny: TinyPair, tmp_path: Path, capsys: pytest.CaptureFixture[str], change: object, expect: str
) -> None:
    draft = write_model(tmp_path / "draft.gguf", vocab=change(small_vocab()), seed=5)  # type: ignore[operator]
    argv = ["generate", "--target", str(tiny.small_target), "--draft", str(draft), "--prompt", "abc",
            "--max-tokens", "4", "--ctx", "128"]
    assert expect in _error_line(capsys, argv)


def test_prompt_longer_than_context(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    argv = gen_args(tiny, "--ctx", "64")
    argv[argv.index("Hello there")] = "word " * 600
    assert "context" in _error_line(capsys, argv)


@pytest.mark.parametrize(
    ("flag", "value", "expect"),
    [
        ("--temperature", "-1", "temperature"),
        ("--top-p", "1.5", "top-p"),
        ("--k", "0", "draft length K"),
        ("--max-tokens", "0", "max tokens"),
        ("--ctx", "10", "context length"),
        ("--fanout", "99", "fan-out"),
    ],
)
def test_out_of_range_parameters(
    tiny: TinyPair, capsys: pytest.CaptureFixture[str], flag: str, value: str, expect: str
) -> None:
    assert expect in _error_line(capsys, gen_args(tiny, flag, value))


def test_draft_required_for_speculation(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["generate", "--target", str(tiny.target), "--prompt", "hi", "--mode", "ssd"]
    assert "needs --draft" in _error_line(capsys, argv)


def test_bad_choice_is_usage_error(tiny: TinyPair, capsys: pytest.CaptureFixture[str]) -> None:
    assert "invalid choice" in _error_line(capsys, gen_args(tiny, "--mode", "fast"))
