#!/usr/bin/env bash
# The Multi30k De->En study of study.toml (the README's "On a corpus it was not written for"): the steps of
# examples/multi30k/run.sh (the corpus where missing, then plan, run and report) on this folder's study file.
# `bash examples/multi30k_de_en/run.sh --help`.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
for arg in "$@"; do
  if [ "$arg" = -h ] || [ "$arg" = --help ]; then
    echo "bash examples/multi30k_de_en/run.sh [options]: the Multi30k De->En study, examples/multi30k/run.sh with"
    echo "--study examples/multi30k_de_en/study.toml (its answer: examples/multi30k_de_en/RESULTS.md)"
    echo
  fi
done
exec bash "$HERE/../multi30k/run.sh" --study "$HERE/study.toml" "$@"
