#!/usr/bin/env bash
# Run on a machine WITH network: fills shared/gpu-carry/ (ignored by git, carried to the GPU machine) with
#   - llama-cpp-python 0.3.36's source, trimmed (no models/, tests, docs, web UI, examples) -> llama-src.tar.gz
#   - the CPython 3.12 manylinux wheels the run needs (numpy, gguf, the build backend, the engine's imports)
# Target: <= 64 MiB in all (the device tool's carry limit). Prints the size at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
CARRY=shared/gpu-carry
mkdir -p "$CARRY/wheels"
tmp=$(mktemp -d)
python -m pip download --no-deps --no-binary :all: -d "$tmp" "llama-cpp-python==0.3.36"
tar -xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$tmp"
src="$tmp/llama_cpp_python-0.3.36"
v="$src/vendor/llama.cpp"
rm -rf "$v/models" "$v/docs" "$v/tests" "$v/examples" "$v/tools/server" "$v/.github" "$v/media" "$v/gguf-py" \
       "$v/scripts" "$v/grammars" "$v/prompts" "$v/benches" "$v/ci" "$v/pocs" "$src/examples" "$src/tests" "$src/docs"
mkdir -p "$v/examples" "$v/tests" && touch "$v/examples/CMakeLists.txt" "$v/tests/CMakeLists.txt"
# keep only the CUDA and CPU ggml backends
for b in "$v"/ggml/src/ggml-*/; do
  case "$(basename "$b")" in ggml-cuda|ggml-cpu) ;; *) [ -f "$b/CMakeLists.txt" ] && rm -rf "$b" && mkdir -p "$b" && echo "" > "$b/CMakeLists.txt";; esac
done
tar -czf "$CARRY/llama-src.tar.gz" -C "$tmp" llama_cpp_python-0.3.36
python -m pip download -d "$CARRY/wheels" --only-binary :all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  "numpy>=1.26" "gguf>=0.10" "jinja2>=3.1" "tqdm>=4.66" "platformdirs>=4.0" "huggingface-hub>=0.24" \
  "typing-extensions>=4.5" "diskcache>=5.6" "scikit-build-core[pyproject]>=0.9.2" pathspec packaging
rm -rf "$tmp"
du -sh "$CARRY"
