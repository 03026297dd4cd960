"""``Page``: every component a handler reads or writes, by name (``layout`` builds it, ``handlers`` use it)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from .options import OptionsPanel
from .views import ViewSlot


@dataclass
class Page:
    """Every component a handler reads or writes."""

    prompt: gr.Textbox
    model: gr.Dropdown
    precision: gr.Dropdown  # the target's dtype: float32 or bfloat16 (``inputs.precision``)
    hardware: gr.Radio  # GPU or CPU, shown only on a ZeroGPU Space (``zerogpu``)
    pair_btn: gr.Button  # the GPU pair (``explorer.pairs``), shown where a GPU is present
    method: gr.Dropdown
    draft: gr.Dropdown
    gamma: gr.Slider
    controller: gr.Dropdown
    temperature: gr.Slider
    top_k: gr.Number
    top_p: gr.Slider
    max_new_tokens: gr.Slider
    seed: gr.Number
    run_btn: gr.Button
    stop_btn: gr.Button
    status: gr.Markdown
    banner: gr.HTML
    tokens: gr.HTML
    round_slider: gr.Slider
    prev_btn: gr.Button
    play_btn: gr.Button
    next_btn: gr.Button
    refusal_btn: gr.Button
    timer: gr.Timer
    round_detail: gr.Plot
    latency: gr.Plot
    why: gr.Markdown  # the run's speed explained in plain words (``viz.speed_explanation``)
    keeping: gr.HTML  # what keeping the text costs: quantized beside its copy alone and plain decoding (``viz.keeping``)
    audit: gr.Markdown  # the greedy audit against plain decoding (``explorer.audit``)
    guided: gr.HTML  # the selected round, step by step (``viz.guided_round_html``)
    guide_step: gr.State  # how many of its steps are shown
    guide_back: gr.Button
    guide_next: gr.Button
    guide_play: gr.Button
    guide_timer: gr.Timer
    theory_alpha: gr.Slider
    theory_c: gr.Slider
    theory_c_hat: gr.Slider
    theory: gr.Plot
    download: gr.DownloadButton
    upload: gr.UploadButton
    trace_note: gr.Markdown  # what an upload loaded, or why not, on the Traces tab where it was made
    trace_state: gr.State
    playing: gr.State
    view_slots: list[ViewSlot]
    options: OptionsPanel  # each method's own options, from the method registry

    def run_inputs(self) -> set:
        """What a run reads: the handler receives them as one dict keyed by component."""
        return {self.prompt, self.model, self.precision, self.hardware, self.method, self.draft, self.gamma, self.controller, self.temperature,
                self.top_k, self.top_p, self.max_new_tokens, self.seed, self.theory_alpha, self.theory_c,
                self.theory_c_hat, *self.options.components()}

    def round_views(self) -> list:
        """Outputs redrawn when the selected round changes."""
        return [self.tokens, self.round_detail, self.guided, self.guide_step] + [c for s in self.view_slots for c in (s.box, s.output)]

    def everything(self) -> list:
        """Outputs a whole new trace can touch."""
        return [self.trace_state, self.round_slider, self.banner, self.latency, self.why, self.audit, self.theory, self.status,
                self.keeping, self.download, self.timer, self.play_btn, self.playing] + self.round_views()
