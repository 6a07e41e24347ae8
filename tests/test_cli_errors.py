"""The command line's contract for bad input: one ``error:`` line on stderr and exit code 2, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli.main import main
from engine.core.options import DRAFT_THREADS, THREADS
from tests.cores import ALL_CORES
from tests.tiny_models import TinyPair


def one_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: "), err
    return err[0]


def test_prompt_bytes_that_are_not_utf8(tiny: TinyPair) -> None:
    """Real argv bytes: Python turns them into lone surrogates, which UTF-8 cannot encode."""
    for flag in ("--prompt", "--system"):
        argv = [sys.executable.encode(), b"-m", b"engine", b"generate", b"--target", bytes(tiny.target), b"--mode",
                b"ar", b"--chat", b"--prompt", b"hello", b"--max-tokens", b"4"]
        argv[argv.index(b"hello") if flag == "--prompt" else len(argv):] = (
            [b"caf\xe9 au lait", b"--max-tokens", b"4"] if flag == "--prompt" else [b"--system", b"\xff\xfe"])
        r = subprocess.run(argv, capture_output=True, timeout=120, check=False)
        err = r.stderr.decode("utf-8", "replace").strip().splitlines()
        assert r.returncode == 2, r.stderr
        assert len(err) == 1 and err[0].startswith(f"error: {flag} is not valid UTF-8 text"), err


def test_engine_refuses_text_that_is_not_utf8(tiny: TinyPair) -> None:
    from engine import Engine, EngineConfig, ParameterError

    with Engine(EngineConfig(str(tiny.target), None, n_ctx=128)) as eng:
        with pytest.raises(ParameterError, match="not valid UTF-8"):
            eng.tokenize("caf\udce9")
        with pytest.raises(ParameterError, match="not valid UTF-8"):
            eng.messages_tokens([{"role": "user", "content": "\ud800"}])


@pytest.mark.parametrize(("flag", "noun"), [("--threads", "target CPU threads"),
                                            ("--draft-threads", "draft CPU threads")])
def test_threads_beyond_the_machine(tiny: TinyPair, capsys: pytest.CaptureFixture[str], flag: str, noun: str) -> None:
    argv = ["generate", "--target", str(tiny.target), "--draft", str(tiny.draft_same), "--prompt", "hi", flag,
            "100000"]
    line = one_error(capsys, argv)
    cores = (THREADS if flag == "--threads" else DRAFT_THREADS).maximum
    assert cores == max(1, len(ALL_CORES))  # the machine's cores, read before this test process was held to one
    assert f"{noun} must be between 0 and {cores}" in line and "100000" in line


def test_unreadable_model_file(tiny: TinyPair, tmp_path: Path) -> None:
    """A real permission failure: root reads any file, so it drops its file-permission overrides."""
    locked = tmp_path / "locked.gguf"
    shutil.copy(tiny.target, locked)
    locked.chmod(0)
    cmd = [sys.executable, "-m", "engine", "generate", "--target", str(locked), "--mode", "ar", "--prompt", "hi"]
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv cannot be denied a read")
        caps = "-dac_override,-dac_read_search"
        cmd = ["setpriv", f"--inh-caps={caps}", f"--bounding-set={caps}", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2, r.stderr
    assert err == [f"error: cannot read the model file (Permission denied): {locked}"]


@pytest.mark.parametrize(
    ("content", "expect"),
    [
        ("[]", "expected an object with a list of pairs"),
        ('{"pairs": {"a": 1}}', "expected an object with a list of pairs"),
        ('{"pairs": [{"id": 1}]}', "pair 1 lacks an id, name, source or file path"),
        ('{"pairs": ["x"]}', "pair 1 lacks an id"),
        ('{"pairs": [{"id": "a", "name": "A", "source": "import", "target_path": "t", "draft_path": "d", '
         '"target_size": "big"}]}', "pair 1: target_size is not a number"),
        ("{not json", "unreadable"),
    ],
    ids=["list", "pairs-object", "id-number", "entry-string", "size-text", "not-json"],
)
def test_registry_of_the_wrong_shape(
    data_dir: Path, capsys: pytest.CaptureFixture[str], content: str, expect: str
) -> None:
    registry = data_dir / "models" / "registry.json"
    registry.parent.mkdir(parents=True)
    registry.write_text(content)
    for argv in (["models", "list", "--installed"], ["models", "check"], ["models", "remove", "a"]):
        line = one_error(capsys, argv)
        assert f"the model registry {registry}" in line and expect in line
    assert registry.read_text() == content  # left for the user to move aside


def test_a_write_the_file_system_refuses_is_one_line(
    tiny: TinyPair, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    monkeypatch.setenv("SSD_CHAT_DATA_DIR", str(blocker / "data"))  # a data folder inside a file
    line = one_error(capsys, ["models", "import", "--target", str(tiny.target), "--draft", str(tiny.draft_same)])
    assert line.startswith("error: the model registry") and "Not a directory" in line


def test_error_messages_stay_on_one_line() -> None:
    from engine.cli.help import one_line

    assert one_line("a\nb  c\r\nd") == "a b c d"
    assert one_line("caf\udce9") == "caf\\udce9"


def test_import_records_checksums_and_check_finds_a_changed_file(
    tiny: TinyPair, tmp_path: Path, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    target, draft = shutil.copy(tiny.target, mine), shutil.copy(tiny.draft_same, mine)
    assert main(["models", "import", "--target", str(target), "--draft", str(draft)]) == 0
    entry = json.loads((data_dir / "models" / "registry.json").read_text())["pairs"][0]
    from engine.models.offline import sha256_file

    assert (entry["target_sha256"], entry["draft_sha256"]) == (sha256_file(Path(target)), sha256_file(Path(draft)))
    capsys.readouterr()
    assert main(["models", "check"]) == 0
    assert "checksums and vocabularies ok" in capsys.readouterr().out
    with Path(draft).open("r+b") as f:  # same size, one byte changed deep in the weights
        f.seek(-100, os.SEEK_END)
        byte = f.read(1)
        f.seek(-100, os.SEEK_END)
        f.write(bytes([byte[0] ^ 0xFF]))
    assert main(["models", "check"]) == 1
    out = capsys.readouterr().out
    assert "FAILED" in out and "has SHA-256" in out and "changed since it was installed" in out
