"""The methods, one folder per paper. ``METHODS`` is the registry: adding a method is a new folder whose
``__init__.py`` defines ``METHOD`` (a :class:`~fairseq_syntax.core.method.Method`) plus one line here.

The descriptions are plain data: importing this package loads neither torch nor fairseq. A method's models, tasks,
criteria and side inputs (its ``Method.modules``) register with fairseq when the plugin loads them
(:func:`register`, called by :mod:`fairseq_syntax.plugin`); its plots load when ``fairseq-syntax-plot`` asks
(:func:`plots`).

``python -m fairseq_syntax.methods`` prints what the recipes, the benchmark and the README read from it.

The registry describes methods, not a study: which systems a study trains, with how many seeds, is its config's.
What a study's comparisons may take from here is what the descriptions say: each control system's method and
control kind (:func:`control_pairs`) and the baseline that reads the words alone (:func:`words_baseline`).
"""
import importlib
import re
from collections.abc import Iterator

from fairseq_syntax.core.method import Method, PlotCommand, System
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


def _module(method: Method, name: str):
    return importlib.import_module(f"{__name__}.{method.name}.{name}")


def register() -> None:
    """Imports every method's ``modules`` (registry order), which registers its models, tasks, criteria and side
    inputs with fairseq; the plugin (:mod:`fairseq_syntax.plugin`) calls it."""
    for method in METHODS:
        for name in method.modules:
            _module(method, name)


def plots() -> Iterator[tuple[Method, PlotCommand]]:
    """Each method's plot commands (the ``PLOT`` of each of its ``plot_modules``, imported now), registry order."""
    for method in METHODS:
        for name in method.plot_modules:
            yield method, _module(method, name).PLOT


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


def control_pairs(task: str | None = None) -> dict[str, tuple[str, str]]:
    """Each control system of the registry (:meth:`~fairseq_syntax.core.method.System.on_control`) -> (the system
    it is a control of, its control kind), in registry order: ``{"mask_random": ("mask", "random"), ...}``;
    filtered by task (None: all tasks)."""
    return {control.name: (system.name, control.control)
            for method in METHODS for system in method.systems for control in system.control_systems
            if task is None or system.task == task}


def words_baseline() -> str:
    """The name of the registry's translation baseline that reads the words alone (fairseq's ``transformer`` on the
    sequence form, no side input): the baseline a study's methods are tested against unless it names another."""
    found = [system.name for system in systems(ablations=False) if system.baseline and system.form == "sequence"
             and not system.model_args and not system.control]
    if len(found) != 1:
        raise ValueError(f"the registry describes {len(found)} words-only translation baselines ({found}), not one")
    return found[0]


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
