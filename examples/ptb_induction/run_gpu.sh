#!/usr/bin/env bash
# The Tree Transformer at the paper's scale on one GPU, three seeds: 10 layers x 512, 8 heads, FFN 2048,
# C_ii as the authors' code (0), their optimisation (Adam lr 1e-4 constant, 64-sentence batches), WSJ text with the
# PTB sample's words (TEXT=ptb), each seed's Tree Transformer and its plain-Transformer twin trained at once, then
# run.sh's evaluation (Algorithm 1 with the paper's rule, the rule chosen on a dev split, without </s>, per layer;
# masked-word perplexity). Detaches (setsid) and returns at once with its log:
#   source bench/cuda/device_setup.sh && bash examples/ptb_induction/run_gpu.sh      (then: tail -f its log)
# UPDATES (default 60000, the paper trains 60-100k) and SEEDS ("1 2 3") can be set; STOP_HOURS (default 0.4) caps
# each training run. This needs a GPU machine held for hours, not a short window (a machine with a GPU for a short
# time, commands of at most 10 minutes): a detached job dies when the machine goes back; after training, run.sh's
# evaluation (induction, perplexity) runs on one CPU thread for longer than the training; and the checkpoints
# (100-420 MB each) are too large to bring back from a window and evaluate elsewhere. The data are read from
# SHARED_DATA (bench/cuda/window.sh prepare copies them to .window/data: carry .window, set SHARED_DATA=.window/data).
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LOG=${LOG:-$HERE/run_gpu.log}
source "$HERE/../common.sh"
detach "$LOG" "$0" "$@"
export TEXT=ptb MODEL_SIZE=paper DIAGONAL=zero OPTIMISER=authors DEVICE=cuda UPDATES=${UPDATES:-60000}
export EXTRA_TRAINING="--stop-time-hours ${STOP_HOURS:-0.4}"
start=$(date +%s)
for seed in ${SEEDS:-1 2 3}; do
  SEED=$seed bash "$HERE/run.sh" "$@" > "$HERE/run_gpu.seed$seed.log" 2>&1 &
done
wait
echo "done in $(( $(date +%s) - start )) s; RESULTS.md rewritten by the last run to finish"
