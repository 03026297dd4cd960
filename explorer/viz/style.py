"""One palette and one plot look for every view, so a token's fate has the same colour everywhere."""

from __future__ import annotations

import plotly.graph_objects as go

# A token's fate in a round (see ``tokens.round_fates``): colour on the page, words in the legend.
FATE_COLOURS = {
    "accepted": "#1f9d55",   # green: the draft's token, kept
    "rejected": "#d64545",   # red: the draft refused by the accept test
    "discarded": "#8a8f98",  # grey: drafted after the rejection, never tested
    "corrected": "#d97706",  # amber: resampled from the residual norm(max(0, p − q))
    "bonus": "#7c3aed",      # violet: the target's extra token after a fully accepted round
    "target": "#2563eb",     # blue: one plain target token (autoregressive, or a round with no draft)
}
FATE_LABELS = {
    "accepted": "accepted — the draft's token, kept",
    "rejected": "rejected — the draft refused",
    "discarded": "discarded — drafted after a rejection",
    "corrected": "corrected — resampled from the residual",
    "bonus": "bonus — from the target after all drafts were accepted",
    "target": "target — one target token (autoregressive)",
}

DRAFT_COLOUR = "#f59e0b"      # q, the draft distribution
TARGET_COLOUR = "#2563eb"     # p, the target distribution
RESIDUAL_COLOUR = FATE_COLOURS["corrected"]
TIMING_COLOURS = {"draft": "#f59e0b", "verify": "#2563eb", "other": "#a8a29e"}
BASELINE_COLOUR = "#6b7280"
RUN_COLOUR = "#059669"

FONT = "ui-sans-serif, system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif"


def base_layout(fig: go.Figure, title: str, height: int, legend_below: bool = False) -> go.Figure:
    """Title, white template, compact margins and a horizontal legend: above the plot area, or below
    it (``legend_below``) where subplot titles take the space above."""
    legend = {"orientation": "h", "xanchor": "left", "x": 0}
    legend.update({"yanchor": "top", "y": -0.2} if legend_below else {"yanchor": "bottom", "y": 1.04})
    fig.update_layout(
        title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}},
        template="plotly_white",
        height=height,
        margin={"l": 60, "r": 20, "t": 70 if legend_below else 90, "b": 110 if legend_below else 55},
        font={"family": FONT, "size": 12},
        legend=legend,
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
