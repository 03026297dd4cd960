"""Token ids to the text shown on the page, and untrusted text made safe for HTML and Markdown."""

from __future__ import annotations

import html
import re

# What Markdown would read as formatting; a backslash before each makes it literal.
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")


def piece(trace, token_id: int) -> str:
    """The id's own text piece as recorded in the trace (``⟨id⟩`` when the trace lacks it)."""
    return trace.token_text.get(int(token_id), f"⟨{int(token_id)}⟩")


def label(trace, token_id: int) -> str:
    """A one-line, quoted label for axes and tooltips: spaces kept visible, newlines as ↵."""
    return quoted(piece(trace, token_id))


def quoted(text: str) -> str:
    """A token's text piece on one line, quoted: spaces kept visible, newlines as ↵, tabs as ⇥."""
    return "'" + text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "") + "'"


def plotly_text(text: object) -> str:
    """Any value (a token's text, a model, draft or system name, a label from an uploaded file) as literal text inside
    a Plotly string: a title, legend name, annotation, tick label, hover text or customdata.

    Plotly draws a subset of HTML in all of these (``<b>``, ``<br>``, ``<a href>``, ``<sup>``, …) and decodes only
    ``&amp;``, ``&lt;``, ``&gt;``, a few other named entities and numeric ones. ``html.escape`` is therefore the
    wrong tool (its ``&quot;`` showed literally in legends, #40 and #42) and raw text the wrong input (a ``<b>``
    in it is drawn bold). The rule: escape exactly what opens markup or an entity, ``<``, ``>`` and ``&``, and
    the ``%{`` that opens a hover template's field; quotes and apostrophes stay themselves."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("%{", "%&#123;"))


def plot_label(trace, token_id: int) -> str:
    """``label`` for a Plotly string (``plotly_text``)."""
    return plotly_text(label(trace, token_id))


def inline_html(text: str) -> str:
    """Escaped text for a token span: a newline shows as ↵ and still breaks the line."""
    return html.escape(text).replace("\n", "↵\n")


def safe_markdown(text: object) -> str:
    """Any value (a model name, an error message, a field of an uploaded trace) as literal text inside
    Markdown: HTML escaped (no tag can open, so no handler can run and ``<name>`` stays visible) and
    Markdown's punctuation backslash-escaped (no link, image or emphasis). The colon of ``://`` is
    written as its entity, so ``http://…`` is no URL to an autolinker (a dot is escaped already, which stops ``www.`` and
    e-mail addresses): a stranger's text is never a clickable link."""
    return _MARKDOWN.sub(r"\\\1", html.escape(str(text), quote=False)).replace("://", "&#58;//")
