"""Importing this module loads the fonts a report draws with, once per process (an import effect).

matplotlib keeps every font file it has drawn with open in its font cache, for the life of the process.
A report drawn inside a hermetic call would leave those files open, and the leak detector would report
them as the call's; the bench and `rlrun report` import this module before the call captures, like the
libraries they need, so that those files are opened by the import. The text drawn covers what the
report's figures use: regular, bold and italic text, mathtext (the performance profile's tau), in PNG
and SVG.
"""

from __future__ import annotations

import io

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.backends.backend_svg import FigureCanvasSVG
from matplotlib.figure import Figure


def _draw_every_style() -> None:
    figure = Figure(figsize=(2, 2))
    FigureCanvasAgg(figure)
    figure.suptitle("title 0123", fontweight="bold")
    axes = figure.add_subplot()
    axes.plot([0, 1], [0, 1], label="run \u00b1 \u2013")
    axes.set_xlabel(r"normalised final return $\tau$ $> \tau$")
    axes.set_ylabel("mean training return")
    axes.legend(title="run")
    figure.text(0.5, 0.01, "caption: IQM, 95% CI", style="italic", ha="center")
    figure.text(0.5, 0.05, "plain caption", ha="center")
    figure.savefig(io.BytesIO(), format="png")
    FigureCanvasSVG(figure).print_svg(io.BytesIO())


_draw_every_style()
