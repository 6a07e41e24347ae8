#!/usr/bin/env bash
# Puts the prebuilt CUDA kit (llama-cpp-python 0.3.36 for CUDA 13 / sm_90, with llama.cpp's tools of the same build)
# into .gpu/, which git ignores and the device tool carries (carry: [".gpu"]); building on the device does not fit.
# Usage: bash installer/gpu/prepare.sh [KIT_DIR]   (default: ../shared/gpu beside the repository)
set -euo pipefail
cd "$(dirname "$0")/../.."
KIT=${1:-../shared/gpu}
grep -qx "/.gpu/" .git/info/exclude 2>/dev/null || echo "/.gpu/" >> .git/info/exclude
mkdir -p .gpu
cp "$KIT"/llama-cpp-*-cuda*.tar.xz .gpu/
cp installer/gpu/run.sh installer/gpu/e2e.py .gpu/
du -sh .gpu
echo "tracked tree: $(git ls-files -z | du -ch --files0-from=- | tail -1 | cut -f1) (the device tool carries at most 64 MiB)"
