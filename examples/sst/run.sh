#!/usr/bin/env bash
# Stanford Sentiment Treebank (SST-5 and SST-2): the tiny hierarchical-accumulation classifier of Nguyen et al.
# (2020, Section 5.2: 2 layers, d = 64, 4 heads) against a plain Transformer classifier of the same size.
#
# Usage: examples/sst/run.sh [SST_DIR]    (SST_DIR holds train.txt(.gz) and dev.txt(.gz); default: $SHARED_DATA/sst,
# SHARED_DATA defaulting to ../shared/data beside the repository; on a GPU machine the copy that
# bench/cuda/window.sh prepare makes: SHARED_DATA=.window/data)
#
# Every run trains on CPU for at most --max-update updates or STOP_HOURS hours, one thread, niced, and logs to
# examples/sst/logs/NAME.log, gzipped (NAME.log.gz) once the run ends, and packed with the others into
# examples/sst/logs/packed.tar.xz (examples/pack_runs.py); a run whose log says it finished is
# skipped, and one whose packed log does not (cut short) must be unpacked to run again.
# RESULTS.md and RESULTS.json are then written from the logs by results.py. Settings follow the paper's Appendix 7.4
# (Adam, lr 7e-4, dropout 0.5, 2048-token batches) except the length of training: the paper trains 15k updates with
# 8000 warm-up updates (about 25 minutes a run here).
# LONG=1 adds the main comparison (Transformer vs the tree model trained on every node label) at that length, as
# runs NAME.15k. RUNS="NAME ..." does only the runs named (to train two at a time, one per core, from two shells).
# SEEDS="1 2 3" runs that comparison at that length once per seed instead (NAME.15k.seedK, all at once: meant for
# a GPU, DEVICE=cuda), and RESULTS.md gains the mean and sd over seeds.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SST=${1:-${SHARED_DATA:-$ROOT/../shared/data}/sst}
WORK=$HERE/work
LOGS=$HERE/logs
PACKED_RUNS=$ROOT/fairseq_syntax/evaluation/packed_runs.py  # reads the archive
PACK_RUNS=$ROOT/examples/pack_runs.py  # packs into it
MAX_UPDATE=${MAX_UPDATE:-3000}
STOP_HOURS=${STOP_HOURS:-0.22}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1

mkdir -p "$WORK" "$LOGS"
[ -f "$WORK/data/sst2/dict.txt" ] || python3 "$HERE/prepare.py" --sst "$SST" --out "$WORK/data"

DEVICE=${DEVICE:-cpu}
COMMON=(
  --user-dir "$ROOT/fairseq_syntax" --task tree_classification --criterion tree_cross_entropy
  $([ "$DEVICE" = cuda ] || echo --cpu)
  --optimizer adam --adam-betas "(0.9, 0.98)" --lr 7e-4 --lr-scheduler inverse_sqrt --warmup-updates 1000
  --dropout 0.5 --max-tokens 2048 --max-update "$MAX_UPDATE" --stop-time-hours "$STOP_HOURS"
  --no-save --log-format simple --log-interval 100 --seed 1 --num-workers 0
)
TRANSFORMER=(--arch transformer_classifier_tiny --input-form sequence --classifier-pooling mean)
HIER=(--arch transformer_hier_accum_classifier_tiny --input-form preorder --preterminals drop --classifier-pooling first)

run() {  # run NAME DATASET ARGS...
  local name=$1 dataset=$2
  shift 2
  local log="$LOGS/$name.log"
  if [ -n "${RUNS:-}" ] && [[ " $RUNS " != *" $name "* ]]; then
    return
  fi
  if [[ "$(python3 "$PACKED_RUNS" cat "$log" 2> /dev/null)" == *"done training"* ]]; then
    echo "$name: done already ($log, gzipped or packed)"
    return
  fi
  if python3 "$PACKED_RUNS" has --packed "$log"; then
    echo "$name: its packed log is of a run cut short; to run it again: python3 $PACK_RUNS unpack-folder $LOGS," \
      "then remove $log.gz" >&2
    return 1
  fi
  echo "$name: training, log in $log"
  rm -f "$log.gz"
  nice -n 10 fairseq-train "$WORK/data/$dataset" "${COMMON[@]}" "$@" > "$log" 2>&1
  gzip -n -f "$log"
}

pack_logs() {  # the finished runs' gzipped logs into logs/packed.tar.xz, with those packed before
  if compgen -G "$LOGS/*.log.gz" > /dev/null; then python3 "$PACK_RUNS" pack-folder "$LOGS"; fi
}

if [ -n "${SEEDS:-}" ]; then
  PAPER_LENGTH=(--max-update 15000 --warmup-updates 8000 --stop-time-hours 1.5)
  for seed in $SEEDS; do
    for dataset in sst5 sst2; do
      run "$dataset.transformer.15k.seed$seed" "$dataset" "${TRANSFORMER[@]}" "${PAPER_LENGTH[@]}" --seed "$seed" &
      run "$dataset.hier-nodes.15k.seed$seed" "$dataset" "${HIER[@]}" --node-labels "${PAPER_LENGTH[@]}" \
        --seed "$seed" &
    done
  done
  wait
  pack_logs
  python3 "$HERE/results.py" "$LOGS" --out "$HERE/RESULTS.md"
  exit 0
fi

run sst5.transformer sst5 "${TRANSFORMER[@]}"
run sst5.hier sst5 "${HIER[@]}"
run sst5.hier-nodes sst5 "${HIER[@]}" --node-labels
run sst5.hier-nodes-no-hier-embed sst5 "${HIER[@]}" --node-labels --no-hier-embed
run sst5.hier-nodes-no-subtree-mask sst5 "${HIER[@]}" --node-labels --no-subtree-mask
run sst2.transformer sst2 "${TRANSFORMER[@]}"
run sst2.hier sst2 "${HIER[@]}"
run sst2.hier-nodes sst2 "${HIER[@]}" --node-labels
if [ -n "${LONG:-}" ]; then
  PAPER_LENGTH=(--max-update 15000 --warmup-updates 8000 --stop-time-hours 1.5)  # later options override COMMON's
  run sst5.transformer.15k sst5 "${TRANSFORMER[@]}" "${PAPER_LENGTH[@]}"
  run sst5.hier-nodes.15k sst5 "${HIER[@]}" --node-labels "${PAPER_LENGTH[@]}"
  run sst2.transformer.15k sst2 "${TRANSFORMER[@]}" "${PAPER_LENGTH[@]}"
  run sst2.hier-nodes.15k sst2 "${HIER[@]}" --node-labels "${PAPER_LENGTH[@]}"
fi

pack_logs
python3 "$HERE/results.py" "$LOGS" --out "$HERE/RESULTS.md"
echo "wrote $HERE/RESULTS.md and RESULTS.json"
