#!/usr/bin/env bash
# Issue 20's GPU measurements in one command, detached so that the device tool's 10-minute limit per command does
# not cut them (the first H100 run was cut twice): on the lent machine, from the repository root,
#   source bench/cuda/device_setup.sh && bash bench/cuda/run_all.sh [OUT]      (OUT default bench/cuda/new)
# returns at once; poll `tail OUT/run_all.log`. In order:
#   1. tests/core/test_cuda.py: every model and variant (the one-hot mask bias too) gives on CUDA what it gives on
#      CPU (OUT/test_cuda.log);
#   2. bench/run.py --device cuda at the recipe size, every system and bench variant (transformer_syntax_mask
#      :one_hot among them) against fairseq's transformer on the same batches, 16/32/64 words (OUT/RESULTS.*);
#   3. the same at the papers' size, 6+6 layers, d=512, 8 heads (OUT/large/RESULTS.*).
# Progress lines go to the logs as they are measured, so bench/from_logs.py rebuilds a table from a cut run.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT="${1:-bench/cuda/new}"
source examples/common.sh
detach "$OUT/run_all.log" "$0" "$OUT"
start=$(date +%s)
echo "== $(date -u) $(python3 -c 'import torch; print(torch.cuda.get_device_name(), torch.__version__)')"
python3 -m pytest -q tests/core/test_cuda.py > "$OUT/test_cuda.log" 2>&1 || echo "test_cuda failed: $OUT/test_cuda.log"
tail -1 "$OUT/test_cuda.log"
echo "== $(date -u) benchmark, recipe size"
python3 bench/run.py --device cuda --out "$OUT" --work /tmp/benchwork --no-speed-options \
  --no-preprocess-throughput > "$OUT/bench.log" 2>&1 || echo "bench failed: $OUT/bench.log"
echo "== $(date -u) benchmark, 6+6 layers, d=512, 8 heads"
mkdir -p "$OUT/large"
python3 bench/run.py --device cuda --model-size large --out "$OUT/large" --work /tmp/benchwork \
  --no-speed-options --no-preprocess-throughput > "$OUT/large/bench.log" 2>&1 || echo "large failed"
echo "== $(date -u) done in $(( $(date +%s) - start )) s"
