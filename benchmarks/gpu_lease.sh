#!/usr/bin/env bash
# One short run on a lent GPU machine (issue 19): every step writes to $OUT as it ends, so a run
# cut short keeps what it finished; a step that fails is named in the log and the next still runs
# (the exit status is 1 then); at most 6 files come back, none over 16 MiB.
#
#   1. Sabatelli's CNN on the regression target (sabatelli_regression, bitmap768), full schedule
#      bounded to 2.5 min: a search evaluator for Lubeck's grid (config `checkpoint`), 100 s on
#      an H100 (26 min on 2 CPU cores, README);
#   2. benchmarks/gpu_full.py for the two 3-class networks (mlp_bitmap_3class, cnn_bitmap_3class),
#      the CNN's checkpoint kept for the grid too;
#   3. benchmarks/gpu.py: the loader against the step per encoder, and the MLP's speed-up over 2
#      CPU threads with both accuracies.
#
# Checkpoints come back without the optimizer's state (the evaluator reads the best model only):
# 6.5 MB instead of 26 for the CNN.
#
# Prepare here: a store with the two datasets (chess-pipeline --home H ingest ../shared/data/pgn;
# label --static; datasets sabatelli_3class sabatelli_regression --static), copied to a
# folder the working tree ignores (.gpu/store/datasets/{_schema.parquet,sabatelli_3class,
# sabatelli_regression}: 16 MB), and wheels of duckdb and chess for Python 3.12 in .whl/ (the
# README's GPU section). There: PY=python3 bash benchmarks/gpu_lease.sh, after installing the
# wheels. Variables: OUT (required), PY (python), STORE (.gpu/store), TINY (non-empty: a
# few thousand rows and one epoch each, to check the script on CPU).
set -uo pipefail
: "${OUT:?OUT: the folder the figures go to}"
PY=${PY:-python3}
S=${STORE:-.gpu/store}
L=$OUT/log.txt
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PYTHONUNBUFFERED=1
failed=()
step() {  # step NAME COMMAND...: its output into the log; a failed step is named, the next still runs
  echo "== $1" | tee -a "$L"
  local name=$1 t0
  t0=$(date +%s)
  shift
  if "$@" 2>&1 | tee -a "$L"; then
    echo "$name: $(( $(date +%s) - t0 )) s" | tee -a "$L"
  else
    echo "$name FAILED (exit ${PIPESTATUS[0]}) after $(( $(date +%s) - t0 )) s" | tee -a "$L"
    failed+=("$name")
  fi
}
strip() {  # checkpoint $1 -> $2 without the optimizer's state and the last epoch's weights
  "$PY" -c "import sys, torch
ck = torch.load(sys.argv[1], map_location='cpu', weights_only=False)
ck.pop('optimizer', None)
ck['model'] = {} if ck.get('best_model') else ck['model']
torch.save(ck, sys.argv[2])" "$1" "$2"
}
cnn_regression() {
  "$PY" -m training.train --store "$S" --dataset sabatelli_regression --model cnn --encoder bitmap768 \
    --batch-size 256 --device auto "${T[@]}" --out "$WORK/cnn_reg" &&
    strip "$WORK/cnn_reg/checkpoint.pt" "$OUT/cnn_bitmap_regression.pt"
}
full_3class() {  # gpu_full.py goes on past a model that fails: a missing JSON fails this step
  "$PY" benchmarks/gpu_full.py --home "$S" --out "$WORK/full" "${F[@]}" mlp_bitmap_3class cnn_bitmap_3class &&
    cp "$WORK/full/mlp_bitmap_3class.json" "$WORK/full/cnn_bitmap_3class.json" "$OUT"/ &&
    strip "$WORK/full/runs/cnn_bitmap_3class/checkpoint.pt" "$OUT/cnn_bitmap_3class.pt"
}
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || echo "no nvidia-smi"
  "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available())"
  echo "cores $(nproc)"; } 2>&1 | tee "$L"
if [ -n "${TINY:-}" ]; then
  T=(--max-train-rows 2000 --max-eval-rows 2000 --epochs 1); F=(--tiny); G=(--tiny)
else
  T=(--epochs 50 --patience 5 --max-minutes 2.5); F=(--minutes 1.5); G=(--batches 200 --rows 150000 --epochs 1)
fi
step "cnn on sabatelli_regression" cnn_regression
step "gpu_full 3-class" full_3class
step "gpu.py" "$PY" benchmarks/gpu.py --home "$S" "${G[@]}" --models mlp3 --json "$OUT/gpu.json"
if [ ${#failed[@]} -gt 0 ]; then
  echo "== failed: ${failed[*]}" | tee -a "$L"
  exit 1
fi
echo "== done" | tee -a "$L"
