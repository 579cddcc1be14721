"""An error is one line saying what to do, not a traceback, and a run refused on its
arguments writes nothing, so the corrected rerun is not refused as "a run that was stopped"."""
import os
import shutil

import pytest
from conftest import TRANSLATION, run_preprocess
from fairseq import options, tasks


def preprocess_error(raw, dest, *extra) -> str:
    with pytest.raises(SystemExit) as error:
        run_preprocess(raw, dest, "sequence", *extra)
    return str(error.value)


def test_dictionary_arguments_are_checked_before_anything_is_written(small_corpus, tmp_path):
    made, dest = tmp_path / "made", tmp_path / "out"
    run_preprocess(small_corpus, made, "sequence")
    dictionaries = ["--srcdict", str(made / "dict.en.txt"), "--tgtdict", str(made / "dict.de.txt")]
    # run_preprocess passes --joined-dictionary: fairseq asserted on both dictionaries after writing preprocess.log
    assert preprocess_error(small_corpus, dest, *dictionaries) == (
        "error: --joined-dictionary uses one dictionary for both sides: give it as --srcdict alone (or leave "
        "--joined-dictionary out to give --srcdict and --tgtdict)")
    assert not dest.exists()
    assert preprocess_error(small_corpus, dest, "--srcdict", str(tmp_path / "missing.txt")) == (
        f"error: --srcdict {tmp_path}/missing.txt: no such file")
    (tmp_path / "bad.txt").write_text("the\n")
    assert preprocess_error(small_corpus, dest, "--srcdict", str(tmp_path / "bad.txt")).startswith(
        f"error: --srcdict {tmp_path}/bad.txt: not a fairseq dictionary (lines 'TOKEN COUNT'): ")
    assert not dest.exists()
    # the corrected command runs
    run_preprocess(small_corpus, dest, "sequence", "--srcdict", str(made / "dict.en.txt"))
    assert (dest / "dict.en.txt").read_text() == (made / "dict.en.txt").read_text()


def test_an_existing_destdir_is_left_as_it_was_by_a_refused_run(small_corpus, tmp_path):
    dest = tmp_path / "out"
    dest.mkdir()
    (dest / "parsers.json").write_text("{}")
    with pytest.raises(SystemExit) as error:  # no --trainpref and no dictionaries: fairseq's AssertionError before
        from fairseq_syntax.cli import preprocess as command

        command.main(["-s", "en", "-t", "de", f"--validpref={small_corpus}/valid", "--form", "sequence",
                      "--destdir", str(dest), "--workers", "1"])
    assert str(error.value) == (
        "error: without --trainpref there is no training data to build the source and target dictionary from: give "
        "the training data directory's, --srcdict and --tgtdict (or --srcdict with --joined-dictionary)")
    assert sorted(os.listdir(dest)) == ["parsers.json"]


def test_a_data_directory_made_halfway_is_one_line(data_dirs, tmp_path):
    made = tmp_path / "made"
    shutil.copytree(data_dirs["sequence"], made)
    for name in os.listdir(made):  # what a run stopped after the dictionaries leaves
        if name.endswith((".bin", ".idx")):
            os.remove(made / name)
    with pytest.raises(SystemExit) as error:  # fairseq: "Could not infer language pair, please provide it explicitly"
        tasks.setup_task(options.parse_args_and_arch(options.get_generation_parser(), [str(made), *TRANSLATION]))
    assert str(error.value) == (
        f"error: {made} holds no binarized split ({{split}}.SRC-TGT.SRC.{{bin,idx}}) to tell the language pair from: "
        "a data directory made halfway (a preprocessing run that was stopped?): make it again with "
        "fairseq-syntax-preprocess")
    os.remove(made / "dict.de.txt")
    with pytest.raises(SystemExit) as error:  # fairseq: FileNotFoundError
        tasks.setup_task(options.parse_args_and_arch(options.get_generation_parser(), [
            str(made), *TRANSLATION, "-s", "en", "-t", "de"]))
    assert str(error.value) == (
        f"error: {made}/dict.de.txt: no such file: {made} is a data directory made halfway, or for other languages "
        "(-s/-t): make it again with fairseq-syntax-preprocess")


@pytest.mark.parametrize("arch, reads", [
    ("transformer_syntax_mask_tiny", "['src_parents']"),
    ("transformer_dependency_supervised_tiny", "['src_ldd']"),  # its training targets: the parser's trees
])
def test_a_syntax_model_under_fairseqs_translation_task_is_one_line(data_dirs, arch, reads):
    args = options.parse_args_and_arch(options.get_training_parser(), [
        data_dirs["preorder"], "--user-dir", TRANSLATION[-1], "--task", "translation", "--arch", arch, "--cpu"])
    with pytest.raises(SystemExit) as error:  # a ValueError at the first batch before
        tasks.setup_task(args).build_model(args)
    assert str(error.value) == (
        f"error: --arch {arch} reads side data {reads}, which --task translation does not give it: use --task "
        "syntax_translation (and a data directory made by fairseq-syntax-preprocess)")
