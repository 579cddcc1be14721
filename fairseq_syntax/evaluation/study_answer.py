"""The answer of a seeds table, generated: does each method beat Sequence, and does it beat itself on random trees?

A study of several seeds (``examples/multi30k/README.md``, "The study") asks two questions of each method: does it
translate better than Sequence (the words only), and is it the parse that helps, i.e. does it beat the same
method trained on control structures (``X_random``, :mod:`fairseq_syntax.core.controls`)? This module states the
answer from the run records, by a rule fixed before the study's results were seen, so that ``RESULTS.md`` never
says more or less than the p-values do:

* a comparison is **better** when BLEU and chrF both lie above the other system's with p < :data:`ALPHA` each
  (the seed-aware paired bootstrap of ``scoring.seed_bootstrap``, two-sided), **worse** when both lie below with
  p < ALPHA, **no measurable difference** when neither p is below ALPHA, and **mixed** otherwise (the two metrics
  disagree); the p-values are not corrected for the table's several comparisons, which the text says;
* a comparison is made only once both systems are scored over their seeds (``SeedSystem.over_seeds``); until
  then the system is listed as waiting, with its seeds done.

``study_answer(systems)`` returns the section's Markdown lines and its JSON (``{"alpha", "rule", "systems",
"controls", "no_run_finished", "complete", "paragraph"}``, each method with its comparisons' deltas, 95% intervals,
p-values and verdicts, each control with its comparison against Sequence).

``readme_block(results, results_md)`` is the same answer for the project's README, from RESULTS.json: the runs
finished, one compact row per system (mean ± sd, and each comparison as "delta (p) / delta (p): verdict"), and the
paragraph. ``python -m fairseq_syntax.evaluation.study_answer --readme README.md RESULTS.json`` rewrites it between
the README's markers (:data:`README_BEGIN`, :data:`README_END`); the study's lanes do so with each commit.
"""
import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairseq_syntax.evaluation.results import (
    CONTROL_SUFFIX, SEEDS_METRICS, SEQUENCE, SeedSystem, load_results_json)

ALPHA = 0.05
RULE = (f"better (worse): BLEU and chrF both higher (lower) with p < {ALPHA} each; no measurable difference: "
        f"neither p below {ALPHA}; mixed: the metrics disagree. Two-sided seed-aware paired bootstrap, not corrected "
        "for the table's several comparisons.")


def verdict(deltas: dict[str, float], p_values: dict[str, float], alpha: float = ALPHA) -> str:
    """The rule of the module docstring over the metrics of ``deltas`` (system minus the one it is tested against)
    and their two-sided ``p_values``."""
    significant = {metric: p_values[metric] < alpha for metric in deltas}
    if not any(significant.values()):
        return "no measurable difference"
    if all(significant.values()):
        if all(delta > 0 for delta in deltas.values()):
            return "better"
        if all(delta < 0 for delta in deltas.values()):
            return "worse"
    return "mixed"


def _report(system: SeedSystem, other: SeedSystem) -> tuple[dict, int] | None:
    """The test of ``system`` against ``other`` from whichever of the two records holds it, with the sign that
    turns its deltas into ``system`` minus ``other`` (a test is stored once, in the record scored second)."""
    if system.p_values(other.name):
        return system.p_values(other.name), 1
    if other.p_values(system.name):
        return other.p_values(system.name), -1
    return None


def comparison(system: SeedSystem, other: SeedSystem) -> dict[str, Any] | None:
    """``system`` against ``other``: per metric the difference of their means over seeds (system minus other), its
    95% interval over the bootstrap rounds where recorded, and p; and the verdict. None until both are scored
    over their seeds and the test is recorded."""
    if system.over_seeds is None or other.over_seeds is None:
        return None
    found = _report(system, other)
    if found is None:
        return None
    report, sign = found
    metrics = {}
    for metric in SEEDS_METRICS:
        mine, theirs = system.mean_sd(metric), other.mean_sd(metric)
        if metric not in report or mine is None or theirs is None:
            return None
        interval = report[metric].get("delta_ci")
        metrics[metric] = {"delta": mine[0] - theirs[0], "p_value": report[metric]["p_value"],
                           "delta_ci": sorted(sign * bound for bound in interval) if interval else None}
    return {"against": other.name, **metrics,
            "verdict": verdict({m: v["delta"] for m, v in metrics.items()},
                               {m: v["p_value"] for m, v in metrics.items()})}


def _comparison_text(found: dict) -> str:
    parts = []
    for metric in SEEDS_METRICS:
        value = found[metric]
        interval = value["delta_ci"]
        spread = f", 95% interval {interval[0]:+.2f} to {interval[1]:+.2f}" if interval else ""
        parts.append(f"{value['delta']:+.2f} {metric} (p {value['p_value']:.3f}{spread})")
    return f"{'; '.join(parts)}: {found['verdict']}"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def expected_systems(names: Sequence[str]) -> list[str]:
    """The study's grid (:data:`fairseq_syntax.methods.STUDY`) when ``names`` are all of it (the table is the
    study's, so the systems it lacks have no run finished yet), else nothing: another seeds table has no fixed grid."""
    from fairseq_syntax.methods import STUDY

    return list(STUDY) if set(names) <= set(STUDY) else []


def study_answer(systems: Sequence[SeedSystem], expected: Sequence[str] = (),
                 seeds: int = 3) -> tuple[list[str], dict[str, Any]]:
    """The "Answer so far" section of a seeds table (``systems`` in table order) and its JSON; "Answer" once it is
    complete (every method compared with Sequence, no system of ``expected`` missing). ``expected``: the systems
    the study will have (those not among ``systems``: no run finished yet); ``seeds``: the seeds each system gets."""
    by_name = {system.name: system for system in systems}
    baseline = by_name.get(SEQUENCE)
    methods = [system for system in systems if system.name != SEQUENCE and not (
        system.name.endswith(CONTROL_SUFFIX) and system.name[:-len(CONTROL_SUFFIX)] in by_name)]
    entries, lines = [], []
    for system in methods:
        control_name = system.name + CONTROL_SUFFIX
        control = by_name.get(control_name)
        versus_sequence = comparison(system, baseline) if baseline else None
        versus_control = comparison(system, control) if control else None
        entry = {"system": system.name, "seeds": system.seeds, "vs_sequence": versus_sequence,
                 "control": control_name if control or control_name in expected else None,
                 "vs_control": versus_control}
        entries.append(entry)
        text = f"- **{system.name}**: "
        if versus_sequence is None:
            text += f"waiting ({len(system.runs)} of {seeds} seeds trained, not yet scored over its seeds)"
        else:
            text += f"against {SEQUENCE}, {_comparison_text(versus_sequence)}"
        if entry["control"] is None:
            text += "; no control in the study"
        elif versus_control is not None:
            text += f"; against {control_name}, {_comparison_text(versus_control)}"
        else:
            done = len(control.runs) if control else 0
            text += f"; its control {control_name}: waiting ({done} of {seeds} seeds trained)"
        lines.append(text + ".")

    # each control against Sequence too (the README's rows; the paragraph weighs the methods only)
    controls = [{"system": system.name, "vs_sequence": comparison(system, baseline) if baseline else None}
                for system in systems if system.name.endswith(CONTROL_SUFFIX) and system not in methods]
    answered = [entry for entry in entries if entry["vs_sequence"]]
    controlled = [entry for entry in entries if entry["vs_control"]]
    # a method not compared with Sequence yet, and a control with runs that its method is not compared with yet
    waiting = [entry["system"] for entry in entries if not entry["vs_sequence"]] + [
        entry["control"] for entry in entries if entry["control"] in by_name and not entry["vs_control"]]
    no_run_finished = [name for name in expected if name not in by_name]
    total = len(entries) + len([name for name in no_run_finished
                                if name != SEQUENCE and not name.endswith(CONTROL_SUFFIX)])

    def verdicts(group: list[dict], key: str, labels: dict[str, str]) -> str:
        return "; ".join(f"{label}: {_names([e['system'] for e in group if e[key]['verdict'] == wanted])}"
                         for wanted, label in labels.items())

    if baseline is None or baseline.over_seeds is None:
        done = len(baseline.runs) if baseline else 0
        paragraph = (f"No answer yet: {SEQUENCE}, the baseline every method is tested against, is not scored over "
                     f"its seeds ({done} of {seeds} trained).")
    else:
        mean, sd = baseline.mean_sd(SEEDS_METRICS[0])
        paragraph = (f"{len(answered)} of {total} methods scored over their seeds, against {SEQUENCE} at "
                     f"{mean:.2f} ± {sd:.2f} {SEEDS_METRICS[0]}.")
        if answered:
            paragraph += " Against the words alone: " + verdicts(answered, "vs_sequence", {
                "better": "better", "no measurable difference": "no measurable difference", "worse": "worse",
                "mixed": "mixed"}) + "."
        if controlled:
            paragraph += " Is it the parse? Against the same method on random trees: " + verdicts(
                controlled, "vs_control", {"better": "the parse is better", "no measurable difference":
                                           "random trees do as well", "worse": "random trees do better",
                                           "mixed": "mixed"}) + "."
    pending = [f"{label}: {_names(names)}" for label, names in (
        ("waiting for their seeds", waiting), ("no run finished yet", no_run_finished)) if names]
    if pending:
        listed = "; ".join(pending)
        paragraph += f" {listed[0].upper()}{listed[1:]}."  # not str.capitalize: it would lower a system's capitals
    paragraph += f" Rule: {RULE}"
    complete = baseline is not None and baseline.over_seeds is not None and not pending
    section = ["### Answer" if complete else "### Answer so far", "", paragraph, ""] + (lines + [""] if lines else [])
    return section, {"alpha": ALPHA, "rule": RULE, "systems": entries, "controls": controls,
                     "no_run_finished": no_run_finished, "complete": complete, "paragraph": paragraph}


README_BEGIN = "<!-- study answer: generated by `python -m fairseq_syntax.evaluation.study_answer --readme README.md"
README_END = "<!-- end of the generated study answer -->"


def _readme_comparison(found: dict | None) -> str:
    """"+0.33 (p 0.535) / +0.71 (p 0.120): verdict" of a comparison of the answer's JSON (:func:`comparison`); "–"
    while there is none (a system not yet scored over its seeds, or the one it is tested against not yet)."""
    if not found:
        return "–"
    parts = " / ".join(f"{found[metric]['delta']:+.2f} (p {found[metric]['p_value']:.3f})" for metric in SEEDS_METRICS)
    return f"{parts}: {found['verdict']}"


def readme_block(results: dict[str, Any], results_md: str, dataset: str | None = None, seeds: int = 3) -> list[str]:
    """The README's lines between its markers (markers included) for the seeds table of ``results`` (RESULTS.json's
    object; ``dataset``: whose table, default the first of several seeds): how many of the study's runs are
    finished, one row per system with its comparisons as the answer states them (difference of the means, p,
    verdict), and the answer's paragraph. ``results_md``: the table's path as the README names it."""
    from fairseq_syntax.evaluation.seeds_figure import seeds_dataset

    dataset, entry = seeds_dataset(results, dataset)
    if not isinstance(entry.get("answer"), dict):
        raise ValueError(f"no answer for dataset {dataset!r} (written by fairseq-syntax-results of this version)")
    answer, rows = entry["answer"], entry["table"]["rows"]
    compared = {found["system"]: found for found in answer["systems"] + answer.get("controls", [])}
    runs = sum(len(row["Seeds"] or ()) for row in rows)  # this table's runs (RESULTS.json may hold other datasets)
    expected = expected_systems([row["System"] for row in rows])
    finished = (f"{runs} of the study's {len(expected) * seeds} runs" if expected
                else f"{runs} run{'' if runs == 1 else 's'}")
    json_path = str(Path(results_md).with_suffix(".json"))
    lines = [f"{README_BEGIN} {json_path}` from the study's table; tests/core/test_results.py checks it -->",
             f"**The answer{'' if answer.get('complete') else ' so far'}**, {finished} finished "
             f"({dataset}; the table, its commands and each run's convergence: `{results_md}`): {answer['paragraph']}",
             "", f"| System | Structure read | Seeds | {' | '.join(SEEDS_METRICS)} | against {SEQUENCE}: "
                 f"{' / '.join(SEEDS_METRICS)} | against its control: {' / '.join(SEEDS_METRICS)} |",
             "|" + "---|" * (5 + len(SEEDS_METRICS))]
    for row in rows:
        metrics = [f"{cell['mean']:.2f} ± {cell['sd']:.2f}" if (cell := row[f"{m} (mean ± sd)"]) else "–"
                   for m in SEEDS_METRICS]
        found = compared.get(row["System"], {})
        control = found.get("control") if row.get("Control") else None
        lines.append(" | ".join([
            f"| {row['System']}", row["Structure read"], f"{len(row['Seeds'] or ())} of {seeds}", *metrics,
            _readme_comparison(found.get("vs_sequence")),
            f"{control}: {_readme_comparison(found.get('vs_control'))}" if control else "–"]) + " |")
    return lines + [README_END]


def replace_readme_block(text: str, block: Sequence[str], path: str = "README.md") -> str:
    """``text`` (a README) with the lines from its :data:`README_BEGIN` line to its :data:`README_END` line
    replaced by ``block``; a README without both markers, in that order, is a ValueError naming it."""
    lines = text.split("\n")
    begin = next((i for i, line in enumerate(lines) if line.startswith(README_BEGIN)), None)
    end = next((i for i, line in enumerate(lines) if line == README_END), None)
    if begin is None or end is None or end < begin:
        raise ValueError(f"{path}: no study answer to replace (a line starting {README_BEGIN!r}, then a line "
                         f"{README_END!r})")
    return "\n".join(lines[:begin] + list(block) + lines[end + 1:])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m fairseq_syntax.evaluation.study_answer",
        description="The answer of a seeds table for the README, from RESULTS.json: printed, or written into the "
                    "README between its markers (--readme).")
    parser.add_argument("results_json", help="RESULTS.json of fairseq-syntax-results (examples/multi30k/RESULTS.json)")
    parser.add_argument("--readme", help="the README whose study answer to rewrite (README.md)")
    parser.add_argument("--dataset", help="whose seeds table (default: the first of several seeds)")
    args = parser.parse_args(argv)
    try:
        results = load_results_json(args.results_json)
        # the table as the README (or, printed, the current folder) reaches it: no folder of this machine
        start = Path(args.readme).resolve().parent if args.readme else Path.cwd()
        shown = os.path.relpath(Path(args.results_json).resolve().with_suffix(".md"), start)
        try:
            block = readme_block(results, shown, args.dataset)
        except ValueError as error:
            raise ValueError(f"{args.results_json}: {error}") from error
        if not args.readme:
            print("\n".join(block))
            return 0
        readme = Path(args.readme)
        text = readme.read_text(encoding="utf-8")
        updated = replace_readme_block(text, block, args.readme)
    except (OSError, ValueError) as error:
        sys.exit(f"study_answer: error: {error}")
    if updated != text:
        readme.write_text(updated, encoding="utf-8")
    print(f"{args.readme}: study answer {'rewritten' if updated != text else 'unchanged'} from {args.results_json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
