"""The answer of a seeds table, generated: does each method beat the baseline, and does it beat itself on controls?

Which system is the baseline and which is a control of which method is the table's
:class:`~fairseq_syntax.evaluation.comparisons.Comparisons`. The answer follows a rule fixed before the results were
seen, so that ``RESULTS.md`` says no more or less than the p-values do:

* a comparison is **better** when every metric (BLEU and chrF) lies above the other system's with p < alpha each
  (two-sided ``scoring.seed_bootstrap``), **worse** when all lie below with p < alpha, **no measurable difference**
  when no p is below alpha, and **mixed** otherwise; p-values are not corrected for multiple comparisons (the text
  says so);
* a verdict is **borderline** when a p lies within two Monte-Carlo standard errors of alpha (:func:`is_borderline`);
  Welch's t-test is shown beside each p and is not part of the rule;
* a comparison is made once both systems are scored over their seeds (``SeedSystem.over_seeds``); until then the
  system is listed as waiting. A system short of its planned seeds, or with no run yet, makes the answer "so far".

:func:`study_answer` writes the section and its JSON (the data its paragraph is written from); :func:`readme_block`
the README's verdict table from RESULTS.json, which ``fairseq-syntax-study report STUDY.toml --readme README.md``
rewrites."""
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fairseq_syntax.evaluation.comparisons import DEFAULT_ALPHA, Comparisons
from fairseq_syntax.evaluation.seed_systems import SeedSystem, format_p, probability_text, seeds_dataset, structure_read
from fairseq_syntax.evaluation.tables import markdown_table, replace_marked_block

#: a p within this many Monte-Carlo standard errors of alpha makes its verdict borderline
BORDERLINE_ERRORS = 2
#: how the answer names each control kind's structures (the kinds of fairseq_syntax.core.control_kinds.CONTROLS)
CONTROL_WORDS = {"random": "random trees", "struct": "random trees with the parse's phrase count and labels",
                 "left": "left-branching trees", "right": "right-branching trees"}


def _listed(metrics: Sequence[str]) -> str:
    """``BLEU``, ``BLEU and chrF``, ``BLEU, chrF and TER``."""
    return metrics[0] if len(metrics) == 1 else f"{', '.join(metrics[:-1])} and {metrics[-1]}"


def rule_text(comparisons: Comparisons) -> str:
    """The verdict rule of the module docstring, in words, for the metrics and alpha of ``comparisons``."""
    alpha, metrics = comparisons.alpha, comparisons.metrics
    borderline = (f"borderline: a p within {BORDERLINE_ERRORS} Monte-Carlo standard errors of {alpha}, whose side of "
                  f"{alpha} another draw of the rounds could change.")
    if len(metrics) == 1:
        return (f"better (worse): {metrics[0]} higher (lower) with p < {alpha}; no measurable difference: p not "
                f"below {alpha}; {borderline}")
    return (f"better (worse): {_listed(metrics)} {'both' if len(metrics) == 2 else 'all'} higher (lower) with "
            f"p < {alpha} each; no measurable difference: {'neither' if len(metrics) == 2 else 'no'} p below "
            f"{alpha}; mixed: the metrics disagree; {borderline}")


def verdict(deltas: dict[str, float], p_values: dict[str, float], alpha: float = DEFAULT_ALPHA) -> str:
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


def is_borderline(p_value: float, mc_error: float | None, alpha: float = DEFAULT_ALPHA) -> bool:
    """Whether ``p_value`` lies within :data:`BORDERLINE_ERRORS` Monte-Carlo standard errors of ``alpha`` (never,
    for a p without one)."""
    return mc_error is not None and abs(p_value - alpha) <= BORDERLINE_ERRORS * mc_error


def comparison(system: SeedSystem, other: SeedSystem | None, comparisons: Comparisons) -> dict[str, Any] | None:
    """``system`` against ``other``: per metric the difference of means over seeds (system minus other), its 95%
    interval where recorded, p with its Monte-Carlo error, Welch's test and whether p is borderline; the seeds of
    each, the verdict and whether it is borderline. None until both are scored over their seeds and the test is
    recorded (or without ``other``)."""
    if other is None or system.over_seeds is None or other.over_seeds is None:
        return None
    found = system.test_against(other)
    if found is None:
        return None
    report, sign = found
    metrics = {}
    alpha = comparisons.alpha
    for metric in comparisons.metrics:
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
                           "borderline": is_borderline(tested["p_value"], tested.get("p_mc_se"), alpha)}
    return {"against": other.name, "seeds": [len(system.seeds), len(other.seeds)], **metrics,
            "verdict": verdict({m: v["delta"] for m, v in metrics.items()},
                               {m: v["p_value"] for m, v in metrics.items()}, alpha),
            "borderline": any(value["borderline"] for value in metrics.values())}


def verdict_text(found: dict, bold: bool = False) -> str:
    """A comparison's verdict (``bold``: a finding, better or worse, in bold) and whether it is borderline."""
    word = f"**{found['verdict']}**" if bold and found["verdict"] in ("better", "worse") else found["verdict"]
    return word + (" (borderline)" if found.get("borderline") else "")


def p_text(value: dict) -> str:
    """``p 0.041±0.002, t 0.059`` of one metric of a comparison (the parts it has)."""
    return f"p {format_p(value, ', t {}')}"


def _names(names: Sequence[str]) -> str:
    return ", ".join(names) if names else "none"


def _test_text(systems: Sequence[SeedSystem]) -> str:
    """The test the answer's p-values come from: its rounds, from the records (several settings: each named)."""
    rounds = sorted({report.get("n_samples") for system in systems if system.over_seeds
                     for report in system.over_seeds.get("significance", {}).values() if report.get("n_samples")})
    # no system scored over its seeds yet (a study's first runs): no test has run, so no rounds to name
    shown = f"{' / '.join(f'{count:,}' for count in rounds)} rounds; " if rounds else "none run yet; "
    return (f"Test: two-sided seed-aware paired bootstrap ({shown}each p ± its Monte-Carlo standard error), "
            "with Welch's t-test over the seeds' scores beside it; not corrected for the table's several comparisons.")


def _comparison_rows(entries: list[dict], controls: list[dict], metrics: Sequence[str]) -> list[list[str]]:
    rows = []

    def add(name: str, found: dict | None) -> None:
        if not found:
            return
        cells = [name, found["against"], " vs ".join(map(str, found["seeds"]))]
        for metric in metrics:
            value = found[metric]
            interval = value["delta_ci"]
            spread = f" ({interval[0]:+.2f} to {interval[1]:+.2f})" if interval else ""
            cells += [f"{value['delta']:+.2f}{spread}", format_p(value, ', t {}')]
        rows.append(cells + [verdict_text(found)])

    for entry in entries:
        add(entry["system"], entry["vs_baseline"])
        for control in entry["controls"]:
            add(entry["system"], control["comparison"])
    for control in controls:
        add(control["system"], control["vs_baseline"])
    return rows


def study_answer(systems: Sequence[SeedSystem], comparisons: Comparisons) -> tuple[list[str], dict[str, Any]]:
    """The "Answer so far" section of a seeds table (``systems`` in table order) and its JSON; "Answer" once every
    method is compared with the baseline and its controls and no expected system is missing or short of its planned
    seeds."""
    by_name = {system.name: system for system in systems}
    name = comparisons.baseline
    baseline = by_name.get(name) if name else None
    plan, expected, metrics = comparisons.planned_seeds, comparisons.expected, comparisons.metrics
    # a control whose method has no row is a row of its own, tested against the baseline like a method
    methods = [system for system in systems
               if system.name != name and comparisons.method_of(system.name) not in by_name]
    entries = [{"system": system.name, "seeds": system.seeds, "vs_baseline": comparison(system, baseline, comparisons),
                "controls": [{"control": control, "structure": kind,
                              "comparison": comparison(system, by_name.get(control), comparisons)}
                             for control, kind in comparisons.controls_of(system.name)
                             if control in by_name or control in expected]}
               for system in methods]

    # each control against the baseline too (the full table's rows; the paragraph weighs the methods only)
    method_names = {system.name for system in methods}
    controls = [{"system": system.name, "vs_baseline": comparison(system, baseline, comparisons)}
                for system in systems if system.name not in method_names and system.name != name]
    # with a baseline, a method is answered once it is compared with it; without one, once scored over its seeds
    answered = [entry for entry in entries if entry["vs_baseline"] or (
        name is None and by_name[entry["system"]].over_seeds is not None)]
    # a method not answered yet, and a control with runs that its method is not compared with yet
    waiting = [entry["system"] for entry in entries if entry not in answered] + [
        control["control"] for entry in entries for control in entry["controls"]
        if control["control"] in by_name and not control["comparison"]]
    no_run_finished = [system for system in expected if system not in by_name]
    trained = {system.name: sorted(set(system.seeds) | set(system.unscored_seeds)) for system in systems}
    short = [f"{system} ({len(seeds)} of {plan[system]})" for system, seeds in trained.items()
             if system in plan and len(seeds) < plan[system]]
    unscored = [f"{system.name} ({', '.join(map(str, system.unscored_seeds))})" for system in systems
                if system.unscored_seeds]
    total = len(entries) + len([system for system in no_run_finished
                                if system != name and not comparisons.method_of(system)])

    def verdicts(group: list[tuple[str, dict]], labels: dict[str, str]) -> str:
        return "; ".join(f"{label}: " + _names([system + (" (borderline)" if found.get("borderline") else "")
                                                for system, found in group if found["verdict"] == wanted])
                         for wanted, label in labels.items())

    if name is not None and (baseline is None or baseline.over_seeds is None):
        done = len(baseline.runs) if baseline else 0
        paragraph = (f"No answer yet: {name}, the baseline every method is tested against, is not scored over "
                     f"its seeds ({done} trained).")
    else:
        if baseline is None:
            paragraph = (f"{len(answered)} of {total} methods scored over their seeds, each tested against its "
                         "controls (no baseline).")
        else:
            mean, sd = baseline.mean_sd(metrics[0])
            paragraph = (f"{len(answered)} of {total} methods scored over their seeds, against {name} at "
                         f"{mean:.2f} ± {sd:.2f} {metrics[0]} ({len(baseline.seeds)} seeds).")
            if answered:
                words_only = structure_read(baseline, comparisons).startswith("none")
                paragraph += f" Against {'the words alone' if words_only else name}: " + verdicts(
                    [(entry["system"], entry["vs_baseline"]) for entry in answered], {word: word for word in (
                        "better", "no measurable difference", "worse", "mixed")}) + "."
        for kind in comparisons.kinds:
            group = [(entry["system"], control["comparison"]) for entry in entries for control in entry["controls"]
                     if control["structure"] == kind and control["comparison"]]
            if group:
                words = CONTROL_WORDS[kind]
                paragraph += (" Is it the parse?" if "Is it the parse?" not in paragraph else "") + (
                    f" Against the same method on {words} ({kind}): " + verdicts(group, {
                        "better": "the parse is better", "no measurable difference": f"{words} do as well",
                        "worse": f"{words} do better", "mixed": "mixed"}) + ".")
    pending = {label: names for label, names in (
        ("waiting for their seeds", waiting), ("no run finished yet", no_run_finished),
        ("seeds trained but not yet scored over", unscored), ("more seeds to come", short)) if names}
    if pending:
        listed = "; ".join(f"{label}: {_names(names)}" for label, names in pending.items())
        paragraph += f" {listed[0].upper()}{listed[1:]}."  # not str.capitalize: it would lower a system's capitals
    paragraph += f" Rule: {rule_text(comparisons)} {_test_text(systems)}"
    complete = (name is None or (baseline is not None and baseline.over_seeds is not None)) and not pending
    section = ["### Answer" if complete else "### Answer so far", "", paragraph, ""]
    rows = _comparison_rows(entries, controls, metrics)
    if rows:
        header = ["System", "Against", "Seeds"] + [f"{m}: {part}" for m in metrics
                                                   for part in ("Δ (95% interval)", "p ± error (t)")] + ["Verdict"]
        section += markdown_table(header, rows) + [""]
    return section, {"alpha": comparisons.alpha, "systems": entries,
                     "controls": controls, "planned_seeds": dict(plan),
                     "runs_finished": sum(len(seeds) for seeds in trained.values()),
                     "no_run_finished": no_run_finished, "pending": pending, "complete": complete}


README_BEGIN = "<!-- study answer: generated by `fairseq-syntax-study report STUDY.toml --readme README.md` from"
README_END = "<!-- end of the generated study answer -->"


#: how the README's sentence names what is still to come (the labels of the answer's ``pending``)
README_PENDING = {"waiting for their seeds": "not yet scored over their seeds", "no run finished yet": "no run yet",
                  "seeds trained but not yet scored over": "seeds trained, not yet scored over",
                  "more seeds to come": "more seeds"}


def _readme_verdict(found: dict | None, metrics: Sequence[str]) -> str:
    """"**better**: +1.12 BLEU (p 0.011)": the verdict (bold when better or worse), the headline metric's difference
    and p, and each other metric's where it decides or makes the verdict borderline; "–" while there is none."""
    if not found:
        return "–"
    shown = [metric for index, metric in enumerate(metrics)
             if index == 0 or found["verdict"] == "mixed" or found[metric].get("borderline")]
    parts = ", ".join(f"{found[metric]['delta']:+.2f} {metric} (p {probability_text(found[metric]['p_value'])})"
                      for metric in shown)
    return f"{verdict_text(found, bold=True)}: {parts}"


def readme_block(results: dict[str, Any], results_md: str, dataset: str | None = None) -> list[str]:
    """The README's lines between its markers (markers included) for the seeds table of ``results`` (``dataset``:
    whose table, default the first): what was run, a verdict table (one row per method: seeds, verdict against the
    baseline and each kind of control), the rule, what is still to come, and the link ``results_md``."""
    dataset, entry = seeds_dataset(results, dataset)
    if not isinstance(entry.get("answer"), dict) or "pending" not in entry["answer"] or "comparisons" not in entry:
        raise ValueError(f"no answer for dataset {dataset!r} (written by fairseq-syntax-results of this version)")
    comparisons = Comparisons.from_json(entry["comparisons"], f"datasets.{dataset}.comparisons")
    answer, metrics, name = entry["answer"], comparisons.metrics, comparisons.baseline
    plan = answer["planned_seeds"]
    runs = answer["runs_finished"]  # this table's runs, scored over their seeds or not yet
    finished = f"{runs} of the study's {sum(plan.values())} runs" if plan else f"{runs} run{'' if runs == 1 else 's'}"
    kinds = [kind for kind in comparisons.kinds
             if any(control["structure"] == kind for method in answer["systems"] for control in method["controls"])]
    rows = {row["System"]: row for row in entry["table"]["rows"]}
    against = "each method against itself on control structures" if kinds else "each method"
    if name:
        cell = (rows.get(name) or {}).get(f"{metrics[0]} (mean ± sd)")
        at = f" ({cell['mean']:.2f} ± {cell['sd']:.2f} {metrics[0]} over {len(cell['per_seed'])} seeds)" if cell else ""
        against = f"each method against {name}{at}" + (" and against itself on control structures" if kinds else "")
    words = "; ".join(f"{kind}: {CONTROL_WORDS[kind]}" for kind in kinds)
    json_path = str(Path(results_md).with_suffix(".json"))
    lines = [f"{README_BEGIN} {json_path} -->",
             f"**The answer{'' if answer.get('complete') else ' so far'}** ({dataset}, {finished} finished): "
             f"{against}{f' ({words})' if words else ''}.", ""]
    header = ["Method", "Seeds"] + ([f"vs {name}"] if name else []) + [f"vs its {kind} control" for kind in kinds]
    table = []
    for method in answer["systems"]:
        seeds = len(method["seeds"] or ())
        cells = [method["system"], f"{seeds} of {plan[method['system']]}" if method["system"] in plan else str(seeds)]
        if name:
            cells.append(_readme_verdict(method["vs_baseline"], metrics))
        for kind in kinds:
            found = [control for control in method["controls"] if control["structure"] == kind]
            texts = ["no run yet" if control["control"] in answer["no_run_finished"]
                     else _readme_verdict(control["comparison"], metrics) for control in found]
            cells.append("; ".join(f"{control['control']}: {text}" for control, text in zip(found, texts))
                         if len(found) > 1 else "".join(texts))
        table.append(cells)
    lines += markdown_table(header, table) + [""]
    alpha = comparisons.alpha
    rule = (f"better (worse) when {_listed(metrics)} {'are' if len(metrics) > 1 else 'is'} "
            f"{'all ' if len(metrics) > 2 else 'both ' if len(metrics) == 2 else ''}higher (lower), each with "
            f"p < {alpha} in a paired bootstrap over test sentences and seeds" + (
                "; mixed when the metrics disagree" if len(metrics) > 1 else "") +
            f"; borderline when a p lies within {BORDERLINE_ERRORS} Monte-Carlo errors of {alpha}; not corrected "
            "for the several comparisons.")
    lines.append(f"Rule (fixed before the results): {rule}")
    if answer["pending"]:
        listed = "; ".join(f"{README_PENDING.get(label, label)}: {_names(names)}"
                           for label, names in answer["pending"].items())
        lines.append(f"Still to come: {listed}.")
    lines.append(f"The full table (each comparison in every metric, its interval, Monte-Carlo error and Welch's "
                 f"test; the commands; each run's convergence): [{results_md}]({results_md}).")
    return lines + [README_END]


def replace_readme_block(text: str, block: Sequence[str], path: str = "README.md") -> str:
    """``text`` with its study answer of the RESULTS.json ``block`` names (else its only one) replaced by ``block``."""
    return replace_marked_block(text, block, README_BEGIN, README_END, "study answer", path)
