#!/usr/bin/env bash
# Multi30k over seeds on one GPU: every system of the method registry (python3 -m fairseq_syntax.methods systems)
# trained with SEEDS (default "1 2 3") at the CPU recipe's settings (run.sh with DEVICE=cuda), JOBS runs sharing the
# GPU at a time; then each seed's runs are scored against the same seed's baselines, each system over its seeds
# (mean, sd, bootstrap over sentences and seeds against the baselines and its control: fairseq-syntax-score with
# comma-separated outputs), and RESULTS.md/.json regenerated with the CPU tables and the GPU one (one system over
# its seeds per row).
#
#   bash examples/multi30k/replicate_gpu.sh [OUT_DIR]     (OUT_DIR: prepare.sh's output, default examples/multi30k/work)
#
# It detaches itself (setsid) and returns at once with the log's path, so a short-lived shell can poll it:
#   tail -f examples/multi30k/runs-gpu/replicate.log
# A detached job dies with the machine: this is for a GPU machine held for hours (the whole grid is hours of GPU
# time). In a short window (a machine with a GPU for a short time, commands of at most 10 minutes) use step 4 of
# bench/cuda/window.sh instead: it trains the pending runs in the foreground and brings back their records.
# Run `source bench/cuda/device_setup.sh` first on an offline machine (fairseq and the fairseq-syntax commands).
# OUT_DIR/data-bin must exist: prepare.sh trains the parsers when their models are missing, about 4 CPU hours for
# the three of them (preprocess/RESULTS.md: 117 + 104 + 12 minutes on one thread, cut short of the recipe's epochs),
# then parses the source side (about 5 minutes on one thread for Multi30k's 29,000 lines: crf-con parses 111
# sentences a second, the tagger 766), applies BPE and binarizes.
# Runs cut short resume from their checkpoints when this is started again (run.sh's resume).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
OUT="${1:-$HERE/work}"
SEEDS="${SEEDS:-1 2 3}"
JOBS="${JOBS:-4}"
RUNS="${RUNS:-$HERE/runs-gpu}"
LOG="$RUNS/replicate.log"

source "$HERE/../common.sh"
detach "$LOG" "${BASH_SOURCE[0]}" "$@"

[ -d "$OUT/data-bin" ] || { echo "error: $OUT/data-bin: no data (run examples/multi30k/prepare.sh)" >&2; exit 1; }
SYSTEMS_ALL="${SYSTEMS:-$(python3 -m fairseq_syntax.methods systems 2> /dev/null)}"
start=$(date +%s)
echo "== $(date -u) replicate: seeds $SEEDS, $JOBS jobs at a time, systems: $(echo $SYSTEMS_ALL)"
for seed in $SEEDS; do
  for system in $SYSTEMS_ALL; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 5; done
    name="${system%%:*}"
    echo "== $(date -u) start $name seed $seed"
    DEVICE=cuda SEED="$seed" RUN_SUFFIX=".seed$seed" RUNS="$RUNS" SYSTEMS="$system" \
      bash "$HERE/run.sh" "$OUT" > "$RUNS/$name.seed$seed.out" 2>&1 &
  done
done
wait
echo "== $(date -u) every run trained and decoded; scoring each seed against its own baselines"
for seed in $SEEDS; do
  DEVICE=cuda SEED="$seed" RUN_SUFFIX=".seed$seed" RUNS="$RUNS" RESCORE=1 bash "$HERE/run.sh" "$OUT" > /dev/null
done
DEVICE=cuda RUNS="$RUNS" SYSTEMS="$SYSTEMS_ALL" SEEDS_ONLY="$SEEDS" bash "$HERE/run.sh" "$OUT"  # and RESULTS.md
echo "== $(date -u) done in $(( $(date +%s) - start )) s: $HERE/RESULTS.md"
