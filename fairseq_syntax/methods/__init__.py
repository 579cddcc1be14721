"""The methods, one folder per paper. ``METHODS`` is the registry: adding a method is a new folder whose
``__init__.py`` defines ``METHOD`` (a :class:`~fairseq_syntax.core.method.Method`) plus one line here.

``python -m fairseq_syntax.methods`` prints what the recipes, the benchmark and the README read from it.

:data:`STUDY` is the grid of the Multi30k study (``examples/multi30k/README.md``, "The study"), "does the syntax
help, and is it the parse that helps?" (Pham, Macháček & Bojar 2019 found trivial trees give NMT the same gains as
real parses): the baselines, each syntax method on the parses, and the constituency masks, hierarchical
accumulation and UDP also on random structures (:mod:`fairseq_syntax.core.controls`), each over seeds 1, 2 and 3.
Its order is the order of the budget: where it runs short, all three seeds of one system are finished before the
next starts.
"""
from collections.abc import Iterator

from fairseq_syntax.core.method import System
from fairseq_syntax.methods import (
    dependency_supervision,
    hier_accum,
    ldd,
    pascal,
    syntax_mask,
    tree_transformer,
)

METHODS = (
    syntax_mask.METHOD,
    ldd.METHOD,
    tree_transformer.METHOD,
    hier_accum.METHOD,
    pascal.METHOD,
    dependency_supervision.METHOD,
)


#: the study grid's systems by name, in the order the budget goes to them (module docstring)
STUDY = ("sequence", "mask", "mask_random", "hier_accum", "hier_accum_random", "udp", "udp_random", "ldd",
         "linearized", "dbsa", "pascal")


def systems(task: str | None = "translation", baselines: bool = True, ablations: bool = True,
            controls: bool = False) -> Iterator[System]:
    """Every system of every method, in registry order (baselines first within a method; with ``controls``, each
    system's control systems right after it); filtered by task (None: all tasks), without baselines or ablations
    when asked."""
    for method in METHODS:
        for system in method.systems_with_controls if controls else method.systems:
            if (task is None or system.task == task) and (baselines or not system.baseline) and (
                    ablations or not system.ablation):
                yield system


def study_systems() -> list[System]:
    """The systems of :data:`STUDY`, in its order."""
    by_name = {system.name: system for system in systems(task=None, controls=True)}
    missing = [name for name in STUDY if name not in by_name]
    if missing:
        raise ValueError(f"STUDY names {missing}, which no method describes")
    return [by_name[name] for name in STUDY]
