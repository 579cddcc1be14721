#!/bin/bash
# Multi30k training speed of fp32 against --cpu-bf16-autocast, with 1 or 2 torch threads: 40 updates of the
# reference model (3+3 layers, d=256) on the data dirs of the Multi30k study (its work-study/), each run alone.
#   bench/multi30k_precision/measure.sh DATA_BIN   (e.g. examples/multi30k/work/data-bin)
# then: python3 bench/multi30k_precision/summarize.py > bench/multi30k_precision/RESULTS.md
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
case ${1:-} in
  -h|--help) sed -n '2,5p' "${BASH_SOURCE[0]}" | cut -c3-; exit 0 ;;
esac
[ $# = 1 ] || { echo "bench/multi30k_precision/measure.sh: error: give one DATA_BIN (--help)" >&2; exit 2; }
[ -d "$1" ] || { echo "bench/multi30k_precision/measure.sh: error: $1: no such folder (DATA_BIN)" >&2; exit 2; }
DATA_BIN=$(cd "$1" && pwd)
cd "$HERE/../.."
export ONEDNN_PRIMITIVE_CACHE_CAPACITY=64 LRU_CACHE_CAPACITY=64
# the recipe's model size, regularisation and training flags (bench/recipe.py), one a line
mapfile -t recipe < <(python3 -c 'import sys; sys.path.insert(0, "bench"); import recipe
print("\n".join(recipe.MODEL_SIZE + recipe.REGULARISATION + recipe.TRAINING))')
measure() {  # measure NAME THREADS BF16(0/1) ARCH FORM
  local name=$1 threads=$2 bf16=$3 arch=$4 form=$5 extra=()
  [ "$bf16" = 1 ] && extra=(--cpu-bf16-autocast)
  OMP_NUM_THREADS=$threads MKL_NUM_THREADS=$threads fairseq-train "$DATA_BIN/$form" --user-dir fairseq_syntax \
    --arch "$arch" "${recipe[@]}" --max-tokens 4096 --max-update 40 --max-source-positions 1024 --no-save \
    --log-format simple --log-interval 10 --disable-validation "${extra[@]}" 2>&1 \
    | grep -v "fairseq_cli.train | {" > "$HERE/$name.log"
  # kept as NAME.log.gz (the committed ones are packed: examples/pack_runs.py unpack-folder this folder before a
  # new measurement, pack-folder after it); summarize.py reads either
  gzip -n -f "$HERE/$name.log"
}
measure seqfp32t2 2 0 transformer sequence
measure seqbf16t1 1 1 transformer sequence
measure seqbf16t2 2 1 transformer sequence
measure maskbf16t2 2 1 transformer_syntax_mask preorder
measure linbf16t2 2 1 transformer linearized
