"""The control structures by name: what each changes, how it is recorded, and how its data directories are named.

A control replaces the structure of every parse and keeps the words, POS nodes and labels (Pham, Macháček & Bojar
2019); drawing them: :mod:`fairseq_syntax.parsing.controls`. This module reads no parse.

What each of :data:`CONTROLS` draws: docs/methods.md, "Control structures: is it the parse that helps?".
``parsers.json`` and ``syntax.json`` hold ``{"control": {"structure": ..., "seed": ...}}`` (:data:`CONTROL_KEY`),
copied into every run record."""
from __future__ import annotations

CONTROLS = ("random", "left", "right", "struct")
#: the controls drawn at random, whose data directories and records carry a seed
SEEDED_CONTROLS = ("random", "struct")
#: what each control changes: the constituency trees (``trees``), the dependency side data (``arcs``), or both
CONTROL_INPUTS = {"random": ("trees", "arcs"), "left": ("trees", "arcs"), "right": ("trees", "arcs"),
                  "struct": ("trees",)}
CONTROL_LABEL = "X"  # the inner-node label of the binary controls (the PTB's label for an unknown constituent)
CONTROL_KEY = "control"  # the entry of syntax.json, parsers.json and a run record's parsers


def check_control(control: str) -> None:
    if control not in CONTROLS:
        raise ValueError(f"control must be one of {CONTROLS}, got {control!r}")


def control_data_name(data: str, control: str, seed: int = 1) -> str:
    """The data directory of ``data`` (a form's directory, e.g. ``preorder``) under ``control`` drawn with ``seed``:
    ``data.control`` for seed 1 (and for the controls that draw nothing), ``data.control-sSEED`` otherwise."""
    check_control(control)
    if seed < 1:
        raise ValueError(f"a control seed is a positive integer, got {seed}")
    return f"{data}.{control}" if seed == 1 or control not in SEEDED_CONTROLS else f"{data}.{control}-s{seed}"


def control_seed_for_run(control: str, training_seed: int) -> int:
    """The control seed of a run of training seed ``training_seed``: the training seed, so the control's own variance
    is sampled with the seeds; 1 for the controls that draw nothing."""
    return training_seed if control in SEEDED_CONTROLS else 1


def describe(entry: dict) -> str:
    """A recorded control for a results table: ``control random (seed 1)``, ``control left``."""
    structure = entry.get("structure", "?")
    seeded = structure in SEEDED_CONTROLS or structure not in CONTROLS
    return f"control {structure}" + (f" (seed {entry.get('seed', '?')})" if seeded else "")
