#!/usr/bin/env bash
# The main job (README, Quickstart): the synthetic demo corpus with its gold parses, then the study of
# examples/demo/study.toml (plan, run, report), ending with its verdict table. `bash examples/demo/run.sh --help`.
set -euo pipefail

usage() {
  cat << 'USAGE'
usage: bash examples/demo/run.sh [--study FILE] [--jobs N]

The no-download demo. First the data: a synthetic translation task whose target is a function of the source's tree
(examples/demo/make_data.py: 4,000 / 400 / 500 sentences, seed 1), written with its gold parses as a parse archive
into work/data and work/parses beside the study file. Then the study on it: fairseq-syntax-study plan, run and
report (docs/study.md). The answer is in the study's report folder (RESULTS.md, RESULTS.json); its verdict table
is printed last.

options:
  --study FILE   the study file (default: examples/demo/study.toml); a file that takes it as its study.base reads
                 its data beside itself
  --jobs N       runs at once, each on its own core (default: the study file's executor.jobs)
  -h, --help     this text
USAGE
}

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
STUDY="$HERE/study.toml"
JOBS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --study) [ $# -ge 2 ] || { echo "error: --study needs a file" >&2; exit 2; }; STUDY=$2; shift 2 ;;
    --jobs) [ $# -ge 2 ] || { echo "error: --jobs needs a number" >&2; exit 2; }; JOBS=(--jobs "$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: $1: no such option (bash examples/demo/run.sh --help)" >&2; exit 2 ;;
  esac
done
[ -f "$STUDY" ] || { echo "error: --study $STUDY: no such file" >&2; exit 2; }
DATA="$(cd "$(dirname "$STUDY")" && pwd)/work"
START=$(date +%s)

echo "== data: the synthetic corpus and its gold parses (make_data.py into ${DATA#"$PWD"/})"
python3 "$HERE/make_data.py" --out "$DATA/data" --archive "$DATA/parses" --train 4000 --valid 400 --test 500 \
  --seed 1 --max-tokens 14
fairseq-syntax-study plan "$STUDY"
fairseq-syntax-study run "$STUDY" "${JOBS[@]}"
fairseq-syntax-study report "$STUDY"
echo "== demo finished in $(( $(date +%s) - START )) s"
