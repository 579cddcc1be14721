#!/usr/bin/env bash
# Multi30k En->De with source-side syntax: tokenize, parse the English side (constituency trees and dependency
# arc distributions), learn and apply joint BPE, and binarize every input form with fairseq-syntax-preprocess.
#
#   examples/multi30k/prepare.sh [RAW_DIR] [OUT_DIR]
#
# RAW_DIR holds {train,val,test_2016_flickr}.{en,de}[.gz], raw text (default: ../shared/data/multi30k beside the
# repository); OUT_DIR gets tok/ (tokens, trees, arcs), bpe/ and data-bin/{sequence,linearized,preorder,preorder-split}
# (default: examples/multi30k/work); data-bin/sequence also gets the LDD side data.
# The steps and their settings (BPE_SIZE, default 10000 here; CON_BACKEND, PRETERMINALS, MODELS, CON_MODEL,
# DEP_MODEL, THREADS, TREEBANKS, MAX_TRAIN_WORDS: default 0, every training pair is kept) are those of
# examples/prepare_translation.sh.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
RAW="${1:-$HERE/../../../shared/data/multi30k}"
OUT="${2:-$HERE/work}"
BPE_SIZE="${BPE_SIZE:-10000}" MAX_TRAIN_WORDS="${MAX_TRAIN_WORDS:-0}" \
  "$HERE/../prepare_translation.sh" "$RAW" "$OUT" en de raw train:train val:valid test_2016_flickr:test
