#!/usr/bin/env bash
# The no-download demo: synthetic translation with gold trees -> BPE -> fairseq-syntax-preprocess (three input
# forms) -> fairseq-train each system with identical settings -> fairseq-generate -> fairseq-syntax-score ->
# a BLEU table: a short one printed (system, BLEU, chrF, p against Sequence, training time), the full one, with each
# system's command, in WORK_DIR/RESULTS.md (examples/demo/RESULTS.md is ours), generated from the run records.
#
#   bash examples/demo/run.sh [WORK_DIR]        (default examples/demo/work; EPOCHS=.. SYSTEMS=".." to change;
#                                                TRAIN_SENTENCES, VALID_SENTENCES, TEST_SENTENCES: the data's size)
#
# JOBS systems train at once (default: the number of cores), one thread each: these models are too small for a
# second thread to pay, so on 2 cores two runs at a time take about half the time of one run after the other.
# The baselines go first, as the others are scored against them.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${1:-$HERE/work}"
EPOCHS="${EPOCHS:-12}"
BPE_MERGES="${BPE_MERGES:-1500}"
JOBS="${JOBS:-$(nproc)}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"
cd "$REPO"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"  # this checkout's package
# NAME:ARCH:DATA[:EXTRA] of every method's systems, baselines included, ablations left out (the method descriptions:
# python3 -m fairseq_syntax.methods systems); SYSTEMS="..." picks others
# (under set -e a failed $(...) ends the script: its error is shown, and one line says which command it was)
SYSTEMS="${SYSTEMS:-$(python3 -m fairseq_syntax.methods systems --no-ablations)}" || {
  echo "error: python3 -m fairseq_syntax.methods systems failed (its error is above): install the package and its" \
    "dependencies (README's set-up line)" >&2; exit 1; }
# the data directories they read (checked here, before the data is made: a wrong SYSTEMS fails at once)
DATA_DIRS=$(python3 -m fairseq_syntax.methods data-dirs $SYSTEMS) || {
  echo "error: python3 -m fairseq_syntax.methods data-dirs failed (its error is above): SYSTEMS=\"$SYSTEMS\"" >&2; exit 1; }
mkdir -p "$WORK"
START=$(date +%s)

echo "== data: synthetic grammar with gold trees"
python3 "$HERE/make_data.py" --out "$WORK/raw" --train "${TRAIN_SENTENCES:-4000}" --valid "${VALID_SENTENCES:-400}" \
  --test "${TEST_SENTENCES:-500}" --seed 1 \
  --max-tokens "${MAX_SOURCE_TOKENS:-14}"

echo "== joint BPE ($BPE_MERGES merges)"
subword-nmt learn-joint-bpe-and-vocab --input "$WORK/raw/train.en" "$WORK/raw/train.de" -s "$BPE_MERGES" \
  -o "$WORK/raw/codes" --write-vocabulary "$WORK/raw/vocab.en" "$WORK/raw/vocab.de"
mkdir -p "$WORK/bpe"
for split in train valid test; do
  for lang in en de; do
    subword-nmt apply-bpe -c "$WORK/raw/codes" --vocabulary "$WORK/raw/vocab.$lang" --vocabulary-threshold 1 \
      < "$WORK/raw/$split.$lang" > "$WORK/bpe/$split.$lang"
  done
  cp "$WORK/raw/$split.tree" "$WORK/bpe/$split.tree"  # trees stay word level; preprocessing carries the BPE over
  cp "$WORK/raw/$split.arcs.jsonl" "$WORK/bpe/$split.arcs.jsonl"  # so are the dependency distributions
done

# one data directory per DATA the systems read (form and POS-node convention), plus the side inputs that need a step
# of their own: src_ldd, the labeled dependency distributions make_data.py derived from the gold trees (word level;
# BPE pieces are grouped back into words). python3 -m: the modules of this checkout, whatever is installed.
while read -r data form preterminals side_inputs && [ -n "$data" ]; do
  echo "== fairseq-syntax-preprocess --form $form --preterminals $preterminals (data-$data)"
  rm -rf "$WORK/data-$data"
  python3 -m fairseq_syntax.cli.preprocess -s en -t de --trainpref "$WORK/bpe/train" --validpref "$WORK/bpe/valid" \
    --testpref "$WORK/bpe/test" --form "$form" --preterminals "$preterminals" --destdir "$WORK/data-$data" \
    --joined-dictionary --workers 2 --bpe-codes "$WORK/raw/codes" --bpe-vocabulary "$WORK/raw/vocab.en" \
    --bpe-vocabulary-threshold 1 > "$WORK/preprocess-$data.log" 2>&1 || { tail -20 "$WORK/preprocess-$data.log"; exit 1; }
  if [[ " $side_inputs " == *" src_ldd "* ]]; then
    echo "== fairseq-syntax-preprocess-dependencies --labels universal (data-$data)"
    python3 -m fairseq_syntax.methods.ldd.preprocess -s en -t de --trainpref "$WORK/bpe/train" \
      --validpref "$WORK/bpe/valid" --testpref "$WORK/bpe/test" --labels universal --destdir "$WORK/data-$data" \
      > "$WORK/preprocess-ldd-$data.log" 2>&1 || { tail -20 "$WORK/preprocess-ldd-$data.log"; exit 1; }
  fi
done <<< "$DATA_DIRS"

# identical settings for every system; only the input form and the encoder differ
MODEL=(--encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 64 --decoder-embed-dim 64
  --encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 --decoder-attention-heads 4
  --share-all-embeddings --dropout 0.1 --criterion label_smoothed_cross_entropy --label-smoothing 0.1
  --optimizer adam --adam-betas "(0.9, 0.98)" --lr 3e-3 --lr-scheduler inverse_sqrt --warmup-updates 150
  --clip-norm 1.0 --max-tokens 1024 --max-epoch "$EPOCHS" --cpu --seed 1 --no-last-checkpoints)
source "$REPO/examples/common.sh"
DATASET=demo BASELINES="sequence linearized"
rm -rf "$WORK/runs"
mkdir -p "$WORK/runs"
run_one() {  # one system, its console output kept in runs/NAME.out and shown when it ends
  local name arch data extra
  IFS=: read -r name arch data extra <<< "$1"
  local status=0
  run_system "$name" "$arch" "$WORK/data-$data" "$WORK/raw/test.de" "$WORK/runs" -- "${MODEL[@]}" ${extra//,/ } \
    > "$WORK/runs/$name.out" 2>&1 || status=$?
  cat "$WORK/runs/$name.out"
  return $status
}
baselines=() others=()
for s in $SYSTEMS; do
  if [[ " $BASELINES " == *" ${s%%:*} "* ]]; then baselines+=("$s"); else others+=("$s"); fi
done
for phase in baselines others; do
  declare -n systems_of_phase=$phase
  pids=()
  for s in "${systems_of_phase[@]}"; do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do sleep 1; done
    run_one "$s" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || { echo "a system failed: see $WORK/runs/*.out" >&2; exit 1; }; done
  if [ "$phase" = baselines ]; then  # each baseline against the other, now that both are decoded
    for s in "${baselines[@]}"; do
      IFS=: read -r name arch _ <<< "$s"
      score_system "$name" "$arch" "$WORK/raw/test.de" "$WORK/runs" "$(cat "$WORK/runs/ckpt-$name/train_command.txt")" \
        > /dev/null
    done
  fi
done

echo "== results"
python3 -m fairseq_syntax.cli.results "$WORK/runs" --out "$WORK/RESULTS.md" --terminal --against sequence
echo "== demo finished in $(( $(date +%s) - START )) s"
echo "the full table, with each system's command: ${WORK#"$REPO"/}/RESULTS.md"
