#!/usr/bin/env bash
# On the accelerator machine (H200, nvcc + CMake + Python 3.12, no network), from the repository root:
#   bash installer/gpu/run_h200.sh            (budget: ~10 minutes; prepared by installer/gpu/prepare_carry.sh)
# 1. builds llama-cpp-python 0.3.36 with CUDA for sm_90 only from shared/gpu-carry (no downloads);
# 2. runs bench scenario O (tiny models, 151,936-token vocabulary) with both models on the GPU;
# 3. writes the synthetic pair (Qwen2.5-0.5B-shaped draft; target = its layers + small-residual layers, F16)
#    and runs the same measurement with target and draft on the GPU, then with the draft on the CPU.
# Results land in $OUT (default results/gpu); every step is time-boxed so the others still run.
set -uo pipefail
cd "$(dirname "$0")/../.."
CARRY=${CARRY:-shared/gpu-carry}
OUT=${OUT:-results/gpu}
WORK=${WORK:-/tmp/ssd-gpu}
mkdir -p "$OUT" "$WORK"
log() { echo "[$(date +%T)] $*" | tee -a "$OUT/run.log"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"

log "venv and wheels"
python3.12 -m venv "$WORK/venv" && . "$WORK/venv/bin/activate"
pip install -q --no-index --find-links "$CARRY/wheels" numpy gguf jinja2 tqdm platformdirs huggingface-hub \
  typing-extensions diskcache scikit-build-core pathspec packaging || { log "wheels missing"; exit 1; }

log "build llama-cpp-python (CUDA, sm_90)"
tar -xzf "$CARRY/llama-src.tar.gz" -C "$WORK"
export CMAKE_ARGS="-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF -DGGML_CUDA_FA_ALL_QUANTS=OFF \
 -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF"
export CMAKE_BUILD_PARALLEL_LEVEL=$(nproc)
timeout 420 pip install -q --no-index --no-build-isolation --no-deps "$WORK/llama_cpp_python-0.3.36" \
  > "$OUT/build.log" 2>&1 || { log "build failed or timed out (see build.log)"; tail -30 "$OUT/build.log"; exit 1; }
python -c "import llama_cpp as l; print('gpu offload:', l.llama_supports_gpu_offload())" | tee -a "$OUT/run.log"

export SSD_CHAT_DATA_DIR="$WORK/data"   # tiny models and caches; nothing downloaded
O="python -m engine bench --scenarios O --max-tokens 64 --repeats 1 --o-prompts 2"
log "scenario O, both models on the GPU"
timeout 120 $O --gpu-layers -1 --draft-gpu-layers -1 --out "$OUT/bench-O-gpu.json" || log "O on GPU failed"

log "synthetic pair"
timeout 150 python -m engine.tools.synthmodel "$WORK/synth" || log "synthetic pair failed"
S="$O --o-target $WORK/synth/synth-target.gguf --o-draft $WORK/synth/synth-draft.gguf --modes ar,sd,ssd,auto"
timeout 120 $S --gpu-layers -1 --draft-gpu-layers -1 --out "$OUT/bench-synth-gpu.json" || log "synth GPU failed"
timeout 120 $S --gpu-layers -1 --draft-gpu-layers 0 --paths auto,host --out "$OUT/bench-synth-gpu-cpudraft.json" \
  || log "synth CPU draft failed"
log "done"
