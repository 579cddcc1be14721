#!/usr/bin/env bash
# One lane of the Multi30k study (README "The study"): trains, decodes and scores the study's runs one after another,
# in the study's order (python3 -m fairseq_syntax.methods systems --study: all seeds of a system before the next),
# each with examples/multi30k/run.sh, and commits each finished run's record, decode and log.
#
#   bash examples/multi30k/study.sh OUT_DIR [LANE_NAME]
#
# OUT_DIR: prepare.sh's output for the study (TRAIN_PAIRS=10000; data-bin/FORM and data-bin/FORM.random). Start
# two lanes on two cores, each in a session of its own so that it outlives the shell:
#   OMP_NUM_THREADS=1 setsid nohup bash examples/multi30k/study.sh OUT_DIR a > lane-a.log 2>&1 < /dev/null &
#   OMP_NUM_THREADS=1 setsid nohup bash examples/multi30k/study.sh OUT_DIR b > lane-b.log 2>&1 < /dev/null &
# Lanes never take the same run: a lane claims a run by locking OUT_DIR/claims/NAME.seedK.lock (flock) for as long as
# it trains it; the lock goes with the lane (a lane killed with its session, and the training it started), so the
# run is taken over by the next lane that comes to it, and resumes from its checkpoint (run.sh). A control run reads
# the control structures drawn with its training seed (python3 -m fairseq_syntax.methods for-seed: DATA.CONTROL for
# seed 1, DATA.CONTROL-sK for seed K; prepare.sh CONTROL_SEEDS makes them). A run whose data directory does not exist
# yet (its parses or controls are not made) is passed over and named. When a system has all its seeds, its
# seed-level record (mean, sd, seed-aware tests) is written, over every seed finished by then; a record that has
# not read a run finished since (of its system, or of one it is tested against) is scored again over every finished
# seed, once no run of those systems is in training (fairseq_syntax/evaluation/seed_records.py).
# Each finished run's log, decode and record are packed into the runs' archive, RUNS/packed.tar.xz
# (examples/pack_runs.py), with those of any other run finished by then, and one commit holds the
# archive, the regenerated RESULTS.md/RESULTS.json, the figure of the table (seeds.png, fairseq-syntax-plot
# seeds) and the README's study answer (python3 -m fairseq_syntax.evaluation.study_answer); a system's record over
# its seeds stays a file beside the archive. SEEDS (default "1 2 3"), SYSTEMS (default: the study's) and COMMIT=0
# (no commits) can be set.
set -uo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="$(realpath -m "${1:?usage: study.sh OUT_DIR [LANE_NAME]}")"
LANE="${2:-$$}"
SEEDS="${SEEDS:-1 2 3}"
RUNS="${RUNS:-$HERE/runs}"
export PRECISION="${PRECISION:-fp32}" DATASET_NAME="${DATASET_NAME:-multi30k-10k}" RUNS
cd "$REPO"
# The lanes take the cores before anything else this machine does: nice -10 for this session's processes (Linux
# schedules each session as one group, so the group's nice is what counts); not permitted without root: ignored.
echo -10 2> /dev/null > /proc/self/autogroup || true

SYSTEMS="${SYSTEMS:-$(python3 -m fairseq_syntax.methods systems --study)}" || exit 1
GRID=$(tr -s ' \n' '\n' <<< "$SYSTEMS")  # one system a line
STUDY_GRID=$(python3 -m fairseq_syntax.methods systems --study | tr -s ' \n' '\n') || exit 1  # every system's spec
BASELINE=sequence  # every system's seeds are tested against this one's (fairseq_syntax.evaluation.results.SEQUENCE)
mkdir -p "$OUT/claims"

# claim RUN: true when this lane now holds RUN, until release_claim. A lock, not a process id in a file: two lanes
# that come to a run at the same moment cannot both take it, and no process that outlived its lane is mistaken for
# a lane gone (the training a lane started holds the lock too, as it inherits the descriptor)
claim() {
  exec {CLAIM_FD}> "$OUT/claims/$1.lock" || return 1
  flock -n "$CLAIM_FD" && return 0
  exec {CLAIM_FD}>&-
  return 1
}
release_claim() { exec {CLAIM_FD}>&-; }

commit_run() {  # commit_run RUN [RUN...]: the runs' archive (the runs named), the regenerated table and its figure
  [ "${COMMIT:-1}" = 0 ] && return 0
  # the runs' own files where they are not packed (a record over seeds; a run whose packing failed)
  local files=() try why kept run
  for run in "$@"; do mapfile -t -O "${#files[@]}" files < <(compgen -G "$RUNS/$run.*"); done
  files+=("$HERE/RESULTS.md" "$HERE/RESULTS.json")
  for kept in "$RUNS/packed.tar.xz" "$RUNS/SHA256SUMS"; do [ -f "$kept" ] && files+=("$kept"); done
  # the figure of the table (each seed's BLEU, each method's control beside it), once a system has two seeds
  if why=$(fairseq-syntax-plot seeds "$HERE/RESULTS.json" "$HERE/seeds.png" 2>&1 > /dev/null); then
    files+=("$HERE/seeds.png")
  else
    echo "== seeds figure not drawn: ${why##*$'\n'}"
  fi
  # the README's study answer, generated from RESULTS.json; not while README.md has changes that are not committed
  # (staged or not): a commit takes the whole file, and must not take someone's edit in progress
  local answer=(python3 -m fairseq_syntax.evaluation.study_answer --readme "$REPO/README.md" "$HERE/RESULTS.json")
  if [ -f "$REPO/README.md" ] && ! git diff --quiet HEAD -- "$REPO/README.md"; then
    echo "== README.md has changes not committed: its study answer is not rewritten (${answer[*]/#$REPO\//})"
  elif [ -f "$REPO/README.md" ] && "${answer[@]}" > /dev/null; then
    files+=("$REPO/README.md")
  fi
  # kept files that git holds and the archive now holds instead (a run committed before it was packed): their removal
  local packed
  mapfile -t packed < <(git ls-files --deleted -- "$RUNS")
  for try in 1 2 3 4 5 6; do
    git add -- "${files[@]}" 2> /dev/null \
      && { [ ${#packed[@]} -eq 0 ] || git rm -q --cached --ignore-unmatch -- "${packed[@]}"; } \
      && git commit -q -m "Multi30k study: $(IFS=,; echo "${*}" | sed 's/,/, /g') ($(device_of "$1"))" \
        -- "${files[@]}" "${packed[@]}" \
      && { echo "== committed $*"; return 0; }
    sleep 10  # another commit holds the index
  done
  echo "== could not commit $*: commit it by hand" >&2
}

PACKED_RUNS="$REPO/fairseq_syntax/evaluation/packed_runs.py"  # reads the archive
PACK_RUNS="$REPO/examples/pack_runs.py"  # packs into it, under the folder's lock
packed_records() {  # the runs whose records the archive holds, one a line
  python3 "$PACKED_RUNS" ls --packed "$RUNS/*.run.json" | sed 's|.*/||; s|\.run\.json$||'
}

# finish_run RUN: pack every finished run's log, decode and record into the runs' archive (a run still going keeps its
# files) and commit it, the other lane waiting meanwhile: a commit names each run it packs, and a run that the other
# lane's commit packed (it finished while that lane packed) is said to be committed already
finish_run() {
  local before newly=()
  {
    flock 9
    before=$(packed_records)
    # a packing that fails leaves the run's files gzipped: they are committed as they are (commit_run)
    python3 "$PACK_RUNS" pack "$RUNS" \
      || echo "== lane $LANE: packing after $1 failed; its files are committed gzipped" >&2
    mapfile -t newly < <(LC_ALL=C comm -13 <(echo "$before") <(packed_records) | grep .)  # Python's order
    if [ ${#newly[@]} -eq 0 ] && [ -n "$before" ] && grep -qx "$1" <<< "$before"; then
      echo "== $1 committed already, with the other lane's run"
    else
      [ ${#newly[@]} -gt 0 ] || newly=("$1")
      commit_run "${newly[@]}"
    fi
  } 9> "$OUT/commit.lock"
}

# have_record RUN: the run is finished (its record is there, or packed); an archive that cannot be read stops the lane
# (a finished run taken for one to train would be trained again)
have_record() {
  [ -f "$RUNS/$1.run.json" ] && return 0
  local found=0
  python3 "$PACKED_RUNS" has --packed "$RUNS/$1.run.json" || found=$?
  [ "$found" -le 1 ] && return "$found"
  echo "== lane $LANE: cannot tell whether $1 is finished (the error above): stopped" >&2
  exit 2
}

device_of() {
  python3 "$PACKED_RUNS" cat "$RUNS/$1.run.json" 2> /dev/null \
    | python3 -c 'import json, sys; print(json.load(sys.stdin).get("device") or "device not recorded")' 2> /dev/null \
    || echo "no record"
}

seed_plan() {  # seed_plan SPEC "SEEDS": per seed, a line SEED<TAB>the spec its run trains<TAB>what of that spec's
  # data is not made yet (empty: ready). A control run reads the structures drawn with its training seed
  # (DATA.CONTROL-sSEED; seed 1: DATA.CONTROL). One Python start per system: the package takes seconds to import.
  python3 - "$OUT/data-bin" "$1" $2 <<'EOF'
import contextlib, glob, io, os, sys
from fairseq_syntax.core.side_inputs import SIDE_INPUTS
from fairseq_syntax.methods.__main__ import main
data_bin, spec, seeds = sys.argv[1], sys.argv[2], sys.argv[3:]
for seed in seeds:
    listing = io.StringIO()
    with contextlib.redirect_stdout(listing):
        main(["for-seed", spec, seed])
    seed_spec = listing.getvalue().strip()
    listing = io.StringIO()
    with contextlib.redirect_stdout(listing):
        main(["data-dirs", seed_spec])
    missing = []
    for line in listing.getvalue().splitlines():
        data, _form, _preterminals, *side_inputs = line.split()
        folder = os.path.join(data_bin, data)
        if not os.path.isdir(folder):
            missing.append(folder)
            continue
        missing += [f"{folder}: {name}" for name in side_inputs
                    if not glob.glob(os.path.join(folder, f"train.*.{SIDE_INPUTS[name].suffix}.idx"))]
    print(f"{seed}\t{seed_spec}\t{' '.join(missing)}")
EOF
}

# score_over_seeds SYSTEM SEEDS: SYSTEM's record over its seeds (run.sh SEEDS_ONLY) made anew and committed, unless
# another lane is making it
score_over_seeds() {
  local name=${1%%:*}
  claim "$name.seeds" || return 0
  SYSTEMS="$1" SEEDS_ONLY="$2" bash "$HERE/run.sh" "$OUT" \
    && { flock 9; commit_run "$name.seeds"; } 9> "$OUT/commit.lock"
  release_claim
}

# training SYSTEM...: true when a run of one of them is claimed by a lane (in training)
training() {
  local system lock
  for system in "$@"; do
    for lock in "$OUT/claims/$system".seed*.lock; do
      [ -f "$lock" ] || continue
      flock -n "$lock" true || return 0
    done
  done
  return 1
}

# rescore_stale: every record over seeds that did not read a run finished since (of its system or of one it tests
# it against: fairseq_syntax/evaluation/seed_records.py), scored again over every finished seed; not while a run of
# one of those systems is in training (it is scored once that run is in)
rescore_stale() {
  local stale name seeds lacks systems spec
  stale=$(python3 -m fairseq_syntax.evaluation.seed_records stale "$RUNS") || exit 1
  while IFS=$'\t' read -r -u 3 name seeds lacks systems; do
    [ -n "$name" ] || continue
    spec=$(grep -m 1 "^$name:" <<< "$STUDY_GRID") || {
      echo "== lane $LANE: $name's record over seeds did not read $lacks; $name is not a system of the study"
      continue
    }
    # shellcheck disable=SC2086  # one system a word
    if training $systems; then
      echo "== lane $LANE: $name's record over seeds did not read $lacks; scored again once the runs in training are in"
      continue
    fi
    echo "== lane $LANE: $name's record over seeds did not read $lacks: scored again over seeds $seeds"
    score_over_seeds "$spec" "$seeds"
  done 3<<< "$stale"
}

for system in $SYSTEMS; do
  rescore_stale  # a run the last lane finished, or one finished before this lane started
  IFS=: read -r name arch form extra <<< "$system"
  todo=()
  for seed in $SEEDS; do have_record "$name.seed$seed" || todo+=("$seed"); done
  plan=""
  if [ ${#todo[@]} -gt 0 ]; then plan=$(seed_plan "$system" "${todo[*]}") || exit 1; fi
  while IFS=$'\t' read -r -u 3 seed seed_system missing; do  # fd 3: what a run reads from stdin is not the plan
    [ -n "$seed" ] || continue
    run="$name.seed$seed"
    have_record "$run" && continue  # the other lane may have finished it meanwhile
    if [ -n "$missing" ]; then
      echo "== lane $LANE: $run passed over, not made yet: $(echo $missing)"
      continue
    fi
    claim "$run" || continue
    echo "== lane $LANE: $(date -u +%FT%TZ) $run"
    if SEED="$seed" RUN_SUFFIX=".seed$seed" SYSTEMS="$seed_system" bash "$HERE/run.sh" "$OUT"; then
      finish_run "$run"
    else
      echo "== lane $LANE: $run failed (log: $RUNS/$run.train.log)" >&2
    fi
    release_claim
  done 3<<< "$plan"
  done_seeds=0
  for seed in $SEEDS; do have_record "$name.seed$seed" && done_seeds=$((done_seeds + 1)); done
  [ "$done_seeds" -eq "$(wc -w <<< "$SEEDS")" ] && [ ! -f "$RUNS/$name.seeds.run.json" ] || continue
  # a system is scored over its seeds against Sequence's: once Sequence is (its record over seeds is made once)
  if [ "$name" != "$BASELINE" ] && [ ! -f "$RUNS/$BASELINE.seeds.run.json" ] && grep -q "^$BASELINE:" <<< "$GRID"; then
    echo "== lane $LANE: $name's seeds are scored once $BASELINE's are (a later lane does it)"
    continue
  fi
  # over every seed finished by now (score_seeds takes each system's own among them): a lane of seeds 4-5, or of
  # seeds 1-3 where Sequence has 5, compares each system over all its runs
  seeds=$(python3 -m fairseq_syntax.evaluation.seed_records seeds "$RUNS") || exit 1
  score_over_seeds "$system" "$seeds"
done
rescore_stale
echo "== lane $LANE: $(date -u +%FT%TZ) nothing left that this lane can run"
