#!/usr/bin/env bash
# The Multi30k En->De study of study.toml (README.md): examples/run_study.sh's steps on the corpus multi30k.
# `bash examples/multi30k/run.sh --help`.
exec bash "$(dirname "${BASH_SOURCE[0]}")/../run_study.sh" multi30k multi30k "$@"
