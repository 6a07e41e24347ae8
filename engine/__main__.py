"""``python -m engine``: the engine's command line."""

from __future__ import annotations

import multiprocessing
import sys

from .cli.main import main

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen build's engine process starts through here (engine/process/faults.py)
    sys.exit(main())
