"""The answer of a seeds table, generated: does each method beat Sequence, and does it beat itself on control trees?

A study of several seeds (``examples/multi30k/README.md``, "The study") asks two questions of each method: does it
translate better than Sequence (the words only), and is it the parse that helps, i.e. does it beat the same
method trained on control structures (``X_random``, ``X_struct``: :mod:`fairseq_syntax.core.control_kinds`)? This
module states the answer from the run records, by a rule fixed before the study's results were seen, so that
``RESULTS.md`` never says more or less than the p-values do:

* a comparison is **better** when BLEU and chrF both lie above the other system's with p < :data:`ALPHA` each
  (the seed-aware paired bootstrap of ``scoring.seed_bootstrap``, two-sided), **worse** when both lie below with
  p < ALPHA, **no measurable difference** when neither p is below ALPHA, and **mixed** otherwise (the two metrics
  disagree); the p-values are not corrected for the table's several comparisons, which the text says;
* added after the study's first answer (issue 49), not changing the rule: a verdict is **borderline** when one of
  its p-values lies within two Monte-Carlo standard errors of ALPHA (:func:`is_borderline`): another draw of the
  bootstrap's rounds could put it on the other side; Welch's t-test over the per-seed scores is shown beside each p
  and is not part of the rule;
* a comparison is made only once both systems are scored over their seeds (``SeedSystem.over_seeds``); until
  then the system is listed as waiting, with its seeds done. A system of the study with fewer seeds than the study
  gives it (:func:`fairseq_syntax.methods.study_seeds`) makes the answer one "so far".

``study_answer(systems)`` returns the section's Markdown lines (the paragraph and a table of every comparison) and
its JSON (``{"alpha", "rule", "test", "systems", "controls", "planned_seeds", "no_run_finished", "complete",
"paragraph"}``, each method with its comparisons' deltas, 95% intervals, p-values, Monte-Carlo errors, Welch tests
and verdicts, each control with its comparison against Sequence).

``readme_block(results, results_md)`` is the same answer for the project's README, from RESULTS.json: the runs
finished, one compact row per system (mean ± sd, and each comparison as "delta (p ± error, t p) / ...: verdict"),
and the paragraph. ``python -m fairseq_syntax.evaluation.study_answer --readme README.md RESULTS.json`` rewrites it
between the README's markers (:data:`README_BEGIN`, :data:`README_END`); the study's lanes do so with each commit.
"""
import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairseq_syntax.core.control_kinds import CONTROLS
from fairseq_syntax.evaluation.seed_systems import (
    SEEDS_METRICS,
    SEQUENCE,
    SeedSystem,
    control_parts,
    probability_text,
    seeds_dataset,
)
from fairseq_syntax.evaluation.tables import load_results_json, markdown_table

ALPHA = 0.05
#: a p within this many Monte-Carlo standard errors of ALPHA makes its verdict borderline
BORDERLINE_ERRORS = 2
RULE = (f"better (worse): BLEU and chrF both higher (lower) with p < {ALPHA} each; no measurable difference: "
        f"neither p below {ALPHA}; mixed: the metrics disagree; borderline: a p within {BORDERLINE_ERRORS} "
        f"Monte-Carlo standard errors of {ALPHA}, whose side of {ALPHA} another draw of the rounds could change.")
#: how the answer names each control's trees
CONTROL_WORDS = {"random": "random trees", "struct": "random trees with the parse's phrase count and labels",
                 "left": "left-branching trees", "right": "right-branching trees"}


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


def is_borderline(p_value: float, mc_error: float | None, alpha: float = ALPHA) -> bool:
    """Whether ``p_value`` lies within :data:`BORDERLINE_ERRORS` Monte-Carlo standard errors of ``alpha`` (never,
    for a p without one)."""
    return mc_error is not None and abs(p_value - alpha) <= BORDERLINE_ERRORS * mc_error


def comparison(system: SeedSystem, other: SeedSystem) -> dict[str, Any] | None:
    """``system`` against ``other``: per metric the difference of their means over seeds (system minus other), its
    95% interval over the bootstrap rounds where recorded, p with its Monte-Carlo error, Welch's test (its t with
    the sign of system minus other) and whether p is borderline; the seeds of each, the verdict and whether it is
    borderline. None until both are scored over their seeds and the test is recorded."""
    if system.over_seeds is None or other.over_seeds is None:
        return None
    found = system.test_against(other)
    if found is None:
        return None
    report, sign = found
    metrics = {}
    for metric in SEEDS_METRICS:
        mine, theirs = system.mean_sd(metric), other.mean_sd(metric)
        if metric not in report or mine is None or theirs is None:
            return None
        tested = report[metric]
        interval = tested.get("delta_ci")
        welch = tested.get("welch")
        if welch and welch.get("t") is not None:
            welch = {**welch, "t": sign * welch["t"]}
        metrics[metric] = {"delta": mine[0] - theirs[0], "p_value": tested["p_value"],
                           "p_mc_se": tested.get("p_mc_se"), "welch": welch,
                           "delta_ci": sorted(sign * bound for bound in interval) if interval else None,
                           "borderline": is_borderline(tested["p_value"], tested.get("p_mc_se"))}
    return {"against": other.name, "seeds": [len(system.seeds), len(other.seeds)], **metrics,
            "verdict": verdict({m: v["delta"] for m, v in metrics.items()},
                               {m: v["p_value"] for m, v in metrics.items()}),
            "borderline": any(metrics[m]["borderline"] for m in SEEDS_METRICS)}


def verdict_text(found: dict) -> str:
    return found["verdict"] + (" (borderline)" if found.get("borderline") else "")


def p_text(value: dict) -> str:
    """``p 0.041±0.002, t 0.059`` of one metric of a comparison (the parts it has)."""
    text = f"p {probability_text(value['p_value'])}"
    if value.get("p_mc_se") is not None:
        text += f"±{probability_text(value['p_mc_se'])}"
    if (value.get("welch") or {}).get("p_value") is not None:
        text += f", t {probability_text(value['welch']['p_value'])}"
    return text


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def expected_systems(names: Sequence[str]) -> list[str]:
    """The study's grid (:data:`fairseq_syntax.methods.STUDY`) when ``names`` are all of it (the table is the
    study's, so the systems it lacks have no run finished yet), else nothing: another seeds table has no fixed grid."""
    from fairseq_syntax.methods import STUDY

    return list(STUDY) if set(names) <= set(STUDY) else []


def planned_seeds(names: Sequence[str], expected: Sequence[str]) -> dict[str, int]:
    """How many seeds each system of a study table gets (:func:`fairseq_syntax.methods.study_seeds`); empty for
    another seeds table (no plan: each row is complete with the seeds it has)."""
    if not expected:
        return {}
    from fairseq_syntax.methods import study_seeds

    return {name: study_seeds(name) for name in dict.fromkeys([*expected, *names])}


def _controls_of(name: str, by_name: dict, expected: Sequence[str]) -> list[tuple[str, str]]:
    """(control system, control) of each control of method ``name`` the table has or the study expects."""
    return [(f"{name}_{control}", control) for control in CONTROLS
            if f"{name}_{control}" in by_name or f"{name}_{control}" in expected]


def _test_text(systems: Sequence[SeedSystem]) -> str:
    """The test the answer's p-values come from: its rounds, from the records (several settings: each named)."""
    rounds = sorted({report.get("n_samples") for system in systems if system.over_seeds
                     for report in system.over_seeds.get("significance", {}).values() if report.get("n_samples")})
    shown = " / ".join(f"{count:,}" for count in rounds) or "?"
    return (f"Test: two-sided seed-aware paired bootstrap ({shown} rounds; each p ± its Monte-Carlo standard error), "
            "with Welch's t-test over the seeds' scores beside it; not corrected for the table's several comparisons.")


def _comparison_rows(entries: list[dict], controls: list[dict]) -> list[list[str]]:
    rows = []

    def add(name: str, found: dict | None) -> None:
        if not found:
            return
        cells = [name, found["against"], " vs ".join(map(str, found["seeds"]))]
        for metric in SEEDS_METRICS:
            value = found[metric]
            interval = value["delta_ci"]
            spread = f" ({interval[0]:+.2f} to {interval[1]:+.2f})" if interval else ""
            cells += [f"{value['delta']:+.2f}{spread}", p_text(value)[2:]]
        rows.append(cells + [verdict_text(found)])

    for entry in entries:
        add(entry["system"], entry["vs_sequence"])
        for control in entry["controls"]:
            add(entry["system"], control["comparison"])
    for control in controls:
        add(control["system"], control["vs_sequence"])
    return rows


def study_answer(systems: Sequence[SeedSystem], expected: Sequence[str] = ()) -> tuple[list[str], dict[str, Any]]:
    """The "Answer so far" section of a seeds table (``systems`` in table order) and its JSON; "Answer" once it is
    complete (every method compared with Sequence and its controls, no system of ``expected`` missing or short of
    its planned seeds). ``expected``: the systems the study will have (those not among ``systems``: no run finished
    yet)."""
    by_name = {system.name: system for system in systems}
    baseline = by_name.get(SEQUENCE)
    plan = planned_seeds(list(by_name), expected)
    methods = [system for system in systems if system.name != SEQUENCE and not (
        control_parts(system.name) and control_parts(system.name)[0] in by_name)]
    entries = []
    for system in methods:
        entries.append({"system": system.name, "seeds": system.seeds,
                        "vs_sequence": comparison(system, baseline) if baseline else None,
                        "controls": [{"control": control, "structure": kind,
                                      "comparison": comparison(system, by_name[control])
                                      if control in by_name else None}
                                     for control, kind in _controls_of(system.name, by_name, expected)]})

    # each control against Sequence too (the README's rows; the paragraph weighs the methods only)
    method_names = {system.name for system in methods}
    controls = [{"system": system.name, "vs_sequence": comparison(system, baseline) if baseline else None}
                for system in systems if system.name not in method_names and system.name != SEQUENCE]
    answered = [entry for entry in entries if entry["vs_sequence"]]
    # a method not compared with Sequence yet, and a control with runs that its method is not compared with yet
    waiting = [entry["system"] for entry in entries if not entry["vs_sequence"]] + [
        control["control"] for entry in entries for control in entry["controls"]
        if control["control"] in by_name and not control["comparison"]]
    no_run_finished = [name for name in expected if name not in by_name]
    trained = {system.name: sorted(set(system.seeds) | set(system.unscored_seeds)) for system in systems}
    short = [f"{name} ({len(seeds)} of {plan[name]})" for name, seeds in trained.items()
             if name in plan and len(seeds) < plan[name]]
    unscored = [f"{system.name} ({', '.join(map(str, system.unscored_seeds))})" for system in systems
                if system.unscored_seeds]
    total = len(entries) + len([name for name in no_run_finished
                                if name != SEQUENCE and not control_parts(name)])

    def names_with(group: list[tuple[str, dict]], wanted: str) -> str:
        return _names([name + (" (borderline)" if found.get("borderline") else "")
                       for name, found in group if found["verdict"] == wanted])

    def verdicts(group: list[tuple[str, dict]], labels: dict[str, str]) -> str:
        return "; ".join(f"{label}: {names_with(group, wanted)}" for wanted, label in labels.items())

    if baseline is None or baseline.over_seeds is None:
        done = len(baseline.runs) if baseline else 0
        paragraph = (f"No answer yet: {SEQUENCE}, the baseline every method is tested against, is not scored over "
                     f"its seeds ({done} trained).")
    else:
        mean, sd = baseline.mean_sd(SEEDS_METRICS[0])
        paragraph = (f"{len(answered)} of {total} methods scored over their seeds, against {SEQUENCE} at "
                     f"{mean:.2f} ± {sd:.2f} {SEEDS_METRICS[0]} ({len(baseline.seeds)} seeds).")
        if answered:
            paragraph += " Against the words alone: " + verdicts(
                [(entry["system"], entry["vs_sequence"]) for entry in answered],
                {"better": "better", "no measurable difference": "no measurable difference", "worse": "worse",
                 "mixed": "mixed"}) + "."
        for kind in CONTROLS:
            group = [(entry["system"], control["comparison"]) for entry in entries for control in entry["controls"]
                     if control["structure"] == kind and control["comparison"]]
            if group:
                words = CONTROL_WORDS[kind]
                paragraph += (" Is it the parse?" if "Is it the parse?" not in paragraph else "") + (
                    f" Against the same method on {words} ({kind}): " + verdicts(group, {
                        "better": "the parse is better", "no measurable difference": f"{words} do as well",
                        "worse": f"{words} do better", "mixed": "mixed"}) + ".")
    pending = [f"{label}: {_names(names)}" for label, names in (
        ("waiting for their seeds", waiting), ("no run finished yet", no_run_finished),
        ("seeds trained but not yet scored over", unscored), ("more seeds to come", short)) if names]
    if pending:
        listed = "; ".join(pending)
        paragraph += f" {listed[0].upper()}{listed[1:]}."  # not str.capitalize: it would lower a system's capitals
    test = _test_text(systems)
    paragraph += f" Rule: {RULE} {test}"
    complete = baseline is not None and baseline.over_seeds is not None and not pending
    section = ["### Answer" if complete else "### Answer so far", "", paragraph, ""]
    rows = _comparison_rows(entries, controls)
    if rows:
        header = ["System", "Against", "Seeds"] + [f"{m}: {part}" for m in SEEDS_METRICS
                                                   for part in ("Δ (95% interval)", "p ± error (t)")] + ["Verdict"]
        section += markdown_table(header, rows) + [""]
    return section, {"alpha": ALPHA, "rule": RULE, "test": test, "systems": entries, "controls": controls,
                     "planned_seeds": plan, "runs_finished": sum(len(seeds) for seeds in trained.values()),
                     "no_run_finished": no_run_finished, "complete": complete, "paragraph": paragraph}


README_BEGIN = "<!-- study answer: generated by `python -m fairseq_syntax.evaluation.study_answer --readme README.md"
README_END = "<!-- end of the generated study answer -->"


def _readme_comparison(found: dict | None) -> str:
    """"+0.33 (p 0.535±0.005, t 0.61) / +0.71 (p 0.120±0.003, t 0.2): verdict" of a comparison of the answer's JSON
    (:func:`comparison`); "–" while there is none (a system not yet scored over its seeds, or the one it is tested
    against not yet)."""
    if not found:
        return "–"
    parts = " / ".join(f"{found[metric]['delta']:+.2f} ({p_text(found[metric])})" for metric in SEEDS_METRICS)
    return f"{parts}: {verdict_text(found)}"


def readme_block(results: dict[str, Any], results_md: str, dataset: str | None = None) -> list[str]:
    """The README's lines between its markers (markers included) for the seeds table of ``results`` (RESULTS.json's
    object; ``dataset``: whose table, default the first of several seeds): how many of the study's runs are
    finished, one row per system with its comparisons as the answer states them (difference of the means, p with
    its Monte-Carlo error and Welch's p, verdict), and the answer's paragraph. ``results_md``: the table's path as the
    README names it."""
    dataset, entry = seeds_dataset(results, dataset)
    if not isinstance(entry.get("answer"), dict) or "runs_finished" not in entry["answer"]:
        raise ValueError(f"no answer for dataset {dataset!r} (written by fairseq-syntax-results of this version)")
    answer, rows = entry["answer"], entry["table"]["rows"]
    plan = answer["planned_seeds"]
    methods = {found["system"]: found for found in answer["systems"]}
    controls = {found["system"]: found for found in answer.get("controls", [])}
    runs = answer["runs_finished"]  # this table's runs, scored over their seeds or not yet
    finished = (f"{runs} of the study's {sum(plan.values())} runs" if plan
                else f"{runs} run{'' if runs == 1 else 's'}")
    json_path = str(Path(results_md).with_suffix(".json"))
    lines = [f"{README_BEGIN} {json_path}` from the study's table; tests/core/test_results.py checks it -->",
             f"**The answer{'' if answer.get('complete') else ' so far'}**, {finished} finished "
             f"({dataset}; the table, its commands and each run's convergence: `{results_md}`): {answer['paragraph']}",
             "", f"| System | Structure read | Seeds | {' | '.join(SEEDS_METRICS)} | against {SEQUENCE}: "
                 f"{' / '.join(SEEDS_METRICS)} | against its controls: {' / '.join(SEEDS_METRICS)} |",
             "|" + "---|" * (5 + len(SEEDS_METRICS))]
    for row in rows:
        metrics = [f"{cell['mean']:.2f} ± {cell['sd']:.2f}" if (cell := row[f"{m} (mean ± sd)"]) else "–"
                   for m in SEEDS_METRICS]
        name = row["System"]
        found = methods.get(name) or controls.get(name) or {}
        versus_controls = "; ".join(f"{control['control']}: {_readme_comparison(control['comparison'])}"
                                    for control in found.get("controls", [])) or "–"
        seeds = len(row["Seeds"] or ())
        lines.append(" | ".join([
            f"| {name}", row["Structure read"], f"{seeds} of {plan[name]}" if name in plan else str(seeds),
            *metrics, _readme_comparison(found.get("vs_sequence")), versus_controls]) + " |")
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
