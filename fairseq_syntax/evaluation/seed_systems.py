"""The systems of a dataset trained with several seeds: a row each, the baseline first, each control after its
method.

A seeds dataset's records are each system's runs (``NAME.seedK.run.json``) and, once scored over its seeds, its
record over them (``NAME.seeds.run.json``: means, sds and :func:`fairseq_syntax.evaluation.scoring.seed_bootstrap`'s
tests). :class:`SeedSystem` joins them; :func:`seed_systems` puts them in table order; :func:`seeds_dataset` finds
RESULTS.json's seeds table. Baseline and controls come from the table's
:class:`~fairseq_syntax.evaluation.comparisons.Comparisons`, never from the names."""
import functools
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from fairseq_syntax.core.control_kinds import CONTROL_KEY
from fairseq_syntax.evaluation.comparisons import Comparisons


def probability_text(value: float) -> str:
    """A p-value or its error for a table: 3 decimals, 4 below 0.001 (the smallest p of 10,000 rounds, 0.0002)."""
    return f"{value:.3f}" if value >= 0.001 else f"{value:.4f}"


def format_p(found: dict, welch: str = " (t {})") -> str:
    """One metric's p: ``0.041`` (one run's test), ``0.041±0.002 (t 0.059)`` (seed-aware: Monte-Carlo error, and
    Welch's p in ``welch`` where defined)."""
    text = probability_text(found["p_value"])
    if found.get("p_mc_se") is not None:
        text += f"±{probability_text(found['p_mc_se'])}"
    if (found.get("welch") or {}).get("p_value") is not None:
        text += welch.format(probability_text(found["welch"]["p_value"]))
    return text


#: the seed-aware test's name in a record and a report (``scoring.seed_bootstrap``; docs/results.md defines it)
SEED_BOOTSTRAP_TEST = "seed-aware paired bootstrap"


def mc_standard_error(p_value: float, n_samples: int) -> float:
    """Monte-Carlo standard error of ``scoring.two_sided_bootstrap_p`` from ``n_samples`` rounds: ``sqrt(p (2 - p) /
    R)`` (``2 sqrt(q (1 - q) / R)``, ``q = p / 2``). At p = 0.05 and R = 10,000: 0.0031."""
    share = min(p_value, 1.0) / 2
    return 2 * math.sqrt(share * (1 - share) / n_samples)


def welch_test(a: Sequence[float], b: Sequence[float]) -> dict | None:
    """Welch's t-test of mean(b) - mean(a) over per-seed scores (``scipy.stats.ttest_ind(b, a, equal_var=False)``):
    t, degrees of freedom and two-sided p. None when a system has fewer than two seeds or neither set has spread."""
    import numpy as np
    from scipy.stats import ttest_ind

    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2 or len(b) < 2 or a.var(ddof=1) + b.var(ddof=1) == 0:
        return None
    test = ttest_ind(b, a, equal_var=False)
    return {"t": float(test.statistic), "df": float(test.df), "p_value": float(test.pvalue)}


def mean_and_sd(values: Iterable[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1) of ``values``; sd 0 for one value."""
    values = list(values)
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def seed_means(per_seed: Sequence[dict]) -> tuple[dict, dict]:
    """(mean, sd) over seeds of each number in the seeds' metrics (``per_seed``, the first's keys); other values (the
    tokenizer, the signatures) the first's in the mean."""
    mean, sd = {}, {}
    for name, value in per_seed[0].items():
        if is_number(value):
            mean[name], sd[name] = mean_and_sd([scores[name] for scores in per_seed])
        else:
            mean[name] = value
    return mean, sd


class SeedSystem(NamedTuple):
    """A system of a seeds dataset: its record over the seeds, if scored yet, and its runs' records."""
    name: str
    over_seeds: dict | None
    runs: list[dict]  # by seed

    @property
    def seeds(self) -> list[int]:
        """The seeds its row stands for: those it was scored over, else those of its runs."""
        if self.over_seeds and "seed_list" in self.over_seeds:
            return list(self.over_seeds["seed_list"])
        return [run["seed"] for run in self.runs if "seed" in run]

    @property
    def unscored_seeds(self) -> list[int]:
        """The seeds of runs finished since the system was scored over its seeds (a rescore takes them in)."""
        if not self.over_seeds:
            return []
        scored = set(self.seeds)
        return [run["seed"] for run in self.runs if "seed" in run and run["seed"] not in scored]

    @property
    def scored_runs(self) -> list[dict]:
        """The records of the runs its row stands for (:attr:`seeds`)."""
        seeds = set(self.seeds)
        return [run for run in self.runs if run.get("seed") in seeds] if self.over_seeds else list(self.runs)

    @property
    def facts(self) -> dict:
        """The record whose device, parsers and commands stand for the system (over seeds, else its first run)."""
        return self.over_seeds or self.runs[0]

    def per_seed(self, metric: str) -> list[float]:
        if self.over_seeds and metric in self.over_seeds.get("per_seed_metrics", {}):
            return list(self.over_seeds["per_seed_metrics"][metric])
        return [run["metrics"][metric] for run in self.runs if is_number(run["metrics"].get(metric))]

    def mean_sd(self, metric: str) -> tuple[float, float] | None:
        if self.over_seeds and is_number(self.over_seeds["metrics"].get(metric)):
            return self.over_seeds["metrics"][metric], self.over_seeds.get("metrics_sd", {}).get(metric, 0.0)
        values = self.per_seed(metric)
        return mean_and_sd(values) if values else None

    def test_against(self, other: "SeedSystem") -> tuple[dict, int] | None:
        """The seed-aware test of this system against ``other`` over the seeds both rows stand for, from whichever
        record holds one (this system's first), with the sign that makes deltas this system minus ``other``: 1 from
        this system's record, -1 from ``other``'s. None when neither holds a test over those seeds."""
        for holder, baseline, sign in ((self, other, 1), (other, self, -1)):
            report = (holder.over_seeds or {}).get("significance", {}).get(baseline.name)  # seed_bootstrap's
            tested = (report or {}).get("seeds_a"), (report or {}).get("seeds_b")
            if report and (None in tested or tested == (len(baseline.seeds), len(holder.seeds))):
                return report, sign
        return None


def seed_systems(records: Sequence[dict], comparisons: Comparisons) -> list[SeedSystem]:
    """The systems of a seeds dataset in table order: the baseline of ``comparisons`` first, then in the records'
    order with each system's controls (``comparisons.controls_of``, in their order) right after it."""
    over_seeds = {record["system"]: record for record in records if "seeds" in record}
    runs: dict[str, list[dict]] = {}
    for record in records:
        if "seeds" not in record:
            runs.setdefault(record["system"], []).append(record)
    names = list(dict.fromkeys(record["system"] for record in records))
    controls = {name: [control for control, _ in comparisons.controls_of(name) if control in names]
                for name in names}
    placed = {control for found in controls.values() for control in found}
    baseline = comparisons.baseline
    ordered = [baseline] if baseline in names else []
    for name in names:
        if name != baseline and name not in placed:
            ordered += [name, *controls[name]]
    return [SeedSystem(name, over_seeds.get(name), sorted(runs.get(name, []), key=lambda run: run.get("seed", 0)))
            for name in ordered]


@functools.lru_cache(maxsize=1)
def _registry_systems() -> dict[str, Any]:
    from fairseq_syntax.methods import systems

    return {system.name: system for system in systems(task=None, controls=True)}


def _control_seeds_text(system: SeedSystem) -> str | None:
    """How a control row's runs drew their structures: one control seed for all, or each its training seed, or the
    list; None when no run recorded its control."""
    drawn = [((run.get("parsers") or {}).get(CONTROL_KEY) or {}, run.get("seed")) for run in system.scored_runs]
    drawn = [(control.get("seed"), seed) for control, seed in drawn if control]
    if not drawn:
        return None
    control_seeds = [control_seed for control_seed, _ in drawn]
    if len(set(control_seeds)) == 1:
        return f"seed {control_seeds[0]}"
    if all(control_seed == seed for control_seed, seed in drawn):
        return "control seed = training seed"
    return "control seeds " + ", ".join(f"{control_seed} (run {seed})" for control_seed, seed in drawn)


def structure_read(system: SeedSystem, comparisons: Comparisons) -> str:
    """What structure the system's training read: a control (from ``parsers.json``; the seeds of its draws; "not
    recorded" where none is), the parse, or none."""
    parsers = system.facts.get("parsers") or {}
    if parsers.get(CONTROL_KEY):
        seeds = _control_seeds_text(system) or f"seed {parsers[CONTROL_KEY].get('seed', '?')}"
        return f"control: {parsers[CONTROL_KEY].get('structure', '?')} structures ({seeds})"
    if comparisons.method_of(system.name):
        return "control (not recorded)"
    described = _registry_systems().get(system.name)
    if described is None:
        return "parse" if parsers else "–"
    return "parse" if described.form != "sequence" or described.side_inputs else "none (words only)"


def is_seeds_dataset(records: Sequence[dict]) -> bool:
    """Whether a dataset's records are runs of several seeds: a system scored over its seeds (``seeds``), or one with
    runs of two seeds or more. Such a dataset gets one row per system."""
    if any("seeds" in record for record in records):
        return True
    seeds: dict[str, set] = {}
    for record in records:
        if "seed" in record:
            seeds.setdefault(record["system"], set()).add(record["seed"])
    return any(len(found) > 1 for found in seeds.values())


def seeds_dataset(results: dict, dataset: str | None = None) -> tuple[str, dict]:
    """(dataset, its entry) of the seeds table of ``results`` (RESULTS.json's object): the named dataset, else the
    first one of several seeds; ValueError when there is none."""
    tables = {name: entry for name, entry in results["datasets"].items() if entry.get("seeds")}
    if not tables:
        raise ValueError("no dataset of several seeds in these results")
    if dataset is None:
        dataset = next(iter(tables))
    if dataset not in tables:
        raise ValueError(f"no seeds table for dataset {dataset!r}; these have one: {', '.join(tables)}")
    return dataset, tables[dataset]
