#!/usr/bin/env bash
# A short window on a machine with a GPU (one GPU, 16 cores, no network, about 30 minutes in all and commands of at
# most 10 minutes; the working tree travels, ignored folders only when named; at most 8 files of 16 MiB come back),
# used in full. Each step runs in the foreground, ends under 9 minutes by its own timeout (STEP_SECONDS, default
# 530), and leaves at most 8 files in OUTDIR (its secondary logs packed as logs.tgz). No step depends on a job that
# outlives it: a job left running dies when the window closes. No step reads the data beside the repository
# (../shared): `prepare` copies what they need into .window/.
#
#   bash bench/cuda/window.sh prepare                               # before the window, on the development machine
#   bash bench/cuda/window.sh STEP OUTDIR [--device cpu] [--tiny]   # on the GPU machine, STEP 1 to 4 in turn
#
# prepare: .devpkgs/ (fairseq for the offline machine: bench/cuda/make_devpkgs.sh, when missing) and .window/ (a copy
#   of SHARED_DATA, default ../shared/data, and the commit of this tree); carry both with the working tree.
# The steps, in order of value (bench/cuda/README.md says what each brings back and how long it takes):
#   1  set-up check (setup.txt), then the CUDA tests (tests.log, tests.xml): tests/core/test_cuda.py, every
#      system and every `cuda_variants` entry of the method descriptions (the gathered mask bias among them, one-hot
#      being the default on CUDA) equal to the CPU in fp32, within tolerance of fp32 in fp16 and bf16, and trained by
#      fairseq-train --fp16 and --bf16; and the structure test of tests/core/test_structure.py
#   2  torch.profiler over one training step of every system at 64 words (profile.txt, profile.json), then
#      bench/run.py at the recipe size for the systems not measured on a GPU since their fixes (STEP2_ARCHS) (RESULTS.md, RESULTS.json, RESULTS.details.json.gz, bench.log), in PRECISION too
#   3  bench/run.py at the papers' size (6+6 layers, d=512, 8 heads) for every system, 16/32/64 words, as many
#      rounds as fit (its --time-budget: the results are those of the rounds measured), in PRECISION (default fp32;
#      bf16 or fp16: fairseq's own --bf16 / --fp16, bench/run.py --precision)
#   4  the Multi30k study on GPUs (examples/multi30k/study-gpu.toml, or STUDY): `fairseq-syntax-study run` of its
#      pending runs, JOBS (default 8) at once on the GPU, in the foreground until the step's deadline; the data-bins
#      are made on this machine from the committed parses and .window's raw text; brings back status.txt (the plan
#      after the step) and study-runs.tgz (the records, training logs and decodes of the runs it finished, to unpack
#      in the study's folder and commit), never checkpoints: a run cut short starts afresh in a later window
# A step its timeout cut still leaves what it had; bench/from_logs.py rebuilds RESULTS.* from bench.log (steps 2-3
# do that themselves when the benchmark did not finish).
# --device cpu --tiny: the step's CPU dry run (tests/recipes/test_window.py): tiny models, one short length, one
# round. ARCHS (comma-separated, bench/run.py --list) replaces the systems of steps 2 and 3.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ROOT=$PWD
# the systems not measured on a GPU since their fixes (the window of 2026-11-27 measured the mask model, its one-hot
# bias, PASCAL and dependency-supervised attention: bench/cuda/README.md), and the mask model with its new default
STEP2_ARCHS=transformer_syntax_mask,transformer_ldd,transformer_constituent,transformer_hier_accum
STEP_SECONDS=${STEP_SECONDS:-530}
WINDOW_DIR=${WINDOW_DIR:-$ROOT/.window}

usage() {
  sed -n '9,10p' "${BASH_SOURCE[0]}" >&2
  exit 2
}

prepare() {
  [ -d .devpkgs ] || bash bench/cuda/make_devpkgs.sh
  local shared=${SHARED_DATA:-$ROOT/../shared/data}
  [ -d "$shared" ] || { echo "error: $shared: no data to copy (set SHARED_DATA)" >&2; exit 1; }
  rm -rf "$WINDOW_DIR"
  mkdir -p "$WINDOW_DIR"
  cp -rL "$shared" "$WINDOW_DIR/data"
  chmod -R u+w "$WINDOW_DIR"
  { git rev-parse HEAD 2> /dev/null || echo "not a git checkout"; git status --short 2> /dev/null | head -50; } \
    > "$WINDOW_DIR/commit.txt"
  du -sh .devpkgs "$WINDOW_DIR"
  echo "carry: .devpkgs .window (64 MiB in all, with the working tree)"
}

[ $# -ge 1 ] || usage
if [ "$1" = prepare ]; then
  prepare
  exit 0
fi
[ $# -ge 2 ] || usage
STEP=$1 OUTDIR=$2
shift 2
ARGS=("$@")
DEVICE=cuda TINY=
while [ $# -gt 0 ]; do
  case $1 in
    --device) DEVICE=$2; shift 2 ;;
    --tiny) TINY=1; shift ;;
    *) usage ;;
  esac
done
case $STEP in 1|2|3|4) ;; *) usage ;; esac
mkdir -p "$OUTDIR/logs"
OUTDIR=$(cd "$OUTDIR" && pwd)
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

if [ -z "${WINDOW_DEADLINE:-}" ]; then
  # the step itself runs again under one timeout; packing happens here, after it, whatever it left
  started=$(date +%s)
  WINDOW_DEADLINE=$((started + STEP_SECONDS)) timeout -k 10 $((STEP_SECONDS + 15)) \
    bash "${BASH_SOURCE[0]}" "$STEP" "$OUTDIR" "${ARGS[@]}" 2>&1 | tee "$LOGS/window.log"
  rc=${PIPESTATUS[0]}
  pack
  echo "== step $STEP: exit $rc after $(($(date +%s) - started)) s; $OUTDIR: $(ls "$OUTDIR" | tr '\n' ' ')"
  exit "$rc"
fi

# seconds left before the step's deadline, less RESERVE (default 10) for what follows
left() {
  local seconds=$((WINDOW_DEADLINE - $(date +%s) - ${1:-10}))
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
WORK=${WORK:-${TMPDIR:-/tmp}/window-step$STEP}
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
    --no-preprocess-throughput --deadline $((WINDOW_DEADLINE - 45)) --precision "${PRECISION:-fp32}" "$@")
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
  local archs=${ARCHS:-$STEP2_ARCHS} profile=(--words 64 --deadline $(($(date +%s) + STEP_SECONDS * 2 / 5)))
  [ -n "$TINY" ] && profile+=(--tiny --words 8)
  say "profile of one training step"
  within 300 python3 bench/profile_step.py --device "$DEVICE" --out "$OUTDIR" --work "$WORK/profile" \
    ${ARCHS:+--archs "$ARCHS"} "${profile[@]}" > "$LOGS/profile.log" 2>&1 || say "profile failed or cut: logs.tgz"
  grep "^\[bench" "$LOGS/profile.log" | tail -2
  bench --archs "$archs"
}

step3() {
  local archs=${ARCHS:-}
  # --quick (the dry run) benchmarks one system unless told which: every one of them then
  [ -n "$TINY" ] && [ -z "$archs" ] && archs=$(python3 bench/run.py --list | awk 'NR > 1 {print $1}' | paste -sd,)
  bench --model-size large --repeats 2 ${archs:+--archs "$archs"}
}

# the study's grid: `fairseq-syntax-study run` on STUDY (default examples/multi30k/study-gpu.toml) in the foreground,
# JOBS runs at once, until the step's deadline stops it (timeout's SIGTERM: the runs stop with it, as on Ctrl-C); its
# data-bins are made here (minutes on one core) and kept in WORK for the window's next step 4 on the same machine
step4() {
  local study=${STUDY:-$ROOT/examples/multi30k/study-gpu.toml} jobs=${JOBS:-8}
  [ -f "$study" ] || { say "error: $study: no such study file"; return 1; }
  local folder name
  folder=$(cd "$(dirname "$study")" && pwd) name=$(basename "$study")
  local raw=${RAW:-$WINDOW_DIR/data/multi30k} runs=${RUNS_DIR:-$folder/runs-gpu}
  [ -d "$raw" ] || { say "error: $raw: no corpus (run bench/cuda/window.sh prepare and carry .window)"; return 1; }
  # the window's study: STUDY as its base, beside it (its relative paths stay right), the raw text of .window, its
  # runs in RUNS_DIR and its data and checkpoints in WORK; --tiny: its first system, one seed, one epoch, on DEVICE
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
