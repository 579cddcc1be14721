#!/usr/bin/env bash
# IWSLT'15 English->Vietnamese (the Stanford NMT release) with source-side syntax: undo the XML escapes, parse the
# English side (constituency trees and dependency arc distributions), learn and apply joint BPE, and binarize every
# input form with fairseq-syntax-preprocess.
#
#   examples/iwslt15_en_vi/prepare.sh IWSLT_DIR [OUT_DIR]
#
# IWSLT_DIR holds the files of https://nlp.stanford.edu/projects/nmt/ (each plain or .gz):
#   train.en train.vi       training pairs (133K lines)
#   tst2012.en tst2012.vi   dev set (1,553 lines)
#   tst2013.en tst2013.vi   test set (1,268 lines)
# The text is already Moses-tokenized with XML escapes (&apos; &quot; &amp; ...): the entities are unescaped on both
# sides, nothing is re-tokenized, and English brackets are PTB-escaped (-LRB- ...).
# OUT_DIR (default examples/iwslt15_en_vi/work) gets tok/, bpe/ and data-bin/{sequence,linearized,preorder,
# preorder-split}; tok/test.vi is tst2013.vi with its entities unescaped, the reference run.sh scores against.
# Settings (examples/prepare_translation.sh has them all):
#   BPE_SIZE         joint BPE merges (default 8000, McDonald & Chiang 2021, section 3.1)
#   MAX_TRAIN_WORDS  training pairs with more words than this on a side, or an empty side, are left out, counted and
#                    listed in tok/train.removed.tsv (default 80; 0 keeps them all); tst2012/tst2013 are never filtered
#   MAX_POSITIONS    longest source of any input form in tokens (default 1024; run.sh uses the same)
#   CON_BACKEND, PRETERMINALS, MODELS, CON_MODEL, DEP_MODEL, THREADS, TREEBANKS: as in prepare_translation.sh
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ $# -lt 1 ]; then
  sed -n '6,11p' "${BASH_SOURCE[0]}" | cut -c3- >&2
  exit 1
fi
BPE_SIZE="${BPE_SIZE:-8000}" MAX_TRAIN_WORDS="${MAX_TRAIN_WORDS:-80}" \
  "$HERE/../prepare_translation.sh" "$1" "${2:-$HERE/work}" en vi tokenized train:train tst2012:valid tst2013:test
