#!/usr/bin/env bash
# Multi30k En->De: train every system with the reference baseline's settings (3+3 layers, d=256, ffn 1024, 4 heads,
# until validation nll_loss has not improved for 5 epochs), decode test2016 (beam 5), score detokenized cased
# sacreBLEU/chrF/TER/RIBES with paired bootstrap against the baselines, and write examples/multi30k/RESULTS.md (and
# RESULTS.json) from the run records.
#
#   examples/multi30k/run.sh [OUT_DIR]      (OUT_DIR as given to prepare.sh; default examples/multi30k/work)
#
# Run prepare.sh first. SYSTEMS picks systems (name:arch:form[:extra fairseq-train args]); MAX_EPOCHS caps training;
# PRECISION=bf16 (--cpu-bf16-autocast, 1.8x faster than fp32 on a CPU with bf16 matrix units; the default there) or
# fp32 (the default on a CPU without bf16 instructions, where bf16 is emulated and many times slower).
# On 2 CPU cores with bf16 one system takes ~30 min (sequence) to ~60 min (linearized). Systems can be trained
# in parallel (one process per SYSTEMS value, e.g. with OMP_NUM_THREADS=1 each); then score every system again
# against all baselines once they are all decoded:
#   SYSTEMS="sequence:transformer:sequence" examples/multi30k/run.sh
#   RESCORE=1 examples/multi30k/run.sh
# Run records, training logs and decodes (the logs and decodes gzipped) accumulate in examples/multi30k/runs
# (committed; checkpoints stay in OUT_DIR/ckpt); the table is regenerated from all records after each system.
# DEVICE=cuda trains and decodes on the GPU (fp32; the dataset is then "multi30k-gpu" and the runs go to RUNS,
# default examples/multi30k/runs-gpu); SEED (default 1) is the training seed, recorded with the run, and
# RUN_SUFFIX names a seed's files (replicate_gpu.sh runs every system with SEED=k RUN_SUFFIX=.seedk).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$HERE/work}"
export OUT_DIR="$OUT"  # run records write this folder as the literal OUT_DIR: they hold no path of this machine
RAW="${RAW:-$REPO/../shared/data/multi30k}"
MAX_EPOCHS="${MAX_EPOCHS:-100}"
SEED="${SEED:-1}"
DEVICE="${DEVICE:-cpu}"
source "$REPO/examples/common.sh"
if [ "$DEVICE" = cuda ]; then
  PRECISION=gpu-fp32 DATASET_NAME=multi30k-gpu RUNS="${RUNS:-$HERE/runs-gpu}"
  RESULTS_RUNS="$HERE/runs $RUNS"  # one RESULTS.md: the CPU table and the GPU ones
else
  PRECISION="${PRECISION:-$(default_precision)}" DATASET_NAME="${DATASET_NAME:-multi30k}" RUNS="${RUNS:-$HERE/runs}"
fi
# The systems come from the method descriptions (python3 -m fairseq_syntax.methods systems): the default is
# McDonald & Chiang's comparison (method syntax_mask: Sequence, Linearized, Mask); SYSTEMS=all runs every system.
# (under set -e a failed $(...) ends the script: its error is shown, and one line says which command it was)
systems_failed() {
  echo "error: python3 -m fairseq_syntax.methods systems failed (its error is above): install the package and its" \
    "dependencies (README's set-up line)" >&2; exit 1
}
if [ -z "${SYSTEMS:-}" ]; then
  SYSTEMS=$(python3 -m fairseq_syntax.methods systems --method syntax_mask) || systems_failed
elif [ "$SYSTEMS" = all ]; then
  SYSTEMS=$(python3 -m fairseq_syntax.methods systems) || systems_failed
fi
cd "$REPO"

ref="$OUT/test.de.ref"
if [ ! -s "$ref" ]; then  # written once, atomically: replicate_gpu.sh starts several runs at a time
  if [ -f "$RAW/test_2016_flickr.de.gz" ]; then zcat "$RAW/test_2016_flickr.de.gz" > "$ref.$$"
  else cp "$RAW/test_2016_flickr.de" "$ref.$$"; fi
  mv "$ref.$$" "$ref"
fi

MODEL=(--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256 --decoder-embed-dim 256
  --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 --encoder-attention-heads 4 --decoder-attention-heads 4
  --share-all-embeddings --dropout 0.3 --weight-decay 0.0001 --criterion label_smoothed_cross_entropy
  --label-smoothing 0.1 --optimizer adam --adam-betas "(0.9, 0.98)" --lr 1e-3 --lr-scheduler inverse_sqrt
  --warmup-updates 1000 --clip-norm 1.0 --seed "$SEED" --max-source-positions 1024
  # The study's protocol (README "The study"): every system sees the same 64 sentences per update, whatever its input
  # form, so an epoch is the same number of updates; training stops once validation nll_loss has not improved for
  # 5 epochs (MAX_EPOCHS is only a cap), and the decoded checkpoint is the one with the best validation nll_loss.
  # nll_loss, not loss: the dependency-supervised criterion adds its attention loss to "loss".
  --batch-size 64 --max-epoch "$MAX_EPOCHS" --patience 5 --best-checkpoint-metric nll_loss)
case "$PRECISION" in
  bf16) MODEL+=(--cpu --cpu-bf16-autocast) ;;
  fp32) MODEL+=(--cpu) ;;
  gpu-fp32) ;;
  *) echo "PRECISION must be bf16 or fp32, not '$PRECISION'" >&2; exit 1 ;;
esac
DATASET=$DATASET_NAME BASELINES="sequence linearized udp" SCORE_ARGS="--lang de --by-length 10,15,20" CKPT_ROOT="$OUT/ckpt"
if [ -n "${SEEDS_ONLY:-}" ]; then  # replicate_gpu.sh, once every seed is decoded: each system over its seeds
  for system in $SYSTEMS; do
    IFS=: read -r name arch form extra <<< "$system"
    score_seeds "$name" "$arch" "$ref" "$RUNS" "$SEEDS_ONLY"  # its first seed's command, from that run's record
  done
  fairseq-syntax-results ${RESULTS_RUNS:-$RUNS} --out "$HERE/RESULTS.md"  # the rows over seeds, in the table now
  exit 0
fi
run_systems "$OUT/data-bin" "$ref" "$RUNS" "$HERE/RESULTS.md" "${MODEL[@]}"
