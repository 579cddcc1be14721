#!/usr/bin/env bash
# Multi30k En->De: train every system with the reference baseline's settings (3+3 layers, d=256,
# ffn 1024, 4 heads, 20 epochs, beam 5), decode test2016, score detokenized cased sacreBLEU/chrF/TER/RIBES with
# paired bootstrap against the baselines, and write examples/multi30k/RESULTS.md (and RESULTS.json) from the run
# records.
#
#   examples/multi30k/run.sh [OUT_DIR]      (OUT_DIR as given to prepare.sh; default examples/multi30k/work)
#
# Run prepare.sh first. SYSTEMS picks systems (name:arch:form[:extra fairseq-train args]); EPOCHS the budget;
# PRECISION=bf16 (--cpu-bf16-autocast, 1.8x faster than fp32 on a CPU with bf16 matrix units; the default there) or
# fp32 (the default on a CPU without bf16 instructions, where bf16 is emulated and many times slower).
# On 2 CPU cores with bf16 one system takes ~30 min (sequence) to ~60 min (linearized). Systems can be trained
# in parallel (one process per SYSTEMS value, e.g. with OMP_NUM_THREADS=1 each); then score every system again
# against all baselines once they are all decoded:
#   SYSTEMS="sequence:transformer:sequence" examples/multi30k/run.sh
#   RESCORE=1 examples/multi30k/run.sh
# Run records, training logs and decodes (the logs and decodes gzipped) accumulate in examples/multi30k/runs
# (committed; checkpoints stay in OUT_DIR/ckpt); the table is regenerated from all records after each system.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
OUT="${1:-$HERE/work}"
RAW="${RAW:-$REPO/../shared/data/multi30k}"
EPOCHS="${EPOCHS:-20}"
source "$REPO/examples/common.sh"
PRECISION="${PRECISION:-$(default_precision)}"
# The systems come from the method descriptions (python3 -m fairseq_syntax.methods systems): the default is
# McDonald & Chiang's comparison (method syntax_mask: Sequence, Linearized, Mask); SYSTEMS=all runs every system.
if [ -z "${SYSTEMS:-}" ]; then
  SYSTEMS=$(python3 -m fairseq_syntax.methods systems --method syntax_mask 2> /dev/null)
elif [ "$SYSTEMS" = all ]; then
  SYSTEMS=$(python3 -m fairseq_syntax.methods systems 2> /dev/null)
fi
cd "$REPO"

ref="$OUT/test.de.ref"
if [ -f "$RAW/test_2016_flickr.de.gz" ]; then zcat "$RAW/test_2016_flickr.de.gz" > "$ref"; else cp "$RAW/test_2016_flickr.de" "$ref"; fi

MODEL=(--encoder-layers 3 --decoder-layers 3 --encoder-embed-dim 256 --decoder-embed-dim 256
  --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024 --encoder-attention-heads 4 --decoder-attention-heads 4
  --share-all-embeddings --dropout 0.3 --weight-decay 0.0001 --criterion label_smoothed_cross_entropy
  --label-smoothing 0.1 --optimizer adam --adam-betas "(0.9, 0.98)" --lr 1e-3 --lr-scheduler inverse_sqrt
  --warmup-updates 1000 --clip-norm 1.0 --max-tokens 4096 --max-epoch "$EPOCHS" --cpu --seed 1
  --max-source-positions 1024)
case "$PRECISION" in
  bf16) MODEL+=(--cpu-bf16-autocast) ;;
  fp32) ;;
  *) echo "PRECISION must be bf16 or fp32, not '$PRECISION'" >&2; exit 1 ;;
esac
DATASET=multi30k BASELINES="sequence linearized udp" SCORE_ARGS="--lang de --by-length 10,15,20" CKPT_ROOT="$OUT/ckpt"
run_systems "$OUT/data-bin" "$ref" "$HERE/runs" "$HERE/RESULTS.md" "${MODEL[@]}"
