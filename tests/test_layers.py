"""The engine's layers: every import runs down (or stays on its floor), and no two packages import each other; nor
do two modules of the engine or the app.

Floors, from the ground up; a module may import its own floor and those below it. The face (``engine/__init__.py``)
stands below the server, which imports the engine's names from it. The benches (engine/bench) and the simulators
(engine/sim) stand above the product's floors, so nothing of the product imports them; the command line (engine/cli)
stands on top. Read from the code's own imports (every one, also inside functions and under TYPE_CHECKING), as
text: nothing is imported or run.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FLOORS: tuple[tuple[str, ...], ...] = (
    ("engine.errors",),
    ("engine.native",),
    ("engine.remote",),
    ("engine.core",),
    ("engine.chat", "engine.models", "engine.tiny"),
    ("engine.speculative", "engine.config", "engine.batch"),
    ("engine.engine", "engine.prompts", "engine.generation", "engine.stats", "engine.modes", "engine.drafting"),
    ("engine.process",),
    ("engine",),
    ("engine.server",),
    ("engine.bench",),
    ("engine.sim",),
    ("engine.cli", "engine.__main__"),
)

# Imports that still run up, each with why; to be removed as the layout is finished (issue 60), never added to.
UPWARD: dict[tuple[str, str], str] = {}

# Packages on one floor that import each other, each with why (the same). An import in UPWARD closes a circle too:
# those are not counted twice.
CIRCLES: dict[frozenset[str], str] = {}

# Modules that import each other (through any chain of imports), each with why (the same).
MODULE_CIRCLES: dict[frozenset[str], str] = {}


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _exists(name: str) -> bool:
    base = ROOT.joinpath(*name.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _imports(path: Path) -> set[str]:
    """The engine modules ``path`` imports (``from engine import errors`` names the module engine.errors)."""
    module = _module(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                name = ".".join([*base, *([node.module] if node.module else [])])
            else:
                name = node.module or ""
            subs = [f"{name}.{a.name}" for a in node.names if _exists(f"{name}.{a.name}")]
            out.update(subs if subs and len(subs) == len(node.names) else [name, *subs])
    return {name for name in out if name == "engine" or name.startswith("engine.")}


def _unit(name: str) -> tuple[int, str]:
    """The floor a module stands on and the unit (package or module) it belongs to there."""
    best = max((u for floor in FLOORS for u in floor if name == u or name.startswith(u + ".")), key=len)
    return next(i for i, floor in enumerate(FLOORS) if best in floor), best


def _edges() -> dict[tuple[str, str], list[str]]:
    """(unit, unit it imports) -> the importing files."""
    edges: dict[tuple[str, str], list[str]] = {}
    for path in sorted((ROOT / "engine").rglob("*.py")):
        source = _unit(_module(path))[1]
        for target in sorted(_imports(path)):
            unit = _unit(target)[1]
            if unit != source:
                edges.setdefault((source, unit), []).append(f"{path.relative_to(ROOT)} -> {target}")
    return edges


def test_every_module_stands_on_a_floor() -> None:
    for path in (ROOT / "engine").rglob("*.py"):
        _unit(_module(path))  # max() of nothing raises: a new top-level module must be given a floor


def test_no_import_runs_up() -> None:
    up = {pair: files for pair, files in _edges().items() if _unit(pair[1])[0] > _unit(pair[0])[0]}
    assert sorted(set(up) - set(UPWARD)) == [], "\n".join(f for pair in set(up) - set(UPWARD) for f in up[pair])
    assert sorted(set(UPWARD) - set(up)) == [], "gone: strike these from UPWARD"


def test_no_two_packages_import_each_other() -> None:
    edges = {pair: files for pair, files in _edges().items() if pair not in UPWARD}  # those close circles of their own
    units = {u for pair in edges for u in pair}
    reach = {u: {b for a, b in edges if a == u} for u in units}
    changed = True
    while changed:
        changed = False
        for u in units:
            more = set().union(*(reach[v] for v in reach[u])) - reach[u]
            if more:
                reach[u] |= more
                changed = True
    circles = {frozenset({u, *(v for v in reach[u] if u in reach[v])}) for u in units if u in reach[u]}
    assert sorted(map(sorted, circles - set(CIRCLES))) == []
    assert sorted(map(sorted, set(CIRCLES) - circles)) == [], "gone: strike these from CIRCLES"


def _module_edges() -> dict[str, set[str]]:
    """Module -> the modules of the engine and the app it imports; a name taken from a package's face counts as an
    import of the module the face takes it from."""
    paths = {_module(p): p for top in ("engine", "app") for p in sorted((ROOT / top).rglob("*.py"))}
    faces = {name: {alias.asname or alias.name: _owner(paths, _source(name, node), alias.name)
                    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                    if isinstance(node, ast.ImportFrom) for alias in node.names}
             for name, path in paths.items() if path.name == "__init__.py"}
    edges: dict[str, set[str]] = {}
    for name, path in paths.items():
        out = edges.setdefault(name, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                out.update(_owner(paths, a.name, "") for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                source = _source(name if path.name == "__init__.py" else name.rpartition(".")[0], node)
                for alias in node.names:
                    target = _owner(paths, source, alias.name)
                    out.add(faces.get(target, {}).get(alias.name, target) if target == source else target)
        out.discard(name)
        out.intersection_update(n for n in paths if paths[n].name != "__init__.py")  # a face hands names on
    return edges


def _source(package: str, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` in ``package`` names."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    return ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])


def _owner(paths: dict[str, Path], source: str, name: str) -> str:
    """The module ``from source import name`` reads: the submodule ``name``, else ``source``."""
    return f"{source}.{name}" if f"{source}.{name}" in paths else source


def test_no_two_modules_import_each_other() -> None:
    edges = _module_edges()
    reach = {m: set(e) for m, e in edges.items()}
    changed = True
    while changed:
        changed = False
        for m in reach:
            more = set().union(*(reach.get(n, set()) for n in reach[m])) - reach[m]
            if more:
                reach[m] |= more
                changed = True
    circles = {frozenset({m, *(n for n in reach[m] if m in reach.get(n, set()))}) for m in reach if m in reach[m]}
    assert sorted(map(sorted, circles - set(MODULE_CIRCLES))) == []
    assert sorted(map(sorted, set(MODULE_CIRCLES) - circles)) == [], "gone: strike these from MODULE_CIRCLES"
