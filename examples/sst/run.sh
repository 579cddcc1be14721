#!/usr/bin/env bash
# The SST recipe: `examples/sst/run.sh --help` says what it does and takes.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

usage() {
  cat << 'USAGE'
usage: examples/sst/run.sh [options] [SST_DIR]

Stanford Sentiment Treebank (SST-5 and SST-2): the tiny hierarchical-accumulation classifier of Nguyen et al.
(2020, Section 5.2: 2 layers, d = 64, 4 heads) against a plain Transformer classifier of the same size.
SST_DIR holds train.txt(.gz) and dev.txt(.gz) (default: ../shared/data/sst beside the repository; on a GPU machine
the copy that `bash bench/cuda/window.sh prepare` makes, .window/data/sst).

Every run trains for at most --max-update updates or --stop-hours hours, one thread, niced, and logs to
examples/sst/logs/NAME.log, gzipped (NAME.log.gz) once the run ends, and packed with the others into
examples/sst/logs/packed.tar.xz (examples/pack_runs.py); a run whose log says it finished is skipped, and one whose
packed log does not (cut short) must be unpacked to run again. RESULTS.md and RESULTS.json are then written from the
logs by results.py. Settings follow the paper's Appendix 7.4 (Adam, lr 7e-4, dropout 0.5, 2048-token batches)
except the length of training: the paper trains 15k updates with 8000 warm-up updates (about 25 minutes a run here).

options:
  --max-update N    updates per run (default 3000)
  --stop-hours H    hours per run at most (default 0.22)
  --long            add the main comparison (Transformer vs the tree model trained on every node label) at the
                    paper's length, as runs NAME.15k
  --runs LIST       only the runs named, comma-separated (to train two at a time, one per core, from two shells)
  --seeds LIST      run that comparison at the paper's length once per seed instead (comma-separated; runs
                    NAME.15k.seedK, all at once: meant for a GPU, --device cuda); RESULTS.md gains the mean and sd
                    over seeds
  --device cpu|cuda default cpu
  -h, --help        this text
USAGE
}
fail() {
  echo "examples/sst/run.sh: error: $*" >&2
  exit 2
}

SST=$ROOT/../shared/data/sst SST_GIVEN= MAX_UPDATE=3000 STOP_HOURS=0.22 LONG= RUNS= SEEDS= DEVICE=cpu
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --long) LONG=1; shift; continue ;;
    --max-update|--stop-hours|--runs|--seeds|--device) [ $# -ge 2 ] || fail "$1 needs a value" ;;
    -*) fail "unknown option '$1' (--help lists them)" ;;
    *) [ -z "$SST_GIVEN" ] || fail "one SST_DIR only, not '$SST_GIVEN' and '$1'"
       SST=$1 SST_GIVEN=$1; shift; continue ;;
  esac
  case $1 in
    --max-update) [[ $2 =~ ^[1-9][0-9]*$ ]] || fail "--max-update must be a whole number above 0, not '$2'"
                  MAX_UPDATE=$2 ;;
    --stop-hours) [[ $2 =~ ^[0-9]*\.?[0-9]+$ ]] || fail "--stop-hours must be a number of hours, not '$2'"
                  STOP_HOURS=$2 ;;
    --runs) [[ $2 =~ ^[^,[:space:]]+(,[^,[:space:]]+)*$ ]] || fail "--runs must be names separated by commas, not '$2'"
            RUNS=" ${2//,/ } " ;;
    --seeds) [[ $2 =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "--seeds must be numbers separated by commas, not '$2'"
             SEEDS=${2//,/ } ;;
    --device) [[ $2 =~ ^(cpu|cuda)$ ]] || fail "--device must be cpu or cuda, not '$2'"; DEVICE=$2 ;;
  esac
  shift 2
done
[ -z "$SEEDS" ] || [ -z "$LONG" ] || fail "--seeds replaces the runs of --long: give one of them"
WORK=$HERE/work
LOGS=$HERE/logs
PACKED_RUNS=$ROOT/fairseq_syntax/evaluation/packed_runs.py  # reads the archive
PACK_RUNS=$ROOT/examples/pack_runs.py  # packs into it
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # one thread per run, set for fairseq-train

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
  if [ -n "$RUNS" ] && [[ $RUNS != *" $name "* ]]; then
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

PAPER_LENGTH=(--max-update 15000 --warmup-updates 8000 --stop-time-hours 1.5)  # later options override COMMON's
# paper_length COMMAND SUFFIX ARGS...: the main comparison at the paper's length, NAME.15k[SUFFIX]
paper_length() {
  local command=$1 suffix=$2 dataset
  shift 2
  for dataset in sst5 sst2; do
    $command "$dataset.transformer.15k$suffix" "$dataset" "${TRANSFORMER[@]}" "${PAPER_LENGTH[@]}" "$@"
    $command "$dataset.hier-nodes.15k$suffix" "$dataset" "${HIER[@]}" --node-labels "${PAPER_LENGTH[@]}" "$@"
  done
}
# each COMMAND: COMMAND NAME DATASET ARGS... for every run of the options given
each() {
  local command=$1 seed dataset
  if [ -n "$SEEDS" ]; then
    for seed in $SEEDS; do paper_length "$command" ".seed$seed" --seed "$seed"; done
    return
  fi
  for dataset in sst5 sst2; do
    $command $dataset.transformer $dataset "${TRANSFORMER[@]}"
    $command $dataset.hier $dataset "${HIER[@]}"
    $command $dataset.hier-nodes $dataset "${HIER[@]}" --node-labels
    if [ $dataset = sst5 ]; then  # the ablations
      $command sst5.hier-nodes-no-hier-embed sst5 "${HIER[@]}" --node-labels --no-hier-embed
      $command sst5.hier-nodes-no-subtree-mask sst5 "${HIER[@]}" --node-labels --no-subtree-mask
    fi
  done
  if [ -n "$LONG" ]; then paper_length "$command" ""; fi
}
planned=()
plan() { planned+=("$1"); }
in_background() { run "$@" & }

# what can be known before any work: each run named by --runs is one of these options' runs; the corpus is there
each plan
for name in $RUNS; do
  [[ " ${planned[*]} " == *" $name "* ]] || fail "--runs: no run '$name' with these options (they are: ${planned[*]})"
done
if [ ! -f "$WORK/data/sst2/dict.txt" ] && [ ! -d "$SST" ]; then
  fail "$SST: no such folder (SST_DIR, see --help)"
fi
mkdir -p "$WORK" "$LOGS"
[ -f "$WORK/data/sst2/dict.txt" ] || python3 "$HERE/prepare.py" --sst "$SST" --out "$WORK/data"
if [ -n "$SEEDS" ]; then
  each in_background  # meant for a GPU: all at once
  wait
else
  each run
fi
pack_logs
python3 "$HERE/results.py" "$LOGS" --out "$HERE/RESULTS.md"
echo "wrote $HERE/RESULTS.md and RESULTS.json"
