#!/usr/bin/env bash
# Tree Transformer (Wang, Lee & Chen 2019) trained as a masked LM on raw English text (Multi30k train.en, the
# words of UD EWT train and SST train; never their trees), then: grammar induction (Algorithm 1) scored against
# the PTB sample wsj_0001-0159 (all sentences and those of <= 10 words), and masked-word perplexity (section 7.5)
# on the same sentences against a plain Transformer encoder (roberta_prenorm) of the same size, trained the same way.
#
#   examples/ptb_induction/run.sh [DATA_DIR]      # DATA_DIR defaults to $SHARED_DATA, else ../shared/data beside the
#                                                 # repository (see its SOURCES.md); on a GPU machine the copy that
#                                                 # bench/cuda/window.sh prepare makes: SHARED_DATA=.window/data
#
# Environment: UPDATES (training updates per model, default 450), PRECISION (bf16: --cpu-bf16-autocast, the default
# on a CPU with bf16 instructions; or fp32, the default elsewhere), CPU only, one thread per process. A training run
# cut short goes on from its newest whole checkpoint when the script is run again (also with a larger UPDATES, to train
# longer); RESTART=1 starts afresh.
# EVAL_TEXT=1 adds the words of the PTB sample (never its trees) to the training text: the transductive setting,
# in-domain text for the parser; its files get the suffix -eval-text (work-eval-text/, logs-eval-text/, ...).
# DIAGONAL=zero trains the Tree Transformer with C_ii = 0 (--constituent-diagonal zero: a word cannot attend to
# itself, as in the authors' code) instead of eq. 3's C_ii = 1; its files get the suffix -diagonal-zero.
# OPTIMISER=authors trains both models with the optimisation of the authors' code (Adam lr 1e-4 constant, eps 1e-9,
# 64-sentence batches, clipping 1.5) instead of lr 1e-3 with warm-up and 4096-token batches; suffix -authors-optimiser.
# TEXT=ptb (the default) trains on WSJ text (ptb-lm/, sections 21-24) and the PTB sample's words, all in Mikolov's
# preprocessing (make_corpus.py; the transductive setting: the sample's words, never its trees), suffix -ptb-text;
# TEXT=mixed is the earlier text (Multi30k, UD EWT, SST; EVAL_TEXT=1 adds the sample's words).
# MODEL_SIZE=small (default: 6 layers x 128, 4 heads, FFN 512, for a CPU), medium (8 layers x 256, 4 heads, FFN 1024;
# suffix -medium) or paper (10 layers x 512, 8 heads, FFN 2048, the paper's; suffix -paper); DEVICE=cuda trains on
# the GPU (fp32); SEED (default 1; suffix -seedN otherwise). NICE (default 10): the niceness of every step.
# Masks: sentence_masked_lm draws fresh masks every epoch (issue 53); the runs made before that fix saw epoch 1's
# masks in every epoch (fairseq's data-loader worker kept across epochs) and are kept as logs*-repeated-masks/.
# Besides the paper's rule (m=2, threshold 0.8), every run also parses with the rule chosen on every 10th PTB sample
# sentence (induce_dev.json, scored on the other 90%) and without fairseq's final </s> (induce_noeos.json).
# The headline setting (its figure is copied beside RESULTS.md): WSJ text, the authors' C_ii and optimisation,
#   TEXT=ptb DIAGONAL=zero OPTIMISER=authors PRECISION=fp32 UPDATES=6000 examples/ptb_induction/run.sh
#   (~40 min per model on a free core; RESULTS.md leads with its run, made with fresh masks). At the paper's
#   scale on the GPU, three seeds: run_gpu.sh
# Outputs: examples/ptb_induction/work$SUFFIX/ (corpus, binarized data, checkpoints, induced trees, the figure),
#          examples/ptb_induction/logs$SUFFIX/ (every command's log, gzipped once the run is done: NAME.log.gz; the
#          JSON scores in one scores.json.gz), RESULTS.md and RESULTS.json (one table of every run kept here,
#          rewritten from all the logs* folders by make_results.py), constituent_prior.png (the paper's Figure 5
#          for the first PTB sentence; only the headline setting's is kept there, the others stay in work$SUFFIX/).
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DATA=${1:-${SHARED_DATA:-$ROOT/../shared/data}}
TEXT=${TEXT:-ptb}
case "$TEXT" in
  ptb) SUFFIX=-ptb-text CORPUS_ARGS=(--text ptb) ;;
  mixed) SUFFIX=${EVAL_TEXT:+-eval-text} CORPUS_ARGS=(--text mixed ${EVAL_TEXT:+--train-on-eval-text}) ;;
  *) echo "TEXT must be ptb or mixed, not '$TEXT'" >&2; exit 1 ;;
esac
DIAGONAL=${DIAGONAL:-one}
case "$DIAGONAL" in
  one) ;;
  zero) SUFFIX=$SUFFIX-diagonal-zero ;;
  *) echo "DIAGONAL must be one or zero, not '$DIAGONAL'" >&2; exit 1 ;;
esac
OPTIMISER=${OPTIMISER:-recipe}
case "$OPTIMISER" in
  recipe) OPTIMISATION=(--lr 1e-3 --lr-scheduler inverse_sqrt --warmup-updates 100 --clip-norm 1.0 --max-tokens 4096) ;;
  authors) OPTIMISATION=(--adam-eps 1e-9 --lr 1e-4 --lr-scheduler fixed --clip-norm 1.5 --batch-size 64 --max-tokens 4096)
           SUFFIX=$SUFFIX-authors-optimiser ;;
  *) echo "OPTIMISER must be recipe or authors, not '$OPTIMISER'" >&2; exit 1 ;;
esac
MODEL_SIZE=${MODEL_SIZE:-small}
case "$MODEL_SIZE" in
  small) LAYERS=6 SIZE=(--encoder-layers 6 --encoder-embed-dim 128 --encoder-ffn-embed-dim 512 --encoder-attention-heads 4) ;;
  medium) LAYERS=8 SIZE=(--encoder-layers 8 --encoder-embed-dim 256 --encoder-ffn-embed-dim 1024 --encoder-attention-heads 4)
          SUFFIX=$SUFFIX-medium ;;
  paper) LAYERS=10 SIZE=(--encoder-layers 10 --encoder-embed-dim 512 --encoder-ffn-embed-dim 2048 --encoder-attention-heads 8)
         SUFFIX=$SUFFIX-paper ;;
  *) echo "MODEL_SIZE must be small, medium or paper, not '$MODEL_SIZE'" >&2; exit 1 ;;
esac
SEED=${SEED:-1}
[ "$SEED" = 1 ] || SUFFIX=$SUFFIX-seed$SEED
DEVICE=${DEVICE:-cpu}
WORK=$HERE/work$SUFFIX
LOGS=$HERE/logs$SUFFIX
HEADLINE=-ptb-text-diagonal-zero-authors-optimiser  # the settings of make_results.py's HEADLINE run (fresh masks)
UPDATES=${UPDATES:-450}
source "$ROOT/examples/common.sh"  # PYTHONPATH, oneDNN cache caps, default_precision
PRECISION=${PRECISION:-$(default_precision)}
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1  # torch.set_num_threads(1) for fairseq's own commands
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
  nice -n "${NICE:-10}" "$@" >> "$log" 2>&1
}
# resume LOG COMMAND...: like run, but the log goes on (one "# command:" line per part) when the run resumes
resume() {
  local log=$1
  shift
  echo "# command: $*" >> "$log"
  nice -n "${NICE:-10}" "$@" >> "$log" 2>&1
}

run "$LOGS/make_corpus.log" python3 "$HERE/make_corpus.py" --data "$DATA" --out "$WORK/corpus" "${CORPUS_ARGS[@]}"
rm -rf "$WORK/bin"
run "$LOGS/preprocess.log" fairseq-preprocess --only-source --trainpref "$WORK/corpus/train.txt" \
  --validpref "$WORK/corpus/valid.txt" --testpref "$WORK/corpus/ptb.txt" --destdir "$WORK/bin" \
  --thresholdsrc 3 --workers 1

TRAINING=(--task sentence_masked_lm --criterion masked_lm --tokens-per-sample 256
  --optimizer adam --adam-betas "(0.9,0.98)" "${OPTIMISATION[@]}" --dropout 0.1 --attention-dropout 0.1
  --max-update "$UPDATES"
  --seed "$SEED" --log-format simple --log-interval 25 --no-epoch-checkpoints ${EXTRA_TRAINING:-})
[ "$DEVICE" = cuda ] && PRECISION=gpu-fp32
case "$PRECISION" in
  bf16) TRAINING+=(--cpu --cpu-bf16-autocast) ;;
  fp32) TRAINING+=(--cpu) ;;
  gpu-fp32) ;;
  *) echo "PRECISION must be bf16 or fp32, not '$PRECISION'" >&2; exit 1 ;;
esac
# the two models train at the same time, one thread each (one per core of the 2-core machine this was made on)
training=()
for arch in tree_transformer_lm roberta_prenorm; do
  if [ -n "${RESTART:-}" ] || ! has_checkpoint "$WORK/checkpoints/$arch"; then  # examples/common.sh
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
