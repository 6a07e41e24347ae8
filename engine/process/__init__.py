"""The engine in a process of its own: a native fault (SIGBUS, abort, the OOM killer) ends only that process.

``protocol`` states what crosses the boundary, ``child`` is the process itself, ``runner`` starts it and
notices its end, ``client`` (:class:`RemoteEngine`) offers the parent an Engine it uses as if it were
local, ``faults`` puts a child's end in words (shared with the CPU check's probe), ``abort`` hooks ggml's
abort. Design and picture: docs/how-it-works.md, "Processes".
"""

from .client import RemoteEngine, RemoteGeneration
from .protocol import EngineStopped

__all__ = ["EngineStopped", "RemoteEngine", "RemoteGeneration"]
