"""A grid of labelled heatmaps written to a PNG: the one drawing routine of every ``fairseq-syntax-plot`` figure.

``matrices`` is ``K x R x C`` (one panel each); row and column labels are shared by all panels.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from fairseq_syntax.core.figures import save_figure


def chosen(count: int, indices: Optional[Sequence[int]], what: str) -> list:
    """``indices`` of the panels to draw (default all ``count``); ValueError for one the model lacks."""
    indices = list(range(count)) if indices is None else list(indices)
    bad = [index for index in indices if not 0 <= index < count]
    if bad:
        raise ValueError(f"{what} {bad} do not exist (there are {count})")
    return indices


def plot_heatmap_grid(
    matrices,
    titles: Sequence[str],
    row_labels: Sequence[str],
    column_labels: Sequence[str],
    path: str,
    vmin: Optional[float] = None,
    vmax: Optional[float] = None,
    columns: int = 4,
    cmap: str = "viridis",
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    matrices = np.asarray(matrices)
    if matrices.ndim != 3 or matrices.shape[1:] != (len(row_labels), len(column_labels)):
        raise ValueError(f"expected K x {len(row_labels)} x {len(column_labels)} matrices, got {matrices.shape}")
    if len(titles) != matrices.shape[0]:
        raise ValueError(f"{len(titles)} titles for {matrices.shape[0]} panels")
    columns = min(columns, matrices.shape[0])
    rows = math.ceil(matrices.shape[0] / columns)
    width = 1.0 + 0.28 * len(column_labels)
    height = 1.0 + 0.28 * len(row_labels)
    figure, axes = plt.subplots(rows, columns, figsize=(width * columns, height * rows), squeeze=False)
    for axis in axes.flat[matrices.shape[0]:]:
        axis.set_visible(False)
    vmin = float(matrices.min()) if vmin is None else vmin
    vmax = float(matrices.max()) if vmax is None else vmax
    for axis, matrix, title in zip(axes.flat, matrices, titles):
        image = axis.imshow(matrix, vmin=vmin, vmax=vmax, cmap=cmap)
        axis.set_title(title)
        axis.set_xticks(range(len(column_labels)), column_labels, rotation=90, fontsize=8)
        axis.set_yticks(range(len(row_labels)), row_labels, fontsize=8)
    figure.colorbar(image, ax=axes.ravel().tolist(), shrink=0.6)
    save_figure(figure, path, dpi=100, bbox_inches="tight")
    plt.close(figure)
