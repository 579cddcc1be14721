"""The method descriptions: the registry's systems, the recipes' specs derived from them, and the README table."""
import os

import pytest
from conftest import REPO

from fairseq_syntax.cli.plot import get_parser
from fairseq_syntax.methods import METHODS, control_pairs, plots, systems, words_baseline
from fairseq_syntax.methods.__main__ import docs_table, main, readme_table


def test_translation_systems_of_the_registry_in_order():
    assert [s.spec() for s in systems()] == [
        "sequence:transformer:sequence", "linearized:transformer:linearized", "mask:transformer_syntax_mask:preorder",
        "ldd:transformer_ldd:sequence", "udp:transformer_ldd:sequence:--syntax-variant=udp",
        "ldp:transformer_ldd:sequence:--syntax-variant=ldp", "lda:transformer_ldd:sequence:--syntax-variant=lda",
        "lda_weights:transformer_ldd:sequence:--syntax-variant=lda_weights",
        "constituent:transformer_constituent:sequence", "hier_accum:transformer_hier_accum:preorder-split",
        "pascal:transformer_pascal:sequence",
        "dbsa:transformer_dependency_supervised:sequence:--criterion=label_smoothed_cross_entropy_with_dependency"]
    assert [s.name for s in systems(baselines=False, ablations=False)] == ["mask", "ldd", "constituent", "hier_accum",
                                                                          "pascal", "dbsa"]


def test_control_systems_and_their_pairs_come_from_the_descriptions(capsys):
    assert [s.spec() for s in systems(controls=True) if s.control] == [
        "mask_random:transformer_syntax_mask:preorder.random", "mask_struct:transformer_syntax_mask:preorder.struct",
        "udp_random:transformer_ldd:sequence.random:--syntax-variant=udp",
        "hier_accum_random:transformer_hier_accum:preorder-split.random",
        "hier_accum_struct:transformer_hier_accum:preorder-split.struct",
        "dbsa_random:transformer_dependency_supervised:sequence.random:"
        "--criterion=label_smoothed_cross_entropy_with_dependency"]
    by_name = {s.name: s for s in systems(controls=True)}
    assert by_name["mask_random"].side_inputs == by_name["mask"].side_inputs  # the same system, other data
    # each control with its system and kind, in registry order (fairseq-syntax-results' --control)
    assert control_pairs() == {"mask_random": ("mask", "random"), "mask_struct": ("mask", "struct"),
                               "udp_random": ("udp", "random"), "hier_accum_random": ("hier_accum", "random"),
                               "hier_accum_struct": ("hier_accum", "struct"), "dbsa_random": ("dbsa", "random")}
    assert control_pairs(task="classification") == {}  # hier_accum_classifier has no control
    # the baseline that reads the words alone: fairseq's transformer on the sequence form (not linearized's)
    assert words_baseline() == "sequence" and by_name["sequence"].baseline and by_name["linearized"].baseline
    # the registry describes methods, not one study's grid: no --study
    with pytest.raises(SystemExit):
        main(["systems", "--study"])
    assert "unrecognized arguments: --study" in capsys.readouterr().err


def test_a_control_run_reads_the_structures_of_its_training_seed():
    by_name = {s.name: s for s in systems(controls=True)}
    # seed 1 keeps the name the study's first control runs read; seed K reads DATA.CONTROL-sK
    assert by_name["mask_struct"].for_training_seed(1).data == "preorder.struct"
    assert by_name["hier_accum_struct"].for_training_seed(2).data == "preorder-split.struct-s2"
    assert by_name["mask"].for_training_seed(4) == by_name["mask"]  # the parse: no control seed
    assert by_name["dbsa_random"].for_training_seed(3).spec() == (
        "dbsa_random:transformer_dependency_supervised:sequence.random-s3:"
        "--criterion=label_smoothed_cross_entropy_with_dependency")
    assert by_name["udp_random"].for_training_seed(4).spec() == (
        "udp_random:transformer_ldd:sequence.random-s4:--syntax-variant=udp")
    described = by_name["mask_struct"].for_training_seed(5)
    assert (described.control_seed, described.data, described.form) == (5, "preorder.struct-s5", "preorder")


def test_side_inputs_come_from_the_model_classes():
    by_name = {s.name: s for s in systems(task=None)}
    assert by_name["mask"].side_inputs == ("src_parents",)
    assert by_name["ldd"].side_inputs == by_name["udp"].side_inputs == by_name["pascal"].side_inputs == ("src_ldd",)
    assert by_name["constituent"].side_inputs == by_name["sequence"].side_inputs == ()
    assert by_name["dbsa"].side_inputs == ("src_ldd",)  # its training loss reads the parses; its encoder none
    assert by_name["hier_accum_classifier"].side_inputs == ("src_parents",)


def test_every_arch_is_registered_with_its_tiny_arch_and_reads_the_declared_side_inputs():
    # a description's side inputs are plain data; the encoder class says what it reads, then its loss
    from fairseq.models import ARCH_MODEL_REGISTRY

    for system in systems(task=None, controls=True):
        model = ARCH_MODEL_REGISTRY[system.arch]
        assert ARCH_MODEL_REGISTRY[system.tiny_arch] is model
        encoder = getattr(model, "encoder_class", None) or getattr(getattr(model, "encoder_model", None),
                                                                   "encoder_class", None)
        reads = tuple(dict.fromkeys(getattr(encoder, "side_inputs", ()) + getattr(encoder, "supervision_inputs", ())))
        assert system.side_inputs == reads, system.name


def test_every_side_input_a_system_reads_is_made_by_its_form_or_a_method():
    """A method's side data is of a registered side input; every side input a system reads is made for it."""
    from fairseq_syntax.core.side_data import FORM_SIDE_INPUTS
    from fairseq_syntax.core.side_inputs import SIDE_INPUTS
    from fairseq_syntax.methods import side_data

    made = side_data()
    assert {name: (side.suffix, side.reads) for name, side in made.items()} == {"src_ldd": ("ldd", ("arcs",))}
    assert all(SIDE_INPUTS[name].suffix == side.suffix for name, side in made.items())
    for system in systems(task=None, controls=True):
        for name in system.side_inputs:
            assert name in FORM_SIDE_INPUTS.get(system.form, ()) or system.form in made[name].forms, system.name


def test_plot_subcommands_are_the_methods_plots():
    # every method's analyses, plus the one figure that belongs to no method: a results table over seeds
    commands = get_parser()._subparsers._group_actions[0].choices
    assert sorted(plot.name for _, plot in plots()) == [
        "constituent-prior", "cross-attention-share", "ldd-attention", "mask-strengths"]
    assert sorted(commands) == sorted(["seeds"] + [plot.name for _, plot in plots()])


def test_readme_method_table_is_the_generated_one():
    with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
        assert readme_table() in f.read(), "regenerate it: python -m fairseq_syntax.methods readme-table"
    with open(os.path.join(REPO, "docs", "methods.md"), encoding="utf-8") as f:
        assert docs_table() in f.read(), "regenerate it: python -m fairseq_syntax.methods docs-table"


def test_readme_method_table_names_each_methods_arch_input_and_side_data():
    # one row per method, in the registry's order; the row of the masks written out by hand from their description
    rows = readme_table().splitlines()
    assert rows[0] == "| method | paper | arch (+ `_tiny`) | input | side data |"
    assert [row.split(" | ")[0][2:] for row in rows[2:]] == [method.title for method in METHODS]
    assert rows[2] == ("| Syntax attention masks | McDonald & Chiang 2021 | `transformer_syntax_mask` | `preorder` | "
                       "`src_parents` (fairseq-syntax-preprocess --form preorder) |")
    # a method's own systems only (not the baselines it lists), each data directory once, in the order of its systems
    hier_accum = next(row for row in rows if row.startswith("| Hierarchical accumulation |"))
    assert " | `preorder-split`, `preorder-drop` | " in hier_accum
    assert next(row for row in rows if row.startswith("| Tree Transformer")).endswith(" | `sequence` | none |")
