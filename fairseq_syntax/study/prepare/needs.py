"""What a study's grid reads, so that its preparation makes only that: the data directories of its runs (input form,
POS-node convention, control and seed), the side data made into each (the methods'
:class:`~fairseq_syntax.core.side_data.SideData`), and which parses they are made from."""
from __future__ import annotations

import dataclasses
from collections.abc import Collection
from dataclasses import dataclass, field

from fairseq_syntax.core.control_kinds import CONTROL_INPUTS, control_data_name
from fairseq_syntax.core.method import System, data_dir_name
from fairseq_syntax.core.side_data import FORM_SIDE_INPUTS, SideData
from fairseq_syntax.study.config import StudyConfig
from fairseq_syntax.study.grid import study_runs
from fairseq_syntax.study.prepare.engine import PrepareError

SPLITS = ("train", "valid", "test")
#: parses made by a parser: where each kind goes in tok/ (besides its fallback listing, FILE.skipped)
TREES, ARCS, CONLLU = "tree", "arcs.jsonl.gz", "conllu"
#: the file of each parse kind a side data may read (core.side_data.PARSE_KINDS)
PARSE_FILES = {"trees": TREES, "arcs": ARCS}


def registered_side_data() -> dict[str, SideData]:
    """The side inputs the methods make (:func:`fairseq_syntax.methods.side_data`), by name."""
    from fairseq_syntax.methods import side_data

    return side_data()


@dataclass(frozen=True)
class DataDirectory:
    """One data directory the grid reads: name, input form, POS-node convention, the side data made into it (registry
    order), and the control (with seed) it is made from ('' for the parses)."""
    name: str
    form: str
    preterminals: str
    side_data: tuple[SideData, ...] = ()
    control: str = ""
    seed: int = 1

    @property
    def reads(self) -> tuple[str, ...]:
        """The parse kinds it is made from: the trees of a tree form, and those its side data reads."""
        kinds = {"trees"} if self.form != "sequence" else set()
        kinds |= {kind for side in self.side_data for kind in side.reads}
        return tuple(kind for kind in PARSE_FILES if kind in kinds)

    @property
    def base(self) -> str:
        """The real-parse directory of the same form, whose dictionary a control directory is made with."""
        return self.name if not self.control else self.name.rsplit(".", 1)[0]

    @property
    def control_name(self) -> str:
        """``CONTROL`` or ``CONTROL-sK``: the folder of its control structures under ``bpe/``."""
        return control_data_name("", self.control, self.seed)[1:]


@dataclass
class Needs:
    """What the grid reads: its data directories (first-use order), and which parses they need. ``control_reads``
    holds, for each control and seed, the parse kinds the whole grid's directories of it read: one step makes a
    control's structures, the same whichever of its directories a preparation makes."""
    directories: list[DataDirectory] = field(default_factory=list)
    control_reads: dict[tuple[str, int], tuple[str, ...]] = field(default_factory=dict)

    def _reads(self, kind: str) -> bool:
        return any(kind in d.reads for d in self.directories) or \
            any(kind in self.control_reads[key] for key in self.controls)

    @property
    def trees(self) -> bool:
        return self._reads("trees")

    @property
    def arcs(self) -> bool:
        return self._reads("arcs")

    def readers(self, kind: str) -> str:
        """What reads the parses of ``kind``, for a message: tree input forms and side inputs by name."""
        sides = list(dict.fromkeys(side.input for d in self.directories for side in d.side_data if kind in side.reads))
        forms = kind == "trees" and any(d.form != "sequence" for d in self.directories)
        return " and ".join((["tree input forms"] if forms else []) + ([f"side data {', '.join(sides)}"] if sides
                                                                          else []))

    @property
    def controls(self) -> list[tuple[str, int]]:
        return list(dict.fromkeys((d.control, d.seed) for d in self.directories if d.control))


def system_side_data(config: StudyConfig, system: System, made: dict[str, SideData]) -> tuple[SideData, ...]:
    """The side data a system reads that is made into its data directory; a side input that neither its form nor a
    method makes, or one not made for its form, stops the study."""
    found = []
    for name in system.side_inputs:
        if name in FORM_SIDE_INPUTS.get(system.form, ()):
            continue
        if name not in made:
            raise PrepareError(f"{config.path}: systems: {system.name} reads side input {name}, which neither its "
                               f"input form {system.form} nor a method of the registry makes")
        if system.form not in made[name].forms:
            raise PrepareError(f"{config.path}: systems: {system.name} reads side input {name} on the {system.form} "
                               f"form, which its method makes for the {', '.join(made[name].forms)} form only")
        found.append(made[name])
    return tuple(found)


def grid_needs(config: StudyConfig, only: Collection[str] | None = None) -> Needs:
    """The data directories of :func:`~fairseq_syntax.study.grid.study_runs` (each control's real-parse base before
    it) and the side data made into each (registry order). Each run on a control directory must read something the
    control changes, and its side data must be made from what the control changes only. With ``only`` (run names),
    the directories those runs read and their bases, each (and each control's structures) as the whole grid
    would make it."""
    runs = study_runs(config)
    made = registered_side_data()
    default_preterminals = config.parses.preterminals
    found: dict[str, DataDirectory] = {}
    sides: dict[str, set[str]] = {}
    for run in runs:
        system = run.system
        preterminals = default_preterminals if system.preterminals == "auto" else system.preterminals
        base = data_dir_name(system.form, system.preterminals)
        reads = system_side_data(config, system, made)
        found.setdefault(base, DataDirectory(base, system.form, preterminals))
        if system.control:
            changes = CONTROL_INPUTS[system.control]
            unchanged = [side.input for side in reads if not set(side.reads) <= set(changes)]
            if unchanged or not (reads or (system.form != "sequence" and "trees" in changes)):
                what = f"side data {', '.join(unchanged)} made from parses" if unchanged else "no structure"
                raise PrepareError(f"{config.path}: systems: {system.name} reads {what} that the {system.control!r} "
                                   f"control does not change (it changes the {' and '.join(changes)})")
            found.setdefault(run.data, DataDirectory(run.data, system.form, preterminals, control=system.control,
                                                     seed=system.control_seed))
        sides.setdefault(run.data if system.control else base, set()).update(side.input for side in reads)
    found = {name: dataclasses.replace(d, side_data=tuple(side for side in made.values()
                                                           if side.input in sides.get(name, ())))
             for name, d in found.items()}
    # the bases first, in first-use order, then the controls: a control directory's dictionary is its base's
    ordered = [d for d in found.values() if not d.control] + [d for d in found.values() if d.control]
    control_reads: dict[tuple[str, int], tuple[str, ...]] = {}
    for d in ordered:
        if d.control:
            kinds = set(control_reads.get((d.control, d.seed), ())) | set(d.reads)
            control_reads[d.control, d.seed] = tuple(kind for kind in PARSE_FILES if kind in kinds)
    if only is not None:
        read = {run.data for run in runs if run.name in only}
        read |= {d.base for d in ordered if d.name in read}
        ordered = [d for d in ordered if d.name in read]
    return Needs(ordered, control_reads)

