"""``models search / files / drafts / pull-file`` against a Hub that answers garbage (tests/garbage_hub.py, real HTTP
on 127.0.0.1): one error line and exit 2, never a traceback; the Hub's ids printed as plain, bounded text."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.errors import EngineError
from engine.models import hubnames
from tests.garbage_hub import KINDS, Garbage, GarbageHub
from tests.hub_server import hub_environment

COMMANDS = [["search", "qwen"], ["files", "acme/model-GGUF"], ["drafts", "acme/model-GGUF", "model-Q4_K_M.gguf"]]


@pytest.fixture
def garbage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Garbage]:
    g = Garbage()
    with GarbageHub(g) as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        yield g


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["models", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def error_line(code: int, out: str, err: str) -> str:
    lines = err.strip().splitlines()
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("error: "), (code, out, err)
    return lines[0]


def plain(text: str) -> bool:
    return not any(unicodedata.category(c).startswith("C") for c in text)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_a_garbled_answer_is_one_line_and_exit_2(garbage: Garbage, kind: str, argv: list[str],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    garbage.body = kind
    line = error_line(*run(argv, capsys))
    assert "answered something that is not its API's JSON" in line and "HF_ENDPOINT" in line


@pytest.mark.parametrize(("argv", "says"), [
    (["../../x", "f.gguf"], "not a repository id: '../../x'"),
    (["acme/model-GGUF", "../../f.gguf"], "not a file name inside a repository: '../../f.gguf'"),
    (["acme/model-GGUF", "/etc/passwd"], "not a file name"),
    (["acme/..", "f.gguf"], "not a repository id"),
])
def test_pull_file_refuses_a_path_for_a_name_before_making_a_folder(
        garbage: Garbage, tmp_path: Path, argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = sorted(tmp_path.rglob("*"))
    assert says in error_line(*run(["pull-file", *argv], capsys))
    assert sorted(tmp_path.rglob("*")) == before  # nothing was made, inside the store or outside it


def test_hub_ids_are_printed_plain_and_cut(garbage: Garbage, capsys: pytest.CaptureFixture[str]) -> None:
    garbage.body = "hostile-ids"
    code, out, _ = run(["search", "qwen"], capsys)
    (line,) = out.splitlines()
    assert code == 0 and plain(line) and line.startswith("evil/[2J]0;pwnednameforged line")
    repo = line.split("  ")[0]
    assert len(repo) == hubnames.MAX_SHOWN and repo.endswith("...")
    code, out, _ = run(["search", "qwen", "--json"], capsys)
    (hit,) = json.loads(out)["repositories"]
    assert code == 0 and plain(hit["repo"]) and len(hit["repo"]) == hubnames.MAX_SHOWN


@pytest.mark.parametrize(("text", "ok"), [
    ("Qwen/Qwen2.5-7B-Instruct-GGUF", True), ("bartowski/Llama-3.2-1B-Instruct-GGUF", True), ("a/b", True),
    ("../../x", False), ("acme", False), ("a/b/c", False), ("a/b--c", False), ("a/b..c", False), ("a/-b", False),
    ("a/b.", False), ("a/" + "n" * 96, True), ("a/" + "n" * 97, False), ("a/b\x1b[2J", False), ("a/ b", False),
])
def test_repository_ids_as_the_hub_spells_them(text: str, ok: bool) -> None:
    assert hubnames.is_repo_id(text) is ok
    if not ok:
        with pytest.raises(EngineError, match="not a repository id"):
            hubnames.repo_id(text)


def test_shown_drops_control_and_format_characters_and_cuts() -> None:
    assert hubnames.shown("a\x1b[1m\u202eb\r\n\x00c") == "a[1mbc"
    assert hubnames.shown("x" * 500) == "x" * (hubnames.MAX_SHOWN - 3) + "..."
    assert hubnames.count(True) == 0 and hubnames.count(-3) == 0 and hubnames.count("9") == 0
