#!/usr/bin/env bash
# The no-download demo: synthetic translation with gold trees -> BPE -> fairseq-syntax-preprocess (three input
# forms) -> fairseq-train each system with identical settings -> fairseq-generate -> fairseq-syntax-score ->
# a BLEU table (examples/demo/RESULTS.md, generated from the run records).
#
#   bash examples/demo/run.sh [WORK_DIR]        (default examples/demo/work; EPOCHS=.. SYSTEMS=".." to change)
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
WORK="${1:-$HERE/work}"
EPOCHS="${EPOCHS:-12}"
BPE_MERGES="${BPE_MERGES:-1500}"
# system:arch:input form (Sequence and Linearized are McDonald & Chiang's baselines: fairseq's transformer)
SYSTEMS="${SYSTEMS:-sequence:transformer:sequence linearized:transformer:linearized mask:transformer_syntax_mask:preorder}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-2}"
cd "$REPO"
mkdir -p "$WORK"
START=$(date +%s)

echo "== data: synthetic grammar with gold trees"
python3 "$HERE/make_data.py" --out "$WORK/raw" --train 8000 --valid 500 --test 500 --seed 1

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
done

forms=$(for s in $SYSTEMS; do echo "${s##*:}"; done | sort -u)
for form in $forms; do
  echo "== fairseq-syntax-preprocess --form $form"
  rm -rf "$WORK/data-$form"
  fairseq-syntax-preprocess -s en -t de --trainpref "$WORK/bpe/train" --validpref "$WORK/bpe/valid" \
    --testpref "$WORK/bpe/test" --form "$form" --destdir "$WORK/data-$form" --joined-dictionary --workers 2 \
    > "$WORK/preprocess-$form.log" 2>&1 || { tail -20 "$WORK/preprocess-$form.log"; exit 1; }
done

mkdir -p "$WORK/runs"
for s in $SYSTEMS; do
  IFS=: read -r name arch form <<< "$s"
  echo "== train $name ($arch on $form input, $EPOCHS epochs)"
  rm -rf "$WORK/ckpt-$name"
  train_cmd=(fairseq-train "$WORK/data-$form" --user-dir fairseq_syntax --task syntax_translation --arch "$arch"
    --encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 128 --decoder-embed-dim 128
    --encoder-ffn-embed-dim 256 --decoder-ffn-embed-dim 256 --encoder-attention-heads 4 --decoder-attention-heads 4
    --share-all-embeddings --dropout 0.1 --criterion label_smoothed_cross_entropy --label-smoothing 0.1
    --optimizer adam --adam-betas "(0.9, 0.98)" --lr 2e-3 --lr-scheduler inverse_sqrt --warmup-updates 300
    --clip-norm 1.0 --max-tokens 4096 --max-epoch "$EPOCHS" --cpu --seed 1 --save-dir "$WORK/ckpt-$name"
    --no-epoch-checkpoints --no-last-checkpoints --log-format simple --log-interval 50 --num-workers 0)
  "${train_cmd[@]}" > "$WORK/runs/$name.train.log" 2>&1 || { tail -30 "$WORK/runs/$name.train.log"; exit 1; }
  grep -E "\| valid on" "$WORK/runs/$name.train.log" | tail -1

  fairseq-generate "$WORK/data-$form" --user-dir fairseq_syntax --task syntax_translation \
    --path "$WORK/ckpt-$name/checkpoint_best.pt" --gen-subset test --beam 5 --remove-bpe --cpu --batch-size 128 \
    > "$WORK/runs/$name.gen" 2> "$WORK/runs/$name.gen.log" || { tail -30 "$WORK/runs/$name.gen.log"; exit 1; }

  baseline=()
  [ "$name" != sequence ] && [ -f "$WORK/runs/sequence.gen" ] && baseline=("$WORK/runs/sequence.gen" --baseline-name sequence)
  fairseq-syntax-score "$WORK/runs/$name.gen" "$WORK/raw/test.de" "${baseline[@]}" --bootstrap 1000 \
    --record "$WORK/runs/$name.run.json" --dataset demo --system "$name" --arch "$arch" \
    --train-log "$WORK/runs/$name.train.log" --train-command "${train_cmd[*]}"
done

fairseq-syntax-results "$WORK/runs" --out "$HERE/RESULTS.md"
cat "$HERE/RESULTS.md"
echo "== demo finished in $(( $(date +%s) - START )) s"
