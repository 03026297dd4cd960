"""Token ids to the text shown on the page."""

from __future__ import annotations

import html


def piece(trace, token_id: int) -> str:
    """The id's own text piece as recorded in the trace (``⟨id⟩`` when the trace lacks it)."""
    return trace.token_text.get(int(token_id), f"⟨{int(token_id)}⟩")


def label(trace, token_id: int) -> str:
    """A one-line, quoted label for axes and tooltips: spaces kept visible, newlines as ↵."""
    text = piece(trace, token_id).replace("\n", "↵").replace("\t", "⇥").replace("\r", "")
    return f"'{text}'"


def inline_html(text: str) -> str:
    """Escaped text for a token span: a newline shows as ↵ and still breaks the line."""
    return html.escape(text).replace("\n", "↵\n")
