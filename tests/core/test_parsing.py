"""Tests for fairseq_syntax.parsing: tiny parsers trained in seconds on sentences the tests write themselves."""
import gzip
import itertools
import pickle
import re
import runpy
import types
from pathlib import Path

import dill
import pytest
import torch
from conftest import TREEBANK, bracketed, conllu

from fairseq_syntax.core.trees import Tree, parse_tree, to_bracketed
from fairseq_syntax.parsing import training
from fairseq_syntax.parsing.constituency import (
    ConstituencyParser,
    TaggedParser,
    flat_tree,
    load_parser,
    parse_sentences,
    tree_writer,
)
from fairseq_syntax.parsing.dependency import (
    DependencyParser,
    RetainedMass,
    arcs_writer,
    read_arc_distributions,
)
from fairseq_syntax.parsing.evaluation import bracket_score
from fairseq_syntax.parsing.shards import BLOCKS, LINES, ParseJob, parse_whole
from fairseq_syntax.parsing.text import ptb_escape_token, ptb_unescape_token
from fairseq_syntax.parsing.torch_load import StoredFunction, supar_safe_globals

torch.set_num_threads(1)
REPO = Path(__file__).resolve().parents[2]
TINY_BENEPAR = training.BeneparSize(d_model=32, num_layers=1, num_heads=2, d_kv=8, d_ff=32, d_char_emb=8,
                                    d_label_hidden=16, d_tag_hidden=16)
MAX_LENGTH = 18
# Line 2 is empty, line 4 is too long; line 3 holds brackets, non-ASCII letters and CoNLL-U/JSON-sensitive marks.
INPUT_LINES = [
    "the cat sees the dog .",
    "",
    "the dog sees ( the cat ) [ naïve ] { x } _ # a(b .",
    " ".join(["the", "cat"] * 10),
    "the man likes the father .",
]
EXPECTED_FALLBACKS = [(2, "empty line"), (4, f"too long: 20 words > {MAX_LENGTH}")]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    root = tmp_path_factory.mktemp("parsing")
    (root / "train.conllu").write_text("".join(conllu(*sentence) for sentence in TREEBANK))
    (root / "train.pid").write_text("".join(bracketed(*sentence) for sentence in TREEBANK))
    (root / "input.txt").write_text("\n".join(INPUT_LINES) + "\n", encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def dependency_parser(dependency_model):
    return DependencyParser(dependency_model, max_length=MAX_LENGTH)


@pytest.fixture(scope="module")
def constituency_models(corpus, constituency_model):
    train = str(corpus / "train.pid")
    paths = {"crf-con": constituency_model, "benepar": str(corpus / "benepar.pt")}
    training.train_benepar(train, train, paths["benepar"], epochs=2, size=TINY_BENEPAR, batch_size=8,
                           log=lambda message: None)
    return paths


def input_tokens():
    return [line.split() for line in INPUT_LINES]


def parse_file(writer, source, *outputs):
    """A loaded parser's writer run over ``source`` in one process (``shards.parse_whole``): lines, then blocks."""
    paths = [(str(path), kind) for path, kind in zip(outputs, (LINES, BLOCKS))]
    return parse_whole(ParseJob(str(source), None, paths, 256, {}, lambda device: writer), device="")


# --- text and trees
def test_ptb_escapes_every_bracket_inside_tokens():
    assert ptb_escape_token("(") == "-LRB-"
    assert ptb_escape_token("a(b)") == "a-LRB-b-RRB-"
    assert [ptb_escape_token(t) for t in "[ ] { }".split()] == ["-LSB-", "-RSB-", "-LCB-", "-RCB-"]
    assert ptb_escape_token("naïve") == "naïve"
    assert ptb_unescape_token("a-LRB-b-RRB-") == "a(b)"
    assert ptb_unescape_token(ptb_escape_token("{x}")) == "{x}"


# --- bracketing F1
GOLD = "(S (NP (DT The) (NN cat)) (VP (VBZ sits) (PP (IN on) (NP (DT the) (NN mat)))) (. .))"


def test_bracket_score_counts_brackets_by_hand():
    # Gold brackets: S(0,6) NP(0,2) VP(2,6) PP(3,6) NP(4,6); the final '.' is deleted, so S ends at 6
    predicted = "(S (NP (DT The) (NN cat)) (VP (VBZ sits) (PP (IN on)) (NP (DT the) (NN mat))) (. .))"
    score = bracket_score([parse_tree(GOLD)], [parse_tree(predicted)])
    assert (score.matched, score.gold, score.predicted) == (4, 5, 5)
    assert score.f1 == pytest.approx(0.8)


def test_bracket_score_deletes_punctuation_by_gold_tag_and_equates_prt_advp():
    # predicted S equals gold S once '.' is deleted; its POS tags are XX, so deletion uses the gold tags
    gold = parse_tree("(S (NP (PRP He)) (VP (VBD gave) (PRT (RP up))) (. .))")
    predicted = parse_tree("(S (S (XX He) (VP (XX gave) (ADVP (XX up)))) (XX .))")
    score = bracket_score([gold], [predicted])
    # gold: S(0,3) NP(0,1) VP(1,3) ADVP(2,3); predicted: S(0,3) S(0,3) VP(1,3) ADVP(2,3)
    assert (score.matched, score.gold, score.predicted) == (3, 4, 4)


def test_bracket_score_rejects_different_words():
    with pytest.raises(ValueError, match="tree 1"):
        bracket_score([parse_tree(GOLD)], [parse_tree("(S (NP (DT A) (NN cat)))")])


# --- constituency
class ScriptedParser(ConstituencyParser):
    """Parses by a script: raises on the word 'boom', drops the word 'lost', else a right-branching tree."""

    max_length = 5

    def __init__(self):
        self.batches = []

    def parse_batch(self, sentences):
        self.batches.append(len(sentences))
        if any("boom" in tokens for tokens in sentences):
            raise RuntimeError("cannot parse boom")
        return [Tree("TOP", [Tree("S", [Tree("XX", [Tree(ptb_escape_token(t))]) for t in tokens if t != "lost"])])
                for tokens in sentences]


def test_parser_errors_and_changed_words_fall_back_alone_in_order():
    parser = ScriptedParser()
    sentences = [["a", "b"], ["boom"], [], ["c", "lost"], ["d", "(", "e", "f", "g", "h"], ["x", ")"]]
    results = list(parse_sentences(parser, sentences, batch_size=10))
    assert [r.tree for r in results] == [
        "(S (XX a) (XX b))", "(S (XX boom))", "(S )", "(S (XX c) (XX lost))",
        "(S (XX d) (XX -LRB-) (XX e) (XX f) (XX g) (XX h))", "(S (XX x) (XX -RRB-))",
    ]
    assert [r.fallback for r in results] == [
        None, "parser error: RuntimeError: cannot parse boom", "empty line", "parser changed the words to 'c'",
        "too long: 6 words > 5", None,
    ]
    # One batch of the four parseable sentences, which raised; then each of them alone.
    assert parser.batches == [4, 1, 1, 1, 1]


@pytest.mark.parametrize("backend", ["crf-con", "benepar"])
def test_constituency_file_keeps_lines_words_and_lists_fallbacks(corpus, constituency_models, backend):
    parser = load_parser(backend, constituency_models[backend], max_length=MAX_LENGTH)
    output = corpus / f"{backend}.tree"
    report = parse_file(tree_writer(parser), corpus / "input.txt", output).report
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == len(INPUT_LINES)
    assert report.fallbacks == EXPECTED_FALLBACKS and report.sentences == len(INPUT_LINES)
    for number, (line, tokens) in enumerate(zip(lines, input_tokens()), 1):
        if number == 2:
            assert line == "(S )"
            continue
        tree = parse_tree(line)
        assert tree.leaves() == [ptb_escape_token(token) for token in tokens]
        if number == 4:
            assert line == flat_tree(tokens)
        else:
            assert tree.label not in ("TOP", "ROOT")
    assert "-LRB-" in lines[2] and "a-LRB-b" in lines[2] and "naïve" in lines[2]


class FlatParser(ConstituencyParser):
    """Puts every sentence under one S: of the gold brackets S NP VP NP, only S is found."""

    max_length = 100

    def parse_batch(self, sentences):
        return [Tree("S", [Tree("XX", [Tree(ptb_escape_token(t))]) for t in tokens]) for tokens in sentences]


def test_evaluate_constituency_parses_the_gold_words(tmp_path):
    gold = tmp_path / "gold.pid"
    gold.write_text(bracketed("cat", "sees", "dog") + "(TOP (S (NP (NN -LRB-)) (VP (VBZ is)) (. .)))\n")
    score = training.evaluate_constituency(FlatParser(), str(gold))
    # Gold: S NP VP NP in the first tree, S NP VP in the second; predicted: one S each, all matched.
    assert (score.sentences, score.matched, score.gold, score.predicted) == (2, 2, 7, 2)
    assert (score.precision, score.recall) == (1.0, pytest.approx(2 / 7))


def test_tagged_parser_relabels_each_preterminal_in_word_order():
    class FixedTagger:
        def tag(self, sentences):
            return [["DT", "NN", "VBZ"][:len(tokens)] for tokens in sentences]

    tagged = TaggedParser(FlatParser(), FixedTagger())
    assert to_bracketed(tagged.parse_batch([["a", "cat", "sat"]])[0]) == "(S (DT a) (NN cat) (VBZ sat))"


# --- dependency
def test_dependency_distributions_are_proper_and_the_one_best_tree_is_the_parsers_own(dependency_parser):
    sentences = [tokens for tokens in input_tokens() if 0 < len(tokens) <= MAX_LENGTH]
    parses = list(dependency_parser.parse(sentences, chunk_size=2))
    for parse, tokens in zip(parses, sentences):
        n = len(tokens)
        assert parse.fallback is None and parse.words == tokens
        assert parse.arc_probs.shape == (n, n + 1)
        assert parse.label_probs.shape == (n, n + 1, len(dependency_parser.label_names))
        assert torch.allclose(parse.arc_probs.sum(-1), torch.ones(n), atol=1e-5)
        assert torch.all(parse.arc_probs[torch.arange(n), torch.arange(1, n + 1)] == 0)  # no word heads itself
        assert torch.allclose(parse.label_probs.sum(-1), torch.ones(n, n + 1), atol=1e-5)
        assert torch.all(parse.label_probs[..., dependency_parser.label_names.index("<bos>")] == 0)
    predicted = dependency_parser.parser.predict([[ptb_unescape_token(t) for t in s] for s in sentences],
                                                 tree=True, proj=False, verbose=False)
    assert [parse.heads for parse in parses] == [list(map(int, arcs)) for arcs in predicted.arcs]
    assert [parse.labels for parse in parses] == [list(rels) for rels in predicted.rels]


def test_sparse_side_data_keeps_exactly_the_pairs_above_the_floors(corpus, dependency_parser):
    arc_floor, label_floor = 0.05, 0.1
    arcs_path, conllu_path = corpus / "input.arcs.jsonl", corpus / "input.conllu"
    run = parse_file(arcs_writer(dependency_parser, arc_floor, label_floor), corpus / "input.txt", arcs_path,
                     conllu_path)
    report, mass = run.report, RetainedMass(**run.stats)
    records = list(read_arc_distributions(str(arcs_path)))
    full = list(dependency_parser.parse(input_tokens()))
    assert len(records) == len(INPUT_LINES) and report.fallbacks == EXPECTED_FALLBACKS
    expected_mass = RetainedMass()
    for record, parse, tokens in zip(records, full, input_tokens()):
        assert record["words"] == tokens
        if parse.fallback is not None:
            continue
        expected = {}
        for dependent, head in itertools.product(range(len(tokens)), range(len(tokens) + 1)):
            p_arc = parse.arc_probs[dependent, head].item()
            if p_arc >= arc_floor:
                labels = {name: p.item() for name, p in zip(dependency_parser.label_names,
                                                             parse.label_probs[dependent, head]) if p >= label_floor}
                expected[dependent + 1, head] = (p_arc, labels)
                expected_mass.arc_mass += p_arc
                expected_mass.labeled_mass += p_arc * sum(labels.values())
        # the parser's 1-best tree, the one the CoNLL-U file holds
        assert record["best"] == [[head, label] for head, label in zip(parse.heads, parse.labels)]
        found = {(d, h): (p, labels) for d, h, p, labels in record["arcs"]}
        assert found.keys() == expected.keys()
        for key, (p_arc, labels) in expected.items():
            assert found[key][0] == pytest.approx(p_arc, rel=5e-4)  # 4 significant digits
            assert found[key][1].keys() == labels.keys()
    assert mass.dependents == sum(len(input_tokens()[line - 1]) for line in (1, 3, 5))  # fallbacks left out
    assert mass.arc_mass == pytest.approx(expected_mass.arc_mass, rel=1e-6)
    assert mass.labeled_mass == pytest.approx(expected_mass.labeled_mass, rel=1e-6)
    # Fallbacks: every word on the root with label dep; the empty line has no words.
    assert records[1] == {"words": [], "arcs": [], "best": [], "fallback": "empty line"}
    assert records[3]["arcs"] == [[i, 0, 1.0, {"dep": 1.0}] for i in range(1, 21)]
    assert records[3]["best"] == [[0, "dep"]] * 20
    assert records[3]["fallback"] == EXPECTED_FALLBACKS[1][1]
    # the CoNLL-U file: the same 1-best trees, one block per input line
    blocks = conllu_path.read_text(encoding="utf-8").split("\n\n")[:-1]
    assert len(blocks) == len(INPUT_LINES) and blocks[1] == "# sent_id = 2\n# text = \n# fallback = empty line"
    for number, (block, record) in enumerate(zip(blocks, records), 1):
        lines = block.split("\n")
        rows = [line.split("\t") for line in lines if not line.startswith("#")]
        assert lines[0] == f"# sent_id = {number}" and [row[1] for row in rows] == record["words"]
        assert [[int(row[6]), row[7]] for row in rows] == record["best"]


@pytest.mark.parametrize("line, problem", [
    ('{"words": ["a"], "arcs": [[1, 1, 0.5, {}]]}', "head must be 0 (root) or another word"),
    ('{"words": ["a"], "arcs": [[2, 0, 0.5, {}]]}', "dependent must be a word index 1..1"),
    ('{"words": ["a", "b"], "arcs": [[1, 0, 0.7, {}], [1, 2, 0.302, {}]]}', "word 1: head probabilities sum"),
    ('{"words": ["a"], "arcs": [[1, 0, 1.0, {"x": 0.8, "y": 0.202}]]}', "label probabilities sum"),
    ('{"words": ["a"]', "not a JSON object"),
    ('{"words": ["a"], "arcs": [[1, 0, 1.0, {}]], "best": []}', '"best" must list [head, label] for each of the 1'),
    ('{"words": ["a", "b"], "arcs": [[1, 0, 1.0, {}]], "best": [[0, "root"], [2, "dep"]]}',
     '"best" of word 2: [2, \'dep\'] is not [head'),
    # JSON true is no probability and no word index (Python's bool is an int)
    ('{"words": ["a"], "arcs": [[1, 0, true, {}]]}', "probability must be a number in (0, 1]"),
    ('{"words": ["a"], "arcs": [[1, 0, 1.0, {"root": true}]]}', "label probabilities must be numbers in (0, 1]"),
    ('{"words": ["a", "b"], "arcs": [[true, 0, 1.0, {}]]}', "dependent must be a word index 1..2"),
    ('{"words": ["a", "b", "c"], "arcs": [[1, 0, 1.0, {}]], "best": [[2, "x"], [3, "y"], [1, "z"]]}',
     '"best" is not a tree: words [1, 2, 3] head each other in a cycle that never reaches the root'),
    ('{"words": ["a", "b", "c"], "arcs": [[1, 0, 1.0, {}]], "best": [[0, "root"], [3, "y"], [2, "z"]]}',
     '"best" is not a tree: words [2, 3] head each other'),
])
def test_reader_names_file_line_and_problem(tmp_path, line, problem):
    path = tmp_path / "bad.arcs.jsonl"
    path.write_text('{"words": ["a"], "arcs": [[1, 0, 1.0, {"root": 1.0}]]}\n' + line + "\n")
    with pytest.raises(ValueError, match=rf"bad\.arcs\.jsonl:2: .*{re.escape(problem)}"):
        list(read_arc_distributions(str(path)))


def test_dependency_evaluation_reports_attachment_scores(corpus, dependency_parser):
    uas, las = training.evaluate_dependency(dependency_parser.parser, str(corpus / "train.conllu"))
    assert 0 < las <= uas <= 1  # SuPar saved the epoch with the best LAS, which beat 0


# --- loading
def test_supar_files_load_only_inside_the_scoped_allowlist(dependency_model):
    with pytest.raises(pickle.UnpicklingError, match="supar.utils.config.Config"):
        torch.load(dependency_model)
    with supar_safe_globals():
        state = torch.load(dependency_model)
    # CoNLL.get_arcs was stored as bytecode; what comes back is the installed SuPar method.
    from supar.utils.transform import CoNLL
    assert state["transform"].HEAD.fn == CoNLL.get_arcs and state["transform"].HEAD.fn(["2", "_"]) == [2, -1]


def test_a_checkpoint_saved_after_an_epoch_that_scored_nothing_loads(tmp_path):
    from supar.utils import metric

    path = tmp_path / "checkpoint.pt"
    torch.save({"metric": metric.Metric()}, path, pickle_module=dill)
    with pytest.raises(pickle.UnpicklingError, match="supar.utils.metric.Metric"):
        torch.load(path)
    with supar_safe_globals():
        assert type(torch.load(path)["metric"]) is metric.Metric


def test_functions_stored_as_bytecode_are_never_rebuilt(tmp_path):
    from supar.utils import transform

    path = tmp_path / "function.pt"
    # A function from any other module is refused outright (its module namespace is not allowed).
    torch.save({"hook": lambda x: x + 1}, path, pickle_module=dill)
    with supar_safe_globals(), pytest.raises(pickle.UnpicklingError, match="test_parsing.__dict__"):
        torch.load(path)
    # One that claims SuPar's namespace loads as an inert placeholder: its bytecode is never rebuilt.
    hook = types.FunctionType((lambda x: x + 1).__code__, vars(transform), "hook")
    torch.save({"hook": hook}, path, pickle_module=dill)
    with supar_safe_globals():
        loaded = torch.load(path)["hook"]
    assert isinstance(loaded, StoredFunction) and loaded.name == "hook"
    with pytest.raises(RuntimeError, match="not loaded"):
        loaded(1)
    # As a method of an allowed SuPar class it must be one the class really has.
    torch.save({"hook": types.MethodType(hook, transform.CoNLL)}, path, pickle_module=dill)
    with supar_safe_globals(), pytest.raises(pickle.UnpicklingError, match="CoNLL has no classmethod"):
        torch.load(path)


# --- PTB preparation
def test_prepare_ptb_cleans_wraps_and_splits_in_order(tmp_path):
    trees = [f"( (S (NP-SBJ-1 (NNP W{i})) (VP (VBD ran) (NP (-NONE- *T*-1))) (. .)) )" for i in range(10)]
    mrg = tmp_path / "sample.mrg"
    mrg.write_text("\n\n".join(trees) + "\n")
    paths = training.prepare_ptb(str(mrg), str(tmp_path / "split"), heldout_fraction=0.1, dev_fraction=0.2)
    lines = {split: Path(path).read_text().splitlines() for split, path in paths.items()}
    assert [len(lines[split]) for split in ("train", "dev", "test")] == [7, 2, 1]
    assert lines["test"] == ["(TOP (S (NP (NNP W9)) (VP (VBD ran)) (. .)))"]
    assert lines["dev"][0] == "(TOP (S (NP (NNP W7)) (VP (VBD ran)) (. .)))"


# --- shards and workers
#: INPUT_LINES, a line that is no UTF-8 (line 6) and three more sentences: 9 lines, 5 chunks of --batch-size 2
SHARD_INPUT = ("\n".join(INPUT_LINES) + "\n").encode() + b"the \xff cat .\n" + (
    b"the dog likes the cat .\nthe man sees the dog .\nthe cat likes the man .\n")


def shard_fallbacks(source):
    return "".join(f"{n}\t{r}\n" for n, r in EXPECTED_FALLBACKS) + (
        f"6\tunreadable line: {source}:6: not valid UTF-8 (byte 0xff at byte 5 of the line)\n")


def parse_argv(name, models, source, out_dir, *extra):
    """(script, argv, output files: the parse record among them) of one parse command."""
    out_dir.mkdir(exist_ok=True)
    common = ["--input", str(source), "--max-length", str(MAX_LENGTH), "--batch-size", "2", "--device", "cpu", *extra]
    if name == "biaffine":
        outputs = [out_dir / "out.arcs.jsonl", out_dir / "out.conllu.gz", out_dir / "out.arcs.jsonl.parse.json",
                   out_dir / "out.arcs.jsonl.skipped"]
        argv = ["--model", models["biaffine"], "--arcs", str(outputs[0]), "--conllu", str(outputs[1]), *common]
        script = "parse_dependency.py"
    else:
        backend, _, tagger = name.partition("+")
        outputs = [out_dir / "out.tree", out_dir / "out.tree.parse.json", out_dir / "out.tree.skipped"]
        argv = ["--backend", backend, "--model", models[backend], "--output", str(outputs[0]), *common]
        argv += ["--tagger", models["tagger"]] if tagger else []
        script = "parse_constituency.py"
    return str(REPO / "preprocess" / script), argv, outputs


def parse_command(name, models, source, out_dir, *extra):
    """Runs one parse command in this process; returns its output files."""
    script, argv, outputs = parse_argv(name, models, source, out_dir, *extra)
    runpy.run_path(script)["main"](argv)
    return outputs


def contents(paths):
    """Bytes of each file, a gzipped one uncompressed (gzip's header holds the time of writing)."""
    return [gzip.decompress(p.read_bytes()) if p.suffix == ".gz" else p.read_bytes() if p.exists() else None
            for p in paths]


@pytest.fixture(scope="module")
def all_models(constituency_models, dependency_model, tagger_model):
    return {**constituency_models, "biaffine": dependency_model, "tagger": tagger_model}


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="needs a GPU"))])
@pytest.mark.parametrize("name", ["crf-con+tagger", "benepar", "biaffine"])
def test_merged_shards_equal_the_single_run_byte_for_byte(all_models, tmp_path, name, device):
    source = tmp_path / "input.txt"
    source.write_bytes(SHARD_INPUT)
    single = contents(parse_command(name, all_models, source, tmp_path / "single", "--device", device))
    assert single[-1].decode() == shard_fallbacks(source)  # every fallback once, in whole-input line numbers
    assert len(single[0].splitlines()) == 9  # one tree or JSON record per input line
    if name == "biaffine":
        assert single[1].count(b"# sent_id = ") == 9
    out = tmp_path / "shards"  # chunks of 2 lines: shard 0 holds lines 1 2 7 8, shard 1 3 4 9, shard 2 5 6
    for index in range(3):
        parse_command(name, all_models, source, out, "--num-shards", "3", "--shard-id", str(index), "--device", device)
    assert not (out / ("out.arcs.jsonl" if name == "biaffine" else "out.tree")).exists()
    merged = parse_command(name, all_models, source, out, "--num-shards", "3", "--merge")
    assert contents(merged) == single
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in merged), "shard files left"


def test_workers_keep_finished_shards_and_parse_the_rest(all_models, tmp_path):
    import subprocess
    import sys

    source = tmp_path / "input.txt"
    source.write_bytes(SHARD_INPUT)
    single = contents(parse_command("biaffine", all_models, source, tmp_path / "single"))
    out = tmp_path / "workers"
    parse_command("biaffine", all_models, source, out, "--num-shards", "3", "--shard-id", "0")  # a run killed after
    (out / "out.arcs.jsonl.shard1-of-3.partial").write_text("{}\n")  # shard 0, while writing shard 1
    script, argv, outputs = parse_argv("biaffine", all_models, source, out, "--workers", "2", "--num-shards", "3")
    result = subprocess.run([sys.executable, script, *argv], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "1 of 3 shards already parsed; parsing 2 with 2 worker(s) on cpu" in result.stderr
    assert contents(outputs) == single and sorted(p.name for p in out.iterdir()) == sorted(p.name for p in outputs)
