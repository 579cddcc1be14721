"""The methods, one folder per paper. ``METHODS`` is the registry: a method is a folder whose ``__init__.py`` defines
``METHOD`` (a :class:`~fairseq_syntax.core.method.Method`) plus one line here. Another installed package adds one
through the entry point group ``fairseq_syntax.methods`` (``NAME = PACKAGE:METHOD``), after these, by name.

The descriptions are plain data: importing this package loads neither torch nor fairseq; a method's modules load
when the plugin calls :func:`register`, its plots for ``fairseq-syntax-plot`` (:func:`plots`). The registry describes
methods, not a study."""
import importlib
from collections.abc import Iterator
from dataclasses import replace
from importlib.metadata import entry_points

from fairseq_syntax.core.method import Method, PlotCommand, System
from fairseq_syntax.core.side_data import FORM_SIDE_INPUTS, SideData
from fairseq_syntax.methods import (
    dependency_supervision,
    hier_accum,
    ldd,
    pascal,
    syntax_mask,
    tree_transformer,
)

#: the entry point group through which another installed package adds a method
ENTRY_POINTS = "fairseq_syntax.methods"


def installed_methods() -> tuple[Method, ...]:
    """The methods other installed packages add (:data:`ENTRY_POINTS`), in the order of their entry points' names."""
    found = []
    for point in sorted(entry_points(group=ENTRY_POINTS), key=lambda point: point.name):
        method = point.load()
        if not isinstance(method, Method):
            raise TypeError(f"entry point {point.name} = {point.value} ({ENTRY_POINTS}) is not a Method")
        found.append(method if method.package else replace(method, package=point.module))
    return tuple(found)


METHODS = (
    syntax_mask.METHOD,
    ldd.METHOD,
    tree_transformer.METHOD,
    hier_accum.METHOD,
    pascal.METHOD,
    dependency_supervision.METHOD,
    *installed_methods(),
)


def _module(method: Method, name: str):
    return importlib.import_module(f"{method.module_prefix}.{name}")


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


def side_data() -> dict[str, SideData]:
    """Every side input a method of the registry makes (:attr:`~fairseq_syntax.core.method.Method.side_data`), by
    name, registry order; a name declared twice, or one an input form makes, is a ValueError."""
    found: dict[str, SideData] = {}
    made_by_forms = {name for names in FORM_SIDE_INPUTS.values() for name in names}
    for method in METHODS:
        for declared in method.side_data:
            if declared.input in found or declared.input in made_by_forms:
                raise ValueError(f"method {method.name}: side input {declared.input} is made elsewhere already")
            if declared.suffix in {other.suffix for other in found.values()}:
                raise ValueError(f"method {method.name}: side data suffix {declared.suffix!r} is another's already")
            found[declared.input] = declared
    return found


def control_pairs(task: str | None = None) -> dict[str, tuple[str, str]]:
    """Each control system of the registry (:meth:`~fairseq_syntax.core.method.System.on_control`) -> (the system
    it is a control of, its control kind), in registry order: ``{"mask_random": ("mask", "random"), ...}``;
    filtered by task (None: all tasks)."""
    return {control.name: (system.name, control.control)
            for method in METHODS for system in method.systems for control in system.control_systems
            if task is None or system.task == task}


def words_baseline() -> str:
    """The registry's translation baseline that reads the words alone (fairseq's ``transformer`` on the sequence
    form): what a study's methods are tested against unless it names another."""
    found = [system.name for system in systems(ablations=False) if system.baseline and system.form == "sequence"
             and not system.model_args and not system.control]
    if len(found) != 1:
        raise ValueError(f"the registry describes {len(found)} words-only translation baselines ({found}), not one")
    return found[0]
