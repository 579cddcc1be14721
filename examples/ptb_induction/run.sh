#!/usr/bin/env bash
# Tree Transformer grammar induction on the PTB sample: `examples/ptb_induction/run.sh --help`.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

usage() {
  cat << 'USAGE'
usage: examples/ptb_induction/run.sh [options] [DATA_DIR]

Tree Transformer (Wang, Lee & Chen 2019) and a plain Transformer encoder (roberta_prenorm) of the same size,
trained at once as masked LMs on raw text (never trees; one thread each, niced); then the Tree Transformer's
grammar induction scored on the PTB sample wsj_0001-0159 (Algorithm 1: m=2 with threshold 0.8, m=1 and 3, each
layer alone, the rule chosen on every 10th sentence, without </s>) and both models' masked-word perplexity
(section 7.5).

DATA_DIR: default ../shared/data (its SOURCES.md); on a GPU machine .window/data (bench/cuda/window.sh prepare).

options (each run's folders get a suffix naming its settings; the defaults have none):
  --text ptb|mixed        ptb (default): the WSJ text (ptb-lm/, sections 21-24) and the PTB sample's words,
                          Mikolov's preprocessing; -ptb-text. mixed: Multi30k, UD EWT and SST train words
  --eval-text             with --text mixed: add the PTB sample's words; -eval-text
  --diagonal one|zero     one (default): eq. 3's C_ii = 1. zero: C_ii = 0, the authors' code; -diagonal-zero
  --optimiser recipe|authors
                          recipe (default): lr 1e-3 with warm-up, 4096-token batches. authors: Adam lr 1e-4
                          constant, eps 1e-9, 64-sentence batches, clipping 1.5; -authors-optimiser
  --model-size small|medium|paper
                          6 layers x 128, 4 heads, FFN 512 (default); 8 x 256, 4 heads, FFN 1024 (-medium);
                          10 x 512, 8 heads, FFN 2048 (-paper)
  --seed N                default 1; -seedN otherwise
  --device cpu|cuda       default cpu; cuda trains in fp32
  --updates N             training updates per model (default 450); run again to go on from the newest whole
                          checkpoint (with more updates, to train longer)
  --precision bf16|fp32   on a CPU: bf16 autocast (the default with bf16 instructions) or fp32
  --stop-hours H          stop each training after H hours (fairseq-train --stop-time-hours)
  --restart               train afresh, not from the run's checkpoints
  --nice N                the niceness of every step (default 10)
  -h, --help              this text

The headline setting (~40 min per model on a free core; its figure is copied beside RESULTS.md):
  examples/ptb_induction/run.sh --diagonal zero --optimiser authors --precision fp32 --updates 6000
The paper's scale on a GPU, three seeds: run_gpu.sh. Outputs: work$SUFFIX/ (corpus, data, checkpoints, trees,
figure); logs$SUFFIX/ (each step's log and JSON scores, gzipped, then packed into packed.tar.xz); RESULTS.md and
RESULTS.json, of every run (make_results.py).
USAGE
}
# fail MESSAGE: one line on stderr, exit status 2
fail() {
  echo "examples/ptb_induction/run.sh: error: $*" >&2
  exit 2
}
# choose NAME OPTION VALUE CHOICE...: NAME=VALUE when VALUE is one of the CHOICEs
choose() {
  local name=$1 option=$2 given=$3 choice
  shift 3
  for choice in "$@"; do
    [ "$given" = "$choice" ] && { printf -v "$name" %s "$given"; return; }
  done
  local last=${*: -1} list
  list=$(printf '%s, ' "${@:1:$#-1}")
  fail "$option must be ${list%, } or $last, not '$given'"
}
# number NAME OPTION VALUE PATTERN WHAT: NAME=VALUE when VALUE matches PATTERN (extended)
number() {
  [[ $3 =~ ^($4)$ ]] || fail "$2 must be $5, not '$3'"
  printf -v "$1" %s "$3"
}

DATA=$ROOT/../shared/data DATA_GIVEN= TEXT=ptb EVAL_TEXT= DIAGONAL=one OPTIMISER=recipe MODEL_SIZE=small SEED=1
DEVICE=cpu UPDATES=450 PRECISION= STOP_HOURS= RESTART= NICE=10
while [ $# -gt 0 ]; do
  case $1 in
    -h|--help) usage; exit 0 ;;
    --eval-text) EVAL_TEXT=1; shift; continue ;;
    --restart) RESTART=1; shift; continue ;;
    --text|--diagonal|--optimiser|--model-size|--seed|--device|--updates|--precision|--stop-hours|--nice)
      [ $# -ge 2 ] || fail "$1 needs a value" ;;
    -*) fail "unknown option '$1' (--help lists them)" ;;
    *) [ -z "$DATA_GIVEN" ] || fail "one DATA_DIR only, not '$DATA_GIVEN' and '$1'"
       DATA=$1 DATA_GIVEN=$1; shift; continue ;;
  esac
  case $1 in
    --text) choose TEXT "$1" "$2" ptb mixed ;;
    --diagonal) choose DIAGONAL "$1" "$2" one zero ;;
    --optimiser) choose OPTIMISER "$1" "$2" recipe authors ;;
    --model-size) choose MODEL_SIZE "$1" "$2" small medium paper ;;
    --device) choose DEVICE "$1" "$2" cpu cuda ;;
    --precision) choose PRECISION "$1" "$2" bf16 fp32 ;;
    --seed) number SEED "$1" "$2" '[0-9]+' "a whole number" ;;
    --updates) number UPDATES "$1" "$2" '[1-9][0-9]*' "a whole number above 0" ;;
    --nice) number NICE "$1" "$2" '-?[0-9]+' "a whole number" ;;
    --stop-hours) number STOP_HOURS "$1" "$2" '[0-9]*\.?[0-9]+' "a number of hours" ;;
  esac
  shift 2
done
[ -z "$EVAL_TEXT" ] || [ "$TEXT" = mixed ] || fail "--eval-text goes with --text mixed (ptb has the sample's words)"
[ "$DEVICE" = cpu ] || [ -z "$PRECISION" ] || fail "--precision is for a CPU: --device cuda trains in fp32"
[ -d "$DATA" ] || fail "$DATA: no such folder (DATA_DIR: the data beside the repository, see --help)"

case "$TEXT" in
  ptb) SUFFIX=-ptb-text CORPUS_ARGS=(--text ptb) ;;
  mixed) SUFFIX=${EVAL_TEXT:+-eval-text} CORPUS_ARGS=(--text mixed ${EVAL_TEXT:+--train-on-eval-text}) ;;
esac
[ "$DIAGONAL" = zero ] && SUFFIX=$SUFFIX-diagonal-zero
case "$OPTIMISER" in
  recipe) OPTIMISATION=(--lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 --clip-norm 1.0 --max-tokens 4096) ;;
  authors) OPTIMISATION=(--adam-eps 1e-9 --lr 1e-4 --lr-scheduler fixed --clip-norm 1.5 --batch-size 64 --max-tokens 4096)
           SUFFIX=$SUFFIX-authors-optimiser ;;
esac
case "$MODEL_SIZE" in
  small) LAYERS=6 SIZE=(--encoder-layers 6 --encoder-embed-dim 128 --encoder-ffn-embed-dim 512 --encoder-attention-heads 4) ;;
  medium) LAYERS=8 SIZE=(--encoder-layers 8 --encoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --encoder-attention-heads 4)
          SUFFIX=$SUFFIX-medium ;;
  paper) LAYERS=10 SIZE=(--encoder-layers 10 --encoder-embed-dim 512 --encoder-ffn-embed-dim 2048 --encoder-attention-heads 8)
         SUFFIX=$SUFFIX-paper ;;
esac
[ "$SEED" = 1 ] || SUFFIX=$SUFFIX-seed$SEED
WORK=$HERE/work$SUFFIX
LOGS=$HERE/logs$SUFFIX
HEADLINE=-ptb-text-diagonal-zero-authors-optimiser  # make_results.py's HEADLINE_RUN
PACKED_RUNS=$ROOT/fairseq_syntax/evaluation/packed_runs.py  # reads packed.tar.xz
PACK_RUNS=$ROOT/examples/pack_runs.py  # writes it
# not options: this checkout's package first; oneDNN's kernel cache capped (GBs with bf16 autocast); one thread each
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export ONEDNN_PRIMITIVE_CACHE_CAPACITY=64 LRU_CACHE_CAPACITY=64 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ "$DEVICE" = cpu ] && [ -z "$PRECISION" ]; then
  # bf16 where the CPU has bf16 instructions, else fp32 (emulated bf16 is slow): fairseq_syntax/core/cpu_autocast.py
  PRECISION=$(python3 -c 'from fairseq_syntax.core.cpu_autocast import default_cpu_precision as d; print(d())')
fi
mkdir -p "$WORK" "$LOGS"
# an earlier run of these settings, packed: its files back, replaced by this run's as they come
if python3 "$PACKED_RUNS" has --packed "$LOGS/make_corpus.log"; then
  python3 "$PACK_RUNS" unpack-folder "$LOGS" --into "$HERE"
fi
rm -f "$LOGS/scores.json.gz"  # the scores of an earlier run of these settings; every step below writes its own again

# resume LOG COMMAND...: appends the command as a "# command:" line, then its output; run: in a new log
resume() {
  local log=$1
  shift
  echo "# command: $*" >> "$log"
  nice -n "$NICE" "$@" >> "$log" 2>&1
}
run() {
  : > "$1"
  resume "$@"
}

run "$LOGS/make_corpus.log" python3 "$HERE/make_corpus.py" --data "$DATA" --out "$WORK/corpus" "${CORPUS_ARGS[@]}"
rm -rf "$WORK/bin"
run "$LOGS/preprocess.log" fairseq-preprocess --only-source --trainpref "$WORK/corpus/train.txt" \
  --validpref "$WORK/corpus/valid.txt" --testpref "$WORK/corpus/ptb.txt" --destdir "$WORK/bin" \
  --thresholdsrc 3 --workers 1

TRAINING=(--task sentence_masked_lm --criterion masked_lm --tokens-per-sample 256
  --optimizer adam --adam-betas "(0.9,0.98)" "${OPTIMISATION[@]}" --dropout 0.1 --attention-dropout 0.1
  --max-update "$UPDATES"
  --seed "$SEED" --log-format simple --log-interval 25 --no-epoch-checkpoints
  ${STOP_HOURS:+--stop-time-hours "$STOP_HOURS"})
case "$DEVICE-$PRECISION" in
  cpu-bf16) TRAINING+=(--cpu --cpu-bf16-autocast) ;;
  cpu-fp32) TRAINING+=(--cpu) ;;
esac
# the two models train at once, one thread each
training=()
for arch in tree_transformer_lm roberta_prenorm; do
  # any checkpoint counts (a kill during the first save leaves no checkpoint_last.pt): training goes on from the newest
  if [ -n "$RESTART" ] || ! compgen -G "$WORK/checkpoints/$arch/checkpoint*.pt" > /dev/null; then
    rm -rf "$WORK/checkpoints/$arch" "$LOGS/train_$arch.log" "$LOGS/train_$arch.log.gz"
  elif [ -f "$LOGS/train_$arch.log.gz" ] && [ ! -f "$LOGS/train_$arch.log" ]; then
    gunzip "$LOGS/train_$arch.log.gz"  # the log of the run that goes on, compressed when it last ended
  fi
  extra=()
  [ "$arch" = tree_transformer_lm ] && extra=(--constituent-diagonal "$DIAGONAL")
  resume "$LOGS/train_$arch.log" fairseq-train "$WORK/bin" --user-dir "$ROOT/fairseq_syntax" --arch "$arch" \
    "${SIZE[@]}" "${TRAINING[@]}" "${extra[@]}" --save-dir "$WORK/checkpoints/$arch" &
  training+=($!)
done
for pid in "${training[@]}"; do
  wait "$pid" || { echo "training failed: see $LOGS/train_*.log" >&2; exit 1; }
done

TREE_CKPT=$WORK/checkpoints/tree_transformer_lm/checkpoint_best.pt
GOLD=$DATA/ptb-sample/wsj_0001-0159.mrg.gz
# the evaluations in two streams at once: Algorithm 1's variants; each layer, the figure and the perplexities
# induce NAME OPTION...: the Tree Transformer's trees of the PTB sample, scored; logs/NAME.log and NAME.json
induce() {
  run "$LOGS/$1.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" \
    --input "$WORK/corpus/ptb.txt" --gold "$GOLD" "${@:2}" --json "$LOGS/$1.json"
}
algorithm_one() {
  induce induce_paper --min-layer 2 --threshold 0.8 --output "$WORK/induced_paper.txt"
  induce induce_released --min-layer 2 --threshold 0.8 --descend-above 0.7 --output "$WORK/induced_released.txt"
  # the rule chosen on a dev split (every 10th sentence; scores on the others), and the input without </s>
  induce induce_dev --select-on-dev 10
  induce induce_noeos --min-layer 2 --threshold 0.8 --without-eos
  # the paper's Figure 4: Algorithm 1 with other minimum layers, and top-down greedy parsing from one layer alone
  for m in 1 3; do
    induce "induce_min$m" --min-layer "$m" --threshold 0.8
  done
}
layers_figure_perplexity() {
  for layer in $(seq 0 $((LAYERS - 1))); do
    induce "induce_layer$layer" --layer "$layer"
  done
  # the paper's Figure 5: the constituent prior of every layer for one sentence (the first of the PTB sample)
  run "$LOGS/constituent_prior.log" python3 -m fairseq_syntax.cli.plot constituent-prior "$TREE_CKPT" \
    "$(head -n 1 "$WORK/corpus/ptb.txt")" --output "$WORK/constituent_prior.png"
  if [ "$SUFFIX" = "$HEADLINE" ]; then cp "$WORK/constituent_prior.png" "$HERE/constituent_prior.png"; fi
  for arch in tree_transformer_lm roberta_prenorm; do
    run "$LOGS/perplexity_$arch.log" python3 -m fairseq_syntax.methods.tree_transformer.masked_lm \
      "$WORK/checkpoints/$arch/checkpoint_best.pt" --input "$WORK/corpus/ptb.txt" --json "$LOGS/perplexity_$arch.json"
  done
}
algorithm_one &
first_stream=$!
layers_figure_perplexity
wait "$first_stream" || { echo "an evaluation failed: see $LOGS/induce_*.log" >&2; exit 1; }

python3 "$HERE/make_results.py" --compress "$LOGS"  # NAME.log -> NAME.log.gz, *.json -> scores.json.gz
# the folder's gzipped files into the archive of every run (packed.tar.xz beside this script), read from there
python3 "$PACK_RUNS" pack-folder "$LOGS" --into "$HERE"
python3 "$HERE/make_results.py"  # RESULTS.md and RESULTS.json, from every logs* folder
