"""Remote machines: the target's layers on other machines' devices over llama.cpp's RPC backend.

:mod:`.endpoints` parses ``HOST:PORT`` lists, :mod:`.wire` asks a server who it is before llama.cpp
connects, :mod:`.native` is llama.cpp's RPC backend through ctypes, :mod:`.deadline` ends a process whose
remote went silent, :mod:`.server` is ``python -m engine rpc-server`` and :mod:`.proxy` a delaying TCP
relay for tests and the bench.
"""

from .endpoints import Endpoint, parse_endpoint, parse_endpoints
from .wire import RemoteError, ServerInfo, probe

# Ids a remote target's greedy row brings back over the link (llama.cpp's greedy chain also returns the row's
# 151,936 logits, 608 KB): the best id, with room for ties (the lowest id wins, as on the host path).
LINK_TOP = 4

__all__ = ["LINK_TOP", "Endpoint", "RemoteError", "ServerInfo", "parse_endpoint", "parse_endpoints", "probe"]
