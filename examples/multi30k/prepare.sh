#!/usr/bin/env bash
# Multi30k En->De with source-side syntax: tokenize, parse the English side (constituency trees and dependency
# arc distributions), learn and apply joint BPE, and binarize every input form with fairseq-syntax-preprocess.
#
#   examples/multi30k/prepare.sh [RAW_DIR] [OUT_DIR]
#
# RAW_DIR holds {train,val,test_2016_flickr}.{en,de}[.gz] (default: ../shared/data/multi30k beside the repository); OUT_DIR gets
# tok/ (tokens, trees, arcs), bpe/ and data-bin/{sequence,linearized,preorder,preorder-split} (default: examples/multi30k/work);
# data-bin/sequence also gets the LDD side data.
# Settings from the environment:
#   BPE_SIZE     joint BPE merges (default 10000)
#   CON_BACKEND  crf-con | benepar (default crf-con: the better F1 of the two trained here, 82.7 vs 70.6 on held-out
#                PTB-sample sentences; benepar adds POS tags)
#   PRETERMINALS keep | split | drop: the preterminal nodes in the tree input forms (default: drop for crf-con,
#                whose trees carry no POS tags - every preterminal is XX, a token that only lengthens the input;
#                keep for benepar)
#   MODELS       folder of the parser models (default OUT_DIR/models); a missing model is trained there from the
#                local treebanks (UD EWT, PTB sample) with the commands below, so nothing is downloaded
#   CON_MODEL, DEP_MODEL  explicit model paths or names (e.g. benepar_en3 where the network allows)
#   THREADS      torch threads per parser (default 1)
# Parses that already exist in OUT_DIR/tok are kept (delete them to re-parse).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RAW="${1:-$REPO/../shared/data/multi30k}"
OUT="${2:-$HERE/work}"
BPE_SIZE="${BPE_SIZE:-10000}"
CON_BACKEND="${CON_BACKEND:-crf-con}"
MODELS="${MODELS:-$OUT/models}"
THREADS="${THREADS:-1}"
TREEBANKS="${TREEBANKS:-$REPO/../shared/data}"
case "$CON_BACKEND" in
  benepar) CON_MODEL="${CON_MODEL:-$MODELS/benepar-ptb-sample.pt}" PRETERMINALS="${PRETERMINALS:-keep}" ;;
  crf-con) CON_MODEL="${CON_MODEL:-$MODELS/crf-con-ptb-sample.pt}" PRETERMINALS="${PRETERMINALS:-drop}" ;;
  *) echo "CON_BACKEND must be benepar or crf-con, not '$CON_BACKEND'" >&2; exit 1 ;;
esac
DEP_MODEL="${DEP_MODEL:-$MODELS/biaffine-dep-ud-ewt.pt}"
SPLITS=("train:train" "val:valid" "test_2016_flickr:test")  # Multi30k name : fairseq name
mkdir -p "$OUT/tok" "$OUT/bpe" "$OUT/data-bin" "$MODELS"
cd "$REPO"

raw_file() {  # raw_file NAME LANG: the file in RAW, gzipped or not
  for candidate in "$RAW/$1.$2" "$RAW/$1.$2.gz"; do
    if [ -f "$candidate" ]; then echo "$candidate"; return; fi
  done
  echo "missing $RAW/$1.$2[.gz]" >&2; exit 1
}

# 1. Tokenize with sacremoses (-a: aggressive hyphen splitting; no XML escaping: the sacremoses command line
#    always escapes, so the library is called). Brackets in the English source are PTB-escaped (-LRB- ...),
#    because they are tree leaves and the source words must equal the leaves.
tokenize() {  # tokenize LANG ESCAPE(yes|no) INPUT OUTPUT
  python3 - "$@" <<'EOF'
import sys
from fairseq_syntax.parsing.text import ptb_escape_token, read_sentences
lang, escape, source, target = sys.argv[1:]
with open(target, "w", encoding="utf-8") as out:
    for tokens in read_sentences(source, tokenize_lang=lang):
        out.write(" ".join(ptb_escape_token(t) if escape == "yes" else t for t in tokens) + "\n")
EOF
}
for pair in "${SPLITS[@]}"; do
  name="${pair%%:*}" split="${pair##*:}"
  tokenize en yes "$(raw_file "$name" en)" "$OUT/tok/$split.en"
  tokenize de no "$(raw_file "$name" de)" "$OUT/tok/$split.de"
done

# 2. Parsers: trained offline from the local treebanks when missing (2 shared CPU cores: 12-25 min each).
if [ ! -e "$DEP_MODEL" ]; then
  nice -n 10 python3 preprocess/train_parser.py dependency \
    --train "$TREEBANKS/ud-ewt/en_ewt-ud-train.conllu.gz" --dev "$TREEBANKS/ud-ewt/en_ewt-ud-dev.conllu.gz" \
    --output "$DEP_MODEL" --work-dir "$MODELS/work/ud-ewt" --epochs 6 --batch-size 1000 --threads "$THREADS"
fi
if [ ! -e "$CON_MODEL" ]; then
  case "$CON_BACKEND" in
    benepar) nice -n 10 python3 preprocess/train_parser.py benepar --ptb "$TREEBANKS/ptb-sample/wsj_0001-0159.mrg.gz" \
               --output "$CON_MODEL" --work-dir "$MODELS/work/ptb" --epochs 12 --threads "$THREADS" ;;
    crf-con) nice -n 10 python3 preprocess/train_parser.py crf-con --ptb "$TREEBANKS/ptb-sample/wsj_0001-0159.mrg.gz" \
               --output "$CON_MODEL" --work-dir "$MODELS/work/ptb" --epochs 15 --batch-size 1000 --threads "$THREADS" ;;
  esac
fi

# 3. Parse the English side: one tree per line (.tree), and the arc distributions (.arcs.jsonl) with the
#    1-best dependency trees (.conllu). Fallbacks are listed in *.skipped. The side data is gzipped (~50 MB).
for pair in "${SPLITS[@]}"; do
  split="${pair##*:}"
  if [ ! -s "$OUT/tok/$split.tree" ]; then
    python3 preprocess/parse_constituency.py --backend "$CON_BACKEND" --model "$CON_MODEL" \
      --input "$OUT/tok/$split.en" --output "$OUT/tok/$split.tree" --threads "$THREADS"
  fi
  if [ ! -s "$OUT/tok/$split.arcs.jsonl.gz" ]; then
    python3 preprocess/parse_dependency.py --model "$DEP_MODEL" --input "$OUT/tok/$split.en" \
      --arcs "$OUT/tok/$split.arcs.jsonl.gz" --conllu "$OUT/tok/$split.conllu" --threads "$THREADS"
  fi
done

# 4. Joint BPE on the training tokens; the word-level trees and arcs go along unchanged
#    (fairseq-syntax-preprocess carries the segmentation onto the tree leaves).
subword-nmt learn-joint-bpe-and-vocab --input "$OUT/tok/train.en" "$OUT/tok/train.de" -s "$BPE_SIZE" \
  -o "$OUT/bpe/codes" --write-vocabulary "$OUT/bpe/vocab.en" "$OUT/bpe/vocab.de"
for pair in "${SPLITS[@]}"; do
  split="${pair##*:}"
  for lang in en de; do
    subword-nmt apply-bpe -c "$OUT/bpe/codes" --vocabulary "$OUT/bpe/vocab.$lang" --vocabulary-threshold 1 \
      < "$OUT/tok/$split.$lang" > "$OUT/bpe/$split.$lang"
  done
  cp "$OUT/tok/$split.tree" "$OUT/bpe/$split.tree"
  cp "$OUT/tok/$split.arcs.jsonl.gz" "$OUT/bpe/$split.arcs.jsonl.gz"
done

# 5. One fairseq data directory per input form.
for form in sequence linearized preorder; do
  fairseq-syntax-preprocess --source-lang en --target-lang de \
    --trainpref "$OUT/bpe/train" --validpref "$OUT/bpe/valid" --testpref "$OUT/bpe/test" \
    --trees-suffix tree --form "$form" --preterminals "$PRETERMINALS" --destdir "$OUT/data-bin/$form" \
    --joined-dictionary
done
# Hierarchical accumulation's convention (Nguyen et al.): preterminals only above the pieces of a BPE-split word
fairseq-syntax-preprocess --source-lang en --target-lang de \
  --trainpref "$OUT/bpe/train" --validpref "$OUT/bpe/valid" --testpref "$OUT/bpe/test" \
  --trees-suffix tree --form preorder --preterminals split --destdir "$OUT/data-bin/preorder-split" \
  --joined-dictionary
# 6. The labeled dependency distributions (UD labels grouped into Pu & Sima'an's 16 groups) for the LDD models,
#    added to the sequence-form data directory.
fairseq-syntax-preprocess-dependencies --source-lang en --target-lang de \
  --trainpref "$OUT/bpe/train" --validpref "$OUT/bpe/valid" --testpref "$OUT/bpe/test" \
  --arcs-suffix arcs.jsonl.gz --labels universal --destdir "$OUT/data-bin/sequence"
echo "done: $OUT/data-bin/{sequence,linearized,preorder,preorder-split}"
