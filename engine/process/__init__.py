"""The engine in a process of its own: a native fault (SIGBUS, abort, the OOM killer) ends only that process.

``protocol`` states what crosses the boundary, ``child`` is the process itself, ``runner`` starts it and
notices its end, ``client`` (:class:`EngineProcess`) offers the parent an Engine it uses as if it were
local, ``generation`` reads a reply off the pipe a round at a time, ``faults`` puts a child's end in words
(shared with ``cpu_probe``, the CPU check's child); ggml's abort hook is :mod:`engine.native.abort`. Design
and picture: docs/how-it-works.md, "Processes".

Names are imported lazily: ``cpu_probe`` is imported by the engine's face, ahead of ``client``'s imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import EngineProcess
    from .generation import ProcessGeneration
    from .protocol import EngineStopped

_WHERE = {"EngineStopped": "protocol", "EngineProcess": "client", "ProcessGeneration": "generation"}

__all__ = ["EngineProcess", "EngineStopped", "ProcessGeneration"]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
