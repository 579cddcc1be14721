"""The synthetic demo data (examples/demo/make_data.py): files, determinism and the tree-to-target transfer.

Expected targets below are derived by hand from the lexicon tables and transfer rules in make_data's docstring.
"""
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from fairseq_syntax.trees import parse_tree, read_trees

MAKE_DATA = Path(__file__).resolve().parents[1] / "examples" / "demo" / "make_data.py"
SPLITS = ("train", "valid", "test")
GRAMMAR_LABELS = {"S", "NP", "VP", "PP", "SBAR", "WHNP", "ADJP", "DT", "JJ", "NN", "NNS", "VBD", "VBZ", "VBP", "IN",
                  "PRP", "CC", "WDT", "."}


def _load_make_data():
    spec = importlib.util.spec_from_file_location("demo_make_data", MAKE_DATA)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building the class
    spec.loader.exec_module(module)
    return module


make_data = _load_make_data()


def _run_cli(out_dir: Path, seed: int, train: int = 50, valid: int = 20, test: int = 20) -> None:
    command = [sys.executable, str(MAKE_DATA), "--out", str(out_dir), "--train", str(train), "--valid", str(valid),
               "--test", str(test), "--seed", str(seed)]
    subprocess.run(command, check=True, capture_output=True, text=True)


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def _interior_labels(tree) -> set[str]:
    if not tree.children:
        return set()
    return {tree.label}.union(*(_interior_labels(child) for child in tree.children))


def _translate(bracketed: str) -> str:
    return " ".join(make_data.translate(parse_tree(bracketed)))


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory) -> Path:
    out_dir = tmp_path_factory.mktemp("demo")
    _run_cli(out_dir, seed=3)
    return out_dir


# ---------------------------------------------------------------------------------------------------- the files


def test_files_are_parallel_and_trees_match_the_source(demo_dir):
    sizes = {"train": 50, "valid": 20, "test": 20}
    for split, size in sizes.items():
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


def test_no_sentence_repeats_within_or_across_splits(demo_dir):
    sentences = [line for split in SPLITS for line in _lines(demo_dir / f"{split}.en")]
    assert len(set(sentences)) == len(sentences) == 90


def test_duplicates_are_redrawn_when_the_grammar_repeats_itself(monkeypatch):
    # Only three-token sentences ("they ran ."): a few thousand exist, and the likeliest recur within 300 draws.
    monkeypatch.setattr(make_data, "MIN_TOKENS", 3)
    corpus = make_data.generate_corpus({"train": 200, "test": 100}, seed=0, max_tokens=3)
    sentences = [" ".join(make_data.leaves(tree)) for trees in corpus.values() for tree in trees]
    assert len(sentences) == 300
    assert all(len(sentence.split()) == 3 for sentence in sentences)
    assert len(set(sentences)) == 300


def test_a_grammar_that_only_repeats_itself_is_an_error_not_a_hang(monkeypatch):
    only_tree = parse_tree("(S (NP (PRP they)) (VP (VBD ran) (PP (IN near) (NP (DT the) (NN river)))) (. .))")
    monkeypatch.setattr(make_data._Generator, "sentence", lambda self: only_tree)
    with pytest.raises(ValueError, match="could not draw 2 distinct sentences for 'train'"):
        make_data.generate_corpus({"train": 2}, seed=0)


def test_same_seed_same_files_other_seed_other_files(demo_dir, tmp_path):
    _run_cli(tmp_path / "again", seed=3)
    _run_cli(tmp_path / "other", seed=4)
    for split in SPLITS:
        for suffix in ("en", "de", "tree"):
            name = f"{split}.{suffix}"
            assert (tmp_path / "again" / name).read_bytes() == (demo_dir / name).read_bytes()
    assert (tmp_path / "other" / "train.en").read_bytes() != (demo_dir / "train.en").read_bytes()


def test_negative_size_is_refused(tmp_path):
    with pytest.raises(SystemExit):
        make_data.main(["--out", str(tmp_path), "--train", "-1"])


# ---------------------------------------------------------------------------------------------------- transfer


def test_svo_becomes_sov_with_adjective_after_noun_and_plural_agreement():
    tree = "(S (NP (DT the) (NNS dogs)) (VP (VBD chased) (NP (DT a) (JJ big) (NN cat))) (. .))"
    # the -> ja, dogs -> lemo+ri; a -> ny, cat -> bame, big -> egigem, object marker wo;
    # chase -> zufur + u (past) + n (plural subject)
    assert _translate(tree) == "ja lemori ny bame egigem wo zufurun ."


def test_pp_attachment_decides_the_target_of_one_word_sequence():
    on_verb = ("(S (NP (DT the) (NN man)) (VP (VBD saw) (NP (DT the) (NN dog)) "
               "(PP (IN with) (NP (DT the) (NN telescope)))) (. .))")
    on_noun = ("(S (NP (DT the) (NN man)) (VP (VBD saw) (NP (NP (DT the) (NN dog)) "
               "(PP (IN with) (NP (DT the) (NN telescope))))) (. .))")
    assert parse_tree(on_verb).leaves() == parse_tree(on_noun).leaves()
    # VP-attached: adverbial postposition (with -> wa) after the object, before the verb (see -> lofiz+u)
    assert _translate(on_verb) == "ja fome ja lemo wo ja vizeko wa lofizu ."
    # NP-attached: genitive-like prefix "telescope wa nu" before "the dog"
    assert _translate(on_noun) == "ja fome ja vizeko wa nu ja lemo wo lofizu ."


def test_relative_clause_precedes_its_noun_and_agrees_with_it_and_homographs_follow_their_tags():
    tree = ("(S (NP (NP (DT the) (NNS ducks)) (SBAR (WHNP (WDT that)) (S (VP (VBD saw) (NP (DT the) (NN saw))))))"
            " (VP (VBP watch) (NP (DT the) (NNS watches))) (. .))")
    # relative clause first: "the saw"(NN saw -> kafe) wo, saw(VBD see -> lofiz+u) + n because "ducks" is plural,
    # relativizer that -> yo; then the ducks (duck -> pizi+ri); object watches (NNS -> popi+ri);
    # watch (VBP -> buv+a+n)
    assert _translate(tree) == "ja kafe wo lofizun yo ja piziri ja popiri wo buvan ."


def test_object_relative_takes_its_own_subject_and_the_main_verb_agrees_with_the_head():
    tree = ("(S (NP (NP (DT the) (NN dog)) (SBAR (WHNP (WDT which)) (S (NP (DT the) (NNS cats)) "
            "(VP (VBD chased))))) (VP (VBZ sleeps)) (. .))")
    # "the cats chased" (bame+ri, zufur+u+n) + which -> ya, before "the dog"; sleeps -> gikug+a (singular)
    assert _translate(tree) == "ja bameri zufurun ya ja lemo gikuga ."


def test_complement_clause_and_coordinated_subject_number():
    tree = ("(S (NP (PRP she)) (VP (VBZ says) (SBAR (IN that) (S (NP (NP (DT the) (NNS fish)) (CC and) "
            "(NP (DT the) (NN duck))) (VP (VBD ran))))) (. .))")
    # embedded clause: fish (NNS: kude+ri) and -> ne duck (pizi), "and" makes it plural: run -> lud+u+n;
    # complementizer that -> swe after the clause; she -> hi; says -> kivep+a
    assert _translate(tree) == "hi ja kuderi ne ja pizi ludun swe kivepa ."


def test_number_of_fish_comes_from_the_tag_not_the_word():
    assert _translate("(S (NP (DT the) (NN fish)) (VP (VBD ran)) (. .))") == "ja kude ludu ."
    assert _translate("(S (NP (DT the) (NNS fish)) (VP (VBD ran)) (. .))") == "ja kuderi ludun ."


def test_clause_coordination_adjective_coordination_and_pronoun():
    tree = ("(S (S (NP (DT an) (ADJP (JJ old) (CC and) (JJ tired)) (NN horse)) (VP (VBZ rests))) (CC or) "
            "(S (NP (PRP we)) (VP (VBP fly) (PP (IN above) (NP (DT the) (NN lighthouse))))) (. .))")
    # an -> ny, horse -> lubo, old and tired -> epol ne azetek, rests -> buk+a; or -> hoy;
    # we -> nesa, above the lighthouse -> ja pamiruko jus, fly -> vur+a+n
    assert _translate(tree) == "ny lubo epol ne azetek buka hoy nesa ja pamiruko jus vuran ."


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


# ---------------------------------------------------------------------------------------------------- lexicon


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
