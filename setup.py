"""fairseq-syntax: source-side syntax for fairseq Transformers (a fairseq --user-dir plugin)."""
from setuptools import find_packages, setup

setup(
    name="fairseq-syntax",
    version="0.1.0",
    description="Syntax-aware Transformers for fairseq: syntax attention masks, labeled dependency "
    "distributions, Tree Transformer, hierarchical accumulation",
    packages=find_packages(include=["fairseq_syntax", "fairseq_syntax.*"]),
    # the standard library's tomllib (fairseq-syntax-study's config) is 3.11's; `X | None` in signatures 3.10's.
    # tests/core/test_python_requires.py checks no module needs a newer Python than this
    python_requires=">=3.11",
    install_requires=[
        # fairseq-fixed provides the `fairseq` module (fairseq main branch) and imports on Python 3.11;
        # fairseq 0.12.2 from PyPI does not. Install torch first so pip keeps the torch you have.
        "fairseq-fixed==0.12.3.1",
        "torch>=2.0",
        "numpy",
        # Welch's t-test over seeds (evaluation.seed_systems.welch_test: ttest_ind's df attribute is 1.11's)
        "scipy>=1.11",
        "sacrebleu>=2.0",
        "subword-nmt",
        "sacremoses",
        "nltk",
        "tqdm",
        # fairseq's --tensorboard-logdir; without it every fairseq command logs "Please install tensorboardX"
        "tensorboardX",
    ],
    extras_require={
        "parsers": ["benepar==0.2.0", "supar==1.1.4"],
        "plot": ["matplotlib"],
        # fairseq-syntax-study run --executor slurm: the runs as a Slurm job array
        "slurm": ["submitit>=1.5"],
        "test": ["pytest", "pytest-xdist"],
    },
    entry_points={
        "console_scripts": [
            "fairseq-syntax-preprocess = fairseq_syntax.cli.preprocess:cli_main",
            "fairseq-syntax-score = fairseq_syntax.cli.score:cli_main",
            "fairseq-syntax-parse = fairseq_syntax.cli.parse:cli_main",
            "fairseq-syntax-results = fairseq_syntax.cli.results:cli_main",
            "fairseq-syntax-preprocess-dependencies = fairseq_syntax.methods.ldd.preprocess:cli_main",
            "fairseq-syntax-control = fairseq_syntax.parsing.controls:cli_main",
            "fairseq-syntax-plot = fairseq_syntax.cli.plot:cli_main",
            "fairseq-syntax-induce = fairseq_syntax.methods.tree_transformer.induce:cli_main",
            "fairseq-syntax-masked-ppl = fairseq_syntax.methods.tree_transformer.masked_lm:cli_main",
            "fairseq-syntax-study = fairseq_syntax.cli.study:cli_main",
        ],
    },
)
