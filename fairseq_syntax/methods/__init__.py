"""The methods, one folder per paper. ``METHODS`` is the registry: adding a method is a new folder whose
``__init__.py`` defines ``METHOD`` (a :class:`~fairseq_syntax.core.method.Method`) plus one line here.

``python -m fairseq_syntax.methods`` prints what the recipes, the benchmark and the README read from it.

:data:`STUDY` is the grid of the Multi30k study (``examples/multi30k/README.md``, "The study"), "does the syntax
help, and is it the parse that helps?" (Pham, Macháček & Bojar 2019 found trivial trees give NMT the same gains as
real parses): the baselines, each syntax method on the parses, and the constituency masks, hierarchical
accumulation, UDP and dependency-supervised attention also on control structures
(:mod:`fairseq_syntax.core.control_kinds`: random trees, and for the tree inputs the structure-only ``struct``
trees), each over seeds 1, 2 and 3, and seeds 4 and 5 where the answer was close (:data:`STUDY_SEEDS`). Its order is
the order of the budget: where it runs short, all seeds of one system are finished before the next starts.
"""
import re
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


#: the study grid's systems by name, in the order the budget goes to them (module docstring); the systems added
#: after its first 33 runs come last, in the order of issue 49: the dependency-supervised method's control, the
#: structure-only controls of the masks and of hierarchical accumulation
STUDY = ("sequence", "mask", "mask_random", "hier_accum", "hier_accum_random", "udp", "udp_random", "ldd",
         "linearized", "dbsa", "pascal", "dbsa_random", "mask_struct", "hier_accum_struct")
#: the seeds each system of the study gets (STUDY_SEEDS_DEFAULT for one not named): five where the answer was close
STUDY_SEEDS = {name: 5 for name in ("sequence", "udp", "udp_random", "dbsa", "ldd", "mask", "mask_random")}
STUDY_SEEDS_DEFAULT = 3


def study_seeds(name: str) -> int:
    """How many seeds (1, 2, ...) the study trains ``name`` with."""
    return STUDY_SEEDS.get(name, STUDY_SEEDS_DEFAULT)


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


def study_run_spec(name: str, seed: int) -> str:
    """The ``NAME:ARCH:DATA[:EXTRA]`` spec a study run of ``name`` with training seed ``seed`` is trained by: a
    control system on the structures drawn with that seed (:meth:`~fairseq_syntax.core.method.System.for_training_seed`,
    ``DATA.CONTROL-sSEED``; seed 1 ``DATA.CONTROL``)."""
    by_name = {system.name: system for system in study_systems()}
    if name not in by_name:
        raise ValueError(f"{name} is not a system of the study ({', '.join(STUDY)})")
    return by_name[name].for_training_seed(seed).spec()


def system_of_spec(spec: str) -> System:
    """The described system of a spec as ``systems`` prints it, or as a run of one seed reads it (a control on the
    structures of control seed K: ``DATA.CONTROL-sK``); ValueError for a spec no method describes."""
    described = list(systems(task=None, controls=True))
    for system in described:
        if system.spec() == spec:
            return system
    name = spec.split(":", 1)[0]
    seeded = re.fullmatch(r"[^:]+:[^:]+:[^:]+-s(\d+)(:.*)?", spec)
    for system in described:
        if seeded and system.name == name and system.control:
            resolved = system.for_training_seed(int(seeded.group(1)))
            if resolved.spec() == spec:
                return resolved
    raise ValueError(f"unknown system {spec!r}; see python -m fairseq_syntax.methods systems --controls")
