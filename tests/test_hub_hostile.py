"""Downloads from a Hub that lies about sizes, trickles, or loops (tests/hostile_hub.py, real HTTP on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import hub
from engine.models.hub import DownloadError, SizeMismatchError, TooSlowError
from engine.models.pace import RateFloor
from tests.hostile_hub import GIVE_UP_BYTES, Hostile, HostileHub
from tests.hub_server import hub_environment

REPO, FILE = "acme/hostile-GGUF", "model.gguf"
DECLARED = 256 << 10
# The floor the trickle test runs under: the trickle sends 5 bytes/s, far under it, for well over a window.
FLOOR = RateFloor(bps=1000.0, window_s=1.0)


@pytest.fixture
def hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Hostile]:
    h = Hostile(REPO, FILE, bytes(range(256)) * (DECLARED // 256))
    with HostileHub(h) as srv:
        hub_environment(monkeypatch, srv.url, str(tmp_path / "hf-home"))
        yield h


def partials(dest: Path) -> list[Path]:
    return list(dest.glob("*.incomplete"))


def test_an_endless_body_stops_at_the_first_byte_past_the_declared_size(hostile: Hostile, tmp_path: Path) -> None:
    dest = tmp_path / "dl"
    with pytest.raises(SizeMismatchError, match=r"sent more of model\.gguf than the 262,144 bytes it declared"):
        hub.download_file(REPO, FILE, dest_dir=dest)
    assert not partials(dest) and not (dest / FILE).exists()
    # the client hung up at once: what the server wrote is the file, a piece, and what the sockets buffered
    assert hostile.sent < GIVE_UP_BYTES // 2


def test_an_endless_206_stops_at_the_end_of_its_range(hostile: Hostile, tmp_path: Path) -> None:
    dest = tmp_path / "dl"
    dest.mkdir()
    partial = dest / f"{FILE}.{hostile.sha256[:16]}.incomplete"
    partial.write_bytes(hostile.data[: DECLARED // 2])
    with pytest.raises(SizeMismatchError, match="the server's size for it is wrong; the part downloaded was removed"):
        hub.download_file(REPO, FILE, dest_dir=dest)
    assert not partials(dest)
    assert hostile.sent < GIVE_UP_BYTES // 2


@pytest.mark.parametrize("body", ["short", "long"])
def test_a_body_of_another_size_says_the_server_is_wrong_and_removes_the_part(
    hostile: Hostile, tmp_path: Path, body: str
) -> None:
    hostile.body = body
    dest = tmp_path / "dl"
    with pytest.raises(SizeMismatchError) as err:
        hub.download_file(REPO, FILE, dest_dir=dest)
    assert "the server declared model.gguf as 262,144 bytes, then sent" in str(err.value)
    assert "resume" not in str(err.value) and not partials(dest)
    assert hostile.gets == 1  # nothing was written, nothing retried


def test_a_trickle_fails_by_the_rate_floor_and_keeps_the_part_for_a_resume(
    hostile: Hostile, tmp_path: Path
) -> None:
    hostile.body = "trickle"
    dest = tmp_path / "dl"
    with pytest.raises(TooSlowError, match=r"under the 1,000 bytes/s a download needs; run it again to resume"):
        hub.download_file(REPO, FILE, dest_dir=dest, floor=FLOOR)
    assert hostile.gets == 1  # failed within the first answer, not after the retries of a dropped connection
    (part,) = partials(dest)
    assert 0 < part.stat().st_size < 64 and hostile.data.startswith(part.read_bytes())


def test_a_redirect_loop_is_one_clear_error(hostile: Hostile, tmp_path: Path) -> None:
    hostile.body = "redirect"
    with pytest.raises(DownloadError, match=r"kept redirecting the download of model\.gguf") as err:
        hub.download_file(REPO, FILE, dest_dir=tmp_path / "dl")
    assert type(err.value) is DownloadError
    assert hostile.gets > 2

