"""What the model manager says about pairs: the installed mark in the catalog, the files-check verdict, progress."""

from __future__ import annotations

from engine import DownloadProgress, InstalledPair, PairSpec, format_bytes, installed_as


def installed_status(spec: PairSpec, installed: list[InstalledPair], other: str) -> tuple[str, str]:
    """The catalog's Status cell and its tooltip: installed (under this id or as another pair), else ``other``."""
    pair = installed_as(spec, installed)
    if pair is None:
        return other, ""
    if pair.id == spec.id:
        return "installed", ""
    return f"installed as {pair.name}", f"The installed pair {pair.id} has these files: nothing to download."


def intact_text(count: int) -> str:
    """The verdict once every installed pair checked out."""
    if count == 0:
        return "No pairs are installed."
    return "The installed pair is intact." if count == 1 else f"All {count} installed pairs are intact."


def progress_text(p: DownloadProgress) -> str:
    """The download's progress line: the file, bytes so far of all, rate and time left."""
    eta = f" · {int(p.eta_s) // 60} min {int(p.eta_s) % 60:02d} s left" if p.eta_s else ""
    rate = f" · {format_bytes(p.rate_bps)}/s" if p.rate_bps else ""
    return f"{p.filename}: {format_bytes(p.done)} of {format_bytes(max(p.total, 1))}{rate}{eta}"
