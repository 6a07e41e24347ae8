#!/usr/bin/env bash
# Run on a machine that reaches PyPI: fills shared/gpu-carry/ (ignored by git; the device tool carries shared/)
# with what the accelerator machine lacks:
#   - llama-cpp-python 0.3.36's source, trimmed to what a CUDA + CPU build of the library reads
#     (no model vocabularies, docs, tests, tools, examples, web UI or other ggml backends) -> llama-src.tar.gz
#   - the pure-Python wheels its image does not hold (gguf, platformdirs, diskcache); numpy, jinja2, tqdm,
#     huggingface-hub, PyYAML, scikit-build-core, CMake and ninja are already there
#     (/work/.library/device/KINDS.md lists the image's packages)
# Target: the carry plus the working tree <= 64 MiB (the device tool's limit). Prints both sizes.
# Usage: bash installer/gpu/prepare_carry.sh [python]   (default: python3)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${1:-python3}
VERSION=0.3.36
CARRY=shared/gpu-carry
rm -rf "$CARRY" && mkdir -p "$CARRY/wheels"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip download -q --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==$VERSION"
tar -xzf "$tmp/llama_cpp_python-$VERSION.tar.gz" -C "$tmp"
src="$tmp/llama_cpp_python-$VERSION"
v="$src/vendor/llama.cpp"
rm -rf "$src/.git" "$src/examples" "$src/tests" "$src/docs" "$v/.github" "$v/.git"
for d in models docs tests examples tools app benches pocs ci media gguf-py scripts grammars prompts conversion skills \
         requirements licenses; do
  rm -rf "${v:?}/$d"
done
for b in "$v"/ggml/src/ggml-*/; do  # keep only the CUDA and CPU backends (the others are added only when enabled)
  case "$(basename "$b")" in ggml-cuda|ggml-cpu) ;; *) rm -rf "$b" ;; esac
done
tar -czf "$CARRY/llama-src.tar.gz" -C "$tmp" "llama_cpp_python-$VERSION"
"$PY" -m pip download -q --no-deps --only-binary :all: -d "$CARRY/wheels" "gguf>=0.10" "platformdirs>=4.0" "diskcache>=5.6"
du -sh "$CARRY"
echo "working tree that travels (tracked files and shared/):"
{ git ls-files -z | xargs -0 du -cb | tail -1; du -sb shared | tail -1; } | awk '{s += $1} END {printf "%.1f MiB\n", s / 1048576}'
