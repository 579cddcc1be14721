# fairseq on the offline GPU machine of bench/cuda/README.md (its image has torch, numpy, Cython, sacrebleu but not
# fairseq), from .devpkgs/ (made by bench/cuda/make_devpkgs.sh and carried with the working tree). From the repository
# root: source bench/cuda/device_setup.sh (bench/cuda/window.sh does it when fairseq is missing). The installation and
# the compiled helpers are made once per machine, into /tmp/site: sourced again, it only sets PATH and PYTHONPATH.
DEVICE_SETUP_ERREXIT=${-//[^e]/}  # the caller's set -e, restored at the end
set -e
ROOT=$PWD
if ! ls /tmp/site/fairseq/data/data_utils_fast*.so /tmp/site/fairseq/data/token_block_utils_fast*.so \
    /tmp/site/fairseq/libbleu*.so > /dev/null 2>&1; then
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .devpkgs/whl/*.whl
cp -r .devpkgs/site/* /tmp/site/
(cd /tmp/site && python3 - <<'PY'
import numpy
from Cython.Build import cythonize
from setuptools import Extension, setup
names = ["fairseq.data.data_utils_fast", "fairseq.data.token_block_utils_fast"]
extensions = [Extension(n, [n.replace(".", "/") + ".pyx"], include_dirs=[numpy.get_include()], language="c++",
                        extra_compile_args=["-std=c++11", "-O3"]) for n in names]
extensions.append(Extension("fairseq.libbleu", ["fairseq/clib/libbleu/libbleu.cpp", "fairseq/clib/libbleu/module.cpp"],
                            extra_compile_args=["-std=c++11"]))
setup(script_args=["build_ext", "--inplace", "-q"], ext_modules=cythonize(extensions, quiet=True))
PY
) > /tmp/cython.log 2>&1 || { tail -30 /tmp/cython.log; exit 1; }
fi
mkdir -p /tmp/bin
for c in train generate preprocess interactive validate; do
  printf '#!/bin/sh\nexec python3 -m fairseq_cli.%s "$@"\n' $c > /tmp/bin/fairseq-$c; chmod +x /tmp/bin/fairseq-$c
done
# the package's own commands (setup.py's console_scripts), run from this checkout
python3 - <<'PY'
import os, re
for name, module, function in re.findall(r'"([\w-]+) = ([\w.]+):(\w+)"', open("setup.py").read()):
    path = f"/tmp/bin/{name}"
    with open(path, "w") as script:
        script.write(f'#!/bin/sh\nexec python3 -c "import sys; sys.argv[0] = \'{name}\'; '
                     f'from {module} import {function}; {function}()" "$@"\n')
    os.chmod(path, 0o755)
PY
case ":$PATH:" in *:/tmp/bin:*) ;; *) export PATH=/tmp/bin:$PATH ;; esac
export PYTHONPATH=/tmp/site:$ROOT
[ -n "$DEVICE_SETUP_ERREXIT" ] || set +e
