"""The methods, one folder per paper. ``METHODS`` is the registry: adding a method is a new folder whose
``__init__.py`` defines ``METHOD`` (a :class:`~fairseq_syntax.core.method.Method`) plus one line here.

``python -m fairseq_syntax.methods`` prints what the recipes, the benchmark and the README read from it.
"""
from typing import Iterator, Optional

from fairseq_syntax.core.method import System
from fairseq_syntax.methods import dependency_supervision, hier_accum, ldd, pascal, syntax_mask, tree_transformer

METHODS = (
    syntax_mask.METHOD,
    ldd.METHOD,
    tree_transformer.METHOD,
    hier_accum.METHOD,
    pascal.METHOD,
    dependency_supervision.METHOD,
)


def systems(task: Optional[str] = "translation", baselines: bool = True, ablations: bool = True) -> Iterator[System]:
    """Every system of every method, in registry order (baselines first within a method); filtered by task
    (None: all tasks), without baselines or ablations when asked."""
    for method in METHODS:
        for system in method.systems:
            if (task is None or system.task == task) and (baselines or not system.baseline) and (
                    ablations or not system.ablation):
                yield system

