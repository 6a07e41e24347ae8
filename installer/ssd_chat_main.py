"""PyInstaller entry point for both executables: ``app.__main__.main`` handles ``--self-test`` before Qt."""

import sys

from app.__main__ import main

if __name__ == "__main__":
    sys.exit(main())
