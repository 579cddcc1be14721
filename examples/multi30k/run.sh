#!/usr/bin/env bash
# The Multi30k En->De study of study.toml (README.md): the corpus where missing, then plan, run and report.
# `bash examples/multi30k/run.sh --help`.
set -euo pipefail

usage() {
  cat << 'USAGE'
usage: bash examples/multi30k/run.sh [--study FILE] [--jobs N] [--executor local|slurm]

The Multi30k En->De study (examples/multi30k/README.md). First the corpus: Multi30K Task 1's raw files fetched into
the study's corpus.raw where one is missing, each checked (examples/fetch_corpus.py multi30k). Then the study:
fairseq-syntax-study plan, run and report (docs/study.md). Finished runs are kept; run goes on where it stopped.

options:
  --study FILE            the study file (default: examples/multi30k/study.toml; study-gpu.toml: the same on GPUs)
  --jobs N                runs at once on this machine (default: the file's executor.jobs)
  --executor local|slurm  where the runs go (default: the file's executor.kind)
  -h, --help              this text
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STUDY="$HERE/study.toml" RUN=()
while [ $# -gt 0 ]; do
  case "$1" in
    --study|--jobs|--executor)
      [ $# -ge 2 ] || { echo "error: $1 needs a value" >&2; exit 2; }
      if [ "$1" = --study ]; then STUDY=$2; else RUN+=("$1" "$2"); fi
      shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: $1: no such option (bash examples/multi30k/run.sh --help)" >&2; exit 2 ;;
  esac
done
[ -f "$STUDY" ] || { echo "error: --study $STUDY: no such file" >&2; exit 2; }

python3 "$HERE/../fetch_corpus.py" multi30k --study "$STUDY"
fairseq-syntax-study plan "$STUDY"
fairseq-syntax-study run "$STUDY" "${RUN[@]}"
fairseq-syntax-study report "$STUDY"
