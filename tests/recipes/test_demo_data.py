"""The synthetic demo data (examples/demo/make_data.py); expected values by hand from its tables and rules."""
import gzip
import importlib.util
import json
import random
import re
from pathlib import Path

import pytest

from fairseq_syntax.core.trees import parse_tree, read_trees
from fairseq_syntax.methods.ldd.distributions import (
    OUTSIDE,
    UNIVERSAL_GROUPS,
    label_group,
    label_index,
)
from fairseq_syntax.parsing import archive
from fairseq_syntax.parsing.dependency import read_arc_distributions

MAKE_DATA = Path(__file__).resolve().parents[2] / "examples" / "demo" / "make_data.py"
SIZES = {"train": 50, "valid": 20, "test": 20}
SPLITS = tuple(SIZES)
GRAMMAR_LABELS = {"S", "NP", "VP", "PP", "SBAR", "WHNP", "ADJP", "DT", "JJ", "NN", "NNS", "VBD", "VBZ", "VBP", "IN",
                  "PRP", "CC", "WDT", "."}


PP_ON_VERB = ("(S (NP (DT the) (NN man)) (VP (VBD saw) (NP (DT the) (NN dog)) "
              "(PP (IN with) (NP (DT the) (NN telescope)))) (. .))")
PP_ON_NOUN = ("(S (NP (DT the) (NN man)) (VP (VBD saw) (NP (NP (DT the) (NN dog)) "
              "(PP (IN with) (NP (DT the) (NN telescope))))) (. .))")
SUBJECT_RELATIVE = ("(S (NP (NP (DT the) (NNS ducks)) (SBAR (WHNP (WDT that)) (S (VP (VBD saw) (NP (DT the) "
                    "(NN saw)))))) (VP (VBP watch) (NP (DT the) (NNS watches))) (. .))")
OBJECT_RELATIVE = ("(S (NP (NP (DT the) (NN dog)) (SBAR (WHNP (WDT which)) (S (NP (DT the) (NNS cats)) "
                   "(VP (VBD chased))))) (VP (VBZ sleeps)) (. .))")
COMPLEMENT = ("(S (NP (PRP she)) (VP (VBZ says) (SBAR (IN that) (S (NP (NP (DT the) (NNS fish)) (CC and) "
              "(NP (DT the) (NN duck))) (VP (VBD ran))))) (. .))")
CLAUSES = ("(S (S (NP (DT an) (ADJP (JJ old) (CC and) (JJ tired)) (NN horse)) (VP (VBZ rests))) (CC or) "
           "(S (NP (PRP we)) (VP (VBP fly) (PP (IN above) (NP (DT the) (NN lighthouse))))) (. .))")


def _load_make_data():
    spec = importlib.util.spec_from_file_location("demo_make_data", MAKE_DATA)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


make_data = _load_make_data()


def _run_cli(out_dir: Path, seed: int, *extra: str) -> None:
    """The script's command line, in this process (run.sh and tests/study/test_prepare.py run it as a script)."""
    make_data.main(["--out", str(out_dir), *(f"--{split}={size}" for split, size in SIZES.items()), "--seed",
                    str(seed), *extra])


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _interior_labels(tree) -> set[str]:
    if not tree.children:
        return set()
    return {tree.label}.union(*(_interior_labels(child) for child in tree.children))


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> Path:
    """The files of SIZES, seed 3, and their parse archive (--archive) in ``parses``."""
    out_dir = tmp_path_factory.mktemp("demo")
    _run_cli(out_dir, 3, "--archive", str(out_dir / "parses"))
    return out_dir


# --- the files
def test_files_are_parallel_and_trees_match_the_source(demo_dir):
    for split, size in SIZES.items():
        sources = _lines(demo_dir / f"{split}.en")
        targets = _lines(demo_dir / f"{split}.de")
        trees = list(read_trees(str(demo_dir / f"{split}.tree")))
        assert len(sources) == len(targets) == len(trees) == size
        for source, target, tree in zip(sources, targets, trees):
            assert tree.leaves() == source.split(" ")
            assert source.endswith(" .")
            assert make_data.MIN_TOKENS <= len(tree.leaves()) <= make_data.MAX_TOKENS
            assert _interior_labels(tree) <= GRAMMAR_LABELS
            # the .tree file alone determines the .de line
            assert " ".join(make_data.translate(tree)) == target


def test_duplicates_are_redrawn_when_the_grammar_repeats_itself(monkeypatch):
    # Only three-token sentences ("they ran ."): a few thousand exist, and the likeliest recur within 300 draws.
    monkeypatch.setattr(make_data, "MIN_TOKENS", 3)
    corpus = make_data.generate_corpus({"train": 200, "test": 100}, seed=0, max_tokens=3)
    sentences = [" ".join(tree.leaves()) for trees in corpus.values() for tree in trees]
    assert len(sentences) == 300
    assert all(len(sentence.split()) == 3 for sentence in sentences)
    assert len(set(sentences)) == 300


def test_a_grammar_that_only_repeats_itself_is_an_error_not_a_hang(monkeypatch):
    only_tree = parse_tree("(S (NP (PRP they)) (VP (VBD ran) (PP (IN near) (NP (DT the) (NN river)))) (. .))")
    monkeypatch.setattr(make_data._Generator, "sentence", lambda self: only_tree)
    with pytest.raises(ValueError, match="could not draw 2 distinct sentences for 'train'"):
        make_data.generate_corpus({"train": 2}, seed=0)


def test_same_seed_same_files_other_seed_other_files(demo_dir, tmp_path):
    _run_cli(tmp_path / "again", 3)
    _run_cli(tmp_path / "other", 4)
    for split in SPLITS:
        for suffix in ("en", "de", "tree", "arcs.jsonl"):
            name = f"{split}.{suffix}"
            assert (tmp_path / "again" / name).read_bytes() == (demo_dir / name).read_bytes()
    assert (tmp_path / "other" / "train.en").read_bytes() != (demo_dir / "train.en").read_bytes()
    assert (tmp_path / "other" / "train.arcs.jsonl").read_bytes() != (demo_dir / "train.arcs.jsonl").read_bytes()


def test_negative_size_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        make_data.main(["--out", str(tmp_path), "--train", "-1"])


# --- transfer
@pytest.mark.parametrize("tree, expected", [
    # the -> ja, dogs -> lemo+ri; a -> ny, cat -> bame, big -> egigem, object marker wo;
    # chase -> zufur + u (past) + n (plural subject)
    ("(S (NP (DT the) (NNS dogs)) (VP (VBD chased) (NP (DT a) (JJ big) (NN cat))) (. .))",
     "ja lemori ny bame egigem wo zufurun ."),
    # one word sequence, two targets: a VP-attached PP is an adverbial postposition (with -> wa) after the object,
    # before the verb (see -> lofiz+u); an NP-attached one a genitive-like prefix "telescope wa nu" before "the dog"
    (PP_ON_VERB, "ja fome ja lemo wo ja vizeko wa lofizu ."),
    (PP_ON_NOUN, "ja fome ja vizeko wa nu ja lemo wo lofizu ."),
    # relative clause first: "the saw"(NN saw -> kafe) wo, saw(VBD see -> lofiz+u) + n because "ducks" is plural,
    # relativizer that -> yo; then the ducks (duck -> pizi+ri); object watches (NNS -> popi+ri);
    # watch (VBP -> buv+a+n)
    (SUBJECT_RELATIVE, "ja kafe wo lofizun yo ja piziri ja popiri wo buvan ."),
    # object relative: "the cats chased" (bame+ri, zufur+u+n) + which -> ya, before "the dog"; sleeps -> gikug+a
    # (the head's number, singular)
    (OBJECT_RELATIVE, "ja bameri zufurun ya ja lemo gikuga ."),
    # embedded clause: fish (NNS: kude+ri) and -> ne duck (pizi), "and" makes it plural: run -> lud+u+n;
    # complementizer that -> swe after the clause; she -> hi; says -> kivep+a
    (COMPLEMENT, "hi ja kuderi ne ja pizi ludun swe kivepa ."),
    # the number of fish comes from the tag, not the word
    ("(S (NP (DT the) (NN fish)) (VP (VBD ran)) (. .))", "ja kude ludu ."),
    ("(S (NP (DT the) (NNS fish)) (VP (VBD ran)) (. .))", "ja kuderi ludun ."),
    # an -> ny, horse -> lubo, old and tired -> epol ne azetek, rests -> buk+a; or -> hoy;
    # we -> nesa, above the lighthouse -> ja pamiruko jus, fly -> vur+a+n
    (CLAUSES, "ny lubo epol ne azetek buka hoy nesa ja pamiruko jus vuran ."),
])
def test_the_target_follows_the_transfer_rules_by_hand(tree, expected):
    assert " ".join(make_data.translate(parse_tree(tree))) == expected


def test_the_two_attachments_are_one_word_sequence():
    assert parse_tree(PP_ON_VERB).leaves() == parse_tree(PP_ON_NOUN).leaves()


@pytest.mark.parametrize(
    "tree, named",
    [
        ("(S (NP (DT the) (NN unicorn)) (VP (VBD ran)) (. .))", "unicorn"),
        ("(S (NP (DT the) (NNS dogs)) (VP (VBZ runs)) (. .))", "VBP"),
        ("(S (VP (VBD ran)) (. .))", "(S NP VP .)"),
    ],
)
def test_trees_outside_the_grammar_raise_naming_the_problem(tree, named):
    with pytest.raises(make_data.TransferError, match=re.escape(named)):
        make_data.translate(parse_tree(tree))


# --- lexicon
def test_target_words_are_distinct_per_entry_and_never_source_words():
    noun_forms = [form for *_, stem in make_data.NOUN_ENTRIES for form in (stem, stem + make_data.NOUN_PLURAL)]
    inflections = [tense + agreement for tense in (make_data.PRESENT, make_data.PAST)
                   for agreement in ("", make_data.PLURAL_AGREEMENT)]
    verb_forms = [stem + inflection for *_, stem in make_data.VERB_ENTRIES for inflection in inflections]
    adjective_forms = [target for _, target in make_data.ADJECTIVE_ENTRIES]
    content = noun_forms + verb_forms + adjective_forms
    assert len(set(content)) == len(content)
    function_words = [make_data.OBJECT_MARKER, make_data.GENITIVE_MARKER, make_data.COMPLEMENTIZER[1],
                      *{target for *_, target in make_data.PRONOUNS.values()}, *set(make_data.DETERMINERS.values()),
                      *make_data.POSTPOSITIONS.values(), *make_data.RELATIVIZERS.values(),
                      *make_data.CONJUNCTIONS.values()]
    assert len(set(function_words)) == len(function_words)
    assert not set(content) & set(function_words)
    source_words = {word for tag, word in [*make_data.WORD_TARGETS, *make_data.VERB_STEMS]}
    assert not (set(content) | set(function_words)) & source_words


# --- dependencies
@pytest.mark.parametrize(
    "tree, expected",
    [
        # the man saw the dog with the telescope .  (PP on the VP: telescope -> saw obl, with -> telescope case)
        (PP_ON_VERB, [(2, "det"), (3, "nsubj"), (0, "root"), (5, "det"), (3, "obj"), (8, "case"), (8, "det"),
                      (3, "obl"), (3, "punct")]),
        # the same words with the PP on "the dog": only telescope's arc differs (-> dog nmod)
        (PP_ON_NOUN, [(2, "det"), (3, "nsubj"), (0, "root"), (5, "det"), (3, "obj"), (8, "case"), (8, "det"),
                      (5, "nmod"), (3, "punct")]),
        # the(1) ducks(2) that(3) saw(4) the(5) saw(6) watch(7) the(8) watches(9) .(10): subject relative, "that"
        # is the relative verb's nsubj, the relative verb is acl:relcl of "ducks"
        (SUBJECT_RELATIVE, [(2, "det"), (7, "nsubj"), (4, "nsubj"), (2, "acl:relcl"), (6, "det"), (4, "obj"),
                            (0, "root"), (9, "det"), (7, "obj"), (7, "punct")]),
        # the(1) dog(2) which(3) the(4) cats(5) chased(6) sleeps(7) .(8): object relative, "which" is obj
        (OBJECT_RELATIVE, [(2, "det"), (7, "nsubj"), (6, "obj"), (5, "det"), (6, "nsubj"), (2, "acl:relcl"),
                           (0, "root"), (7, "punct")]),
        # she(1) says(2) that(3) the(4) fish(5) and(6) the(7) duck(8) ran(9) .(10): complement clause (ccomp, mark),
        # NP coordination: duck conj of fish, "and" cc of duck (the conjunct after it)
        (COMPLEMENT, [(2, "nsubj"), (0, "root"), (9, "mark"), (5, "det"), (9, "nsubj"), (8, "cc"), (8, "det"),
                      (5, "conj"), (2, "ccomp"), (2, "punct")]),
        # an(1) old(2) and(3) tired(4) horse(5) rests(6) or(7) we(8) fly(9) above(10) the(11) lighthouse(12) .(13):
        # S CC S (the first clause's verb is the root, the second's its conj), ADJP coordination
        (CLAUSES, [(5, "det"), (5, "amod"), (4, "cc"), (2, "conj"), (6, "nsubj"), (0, "root"), (9, "cc"),
                   (9, "nsubj"), (6, "conj"), (12, "case"), (12, "det"), (9, "obl"), (6, "punct")]),
    ],
)
def test_head_rules_give_the_hand_derived_dependencies(tree, expected):
    assert make_data.gold_dependencies(parse_tree(tree)) == expected


def test_a_phrase_without_a_head_rule_is_an_error():
    with pytest.raises(make_data.HeadRuleError, match="no head rule for \\(NP \\(DT the\\)\\)"):
        make_data.gold_dependencies(parse_tree("(S (NP (DT the)) (VP (VBD ran)) (. .))"))


def test_every_label_has_a_confusion_and_falls_in_the_documented_universal_group():
    labels = set(make_data.DEPENDENCY_LABELS.values()) | {"obj", make_data.ROOT_ELSEWHERE_LABEL}
    assert labels <= set(make_data.LABEL_CONFUSIONS)
    index = label_index(UNIVERSAL_GROUPS)
    # the docstring: obl joins the object group; nmod, acl:relcl, case and mark are outside the 16 groups
    assert label_group("obl", index) == label_group("obj", index) != OUTSIDE
    for label in ("nmod", "acl:relcl", "case", "mark"):
        assert label_group(label, index) == OUTSIDE
    for label in ("root", "nsubj", "obj", "ccomp", "cc", "conj", "amod", "det", "punct"):
        assert label_group(label, index) != OUTSIDE


def _heads_of(record, dependent):
    return {head: (p, labels) for d, head, p, labels in record["arcs"] if d == dependent}


def test_noise_puts_the_configured_mass_on_the_gold_arc_and_each_word_sums_to_one(monkeypatch):
    tree = parse_tree(PP_ON_VERB)
    words, gold = tree.leaves(), make_data.gold_dependencies(tree)
    monkeypatch.setattr(make_data, "GOLD_HEAD_MASS", (0.9, 0.9))
    monkeypatch.setattr(make_data, "GOLD_LABEL_MASS", (0.95, 0.95))
    record = make_data.noisy_arcs(words, gold, random.Random(0))
    assert record["words"] == words
    for dependent, (gold_head, gold_label) in enumerate(gold, start=1):
        heads = _heads_of(record, dependent)
        assert sum(p for p, _ in heads.values()) == pytest.approx(1.0, abs=1e-12)
        assert heads[gold_head][0] == 0.9
        assert 2 <= len(heads) <= 3  # the gold head and 1 or 2 others
        assert dependent not in heads
        for head, (p, labels) in heads.items():
            if head == 0:
                assert labels == {"root": 1.0}
                continue
            main = "parataxis" if gold_label == "root" else gold_label
            assert labels == {main: 0.95, make_data.LABEL_CONFUSIONS[main]: pytest.approx(0.05)}
    # by hand: telescope (8) -> saw (3) obl 0.9, and (the root) saw -> 0 with 0.9, labeled root only
    assert _heads_of(record, 8)[3] == (0.9, {"obl": 0.95, "nmod": pytest.approx(0.05)})
    assert _heads_of(record, 3)[0] == (0.9, {"root": 1.0})


def test_a_one_word_sentence_puts_all_its_mass_on_the_root():
    record = make_data.noisy_arcs(["go"], [(0, "root")], random.Random(0))
    assert record == {"words": ["go"], "arcs": [[1, 0, 1.0, {"root": 1.0}]], "best": [[0, "root"]]}


def test_the_arcs_file_is_read_back_by_the_project_reader_one_record_per_tree(demo_dir):
    for split in SPLITS:
        trees = list(read_trees(str(demo_dir / f"{split}.tree")))
        records = list(read_arc_distributions(str(demo_dir / f"{split}.arcs.jsonl")))
        assert len(records) == len(trees) == len(_lines(demo_dir / f"{split}.en"))
        for tree, record in zip(trees, records):
            assert record["words"] == tree.leaves()
            # the noise of the default ranges keeps each word's head rule head and label the most probable
            for dependent, (gold_head, gold_label) in enumerate(make_data.gold_dependencies(tree), start=1):
                heads = _heads_of(record, dependent)
                assert sum(p for p, _ in heads.values()) == pytest.approx(1.0, abs=1e-9)
                assert all(p > 0 for p, _ in heads.values())
                low, high = make_data.GOLD_HEAD_MASS
                assert low <= heads[gold_head][0] <= high
                assert max(heads, key=lambda head: heads[head][0]) == gold_head
                labels = heads[gold_head][1]
                assert max(labels, key=labels.get) == gold_label and sum(labels.values()) == pytest.approx(1.0)
                assert record["best"][dependent - 1] == [gold_head, gold_label]  # the 1-best tree is the gold one


def test_the_gold_parses_are_packed_into_a_parse_archive_a_study_reads(demo_dir, tmp_path):
    store, tok = str(demo_dir / "parses"), tmp_path / "tok"
    manifest = archive.verify(store)
    assert manifest["source"] == "en"
    assert {split: entry["lines"] for split, entry in manifest["splits"].items()} == SIZES
    assert manifest["parsers"] == {role: {"model": name} for role, name in make_data.GOLD_PARSERS.items()}
    tok.mkdir()
    for split in SPLITS:
        (tok / f"{split}.en").write_bytes((demo_dir / f"{split}.en").read_bytes())
    for done in archive.unpack(store, str(tok), "en", list(SPLITS)):
        assert done.whole and done.fallbacks == 0
    for split in SPLITS:
        assert (tok / f"{split}.tree").read_text() == (demo_dir / f"{split}.tree").read_text()
        arcs = gzip.decompress((tok / f"{split}.arcs.jsonl.gz").read_bytes()).decode()
        assert arcs == (demo_dir / f"{split}.arcs.jsonl").read_text()
        first = json.loads(arcs.splitlines()[0])
        rows = [line.split("\t") for line in (tok / f"{split}.conllu").read_text().split("\n\n")[0].splitlines()
                if line and not line.startswith("#")]
        assert [[int(row[6]), row[7]] for row in rows] == first["best"]  # the gold heads and labels
