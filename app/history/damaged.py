"""Reading what can still be read from a damaged history file: a scan of each table, then one rowid at a time past
where the scan broke; a file whose header was overwritten is read with a rebuilt one."""

from __future__ import annotations

import logging
import shutil
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

Spec = dict[str, tuple[type, ...]]  # a table's columns, with the types each value may have
Columns = dict[str, Spec]
SCAN_PAST_LAST = 500  # rowids tried past the last readable one when the table's end is unreadable
MAGIC = b"SQLite format 3\x00"
PAGE_SIZES = (4096, 1024, 2048, 8192, 16384, 32768, 65536)
DEFAULTS: dict[str, dict[str, Any]] = {"messages": {"position": 0, "reasoning": ""},
                                      "versions": {"reasoning": ""}}  # columns older files lack


def read_tables(copy: Path, columns: Columns) -> dict[str, list[dict[str, Any]]]:
    """The readable rows of each known table; a file whose header is gone is read with a rebuilt one."""
    for attempt in _readable_copies(copy):
        db = sqlite3.connect(attempt)
        db.text_factory = lambda b: b.decode("utf-8", "replace")
        try:
            names = {str(r[0]) for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            log.info("salvage: %s unreadable as is (%s)", attempt.name, exc)
            db.close()
            continue
        try:
            return {t: _read_rows(db, t, columns[t]) for t in columns if t in names}
        finally:
            db.close()
    return {}


def _readable_copies(copy: Path) -> Iterator[Path]:
    """``copy`` cut to whole pages, or (if its header is not SQLite's) copies with a rebuilt header per page size.

    The header's page count is set to the pages the file has, so SQLite reports a page past the end
    as damage instead of reading it as zeros (a file cut short would otherwise yield rows whose
    text ends in NULs).
    """
    data = copy.read_bytes()
    if data[:16] == MAGIC:
        size = struct.unpack_from(">H", data, 16)[0]
        size = 65536 if size == 1 else size
        if size in PAGE_SIZES:
            pages = len(data) // size
            whole = bytearray(data[:pages * size])
            struct.pack_into(">I", whole, 28, pages)
            whole[92:96] = whole[24:28]  # the page count is valid for this change counter
            copy.write_bytes(bytes(whole))
        yield copy
        return
    if len(data) < 512:
        return
    wal = Path(f"{copy}-wal").exists()
    for size in PAGE_SIZES:
        if len(data) % size == 0 or size == PAGE_SIZES[0]:
            fixed = copy.with_name(f"header-{size}.sqlite3")
            pages = len(data) // size
            fixed.write_bytes(_header(size, pages, wal=wal) + data[100:pages * size])
            if wal:
                shutil.copyfile(f"{copy}-wal", f"{fixed}-wal")
            yield fixed


def _header(page_size: int, pages: int, *, wal: bool) -> bytes:
    """A standard 100-byte SQLite header (file format 3, UTF-8) for a file of ``pages`` pages."""
    h = bytearray(100)
    h[0:16] = MAGIC
    struct.pack_into(">H", h, 16, 1 if page_size == 65536 else page_size)
    h[18] = h[19] = 2 if wal else 1  # write and read versions: 2 = WAL
    h[21:24] = bytes((64, 32, 32))  # payload fractions, fixed by the format
    struct.pack_into(">IIIIIIIII", h, 24, 1, pages, 0, 0, 1, 4, 0, 0, 1)  # counter, size, freelist, cookie...
    struct.pack_into(">II", h, 92, 1, sqlite3.sqlite_version_info[0] * 1_000_000
                     + sqlite3.sqlite_version_info[1] * 1000 + sqlite3.sqlite_version_info[2])
    return bytes(h)


def _read_rows(db: sqlite3.Connection, table: str, spec: Spec) -> list[dict[str, Any]]:
    """Every row of ``table`` that can be read: a scan, then one rowid at a time past where it broke."""
    rows: dict[int, dict[str, Any]] = {}
    try:
        for row in _select(db, table, ""):
            rows[row["id"]] = row
        return _valid(table, rows, spec)
    except sqlite3.DatabaseError as exc:
        log.info("salvage: reading %s stopped after %d rows: %s", table, len(rows), exc)
    last = max(rows, default=0)
    for query in (f"SELECT seq FROM sqlite_sequence WHERE name = '{table}'", f"SELECT max(rowid) FROM {table}"):
        try:
            found = db.execute(query).fetchone()
        except sqlite3.DatabaseError:
            continue
        if found and isinstance(found[0], int):
            last = max(last, found[0])
    rowid, misses = 0, 0
    while rowid < last or misses < SCAN_PAST_LAST:
        rowid += 1
        if rowid in rows:
            misses = 0
            continue
        try:
            found_rows = list(_select(db, table, f" WHERE rowid = {rowid}"))
        except sqlite3.DatabaseError:
            found_rows = []
        for row in found_rows:
            rows[row["id"]] = row
        misses = 0 if found_rows else misses + 1
    return _valid(table, rows, spec)


def _select(db: sqlite3.Connection, table: str, where: str) -> Iterator[dict[str, Any]]:
    cur = db.execute(f"SELECT * FROM {table}{where} ORDER BY rowid")
    names = [d[0] for d in cur.description]
    for values in cur:
        yield dict(zip(names, values, strict=True))


def _valid(table: str, rows: dict[int, dict[str, Any]], spec: Spec) -> list[dict[str, Any]]:
    """Rows whose known columns hold values of the right type (a damaged page can yield odd ones)."""
    out = []
    for rowid in sorted(rows):
        row = {**DEFAULTS.get(table, {}), **rows[rowid]}
        zeroed = any(isinstance(v, str) and "\x00" in v for v in row.values())  # text from a zeroed page
        if not zeroed and all(isinstance(row.get(name), kinds) for name, kinds in spec.items()):
            out.append({name: row[name] for name in spec})
    return out
