"""A filesystem-style MCP server for the tests, written with the official SDK (in the manner of
@modelcontextprotocol/server-filesystem): `python tests/mcp_files_server.py FOLDER` lists and reads the files under
FOLDER over stdio, and refuses any path outside it."""

from __future__ import annotations

import sys
from pathlib import Path

from mcp.server.mcpserver import MCPServer

server = MCPServer("files")
ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else ".").resolve()


def inside(path: str) -> Path:
    """``path`` resolved, where it lies under the allowed folder (else a ValueError the call reports)."""
    p = (ROOT / path).resolve()
    if p != ROOT and ROOT not in p.parents:
        raise ValueError(f"{path} is outside the allowed folder {ROOT}")
    return p


@server.tool(description="List the files and folders in a directory (folders end with /).")
def list_directory(path: str) -> str:
    return "\n".join(f"{p.name}/" if p.is_dir() else p.name for p in sorted(inside(path).iterdir()))


@server.tool(description="Read the complete contents of a text file.")
def read_text_file(path: str) -> str:
    return inside(path).read_text(encoding="utf-8")


if __name__ == "__main__":
    server.run("stdio")
