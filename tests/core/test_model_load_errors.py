"""A model file that is not one, and an output that cannot be written, are one line each."""
import os
import subprocess
import sys

import pytest
import torch
from conftest import REPO
from test_parse_command import run_parse

from fairseq_syntax.parsing.model_files import describe
from fairseq_syntax.core.files import atomic_path
from fairseq_syntax.parsing.text import open_output

torch.set_num_threads(1)
RANDOM_BYTES = 600
CRF_READS = ("the crf-con backend reads a SuPar 'crf-constituency' parser (a SuPar model name, or the file of "
             "preprocess/train_parser.py crf-con)")
BIAFFINE_READS = ("the biaffine backend reads a SuPar 'biaffine-dependency' parser (a SuPar model name, or the file "
                  "of preprocess/train_parser.py dependency)")
BENEPAR_READS = ("the benepar backend reads a benepar model (a benepar model name, its folder, or the file of "
                 "preprocess/train_parser.py benepar)")
STANZA_READS = ("the stanza backend reads a stanza dependency parser's file, a stanza resources folder or a model "
                "name")
TAGGER_READS = "--tagger reads a POS tagger (the file of preprocess/train_parser.py tagger)"
INPUT = "the cat sees the dog .\nthe man likes the father .\nthe dog sees the man .\nthe cat likes the dog .\n"


@pytest.fixture(scope="module")
def models(tmp_path_factory, constituency_model, dependency_model, tagger_model):
    """name -> path of each model file: tiny parsers, a tagger, one without weights, junk, a fairseq checkpoint."""
    from fairseq import checkpoint_utils
    from omegaconf import OmegaConf

    root = tmp_path_factory.mktemp("models")
    paths = {"crf-con": constituency_model, "dependency": dependency_model, "tagger": tagger_model}
    paths["broken tagger"] = str(root / "broken-tagger.pt")
    torch.save({**torch.load(tagger_model), "state_dict": {}}, paths["broken tagger"])
    paths["random"] = str(root / "random.pt")
    (root / "random.pt").write_bytes(bytes(range(256)) * 2 + bytes(RANDOM_BYTES - 512))
    paths["empty"] = str(root / "empty.pt")
    (root / "empty.pt").write_bytes(b"")
    paths["junk"] = str(root / "junk")
    (root / "junk").mkdir()
    (root / "junk" / "notes.txt").write_text("not a model\n")
    paths["fairseq"] = str(root / "checkpoint_best.pt")
    checkpoint_utils.torch_persistent_save({
        "cfg": OmegaConf.create({"model": {"_name": "transformer_syntax_mask"},
                                 "task": {"_name": "syntax_translation"}}),
        "args": None, "model": {"encoder.embed_tokens.weight": torch.zeros(4, 2)},
        "optimizer_history": [{"criterion_name": "LabelSmoothedCrossEntropyCriterion", "optimizer_name": "Adam",
                               "lr_scheduler_state": {}, "num_updates": 1}],
        "extra_state": {}, "last_optimizer_state": None}, paths["fairseq"])
    return paths


@pytest.fixture
def work(tmp_path):
    """A folder holding the input alone, and ``out/``, empty: what is there after a refused run is left behind."""
    (tmp_path / "input.en").write_text(INPUT)
    (tmp_path / "out").mkdir()
    return tmp_path


def parse_argv(work, kind, backend, model, *extra):
    output = work / "out" / ("out.tree" if kind == "constituency" else "out.arcs.jsonl")
    return [kind, "--backend", backend, "--model", model, "--input", str(work / "input.en"), "--output", str(output),
            "--device", "cpu", *extra]


#: id: (kind, backend, model, extra options: model name -> path, the line after "error: PATH: "); one check
#: (parsing.models.check_model_file) of each kind of file against each reader
CASES = {
    "random bytes as crf-con": ("constituency", "crf-con", "random", [],
                                f"no model: {RANDOM_BYTES} bytes that are no torch file; {CRF_READS}"),
    "an empty file as crf-con": ("constituency", "crf-con", "empty", [], f"no model: an empty file; {CRF_READS}"),
    "a fairseq checkpoint as crf-con": ("constituency", "crf-con", "fairseq", [], "a fairseq checkpoint (a translation "
                                        f"model, for fairseq-generate); {CRF_READS}"),
    "a constituency model to dependency": ("dependency", "biaffine", "crf-con", [],
                                           f"a SuPar 'crf-constituency' parser; {BIAFFINE_READS}"),
    "a junk folder for benepar": ("constituency", "benepar", "junk", [],
                                  f"no model: a folder of 1 entry (notes.txt); {BENEPAR_READS}"),
    "a SuPar parser for stanza": ("dependency", "stanza", "dependency", [],
                                  f"a SuPar 'biaffine-dependency' parser; {STANZA_READS}"),
    "a tagger as crf-con": ("constituency", "crf-con", "tagger", [], f"a POS tagger; {CRF_READS}"),
    "random bytes as --tagger": ("constituency", "crf-con", "crf-con", ["--tagger", "random"],
                                 f"no model: {RANDOM_BYTES} bytes that are no torch file; {TAGGER_READS}"),
}


@pytest.mark.parametrize("case", CASES)
def test_a_model_that_is_not_one_is_one_line_naming_what_it_holds(models, work, capfd, case):
    kind, backend, model, extra, words = CASES[case]
    extra = [models.get(word, word) if word != "--tagger" else word for word in extra]
    status, lines = run_parse(parse_argv(work, kind, backend, models[model], *extra), capfd)
    named = extra[-1] if extra else models[model]  # the file the line is about
    assert status == 1 and lines == [f"error: {named}: {words}"]
    assert sorted(os.listdir(work)) == ["input.en", "out"] and os.listdir(work / "out") == []


def test_a_file_of_the_right_kind_that_does_not_load_names_the_librarys_reason(models, work, capfd):
    status, lines = run_parse(parse_argv(work, "constituency", "crf-con", models["crf-con"], "--tagger",
                                         models["broken tagger"]), capfd)
    assert status == 1 and len(lines) == 1
    assert lines[0].startswith(f"error: {models['broken tagger']}: a POS tagger that does not load (RuntimeError: "
                               "Error(s) in loading state_dict for BiLSTMTagger: Missing key(s) in state_dict: ")
    assert os.listdir(work / "out") == []


@pytest.mark.parametrize("model, tagger, words", [
    ("random", None, CASES["random bytes as crf-con"][4]),  # refused before any worker starts
    ("crf-con", "broken tagger", None),  # every worker refuses: their files are removed
], ids=["seen before the workers", "refused by the workers"])
def test_workers_that_cannot_load_their_model_leave_nothing(models, work, model, tagger, words):
    extra = ["--tagger", models[tagger]] if tagger else []
    done = subprocess.run([sys.executable, str(os.path.join(REPO, "preprocess", "parse_constituency.py")),
                           *parse_argv(work, "constituency", "crf-con", models[model], *extra)[1:], "--workers", "2",
                           "--batch-size", "1"], capture_output=True, text=True, cwd=work)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    [line] = done.stderr.splitlines()  # no status line, no progress bar: the model did not load
    if words:
        assert line == f"error: {models[model]}: {words}"
    else:
        assert line.startswith(f"error: {models[tagger]}: a POS tagger that does not load (RuntimeError: ")
    assert os.listdir(work / "out") == []  # no shard, manifest, log, progress file or lock


# --- what files hold
def test_model_files_are_told_apart_without_running_anything_in_them(models, tmp_path):
    assert describe(models["crf-con"]).kind == "supar:crf-constituency"
    assert describe(models["crf-con"] + ".checkpoint").kind == "supar:crf-constituency"  # SuPar's: a whole parser
    assert describe(models["dependency"]).kind == "supar:biaffine-dependency"
    assert describe(models["tagger"]).kind == describe(models["broken tagger"]).kind == "tagger"
    assert describe(models["fairseq"]).kind == "fairseq"
    (tmp_path / "text.pt").write_text("a\nb\nc\n")
    assert describe(str(tmp_path / "text.pt")).words == "no model: a text file of 3 lines"
    (tmp_path / "empty").mkdir()
    assert describe(str(tmp_path / "empty")).words == "no model: an empty folder"

    flag = tmp_path / "ran"

    class Payload:  # a pickle that runs a command when unpickled
        def __reduce__(self):
            return (os.system, (f"touch {flag}",))

    torch.save(Payload(), tmp_path / "payload.pt")
    held = describe(str(tmp_path / "payload.pt"))
    assert not flag.exists()  # os.system was named, never called
    assert held.kind is None and held.words == "a torch file of one posix.system, no model"


# --- outputs
@pytest.mark.parametrize("folder, output, extra, problem", [
    (None, "missing/x.arcs.jsonl", [], "--output OUT/missing/x.arcs.jsonl: no such folder OUT/missing (make it first)"),
    ("x.arcs.jsonl", "x.arcs.jsonl", [], "--output OUT/x.arcs.jsonl: a folder, not a file: give a file's path"),
    ("x.conllu", "x.arcs.jsonl", ["--conllu", "OUT/x.conllu"],
     "--conllu OUT/x.conllu: a folder, not a file: give a file's path"),
    ("x.arcs.jsonl.skipped", "x.arcs.jsonl", [],
     "OUT/x.arcs.jsonl.skipped (written beside --output): a folder, not a file: give a file's path"),
], ids=["missing folder", "output is a folder", "conllu is a folder", "skipped is a folder"])
def test_an_output_that_cannot_be_written_is_refused_before_any_model_loads(models, work, capfd, folder, output,
                                                                            extra, problem):
    out = work / "out"
    if folder:
        (out / folder).mkdir()
    before = sorted(os.listdir(out))
    # random bytes as the model: had it been loaded first, the line would be about it
    argv = ["dependency", "--backend", "biaffine", "--model", models["random"], "--input", str(work / "input.en"),
            "--output", str(out / output), "--device", "cpu", *(word.replace("OUT", str(out)) for word in extra)]
    status, lines = run_parse(argv, capfd)
    assert status == 1 and lines == [f"error: {problem.replace('OUT', str(out))}"]
    assert sorted(os.listdir(out)) == before


def test_no_partial_file_outlives_a_failed_write(tmp_path):
    folder = tmp_path / "a-folder"
    folder.mkdir()
    ran = []
    with pytest.raises(IsADirectoryError):  # refused before the block writes anything
        with atomic_path(str(folder)):
            ran.append(True)
    assert ran == [] and sorted(os.listdir(tmp_path)) == ["a-folder"]
    target = tmp_path / "out.tree"
    with pytest.raises(IsADirectoryError):  # the rename fails: a folder was made at the path meanwhile
        with open_output(str(target)) as handle:
            handle.write("(S (XX a))\n")
            target.mkdir()
    assert sorted(os.listdir(tmp_path)) == ["a-folder", "out.tree"] and target.is_dir()
