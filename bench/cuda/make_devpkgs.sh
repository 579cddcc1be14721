#!/usr/bin/env bash
# Builds .devpkgs/, what bench/cuda/device_setup.sh installs on the offline GPU machine, from this machine's
# installation (run after the README's set-up; needs the PyPI registry for fairseq's sdist and one wheel):
#   bash bench/cuda/make_devpkgs.sh
# then carry it to the GPU machine with the working tree (bench/cuda/window.sh prepare calls this when .devpkgs/ is
# missing). .devpkgs/ is git-ignored; it is about 30 MB (a window carries 64 MiB in all).
set -euo pipefail
cd "$(dirname "$0")/../.."
SITE="$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
rm -rf .devpkgs /tmp/fairseq-sdist
mkdir -p .devpkgs/site .devpkgs/whl /tmp/fairseq-sdist
# fairseq's Python sources and the .pyx/.cpp the machine compiles (no *.so, *.cu, nor examples' data files)
# an sdist only; without build isolation pip prepares its metadata with the torch installed here instead of
# installing torch again in a throwaway environment (10 minutes and more)
python3 -m pip download -q --no-deps --no-build-isolation fairseq-fixed==0.12.3.1 -d /tmp/fairseq-sdist
tar xzf /tmp/fairseq-sdist/fairseq*fixed*.tar.gz -C /tmp/fairseq-sdist
src="$(find /tmp/fairseq-sdist -maxdepth 1 -mindepth 1 -type d | head -1)"
cp -r "$src/fairseq" "$src/fairseq_cli" .devpkgs/site/
find .devpkgs/site -name '*.so' -delete -o -name '*.cu' -delete
find .devpkgs/site/fairseq/examples -type f ! -name '*.py' -delete
# pure-Python dependencies the machine's image lacks (it has torch, numpy, Cython, sacrebleu and its regex)
for package in hydra omegaconf antlr4 sacremoses subword_nmt nltk click joblib; do
  cp -r "$SITE/$package" .devpkgs/site/
done
find .devpkgs -name __pycache__ -prune -exec rm -rf {} +
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --platform manylinux_2_17_x86_64 -d .devpkgs/whl bitarray==3.12.3
du -sh .devpkgs
