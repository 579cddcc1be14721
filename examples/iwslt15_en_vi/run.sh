#!/usr/bin/env bash
# IWSLT'15 En->Vi, McDonald & Chiang (2021), as the study of study.toml (README.md): examples/run_study.sh's steps
# on the corpus iwslt15-en-vi. `bash examples/iwslt15_en_vi/run.sh --help`.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../run_study.sh" iwslt15_en_vi iwslt15-en-vi "$@"
