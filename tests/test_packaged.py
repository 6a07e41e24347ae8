"""Every folder of Python code in app/ and engine/ is a package pyproject.toml lists, so a built wheel (and the
installer) carries it; an editable install finds a forgotten one anyway, which hides the omission."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _code_folders() -> set[str]:
    found: set[str] = set()
    for top in ("app", "engine"):
        for module in (ROOT / top).rglob("*.py"):
            if "__pycache__" not in module.parts:
                found.add(".".join(module.parent.relative_to(ROOT).parts))
    return found


def test_every_code_folder_is_a_listed_package_with_its_init() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    folders = _code_folders()
    assert sorted(folders - listed) == []
    assert [f for f in sorted(folders) if not (ROOT / f.replace(".", "/") / "__init__.py").is_file()] == []
