"""Ratios from interleaved measurements, and the tables of ``bench/RESULTS.md``.

A measurement is one training process (``bench/measure.py``): ``tokens_per_s`` (target tokens per CPU second),
``wall_tokens_per_s``, ``peak_mem_mb``, and ``generate_tokens_per_s`` where decoding was measured. Within a round
a system and its baseline ran back to back on the same batches: each round gives one ratio, and the median over
rounds is reported (pairing cancels load drift; the median drops a spoiled round)."""
import re
import statistics
from typing import Dict, List, Sequence

BASELINE = "transformer"  # fairseq's arch every system is compared with
REFERENCE_FORM = "preorder"  # the longest input form: the transformer on other forms is reported against it here

#: one measurement as ``run.py`` logs it and ``from_logs.py`` reads it back; ``gen`` only where measured
PROGRESS_LINE = re.compile(r"round (?P<round>\d+)/\d+\s+(?P<words>\d+) words (?P<system>.+\))\s+(?P<option>\S+)\s+"
                           r"(?P<tokens>[\d.]+) tok/s\s+(?P<wall>[\d.]+) tok/wall-s\s+(?P<mem>[\d.]+) MB"
                           r"(?:\s+(?P<gen>[\d.]+) gen-tok/s)?$")


def progress_line(round_index: int, repeats: int, n_words: int, system: str, option: str, result: Dict) -> str:
    """The log line of one measurement (``round_index`` from 1); :data:`PROGRESS_LINE` parses it."""
    generate = f" {result['generate_tokens_per_s']:7.0f} gen-tok/s" if "generate_tokens_per_s" in result else ""
    return (f"round {round_index}/{repeats} {n_words:>3} words {system:<56} {option:<24} "
            f"{result['tokens_per_s']:7.0f} tok/s {result['wall_tokens_per_s']:7.0f} tok/wall-s "
            f"{result['peak_mem_mb']:6.0f} MB{generate}")

RATIO_FIELDS = {  # row field -> measurement field
    "tokens_per_s_ratio": "tokens_per_s",
    "wall_tokens_per_s_ratio": "wall_tokens_per_s",
    "peak_mem_ratio": "peak_mem_mb",
}
#: decoding speed (beam 5, as fairseq-generate): in a row only where both sides measured it
GENERATE_RATIO = ("generate_ratio", "generate_tokens_per_s")


def paired_rounds(system_runs: Sequence[dict], baseline_runs: Sequence[dict]) -> tuple[list, list]:
    """The runs of the rounds both sides were measured in (a run cut short by a time limit has a last round in
    which only some systems ran), aligned by round: each run's ``round`` (from 1), else its place in the list."""
    def by_round(runs):
        return {run.get("round", index + 1): run for index, run in enumerate(runs)}

    mine, theirs = by_round(system_runs), by_round(baseline_runs)
    rounds = sorted(set(mine) & set(theirs))
    return [mine[r] for r in rounds], [theirs[r] for r in rounds]


def median_ratio(system: Sequence[Dict], baseline: Sequence[Dict], field: str) -> float:
    """Median over rounds of ``system[r][field] / baseline[r][field]``; the two lists are aligned by round."""
    if len(system) != len(baseline) or not system:
        raise ValueError(f"need the same number (> 0) of rounds for system and baseline, got {len(system)} "
                         f"and {len(baseline)}")
    return statistics.median(s[field] / b[field] for s, b in zip(system, baseline))


def ratio_row(system_runs: Sequence[Dict], baseline_runs: Sequence[Dict], **keys) -> Dict:
    """One result row: ``keys`` (arch, src_words, ...), the median ratios, ``repeats`` and the medians of the
    absolute numbers of both sides (for reading the ratios, not for comparing across runs). Only the rounds both
    sides were measured in count (:func:`paired_rounds`)."""
    system_runs, baseline_runs = paired_rounds(system_runs, baseline_runs)
    row = dict(keys)
    for name, field in RATIO_FIELDS.items():
        row[name] = round(median_ratio(system_runs, baseline_runs, field), 3)
    name, field = GENERATE_RATIO
    if all(field in run for run in [*system_runs, *baseline_runs]):
        row[name] = round(median_ratio(system_runs, baseline_runs, field), 3)
    row["repeats"] = len(system_runs)
    for side, runs in (("", system_runs), ("baseline_", baseline_runs)):
        row[f"{side}tokens_per_s"] = round(statistics.median(m["tokens_per_s"] for m in runs), 1)
        row[f"{side}peak_mem_mb"] = round(statistics.median(m["peak_mem_mb"] for m in runs), 1)
    first = system_runs[0]
    row["source_tokens_per_sentence"] = round(first["source_tokens"] / first["sentences"], 1)
    row["sentences_per_batch"] = round(first["sentences"] / first["updates"], 1)
    return row


def markdown_table(rows: List[Dict], columns: Sequence[str]) -> List[str]:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row.get(column, "")) for column in columns) + " |")
    return lines


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.2f}" if abs(value) < 100 else f"{value:.0f}"
    return str(value)
