#!/usr/bin/env bash
# The GPU check: from the repository root on the device machine, carry [".gpu"] (filled by installer/gpu/prepare.sh), where
# .gpu/ holds ../shared/gpu/llama-cpp-0.3.36-cuda13-sm90.tar.xz (site/: llama_cpp with the CUDA libs and the pure-Python
# packages the image lacks; bin/: llama.cpp's tools of the same build) and e2e.py beside this file.
# Every step is time-boxed; results land in $OUT as each ends. Budget: TOTAL_S (default 500 s).
set -uo pipefail
export PYTHONUNBUFFERED=1
G=$PWD/.gpu; OO=${OUT:-$G/out}; W=${WORK:-$(mktemp -d)}; O=$W/res; mkdir -p "$OO" "$O"
# at most 8 files come back: run.log and gpu.txt in $OUT, everything else in $OUT/results.tar.gz after every step
pack() { tar -czf "$OO/results.tar.gz" -C "$W" res; }
END=$(( $(date +%s) + ${TOTAL_S:-500} ))
left() { local l=$(( END - $(date +%s) )); echo $(( l < $1 ? (l > 5 ? l : 5) : $1 )); }
log() { pack 2>/dev/null; echo "[$(date +%T)] $*" | tee -a "$OO/run.log"; }
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv 2>&1 | tee "$OO/gpu.txt"
log "cores $(nproc), $(python3 --version)"
python3 -c "import tarfile,sys; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" "$G"/llama-cpp-*.tar.xz "$W" || { log "kit does not unpack"; exit 1; }
libdir() { find /usr/local /opt /usr/lib -name "$1" -print -quit 2>/dev/null | xargs -r dirname; }
export LD_LIBRARY_PATH="$W/site/llama_cpp/lib:/usr/local/nvidia/lib64:$(libdir 'libcublas.so.13*'):$(libdir 'libcudart.so.13*'):${LD_LIBRARY_PATH:-}"
export PYTHONPATH="$W/site:$PWD" SSD_CHAT_DATA_DIR="$W/data" HOME="$W/home"
mkdir -p "$W/home"
log "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
python3 -c "import llama_cpp as l; print('llama_cpp', l.__version__, 'gpu offload', l.llama_supports_gpu_offload()); print(l.llama_print_system_info().decode())" 2>&1 | tee -a "$OO/run.log"
ldd "$W/bin/llama-bench" | grep -i "not found" | tee -a "$OO/run.log"
TL=${TL:-160}; STEPS=${STEPS:-e2e,peers,e2e8,O,cpudraft}; on() { [[ ",$STEPS," == *",$1,"* ]]; }
T=$W/synth/synth-target.gguf; D=$W/synth/synth-draft.gguf
log "synthetic pair ($TL-layer target, 24-layer draft of Qwen2.5-0.5B's shape, F16)"
(timeout "$(left 120)" python3 -m engine.tiny.synthetic "$W/synth" --target-layers "$TL") 2>&1 | tee -a "$OO/run.log"
ls -la "$W/synth" | tee -a "$OO/run.log"

on e2e && { log "ours: every mode, both models on the GPU"
(GL=-1 DGL=-1 REPS=${E2E_REPS:-2} N=${E2E_N:-128} timeout "$(left 150)" python3 "$G/e2e.py" "$T" "$D" "$O/e2e-gpu.json") > "$O/e2e-gpu.log" 2>&1
tail -12 "$O/e2e-gpu.log" | tee -a "$OO/run.log"; }

on peers && { log "peers: llama-bench, llama-completion, llama-speculative-simple (same build, same pair)"
{
  timeout "$(left 60)" "$W/bin/llama-bench" -m "$T" -m "$D" -ngl 999 -fa 1 -p 0 -n 128 -r 3 -o md
  P="Write a Python function that merges two sorted lists into one sorted list, with a docstring and tests."
  for i in 1 2; do
    timeout "$(left 30)" "$W/bin/llama-completion" -m "$T" -ngl 999 -fa on -no-cnv -n 128 --temp 0 --top-k 1 --seed 42 -c 2048 -p "$P" 2>&1 | grep -E "eval time|prompt eval"
  done
  for k in 4 8; do for i in 1 2; do
    timeout "$(left 30)" "$W/bin/llama-speculative-simple" -m "$T" -md "$D" -ngl 999 -ngld 999 -fa on --spec-type draft-simple --spec-draft-n-max $k -n 128 --temp 0 --top-k 1 --seed 42 -c 2048 -p "$P" 2>&1 | grep -E "decoded|accept|n_draft|draft_n"
  done; done
} > "$O/peers.log" 2>&1
cat "$O/peers.log" | tee -a "$OO/run.log" | tail -30; }

on e2e8 && { log "ours: ar, sd, ssd at K 8, both on the GPU"
(GL=-1 DGL=-1 REPS=1 N=${E2E_N:-128} K=8 MODES=ar,sd,ssd timeout "$(left 60)" python3 "$G/e2e.py" "$T" "$D" "$O/e2e-gpu-k8.json") > "$O/e2e-gpu-k8.log" 2>&1
tail -7 "$O/e2e-gpu-k8.log" | tee -a "$OO/run.log"; }

on O && { log "scenario O (tiny models, 151,936-token rows) with both models on the GPU"
(timeout "$(left 120)" python3 -m engine bench --scenarios O --max-tokens ${O_N:-64} --repeats ${O_REPS:-2} --o-prompts 2 \
  --gpu-layers -1 --draft-gpu-layers -1 --out "$O/bench-O-gpu.json") > "$O/bench-O-gpu.log" 2>&1
tail -25 "$O/bench-O-gpu.log" | tee -a "$OO/run.log"; }

on cpudraft && { log "ours: draft on the CPU, target on the GPU"
(GL=-1 DGL=0 REPS=1 N=${CPU_N:-96} MODES=ar,sd,ssd,auto timeout "$(left 100)" python3 "$G/e2e.py" "$T" "$D" "$O/e2e-cpudraft.json") > "$O/e2e-cpudraft.log" 2>&1
tail -10 "$O/e2e-cpudraft.log" | tee -a "$OO/run.log"; }
log "done"
