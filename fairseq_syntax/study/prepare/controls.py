"""The control structures of a study: ``bpe/CONTROL[-sK]/SPLIT.*``, the parses changed by each control kind and seed
the grid reads (:mod:`fairseq_syntax.parsing.controls`), from which ``data-bin/FORM.CONTROL[-sK]`` is binarized."""
from __future__ import annotations

from pathlib import Path

from fairseq_syntax.core.control_kinds import control_data_name
from fairseq_syntax.study.prepare.engine import Step
from fairseq_syntax.study.prepare.needs import ARCS, CONLLU, SPLITS, TREES
from fairseq_syntax.study.prepare.preparation import Preparation
from fairseq_syntax.study.processes import quiet


def controls_step(prep: Preparation, control: str, seed: int) -> None:
    from fairseq_syntax.parsing.controls import control_arcs_file, control_tree_file

    name = control_data_name("", control, seed)[1:]
    reads = prep.needs.control_reads[control, seed]
    make_trees, make_arcs = "trees" in reads, "arcs" in reads
    outputs, recipe = [], {"control": control, "control_seed": seed}
    for split in SPLITS:
        if make_trees:
            outputs.append(f"bpe/{name}/{split}.{TREES}")
            recipe[f"input tok/{split}.{TREES}"] = prep.input_digest(prep.parses_record("trees"),
                                                                     f"tok/{split}.{TREES}")
        if make_arcs:
            outputs += [f"bpe/{name}/{split}.{ARCS}", f"bpe/{name}/{split}.{CONLLU}"]
            recipe[f"input tok/{split}.{ARCS}"] = prep.input_digest(prep.parses_record("arcs"), f"tok/{split}.{ARCS}")

    def build(staging: Path) -> str:
        folder, tok = staging / "bpe" / name, prep.work / "tok"
        folder.mkdir(parents=True)
        lines = {}
        with quiet(staging / "control.log"):
            for split in SPLITS:
                if make_trees:
                    lines[split] = control_tree_file(str(tok / f"{split}.{TREES}"), str(folder / f"{split}.{TREES}"),
                                                     control, seed)
                if make_arcs:
                    lines[split] = control_arcs_file(str(tok / f"{split}.{ARCS}"), str(folder / f"{split}.{ARCS}"),
                                                     str(folder / f"{split}.{CONLLU}"), control, seed)
        kinds = " and ".join(k for k, wanted in (("trees", make_trees), ("dependency trees", make_arcs)) if wanted)
        return f"{control} {kinds} (seed {seed}) for lines " + ", ".join(f"{s} {n}" for s, n in lines.items())

    prep.run(Step(f"controls:{name}", recipe, outputs, build))
