#!/usr/bin/env bash
# Measure a one-GPU planner profile in one step (under 10 minutes): scorer latency on CUDA (eager, compile,
# ort), vLLM generation, update, weight sync and contention, through `rlsim profile`.
#   benchmarks/gpu_profile.sh --dry-run                  # on any machine: checks every step's command and config
#   benchmarks/gpu_profile.sh --out configs/profiles/gpu_1x_measured.json
#   benchmarks/gpu_profile.sh --out /tmp/g.json --set repeats=1        # extra --set overrides go to rlsim profile
# Needs: an NVIDIA GPU (nvidia-smi), a CUDA torch, vLLM built for CUDA; ort is timed only when
# onnxruntime-gpu offers CUDAExecutionProvider (else it is dropped, and the profile says so).
# Writes the profile, a summary JSON beside it (wall time, fitted numbers) and the machine fingerprint
# inside the profile. The last stdout line is one JSON object.
set -euo pipefail
cd "$(dirname "$0")/.."

DRY=0
OUT=configs/profiles/gpu_1x_measured.json
CONFIG=configs/profiles/measure_gpu_1x.yaml
LIMIT_S=${GPU_PROFILE_LIMIT_S:-600}
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run) DRY=1; shift ;;
    --out) OUT="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    --set) EXTRA+=(--set "$2"); shift 2 ;;
    -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
    *) echo "gpu_profile.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
PY=${PYTHON:-python}
RLSIM=("$PY" -m rlsim)
SUMMARY="${OUT%.json}_summary.json"

step() { echo "[gpu_profile] $*" >&2; }

# 1. The machine: a GPU, CUDA torch, CUDA vLLM, and whether onnxruntime can run on CUDA.
if [[ $DRY -eq 1 ]]; then
  step "dry run: GPU checks skipped (would run: nvidia-smi; torch.cuda.is_available(); import vllm)"
  RUNTIMES_SET=()
else
  command -v nvidia-smi >/dev/null || { echo "gpu_profile.sh: no nvidia-smi: this needs an NVIDIA GPU" >&2; exit 2; }
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >&2
  "$PY" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
    || { echo "gpu_profile.sh: torch sees no CUDA device; install a CUDA build of torch" >&2; exit 2; }
  "$PY" -c "import vllm" \
    || { echo "gpu_profile.sh: vLLM is not importable; install vLLM built for CUDA" >&2; exit 2; }
  if "$PY" -c "import onnxruntime as o, sys; sys.exit(0 if 'CUDAExecutionProvider' in o.get_available_providers() else 1)" 2>/dev/null; then
    RUNTIMES_SET=()
  else
    step "onnxruntime has no CUDAExecutionProvider: timing eager and compile only (pip install onnxruntime-gpu for ort)"
    RUNTIMES_SET=(--set "runtimes=[eager,compile]")
  fi
fi

# 2. Every config the run will use, validated (loop configs included) before anything starts.
step "checking $CONFIG and its loop set"
"${RLSIM[@]}" profile "$CONFIG" --out "$OUT" --dry-run "${RUNTIMES_SET[@]}" "${EXTRA[@]}"

if [[ $DRY -eq 1 ]]; then
  step "dry run: would run: timeout $LIMIT_S ${RLSIM[*]} profile $CONFIG --out $OUT --summary $SUMMARY ${EXTRA[*]}"
  step "dry run: then: ${RLSIM[*]} plan configs/cluster_h100_example.yaml --set profiles.h100-8x-published=$(realpath -m "$OUT")"
  echo '{"gpu_profile": "dry-run", "config": "'"$CONFIG"'", "out": "'"$OUT"'", "ok": true}'
  exit 0
fi

# 3. The measurement, bounded: a run that would overshoot the budget is stopped rather than left running.
start=$(date +%s)
timeout "$LIMIT_S" "${RLSIM[@]}" profile "$CONFIG" --out "$OUT" --summary "$SUMMARY" "${RUNTIMES_SET[@]}" "${EXTRA[@]}"
wall=$(( $(date +%s) - start ))
step "measured in ${wall} s: $OUT (summary $SUMMARY)"
echo '{"gpu_profile": "measured", "out": "'"$OUT"'", "summary": "'"$SUMMARY"'", "wall_s": '"$wall"'}'
