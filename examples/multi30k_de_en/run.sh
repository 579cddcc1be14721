#!/usr/bin/env bash
# The Multi30k De->En study of study.toml (the README's "On a corpus it was not written for"): examples/run_study.sh's
# steps on the corpus multi30k. `bash examples/multi30k_de_en/run.sh --help`.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../run_study.sh" multi30k_de_en multi30k "$@"
