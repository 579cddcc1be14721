#!/usr/bin/env bash
# The steps of a short GPU window: `bash bench/cuda/window.sh --help` (below) says what each does and takes.
set -uo pipefail
CALLER=$PWD  # the paths given are relative to it; the script runs in the repository's root
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
# step 2's systems: those not measured on a GPU since their fixes, and the mask model with its new default
STEP2_ARCHS=transformer_syntax_mask,transformer_ldd,transformer_constituent,transformer_hier_accum

usage() {
  cat << 'USAGE'
usage: bash bench/cuda/window.sh prepare [--data DIR] [--window-dir DIR]  # before the window, on this machine
       bash bench/cuda/window.sh STEP OUTDIR [options]                    # on the GPU machine, STEP 1 to 4 in turn

The steps of a short window on a machine with one GPU (bench/cuda/README.md: what each brings back and how long it
takes). Each runs in the foreground, ends under 9 minutes by its own timeout (--step-seconds) and leaves at most 8
files in OUTDIR (its secondary logs as logs.tgz; more than 8 files: all of them as stepN.tgz); none reads the data
beside the repository (../shared), and none depends on a job that outlives it.

prepare: .devpkgs/ (fairseq for the offline machine: bench/cuda/make_devpkgs.sh, when missing) and .window/ (a copy
  of --data and the tree's commit); carry both with the working tree.
  1  set-up check (setup.txt), then tests/core/test_cuda.py (every system and `cuda_variants` entry against the CPU,
     fp16 and bf16 training) and the structure test's CUDA case (tests.log, tests.xml)
  2  bench/profile_step.py over one training step of every system at 64 words (profile.txt, profile.json), then
     bench/run.py at the recipe size for STEP2_ARCHS in this script or --archs (RESULTS.md, RESULTS.json,
     RESULTS.details.json.gz, bench.log), in --precision
  3  bench/run.py at the papers' size (6+6 layers, d=512) for every system or --archs, 16/32/64 words, rounds until
     the deadline (the same files), in --precision
  4  `fairseq-syntax-study run` of --study's pending runs, --jobs at once on the GPU, until the deadline; its
     data-bins made here from the committed parses and .window's text (status.txt; study-runs.tgz: the records,
     logs and decodes of the runs it finished, never checkpoints)
A step its timeout cut still leaves what it had; steps 2-3 rebuild RESULTS.* from bench.log (bench/from_logs.py)
when the benchmark did not finish.

options of prepare:
  --data DIR            the data to copy (default ../shared/data beside the repository)
  --window-dir DIR      where (default .window)
options of every step:
  --device cpu|cuda     default cuda; cpu with --tiny: the step's CPU dry run (tests/recipes/test_window.py)
  --tiny                tiny models, one short length, one round; in step 4 the study's first system, one seed,
                        one epoch
  --step-seconds N      the step's time limit (default 530)
  --window-dir DIR      what prepare made (default .window)
  --work DIR            data, checkpoints and scratch (default $TMPDIR/window-stepSTEP, TMPDIR default /tmp)
options of steps 2 and 3:
  --archs LIST          the systems, comma-separated (bench/run.py --list; default: step 2 STEP2_ARCHS, step 3 all)
  --precision P         fp32 (default), bf16 or fp16: fairseq's own --bf16 / --fp16 (bench/run.py --precision)
options of step 4:
  --study FILE          the study (default examples/multi30k/study-gpu.toml)
  --raw DIR             its raw corpus (default WINDOW_DIR/data/multi30k)
  --runs-dir DIR        where its records go (default runs-gpu/ beside the study file)
  --jobs N              runs at once on the GPU (default 8)
  -h, --help            this text
USAGE
}
fail() {
  echo "bench/cuda/window.sh: error: $*" >&2
  exit 2
}
# path PATH: PATH made absolute, relative to the caller's folder
path() {
  (cd "$CALLER" && realpath -m "$1")
}
# option OPTION: the steps OPTION is for ("prepare", "1 2 3 4", ...), empty for an unknown option
option() {
  case $1 in
    --data) echo prepare ;;
    --window-dir) echo "prepare 1 2 3 4" ;;
    --device|--tiny|--step-seconds|--work|--deadline) echo "1 2 3 4" ;;  # --deadline: from the step's outer run
    --archs|--precision) echo "2 3" ;;
    --study|--raw|--runs-dir|--jobs) echo 4 ;;
  esac
}

for arg in "$@"; do
  case $arg in -h|--help) usage; exit 0 ;; esac
done
[ $# -ge 1 ] || fail "give prepare or a step (1 to 4) and its OUTDIR (--help)"
STEP=$1
shift
case $STEP in
  prepare) ;;
  1|2|3|4) [ $# -ge 1 ] && [[ $1 != -* ]] || fail "step $STEP: give its OUTDIR (--help)"
           OUTDIR=$(path "$1"); shift ;;
  *) fail "'$STEP' is not prepare or a step (1 to 4) (--help)" ;;
esac
ARGS=()  # the options again, their paths absolute: for the step's inner run
DATA=$ROOT/../shared/data
WINDOW_DIR=$ROOT/.window DEVICE=cuda TINY= STEP_SECONDS=530 WORK= DEADLINE= ARCHS= PRECISION=fp32 STUDY= RAW=
RUNS_DIR= JOBS=8
while [ $# -gt 0 ]; do
  steps=$(option "$1")
  [ -n "$steps" ] || fail "unknown option '$1' (--help lists them)"
  [[ " $steps " == *" $STEP "* ]] || fail "$1 is not an option of ${STEP/#[1-4]/step $STEP} (--help)"
  if [ "$1" = --tiny ]; then TINY=1 ARGS+=(--tiny); shift; continue; fi
  [ $# -ge 2 ] || fail "$1 needs a value"
  value=$2  # as the inner run gets it: a path made absolute
  case $1 in --data|--window-dir|--work|--study|--raw|--runs-dir) value=$(path "$2") ;; esac
  case $1 in
    --data) DATA=$value ;;
    --window-dir) WINDOW_DIR=$value ;;
    --device) [[ $2 =~ ^(cpu|cuda)$ ]] || fail "--device must be cpu or cuda, not '$2'"; DEVICE=$2 ;;
    --step-seconds) [[ $2 =~ ^[1-9][0-9]*$ ]] || fail "--step-seconds must be a whole number above 0, not '$2'"
                    STEP_SECONDS=$2 ;;
    --work) WORK=$value ;;
    --deadline) [[ $2 =~ ^[0-9]+$ ]] || fail "--deadline must be a time in seconds since 1970, not '$2'"; DEADLINE=$2 ;;
    --archs) [[ $2 =~ ^[^,[:space:]]+(,[^,[:space:]]+)*$ ]] || fail "--archs must be names and commas, not '$2'"
             ARCHS=$2 ;;
    --precision) [[ $2 =~ ^(fp32|bf16|fp16)$ ]] || fail "--precision must be fp32, bf16 or fp16, not '$2'"
                 PRECISION=$2 ;;
    --study) STUDY=$value ;;
    --raw) RAW=$value ;;
    --runs-dir) RUNS_DIR=$value ;;
    --jobs) [[ $2 =~ ^[1-9][0-9]*$ ]] || fail "--jobs must be a whole number above 0, not '$2'"; JOBS=$2 ;;
  esac
  [ "$1" = --deadline ] || ARGS+=("$1" "$value")
  shift 2
done
[ "$PRECISION" != fp16 ] || [ "$DEVICE" = cuda ] || fail "--precision fp16 needs --device cuda (fairseq's --fp16)"

prepare() {
  [ -d .devpkgs ] || bash bench/cuda/make_devpkgs.sh
  local shared=$DATA
  [ -d "$shared" ] || { echo "error: $shared: no data to copy (give --data DIR)" >&2; exit 1; }
  rm -rf "$WINDOW_DIR"
  mkdir -p "$WINDOW_DIR"
  cp -rL "$shared" "$WINDOW_DIR/data"
  chmod -R u+w "$WINDOW_DIR"
  { git rev-parse HEAD 2> /dev/null || echo "not a git checkout"; git status --short 2> /dev/null | head -50; } \
    > "$WINDOW_DIR/commit.txt"
  du -sh .devpkgs "$WINDOW_DIR"
  echo "carry: .devpkgs .window (64 MiB in all, with the working tree)"
}
if [ "$STEP" = prepare ]; then
  prepare
  exit 0
fi
mkdir -p "$OUTDIR/logs"
LOGS=$OUTDIR/logs

# pack: the secondary logs as one logs.tgz; if more than 8 files are left, all of them in one step$STEP.tgz
pack() {
  if [ -n "$(ls -A "$LOGS" 2> /dev/null)" ]; then
    tar czf "$OUTDIR/logs.tgz" -C "$OUTDIR" logs
  fi
  rm -rf "$LOGS"
  local files
  files=$(find "$OUTDIR" -maxdepth 1 -type f | wc -l)
  if [ "$files" -gt 8 ]; then
    (cd "$OUTDIR" && tar czf "../step$STEP.tgz.$$" ./* && rm -rf ./* && mv "../step$STEP.tgz.$$" "step$STEP.tgz")
  fi
}

if [ -z "$DEADLINE" ]; then
  # the step itself runs again under one timeout, told its deadline; packing happens here, after it, whatever it left
  started=$(date +%s)
  timeout -k 10 $((STEP_SECONDS + 15)) bash "${BASH_SOURCE[0]}" "$STEP" "$OUTDIR" "${ARGS[@]}" \
    --deadline $((started + STEP_SECONDS)) 2>&1 | tee "$LOGS/window.log"
  rc=${PIPESTATUS[0]}
  pack
  echo "== step $STEP: exit $rc after $(($(date +%s) - started)) s; $OUTDIR: $(ls "$OUTDIR" | tr '\n' ' ')"
  exit "$rc"
fi

# seconds left before the step's deadline, less RESERVE (default 10) for what follows
left() {
  local seconds=$((DEADLINE - $(date +%s) - ${1:-10}))
  [ "$seconds" -gt 1 ] && echo "$seconds" || echo 1
}
# within COMMAND...: COMMAND under a timeout that ends it RESERVE seconds before the deadline (first argument)
within() {
  local reserve=$1
  shift
  timeout -k 5 "$(left "$reserve")" "$@"
}
# within_at_most SECONDS COMMAND...: COMMAND under a timeout of SECONDS, or less where the step's deadline comes first
within_at_most() {
  local most=$1 seconds
  shift
  seconds=$(left 10)
  [ "$seconds" -gt "$most" ] && seconds=$most
  timeout -k 5 "$seconds" "$@"
}
say() {
  echo "== $(date -u +%H:%M:%S) step $STEP: $*"
}

# fairseq: installed here (the CPU dry run), or from .devpkgs (the offline GPU machine; built once per machine)
if ! python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("fairseq") is None)'; then
  [ -d .devpkgs ] || { echo "error: no fairseq and no .devpkgs/ (bash bench/cuda/window.sh prepare; carry it)" >&2; exit 1; }
  source bench/cuda/device_setup.sh
fi
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
[ -n "$WORK" ] || WORK=${TMPDIR:-/tmp}/window-step$STEP
mkdir -p "$WORK"

step1() {
  say "set-up check"
  (
    # 14 s on an H100; the CPU dry run under load takes minutes, and then has the time: the step less 400 s for tests
    within_at_most $((STEP_SECONDS > 520 ? STEP_SECONDS - 400 : 120)) python3 bench/cuda/setup_check.py --device "$DEVICE"
    rc=$?
    [ -f "$WINDOW_DIR/commit.txt" ] && { echo "tree prepared at commit:"; cat "$WINDOW_DIR/commit.txt"; }
    command -v nvidia-smi > /dev/null && nvidia-smi
    exit $rc
  ) > "$OUTDIR/setup.txt" 2>&1 || { cat "$OUTDIR/setup.txt"; return 1; }
  grep -E "^(python|device|fairseq |commands)" "$OUTDIR/setup.txt"
  say "CUDA equality tests"
  # on a CPU (the dry run) every one of them is collected and skipped: tests.xml still names them all
  within 5 python3 -m pytest -q -rs -s -p no:cacheprovider --junitxml="$OUTDIR/tests.xml" tests/core/test_cuda.py \
    "tests/core/test_structure.py::test_cuda_gives_the_same_results_as_cpu" > "$OUTDIR/tests.log" 2>&1
  local rc=$?
  tail -3 "$OUTDIR/tests.log"
  return $rc
}

# bench ARGS...: bench/run.py --device $DEVICE into OUTDIR with a deadline 45 s before the step's;
# if it did not write its tables, bench/from_logs.py rebuilds them from its log
bench() {
  local command=(python3 bench/run.py --device "$DEVICE" --out "$OUTDIR" --work "$WORK/bench" --no-speed-options
    --no-preprocess-throughput --deadline $((DEADLINE - 45)) --precision "$PRECISION" "$@")
  [ -n "$TINY" ] && command+=(--quick --lengths 8 --repeats 1)
  say "benchmark: ${command[*]}"
  echo "# command: ${command[*]}" > "$OUTDIR/bench.log"
  within 15 "${command[@]}" >> "$OUTDIR/bench.log" 2> "$LOGS/bench.stderr"
  local rc=$?
  [ -f "$WORK/bench/measure.log" ] && cp "$WORK/bench/measure.log" "$LOGS/"
  if [ ! -s "$OUTDIR/RESULTS.json" ]; then
    say "the benchmark did not finish (exit $rc): tables rebuilt from bench.log"
    python3 bench/from_logs.py "$OUTDIR/bench.log" --out "$OUTDIR/RESULTS.md" --json "$OUTDIR/RESULTS.json" || return 1
  fi
  grep -E "tok/s|budget|wrote" "$OUTDIR/bench.log" | tail -3
  return 0
}

step2() {
  # the profile may take 40% of the step; the benchmark the rest
  local archs=$ARCHS profile=(--words 64 --deadline $(($(date +%s) + STEP_SECONDS * 2 / 5)))
  [ -n "$archs" ] || archs=$STEP2_ARCHS
  [ -n "$TINY" ] && profile+=(--tiny --words 8)
  say "profile of one training step"
  within 300 python3 bench/profile_step.py --device "$DEVICE" --out "$OUTDIR" --work "$WORK/profile" \
    ${ARCHS:+--archs "$ARCHS"} "${profile[@]}" > "$LOGS/profile.log" 2>&1 || say "profile failed or cut: logs.tgz"
  grep "^\[bench" "$LOGS/profile.log" | tail -2
  bench --archs "$archs"
}

step3() {
  local archs=$ARCHS
  # --quick (the dry run) benchmarks one system unless told which: every one of them then
  [ -n "$TINY" ] && [ -z "$archs" ] && archs=$(python3 bench/run.py --list | awk 'NR > 1 {print $1}' | paste -sd,)
  bench --model-size large --repeats 2 ${archs:+--archs "$archs"}
}

# the study's grid until the deadline (timeout's SIGTERM stops the runs, as Ctrl-C does); its data-bins stay in --work
# for the window's next step 4 on the same machine
step4() {
  local study=$STUDY jobs=$JOBS
  [ -n "$study" ] || study=$ROOT/examples/multi30k/study-gpu.toml
  [ -f "$study" ] || { say "error: $study: no such study file"; return 1; }
  local folder name
  folder=$(cd "$(dirname "$study")" && pwd) name=$(basename "$study")
  local raw=$RAW runs=$RUNS_DIR
  [ -n "$raw" ] || raw=$WINDOW_DIR/data/multi30k
  [ -n "$runs" ] || runs=$folder/runs-gpu
  [ -d "$raw" ] || { say "error: $raw: no corpus (run bench/cuda/window.sh prepare and carry .window)"; return 1; }
  # the window's study: the study as its base, beside it (its relative paths stay right), the raw text of .window,
  # its runs in the runs folder and its data and checkpoints in WORK; --tiny: its first system, one seed, one
  # epoch, on DEVICE
  local window_study=$folder/.window-$name
  {
    printf '[study]\nbase = "%s"\nruns = "%s"\nwork = "%s"\n[corpus]\nraw = "%s"\n' "$name" "$runs" "$WORK/study" "$raw"
    printf '[training]\ndevice = "%s"\n' "$DEVICE"
    if [ -n "$TINY" ]; then
      local first
      first=$(python3 -m fairseq_syntax.cli.study plan "$study" --systems | awk 'NR == 1') || return 1
      printf 'max_epoch = 1\n[[systems]]\nname = "%s"\nseeds = 1\n' "${first%%:*}"
    fi
  } > "$window_study"
  mkdir -p "$runs"
  touch "$WORK/started"
  python3 -m fairseq_syntax.cli.study plan "$window_study" > "$LOGS/plan.before.txt" 2>&1 \
    || { say "the study file is refused:"; cat "$LOGS/plan.before.txt"; rm -f "$window_study"; return 1; }
  say "$(tail -2 "$LOGS/plan.before.txt" | head -1 | xargs); $jobs at once until the step's deadline"
  # a run must end within this step: its checkpoints do not come back, so a run cut short starts afresh later
  within 40 python3 -m fairseq_syntax.cli.study run "$window_study" \
    --executor local --jobs "$jobs" > "$LOGS/run.log" 2>&1
  local rc=$?  # 124: the deadline stopped it, as planned; another failure is the step's
  say "run: exit $rc$([ $rc = 124 ] && echo ', stopped at the deadline') ($(grep -c ': done$' "$LOGS/run.log") runs done in this step; logs.tgz: run.log)"
  python3 -m fairseq_syntax.cli.study plan "$window_study" > "$OUTDIR/status.txt" 2>&1
  tail -2 "$OUTDIR/status.txt"
  rm -f "$window_study"
  # what this step wrote in the runs folder, never checkpoints (they stay in WORK)
  (cd "$runs/.." && find "$(basename "$runs")" -type f -newer "$WORK/started" ! -name '*.pt' -print0 \
    | tar czf "$OUTDIR/study-runs.tgz" --null -T -)
  [ $rc = 0 ] || [ $rc = 124 ]
}

say "start ($DEVICE${TINY:+, tiny}; $(left 0) s to its deadline)"
"step$STEP"
rc=$?
say "done (exit $rc); $(left 0) s to spare"
exit $rc
