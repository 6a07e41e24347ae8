#!/usr/bin/env bash
# On the accelerator machine (H200; its image has nvcc 13, CMake, ninja and Python 3.12 with numpy, jinja2, tqdm,
# huggingface-hub, PyYAML and scikit-build-core; no network), from the repository root:
#   bash installer/gpu/run_h200.sh            (budget: ~10 minutes; prepared by installer/gpu/prepare_carry.sh)
# 1. installs the carried wheels and builds llama-cpp-python 0.3.36 with CUDA for sm_90 only (no downloads);
# 2. runs bench scenario O (tiny models, 151,936-token vocabulary) with both models on the GPU;
# 3. writes the synthetic pair (Qwen2.5-0.5B-shaped draft; target = its layers + small-residual layers, F16)
#    and runs the same measurement with target and draft on the GPU, then with the draft on the CPU.
# Results land in $OUT (the device tool's folder there; default results/gpu) as each step ends; every step is
# time-boxed, and the whole run ends within TOTAL_S (570 s) so that what is done comes back.
# CUDA=off runs the same steps with a CPU build (a dry run where there is no GPU); BUILD_ONLY=1 stops after the build;
# EXTRA_CMAKE_ARGS adds CMake arguments (a compile-only dry run: where cuBLAS lives, when the toolkit lacks it).
set -uo pipefail
cd "$(dirname "$0")/../.."
CARRY=${CARRY:-shared/gpu-carry}
OUT=${OUT:-results/gpu}
WORK=${WORK:-/tmp/ssd-gpu}
CUDA=${CUDA:-on}
PY=${PY:-python3}
BUILD_S=${BUILD_S:-480}
END=$(( $(date +%s) + ${TOTAL_S:-570} ))  # the device call's limit is 600 s: stop in time to hand back $OUT
mkdir -p "$OUT" "$WORK"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/run.log"; }
budget() { local left=$(( END - $(date +%s) )); echo $(( left < $1 ? (left > 0 ? left : 1) : $1 )); }  # seconds for a step
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
log "$("$PY" --version), $(nproc) cores, CUDA=$CUDA"

log "carried wheels"
"$PY" -m pip install -q --no-index --no-deps --no-compile --target "$WORK/site" "$CARRY"/wheels/*.whl \
  || { log "wheels missing"; exit 1; }
export PYTHONPATH="$WORK/site${PYTHONPATH:+:$PYTHONPATH}"

log "build llama-cpp-python (CUDA=$CUDA, sm_90)"
rm -rf "$WORK/llama_cpp_python-0.3.36" && tar -xzf "$CARRY/llama-src.tar.gz" -C "$WORK"
export CMAKE_ARGS="-DGGML_CUDA=$CUDA -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF \
 -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF \
 -DLLAMA_BUILD_APP=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF ${EXTRA_CMAKE_ARGS:-}"
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
start=$(date +%s)
timeout "$(budget "$BUILD_S")" "$PY" -m pip install -v --no-index --no-build-isolation --no-deps --target "$WORK/site" \
  "$WORK/llama_cpp_python-0.3.36" > "$OUT/build.log" 2>&1 \
  || { log "build failed or timed out after $(( $(date +%s) - start )) s (build.log)"; tail -30 "$OUT/build.log"; exit 1; }
log "built in $(( $(date +%s) - start )) s"
"$PY" -c "import llama_cpp as l; print('llama_cpp', l.__version__, 'gpu offload:', l.llama_supports_gpu_offload())" \
  | tee -a "$OUT/run.log" || { log "llama_cpp does not import"; exit 1; }
[ "${BUILD_ONLY:-0}" = 1 ] && { log "build only: done"; exit 0; }

export SSD_CHAT_DATA_DIR="$WORK/data"   # tiny models and caches; nothing downloaded
O="$PY -m engine bench --scenarios O --max-tokens 64 --repeats 1 --o-prompts 2"
log "scenario O, both models on the GPU"
timeout "$(budget 120)" $O --gpu-layers -1 --draft-gpu-layers -1 --out "$OUT/bench-O-gpu.json" || log "O on GPU failed"

log "synthetic pair"
timeout "$(budget 150)" "$PY" -m engine.tools.synthmodel "$WORK/synth" || log "synthetic pair failed"
S="$O --o-target $WORK/synth/synth-target.gguf --o-draft $WORK/synth/synth-draft.gguf --modes ar,sd,ssd,auto"
timeout "$(budget 120)" $S --gpu-layers -1 --draft-gpu-layers -1 --out "$OUT/bench-synth-gpu.json" || log "synth GPU failed"
timeout "$(budget 120)" $S --gpu-layers -1 --draft-gpu-layers 0 --paths backend,host --out "$OUT/bench-synth-gpu-cpudraft.json" \
  || log "synth CPU draft failed"
log "done"
