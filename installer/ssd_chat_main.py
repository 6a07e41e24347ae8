"""PyInstaller entry point for both executables: ``app.__main__.main`` handles ``--self-test`` before Qt."""

import multiprocessing
import sys

if __name__ == "__main__":
    # First: a frozen executable started as the engine process (or the CPU check's probe) becomes that child here.
    multiprocessing.freeze_support()
    from app.__main__ import main

    sys.exit(main())
