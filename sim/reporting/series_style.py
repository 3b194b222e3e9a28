"""The look of a figure's series: colour, line style and marker, so that series stay apart in print.

The three cycles have co-prime-ish lengths (10 colours, 4 line styles, 12 markers), so series ``i``
and ``j`` share all three only when ``i - j`` is a multiple of 60, and any two of the first 12 differ
in at least two of the three.  Two policies with equal results (e.g. FCFS and EASY on a lightly
loaded cluster) then still show as two lines: a solid one under a dashed one, with other markers.

>>> series_style(0), series_style(10)
(('#1f77b4', '-', 'o'), ('#1f77b4', ':', 'h'))
>>> len({series_style(i) for i in range(60)})
60
"""

from __future__ import annotations

# matplotlib's "tab10" colours (colour-blind friendly enough, and what readers know)
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
           "#17becf")
LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">", "h", "p")
HATCHES = ("", "//", "..", "xx", "\\\\", "++", "oo", "--", "||", "**")


def series_style(index: int) -> tuple[str, str, str]:
    """(colour, line style, marker) of the ``index``-th series of a figure."""
    return COLOURS[index % len(COLOURS)], LINESTYLES[index % len(LINESTYLES)], MARKERS[index % len(MARKERS)]


def bar_hatch(index: int) -> str:
    """The hatch of the ``index``-th bar series, so bars differ without colour too.

    >>> bar_hatch(0), bar_hatch(1)
    ('', '//')
    """
    return HATCHES[index % len(HATCHES)]
