#!/usr/bin/env bash
# IWSLT'15 En->Vi, McDonald & Chiang (2021), as the study of study.toml (README.md): the corpus and the parsers where
# missing, then plan, run and report. `bash examples/iwslt15_en_vi/run.sh --help`.
set -euo pipefail

usage() {
  cat << 'USAGE'
usage: bash examples/iwslt15_en_vi/run.sh [--corpus DIR_OR_URL] [--treebanks DIR] [--study FILE] [--jobs N]
                                          [--executor local|slurm]

IWSLT'15 English->Vietnamese: Sequence, Linearized and Mask with the paper's settings (README.md), Mask beside its
random-tree control. First the corpus: the Stanford release's {train,tst2012,tst2013}.{en,vi} into the study's
corpus.raw where one is missing, each pair checked (examples/fetch_corpus.py). Then the parsers the study names,
trained where missing from the English treebanks (examples/train_parsers.py: hours on a CPU). Then the study:
fairseq-syntax-study plan, run and report (docs/study.md). Finished runs are kept; run goes on where it stopped.

options:
  --corpus DIR_OR_URL     take the corpus from this folder or address (default: the Stanford release's)
  --treebanks DIR         the treebanks the parsers are trained on (default: ../shared/data beside the repository)
  --study FILE            the study file (default: examples/iwslt15_en_vi/study.toml)
  --jobs N                runs at once on this machine (default: the file's executor.jobs)
  --executor local|slurm  where the runs go (default: the file's executor.kind)
  -h, --help              this text
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STUDY="$HERE/study.toml" FETCH=() PARSERS=() RUN=()
while [ $# -gt 0 ]; do
  case "$1" in
    --corpus|--treebanks|--study|--jobs|--executor)
      [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --corpus) FETCH=(--url "$2") ;;
        --treebanks) PARSERS=(--treebanks "$2") ;;
        --study) STUDY=$2 ;;
        *) RUN+=("$1" "$2") ;;
      esac
      shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: $1: no such option (bash examples/iwslt15_en_vi/run.sh --help)" >&2; exit 2 ;;
  esac
done
[ -f "$STUDY" ] || { echo "error: --study $STUDY: no such file" >&2; exit 2; }

python3 "$HERE/../fetch_corpus.py" iwslt15-en-vi --study "$STUDY" "${FETCH[@]}"
python3 "$HERE/../train_parsers.py" --study "$STUDY" "${PARSERS[@]}"
fairseq-syntax-study plan "$STUDY"
fairseq-syntax-study run "$STUDY" "${RUN[@]}"
fairseq-syntax-study report "$STUDY"
