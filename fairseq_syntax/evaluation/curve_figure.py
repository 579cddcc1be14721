"""The figure of a study over sizes (``curve.png``): BLEU and chrF side by side, each system's difference from the
baseline against training pairs (log axis), one line per method with its control dashed beside it, each point with
its 95% bootstrap interval. It draws :func:`fairseq_syntax.evaluation.curve.curve_data` only."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from fairseq_syntax.core.figures import CHART_COLOURS, save_figure
from fairseq_syntax.evaluation.curve import METRICS

#: a control's points sit this factor to the right of its method's, so that their intervals do not hide each other
CONTROL_SHIFT = 1.04
METHOD_SHIFT = 1.015


def plot_curve(data: dict[str, Any], output: str | Path) -> Path:
    """Write the figure of ``data`` to ``output``; a ValueError when no size has a scored system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(found for by_size in data["systems"].values() for found in by_size.values()):
        raise ValueError("no system is scored against the baseline at any size yet")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    figure, axes = plt.subplots(1, len(METRICS), figsize=(5.2 * len(METRICS), 3.8), dpi=96, sharex=True)
    for axis, metric in zip(axes, METRICS):
        axis.axhline(0.0, color="black", linewidth=0.8)
        for index, (method, controls) in enumerate(data["methods"].items()):
            colour = colours[index % len(colours)]
            shift = METHOD_SHIFT ** index
            for name, style, factor in ((method, "-", 1.0), *((control, "--", CONTROL_SHIFT) for control in controls)):
                points = [(pairs * shift * factor, found[metric]) for pairs, found in
                          ((pairs, data["systems"][name][str(pairs)]) for pairs in data["sizes"])
                          if found and metric in found]
                if not points:
                    continue
                xs = [x for x, _ in points]
                ys = [value["delta"] for _, value in points]
                low = [value["delta"] - value["delta_ci"][0] for _, value in points]
                high = [value["delta_ci"][1] - value["delta"] for _, value in points]
                axis.errorbar(xs, ys, yerr=[low, high], color=colour, linestyle=style, marker="o" if style == "-"
                              else "s", markersize=4, capsize=2, linewidth=1.2, label=name)
        axis.set_xscale("log")
        axis.set_xticks(data["sizes"], [f"{pairs:,}" for pairs in data["sizes"]])
        axis.minorticks_off()
        axis.set_xlabel("training pairs")
        axis.set_ylabel(f"{metric} minus {data['baseline']}")
        axis.grid(axis="y", linewidth=0.3)
    axes[-1].legend(fontsize=7, loc="best", ncol=2)
    figure.suptitle(f"Each system minus {data['baseline']} (the words alone) by training-set size; dashed: the "
                    "method on control structures", fontsize=9)
    figure.tight_layout()
    path = save_figure(figure, output, colours=CHART_COLOURS, dpi=96)
    plt.close(figure)
    return path


__all__ = ["plot_curve"]
