"""app/ uses the engine only through its public surfaces (``engine/__init__``, and ``engine.server``'s face for the
local server), never their submodules."""

from __future__ import annotations

import ast
from pathlib import Path

import engine
import engine.server

# Faces above engine/__init__ that the app may import as a module (``from engine import server``): name -> module.
FACES = {"server": engine.server}

APP = Path(__file__).resolve().parent.parent / "app"


def engine_imports() -> list[tuple[str, int, str, list[str]]]:
    """(file, line, module, names) for every import of the engine in app/."""
    found: list[tuple[str, int, str, list[str]]] = []
    for path in sorted(APP.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "engine":
                found.append((str(path.relative_to(APP)), node.lineno, node.module, [a.name for a in node.names]))
            elif isinstance(node, ast.Import):
                name = str(path.relative_to(APP))
                found += [(name, node.lineno, a.name, []) for a in node.names if a.name.startswith("engine")]
    return found


def test_app_imports_only_the_engines_public_names() -> None:
    imports = engine_imports()
    assert imports, "app/ no longer imports the engine at all?"
    assert any("/" in file for file, *_ in imports), "the walk no longer reaches app/'s subpackages"
    for file, line, module, names in imports:
        face = FACES.get(module.removeprefix("engine.")) if module.startswith("engine.") else None
        assert module == "engine" or face, f"{file}:{line} imports {module}"
        assert names, f"{file}:{line} imports {module} whole"
        exported = face.__all__ if face else [*engine.__all__, *FACES]
        for name in names:
            assert name in exported, f"{file}:{line} imports {module}.{name}, which that face does not export"


def test_no_module_of_the_app_or_the_engine_is_over_320_lines() -> None:
    sizes = {str(p): len(p.read_text(encoding="utf-8").splitlines())
             for root in (APP, APP.parent / "engine") for p in root.rglob("*.py")}
    assert max(sizes.values()) <= 320, {n: s for n, s in sizes.items() if s > 320}
