# Shared steps of the recipes (sourced, not run): train one system, decode the test set, score it, record it.
#
#   run_system NAME ARCH DATA_DIR REF RUN_DIR [-- extra fairseq-train args]
#   run_systems DATA_BIN REF RUN_DIR RESULTS [fairseq-train args]   (every system of $SYSTEMS; see below)
#
# Uses: $DATASET (results table section), $SCORE_ARGS (e.g. "--lang de" to detokenize), $GEN_ARGS, $BASELINES
# (names of systems already in RUN_DIR that the new one is tested against with paired bootstrap), $DEVICE (cpu, the
# default, or cuda: decoding without --cpu; the training arguments are the caller's), $SEED (recorded as the run's
# seed when set) and $RUN_SUFFIX (appended to every file name of a run, e.g. ".seed2": the baselines of a run are
# those with the same suffix, so seed k is compared with seed k).
# Writes RUN_DIR/NAME$RUN_SUFFIX.{train.log,gen,gen.log}.gz (the training log, the decode's hypotheses and
# its log, gzipped once the system is decoded) and RUN_DIR/NAME$RUN_SUFFIX.run.json; checkpoints go to
# ${CKPT_ROOT:-RUN_DIR}/ckpt-NAME$RUN_SUFFIX. Once a run is scored, examples/pack_runs.py can pack its gzipped
# files into RUN_DIR/packed.tar.xz (examples/pack_runs.py); every step here reads them from there (packed_runs.py).
# Records and the logs kept beside them hold no path of this machine: $OUT_DIR (the recipe's output folder, exported
# by the recipe) is written as OUT_DIR, paths in the repository relative to it (and in logs, Python's site-packages
# as SITE_PACKAGES).

# The package of this checkout, whatever an older `pip install -e` of another checkout left in site-packages (the
# console scripts fairseq-syntax-* import it from the first entry of sys.path that has it).
SYNTAX_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export PYTHONPATH="$SYNTAX_REPO${PYTHONPATH:+:$PYTHONPATH}"

# oneDNN keeps one kernel per batch shape; with --cpu-bf16-autocast that grows to GBs unless capped.
export ONEDNN_PRIMITIVE_CACHE_CAPACITY="${ONEDNN_PRIMITIVE_CACHE_CAPACITY:-64}" LRU_CACHE_CAPACITY="${LRU_CACHE_CAPACITY:-64}"

# The PRECISION the recipes use by default: bf16 (--cpu-bf16-autocast) on a CPU with bf16 instructions, else fp32,
# because oneDNN emulates bf16 elsewhere, many times slower (fairseq_syntax/core/cpu_autocast.py).
default_precision() {
  python3 -c 'from fairseq_syntax.core.cpu_autocast import default_cpu_precision; print(default_cpu_precision())' \
    2> /dev/null
}

# detach LOG SCRIPT [ARGS...]: start SCRIPT again in the background, in a session of its own (setsid, nohup: it
# outlives the shell that started it, as the GPU machine's 10-minute command limit needs), output to LOG, and exit;
# in that detached run (DETACHED=1) it returns at once and the script goes on.
detach() {
  local log=$1
  shift
  [ -n "${DETACHED:-}" ] && return 0
  mkdir -p "$(dirname "$log")"
  DETACHED=1 setsid nohup bash "$@" > "$log" 2>&1 < /dev/null &
  echo "started (pid $!); log: $log"
  exit 0
}

# kept FILE: the name FILE is kept under in a run directory: FILE.gz once compressed (or when neither exists yet), else
# FILE (a run scored before its files were compressed). fairseq-syntax-score reads either.
kept() {
  if [ -f "$1.gz" ] || [ ! -f "$1" ]; then echo "$1.gz"; else echo "$1"; fi
}

# have_kept FILE: true when FILE can be read: there, gzipped, or packed with the rest of the finished runs into
# RUN_DIR/packed.tar.xz (fairseq_syntax/evaluation/packed_runs.py, which every reader of decodes and logs reads from;
# run as a file, it imports no more than Python's library: a second, where importing the package takes many)
PACKED_RUNS="$SYNTAX_REPO/fairseq_syntax/evaluation/packed_runs.py"
PACK_RUNS="$SYNTAX_REPO/examples/pack_runs.py"  # the recipes' packer: pack, unpack (also Python's library only)
# An archive that cannot be read (damaged, or not the one SHA256SUMS lists) stops the script: a kept file taken for
# one that is missing would be made again.
have_kept() {
  [ -f "$1" ] || [ -f "$1.gz" ] || [ -f "${1%.gz}" ] && return 0
  is_packed "$1"
}
is_packed() {  # is_packed FILE [--packed]: has (or, with --packed, has packed) FILE; stops the script on an error
  local found=0
  python3 "$PACKED_RUNS" has "${@:2}" "$1" || found=$?
  [ "$found" -le 1 ] && return "$found"
  echo "error: cannot tell whether $1 is kept (the error above): stopped" >&2
  exit 2
}

has_checkpoint() {  # has_checkpoint DIR: DIR holds a checkpoint of a run to go on from (fairseq-train resumes)
  # any checkpoint counts, not checkpoint_last.pt alone: a kill during the first save leaves the epoch's checkpoint and
  # checkpoint_best.pt without it, and fairseq-train (with the plugin) goes on from the newest whole one
  compgen -G "$1/checkpoint*.pt" > /dev/null
}

# a training command as a resumed run must match it: without its budget (--max-epoch / --max-update may grow) and its
# --num-workers (who loads the batches, not which batches)
resume_key() {
  sed -E 's/ --(max-epoch|max-update|num-workers) [0-9]+//g' <<< "$1"
}

# main_process_loader ARGS...: true for a CPU run (--cpu) that does not choose its --num-workers, whose batches
# run_system then loads in the training process (--num-workers 0): fairseq's loaders keep their worker processes
# (persistent_workers) and every epoch starts two more that stay, ~1 GB each; over 20 Multi30k epochs two runs at a
# time filled 24 GB and one was OOM-killed
main_process_loader() {
  [[ " $* " == *" --cpu "* && " $* " != *" --num-workers"[\ =]* ]]
}

# the name of the device runs are recorded with
device_name() {
  if [ "${DEVICE:-cpu}" = cuda ]; then
    python3 -c 'import torch; print(torch.cuda.get_device_name())' 2> /dev/null || echo cuda
  else
    # nproc counts OMP_NUM_THREADS, not the machine: say both
    echo "cpu ($(nproc --all) cores${OMP_NUM_THREADS:+, $OMP_NUM_THREADS thread(s) per run})"
  fi
}

run_system() {
  local name=$1 arch=$2 data=$3 ref=$4 runs=$5
  shift 5
  local system=$name
  name="$name${RUN_SUFFIX:-}"
  [ "${1:-}" = "--" ] && shift
  if main_process_loader "$@"; then set -- "$@" --num-workers 0; fi
  mkdir -p "$runs"
  local ckpt="${CKPT_ROOT:-$runs}/ckpt-$name" log_mode=">"
  local train_cmd=(fairseq-train "$data" --user-dir fairseq_syntax --task syntax_translation --arch "$arch"
    --save-dir "$ckpt" --no-epoch-checkpoints --log-format simple --log-interval 50 "$@")
  # A run cut short (a session that ends, a crash) goes on from its newest checkpoint, as fairseq-train does
  # by default, and its log continues - if it was started with the same command up to its budget (--max-epoch /
  # --max-update may grow); RESTART=1 starts it afresh.
  # a run whose outputs are packed is finished: not run again, nor resumed from a checkpoint it left behind
  if is_packed "$runs/$name.gen" --packed; then
    echo "$name's outputs are packed in $runs/packed.tar.xz: python3 $PACK_RUNS unpack $runs $system" \
      "(then remove the run's files) to run it again" >&2
    return 1
  fi
  if has_checkpoint "$ckpt" && [ -z "${RESTART:-}" ]; then
    if [ "$(resume_key "$(cat "$ckpt/train_command.txt" 2>/dev/null)")" != "$(resume_key "${train_cmd[*]}")" ]; then
      echo "$ckpt holds a run of another command ($ckpt/train_command.txt); RESTART=1 starts $name afresh" >&2
      return 1
    fi
    log_mode=">>"
    echo "== resume $name from its checkpoints in $ckpt"
    # the log goes on: uncompress the one a finished run left
    if [ -f "$runs/$name.train.log.gz" ] && [ ! -f "$runs/$name.train.log" ]; then gunzip "$runs/$name.train.log.gz"; fi
  else
    rm -rf "$ckpt"
    mkdir -p "$ckpt"
    rm -f "$runs/$name.run.json"  # the record of an earlier run of NAME: its facts (device, parsers) are not this one's
  fi
  rm -f "$runs/$name".{train.log,gen,gen.log}.gz  # the files of an earlier run of NAME, if any, are replaced
  echo "${train_cmd[*]}" > "$ckpt/train_command.txt"
  # What the run is trained on, kept with its checkpoints when it starts: a rescore later (on another machine, or
  # after the data were parsed again) records these, not that day's (score_system).
  [ -f "$ckpt/device.txt" ] || device_name > "$ckpt/device.txt"
  if [ ! -f "$ckpt/parsers.json" ] && [ -f "$data/parsers.json" ]; then cp "$data/parsers.json" "$ckpt/parsers.json"; fi
  echo "== train $name: ${train_cmd[*]}"
  if [ "$log_mode" = ">>" ]; then
    "${train_cmd[@]}" >> "$runs/$name.train.log" 2>&1 || { tail -30 "$runs/$name.train.log"; return 1; }
  else
    "${train_cmd[@]}" > "$runs/$name.train.log" 2>&1 || { tail -30 "$runs/$name.train.log"; return 1; }
  fi
  grep -E "\| valid on" "$runs/$name.train.log" | tail -1 || true

  local gen_args=(${GEN_ARGS:---beam 5 --batch-size 128})
  local gen_cmd=(fairseq-generate "$data" --user-dir fairseq_syntax --task syntax_translation
    --path "$ckpt/checkpoint_best.pt" --gen-subset test --post-process subword_nmt "${gen_args[@]}"
    $([ "${DEVICE:-cpu}" = cuda ] || echo --cpu))
  echo "${gen_cmd[*]}" > "$ckpt/decode_command.txt"  # the run record shows it (score_system)
  "${gen_cmd[@]}" > "$runs/$name.gen" 2> "$runs/$name.gen.log" || { tail -30 "$runs/$name.gen.log"; return 1; }
  # kept gzipped, the hypotheses only (scoring.kept_decode: H- lines by id, D- lines where they differ, generate's
  # summary): the scores (H-'s column, left empty; P-) are read by nothing, the sources (S-) and references (T-) are
  # the test data's
  python3 -c 'import sys; from fairseq_syntax.evaluation.scoring import write_kept_decode
write_kept_decode(sys.argv[1], sys.argv[2])' "$runs/$name.gen" "$runs/$name.gen.gz" || return 1
  rm "$runs/$name.gen"
  # the logs kept name no folder of this machine: OUT_DIR, repository-relative paths, SITE_PACKAGES (warnings)
  python3 -c 'import sys; from fairseq_syntax.evaluation.results import make_log_portable
for log in sys.argv[3:]: make_log_portable(log, sys.argv[1] or None, sys.argv[2])' \
    "${OUT_DIR:-}" "$SYNTAX_REPO" "$runs/$name.train.log" "$runs/$name.gen.log"
  gzip -n -f "$runs/$name.train.log" "$runs/$name.gen.log"

  score_system "$system" "$arch" "$ref" "$runs" "${train_cmd[*]}"
}

# score_system NAME ARCH REF RUN_DIR TRAIN_COMMAND: (re)score RUN_DIR/NAME.gen.gz against REF and the $BASELINES
# decoded so far, and write its run record. Run it again once systems trained in parallel have all finished.
score_system() {
  local name=$1 arch=$2 ref=$3 runs=$4 train_command=$5
  local suffix="${RUN_SUFFIX:-}" base baseline_files=() baseline_names=() seed_args=()
  training_facts "${CKPT_ROOT:-$runs}/ckpt-$name$suffix"
  portable_paths "$runs"
  for base in ${BASELINES:-}; do
    if [ "$base" != "$name" ] && have_kept "$runs/$base$suffix.gen"; then
      baseline_files+=("$(kept "$runs/$base$suffix.gen")")
      baseline_names+=(--baseline-name "$base")
    fi
  done
  [ -n "${SEED:-}" ] && seed_args=(--run-seed "$SEED")
  fairseq-syntax-score "$(kept "$runs/$name$suffix.gen")" "$ref" "${baseline_files[@]}" "${baseline_names[@]}" \
    ${SCORE_ARGS:-} --bootstrap 1000 "${seed_args[@]}" "${TRAINING_FACTS[@]}" "${PORTABLE_PATHS[@]}" \
    --record "$runs/$name$suffix.run.json" --dataset "${DATASET:-unnamed}" --system "$name" --arch "$arch" \
    --train-log "$(kept "$runs/$name$suffix.train.log")" --train-command "$train_command"
}

# portable_paths: PORTABLE_PATHS = fairseq-syntax-score's options that write a record's paths relative to the
# repository that holds RUN_DIR (a lane run from a worktree may write into another checkout's runs folder), and
# the recipe's output folder $OUT_DIR (where it is set) as the literal OUT_DIR
portable_paths() {  # portable_paths RUN_DIR
  local root
  root=$(git -C "$1" rev-parse --show-toplevel 2> /dev/null) || root=$SYNTAX_REPO
  PORTABLE_PATHS=(--repo-root "$root")
  if [ -n "${OUT_DIR:-}" ]; then PORTABLE_PATHS+=(--out-dir "$OUT_DIR"); fi
}

# training_facts CKPT: TRAINING_FACTS = fairseq-syntax-score's --device / --parsers / --decode-command from what
# run_system kept in CKPT; none for a run whose checkpoints are gone (its record keeps what it said).
training_facts() {
  TRAINING_FACTS=()
  if [ -f "$1/device.txt" ]; then TRAINING_FACTS+=(--device "$(cat "$1/device.txt")"); fi
  if [ -f "$1/parsers.json" ]; then TRAINING_FACTS+=(--parsers "$1/parsers.json"); fi
  if [ -f "$1/decode_command.txt" ]; then TRAINING_FACTS+=(--decode-command "$(cat "$1/decode_command.txt")"); fi
}

# run_systems DATA_BIN REF RUN_DIR RESULTS [fairseq-train args]: train, decode and score each NAME:ARCH:DATA[:EXTRA]
# of $SYSTEMS on DATA_BIN/DATA (EXTRA: more fairseq-train args, comma-separated, no spaces: the specs of
# `python3 -m fairseq_syntax.methods systems`), regenerating RESULTS after each; with
# RESCORE set, score every system recorded in RUN_DIR again instead (against every baseline decoded by now). The
# table is made from the records of $RESULTS_RUNS (default RUN_DIR).
run_systems() {
  local data_bin=$1 ref=$2 runs=$3 results=$4
  shift 4
  local record system name arch form extra command
  if [ -n "${RESCORE:-}" ]; then
    # a packed run is rescored once unpacked (its new record would stand beside the packed one): say how many
    local packed_records
    packed_records=$(python3 "$PACKED_RUNS" ls --packed "$runs/*${RUN_SUFFIX:-}.run.json" | wc -l)
    if [ "$packed_records" -gt 0 ]; then
      echo "RESCORE: $packed_records packed runs of $runs not rescored; python3 $PACK_RUNS unpack $runs NAME" \
        "gives a system's runs back to rescore" >&2
    fi
    for record in "$runs"/*"${RUN_SUFFIX:-}".run.json; do
      case "$record" in *.seeds.run.json) continue ;; esac
      # a run of another suffix (seed) has its own RESCORE
      [ -z "${RUN_SUFFIX:-}" ] && [[ "$(basename "$record")" == *.seed[0-9]*.run.json ]] && continue
      read -r name arch command < <(python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))
print(r["system"], r["arch"], r["command"])' "$record")
      score_system "$name" "$arch" "$ref" "$runs" "$command"
    done
  else
    for system in $SYSTEMS; do
      IFS=: read -r name arch form extra <<< "$system"
      run_system "$name" "$arch" "$data_bin/$form" "$ref" "$runs" -- "$@" ${extra//,/ }
      fairseq-syntax-results ${RESULTS_RUNS:-$runs} --out "$results"
    done
  fi
  fairseq-syntax-results ${RESULTS_RUNS:-$runs} --out "$results"
  cat "$results"
}
