"""What the model manager says about pairs: the installed mark in the catalog, the files-check verdict."""

from __future__ import annotations

from engine import InstalledPair, PairSpec, installed_as


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
