#!/usr/bin/env bash
# The steps of a translation recipe's run.sh (examples/multi30k, examples/iwslt15_en_vi): its corpus and parsers
# where missing, then plan, run and report. `bash examples/run_study.sh RECIPE CORPUS --help`.
set -euo pipefail
RECIPE=$1 CORPUS=$2
shift 2

usage() {
  cat << USAGE
usage: bash examples/$RECIPE/run.sh [--corpus DIR_OR_URL] [--treebanks DIR] [--study FILE] [--jobs N]
           [--executor local|slurm]

The study of examples/$RECIPE/study.toml (its comments say what it compares). First the corpus: its
files fetched into the study's corpus.raw where one is missing, each checked (examples/fetch_corpus.py
$CORPUS). Then the parsers the study names, trained where missing from the English treebanks
(examples/train_parsers.py: hours on a CPU; none for parses from an archive). Then the study:
fairseq-syntax-study plan, run and report (docs/study.md). Finished runs are kept; run goes on where it stopped.

options:
  --corpus DIR_OR_URL     take the corpus from this folder or address (default: its publisher's)
  --treebanks DIR         the treebanks the parsers are trained on (default: ../shared/data beside the repository)
  --study FILE            the study file (default: examples/$RECIPE/study.toml)
  --jobs N                runs at once on this machine (default: the file's executor.jobs)
  --executor local|slurm  where the runs go (default: the file's executor.kind)
  -h, --help              this text
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STUDY="$HERE/$RECIPE/study.toml" FETCH=() PARSERS=() RUN=()
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
    *) echo "error: $1: no such option (bash examples/$RECIPE/run.sh --help)" >&2; exit 2 ;;
  esac
done
[ -f "$STUDY" ] || { echo "error: --study $STUDY: no such file" >&2; exit 2; }

python3 "$HERE/fetch_corpus.py" "$CORPUS" --study "$STUDY" "${FETCH[@]}"
python3 "$HERE/train_parsers.py" --study "$STUDY" "${PARSERS[@]}"
fairseq-syntax-study plan "$STUDY"
fairseq-syntax-study run "$STUDY" "${RUN[@]}"
fairseq-syntax-study report "$STUDY"
