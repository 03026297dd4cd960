"""One palette and one plot look for every view, so a token's fate has the same colour everywhere."""

from __future__ import annotations

import plotly.graph_objects as go
import plotly.io as pio

# One palette for every view: Okabe & Ito's eight colours (2008), told apart under the common colour-vision
# deficiencies (red-green pairs are not), each meaning one thing wherever it appears.
OKABE_ITO = {
    "orange": "#E69F00", "sky": "#56B4E9", "green": "#009E73", "yellow": "#F0E442",
    "blue": "#0072B2", "vermillion": "#D55E00", "purple": "#CC79A7", "black": "#000000",
}
GREY = "#8a8f98"

# A token's fate in a round (see ``tokens.round_fates``): colour on the page, words in the legend.
FATE_COLOURS = {
    "accepted": OKABE_ITO["green"],      # the draft's token, kept
    "rejected": OKABE_ITO["vermillion"],  # the draft refused by the accept test
    "discarded": GREY,                    # drafted after the rejection, never tested
    "corrected": OKABE_ITO["purple"],    # resampled from the residual norm(max(0, p − q))
    "bonus": OKABE_ITO["yellow"],        # the target's extra token after a fully accepted round
    "target": OKABE_ITO["blue"],         # one plain target token (autoregressive, or a round with no draft)
    "copy": OKABE_ITO["orange"],         # a token of the low-bit copy decoding alone: nobody checked it (lossy)
}
FATE_LABELS = {
    "accepted": "accepted — the draft's token, kept",
    "rejected": "rejected — the draft refused",
    "discarded": "discarded — drafted after a rejection",
    "corrected": "corrected — resampled from the residual",
    "bonus": "bonus — from the target after all drafts were accepted",
    "target": "target — one target token (autoregressive)",
    "copy": "copy — the low-bit copy's own token: no target checked it (lossy)",
}

DRAFT_COLOUR = OKABE_ITO["sky"]    # q, the draft distribution, and the time spent drafting: a light blue
TARGET_COLOUR = OKABE_ITO["blue"]  # p, the target distribution, and the time spent verifying: the dark blue
RESIDUAL_COLOUR = FATE_COLOURS["corrected"]  # the correction is drawn from the residual: same colour
TIMING_COLOURS = {"draft": DRAFT_COLOUR, "verify": TARGET_COLOUR, "other": "#a8a29e"}
BASELINE_COLOUR = "#6b7280"
RUN_COLOUR = OKABE_ITO["green"]
# lines of one family (one per α, per c, …), in this order
SERIES = (OKABE_ITO["blue"], OKABE_ITO["orange"], OKABE_ITO["green"], OKABE_ITO["vermillion"], OKABE_ITO["purple"],
          OKABE_ITO["sky"], "#B8A200", OKABE_ITO["black"])


def tint(colour: str, alpha: float) -> str:
    """``colour`` (#rrggbb) at opacity ``alpha``: a faded background that keeps the hue (mixing towards
    white turned orange into beige and blue into white)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    return f"rgba({r}, {g}, {b}, {alpha:g})"


FONT = "ui-sans-serif, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


def white_template(fig: go.Figure) -> None:
    """Give ``fig`` plotly's white template as plotly gives a new figure its default one: the registered
    template, already checked, assigned without checking its few hundred properties again. Checked, it cost
    13 ms a figure on the developers' 2-core machine, ten times the rest of a small figure, and the page
    draws several figures on every update of a live run; assigned so, 0.5 ms. (``_validate`` is plotly's own
    switch, ``BaseFigure._initialize_layout_template``; ``tests/test_viz.py`` checks the figure is, as data, the
    one the checked assignment makes, and owns its copy.)"""
    layout = fig.layout
    checking = getattr(layout, "_validate", True)
    layout._validate = False
    try:
        layout.template = pio.templates["plotly_white"]
    finally:
        layout._validate = checking


def base_layout(fig: go.Figure, title: str, height: int) -> go.Figure:
    """Title, white template, compact margins and a horizontal legend under the plot area (above it, a
    legend collides with the title and with subplot titles; the page's ``fit_figures.js`` moves it
    clear of the axis titles where they reach it)."""
    white_template(fig)
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        height=height,
        margin={"l": 60, "r": 20, "t": 70, "b": 110},
        font={"family": FONT, "size": 12},
        legend={"orientation": "h", "xanchor": "left", "x": 0, "yanchor": "top", "y": -0.2},
        hoverlabel={"font": {"family": FONT}},
    )
    return fig


def empty_figure(title: str, message: str, height: int = 320) -> go.Figure:
    """A titled placeholder (axes hidden) for when there is nothing to plot yet."""
    fig = go.Figure()
    base_layout(fig, title, height)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font={"size": 14, "color": "#6b7280"})
    return fig
