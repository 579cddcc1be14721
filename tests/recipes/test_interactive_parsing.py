"""Raw text in, translation out: fairseq-interactive with the parsers equals the offline path, per parsed system."""
import json
import os
import re
import runpy
import string
import subprocess
from argparse import Namespace

import pytest
import torch
from conftest import REPO, TINY, TREEBANK, run, tiny_corpus
from fairseq import checkpoint_utils
from fairseq.models import ARCH_MODEL_REGISTRY

from fairseq_syntax.cli import preprocess as preprocess_command
from fairseq_syntax.core.trees import ptb_escape_token
from fairseq_syntax.methods import systems
from fairseq_syntax.methods.ldd import preprocess as preprocess_dependencies

torch.set_num_threads(1)  # the parsers trained and run here, as the parse commands run them
ONE_THREAD = dict(os.environ, OMP_NUM_THREADS="1")
LONG = " ".join((["the", "cat", "sees", "the", "father", "."] * 50))  # 300 words
LINES = [
    "the father sees the cat .",
    "",
    "( the dog ) likes the man .",
    "the cat\tsees the dog .",
    LONG,
    "the café likes the {unseen} .",  # a non-ASCII word; {unseen}: vocabulary_split_word of the corpus's BPE
    "the man sees the father .",
]


def decoding_inputs(system) -> tuple:
    """The side inputs a system's encoder reads at decoding (its training-loss targets left out)."""
    model = ARCH_MODEL_REGISTRY[system.arch]
    return tuple(getattr(getattr(model, "encoder_class", None), "side_inputs", ()))


#: the systems that read a parse when they decode: a tree form, or a side input parsed at decoding (src_ldd)
PARSE_READERS = [system for system in systems(baselines=True, ablations=False)
                 if system.form != "sequence" or decoding_inputs(system)]


def vocabulary_split_word(codes, vocabulary) -> str:
    """A word whose BPE the vocabulary changes (codes: ``ab@@ c``; with the vocabulary: ``a@@ b@@ c``), so that the
    decoding test shows fairseq-interactive applying the vocabulary as the recipes' apply-bpe does."""
    merges = [tuple(line.split()) for line in codes.read_text(encoding="utf-8").splitlines()[1:]]
    known = {word for word, count in (line.split() for line in vocabulary.read_text(encoding="utf-8").splitlines())
             if int(count) >= 1}
    pairs = [(a, b) for a, b in merges if len(a) == len(b) == 1 and a + b + "@@" not in known]
    named = {character for merge in merges for symbol in merge for character in symbol.removesuffix("</w>")}
    letters = [letter for letter in string.ascii_lowercase if letter not in named]
    assert pairs and letters, f"{codes}: no merge of two characters the vocabulary lacks, or no letter left"
    (a, b), c = pairs[0], letters[0]
    return a + b + c


def apply_bpe(work, name):
    """subword-nmt apply-bpe as the recipes call it: NAME.words.en -> NAME.en."""
    with open(work / f"{name}.words.en", "rb") as words, open(work / f"{name}.en", "wb") as out:
        subprocess.run(["subword-nmt", "apply-bpe", "-c", str(work / "codes"), "--vocabulary", str(work / "vocab.en"),
                        "--vocabulary-threshold", "1"], stdin=words, stdout=out, check=True)


def parse(work, name, models):
    """The recipes' parse commands (in this process): NAME.tree and NAME.arcs.jsonl from NAME.words.en."""
    runpy.run_path(os.path.join(REPO, "preprocess", "parse_constituency.py"))["main"](
        ["--backend", "crf-con", "--model", models["crf-con"], "--tagger", models["tagger"], "--input",
         str(work / f"{name}.words.en"), "--output", str(work / f"{name}.tree")])
    runpy.run_path(os.path.join(REPO, "preprocess", "parse_dependency.py"))["main"](
        ["--model", models["dependency"], "--input", str(work / f"{name}.words.en"), "--arcs",
         str(work / f"{name}.arcs.jsonl"), "--conllu", str(work / f"{name}.conllu")])


@pytest.fixture(scope="module")
def models(constituency_model, dependency_model, tmp_path_factory):
    """Tiny parsers of conftest's sentences: crf-con (2 epochs), a POS tagger (4 epochs), the biaffine parser."""
    from fairseq_syntax.parsing.tagger import TaggedSentence, TaggerSize, train_tagger

    root = tmp_path_factory.mktemp("parsers")
    paths = {"crf-con": constituency_model, "tagger": str(root / "tagger.pt"), "dependency": dependency_model}
    tagged = [TaggedSentence(["the", s, v, "the", o, "."], ["DT", "NN", "VBZ", "DT", "NN", "."])
              for s, v, o in TREEBANK]
    train_tagger(tagged, tagged, paths["tagger"], epochs=4, batch_size=8, learning_rate=2e-2, log=lambda line: None,
                 size=TaggerSize(word_embed=8, char_embed=8, char_hidden=8, hidden=16, layers=1, dropout=0.0,
                                 word_dropout=0.0))
    return paths


@pytest.fixture(scope="module")
def corpus(models, tmp_path_factory):
    """The work folder: train/valid (60/8 pairs), LINES prepared as the recipes do; lines.txt, kept.txt."""
    work = tmp_path_factory.mktemp("interactive_parsing")
    for split, n, seed in (("train", 60, 1), ("valid", 8, 2)):
        tiny_corpus(str(work / split), n, seed)
        words = (work / f"{split}.en").read_text().replace("@@ ", "")
        (work / f"{split}.words.en").write_text(words)
    run(["subword-nmt", "learn-joint-bpe-and-vocab", "--input", str(work / "train.words.en"), str(work / "train.de"),
         "-s", "25", "-o", str(work / "codes"), "--write-vocabulary", str(work / "vocab.en"), str(work / "vocab.de")])
    unseen = vocabulary_split_word(work / "codes", work / "vocab.en")
    lines = [line.format(unseen=unseen) for line in LINES]
    (work / "lines.txt").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    kept = [number for number, line in enumerate(lines) if line.split()]
    # the recipes' normalize step: whitespace-separated tokens, brackets PTB-escaped (an empty line is refused there)
    (work / "lines.words.en").write_text("".join(" ".join(ptb_escape_token(w) for w in lines[n].split()) + "\n"
                                                 for n in kept), encoding="utf-8")
    (work / "lines.de").write_text("die katze .\n" * len(kept))
    for name in ("train", "valid", "lines"):
        apply_bpe(work, name)
        parse(work, name, models)
    return work, kept


def preprocess(work, models, system, dest, split_args, *extra):
    """fairseq-syntax-preprocess of a system's data directory as the recipes run it (BPE and parser recorded)."""
    preprocess_command.main(["-s", "en", "-t", "de", *split_args, "--form", system.form, "--preterminals",
                             system.preterminals, "--destdir", str(dest), "--workers", "1",
                             "--bpe-codes", str(work / "codes"), "--bpe-vocabulary", str(work / "vocab.en"),
                             "--bpe-vocabulary-threshold", "1", "--parser-backend", "crf-con",
                             "--parser-model", models["crf-con"], "--parser-tagger", models["tagger"], *extra])
    if system.form == "sequence":
        preprocess_dependencies.main(["-s", "en", "-t", "de", *split_args, "--labels", "universal",
                                      "--destdir", str(dest)])


#: what the tests decode: the systems that read a parse, and fairseq's transformer on the sequence form (docs/usage.md)
DECODED = [*PARSE_READERS, next(system for system in systems() if system.baseline and system.form == "sequence")]


@pytest.fixture(scope="module")
def trained(corpus, models, tmp_path_factory):
    """system name -> (data directory, offline directory of LINES, checkpoint), each trained 3 updates."""
    work, _ = corpus
    made, runs, directories = {}, {}, {}
    for system in DECODED:
        if system.data not in directories:
            root = tmp_path_factory.mktemp(system.data)
            data, offline = root / "data", root / "offline"
            preprocess(work, models, system, data, [f"--trainpref={work}/train", f"--validpref={work}/valid"],
                       "--joined-dictionary")
            preprocess(work, models, system, offline, [f"--testpref={work}/lines"], "--srcdict",
                       str(data / "dict.en.txt"), "--tgtdict", str(data / "dict.de.txt"), "--skip-invalid")
            directories[system.data] = data, offline
        data, offline = directories[system.data]
        save = tmp_path_factory.mktemp(f"checkpoints-{system.name}")
        command = ["fairseq-train", str(data), "--user-dir", "fairseq_syntax", "--task", "syntax_translation",
                   "--arch", system.tiny_arch, "--max-update", "3", "--save-dir", str(save), "--disable-validation",
                   *TINY, *system.model_args]
        runs[system.name] = subprocess.Popen(command, cwd=REPO, env=ONE_THREAD, stdout=subprocess.PIPE,
                                             stderr=subprocess.STDOUT, text=True)
        made[system.name] = (data, offline, save / "checkpoint_last.pt")
    for name, process in runs.items():
        log = process.communicate()[0]
        assert process.returncode == 0, f"training {name} failed:\n{log[-3000:]}"
    return made


def lines_of(output: str, kind: str) -> dict:
    """id -> the fields after the id of fairseq's ``KIND-id`` lines."""
    return {int(match[0]): match[1].split("\t") for match in re.findall(rf"^{kind}-(\d+)\t(.*)$", output, re.M)}


@pytest.mark.parametrize("system", PARSE_READERS, ids=[system.name for system in PARSE_READERS])
def test_raw_lines_decode_through_the_parsers_as_offline(corpus, models, trained, system):
    work, kept = corpus
    data, offline, checkpoint = trained[system.name]
    parsers = (["--source-dependency-parser", models["dependency"]] if "src_ldd" in decoding_inputs(system) else
               ["--source-parser", models["crf-con"], "--source-tagger", models["tagger"]])
    common = ["--user-dir", "fairseq_syntax", "--task", "syntax_translation", "--path", str(checkpoint), "--beam",
              "2", "--batch-size", "1", "--post-process", "subword_nmt", "--cpu", "-s", "en", "-t", "de"]
    interactive = subprocess.Popen(["fairseq-interactive", str(data), *common, *parsers, "--buffer-size",
                                    str(len(LINES)), "--input", str(work / "lines.txt")], cwd=REPO, env=ONE_THREAD,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    generate = run(["fairseq-generate", str(offline), *common, "--gen-subset", "test"], env=ONE_THREAD).stdout
    out, err = interactive.communicate()
    assert interactive.returncode == 0 and "Traceback" not in err, err[-3000:]

    # the offline path: the lines it kept (fairseq-syntax-preprocess --skip-invalid lists the others), in order
    skipped_path = offline / "test.skipped.tsv"
    rows = [row.split("\t") for row in skipped_path.read_text().splitlines()] if skipped_path.exists() else []
    skipped = {int(row[0]) - 1 for row in rows}
    offline_lines = [number for index, number in enumerate(kept) if index not in skipped]
    # every line but the empty one is a sentence; only the 300-word one may be too long (not in sequence form)
    assert kept == [0, 2, 3, 4, 5, 6] and {kept[index] for index in skipped} <= {4}, rows
    assert [row[1] for row in rows] == ["over-long source"] * len(rows) and (4 in offline_lines or
                                                                               system.form != "sequence"), rows
    offline_hypotheses, offline_sources = lines_of(generate, "H"), lines_of(generate, "S")
    expected = {number: (offline_sources[index], offline_hypotheses[index])
                for index, number in enumerate(offline_lines)}

    hypotheses, sources = lines_of(out, "H"), lines_of(out, "S")
    assert sorted(hypotheses) == list(range(len(LINES)))  # one hypothesis per line, under the line's own id
    for number in expected:
        assert (sources[number], hypotheses[number]) == expected[number], f"line {number + 1}"
    bad = sorted(set(range(len(LINES))) - set(expected))
    assert [hypotheses[number][0] for number in bad] == ["-inf"] * len(bad)
    reported = sorted(int(n) - 1 for n in re.findall(r"<input>:(\d+): ", err))
    assert reported == bad and 1 in bad, err[-3000:]
    assert "<input>:2: empty line; expected a sentence of tokenized words" in err
    for number in bad:
        if number != 1:  # a line the model cannot take: offline it is left out for its length
            assert f"<input>:{number + 1}: too long: " in err
    assert f"{len(bad)} bad input lines" in err
    # a sentence starting with a bracket is a sentence, not a tree: its source is the words -LRB- the dog -RRB- ...
    assert 2 in expected and sources[2] == expected[2][0]
    if system.form != "sequence":  # the parser's tree, with the tagger's POS tags (crf-con alone writes XX)
        assert "(XX" not in sources[0][0] and ("(DT" in sources[0][0]) == (system.preterminals != "split")


def test_the_data_directory_records_the_bpe_and_the_parser(trained, models):
    data = trained["mask"][0]
    meta = json.loads((data / "syntax.json").read_text())
    assert meta["bpe"] == {"codes": "bpe.codes", "vocabulary": "bpe.vocab.en", "vocabulary_threshold": 1}
    assert (data / "bpe.codes").exists() and (data / "bpe.vocab.en").exists()
    assert meta["parser"]["backend"] == "crf-con" and meta["pos_tags"] == "tagged"
    assert meta["parser"]["model"]["name"] == "crf-con.pt" and meta["parser"]["tagger"]["name"] == "tagger.pt"


@pytest.mark.parametrize("system, option", [("mask", "source_parser"), ("ldd", "source_dependency_parser")])
def test_a_parser_model_that_cannot_be_had_is_one_line(trained, models, tmp_path, system, option):
    """A --source-parser (or --source-dependency-parser) that is not there: the parsing library's one line."""
    data, _, checkpoint = trained[system]
    missing = str(tmp_path / "missing.pt")
    tagger = {"source_tagger": models["tagger"]} if option == "source_parser" else {}
    with pytest.raises(SystemExit, match=f"^error: {re.escape(missing)}: no such model file or folder$"):
        _, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={
            "data": str(data), option: missing, **tagger})
        task.get_interactive_tokens_and_lengths(["the cat sees the dog ."], str)


def test_a_tagger_left_out_of_the_data_directorys_parser_is_one_line(trained, models):
    """The recorded parser's tagger not given (other mismatches: tests/core/test_interactive_source.py)."""
    data, _, checkpoint = trained["mask"]
    _, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={
        "data": str(data), "source_parser": models["crf-con"], "source_tagger": None})
    message = f"error: {data / 'syntax.json'} records trees tagged by the POS tagger tagger.pt: give it as " \
              "--source-tagger"
    with pytest.raises(SystemExit, match="^" + re.escape(message) + "$"):
        task.get_interactive_tokens_and_lengths(["the cat sees the dog ."], str)


def test_fairseq_bpe_options_are_refused_where_the_data_directory_records_its_bpe(trained):
    data, _, checkpoint = trained["mask"]
    _, _, task = checkpoint_utils.load_model_ensemble_and_task([str(checkpoint)], arg_overrides={"data": str(data)})
    task._fairseq_interactive = True  # what setup_task finds in fairseq-interactive
    with pytest.raises(SystemExit, match=re.escape(f"error: {data / 'syntax.json'} records the BPE the data "
                                                   "directory was made with, which fairseq-interactive applies to "
                                                   "every word: leave out --bpe")):
        task.build_bpe(Namespace(bpe="subword_nmt", bpe_codes=str(data / "bpe.codes"), bpe_separator="@@"))
    assert task.build_bpe(Namespace(bpe=None)).decode("fa@@ ther") == "father"  # D- lines lose the joiners


def docs_recipe() -> str:
    """The bash block of docs/usage.md's section on fairseq-interactive."""
    with open(os.path.join(REPO, "docs", "usage.md"), encoding="utf-8") as page:
        section = page.read().split("## Interactive translation")[1].split("\n## ")[0]
    return re.search(r"```bash\n(.*?)```", section, re.S).group(1)


def test_the_docs_recipe_runs_as_written(trained, models, tmp_path):
    """Each command of docs/usage.md's recipe, run as written from a folder laid out as the recipes leave it."""
    out = tmp_path / "examples" / "multi30k" / "work"
    for name, system in (("preorder", "mask"), ("sequence", "ldd")):
        (out / "data-bin").mkdir(parents=True, exist_ok=True)
        (out / "data-bin" / name).symlink_to(trained[system][0])
    for name, model in (("crf-con-ptb-sample.pt", "crf-con"), ("tagger-ptb-sample.pt", "tagger"),
                        ("biaffine-dep-ud-ewt.pt", "dependency")):
        (out / "models").mkdir(exist_ok=True)
        (out / "models" / name).symlink_to(models[model])
    for system in ("mask", "ldd", "sequence"):
        (out / "ckpt" / f"ckpt-{system}").mkdir(parents=True)
        (out / "ckpt" / f"ckpt-{system}" / "checkpoint_best.pt").symlink_to(trained[system][2])
    (tmp_path / "fairseq_syntax").symlink_to(os.path.join(REPO, "fairseq_syntax"))
    (tmp_path / "sentences.txt").write_text("( the dog ) likes the father .\nthe man sees the cat .\n")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", docs_recipe()], cwd=tmp_path, capture_output=True,
                            text=True, env=ONE_THREAD)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr[-3000:]
    hypotheses = re.findall(r"^H-(\d+)\t(\S+)\t", result.stdout, re.M)
    assert [int(id_) for id_, _ in hypotheses] == [0, 1] * 3 and "-inf" not in [score for _, score in hypotheses]
    assert "bad input lines" not in result.stderr and "may differ from those the model was trained on" not in \
        result.stderr  # the parsers syntax.json records (same files, another name)
