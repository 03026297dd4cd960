"""The page's look: a theme with system fonts (no font downloads, so it works offline) and the CSS
that ``launch`` takes (Gradio 6 moved ``theme`` and ``css`` from ``gr.Blocks`` to ``launch``).

The token view's own styles travel with its component (``css_template``), so tokens are coloured even
when the app is launched without these options."""

from __future__ import annotations

import importlib.util

import gradio as gr

from explorer.limits import MAX_TRACE_BYTES

PAGE_CSS = """
.gradio-container { max-width: 1500px !important; }
#page-title h1 { margin-bottom: 0; }
#page-title p { margin-top: 4px; color: #4b5563; }
#status { min-height: 2.2em; font-size: 13px; }
#status p { margin: 0; }
#tokens { min-height: 180px; }
#round-stepper { align-items: center; }
#round-stepper button { max-width: 110px; }
.section-title h3 { margin: 10px 0 0; }
/* the tabs are the page's structure: make them read as such */
#tabs .tab-container button { font-size: 15px; font-weight: 600; padding: 8px 18px; }
@media (max-width: 520px) {  /* a phone: all five tabs still fit on one line (none folds into a menu) */
  #tabs .tab-container button { font-size: 12.5px; padding: 6px 5px; }
  .gradio-container { padding-left: 6px !important; padding-right: 6px !important; }
}
@media (max-width: 480px) {  /* figures on a phone (fit_figures.js lays them out): no mode bar over their text */
  .modebar-container { display: none !important; }
  table { display: block; overflow-x: auto; }  /* a wide table scrolls inside its box */
  /* a dropdown takes its row's whole width: its value (prompt-lookup:3, speculative:prompt-lookup:3) shows whole
     instead of running under its arrow in half a row (#42) */
  #tabs .block:has(> .container > .wrap input[role="combobox"]) { min-width: 100% !important; flex-basis: 100% !important; }
}
/* whatever the width, a dropdown's text stops before its arrow */
#tabs .wrap-inner input[role="combobox"] { padding-right: 22px; text-overflow: ellipsis; }
/* method views framed like every other block: a thin light border, not the theme's heavy group frame */
.method-view { border: 1px solid #e5e7eb !important; border-radius: 8px !important; box-shadow: none !important; }
.method-view .block { border-width: 0 !important; box-shadow: none !important; }  /* the view's own block drew it, 3 px dark */
/* tables of figures (class figure-table: Compare, the BiLD sweep, the theory lab): a number never breaks across
   lines; a wide table scrolls sideways */
#tabs .figure-table table { display: block; overflow-x: auto; padding-left: 0; }  /* no padding where passing cells show */
#tabs .figure-table :is(td, th) { white-space: nowrap; }
/* scrolled sideways, a row still says what it is: the first column stays put (opaque, over the cells passing under) */
#tabs .figure-table :is(td, th):first-child {
  position: sticky; left: 0; z-index: 1; background: var(--background-fill-primary, #fff);
  /* its own right edge and row line (a sticky cell's background covers the table's collapsed borders) */
  box-shadow: inset -1px 0 0 var(--table-border-color, #94a3b8), inset 0 -1px 0 var(--table-border-color, #94a3b8); }
@media (max-width: 480px) {  /* on a phone the names may wrap, so the numbers keep most of the width */
  #tabs .figure-table :is(td, th):first-child { white-space: normal; overflow-wrap: anywhere; min-width: 9em; max-width: 38vw; }
}
"""


def theme() -> gr.themes.Base:
    return gr.themes.Soft(
        primary_hue="blue", neutral_hue="slate",
        font=["ui-sans-serif", "system-ui", "-apple-system", "Segoe UI", "Roboto", "sans-serif"],
        font_mono=["ui-monospace", "SFMono-Regular", "Menlo", "monospace"],
    )


def launch_options() -> dict:
    """Keyword arguments for ``demo.launch`` (merged with the caller's own)."""
    # Gradio refuses larger uploads before reading them; the trace loader checks the same bound again
    # the `decode` endpoint is also an MCP tool where Gradio's MCP extra is installed (gradio[mcp]); every
    # UI-only event is api_visibility="private", so it is the only tool
    mcp = importlib.util.find_spec("mcp") is not None
    return {"theme": theme(), "css": PAGE_CSS, "max_file_size": MAX_TRACE_BYTES, "show_error": False,
            "mcp_server": mcp}
