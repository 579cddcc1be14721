#!/usr/bin/env bash
# Tree Transformer (Wang, Lee & Chen 2019) trained as a masked LM on raw English text, then grammar induction
# (Algorithm 1) scored against the PTB sample and masked-word perplexity (section 7.5) against a plain Transformer
# encoder of the same size: `examples/ptb_induction/run.sh --help` says what it does and takes.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

usage() {
  cat << 'USAGE'
usage: examples/ptb_induction/run.sh [options] [DATA_DIR]

Tree Transformer (Wang, Lee & Chen 2019) trained as a masked LM on raw English text (never trees), then: grammar
induction (Algorithm 1) scored against the PTB sample wsj_0001-0159 (all sentences and those of <= 10 words), and
masked-word perplexity (section 7.5) on the same sentences against a plain Transformer encoder (roberta_prenorm) of
the same size, trained the same way. The two models train at the same time, one thread each; every step is niced.

DATA_DIR: the data beside the repository (default ../shared/data; its SOURCES.md); on a GPU machine the copy that
`bash bench/cuda/window.sh prepare` makes, .window/data.

options (each run's files get a suffix naming its settings; the defaults have none):
  --text ptb|mixed        training text. ptb (default): the WSJ text (ptb-lm/, sections 21-24) and the PTB sample's
                          words, all in Mikolov's preprocessing (make_corpus.py; the transductive setting: the
                          sample's words, never its trees), suffix -ptb-text. mixed: Multi30k train.en, the words of
                          UD EWT train and SST train
  --eval-text             with --text mixed: add the words of the PTB sample (never its trees), the transductive
                          setting, in-domain text for the parser; suffix -eval-text
  --diagonal one|zero     one (default): eq. 3's C_ii = 1. zero: --constituent-diagonal zero (a word cannot attend to
                          itself, as in the authors' code); suffix -diagonal-zero
  --optimiser recipe|authors
                          recipe (default): lr 1e-3 with warm-up, 4096-token batches. authors: the optimisation of
                          the authors' code (Adam lr 1e-4 constant, eps 1e-9, 64-sentence batches, clipping 1.5);
                          suffix -authors-optimiser
  --model-size small|medium|paper
                          small (default: 6 layers x 128, 4 heads, FFN 512, for a CPU), medium (8 layers x 256,
                          4 heads, FFN 1024; suffix -medium) or paper (10 layers x 512, 8 heads, FFN 2048;
                          suffix -paper)
  --seed N                default 1; suffix -seedN otherwise
  --device cpu|cuda       default cpu; cuda trains on the GPU (fp32)
  --updates N             training updates per model (default 450). A training run cut short goes on from its newest
                          whole checkpoint when the script is run again (also with more updates, to train longer)
  --precision bf16|fp32   on a CPU: bf16 (--cpu-bf16-autocast, the default on a CPU with bf16 instructions) or fp32
                          (the default elsewhere)
  --stop-hours H          stop each training run after H hours (fairseq-train --stop-time-hours; default: none)
  --restart               train afresh instead of going on from the run's checkpoints
  --nice N                the niceness of every step (default 10)
  -h, --help              this text

The headline setting (its figure is copied beside RESULTS.md): WSJ text, the authors' C_ii and optimisation,
  examples/ptb_induction/run.sh --diagonal zero --optimiser authors --precision fp32 --updates 6000
(~40 min per model on a free core). At the paper's scale on the GPU, three seeds: run_gpu.sh.
Masks: sentence_masked_lm draws fresh masks every epoch (issue 53); the runs made before that fix saw epoch 1's
masks in every epoch (fairseq's data-loader worker kept across epochs) and are kept as logs*-repeated-masks/.
Besides the paper's rule (m=2, threshold 0.8), every run also parses with the rule chosen on every 10th PTB sample
sentence (induce_dev.json, scored on the other 90%) and without fairseq's final </s> (induce_noeos.json).
Outputs: examples/ptb_induction/work$SUFFIX/ (corpus, binarized data, checkpoints, induced trees, the figure),
examples/ptb_induction/logs$SUFFIX/ (every command's log, gzipped once the run is done: NAME.log.gz; the JSON
scores in one scores.json.gz, packed into packed.tar.xz), RESULTS.md and RESULTS.json (one table of every run kept
here, rewritten from all the logs* folders by make_results.py), constituent_prior.png (the paper's Figure 5 for the
first PTB sentence; only the headline setting's is kept there, the others stay in work$SUFFIX/).
USAGE
}
# fail MESSAGE: one line on stderr, exit status 2 (a bad option: nothing has been done)
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
# number NAME OPTION VALUE PATTERN WHAT: NAME=VALUE when VALUE matches the (extended) regular expression PATTERN
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
HEADLINE=-ptb-text-diagonal-zero-authors-optimiser  # the settings of make_results.py's HEADLINE run (fresh masks)
PACKED_RUNS=$ROOT/fairseq_syntax/evaluation/packed_runs.py  # reads the archive of every run (packed.tar.xz)
PACK_RUNS=$ROOT/examples/pack_runs.py  # packs into it
# set for the commands below, not options: this checkout's package first on the path; oneDNN keeps one kernel per
# batch shape, which grows to GBs with --cpu-bf16-autocast unless capped; one thread per fairseq process
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export ONEDNN_PRIMITIVE_CACHE_CAPACITY=64 LRU_CACHE_CAPACITY=64 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if [ "$DEVICE" = cpu ] && [ -z "$PRECISION" ]; then
  # bf16 (--cpu-bf16-autocast) on a CPU with bf16 instructions, else fp32: oneDNN emulates bf16 elsewhere, many
  # times slower (fairseq_syntax/core/cpu_autocast.py)
  PRECISION=$(python3 -c 'from fairseq_syntax.core.cpu_autocast import default_cpu_precision as d; print(d())')
fi
mkdir -p "$WORK" "$LOGS"
# an earlier run of these settings, packed: its files back in the folder, where this run's replace them as they come
if python3 "$PACKED_RUNS" has --packed "$LOGS/make_corpus.log"; then
  python3 "$PACK_RUNS" unpack-folder "$LOGS" --into "$HERE"
fi
rm -f "$LOGS/scores.json.gz"  # the scores of an earlier run of these settings; every step below writes its own again

# run LOG COMMAND...: writes the command as the log's first line, then its output
run() {
  local log=$1
  shift
  echo "# command: $*" > "$log"
  nice -n "$NICE" "$@" >> "$log" 2>&1
}
# resume LOG COMMAND...: like run, but the log goes on (one "# command:" line per part) when the run resumes
resume() {
  local log=$1
  shift
  echo "# command: $*" >> "$log"
  nice -n "$NICE" "$@" >> "$log" 2>&1
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
# the two models train at the same time, one thread each (one per core of the 2-core machine this was made on)
training=()
for arch in tree_transformer_lm roberta_prenorm; do
  # any checkpoint counts, not checkpoint_last.pt alone: a kill during the first save leaves the epoch's checkpoint
  # and checkpoint_best.pt without it, and fairseq-train (with the plugin) goes on from the newest whole one
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
# The evaluations, in two streams at once (one per core, as the two trainings): Algorithm 1's variants in one,
# greedy parsing from each layer, the figure and the perplexities in the other; each step writes its own log and JSON.
algorithm_one() {
  run "$LOGS/induce_paper.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" --input "$WORK/corpus/ptb.txt" \
    --gold "$GOLD" --min-layer 2 --threshold 0.8 --output "$WORK/induced_paper.txt" --json "$LOGS/induce_paper.json"
  run "$LOGS/induce_released.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" --input "$WORK/corpus/ptb.txt" \
    --gold "$GOLD" --min-layer 2 --threshold 0.8 --descend-above 0.7 --output "$WORK/induced_released.txt" \
    --json "$LOGS/induce_released.json"
  # the rule chosen on a dev split (every 10th sentence; scores on the others), and the input without </s>
  run "$LOGS/induce_dev.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" \
    --input "$WORK/corpus/ptb.txt" --gold "$GOLD" --select-on-dev 10 --json "$LOGS/induce_dev.json"
  run "$LOGS/induce_noeos.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" \
    --input "$WORK/corpus/ptb.txt" --gold "$GOLD" --min-layer 2 --threshold 0.8 --without-eos \
    --json "$LOGS/induce_noeos.json"
  # the paper's Figure 4: Algorithm 1 with other minimum layers, and top-down greedy parsing from one layer alone
  for m in 1 3; do
    run "$LOGS/induce_min$m.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" --input "$WORK/corpus/ptb.txt" \
      --gold "$GOLD" --min-layer "$m" --threshold 0.8 --json "$LOGS/induce_min$m.json"
  done
}
layers_figure_perplexity() {
  for layer in $(seq 0 $((LAYERS - 1))); do
    run "$LOGS/induce_layer$layer.log" python3 -m fairseq_syntax.methods.tree_transformer.induce "$TREE_CKPT" --input "$WORK/corpus/ptb.txt" \
      --gold "$GOLD" --layer "$layer" --json "$LOGS/induce_layer$layer.json"
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
