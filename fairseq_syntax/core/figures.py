"""Figures written small: every PNG of the package saved through a palette (Pillow's median cut and optimising
writer), 64 colours for a colour scale (heatmaps), 32 for a chart of lines and points: the same picture at its shown
size in a third to a quarter of the bytes. Other formats are matplotlib's.

    save_figure(figure, "seeds.png", colours=CHART_COLOURS, dpi=96)   # options go to Figure.savefig"""
from __future__ import annotations

import io
from pathlib import Path

PALETTE_COLOURS = 64
#: a chart's lines, markers, text and their anti-aliased edges
CHART_COLOURS = 32


def save_figure(figure, path, colours: int = PALETTE_COLOURS, **options) -> Path:
    """Write ``figure`` to ``path`` (``options``: ``Figure.savefig``'s); a ``.png`` through a palette of ``colours``
    (``write_palette_png``). Returns ``path``."""
    path = Path(path)
    if path.suffix.lower() != ".png":
        figure.savefig(path, **options)
        return path
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", **options)
    buffer.seek(0)
    return write_palette_png(buffer, path, colours)


def write_palette_png(source, path, colours: int = PALETTE_COLOURS) -> Path:
    """The PNG ``source`` (a path or a binary file) written to ``path`` in ``colours`` colours, on an opaque white
    background where it was transparent. Returns ``path``."""
    from PIL import Image  # matplotlib's own dependency

    with Image.open(source) as image:
        image.load()
        opaque = Image.new("RGB", image.size, "white")
        rgba = image.convert("RGBA")
        opaque.paste(rgba, mask=rgba.getchannel("A"))
    palette = opaque.quantize(colors=colours, method=Image.Quantize.MEDIANCUT)
    palette.save(path, "PNG", optimize=True)
    return Path(path)
