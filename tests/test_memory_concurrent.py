"""Two processes keeping auto's measurements in one file at once: the file is always whole, nothing is left over."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

SAVES = 300  # per process; with one shared temporary name, about 1 in 100 saves renamed another's half-written file

CHILD = """
import json, logging, sys, time
from pathlib import Path
from engine.speculative import memory
from engine.speculative.costmodel import CostModel

path, folder, me, saves = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4])
warned = []
handler = logging.Handler()
handler.emit = lambda record: warned.append(record.getMessage())
logging.getLogger("engine.speculative.memory").addHandler(handler)
model = CostModel()
for _ in range(4):
    model.add_verify(1, 0.01 if me == "a" else 0.02)
    model.add_verify(5, 0.05)
(folder / f"ready-{me}").touch()
while not (folder / "go").exists():
    time.sleep(0.005)
damaged = 0
for _ in range(saves):
    memory.save(model, path)
    try:
        if json.loads(path.read_text(encoding="utf-8"))["version"] != memory.VERSION:
            damaged += 1
    except (ValueError, KeyError):
        damaged += 1
print(json.dumps({"damaged": damaged, "warned": warned[:3]}))
"""


def test_two_processes_saving_at_once_never_leave_a_half_written_file(tmp_path: Path) -> None:
    folder = tmp_path / "auto"
    folder.mkdir()
    path = folder / "machine.json"
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(tmp_path), me, str(SAVES)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in "ab"]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready-{me}").exists() for me in "ab"):
        assert time.monotonic() < deadline and all(c.poll() is None for c in children), "a saver did not start"
        time.sleep(0.01)
    (tmp_path / "go").touch()  # both save from here on
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        results.append(json.loads(out))
    assert results == [{"damaged": 0, "warned": []}] * 2
    assert [p.name for p in folder.iterdir()] == ["machine.json"]  # no temporary file left behind
    from engine.speculative import memory

    assert memory.load(path, split=False).verify  # a whole model, read back
