"""``python3 bench/cuda/setup_check.py [--device cuda]``: what a GPU window's machine offers and whether this checkout
runs there (step 1 of ``bench/cuda/window.sh``): Python, torch and the GPU, fairseq with its compiled helpers, this
package, the commands the recipes call, free disk. Exits non-zero when something the steps need is missing (with
``--device cuda``: a GPU that torch can use)."""
import argparse
import importlib
import os
import platform
import shutil
import sys

COMMANDS = ("fairseq-train", "fairseq-generate", "fairseq-preprocess", "fairseq-syntax-preprocess",
            "fairseq-syntax-score", "fairseq-syntax-results")
COMPILED = ("fairseq.data.data_utils_fast", "fairseq.data.token_block_utils_fast", "fairseq.libbleu")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    args = parser.parse_args(argv)
    problems = []
    import torch

    print("python", platform.python_version(), "| torch", torch.__version__, "| cores", os.cpu_count())
    print("cuda available:", torch.cuda.is_available())
    if torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        print(f"device: {properties.name}, {properties.total_memory / 2**30:.0f} GiB, capability "
              f"{properties.major}.{properties.minor}")
        x = torch.randn(64, 64, device="cuda", dtype=torch.float64)
        if not torch.allclose((x @ x).cpu(), x.cpu() @ x.cpu()):
            problems.append("a matrix product on the GPU differs from the CPU's")
    elif args.device == "cuda":
        problems.append("torch sees no GPU")
    import fairseq

    print("fairseq", fairseq.__version__, fairseq.__file__)
    for module in COMPILED:
        try:
            importlib.import_module(module)
        except ImportError as error:
            problems.append(f"{module}: {error}")
    import fairseq_syntax

    print("fairseq_syntax", os.path.dirname(fairseq_syntax.__file__))
    missing = [command for command in COMMANDS if shutil.which(command) is None]
    print("commands:", f"missing {missing}" if missing else "all on PATH")
    problems += [f"{command} is not on PATH" for command in missing]
    print("disk free:", shutil.disk_usage("/tmp").free // 2**30, "GiB in /tmp")
    for problem in problems:
        print("problem:", problem)
    print("set-up check:", "failed" if problems else "passed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
