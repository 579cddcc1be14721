"""Runaway hypotheses: translations that loop until the decoder's length cap, what they cost in BLEU, and whether the
same sentences run away in every seed (the model) or in one (chance).

A hypothesis **runs away** when it has more than ``factor`` times its reference's words plus ``slack``
(:func:`runaway_ids`; default 2 x + 5). Its **cost** (:func:`runaway_cost`) is the corpus BLEU gained when each
runaway is cut to its reference's length in words (its first words), with the length ratio before and after.
:func:`overlap`: two runs of r1 and r2 runaways among n sentences share r1 r2 / n on average when independent; many
more says the same inputs loop again. Inputs are detokenized hypotheses and raw references, as the scorer reads them."""
from __future__ import annotations

import itertools
import statistics
from collections.abc import Mapping, Sequence

from sacrebleu.metrics import BLEU

DEFAULT_FACTOR = 2.0
DEFAULT_SLACK = 5


def runaway_ids(hyps: Sequence[str], refs: Sequence[str], factor: float = DEFAULT_FACTOR,
                slack: int = DEFAULT_SLACK) -> list[int]:
    """The ids of the runaway hypotheses (module docstring)."""
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses for {len(refs)} references")
    return [index for index, (hyp, ref) in enumerate(zip(hyps, refs))
            if len(hyp.split()) > factor * len(ref.split()) + slack]


def _bleu(hyps: Sequence[str], refs: Sequence[str]) -> tuple[float, float]:
    # force: a study of tokenized text compares tokens on purpose (sacreBLEU would warn of them on every call)
    score = BLEU(force=True).corpus_score(list(hyps), [list(refs)])
    return score.score, score.sys_len / score.ref_len if score.ref_len else 0.0


def runaway_cost(hyps: Sequence[str], refs: Sequence[str], factor: float = DEFAULT_FACTOR,
                 slack: int = DEFAULT_SLACK) -> dict:
    """A run's runaways, their count and extra words, and their cost (module docstring)."""
    ids = runaway_ids(hyps, refs, factor, slack)
    cut = list(hyps)
    for index in ids:
        cut[index] = " ".join(hyps[index].split()[:len(refs[index].split())])
    bleu, ratio = _bleu(hyps, refs)
    bleu_cut, ratio_cut = _bleu(cut, refs)
    extra_words = sum(len(hyps[index].split()) - len(refs[index].split()) for index in ids)
    return {"ids": ids, "count": len(ids), "extra_words": extra_words, "BLEU": bleu, "length_ratio": ratio,
            "BLEU_cut": bleu_cut, "length_ratio_cut": ratio_cut, "cost": bleu_cut - bleu}


#: a run's numbers as RESULTS.json lists them (its ``runaway_hypotheses``: the names once, each run a list)
RUN_COLUMNS = ("count", "extra_words", "BLEU", "length_ratio", "BLEU_cut", "length_ratio_cut", "cost")


def runs_json(costs: Mapping[str, Mapping[int, dict]]) -> dict:
    """:func:`runaway_cost` of each system's runs (by seed) as RESULTS.json holds them: ``columns``
    (:data:`RUN_COLUMNS`), each run's numbers under ``runs`` and its runaways' ids under ``ids``, by system and
    seed."""
    return {"columns": list(RUN_COLUMNS),
            "runs": {system: {str(seed): [found[column] for column in RUN_COLUMNS] for seed, found in runs.items()}
                     for system, runs in costs.items()},
            "ids": {system: {str(seed): found["ids"] for seed, found in runs.items()}
                    for system, runs in costs.items()}}


def system_runs(info: dict, system: str) -> dict[str, dict]:
    """A system's runs of RESULTS.json's ``runaway_hypotheses`` (:func:`runs_json`), by seed, each as
    :func:`runaway_cost` gives it."""
    return {seed: dict(zip(info["columns"], values), ids=info["ids"][system][seed])
            for seed, values in info["runs"][system].items()}


def overlap(runaways: Mapping[str, Sequence[int]], sentences: int) -> list[dict]:
    """For each pair of runs: the runaway sentences they share, and how many independent runs would (module
    docstring)."""
    pairs = []
    for (name_a, ids_a), (name_b, ids_b) in itertools.combinations(runaways.items(), 2):
        shared = sorted(set(ids_a) & set(ids_b))
        pairs.append({"runs": (name_a, name_b), "shared": shared,
                      "expected_by_chance": len(ids_a) * len(ids_b) / sentences})
    return pairs


def source_lengths(ids: Sequence[int], sources: Sequence[str]) -> dict:
    """The source lengths (words) of the sentences ``ids`` against all sentences': means, and the share of the
    sentences above the median length."""
    lengths = [len(line.split()) for line in sources]
    median = statistics.median(lengths)
    chosen = [lengths[index] for index in ids]
    return {"mean_all": statistics.fmean(lengths), "mean_runaway": statistics.fmean(chosen) if chosen else None,
            "median_all": median,
            "above_median_runaway": sum(length > median for length in chosen) / len(chosen) if chosen else None}


def source_lengths_text(lengths: dict) -> str:
    """The sentence that reads :func:`source_lengths` of the runaway sentences."""
    return (f"Their sources average {lengths['mean_runaway']:.1f} words against {lengths['mean_all']:.1f} for all "
            f"test sentences; {lengths['above_median_runaway']:.0%} are longer than the median "
            f"({lengths['median_all']:g} words).")
