"""One description per paper: what a method registers and what it needs, read by everything that lists methods
(the registry: :mod:`fairseq_syntax.methods`).

A :class:`System` is one row of a results table: a name, a registered architecture (with its ``_tiny`` sibling),
the data directory it reads (input form and POS-node convention, :mod:`fairseq_syntax.core.input_forms`), the side
inputs its encoder reads (:mod:`fairseq_syntax.core.side_inputs`) and extra model options. Baselines are systems
too. A side input that does not come with the input form is made by a function a method declares
(``Method.side_data``, :mod:`fairseq_syntax.core.side_data`); one on control structures, :meth:`System.on_control`."""
import argparse
from collections.abc import Callable
from dataclasses import dataclass, replace

from fairseq_syntax.core.control_kinds import CONTROLS, control_data_name, control_seed_for_run
from fairseq_syntax.core.side_data import SideData

TASKS = ("translation", "classification", "masked_lm")


def data_dir_name(form: str, preterminals: str, control: str = "", control_seed: int = 1) -> str:
    """A data directory's name: the form, suffixed with the POS-node convention unless ``auto``, and with
    ``.CONTROL`` (``.CONTROL-sK`` for control seed K > 1) where it holds a control structure."""
    name = form if preterminals == "auto" else f"{form}-{preterminals}"
    return control_data_name(name, control, control_seed) if control else name


@dataclass(frozen=True)
class System:
    name: str  # row name in the results tables, e.g. "mask", "udp"
    arch: str  # registered fairseq architecture (base size); ARCH_tiny is the test size
    form: str = "sequence"  # input form of fairseq-syntax-preprocess: sequence, linearized, preorder
    preterminals: str = "auto"  # which POS nodes are tree nodes: auto, keep, split, drop (core.trees.preorder)
    model_args: tuple[str, ...] = ()  # extra fairseq-train options, e.g. ("--syntax-variant", "udp")
    task: str = "translation"  # one of TASKS
    baseline: bool = False  # a comparison system (fairseq's own transformer), not the method itself
    ablation: bool = False  # an ablation of the paper (reported in full recipes, not in the demo)
    controls: tuple[str, ...] = ()  # control structures it is also run on (on_control), e.g. ("random",)
    control: str = ""  # the control structure its data directory holds instead of the parses (on_control sets it)
    control_seed: int = 1  # the seed its control structures were drawn with (for_training_seed sets it)
    #: the ``net_input`` entries its encoder reads (``side_inputs``), then its training loss's targets
    #: (``supervision_inputs``), as its model class says (tests/core/test_methods.py)
    side_inputs: tuple[str, ...] = ()

    def __post_init__(self):
        if self.task not in TASKS:
            raise ValueError(f"system {self.name}: task {self.task!r} is not one of {TASKS}")
        unknown = [control for control in (*self.controls, self.control) if control and control not in CONTROLS]
        if unknown:
            raise ValueError(f"system {self.name}: controls {unknown} are not among {CONTROLS}")

    @property
    def data(self) -> str:
        """Name of its data directory (:func:`data_dir_name`)."""
        return data_dir_name(self.form, self.preterminals, self.control, self.control_seed)

    def for_training_seed(self, seed: int) -> "System":
        """The system as training seed ``seed`` trains it: a control system reads ``DATA.CONTROL-sSEED`` (seed 1:
        ``DATA.CONTROL``); others as they are."""
        if not self.control:
            return self
        return replace(self, control_seed=control_seed_for_run(self.control, seed))

    def on_control(self, control: str) -> "System":
        """The same system on the ``control`` structures: ``NAME_CONTROL`` reading ``DATA.CONTROL``."""
        if control not in self.controls:
            raise ValueError(f"system {self.name} is not run on {control!r} controls (its controls: {self.controls})")
        return replace(self, name=f"{self.name}_{control}", controls=(), control=control)

    @property
    def control_systems(self) -> tuple["System", ...]:
        return tuple(self.on_control(control) for control in self.controls)

    @property
    def tiny_arch(self) -> str:
        return f"{self.arch}_tiny"

    def spec(self) -> str:
        """``NAME:ARCH:DATA[:EXTRA]`` (EXTRA: options joined with ``=``)."""
        extra = ":" + ",".join(f"{k}={v}" for k, v in zip(self.model_args[::2], self.model_args[1::2]))
        return f"{self.name}:{self.arch}:{self.data}" + (extra if self.model_args else "")


@dataclass(frozen=True)
class PlotCommand:
    """A subcommand of ``fairseq-syntax-plot``: ``add_arguments(parser)`` then ``run(args)``."""

    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], None]


@dataclass(frozen=True)
class Method:
    name: str  # its folder under fairseq_syntax/methods/
    title: str  # e.g. "Syntax attention masks"
    citation: str  # authors and year, e.g. "McDonald & Chiang 2021"
    systems: tuple[System, ...]
    #: its modules that register with fairseq (imported by :func:`fairseq_syntax.methods.register`, not by the
    #: description)
    modules: tuple[str, ...] = ()
    #: its modules (by name in its folder) whose ``PLOT`` (a :class:`PlotCommand`) is a subcommand of
    #: ``fairseq-syntax-plot`` (:func:`fairseq_syntax.methods.plots`)
    plot_modules: tuple[str, ...] = ()
    #: model options whose code paths the CUDA equality test must also cover (one test per entry)
    cuda_variants: tuple[tuple[str, ...], ...] = ()
    notes: str = ""  # one line for the README table
    #: the side inputs it makes from a split's tokens, parses and BPE (:class:`~fairseq_syntax.core.side_data.SideData`)
    side_data: tuple[SideData, ...] = ()
    #: the package of its ``modules`` (default ``fairseq_syntax.methods.NAME``)
    package: str = ""

    @property
    def module_prefix(self) -> str:
        return self.package or f"fairseq_syntax.methods.{self.name}"

    @property
    def systems_with_controls(self) -> tuple[System, ...]:
        """Its systems, each followed by its systems on control structures (:meth:`System.on_control`)."""
        return tuple(s for system in self.systems for s in (system, *system.control_systems))

    @property
    def archs(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.arch for s in self.systems if not s.baseline))
