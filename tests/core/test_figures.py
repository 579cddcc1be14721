"""fairseq_syntax/core/figures.py: a PNG saved through a palette keeps flat colours exactly, holds at most its
colours (64, a chart's 32), is smaller than matplotlib's own PNG, and other formats are written as matplotlib writes
them."""
import io

import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from fairseq_syntax.core.figures import CHART_COLOURS, PALETTE_COLOURS, save_figure  # noqa: E402

RED, GREEN, BLUE = (200, 30, 40), (20, 160, 60), (30, 60, 220)


def flat_figure():
    """30 x 10 pixels (3 x 1 inches at 10 dpi): three 10-pixel squares of RED, GREEN and BLUE, nothing else."""
    figure = plt.figure(figsize=(3, 1), dpi=10)
    axes = figure.add_axes([0, 0, 1, 1])
    axes.imshow(np.array([[RED, GREEN, BLUE]], dtype=np.uint8), interpolation="nearest", aspect="auto")
    axes.set_axis_off()
    return figure


def test_flat_colours_come_back_exactly_from_the_palette_and_other_formats_are_matplotlibs(tmp_path):
    figure = flat_figure()
    path = save_figure(figure, tmp_path / "flat.png", dpi=10)
    assert save_figure(figure, tmp_path / "flat.pdf").read_bytes()[:5] == b"%PDF-"
    plt.close(figure)
    with Image.open(path) as image:
        assert image.mode == "P" and image.size == (30, 10)
        rgb = image.convert("RGB")
        # the centre of each square
        assert [rgb.getpixel((x, 5)) for x in (5, 15, 25)] == [RED, GREEN, BLUE]
        assert sorted(colour for _, colour in rgb.getcolors()) == sorted([RED, GREEN, BLUE])


@pytest.mark.parametrize("colours", [PALETTE_COLOURS, CHART_COLOURS])
def test_an_antialiased_plot_keeps_at_most_its_colours_in_fewer_bytes(tmp_path, colours):
    figure, axes = plt.subplots(figsize=(4, 3))
    x = np.linspace(0, 6, 200)
    for phase in range(5):
        axes.plot(x, np.sin(x + phase), label=f"phase {phase}")
    axes.legend()
    axes.set_title("five sines, anti-aliased")
    plain = io.BytesIO()
    figure.savefig(plain, format="png", dpi=96)
    path = save_figure(figure, tmp_path / "sines.png", colours=colours, dpi=96)
    plt.close(figure)
    with Image.open(io.BytesIO(plain.getvalue())) as original:
        assert len(original.convert("RGB").getcolors(maxcolors=1 << 24)) > colours  # what is cut down
    with Image.open(path) as image:
        assert image.mode == "P" and colours / 2 < len(image.convert("RGB").getcolors()) <= colours
        assert image.size == (384, 288)
    assert path.stat().st_size < len(plain.getvalue())
