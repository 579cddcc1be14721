#!/usr/bin/env bash
# The dataset-independent data preparation of the translation recipes (examples/multi30k/prepare.sh,
# examples/iwslt15_en_vi/prepare.sh): normalize the text, parse the source side (constituency trees and dependency
# arc distributions), learn and apply joint BPE, and binarize every input form with fairseq-syntax-preprocess.
#
#   examples/prepare_translation.sh RAW_DIR OUT_DIR SRC TGT TEXT RAW_NAME:SPLIT...
#
# RAW_DIR holds RAW_NAME.{SRC,TGT}[.gz] for every RAW_NAME:SPLIT (SPLIT: train, valid or test; e.g. val:valid).
# All missing files are named before anything runs.
# TEXT says what the raw files are:
#   raw        untokenized text: tokenized here with sacremoses (-l LANG -a, no XML escaping; the library is called
#              because the sacremoses command line always escapes)
#   tokenized  already Moses-tokenized text carrying Moses' XML escapes (&apos; &quot; &amp; &lt; &gt; &#91; ...):
#              the entities are unescaped token by token and nothing is re-tokenized
# Either way the brackets of the SRC side are PTB-escaped (( -> -LRB- ...): they are tree leaves, and the source
# words must equal the leaves.
#
# OUT_DIR gets tok/ (tokens, trees, arcs), bpe/ and data-bin/{sequence,linearized,preorder,preorder-split};
# data-bin/sequence also gets the LDD side data, and each form a parsers.json naming the parsers of its syntax.
# With CONTROLS, also data-bin/FORM.CONTROL for every form and control (e.g. preorder.random, sequence.random);
# to add controls to a folder made before, use `fairseq-syntax-study run` (docs/study.md), which makes only what is
# missing.
# Settings from the environment (the dataset scripts set their own defaults for BPE_SIZE and MAX_TRAIN_WORDS):
#   BPE_SIZE         joint BPE merges (default 10000)
#   MAX_TRAIN_WORDS  0 (default): keep every training pair. N > 0: leave out the training pairs with more than N
#                    words, or no word, on either side, before parsing. The pairs left out are counted on the
#                    console and listed in tok/train.removed.tsv (input line, reason, words per side). Valid and
#                    test are never filtered: every one of their lines must be translated and scored.
#   MAX_POSITIONS    the longest source fairseq-syntax-preprocess accepts, in tokens of each input form with EOS
#                    (default 1024; give the training command the same --max-source-positions). A longer pair
#                    stops the run with its file and line: nothing is skipped, so all forms hold the same pairs.
#   CON_BACKEND      crf-con | benepar (default crf-con: the better F1 of the two trained here on held-out
#                    PTB-sample sentences, preprocess/RESULTS.md; benepar predicts its own POS tags)
#   TAGGER           POS tagger whose tags label crf-con's preterminals (crf-con writes XX): default
#                    MODELS/tagger-ptb-sample.pt, trained when missing; none: keep XX
#   PRETERMINALS     auto | keep | split | drop: the preterminal nodes in the tree input forms (default auto:
#                    McDonald & Chiang's trees, whose POS nodes are kept; where a tree has no POS tags - crf-con
#                    writes every preterminal as XX - a POS node is kept only over a BPE-split word, so the word's
#                    pieces still form its subtree, Figure 1b; see fairseq_syntax.core.trees.preorder)
#   MODELS           folder of the parser models (default OUT_DIR/models); a missing model of the default names
#                    (crf-con-ptb-sample.pt, benepar-ptb-sample.pt, tagger-ptb-sample.pt, biaffine-dep-ud-ewt.pt) is
#                    trained there from the local treebanks (UD EWT, PTB sample) with the commands below, so nothing
#                    is downloaded (hours on 2 CPU cores, minutes on a GPU; each command resumes from its last epoch
#                    when run again, and a run record goes to preprocess/runs/)
#   CON_MODEL, DEP_MODEL, TAGGER  a model file or folder, or a pretrained model's name (benepar_en3, crf-con-en,
#                    biaffine-dep-en; docs/parsers.md has a table by language), which goes to its library unchanged
#                    and is downloaded once (before anything else runs: without the network the run stops in one
#                    line, "could not download NAME: ...", having trained and parsed nothing). A model given here is
#                    never trained, unless TRAIN_PARSERS=1 and it is a file that is not there yet.
#   DEP_BACKEND      biaffine | stanza (default biaffine; stanza needs DEP_MODEL, e.g. de for a German source)
#   TRAIN_PARSERS    1: train a missing CON_MODEL, DEP_MODEL or TAGGER file with the commands below (default: only
#                    the default model files are trained when missing)
#   DEP_LABELS       stanford | universal: the dependency label scheme of the LDD groups (default: the parser's,
#                    which fairseq-syntax-parse reads from the model's labels and records beside the arcs)
#   THREADS          torch threads per parser (default 1)
#   WORKERS          parser processes per parse, each on its own core with one torch thread (default 1):
#                    passed as --workers to both parse commands, which cut the input into WORKERS shards
#                    and merge them; a parse killed and started again keeps its finished shards (README,
#                    "A large corpus")
#   CONTROLS         control structures to make data directories of too (fairseq_syntax/parsing/controls.py):
#                    "random" (random binary bracketings over each tree's POS nodes, random projective dependency
#                    trees with the parser's labels), "struct" (random trees with each parse's number of phrases,
#                    their numbers of children and their labels: the structure only changes; trees only), "left",
#                    "right" (branching trees, dependency chains), several separated by spaces; default none. Each
#                    gives data-bin/FORM.CONTROL for every form it changes (struct: the tree forms), with the
#                    parses' words, BPE and dictionary, the control recorded in its syntax.json and parsers.json
#   CONTROL_SEEDS    the seeds to draw each random control with (default: CONTROL_SEED, default 1; each line draws
#                    from the seed and its line number): seed 1 gives data-bin/FORM.CONTROL, seed K
#                    data-bin/FORM.CONTROL-sK (a study run draws its control with its training seed)
#   TREEBANKS        the treebanks for parser training (default ../shared/data beside the repository)
#   PARSES           a parse archive (fairseq_syntax.parsing.archive, e.g. examples/multi30k/parses): the parses of
#                    the source lines are taken from it (found by their tokens, so a subset of its corpus works too)
#                    and no parser is trained or run; a line it has no parse for stops the run naming the line.
#                    Default: none, parse
# Parses in OUT_DIR/tok are made again only when the models that made them or their tokens changed, as their
# records say (OUTPUT.parse.json, fairseq_syntax/parsing/parse_records.py: a model by file digest or by name); a
# parse with no record (copied in from elsewhere) is kept. A file's date never counts (delete a parse to re-parse).
set -euo pipefail

if [ $# -lt 6 ]; then
  echo "usage:$(sed -n 6p "${BASH_SOURCE[0]}" | cut -c2-)" >&2
  exit 1
fi
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# local_or_name VALUE: a model that exists relative to the caller's folder, made absolute (the steps below run from
# the repository root); anything else as given: a path that is not there stays one (and is named as missing), a
# name goes to its library
local_or_name() {
  if [ -e "$1" ]; then realpath "$1"; else printf '%s\n' "$1"; fi
}
GIVEN_CON_MODEL="${CON_MODEL:+1}" GIVEN_DEP_MODEL="${DEP_MODEL:+1}" GIVEN_TAGGER="${TAGGER:+1}"
[ -n "${CON_MODEL:-}" ] && CON_MODEL="$(local_or_name "$CON_MODEL")"
[ -n "${DEP_MODEL:-}" ] && DEP_MODEL="$(local_or_name "$DEP_MODEL")"
[ -n "${TAGGER:-}" ] && [ "$TAGGER" != none ] && TAGGER="$(local_or_name "$TAGGER")"
RAW="$(realpath -m "$1")" OUT="$(realpath -m "$2")" SRC=$3 TGT=$4 TEXT=$5
shift 5
SPLITS=("$@")
BPE_SIZE="${BPE_SIZE:-10000}"
MAX_TRAIN_WORDS="${MAX_TRAIN_WORDS:-0}"
MAX_POSITIONS="${MAX_POSITIONS:-1024}"
CON_BACKEND="${CON_BACKEND:-crf-con}"
PRETERMINALS="${PRETERMINALS:-auto}"
MODELS="$(realpath -m "${MODELS:-$OUT/models}")"  # absolute: the steps below run from the repository root
THREADS="${THREADS:-1}"
WORKERS="${WORKERS:-1}"
CONTROLS="${CONTROLS:-}" CONTROL_SEEDS="${CONTROL_SEEDS:-${CONTROL_SEED:-1}}"
PARSES="${PARSES:+$(realpath -m "$PARSES")}"
TREEBANKS="$(realpath -m "${TREEBANKS:-$REPO/../shared/data}")"
case "$CON_BACKEND" in
  benepar) CON_MODEL="${CON_MODEL:-$MODELS/benepar-ptb-sample.pt}" TAGGER="${TAGGER:-none}" ;;
  crf-con) CON_MODEL="${CON_MODEL:-$MODELS/crf-con-ptb-sample.pt}" TAGGER="${TAGGER:-$MODELS/tagger-ptb-sample.pt}" ;;
  *) echo "CON_BACKEND must be benepar or crf-con, not '$CON_BACKEND'" >&2; exit 1 ;;
esac
DEP_BACKEND="${DEP_BACKEND:-biaffine}"
case "$DEP_BACKEND" in
  biaffine) DEP_MODEL="${DEP_MODEL:-$MODELS/biaffine-dep-ud-ewt.pt}" ;;
  stanza) [ -n "${DEP_MODEL:-}" ] || { echo "DEP_BACKEND=stanza: give DEP_MODEL (a stanza name such as $SRC)" >&2
                                       exit 1; } ;;
  *) echo "DEP_BACKEND must be biaffine or stanza, not '$DEP_BACKEND'" >&2; exit 1 ;;
esac
TRAIN_PARSERS="${TRAIN_PARSERS:-}" DEP_LABELS="${DEP_LABELS:-}"
case "$DEP_LABELS" in
  ''|stanford|universal) ;;
  *) echo "DEP_LABELS must be stanford or universal, not '$DEP_LABELS'" >&2; exit 1 ;;
esac
case "$TEXT" in
  raw|tokenized) ;;
  *) echo "TEXT must be raw or tokenized, not '$TEXT'" >&2; exit 1 ;;
esac

for control in $CONTROLS; do  # a misspelt control stops the run now, not after the parsing
  python3 -c 'import sys; from fairseq_syntax.core.control_kinds import CONTROLS as known
sys.exit(None if sys.argv[1] in known else f"CONTROLS: {sys.argv[1]!r} is not one of {known}")' "$control"
done
split_args=()  # fairseq-syntax-preprocess's prefixes of the parses (step 4)
# dependency_labels: the label scheme of the LDD groups: DEP_LABELS, else the parser's, as the training split's arcs
# record it (fairseq-syntax-parse reads it from the model's labels; parses of an archive or copied in: their labels)
dependency_labels() {
  if [ -n "$DEP_LABELS" ]; then echo "$DEP_LABELS"
  else python3 -m fairseq_syntax.parsing.parse_records labels "$OUT/tok/train.arcs.jsonl.gz"; fi
}
# preprocess_form FORM PRETERMINALS DESTDIR [MORE fairseq-syntax-preprocess ARGS]; fairseq-preprocess never
# overwrites a dictionary, so DESTDIR is made afresh
preprocess_form() {
  rm -rf "$3"
  fairseq-syntax-preprocess --source-lang "$SRC" --target-lang "$TGT" "${split_args[@]}" \
    --trees-suffix tree --form "$1" --preterminals "$2" --max-source-positions "$MAX_POSITIONS" \
    --destdir "$3" --joined-dictionary --bpe-codes "$OUT/bpe/codes" --bpe-vocabulary "$OUT/bpe/vocab.$SRC" \
    --bpe-vocabulary-threshold 1 "${@:4}"
}

# make_controls: step 8. Each control structure (CONTROLS, fairseq_syntax/parsing/controls.py) drawn with each of
#    CONTROL_SEEDS: each parse's structure replaced, line by line under the seed, in bpe/NAME/ (NAME: CONTROL for seed
#    1, CONTROL-sK for seed K) beside links to the BPE'd text; data-bin/FORM.NAME made from them as data-bin/FORM from
#    the parses, for every form whose input the control changes (the tree forms; sequence too for a control of the
#    dependency data, with the LDD side data), with the real FORM's dictionary (sequence: the same token data; a
#    tree form's dictionary also holds "(X", the binary controls' inner-node label, in place of a padding filler, so
#    every other token keeps its index), its parsers.json, and the control recorded in syntax.json and parsers.json.
make_controls() {
  local control seed name changes forms form dict preterminals split lang dirs control_args
  for control in $CONTROLS; do
    changes=$(fairseq-syntax-control inputs --control "$control")
    forms="linearized preorder preorder-split"
    if grep -qx arcs <<< "$changes"; then forms="sequence $forms"; fi
    for seed in $CONTROL_SEEDS; do
      name=$(python3 -c 'import sys; from fairseq_syntax.core.control_kinds import control_data_name
print(control_data_name("", sys.argv[1], int(sys.argv[2]))[1:])' "$control" "$seed")
      dirs=()
      for form in $forms; do dirs+=("$OUT/data-bin/$form.$name"); done
      mkdir -p "$OUT/bpe/$name"
      control_args=()
      for pair in "${SPLITS[@]}"; do
        split="${pair##*:}"
        fairseq-syntax-control make --control "$control" --seed "$seed" "$OUT/tok/$split" "$OUT/bpe/$name/$split"
        for lang in "$SRC" "$TGT"; do ln -sfn "../$split.$lang" "$OUT/bpe/$name/$split.$lang"; done
        control_args+=("--${split}pref" "$OUT/bpe/$name/$split")
      done
      for form in $forms; do
        dict="$OUT/data-bin/$form/dict.$SRC.txt"
        if [ "$form" != sequence ]; then
          fairseq-syntax-control dictionary "$dict" "$OUT/bpe/$name/dict.$form.txt"
          dict="$OUT/bpe/$name/dict.$form.txt"
        fi
        preterminals=$PRETERMINALS
        [ "$form" = preorder-split ] && preterminals=split
        # the control's prefixes come last, and the last --trainpref (--validpref, --testpref) is the one read
        preprocess_form "${form%-split}" "$preterminals" "$OUT/data-bin/$form.$name" "${control_args[@]}" \
          --srcdict "$dict"
        cp "$OUT/data-bin/$form/parsers.json" "$OUT/data-bin/$form.$name/parsers.json"
      done
      if grep -qx arcs <<< "$changes"; then
        fairseq-syntax-preprocess-dependencies --source-lang "$SRC" --target-lang "$TGT" "${control_args[@]}" \
          --arcs-suffix arcs.jsonl.gz --labels "$LABELS" --destdir "$OUT/data-bin/sequence.$name"
      fi
      fairseq-syntax-control record --control "$control" --seed "$seed" "${dirs[@]}"
      echo "control $control (seed $seed): ${dirs[*]}"
    done
  done
}
# 0. Every raw file, gzipped or not; all missing ones are named at once.
declare -A RAW_FILE
missing=()
for pair in "${SPLITS[@]}"; do
  name="${pair%%:*}" split="${pair##*:}"
  case "$split" in
    train|valid|test) ;;
    *) echo "split '$pair': the part after ':' must be train, valid or test" >&2; exit 1 ;;
  esac
  for lang in "$SRC" "$TGT"; do
    if [ -f "$RAW/$name.$lang" ]; then RAW_FILE[$name.$lang]="$RAW/$name.$lang"
    elif [ -f "$RAW/$name.$lang.gz" ]; then RAW_FILE[$name.$lang]="$RAW/$name.$lang.gz"
    else missing+=("$name.$lang"); fi
  done
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "$RAW must hold (each file plain or .gz):" >&2
  for pair in "${SPLITS[@]}"; do echo "  ${pair%%:*}.$SRC  ${pair%%:*}.$TGT   (${pair##*:} split)" >&2; done
  echo "missing: ${missing[*]}" >&2
  exit 1
fi
# to_train MODEL GIVEN: whether step 2 trains MODEL (a file not there: a default one, or any with TRAIN_PARSERS=1)
to_train() {
  [ ! -e "$1" ] && { [ -z "$2" ] || [ "$TRAIN_PARSERS" = 1 ]; }
}
# The models given by name are fetched before anything is made (a local model is only checked to be there): without
# the network this ends the run in one line, "could not download NAME: ...", with nothing trained or parsed.
if [ -z "$PARSES" ]; then
  if ! to_train "$CON_MODEL" "$GIVEN_CON_MODEL"; then
    python3 -m fairseq_syntax.cli.parse fetch --kind constituency --backend "$CON_BACKEND" --model "$CON_MODEL" \
      --lang "$SRC"
  fi
  if [ "$TAGGER" != none ] && ! to_train "$TAGGER" "$GIVEN_TAGGER" && [ ! -e "$TAGGER" ]; then
    echo "error: TAGGER=$TAGGER: no such tagger file (TRAIN_PARSERS=1 trains one there)" >&2
    exit 1
  fi
  if ! to_train "$DEP_MODEL" "$GIVEN_DEP_MODEL"; then
    python3 -m fairseq_syntax.cli.parse fetch --kind dependency --backend "$DEP_BACKEND" --model "$DEP_MODEL" \
      --lang "$SRC"
  fi
fi
mkdir -p "$OUT/tok" "$OUT/bpe" "$OUT/data-bin" "$MODELS"
cd "$REPO"

# 1. Normalize each split's pair of files into tok/SPLIT.{SRC,TGT} (fairseq_syntax/parsing/normalize.py): one
#    sentence per line, tokens separated by one space. The two sides must have the same number of lines; an empty
#    line is an error outside a filtered training split. A file whose content does not change keeps its date, so
#    its parses (step 3) are kept: parses made elsewhere from the same tokens (docs/parsers.md, "A large corpus")
#    and put in tok/ are kept too.
normalize() {  # normalize TEXT SRC TGT SRC_FILE TGT_FILE OUT_PREFIX MAX_WORDS REMOVED_LISTING
  python3 -m fairseq_syntax.parsing.normalize --text "$1" -s "$2" -t "$3" --source "$4" --target "$5" --output "$6" \
    --max-words "$7" --removed "$8"
}
replace_if_changed() {  # replace_if_changed NEW OLD
  if cmp -s "$1" "$2"; then rm "$1"; else mv "$1" "$2"; fi
}
for pair in "${SPLITS[@]}"; do
  name="${pair%%:*}" split="${pair##*:}"
  max_words=0
  [ "$split" = train ] && max_words=$MAX_TRAIN_WORDS
  rm -f "$OUT/tok/$split.removed.tsv"  # a listing of an earlier run with another MAX_TRAIN_WORDS
  normalize "$TEXT" "$SRC" "$TGT" "${RAW_FILE[$name.$SRC]}" "${RAW_FILE[$name.$TGT]}" "$OUT/tok/$split.new" \
    "$max_words" "$OUT/tok/$split.removed.tsv"
  for lang in "$SRC" "$TGT"; do
    replace_if_changed "$OUT/tok/$split.new.$lang" "$OUT/tok/$split.$lang"
  done
done

# 2. Parsers: the models given by name were fetched above; a missing default model file (or, with
#    TRAIN_PARSERS=1, any missing model file) is trained offline from the local treebanks, with the settings of
#    preprocess/RESULTS.md. Not with PARSES: the archive's parses are used.
PTB_SAMPLE="$TREEBANKS/ptb-sample/wsj_0001-0159.mrg.gz"
SUPAR_SIZE=(--n-lstm-hidden 400 --n-lstm-layers 3 --n-mlp 500)  # SuPar's published encoder and MLP sizes
tagger_args=()
if [ -z "$PARSES" ] && [ "$TAGGER" != none ]; then tagger_args=(--tagger "$TAGGER"); fi
if [ -n "$PARSES" ]; then
  split_names=()
  for pair in "${SPLITS[@]}"; do split_names+=("${pair##*:}"); done
  python3 -m fairseq_syntax.parsing.archive unpack "$PARSES" "$OUT/tok" --source "$SRC" --splits "${split_names[@]}"
else
  if to_train "$DEP_MODEL" "$GIVEN_DEP_MODEL"; then
    [ "$DEP_BACKEND" = biaffine ] || { echo "error: DEP_MODEL=$DEP_MODEL: no such file" >&2; exit 1; }
    nice -n 10 python3 preprocess/train_parser.py dependency \
      --train "$TREEBANKS/ud-ewt/en_ewt-ud-train.conllu.gz" --dev "$TREEBANKS/ud-ewt/en_ewt-ud-dev.conllu.gz" \
      --output "$DEP_MODEL" --work-dir "$MODELS/work/ud-ewt" --epochs 60 --batch-size 1000 "${SUPAR_SIZE[@]}" \
      --threads "$THREADS"
  fi
  if to_train "$CON_MODEL" "$GIVEN_CON_MODEL"; then
    case "$CON_BACKEND" in
      benepar) nice -n 10 python3 preprocess/train_parser.py benepar --ptb "$PTB_SAMPLE" \
                 --output "$CON_MODEL" --work-dir "$MODELS/work/ptb" --epochs 12 --threads "$THREADS" ;;
      crf-con) nice -n 10 python3 preprocess/train_parser.py crf-con --ptb "$PTB_SAMPLE" \
                 --output "$CON_MODEL" --work-dir "$MODELS/work/ptb" --epochs 60 --batch-size 1000 \
                 "${SUPAR_SIZE[@]}" --threads "$THREADS" ;;
    esac
  fi
  if [ "$TAGGER" != none ] && to_train "$TAGGER" "$GIVEN_TAGGER"; then
    nice -n 10 python3 preprocess/train_parser.py tagger --ptb "$PTB_SAMPLE" \
      --output "$TAGGER" --work-dir "$MODELS/work/ptb-tagger" --epochs 18 --threads "$THREADS"
  fi
fi

# 3. Parse the source side: one tree per line (.tree), and the arc distributions (.arcs.jsonl.gz) with the
#    1-best dependency trees (.conllu). A sentence a parser cannot handle (over its 300-word limit, a parser
#    error) gets a flat structure; the count is printed and the lines are listed in *.skipped. A parse is made
#    again only when its record (OUTPUT.parse.json) names other models or other tokens; one without a record
#    (copied in) is kept. With PARSES they were unpacked in step 2.
con_roles=("constituency=$CON_MODEL")
[ "$TAGGER" != none ] && con_roles+=("tagger=$TAGGER")
for pair in "${SPLITS[@]}"; do
  [ -n "$PARSES" ] && break
  split="${pair##*:}"
  tree="$OUT/tok/$split.tree"
  if ! python3 -m fairseq_syntax.parsing.parse_records current "$tree" --input "$OUT/tok/$split.$SRC" \
       "${con_roles[@]}"; then
    python3 -m fairseq_syntax.cli.parse constituency --backend "$CON_BACKEND" --model "$CON_MODEL" "${tagger_args[@]}" \
      --input "$OUT/tok/$split.$SRC" --output "$tree" --lang "$SRC" --threads "$THREADS" --workers "$WORKERS"
  fi
  arcs="$OUT/tok/$split.arcs.jsonl.gz"
  if ! python3 -m fairseq_syntax.parsing.parse_records current "$arcs" --input "$OUT/tok/$split.$SRC" \
       "dependency=$DEP_MODEL"; then
    python3 -m fairseq_syntax.cli.parse dependency --backend "$DEP_BACKEND" --model "$DEP_MODEL" \
      --input "$OUT/tok/$split.$SRC" --output "$arcs" --conllu "$OUT/tok/$split.conllu" --lang "$SRC" --threads "$THREADS" --workers "$WORKERS"
  fi
done
LABELS="$(dependency_labels)"

# 4. Joint BPE on the training tokens; the word-level trees and arcs go along unchanged
#    (fairseq-syntax-preprocess carries the segmentation onto the tree leaves).
subword-nmt learn-joint-bpe-and-vocab --input "$OUT/tok/train.$SRC" "$OUT/tok/train.$TGT" -s "$BPE_SIZE" \
  -o "$OUT/bpe/codes" --write-vocabulary "$OUT/bpe/vocab.$SRC" "$OUT/bpe/vocab.$TGT"
split_args=()
for pair in "${SPLITS[@]}"; do
  split="${pair##*:}"
  for lang in "$SRC" "$TGT"; do
    subword-nmt apply-bpe -c "$OUT/bpe/codes" --vocabulary "$OUT/bpe/vocab.$lang" --vocabulary-threshold 1 \
      < "$OUT/tok/$split.$lang" > "$OUT/bpe/$split.$lang"
  done
  cp "$OUT/tok/$split.tree" "$OUT/bpe/$split.tree"
  cp "$OUT/tok/$split.arcs.jsonl.gz" "$OUT/bpe/$split.arcs.jsonl.gz"
  split_args+=("--${split}pref" "$OUT/bpe/$split")
done

# 5. One fairseq data directory per input form, and hierarchical accumulation's convention (Nguyen et al.):
#    preterminals only above the pieces of a BPE-split word.
#    Each records in its syntax.json the BPE of step 4 (its files copied beside) and the parser of step 3, which
#    fairseq-interactive applies to its input (none with PARSES: the archive's parses were made elsewhere).
parser_args=()
if [ -z "$PARSES" ]; then
  parser_args=(--parser-backend "$CON_BACKEND" --parser-model "$CON_MODEL")
  if [ "$TAGGER" != none ]; then parser_args+=(--parser-tagger "$TAGGER"); fi
fi
for form in sequence linearized preorder; do
  preprocess_form "$form" "$PRETERMINALS" "$OUT/data-bin/$form" "${parser_args[@]}"
done
preprocess_form preorder split "$OUT/data-bin/preorder-split" "${parser_args[@]}"
# 6. The labeled dependency distributions (the parser's labels, Stanford or universal, grouped into Pu & Sima'an's
#    16 groups) for the LDD models, added to the sequence-form data directory.
fairseq-syntax-preprocess-dependencies --source-lang "$SRC" --target-lang "$TGT" "${split_args[@]}" \
  --arcs-suffix arcs.jsonl.gz --labels "$LABELS" --destdir "$OUT/data-bin/sequence"
# 7. Which parsers made the parses of each form (fairseq_syntax.parsing.provenance): every run record names them.
#    With PARSES, the parsers the archive's manifest names.
if [ -n "$PARSES" ]; then
  for form in linearized preorder preorder-split; do
    python3 -m fairseq_syntax.parsing.archive provenance "$OUT/tok/parses.json" "$OUT/data-bin/$form/parsers.json" \
      --without dependency
  done
  python3 -m fairseq_syntax.parsing.archive provenance "$OUT/tok/parses.json" "$OUT/data-bin/sequence/parsers.json" \
    dependency
else
  con_models=("constituency=$CON_MODEL")
  if [ "$TAGGER" != none ]; then con_models+=("tagger=$TAGGER"); fi
  for form in linearized preorder preorder-split; do
    python3 -m fairseq_syntax.parsing.provenance "$OUT/data-bin/$form/parsers.json" "${con_models[@]}"
  done
  python3 -m fairseq_syntax.parsing.provenance "$OUT/data-bin/sequence/parsers.json" "dependency=$DEP_MODEL" \
    --dependency-labels "$LABELS"
fi
# 8. The control structures (CONTROLS, CONTROL_SEEDS; make_controls above).
make_controls
echo "done: $OUT/data-bin/{sequence,linearized,preorder,preorder-split}"
