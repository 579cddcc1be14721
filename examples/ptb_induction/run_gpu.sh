#!/usr/bin/env bash
# The Tree Transformer at the paper's scale on one GPU, one detached run.sh per seed: run_gpu.sh --help
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)

usage() {
  cat << 'USAGE'
usage: examples/ptb_induction/run_gpu.sh [options] [DATA_DIR]

One run.sh per seed, all at once, at the paper's scale: run.sh --text ptb --model-size paper --diagonal zero
--optimiser authors --device cuda (10 layers x 512, 8 heads; Adam lr 1e-4 constant, 64-sentence batches), each
with its evaluation. It detaches (setsid) and returns at once (tail -f its log); seed K's output goes to
run_gpu.seedK.log:
  source bench/cuda/device_setup.sh && bash examples/ptb_induction/run_gpu.sh .window/data
It needs a GPU machine held for hours (bench/cuda/README.md): run.sh's evaluation runs on one CPU thread after
the training, and the checkpoints (100-420 MB each) stay on the machine.

DATA_DIR: passed to run.sh (default ../shared/data; on a GPU machine .window/data, bench/cuda/window.sh prepare).

options:
  --updates N       training updates per model (default 60000; the paper trains 60-100k)
  --seeds LIST      comma-separated seeds (default 1,2,3)
  --stop-hours H    caps each training run (fairseq-train --stop-time-hours; default 0.4)
  --log FILE        the detached job's log (default examples/ptb_induction/run_gpu.log)
  --foreground      run here, without detaching
  -h, --help        this text
USAGE
}
fail() {
  echo "examples/ptb_induction/run_gpu.sh: error: $*" >&2
  exit 2
}

UPDATES=60000 SEEDS=1,2,3 STOP_HOURS=0.4 LOG=$HERE/run_gpu.log FOREGROUND= DATA=
ARGS=("$@")
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --foreground) FOREGROUND=1; shift; continue ;;
    --updates|--seeds|--stop-hours|--log) [ $# -ge 2 ] || fail "$1 needs a value" ;;
    -*) fail "unknown option '$1' (--help lists them)" ;;
    *) [ -z "$DATA" ] || fail "one DATA_DIR only, not '$DATA' and '$1'"
       DATA=$1; shift; continue ;;
  esac
  case $1 in
    --updates) [[ $2 =~ ^[1-9][0-9]*$ ]] || fail "--updates must be a whole number above 0, not '$2'"; UPDATES=$2 ;;
    --seeds) [[ $2 =~ ^[0-9]+(,[0-9]+)*$ ]] || fail "--seeds must be numbers separated by commas, not '$2'"; SEEDS=$2 ;;
    --stop-hours) [[ $2 =~ ^[0-9]*\.?[0-9]+$ ]] || fail "--stop-hours must be a number of hours, not '$2'"
                  STOP_HOURS=$2 ;;
    --log) LOG=$2 ;;
  esac
  shift 2
done
data=$DATA  # run.sh's default when none is given
[ -n "$data" ] || data=$HERE/../../../shared/data
[ -d "$data" ] || fail "$data: no such folder (DATA_DIR, see --help)"

if [ -z "$FOREGROUND" ]; then
  # a session of its own (setsid, nohup): it outlives the shell that started it
  mkdir -p "$(dirname "$LOG")"
  setsid nohup bash "$0" --foreground "${ARGS[@]}" > "$LOG" 2>&1 < /dev/null &
  echo "started (pid $!); log: $LOG"
  exit 0
fi
start=$(date +%s)
for seed in ${SEEDS//,/ }; do
  bash "$HERE/run.sh" --text ptb --model-size paper --diagonal zero --optimiser authors --device cuda \
    --updates "$UPDATES" --stop-hours "$STOP_HOURS" --seed "$seed" ${DATA:+"$DATA"} \
    > "$HERE/run_gpu.seed$seed.log" 2>&1 &
done
wait
echo "done in $(( $(date +%s) - start )) s; RESULTS.md rewritten by the last run to finish"
