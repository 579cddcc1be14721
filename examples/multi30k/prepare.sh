#!/usr/bin/env bash
# Multi30k En->De with source-side syntax: tokenize, parse the English side (constituency trees and dependency
# arc distributions), learn and apply joint BPE, and binarize every input form with fairseq-syntax-preprocess.
#
#   examples/multi30k/prepare.sh [RAW_DIR] [OUT_DIR]
#
# RAW_DIR holds {train,val,test_2016_flickr}.{en,de}[.gz], raw text (default: ../shared/data/multi30k beside the
# repository); OUT_DIR gets tok/ (tokens, trees, arcs), bpe/ and data-bin/{sequence,linearized,preorder,preorder-split}
# (default: examples/multi30k/work); data-bin/sequence also gets the LDD side data.
# With TRAIN_PAIRS, the parses come from examples/multi30k/parses/ (the committed, checksummed parses of the
# study's subset, TRAIN_PAIRS=10000 SUBSET_SEED=1, and of valid and test; see its README) when it is there: no
# parser is trained or run, and a fresh machine has every data directory in minutes. PARSES= (empty) parses
# instead, with the parsers of preprocess/RESULTS.md (trained when missing: hours), as the whole corpus needs.
# TRAIN_PAIRS=N (default 0: all 29,000) trains on N pairs drawn by subset.py (SUBSET_SEED, default 1) into
# OUT_DIR/raw. The study itself is `fairseq-syntax-study run examples/multi30k/study.toml`, which makes its data
# (its controls with each training seed included) from the same parses.
# The other steps and settings (BPE_SIZE, default 10000 here; CONTROLS, CONTROL_SEEDS, CON_BACKEND,
# PRETERMINALS, MODELS, CON_MODEL, DEP_MODEL, THREADS, WORKERS, TREEBANKS, MAX_TRAIN_WORDS: default 0, every training
# pair is kept) are those of examples/prepare_translation.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RAW="${1:-$HERE/../../../shared/data/multi30k}"
OUT="${2:-$HERE/work}"
TRAIN_PAIRS="${TRAIN_PAIRS:-0}"
if [ -z "${PARSES+set}" ] && [ "$TRAIN_PAIRS" != 0 ] && [ -f "$HERE/parses/MANIFEST.json" ]; then
  PARSES="$HERE/parses"  # the committed parses hold the study's subset (10,000 pairs, seed 1), valid and test
fi
if [ "$TRAIN_PAIRS" != 0 ]; then
  python3 "$HERE/subset.py" "$RAW" "$OUT/raw" --pairs "$TRAIN_PAIRS" --seed "${SUBSET_SEED:-1}"
  RAW="$OUT/raw"
fi
PARSES="${PARSES:-}" BPE_SIZE="${BPE_SIZE:-10000}" MAX_TRAIN_WORDS="${MAX_TRAIN_WORDS:-0}" \
  "$HERE/../prepare_translation.sh" "$RAW" "$OUT" en de raw train:train val:valid test_2016_flickr:test
