"""fairseq-syntax-preprocess-dependencies refuses bad settings and untrusted data directories."""
import json
import shutil

import pytest
from conftest import TRANSLATION, run_preprocess
from fairseq import options, tasks
from fairseq.data.indexed_dataset import MMapIndexedDataset

from fairseq_syntax.core.data_dir import read_meta, read_skipped_lines
from fairseq_syntax.core.side_inputs import load_side_data
from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies
from fairseq_syntax.methods.ldd.side_input import decode_sentence


def add_dependencies(raw, dest):
    return preprocess_dependencies.main(["--destdir", str(dest), "-s", "en", "-t", "de", "--labels", "stanford",
                                         "--trainpref", f"{raw}/train"])


def dependencies_error(raw, dest, *extra) -> str:
    with pytest.raises(SystemExit) as error:
        preprocess_dependencies.main(["--destdir", str(dest), "-s", "en", "-t", "de", "--labels", "stanford",
                                      "--trainpref", f"{raw}/train", *extra])
    return str(error.value)


def ldd_directory(raw, dest):
    """The sequence form of the training split of ``raw`` with its LDD side data."""
    run_preprocess(raw, dest, "sequence", splits=("train",))
    add_dependencies(raw, dest)


NOT_BELOW_1 = ("is not below 1: a distribution's probabilities reach it only where one takes all the mass, so nothing "
               "of the parser's uncertainty would be kept: give a probability in (0, 1) (default 0.001)")
BELOW_A_STEP = "is below one quantisation step (1/65535)"


def test_a_floor_that_is_not_a_probability_below_one_is_refused_before_anything_is_written(small_corpus, tmp_path):
    run_preprocess(small_corpus, tmp_path, "sequence", splits=("train",))
    meta = (tmp_path / "syntax.json").read_text()
    for floor, problem in (("nan", "is not a number: give a probability in (0, 1) (default 0.001)"),
                           ("1", NOT_BELOW_1), ("1.5", NOT_BELOW_1), ("0", BELOW_A_STEP), ("-inf", BELOW_A_STEP)):
        assert dependencies_error(small_corpus, tmp_path, f"--floor={floor}") == f"error: --floor {floor} {problem}"
        assert (tmp_path / "syntax.json").read_text() == meta and not list(tmp_path.glob("*.ldd.*"))


def test_side_data_that_keeps_no_probability_mass_is_refused(small_corpus, tmp_path):
    """Every labeled pair at 0.25: a floor of 0.3 keeps none and is refused."""
    lines = (small_corpus / "train.en").read_text().splitlines()
    with open(small_corpus / "train.arcs.jsonl", "w") as out:
        for line in lines:
            words = line.replace("@@ ", "").split()
            arcs = [[d, h, 0.5, {"det": 0.5, "nsubj": 0.5}] for d in range(1, len(words) + 1)
                    for h in (0, d - 1 if d > 1 else 2)]
            out.write(json.dumps({"words": words, "arcs": arcs}) + "\n")
    run_preprocess(small_corpus, tmp_path, "sequence", splits=("train",))
    words = sum(len(line.replace("@@ ", "").split()) for line in lines)
    assert dependencies_error(small_corpus, tmp_path, "--floor", "0.3") == (
        f"error: {small_corpus}/train.arcs.jsonl: no probability of its {words} words' distributions reaches --floor "
        "0.3, so the side data would be all zeros and the model would learn from no parse: lower --floor, or check "
        "the arcs file")
    assert not list(tmp_path.glob("*.ldd.*")) and "ldd" not in read_meta(str(tmp_path))["side_data"]
    # the settings of a run that made nothing bind nothing: the corrected rerun is accepted
    report = add_dependencies(small_corpus, tmp_path)["train"]
    assert report.stored == pytest.approx(words, rel=1e-4)  # at 0.001 each word keeps its 4 x 0.25
    assert read_meta(str(tmp_path))["ldd"] == {"labels": "stanford", "floor": 0.001}


def test_the_lines_preprocessing_skipped_are_left_out_of_the_source_and_the_arcs(small_corpus, tmp_path):
    out = tmp_path / "out"
    # the sources with "fa@@ ther" have 7 tokens: with EOS they do not fit 7 positions and are skipped
    run_preprocess(small_corpus, out, "sequence", "--skip-invalid", "--max-source-positions", "7", splits=("train",))
    lines = (small_corpus / "train.en").read_text().splitlines()
    skipped = [number for number, line in enumerate(lines, 1) if "fa@@" in line]
    assert read_skipped_lines(str(out / "train.skipped.tsv")) == skipped and 0 < len(skipped) < 12
    listing = out / "train.skipped.tsv"
    listing.rename(tmp_path / "listing")  # without the listing the counts cannot agree
    assert dependencies_error(small_corpus, out) == (
        f"error: line-count mismatch: {small_corpus}/train.en and {small_corpus}/train.arcs.jsonl have 12 lines (no "
        f"{listing} names lines that fairseq-syntax-preprocess left out), but {out}/train.en-de.en.bin has "
        f"{12 - len(skipped)} sentences: the data directory was not made from these files")
    (tmp_path / "listing").rename(listing)
    # a skipped line is not read at all: it may be the very line that could not be read
    arcs = (small_corpus / "train.arcs.jsonl").read_text().splitlines()
    arcs[skipped[0] - 1] = "not json"
    (small_corpus / "train.arcs.jsonl").write_text("\n".join(arcs) + "\n")
    source = (small_corpus / "train.en").read_bytes().split(b"\n")
    source[skipped[0] - 1] += b" \xff"
    (small_corpus / "train.en").write_bytes(b"\n".join(source))
    report = add_dependencies(small_corpus, out)["train"]
    assert report.left_out == len(skipped) and report.sentences == 12 - len(skipped)
    assert report.lines("train")[0] == (f"train: {len(skipped)} lines that fairseq-syntax-preprocess skipped "
                                        "(train.skipped.tsv) are left out of the source and the arcs file")
    stored = MMapIndexedDataset(str(out / "train.en-de.en.ldd"))
    assert len(stored) == 12 - len(skipped)
    # n tokens: the kept 6-word lines (read through decode_sentence, which knows both layouts of an item)
    assert [len(decode_sentence(stored[k]).token_words) for k in range(len(stored))] == [6] * len(stored)
    listing.write_text(listing.read_text() + "x\tmalformed\n")
    assert dependencies_error(small_corpus, out) == (
        f"error: {listing}:{len(skipped) + 1}: expected LINE<TAB>reason<TAB>message, got 'x\\tmalformed'")


def test_side_data_made_for_other_tokens_is_refused_where_it_is_loaded(small_corpus, tmp_path):
    made = tmp_path / "made"
    ldd_directory(small_corpus, made)
    assert list(load_side_data(str(made), "train", "en", "de", read_meta(str(made)))) == ["src_ldd"]
    # the same pairs in reverse order: the same dictionary and number of sentences, other tokens in each
    reverse = tmp_path / "reverse"
    reverse.mkdir()
    for name in ("train.en", "train.de", "train.tree"):
        (reverse / name).write_text("".join(reversed((small_corpus / name).read_text().splitlines(keepends=True))))
    other = tmp_path / "other"
    run_preprocess(reverse, other, "sequence", splits=("train",))
    for extension in ("bin", "idx"):
        shutil.copy(made / f"train.en-de.en.ldd.{extension}", other)
    side_data = f"{other}/train.en-de.en.ldd.{{bin,idx}} (side input src_ldd)"
    remake = "remove it, or make it again with fairseq-syntax-preprocess-dependencies"
    with pytest.raises(SystemExit) as error:
        load_side_data(str(other), "train", "en", "de", read_meta(str(other)))
    assert str(error.value) == (f"error: {side_data} is not recorded in {other}/syntax.json: it is left from an "
                                f"earlier preprocessing run, or from a run that was stopped; {remake}")
    shutil.copy(made / "syntax.json", other)  # now a record, of the tokens of the other directory
    message = (f"error: {side_data} was made for other tokens than {other}/train.en-de.en.{{bin,idx}} holds (the "
               f"fingerprints in syntax.json differ): {remake}")
    args = options.parse_args_and_arch(options.get_training_parser(), [
        str(other), *TRANSLATION, "--arch", "transformer", "-s", "en", "-t", "de", "--cpu"])
    task = tasks.setup_task(args)
    with pytest.raises(SystemExit) as error:  # the task loads side data there, and nowhere else
        task.load_dataset("train")
    assert str(error.value) == message


def test_preprocessing_again_takes_the_side_data_of_the_earlier_run_away(small_corpus, tmp_path):
    out = tmp_path / "out"
    ldd_directory(small_corpus, out)  # without --overwrite refused: tests/core/test_preprocess.py
    run_preprocess(small_corpus, out, "sequence", "--overwrite", splits=("train",))
    assert not list(out.glob("*.ldd.*")) and "ldd" not in read_meta(str(out))
    assert load_side_data(str(out), "train", "en", "de", read_meta(str(out))) == {}
