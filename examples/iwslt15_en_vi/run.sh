#!/usr/bin/env bash
# IWSLT'15 En->Vi, McDonald & Chiang (2021): train Sequence, Linearized and Mask with identical settings (the paper's,
# where it gives them: see README.md), decode tst2013, score sacreBLEU/chrF/TER/RIBES with paired bootstrap of each
# system against the Sequence and Linearized baselines, and write examples/iwslt15_en_vi/RESULTS.md from the run
# records.
#
#   examples/iwslt15_en_vi/run.sh [OUT_DIR]   (OUT_DIR as given to prepare.sh; default examples/iwslt15_en_vi/work)
#
# Run prepare.sh first. Environment:
#   SYSTEMS        name:arch:form[:extra fairseq-train args] ... (default: the three systems of the paper)
#   EPOCHS         training budget (default 100, the paper's toolkit's default)
#   PRECISION      bf16 | fp32 (default: bf16, or fp32 on a CPU without bf16 instructions); DEVICE cpu (default) |
#                  cuda. bf16 is --cpu-bf16-autocast on the CPU and fairseq's --bf16 on CUDA. Decoding runs on the
#                  CPU either way (examples/common.sh).
#   TRAIN_ARGS     more fairseq-train arguments for every system, after the settings below (later ones win),
#                  e.g. --update-freq 2, or a small model to try the recipe out
#   MAX_POSITIONS  as given to prepare.sh (default 1024)
#   GEN_ARGS, SCORE_ARGS  fairseq-generate and fairseq-syntax-score arguments (defaults below)
#   RESCORE=1      score every recorded system again against all baselines decoded by now (after systems trained
#                  in parallel, one process per SYSTEMS value), then rewrite RESULTS.md
# Run records, training logs and decodes accumulate in examples/iwslt15_en_vi/runs; checkpoints go to OUT_DIR/ckpt.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="$(realpath -m "${1:-$HERE/work}")"
EPOCHS="${EPOCHS:-100}"
source "$REPO/examples/common.sh"
DEVICE="${DEVICE:-cpu}"
if [ "$DEVICE" = cpu ]; then PRECISION="${PRECISION:-$(default_precision)}"; else PRECISION="${PRECISION:-bf16}"; fi
MAX_POSITIONS="${MAX_POSITIONS:-1024}"
SYSTEMS="${SYSTEMS:-sequence:transformer:sequence linearized:transformer:linearized mask:transformer_syntax_mask:preorder}"
cd "$REPO"

# tst2013.vi with its XML entities unescaped (prepare.sh changes nothing else on the target side): the outputs
# are tokenized Vietnamese, and so is this reference.
ref="$OUT/tok/test.vi"
for needed in "$ref" "$OUT/data-bin/sequence" "$OUT/data-bin/linearized" "$OUT/data-bin/preorder"; do
  [ -e "$needed" ] || { echo "$needed is missing: run examples/iwslt15_en_vi/prepare.sh IWSLT_DIR $OUT first" >&2; exit 1; }
done

# Witwicky's defaults (the paper: "We use all default settings"), in fairseq's terms; README.md lists what differs.
# The learning rate decays, and the checkpoint is chosen, on dev BLEU (tokenized, beam 4, length penalty 0.6).
MODEL=(--encoder-layers 6 --decoder-layers 6 --encoder-embed-dim 512 --decoder-embed-dim 512
  --encoder-ffn-embed-dim 2048 --decoder-ffn-embed-dim 2048 --encoder-attention-heads 8 --decoder-attention-heads 8
  --encoder-normalize-before --decoder-normalize-before --share-all-embeddings
  --dropout 0.3 --attention-dropout 0.3 --activation-dropout 0.3
  --criterion label_smoothed_cross_entropy --label-smoothing 0.1
  --optimizer adam --adam-betas "(0.9, 0.999)" --adam-eps 1e-8 --clip-norm 1.0
  --lr 3e-4 --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.8 --lr-patience 3
  --eval-bleu --eval-bleu-args '{"beam": 4, "lenpen": 0.6}' --eval-bleu-remove-bpe --eval-tokenized-bleu
  --best-checkpoint-metric bleu --maximize-best-checkpoint-metric
  --max-tokens 4096 --max-epoch "$EPOCHS" --seed 1
  --max-source-positions "$MAX_POSITIONS" --max-target-positions "$MAX_POSITIONS")
case "$DEVICE:$PRECISION" in
  cpu:bf16) MODEL+=(--cpu --cpu-bf16-autocast) ;;
  cpu:fp32) MODEL+=(--cpu) ;;
  cuda:bf16) MODEL+=(--bf16) ;;
  cuda:fp32) ;;
  *) echo "DEVICE must be cpu or cuda and PRECISION bf16 or fp32, not '$DEVICE' and '$PRECISION'" >&2; exit 1 ;;
esac
read -r -a extra_train_args <<< "${TRAIN_ARGS:-}"
MODEL+=("${extra_train_args[@]}")
DATASET=iwslt15_en_vi BASELINES="sequence linearized" CKPT_ROOT="$OUT/ckpt"
GEN_ARGS="${GEN_ARGS:---beam 4 --lenpen 0.6 --batch-size 64}" SCORE_ARGS="${SCORE_ARGS:---by-length 10,20,30,40,50}"
run_systems "$OUT/data-bin" "$ref" "$HERE/runs" "$HERE/RESULTS.md" "${MODEL[@]}"
