"""Synthetic parallel data for the no-download demo: an English-like source with gold constituency trees and a
head-final target that is a deterministic function of the source *tree* (not of its word sequence).

``python3 examples/demo/make_data.py --out DIR --train 8000 --valid 500 --test 500 --seed 1`` writes
``{train,valid,test}.{en,de,tree,arcs.jsonl}``: tokenized source and target, one single-line PTB tree per line
(leaves = the source tokens) and the labeled dependency distributions of each source sentence. The same seed gives
the same files. ``--archive ARCHIVE`` also packs the gold parses into a parse archive
(:mod:`fairseq_syntax.parsing.archive`, parsers named :data:`GOLD_PARSERS`), the demo study's ``parses.archive``.

Source (``_Generator``, a PCFG whose probabilities it holds): S -> NP VP . | S CC S .; NP -> [DT] [JJ | ADJP]
NN|NNS | PRP | NP PP | NP SBAR | NP CC NP; VP -> V NP PP* | V PP* | V SBAR, the verb agreeing with its subject;
PP -> IN NP; SBAR -> IN(that) S | WHNP(WDT) S (a subject or object relative). MAX_DEPTH bounds recursion; sentences
outside MIN_TOKENS..MAX_TOKENS tokens (with the final ".") and repeated ones are redrawn: no sentence occurs twice
in or across splits. Some words translate by their syntactic role (saw, watch, light as noun / verb / adjective,
that as DT / WDT / IN; fish and sheep as NN or NNS: the number is in the tree, not the word).

Target (``translate``): verb-final clauses, [object + OBJECT_MARKER] [complement clause + complementizer] [PPs as
NP + postposition] verb, the verb its stem + PRESENT or PAST + PLURAL_AGREEMENT after a plural subject ("X and Y"
is plural, "X or Y" has Y's number; a subject relative's subject is the NP it modifies); an NP is [relative clauses
+ relativizer] [NP-attached PPs + GENITIVE_MARKER] DT noun[+NOUN_PLURAL] adjectives. Every word is relexicalised by
(POS, word) into made-up strings, distinct per lexicon entry and from every source word. So "the man saw the dog
with the telescope ." has two targets: with the PP on the VP ``ja fome ja lemo wo ja vizeko wa lofizu .``, with
the PP on "the dog" ``ja fome ja vizeko wa nu ja lemo wo lofizu .``. The words alone decide neither PP /
relative-clause attachment nor the number of "fish" and "sheep": a model that reads the tree can reach BLEU 100,
one that reads only the words cannot.

Dependencies (``{split}.arcs.jsonl``, the format of ``fairseq_syntax.parsing.dependency``) for ``transformer_ldd``
(``--labels universal``), made without a parser: the gold tree by the head rules ``HEAD_CHILDREN`` with the UD v2
labels ``DEPENDENCY_LABELS`` (telescope -> saw obl with the PP on the VP, telescope -> dog nmod with it on "the
dog"; under ``--labels universal`` obl is in the paper's object group, and nmod, acl:relcl, case and mark are
outside the 16 groups, as SD's prep, rcmod and mark were), spread by ``noisy_arcs``; the 1-best tree (``best``)
is the gold tree."""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
from typing import Sequence

from fairseq_syntax.core.trees import Tree, to_bracketed


# --- lexicon

# "singular[/plural] target-stem", entries separated by "|": a plural not written is _plural's.
NOUNS = """
dog lemo | cat bame | horse lubo | bird gadi | cow mage | goat robo | sheep/sheep devo | pig tato | mouse/mice reki
rabbit fudo | fox kuve | wolf/wolves duto | bear gido | lion zate | tiger tepo | monkey roli | snake toli
frog geze | owl duko | duck pizi | fish/fish kude | fly rofi | man/men fome | woman/women varo | child/children lizi
boy toti | girl daki | teacher zabo | farmer zivo | doctor voko | baker mibi | student lete | king pagi | queen femi
soldier pafi | sailor muke | pilot muko | artist mivi | singer gede | neighbour feve | friend bote | guide kibe
cook mulo | book tifo | table ruvo | chair zapo | box romi | ball mapo | hat gofe | coat lube | key bufo | cup dite
bottle deti | knife/knives filo | spoon lode | watch popi | saw kafe | ring zizi | lamp pere | light gule
clock zubo | letter kazi | picture rifi | window guro | door goze | bag gupi | basket zabi | rope pigo | stick tipo
stone lide | apple depe | cake lepo | flower tapo | tree lave | plant mepe | ship mido | train momo | car defe
boat beti | bicycle veto | drum pifo | bell rebe | map zaro | house foge | garden bigi | park reti | river kume
forest bipo | hill tumo | road fufo | bridge rafo | village tafe | city foto | market dubi | school vuro
kitchen pare | field geke | lake dupo | island bapi | tower tuto | castle gipo | station rore | farm zuko
paint gofi | drink dopi | smile deme | call gide | kick zifi | telescope vizeko | firefighter pezami
grandmother vefori | schoolteacher melidibi | lighthouse pamiruko | toothbrush dedaki | bookshelf/bookshelves fifovi
watchtower furupidi | skyscraper zemake | thunderstorm katedi | wheelbarrow palumi | motorcycle buzede
newspaper begivire | blackboard puvekibi | watermelon bazure | basketball godovori | raincoat zegigemi
sunflower fadime | butterfly dorite | snowman/snowmen bofekobi | fisherman/fishermen lulebigi
policeman/policemen bimapi | shopkeeper gubake | storyteller mubobi | typewriter vedurevo
"""

# by class (T transitive, I intransitive, C takes a that-clause): "base[/past] target-stem"; the third person
# singular is _plural's, a past not written _past's.
VERBS = {"T": """
see/saw lofiz | watch buv | chase zufur | find/found vuz | like dab | help vid | follow pubav | carry pib
push durav | pull zok | build/built kez | break/broke gop | open dovib | read/read duf | write/wrote kituf
buy/bought pap | sell/sold vazev | bring/brought kukop | take/took dugid | hold/held bipar | meet/met koged
catch/caught fuk | feed/fed fuvuk | wash zig | visit pobeb | call vomiz | kick mim | throw/threw dibil
eat/ate dezaz | book kidom | train lok | plant kab | ship/shipped vegim | paint gimav | cook rugab | guide pufip
drink/drank ref | ring/rang mikik | light/lit mekor | water deved | draw/drew ror | hide/hid pip | lose/lost fuged
""", "I": """
run/ran lud | sleep/slept gikug | sit/sat zom | smile zugok | laugh bokul | fly/flew vur | duck dig | fish momib
swim/swam boz | dance tobam | sing/sang pedef | wait raz | fall/fell dubaf | arrive tav | park firoz | jump dak
cry mig | rest buk
""", "C": """
say/said kivep | think/thought reb | know/knew zibag | believe vodig | hope lepaz | notice zolog | claim kud
"""}

# "word target"
ADJECTIVES = """
big egigem | small ekatot | old epol | young umar | red amal | green epizal | blue egevum | yellow avolim
happy ebak | sad amarem | tall imabor | short igilol | quiet ovol | loud opal | clever izat | lazy ikitak
brave ikazul | angry adom | hungry omofor | tired azetek | busy iludur | bright ogol | dark arulem | heavy akul
light emom | warm efom | cold uzul | famous ikukik | strange iper | gentle efit | wild edoket | friendly uvam
noisy abor | beautiful obigal | careful edit | wooden etival | golden ugalir | ancient akat | tiny elok
huge edebot | rich omam | poor uvul | empty ezimik | clean okuk | dirty obivem | wet obor | dry odot
soft ifebat | fast edutit | extraordinary elir | waterproof udam | trustworthy okel | homesick obuvol
overgrown uvet | handmade opet
"""

SINGULAR, PLURAL = "sg", "pl"
SUBJECT, OBJECT = "subject", "object"
# word -> (number, the cases it is used in, target)
PRONOUNS = {
    "he": (SINGULAR, (SUBJECT,), "hu"), "him": (SINGULAR, (OBJECT,), "hu"),
    "she": (SINGULAR, (SUBJECT,), "hi"), "her": (SINGULAR, (OBJECT,), "hi"),
    "it": (SINGULAR, (SUBJECT, OBJECT), "ha"),
    "they": (PLURAL, (SUBJECT,), "hasa"), "them": (PLURAL, (OBJECT,), "hasa"),
    "we": (PLURAL, (SUBJECT,), "nesa"), "us": (PLURAL, (OBJECT,), "nesa"),
}
DETERMINERS = {"the": "ja", "a": "ny", "an": "ny", "this": "se", "that": "so", "every": "yeso", "some": "sam",
               "these": "sese", "those": "soso"}
DETERMINERS_BY_NUMBER = {SINGULAR: ("the", "a", "this", "that", "every"), PLURAL: ("the", "some", "these", "those")}
POSTPOSITIONS = {"with": "wa", "in": "ni", "on": "su", "near": "jen", "under": "shu", "behind": "wusi",
                 "beside": "yan", "from": "nos", "for": "hes", "without": "wani", "above": "jus", "across": "yosa"}
RELATIVIZERS = {"which": "ya", "that": "yo"}
COMPLEMENTIZER = ("that", "swe")
CONJUNCTIONS = {"and": "ne", "or": "hoy"}
OBJECT_MARKER = "wo"
GENITIVE_MARKER = "nu"
NOUN_PLURAL = "ri"
PRESENT, PAST = "a", "u"
PLURAL_AGREEMENT = "n"
PERIOD = "."


def _entries(table: str) -> list[list[str]]:
    return [entry.split() for line in table.strip().splitlines() for entry in line.split("|")]


def _plural(word: str) -> str:
    """English's regular -s: boxes, flies, dogs (and the third person singular: watches, carries, sees)."""
    if word.endswith(("s", "x", "ch", "sh")):
        return word + "es"
    return word[:-1] + "ies" if re.search("[^aeiou]y$", word) else word + "s"


def _past(word: str) -> str:
    """English's regular -ed: liked, carried, pushed."""
    if word.endswith("e"):
        return word + "d"
    return word[:-1] + "ied" if re.search("[^aeiou]y$", word) else word + "ed"


def _forms(word: str, regular) -> list[str]:
    """``base/irregular`` -> [base, irregular]; ``base`` -> [base, regular(base)]."""
    base, _, irregular = word.partition("/")
    return [base, irregular or regular(base)]


NOUN_ENTRIES = [[*_forms(word, _plural), stem] for word, stem in _entries(NOUNS)]  # [singular, plural, stem]
# [class, base, 3sg, past, stem]
VERB_ENTRIES = [[verb_class, base, _plural(base), past, stem] for verb_class, table in VERBS.items()
                for word, stem in _entries(table) for base, past in [_forms(word, _past)]]
ADJECTIVE_ENTRIES = _entries(ADJECTIVES)  # [word, target]
VERB_TAGS = ("VBP", "VBZ", "VBD")


def _build_targets() -> tuple[dict, dict]:
    """(POS, word) -> target word for all but verbs, and (verb POS, word) -> verb stem; a clash is a table bug."""
    words, verbs = {}, {}

    def add(table: dict, tag: str, word: str, target: str) -> None:
        if table.setdefault((tag, word), target) != target:
            raise ValueError(f"lexicon: ({tag} {word}) has two targets, {table[tag, word]!r} and {target!r}")

    for singular, plural, stem in NOUN_ENTRIES:
        add(words, "NN", singular, stem)
        add(words, "NNS", plural, stem + NOUN_PLURAL)
    for _, base, third_singular, past, stem in VERB_ENTRIES:
        for tag, form in zip(VERB_TAGS, (base, third_singular, past)):
            add(verbs, tag, form, stem)
    for word, target in ADJECTIVE_ENTRIES:
        add(words, "JJ", word, target)
    for word, (_, _, target) in PRONOUNS.items():
        add(words, "PRP", word, target)
    for tag, table in (("DT", DETERMINERS), ("IN", POSTPOSITIONS), ("WDT", RELATIVIZERS), ("CC", CONJUNCTIONS)):
        for word, target in table.items():
            add(words, tag, word, target)
    add(words, "IN", *COMPLEMENTIZER)
    add(words, ".", PERIOD, PERIOD)
    return words, verbs


WORD_TARGETS, VERB_STEMS = _build_targets()

# --- transfer


# Child-label sequences of a base NP and of a VP, matched against ``_labels(node)``.
_BASE_NP = re.compile(r"(DT )?((JJ|ADJP) )?(NN|NNS)")
_VP = re.compile(r"(VBP|VBZ|VBD)( NP| SBAR)?( PP)*")


class TransferError(ValueError):
    """A tree outside the demo grammar (unknown word or shape); the message shows the offending subtree."""


def _labels(node: Tree) -> str:
    return " ".join(child.label for child in node.children)


def _fail(node: Tree, expected: str) -> TransferError:
    return TransferError(f"cannot translate {to_bracketed(node)}: expected {expected}")


def _word(node: Tree) -> str:
    """Target of a preterminal ``(TAG word)`` other than a verb."""
    if len(node.children) != 1 or node.children[0].children:
        raise _fail(node, "a preterminal over one word")
    target = WORD_TARGETS.get((node.label, node.children[0].label))
    if target is None:
        raise _fail(node, f"a word of the demo lexicon for {node.label}")
    return target


def noun_phrase_number(noun_phrase: Tree) -> str:
    """SINGULAR or PLURAL: the grammatical number of an NP, which the verb of its clause agrees with."""
    labels = _labels(noun_phrase)
    if labels == "PRP":
        _word(noun_phrase.children[0])  # rejects a pronoun outside the lexicon
        return PRONOUNS[noun_phrase.children[0].children[0].label][0]
    if labels in ("NP PP", "NP SBAR"):
        return noun_phrase_number(noun_phrase.children[0])
    if labels == "NP CC NP":
        conjunction = noun_phrase.children[1].children[0].label
        return PLURAL if conjunction == "and" else noun_phrase_number(noun_phrase.children[2])
    if _BASE_NP.fullmatch(labels):
        return PLURAL if noun_phrase.children[-1].label == "NNS" else SINGULAR
    raise _fail(noun_phrase, "an NP of the demo grammar")


def _noun_phrase(node: Tree) -> list[str]:
    labels = _labels(node)
    if labels == "PRP":
        return [_word(node.children[0])]
    if labels == "NP PP":
        return _prepositional_phrase(node.children[1]) + [GENITIVE_MARKER] + _noun_phrase(node.children[0])
    if labels == "NP SBAR":
        head, relative = node.children
        return _relative_clause(relative, noun_phrase_number(head)) + _noun_phrase(head)
    if labels == "NP CC NP":
        first, conjunction, second = node.children
        return _noun_phrase(first) + [_word(conjunction)] + _noun_phrase(second)
    if _BASE_NP.fullmatch(labels):
        *modifiers, noun = node.children
        determiners = [_word(child) for child in modifiers if child.label == "DT"]
        adjectives = [target for child in modifiers if child.label != "DT" for target in _adjective(child)]
        return determiners + [_word(noun)] + adjectives
    raise _fail(node, "PRP | NP PP | NP SBAR | NP CC NP | [DT] [JJ|ADJP] NN|NNS")


def _adjective(node: Tree) -> list[str]:
    if node.label == "JJ":
        return [_word(node)]
    if _labels(node) == "JJ CC JJ":
        return [_word(child) for child in node.children]
    raise _fail(node, "JJ or (ADJP JJ CC JJ)")


def _prepositional_phrase(node: Tree) -> list[str]:
    if _labels(node) != "IN NP":
        raise _fail(node, "(PP IN NP)")
    preposition, object_phrase = node.children
    return _noun_phrase(object_phrase) + [_word(preposition)]


def _verb(node: Tree, subject_number: str) -> str:
    word = node.children[0].label
    stem = VERB_STEMS.get((node.label, word))
    if stem is None:
        raise _fail(node, f"a verb of the demo lexicon for {node.label}")
    agreeing_tag = {SINGULAR: "VBZ", PLURAL: "VBP"}[subject_number]
    if node.label != "VBD" and node.label != agreeing_tag:
        raise _fail(node, f"{agreeing_tag}: the subject is {subject_number}")
    tense = PAST if node.label == "VBD" else PRESENT
    return stem + tense + (PLURAL_AGREEMENT if subject_number == PLURAL else "")


def _verb_phrase(node: Tree, subject_number: str) -> list[str]:
    if node.label != "VP" or not _VP.fullmatch(_labels(node)):
        raise _fail(node, "(VP V [NP | SBAR] PP*)")
    verb, *dependents = node.children
    targets: list[str] = []
    for dependent in dependents:
        if dependent.label == "NP":
            targets += _noun_phrase(dependent) + [OBJECT_MARKER]
        elif dependent.label == "SBAR":
            targets += _complement_clause(dependent)
        else:
            targets += _prepositional_phrase(dependent)
    return targets + [_verb(verb, subject_number)]


def _clause(node: Tree) -> list[str]:
    if node.label != "S" or _labels(node) != "NP VP":
        raise _fail(node, "(S NP VP)")
    subject, predicate = node.children
    return _noun_phrase(subject) + _verb_phrase(predicate, noun_phrase_number(subject))


def _complement_clause(node: Tree) -> list[str]:
    if _labels(node) != "IN S":
        raise _fail(node, "(SBAR (IN that) S)")
    complementizer, clause = node.children
    return _clause(clause) + [_word(complementizer)]


def _relative_clause(node: Tree, head_number: str) -> list[str]:
    """``(SBAR (WHNP (WDT w)) (S ...))`` -> clause + relativizer; a subject gap takes the head's number."""
    if _labels(node) != "WHNP S" or _labels(node.children[0]) != "WDT":
        raise _fail(node, "(SBAR (WHNP WDT) S)")
    relativizer = _word(node.children[0].children[0])
    clause = node.children[1]
    if _labels(clause) == "VP":
        return _verb_phrase(clause.children[0], head_number) + [relativizer]
    return _clause(clause) + [relativizer]


def translate(tree: Tree) -> list[str]:
    """Target tokens of a source tree of the demo grammar (rules in the module docstring)."""
    labels = _labels(tree)
    if tree.label != "S" or labels not in ("NP VP .", "S CC S ."):
        raise _fail(tree, "(S NP VP .) or (S S CC S .)")
    if labels == "NP VP .":
        return _clause(Tree("S", tree.children[:2])) + [PERIOD]
    first, conjunction, second, _ = tree.children
    return _clause(first) + [_word(conjunction)] + _clause(second) + [PERIOD]


# --- dependencies

#: Head rules (module docstring); a preterminal's head is its word.
HEAD_CHILDREN = {
    "S": ("VP", "S"),  # a clause: its VP; the top-level S CC S .: the first clause
    "VP": VERB_TAGS,  # the verb
    "NP": ("NN", "NNS", "PRP", "NP"),  # a base NP: its noun; NP PP, NP SBAR, NP CC NP: the first NP
    "PP": ("NP",),  # the noun; the preposition is its case marker
    "SBAR": ("S",),  # the verb of the clause; "that" and the relativizer depend on it
    "WHNP": ("WDT",),
    "ADJP": ("JJ",),  # the first adjective
}

#: UD v2 label of a non-head child's head word by (phrase, child label); exceptions in ``gold_dependencies``.
DEPENDENCY_LABELS = {
    ("S", "NP"): "nsubj", ("S", "S"): "conj", ("S", "CC"): "cc", ("S", "."): "punct",
    ("VP", "NP"): "obj", ("VP", "SBAR"): "ccomp", ("VP", "PP"): "obl",
    ("NP", "DT"): "det", ("NP", "JJ"): "amod", ("NP", "ADJP"): "amod", ("NP", "PP"): "nmod",
    ("NP", "SBAR"): "acl:relcl", ("NP", "NP"): "conj", ("NP", "CC"): "cc",
    ("PP", "IN"): "case", ("SBAR", "IN"): "mark", ("SBAR", "WHNP"): "nsubj",  # obj in object relatives
    ("ADJP", "JJ"): "conj", ("ADJP", "CC"): "cc",
}
ROOT_LABEL = "root"

GOLD_HEAD_MASS = (0.80, 0.95)  # P(gold head | word), drawn uniformly per word
GOLD_LABEL_MASS = (0.85, 0.97)  # P(main label | word, head), drawn uniformly per word
ALTERNATIVE_HEADS = (1, 2)  # the rest of the head mass goes to this many other heads (the root included)
#: the label that takes the rest of an arc's label mass: one a parser might give instead
LABEL_CONFUSIONS = {
    "nsubj": "obj", "obj": "nsubj", "obl": "nmod", "nmod": "obl", "det": "amod", "amod": "compound", "case": "mark",
    "mark": "case", "cc": "advmod", "conj": "appos", "ccomp": "xcomp", "acl:relcl": "advcl", "punct": "dep",
    "parataxis": "conj",
}
ROOT_ELSEWHERE_LABEL = "parataxis"  # the main label of the root word's arcs to a word (its gold arc is the root)
PROBABILITY_UNIT = 10_000  # every probability is a multiple of 1e-4 (4 digits, as the parser writes them)
ARCS_SUFFIX = "arcs.jsonl"  # fairseq-syntax-preprocess-dependencies' default --arcs-suffix


class HeadRuleError(ValueError):
    """A tree the head rules do not cover (a phrase without a head child, or an unknown phrase/child pair)."""


def gold_dependencies(tree) -> list[tuple[int, str]]:
    """Per word (in order) its head (1-based, 0 = root) and UD label by ``HEAD_CHILDREN`` and ``DEPENDENCY_LABELS``."""
    arcs: dict[int, tuple[int, str]] = {}
    position = 0

    def visit(node) -> int:
        """Head word (1-based) of ``node``; records the arc of every other word's maximal projection below it."""
        nonlocal position
        if not node.children:
            position += 1
            return position
        heads = [visit(child) for child in node.children]
        if len(node.children) == 1 and node.label not in HEAD_CHILDREN:  # a preterminal
            return heads[0]
        labels = [child.label for child in node.children]
        head_child = next((labels.index(label) for label in HEAD_CHILDREN.get(node.label, ()) if label in labels),
                          None)
        if head_child is None:
            raise HeadRuleError(f"no head rule for {to_bracketed(node)}")
        for k, (child, head) in enumerate(zip(node.children, heads)):
            if k == head_child:
                continue
            label = DEPENDENCY_LABELS.get((node.label, child.label))
            if label is None:
                raise HeadRuleError(f"no dependency label for {child.label} in {node.label}: {to_bracketed(node)}")
            governor = heads[head_child]
            if child.label == "CC":
                if k + 1 >= len(node.children):
                    raise HeadRuleError(f"a conjunction without a conjunct after it: {to_bracketed(node)}")
                governor = heads[k + 1]
            if (node.label, child.label) == ("SBAR", "WHNP"):
                clause = node.children[head_child]
                label = "nsubj" if [c.label for c in clause.children] == ["VP"] else "obj"
            arcs[head] = (governor, label)
        return heads[head_child]

    arcs[visit(tree)] = (0, ROOT_LABEL)
    if sorted(arcs) != list(range(1, position + 1)):  # the head rules give every word exactly one arc
        raise HeadRuleError(f"words without a head in {to_bracketed(tree)}")
    return [arcs[word] for word in range(1, position + 1)]


def _label_distribution(head: int, gold_label: str, main_mass: int) -> dict[str, float]:
    """P(label | word, head): the root takes only "root"; another head mostly the word's gold label (the root
    word: ROOT_ELSEWHERE_LABEL), the rest its LABEL_CONFUSIONS entry."""
    if head == 0:
        return {ROOT_LABEL: 1.0}
    main = ROOT_ELSEWHERE_LABEL if gold_label == ROOT_LABEL else gold_label
    if main_mass >= PROBABILITY_UNIT:
        return {main: 1.0}
    confused = PROBABILITY_UNIT - main_mass
    return {main: main_mass / PROBABILITY_UNIT, LABEL_CONFUSIONS[main]: confused / PROBABILITY_UNIT}


def _units(bounds: tuple[float, float]) -> tuple[int, int]:
    return round(bounds[0] * PROBABILITY_UNIT), round(bounds[1] * PROBABILITY_UNIT)


def noisy_arcs(words: list[str], gold: list[tuple[int, str]], rng: random.Random) -> dict:
    """A parser-like record (``fairseq_syntax.parsing.dependency`` format) around the gold tree ``gold``: per word
    the gold head gets a mass drawn uniformly from GOLD_HEAD_MASS, the rest goes to 1 or 2 other heads (words or the
    root, uniformly; two shares split at a cut in the middle half). An arc to a word puts a mass from GOLD_LABEL_MASS
    on the gold label and the rest on LABEL_CONFUSIONS' (``_label_distribution``). In multiples of 1e-4, so each
    word's head mass sums to exactly 1."""
    if len(words) != len(gold):
        raise ValueError(f"{len(words)} words but {len(gold)} gold arcs")
    arcs = []
    for dependent, (gold_head, gold_label) in enumerate(gold, start=1):
        gold_mass = rng.randint(*_units(GOLD_HEAD_MASS))
        label_mass = rng.randint(*_units(GOLD_LABEL_MASS))
        candidates = [head for head in range(len(words) + 1) if head not in (dependent, gold_head)]
        alternatives = rng.sample(candidates, min(rng.choice(ALTERNATIVE_HEADS), len(candidates)))
        rest = PROBABILITY_UNIT - gold_mass
        if not alternatives or rest <= 0:
            alternatives, gold_mass, shares = [], PROBABILITY_UNIT, []
        elif len(alternatives) == 1 or rest < 4:
            alternatives, shares = alternatives[:1], [rest]
        else:
            cut = rng.randint(rest // 4, rest - rest // 4)
            shares = [cut, rest - cut]
        for head, mass in sorted([(gold_head, gold_mass), *zip(alternatives, shares)]):
            arcs.append([dependent, head, mass / PROBABILITY_UNIT, _label_distribution(head, gold_label, label_mass)])
    best = [[head, label] for head, label in gold]  # the gold head and label are each row's most probable
    return {"words": list(words), "arcs": arcs, "best": best}


def dependency_rng(seed: int, split: str) -> random.Random:
    """The noise of one split: its own generator, so the trees (and .en/.de/.tree) do not depend on it."""
    return random.Random(f"demo-dependencies:{seed}:{split}")


# --- grammar

MAX_DEPTH = 3
MIN_TOKENS, MAX_TOKENS = 5, 25
VERB_CLASSES = ("T", "I", "C")
NOUNS_BY_NUMBER = {SINGULAR: [entry[0] for entry in NOUN_ENTRIES], PLURAL: [entry[1] for entry in NOUN_ENTRIES]}
VERBS_BY_CLASS = {verb_class: [entry[1:4] for entry in VERB_ENTRIES if entry[0] == verb_class]
                  for verb_class in VERB_CLASSES}
ADJECTIVE_WORDS = [entry[0] for entry in ADJECTIVE_ENTRIES]
PRONOUNS_BY_NUMBER_AND_CASE = {
    (number, case): [word for word, (n, cases, _) in PRONOUNS.items() if n == number and case in cases]
    for number in (SINGULAR, PLURAL) for case in (SUBJECT, OBJECT)
}


def _preterminal(tag: str, word: str) -> Tree:
    return Tree(tag, [Tree(word)])


class _Generator:
    """Draws source trees from the PCFG of the module docstring with one ``random.Random``."""

    def __init__(self, rng: random.Random, max_depth: int = MAX_DEPTH):
        self.rng = rng
        self.max_depth = max_depth

    def pick(self, weighted: dict) -> object:
        return self.rng.choices(list(weighted), weights=list(weighted.values()))[0]

    def sentence(self) -> Tree:
        period = _preterminal(".", PERIOD)
        if self.rng.random() < 0.15:
            conjunction = _preterminal("CC", self.rng.choice(list(CONJUNCTIONS)))
            return Tree("S", [self.clause(1), conjunction, self.clause(1), period])
        return Tree("S", self.clause(0).children + [period])

    def clause(self, depth: int) -> Tree:
        subject = self.noun_phrase(depth, SUBJECT)
        return Tree("S", [subject, self.verb_phrase(depth, noun_phrase_number(subject))])

    def noun_phrase(self, depth: int, case: str, pronoun_allowed: bool = True) -> Tree:
        """Pronouns do not head NP PP / NP SBAR."""
        if depth >= self.max_depth:
            kinds = {"base": 0.87, "pronoun": 0.13}
        else:
            kinds = {"base": 0.57, "pronoun": 0.10, "pp": 0.15, "relative": 0.09, "coordination": 0.09}
        if not pronoun_allowed:
            del kinds["pronoun"]
        kind = self.pick(kinds)
        if kind == "pronoun":
            number = self.pick({SINGULAR: 0.6, PLURAL: 0.4})
            return Tree("NP", [_preterminal("PRP", self.rng.choice(PRONOUNS_BY_NUMBER_AND_CASE[number, case]))])
        if kind == "pp":
            head = self.noun_phrase(depth + 1, case, pronoun_allowed=False)
            return Tree("NP", [head, self.prepositional_phrase(depth + 1)])
        if kind == "relative":
            head = self.noun_phrase(depth + 1, case, pronoun_allowed=False)
            return Tree("NP", [head, self.relative_clause(depth + 1, noun_phrase_number(head))])
        if kind == "coordination":
            conjunction = _preterminal("CC", self.rng.choice(list(CONJUNCTIONS)))
            return Tree("NP", [self.noun_phrase(depth + 1, case), conjunction, self.noun_phrase(depth + 1, case)])
        return self.base_noun_phrase()

    def base_noun_phrase(self) -> Tree:
        number = PLURAL if self.rng.random() < 0.35 else SINGULAR
        children = []
        if not (number == PLURAL and self.rng.random() < 0.3):
            children.append(_preterminal("DT", self.rng.choice(DETERMINERS_BY_NUMBER[number])))
        if self.rng.random() < 0.35:
            if self.rng.random() < 0.2:
                first, second = self.rng.sample(ADJECTIVE_WORDS, 2)
                conjunction = self.rng.choice(list(CONJUNCTIONS))
                children.append(Tree("ADJP", [_preterminal("JJ", first), _preterminal("CC", conjunction),
                                              _preterminal("JJ", second)]))
            else:
                children.append(_preterminal("JJ", self.rng.choice(ADJECTIVE_WORDS)))
        noun_tag = "NNS" if number == PLURAL else "NN"
        children.append(_preterminal(noun_tag, self.rng.choice(NOUNS_BY_NUMBER[number])))
        if children[0].leaves() == ["a"] and children[1].leaves()[0][0] in "aeiou":
            children[0] = _preterminal("DT", "an")
        return Tree("NP", children)

    def verb_phrase(self, depth: int, subject_number: str, with_object: bool = True) -> Tree:
        """``with_object=False``: the transitive VP of an object relative, whose object is the gap."""
        if not with_object:
            verb_class = "T"
        elif depth < self.max_depth:
            verb_class = self.pick({"T": 0.6, "I": 0.25, "C": 0.15})
        else:
            verb_class = self.pick({"T": 0.7, "I": 0.3})
        base, third_singular, past = self.rng.choice(VERBS_BY_CLASS[verb_class])
        if self.rng.random() < 0.5:
            verb = _preterminal("VBD", past)
        else:
            verb = _preterminal("VBZ", third_singular) if subject_number == SINGULAR else _preterminal("VBP", base)
        if verb_class == "C":
            complement = Tree("SBAR", [_preterminal("IN", COMPLEMENTIZER[0]), self.clause(depth + 1)])
            return Tree("VP", [verb, complement])
        children = [verb]
        if verb_class == "T" and with_object:
            children.append(self.noun_phrase(depth, OBJECT))
        prepositional_phrases = self.pick({0: 0.65, 1: 0.30, 2: 0.05})
        children += [self.prepositional_phrase(depth + 1) for _ in range(prepositional_phrases)]
        return Tree("VP", children)

    def prepositional_phrase(self, depth: int) -> Tree:
        preposition = _preterminal("IN", self.rng.choice(list(POSTPOSITIONS)))
        return Tree("PP", [preposition, self.noun_phrase(depth, OBJECT)])

    def relative_clause(self, depth: int, head_number: str) -> Tree:
        relativizer = Tree("WHNP", [_preterminal("WDT", self.rng.choice(list(RELATIVIZERS)))])
        if self.rng.random() < 0.7:
            clause = Tree("S", [self.verb_phrase(depth, head_number)])
        else:
            subject = self.noun_phrase(depth, SUBJECT)
            clause = Tree("S", [subject, self.verb_phrase(depth, noun_phrase_number(subject), with_object=False)])
        return Tree("SBAR", [relativizer, clause])


def generate_corpus(sizes: dict[str, int], seed: int, max_tokens: int = MAX_TOKENS) -> dict[str, list[Tree]]:
    """``sizes`` maps split name -> number of trees; source sentences are distinct within and across splits and
    have MIN_TOKENS..``max_tokens`` tokens.

    Raises ValueError when repeats outnumber the sentences asked for: the grammar cannot give that many.
    """
    generator = _Generator(random.Random(seed))
    seen: set[str] = set()
    repeats_allowed = max(1000, sum(sizes.values()))
    corpus: dict[str, list[Tree]] = {}
    for split, size in sizes.items():
        trees: list[Tree] = []
        while len(trees) < size:
            tree = generator.sentence()
            words = tree.leaves()
            if not MIN_TOKENS <= len(words) <= max_tokens:
                continue
            sentence = " ".join(words)
            if sentence in seen:
                repeats_allowed -= 1
                if repeats_allowed < 0:
                    raise ValueError(f"could not draw {size} distinct sentences for {split!r}: the grammar ran dry")
                continue
            seen.add(sentence)
            trees.append(tree)
        corpus[split] = trees
    return corpus


def write_corpus(corpus: dict[str, list[Tree]], out_dir: str, seed: int) -> None:
    """The files of the module docstring, the dependency noise drawn by ``dependency_rng(seed, split)``."""
    os.makedirs(out_dir, exist_ok=True)
    for split, trees in corpus.items():
        rng = dependency_rng(seed, split)
        with open(os.path.join(out_dir, f"{split}.en"), "w", encoding="utf-8") as source, \
                open(os.path.join(out_dir, f"{split}.de"), "w", encoding="utf-8") as target, \
                open(os.path.join(out_dir, f"{split}.tree"), "w", encoding="utf-8") as bracketed, \
                open(os.path.join(out_dir, f"{split}.{ARCS_SUFFIX}"), "w", encoding="utf-8") as arcs:
            for tree in trees:
                words = tree.leaves()
                source.write(" ".join(words) + "\n")
                target.write(" ".join(translate(tree)) + "\n")
                bracketed.write(to_bracketed(tree) + "\n")
                record = noisy_arcs(words, gold_dependencies(tree), rng)
                arcs.write(json.dumps(record, ensure_ascii=False) + "\n")


#: what the parse archive names as the parsers of its parses (a name, not a model file: no parser made them)
GOLD_PARSERS = {"constituency": "gold trees (examples/demo/make_data.py)",
                "dependency": "gold dependencies with noisy distributions (examples/demo/make_data.py)"}


def write_archive(out_dir: str, archive_dir: str, splits: list[str]) -> None:
    """Pack the gold parses in ``out_dir`` into the parse archive ``archive_dir`` (imports the package only then)."""
    import contextlib
    import gzip
    import io
    import tempfile

    from fairseq_syntax.parsing import archive
    from fairseq_syntax.parsing.dependency import conllu_of_record

    with tempfile.TemporaryDirectory() as tok:
        for split in splits:
            for suffix in ("en", "tree"):
                os.symlink(os.path.abspath(os.path.join(out_dir, f"{split}.{suffix}")),
                           os.path.join(tok, f"{split}.{suffix}"))
            with open(os.path.join(out_dir, f"{split}.{ARCS_SUFFIX}"), encoding="utf-8") as source:
                records = source.read()
            with gzip.open(os.path.join(tok, f"{split}.{ARCS_SUFFIX}.gz"), "wt", encoding="utf-8") as arcs:
                arcs.write(records)
            with open(os.path.join(tok, f"{split}.conllu"), "w", encoding="utf-8") as conllu:
                conllu.write("".join(conllu_of_record(json.loads(line), number)
                                     for number, line in enumerate(records.splitlines(), 1)))
        with contextlib.redirect_stderr(io.StringIO()):  # its progress lines name the temporary folder
            archive.pack(tok, archive_dir, "en", splits, GOLD_PARSERS, os.path.join(tok, "no-parser-records"))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--train", type=int, default=8000, help="training sentences")
    parser.add_argument("--valid", type=int, default=500, help="validation sentences")
    parser.add_argument("--test", type=int, default=500, help="test sentences")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=MAX_TOKENS,
                        help=f"longest source sentence, final '.' included (default {MAX_TOKENS})")
    parser.add_argument("--archive", help="also pack the gold parses into this parse archive folder (a study's "
                        "parses.archive)")
    args = parser.parse_args(argv)
    if args.max_tokens < MIN_TOKENS:
        parser.error(f"--max-tokens must be >= {MIN_TOKENS}")
    sizes = {"train": args.train, "valid": args.valid, "test": args.test}
    for split, size in sizes.items():
        if size < 0:
            parser.error(f"--{split} must be >= 0, got {size}")
    corpus = generate_corpus(sizes, args.seed, args.max_tokens)
    write_corpus(corpus, args.out, args.seed)
    for split, trees in corpus.items():
        lengths = [len(tree.leaves()) for tree in trees]
        mean = sum(lengths) / max(len(lengths), 1)
        print(f"{split}: {len(trees)} sentences, {mean:.1f} source tokens on average, written to {args.out}")
    if args.archive:
        write_archive(args.out, args.archive, list(sizes))
        print(f"the gold parses of {', '.join(sizes)}: parse archive {args.archive}")


if __name__ == "__main__":
    main(sys.argv[1:])
