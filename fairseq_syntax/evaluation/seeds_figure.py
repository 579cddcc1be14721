"""The figure of a seeds table (``fairseq-syntax-plot seeds RESULTS.json OUT.png``): one column per system, each
seed's test score a point (coloured by the structure read: parse, control, none), its mean with +-1 sample sd, each
method's controls beside it, and the baseline's mean as a dashed line.

It reads RESULTS.json's seeds dataset (cells ``{"mean", "sd", "per_seed"}``, rows in table order, and its
``comparisons``), so it shows the table's numbers and needs no configuration."""
from fairseq_syntax.core.figures import CHART_COLOURS, save_figure
from fairseq_syntax.evaluation.comparisons import Comparisons
from fairseq_syntax.evaluation.seed_systems import seeds_dataset
from fairseq_syntax.evaluation.tables import load_results_json

COLOURS = {"parse": "tab:blue", "control": "tab:orange", "none": "tab:gray"}
LABELS = {"parse": "parse", "control": "control", "none": "words only"}
CONTROL_GAP = 0.7  # a control sits this far from its system; other columns one apart


def recorded_comparisons(results: dict, dataset: str | None = None) -> Comparisons:
    """The comparisons the seeds table of ``results`` (:func:`seeds_dataset`) was made with, as RESULTS.json
    records them; a ValueError for a table written before it recorded them."""
    dataset, entry = seeds_dataset(results, dataset)
    if "comparisons" not in entry:
        raise ValueError(f"the seeds table of {dataset!r} records no comparisons (written by an older "
                         "fairseq-syntax-results: run it again)")
    return Comparisons.from_json(entry["comparisons"], f"datasets.{dataset}.comparisons")


def seeds_rows(results: dict, dataset: str | None = None, metric: str = "BLEU") -> tuple[str, list[dict]]:
    """(dataset, its rows as ``{"system", "kind", "mean", "sd", "per_seed"}``) of the seeds table of ``results``
    (:func:`seeds_dataset`). Rows without ``metric`` are left out."""
    dataset, entry = seeds_dataset(results, dataset)
    column = f"{metric} (mean ± sd)"
    rows = []
    for row in entry["table"]["rows"]:
        cell = row.get(column)
        if cell:
            kind = next((kind for kind in ("control", "none") if row["Structure read"].startswith(kind)), "parse")
            rows.append({"system": row["System"], "kind": kind, **cell})
    if not rows:
        raise ValueError(f"no {metric} over seeds in the seeds table of {dataset!r} (its columns: "
                         f"{', '.join(entry['table'].get('columns', []))})")
    return dataset, rows


def positions(rows: list[dict], comparisons: Comparisons) -> list[float]:
    """x of each column: one apart, a control (of ``comparisons``) closer to its system (or to its system's other
    control) before it."""
    xs: list[float] = []
    for index, row in enumerate(rows):
        method = comparisons.method_of(row["system"])
        before = rows[index - 1]["system"] if index else None
        after_its_system = method is not None and before is not None and (
            before == method or comparisons.method_of(before) == method)
        xs.append(0.0 if not xs else xs[-1] + (CONTROL_GAP if after_its_system else 1.0))
    return xs


def plot_seeds(results_json: str, output: str, dataset: str | None = None, metric: str = "BLEU"):
    """Draw the figure to ``output`` (a PNG at 96 dpi); returns the matplotlib figure. A file that is not such a
    RESULTS.json, or has no seeds table, is a ValueError naming it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    results = load_results_json(results_json)
    try:
        dataset, rows = seeds_rows(results, dataset, metric)
        comparisons = recorded_comparisons(results, dataset)
    except ValueError as error:
        raise ValueError(f"{results_json}: {error}") from error
    xs = positions(rows, comparisons)
    width = max(4.0, 0.55 * len(rows) + 1.6)
    figure, axes = plt.subplots(figsize=(width, 3.6), dpi=96)
    baseline = next((row for row in rows if row["system"] == comparisons.baseline), None)
    if baseline:
        axes.axhline(baseline["mean"], color="gray", linestyle="--", linewidth=0.8, zorder=0)
    for x, row in zip(xs, rows):
        seeds = len(row["per_seed"])
        spread = [x + 0.08 + 0.1 * (i - (seeds - 1) / 2) for i in range(seeds)]
        axes.scatter(spread, row["per_seed"], s=16, color=COLOURS[row["kind"]], edgecolors="black",
                     linewidths=0.4, zorder=3)
        axes.errorbar(x - 0.17, row["mean"], yerr=row["sd"], fmt="_", markersize=9, color="black", capsize=2.5,
                      linewidth=1, zorder=2)
    axes.set_xticks(xs)
    axes.set_xticklabels([row["system"] for row in rows], rotation=35, ha="right", fontsize=8)
    axes.set_xlim(xs[0] - 0.6, xs[-1] + 0.6)
    axes.set_ylabel(f"test {metric}", fontsize=9)
    axes.tick_params(axis="y", labelsize=8)
    axes.grid(axis="y", linewidth=0.3, alpha=0.5)
    handles = [Line2D([], [], marker="o", linestyle="", markersize=5, markerfacecolor=COLOURS[kind],
                      markeredgecolor="black", markeredgewidth=0.4, label=f"seed ({LABELS[kind]})")
               for kind in COLOURS if any(row["kind"] == kind for row in rows)]
    handles.append(Line2D([], [], marker="_", color="black", markersize=9, label="mean ± sd"))
    if baseline:
        handles.append(Line2D([], [], color="gray", linestyle="--", linewidth=0.8,
                              label=f"{comparisons.baseline} mean"))
    axes.legend(handles=handles, fontsize=7, ncol=3 if width >= 6 else 2, loc="lower center",
                bbox_to_anchor=(0.5, 1.0), frameon=False)
    figure.suptitle(f"{dataset}: {metric} over seeds", fontsize=9, y=0.99)
    figure.tight_layout()
    save_figure(figure, output, colours=CHART_COLOURS, dpi=96)
    plt.close(figure)
    return figure
