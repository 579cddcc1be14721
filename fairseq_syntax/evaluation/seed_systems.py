"""The systems of a dataset trained with several seeds: one row each, Sequence first, each method's controls after it.

A seeds dataset's records (:mod:`fairseq_syntax.evaluation.results`) are the runs of each system, one per training
seed (``NAME.seedK.run.json``), and, once scored over its seeds (``score_seeds`` of ``examples/common.sh``), its
record over them (``NAME.seeds.run.json``: the means, sds and the seed-aware tests of
:func:`fairseq_syntax.evaluation.scoring.seed_bootstrap`). :class:`SeedSystem` joins them; :func:`seed_systems` puts
them in table order. The results table (:mod:`~fairseq_syntax.evaluation.results`), its answer
(:mod:`~fairseq_syntax.evaluation.study_answer`) and its figure (:mod:`~fairseq_syntax.evaluation.seeds_figure`) all
read them from here, and RESULTS.json's seeds table through :func:`seeds_dataset`.

A system's controls are ``NAME_CONTROL`` for each control structure of
:data:`fairseq_syntax.core.control_kinds.CONTROLS` (``mask_random``, ``mask_struct``): the same system on control
structures instead of the parses (:func:`control_parts`).
"""
import statistics
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from fairseq_syntax.core.control_kinds import CONTROLS

SEQUENCE = "sequence"  # the baseline every row of a seeds table is tested against
SEEDS_METRICS = ("BLEU", "chrF")
#: how a table reads each p of the seed-aware test (scoring.seed_bootstrap), for its notes
P_VALUE_READING = ("the seed-aware paired bootstrap's two-sided p (twice the smaller share of its rounds at or beyond "
                   "a zero difference), ± its Monte-Carlo standard error 2 sqrt(q (1 - q) / R) (q = p / 2, the smaller "
                   "tail's share; R rounds); (t ...): Welch's t-test p over the systems' per-seed corpus scores, "
                   "beside it and not part of the verdict rule.")


def probability_text(value: float) -> str:
    """A p-value or its error for a table: 3 decimals, 4 below 0.001 (the smallest p of 10,000 rounds, 0.0002)."""
    return f"{value:.3f}" if value >= 0.001 else f"{value:.4f}"


def mean_and_sd(values: Iterable[float]) -> tuple[float, float]:
    """The mean and the sample standard deviation (n - 1) of ``values``; sd 0 for one value."""
    values = list(values)
    return statistics.fmean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def control_parts(name: str) -> tuple[str, str] | None:
    """(method, control) of a control system's name (``hier_accum_struct`` -> ``("hier_accum", "struct")``), else
    None."""
    method, _, control = name.rpartition("_")
    return (method, control) if method and control in CONTROLS else None


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class SeedSystem(NamedTuple):
    """A system of a seeds dataset: its record over the seeds (``fairseq-syntax-score`` with one output per seed,
    ``score_seeds`` of ``examples/common.sh``: the seed-aware p-values), if scored yet, and its runs' records."""
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
        return [run["metrics"][metric] for run in self.runs if _is_number(run["metrics"].get(metric))]

    def mean_sd(self, metric: str) -> tuple[float, float] | None:
        if self.over_seeds and _is_number(self.over_seeds["metrics"].get(metric)):
            return self.over_seeds["metrics"][metric], self.over_seeds.get("metrics_sd", {}).get(metric, 0.0)
        values = self.per_seed(metric)
        return mean_and_sd(values) if values else None

    def p_values(self, baseline: str | None) -> dict | None:
        """Its record's test against ``baseline`` (scoring.seed_bootstrap's report), if it holds one."""
        return (self.over_seeds or {}).get("significance", {}).get(baseline) if baseline else None

    def test_against(self, other: "SeedSystem") -> tuple[dict, int] | None:
        """The seed-aware test of this system against ``other`` over the seeds both rows stand for, from whichever
        record holds one (this system's first), with the sign that turns its deltas into this system minus
        ``other``: 1 from this system's record (``other`` its baseline ``a``, itself ``b``), -1 from ``other``'s.
        None when neither holds a test over those seeds: a test made before runs that finished since (a control
        scored against Sequence's first three seeds of five) is not shown as if it were over them."""
        for holder, baseline, sign in ((self, other, 1), (other, self, -1)):
            report = holder.p_values(baseline.name)
            tested = (report or {}).get("seeds_a"), (report or {}).get("seeds_b")
            if report and (None in tested or tested == (len(baseline.seeds), len(holder.seeds))):
                return report, sign
        return None


def seed_systems(records: Sequence[dict]) -> list[SeedSystem]:
    """The systems of a seeds dataset in table order: Sequence first, then in the records' order with each
    system's controls (``X_CONTROL``, in the order of ``CONTROLS``) right after it."""
    over_seeds = {record["system"]: record for record in records if "seeds" in record}
    runs: dict[str, list[dict]] = {}
    for record in records:
        if "seeds" not in record:
            runs.setdefault(record["system"], []).append(record)
    names = list(dict.fromkeys(record["system"] for record in records))
    controls = {name: [f"{name}_{control}" for control in CONTROLS if f"{name}_{control}" in names] for name in names}
    placed = {control for found in controls.values() for control in found}
    ordered = [SEQUENCE] if SEQUENCE in names else []
    for name in names:
        if name != SEQUENCE and name not in placed:
            ordered += [name, *controls[name]]
    return [SeedSystem(name, over_seeds.get(name), sorted(runs.get(name, []), key=lambda run: run.get("seed", 0)))
            for name in ordered]


def is_seeds_dataset(records: Sequence[dict]) -> bool:
    """Whether a dataset's records are runs of several seeds: one of them is a system scored over its seeds
    (``seeds``), or a system has runs of two seeds or more. Such a dataset gets one row per system
    (``SeedSystem``), not one per run."""
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
