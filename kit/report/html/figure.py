"""matplotlib, imported lazily with the Agg backend, and a figure turned into inline SVG.

Every data artist is tagged with an id ``mark-N`` (:class:`Marks`) so a test (or a reader of the
file) can tell drawn data from axes, ticks and legends. Output is deterministic (:func:`to_svg`).
"""

from __future__ import annotations

import io
import re
import warnings
from typing import Any

from kit.errors import EnvironmentProblem

HINT = "pip install 'kit[html]'"
FONT = 11


class PlottingUnavailable(EnvironmentProblem):
    """matplotlib (kit's ``html`` extra) is not installed."""


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, with kit's deterministic SVG settings."""
    try:
        # lazy: matplotlib is the html extra (heavy)
        import matplotlib  # noqa: PLC0415
    except ImportError:
        raise PlottingUnavailable(
            "kit report html draws its charts with matplotlib, which is not installed",
            hint=HINT,
        ) from None
    matplotlib.use("Agg", force=True)
    # lazy: matplotlib is the html extra (heavy)
    import matplotlib.pyplot as plt  # noqa: PLC0415

    matplotlib.rcParams.update(
        {
            "svg.hashsalt": "kit-report-html",
            "svg.fonttype": "none",  # text stays text: small files, readable, selectable
            "font.family": "sans-serif",
            "font.size": FONT,
            "axes.titlesize": FONT + 2,
            "axes.titleweight": "bold",
            "axes.labelsize": FONT + 1,
            "legend.fontsize": FONT - 1,
            "xtick.labelsize": FONT - 1,
            "ytick.labelsize": FONT - 1,
            "axes.grid": True,
            "grid.alpha": 0.3,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "figure.dpi": 100,
        }
    )
    return plt


class Marks:
    """Hands out unique ``mark-N`` ids for the data artists of one figure."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, artist: Any) -> Any:
        """Tag an artist as drawn data; a list or container (bars, error bars) item by item."""
        if artist is None:
            return artist
        if isinstance(artist, list | tuple):  # matplotlib's containers are tuples
            for item in artist:
                self(item)
            return artist
        self.count += 1
        artist.set_gid(f"mark-{self.count}")
        return artist


_HEAD = re.compile(r"^.*?(?=<svg)", re.S)
_ID = re.compile(r'\bid="([^"]+)"')


# in place of a chart whose numbers matplotlib cannot lay out
UNDRAWN = (
    '<p class="note">chart not drawn: its numbers are beyond what an axis can show (a value '
    "near the limits of a double, which no run measures)</p>"
)


def to_svg(fig: Any, name: str) -> str:
    """The figure as an ``<svg>`` element for inlining, ids prefixed with ``name``; closed. A
    figure whose numbers are beyond what matplotlib can lay out (an axis spanning 1e308, whose
    tick format overflows) is :data:`UNDRAWN` instead. The output is deterministic: a fixed
    ``svg.hashsalt`` (:func:`pyplot`), no Date in the metadata, and ids prefixed per figure so
    several SVGs can share one page without their clip paths colliding."""
    plt = pyplot()
    buf = io.StringIO()
    try:
        with warnings.catch_warnings():  # numpy's overflow warnings on such an axis: not news
            warnings.simplefilter("ignore", RuntimeWarning)
            fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    except (OverflowError, ValueError):
        return UNDRAWN
    finally:
        plt.close(fig)
    svg = _HEAD.sub("", buf.getvalue(), count=1)
    ids = set(_ID.findall(svg))
    for old in sorted(ids, key=len, reverse=True):
        new = f"{name}-{old}"
        svg = svg.replace(f'id="{old}"', f'id="{new}"')
        svg = svg.replace(f"url(#{old})", f"url(#{new})")
        svg = svg.replace(f'href="#{old}"', f'href="#{new}"')
    # shrink with the page, never grow past the drawn size: the fixed size becomes a max-width
    size = re.search(r'<svg[^>]*? width="([^"]+)" height="[^"]+"', svg)
    width = size.group(1) if size else "100%"
    svg = re.sub(r'<svg([^>]*?) width="[^"]+" height="[^"]+"', r"<svg\1", svg, count=1)
    svg = svg.replace('<style type="text/css">*{', '<style type="text/css">svg.chart *{')
    attrs = f'role="img" aria-label="{name}" class="chart" style="max-width:{width}"'
    return svg.replace("<svg ", f"<svg {attrs} ", 1)
