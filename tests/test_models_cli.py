"""``python -m engine models ...`` end to end, against the local Hub server (engine/cli/models.py)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.cli import models
from engine.cli.main import build_parser, main
from tests.hub_server import HubServer, HubState, hub_environment
from tests.tiny_models import TinyPair

T_REPO, D_REPO, BAD_REPO = "acme/tiny-target-GGUF", "acme/tiny-draft-GGUF", "acme/tiny-small-GGUF"
T_FILE, D_FILE, BAD_FILE = "tiny-target-F32.gguf", "tiny-draft-F32.gguf", "tiny-small-F32.gguf"


def _entry(pair_id: str, target: tuple[str, str, bytes], draft: tuple[str, str, bytes]) -> dict[str, object]:
    def f(repo: str, name: str, data: bytes) -> dict[str, object]:
        return {"repo": repo, "filename": name, "size": len(data), "sha256": None, "quant": "F32"}

    return {
        "id": pair_id,
        "name": f"Tiny {pair_id}",
        "target": f(*target),
        "draft": f(*draft),
        "context_length": 2048,
        "licence": "mit",
        "ram_bytes": 10_000_000,
        "vram_bytes": 12_000_000,
    }


@pytest.fixture
def server(
    tiny: TinyPair, tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[HubState]:
    """The local Hub, a private data dir, and a catalog (SSD_CHAT_CATALOG) naming the server's files."""
    with HubServer() as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        t = (T_REPO, T_FILE, tiny.target.read_bytes())
        d = (D_REPO, D_FILE, tiny.draft_same.read_bytes())
        bad = (BAD_REPO, BAD_FILE, tiny.small_draft.read_bytes())
        for repo, name, data in (t, d, bad):
            srv.state.add(repo, name, data)
        catalog = tmp_path / "catalog.json"
        catalog.write_text(json.dumps({"pairs": [_entry("tiny", t, d), _entry("tiny-bad", t, bad)]}))
        monkeypatch.setenv("SSD_CHAT_CATALOG", str(catalog))
        yield srv.state


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["models", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_list_shows_the_bundled_catalog_with_fit(capsys: pytest.CaptureFixture[str], data_dir: Path) -> None:
    code, out, _ = run(["list"], capsys)
    assert code == 0
    assert "qwen2.5-coder-1.5b+0.5b  Qwen2.5-Coder 1.5B Instruct + 0.5B  (Q4_K_M + Q4_K_M" in out
    assert "llama3.1-8b+llama3.2-1b" in out and "qwen3-8b+0.6b" in out
    assert "free RAM" in out or "free VRAM" in out
    assert run(["list", "--installed"], capsys) == (0, "", "")


def test_pull_list_verify_remove(
    server: HubState, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(["pull", "tiny"], capsys)
    assert code == 0, err
    target = data_dir / "models" / "hub" / "acme--tiny-target-GGUF" / T_FILE
    draft = data_dir / "models" / "hub" / "acme--tiny-draft-GGUF" / D_FILE
    assert out.splitlines() == [f"target: {target}", f"draft: {draft}"]
    assert T_FILE in err or D_FILE in err  # the progress line

    code, out, _ = run(["list", "--installed"], capsys)
    assert code == 0
    assert out.splitlines()[0].startswith("tiny  [hub]  Tiny tiny  ")
    assert f"target: {target} (" in out and f"draft:  {draft} (" in out

    code, out, _ = run(["list"], capsys)
    assert "tiny  Tiny tiny  (F32 + F32" in out and "[installed]" in out

    assert run(["check"], capsys) == (0, "ok  tiny: checksums and vocabularies ok\n", "")

    draft.write_bytes(draft.read_bytes()[:-1] + b"\1")  # same size, one byte changed
    code, out, _ = run(["verify"], capsys)
    assert code == 1 and out.startswith("FAILED  tiny: draft tiny-draft-F32.gguf has SHA-256 ")

    assert run(["remove", "tiny"], capsys) == (0, "removed tiny\n", "")
    assert not target.exists() and not draft.exists()
    assert run(["list", "--installed"], capsys) == (0, "", "")


def test_pull_file_prints_the_path(
    server: HubState, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sha = hashlib.sha256(server.files[(T_REPO, T_FILE)]).hexdigest()
    code, out, _ = run(["pull-file", T_REPO, T_FILE, "--sha256", sha, "--quiet"], capsys)
    assert code == 0
    assert out == f"{data_dir / 'models' / 'hub' / 'acme--tiny-target-GGUF' / T_FILE}\n"

    code, out, _ = run(["pull-file", D_REPO, D_FILE, "--dest", str(tmp_path / "x"), "--quiet"], capsys)
    assert (code, out) == (0, f"{tmp_path / 'x' / D_FILE}\n")


def test_errors_are_one_line_and_exit_2(server: HubState, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["pull-file", T_REPO, "missing.gguf"], capsys)
    assert (code, out) == (2, "")
    assert one_error_line(err).endswith(
        "missing.gguf was not found in acme/tiny-target-GGUF on " + f"{os.environ['HF_ENDPOINT']} (HTTP 404)"
    )

    server.tokens[D_REPO] = "hf_abc"
    code, _, err = run(["pull-file", D_REPO, D_FILE], capsys)
    assert code == 2 and "(HTTP 401)" in one_error_line(err) and "HF_TOKEN" in err

    code, _, err = run(["pull-file", T_REPO, T_FILE, "--sha256", "00" * 32, "--quiet"], capsys)
    assert code == 2 and one_error_line(err).startswith("error: checksum mismatch for tiny-target-F32.gguf")

    code, _, err = run(["pull-file", T_REPO, T_FILE, "--sha256", "xyz"], capsys)
    assert code == 2 and one_error_line(err) == "error: not a SHA-256 (64 hex digits): 'xyz'"

    code, _, err = run(["pull", "no-such-pair"], capsys)
    assert code == 2 and one_error_line(err).startswith(
        "error: unknown pair 'no-such-pair'; known pairs: tiny, "
    )

    code, _, err = run(["pull", "tiny-bad", "--quiet"], capsys)
    assert code == 2
    assert one_error_line(err).startswith(
        f"error: {BAD_FILE} cannot be the draft for {T_FILE}: vocabulary sizes differ by 4080"
    )

    code, _, err = run(["remove", "tiny"], capsys)
    assert code == 2 and one_error_line(err).startswith("error: no installed pair 'tiny'")


def test_import_and_its_errors(tiny: TinyPair, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["import", "--target", str(tiny.target), "--draft", str(tiny.draft_same), "--name", "Mine"], capsys
    )
    assert (code, out) == (0, "imported local-target+draft-same: Mine\n")
    code, out, _ = run(["list", "--installed"], capsys)
    assert out.splitlines()[0].startswith("local-target+draft-same  [import]  Mine  ")
    assert f"target: {tiny.target.resolve()} (" in out

    code, out, err = run(["import", "--target", str(tiny.target), "--draft", str(tiny.small_draft)], capsys)
    assert (code, out) == (2, "")
    assert one_error_line(err).startswith(
        "error: small_draft.gguf cannot be the draft for target.gguf: vocabulary"
    )

    code, _, err = run(["import", "--target", "/nonexistent/t.gguf", "--draft", str(tiny.draft_same)], capsys)
    assert code == 2 and one_error_line(err) == "error: model file not found: /nonexistent/t.gguf"

    assert run(["remove", "local-target+draft-same"], capsys)[0] == 0
    assert tiny.target.is_file()


def test_offline_subcommand_is_still_registered() -> None:
    args = build_parser().parse_args(["models", "offline", "--quiet"])
    assert args.func is models.cmd_offline and args.quiet
