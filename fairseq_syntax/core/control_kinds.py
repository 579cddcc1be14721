"""The control structures by name: what each changes, how it is recorded, and how its data directories are named.

A control replaces the structure of every parse and keeps everything else (the words, the POS nodes, the labels),
so that a method trained on it differs from the same method on the parses in the structure only (Pham, Macháček &
Bojar 2019). How each control is drawn, and the files and command that make it, are in
:mod:`fairseq_syntax.parsing.controls`; this module holds what the layers below the parsing code need too (the
method descriptions of :mod:`fairseq_syntax.core.method`, the provenance of :mod:`fairseq_syntax.parsing.provenance`)
and nothing that reads a parse.

* :data:`CONTROLS`: ``random`` (random binary trees labelled ``X`` over each tree's POS nodes; random projective
  dependency trees with the parse's labels), ``left`` and ``right`` (branching trees, dependency chains), and
  ``struct``, the structure-only tree control (a random tree with the parse's number of phrases, their numbers of
  children and their labels; the dependency structures are ``random``'s already, which keep the words' labels and a
  projective tree's n - 1 arcs, so ``struct`` makes trees only: :data:`CONTROL_INPUTS`).
* A data directory of a control is ``DATA.CONTROL`` (``preorder.random``) for control seed 1 and
  ``DATA.CONTROL-sK`` for seed K (``sequence.random-s4``): :func:`control_data_name`. A study run draws its control
  structures with the control seed equal to its training seed (:func:`control_seed_for_run`), so the control's
  own variance is sampled with the seeds; the name of seed 1 is the one the study's first control runs read.
* ``parsers.json`` and ``syntax.json`` of such a directory hold ``{"control": {"structure": ..., "seed": ...}}``
  (:data:`CONTROL_KEY`), and every run record copies it: :func:`describe` words it for a table.
"""
from __future__ import annotations

CONTROLS = ("random", "left", "right", "struct")
#: the controls drawn at random, whose data directories and records carry a seed
SEEDED_CONTROLS = ("random", "struct")
#: what each control changes: the constituency trees (``trees``), the dependency side data (``arcs``), or both
CONTROL_INPUTS = {"random": ("trees", "arcs"), "left": ("trees", "arcs"), "right": ("trees", "arcs"),
                  "struct": ("trees",)}
CONTROL_LABEL = "X"  # the inner-node label of the binary controls (the PTB's label for an unknown constituent)
CONTROL_KEY = "control"  # the entry of syntax.json, parsers.json and a run record's parsers
#: what a table says a control is, in a few words
CONTROL_TITLES = {"random": "random binary trees (X labels) / random projective dependency trees",
                  "left": "left-branching trees / left chains", "right": "right-branching trees / right chains",
                  "struct": "random trees with the parse's phrase count, arities and labels"}


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
    """The control seed a run of training seed ``training_seed`` draws its structures with: the training seed
    (issue 49: one draw of control structures for every seed never samples the control's own variance); 1 for
    the controls that draw nothing."""
    return training_seed if control in SEEDED_CONTROLS else 1


def describe(entry: dict) -> str:
    """A recorded control for a results table: ``control random (seed 1)``, ``control left``."""
    structure = entry.get("structure", "?")
    seeded = structure in SEEDED_CONTROLS or structure not in CONTROLS
    return f"control {structure}" + (f" (seed {entry.get('seed', '?')})" if seeded else "")


if __name__ == "__main__":  # the recipes ask for the names (run as a file, it imports nothing: no package import)
    print(*CONTROLS)
