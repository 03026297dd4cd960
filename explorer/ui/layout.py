"""The page: where its components go (``Page`` names them) and the events that connect them to ``Handlers``.

Sections: Run (prompt, model, method, drafter, γ / controller, sampling, length, seed; Run / Stop; the
glossary), the token view with the round stepper, the round detail, latency and why the run had its
speed, theory, the method views (one slot per registered view), the audit (``ui/audit``) and trace files. Element ids named in the project's contract are kept stable:
``prompt``, ``run``, ``stop``, ``round-slider``, ``tokens``, ``round-detail``, ``latency-plot``,
``theory-plot``, ``trace-download``, ``trace-upload``.
"""

from __future__ import annotations


from pathlib import Path

import gradio as gr

import explorer
from explorer import viz
from explorer.drafts import KINDS, draft_examples
from explorer.engine.controllers import CONTROLLERS
from explorer.limits import MAX_GAMMA, MAX_NEW_TOKENS

from .audit import audit_section, wire_audit
from .examples import EXAMPLES
from .glossary import glossary_markdown
from . import disk
from .handlers import Handlers, forget_session
from .inputs import PRECISIONS, precision_info
from .trace_files import TRACE_DIR
from explorer.limits import gpu_present
from explorer.pairs import GPU_PAIR, PAIRS

from .jobs import DECODE_CONCURRENCY, gated
from .long_jobs import LONG_CONCURRENCY
from . import zerogpu
from .my_runs import my_runs_section, wire_my_runs
from .options import build_options_panel
from .page import Page
from .race import race_section, wire_race
from .sections import bild_sweep_section, compare_section, theory_lab_section
from .views import build_view_slots
from .whatif import whatif_section

READY = ("Ready: **Run** answers the question above with `quantized`: the target's own weights in 4 bits draft, the "
         "target checks every token, so the text is exactly its own. Then the same 4-bit copy alone and plain "
         "decoding run beside it: **what keeping the text costs**. Or pick an example, or write a prompt.")
# Decodes are CPU/GPU bound: running more at once only slows each one down. Sessions beyond the limit
# wait in Gradio's queue (and see their place in it); ``jobs`` holds the work itself to the same number.
MODELS = ["default", "tiny-random"]
INTRO = (
    "# Speculative Decoding Explorer\n"
    "A small draft proposes γ tokens, the target model checks them all in one forward pass and keeps the "
    "longest prefix it agrees with (Leviathan et al. 2023). **Watch** a run round by round: which drafts were "
    "accepted, rejected or discarded, what the two models believed, where the time went and why. **Understand** "
    "one round step by step and the theory; **Compare** methods; **Audit** that a run is lossless; save and "
    "replay **Traces**. It opens on the headline: the target's own weights in 4 bits as its draft keep its text "
    "exactly and most of the 4-bit copy's speed."
)


# ← and → click ◀ Prev / Next ▶, except while the focus is in a field that uses the keys itself
ROUND_KEYS_JS = """() => {
  if (window.__roundKeys) return;
  window.__roundKeys = true;
  document.addEventListener('keydown', (e) => {
    const t = e.target, tag = ((t && t.tagName) || '').toLowerCase();
    if (tag === 'input' || tag === 'textarea' || tag === 'select' || (t && t.isContentEditable)) return;
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) return;
    const id = {ArrowLeft: 'prev-round', ArrowRight: 'next-round'}[e.key];
    const button = id && document.getElementById(id);
    if (button) { e.preventDefault(); button.click(); }
  });
}"""


# The page's own tooltip for any element with ``data-tip`` (tokens, …): shown at once beside the pointer,
# kept inside the window, never clipped by a scrolling box (the browser's ``title`` waits a second and more)
# figures fitted to their box and to a phone: one column of subplots, the legend below, wrapped titles
FIT_FIGURES_JS = (Path(__file__).with_name("fit_figures.js")).read_text(encoding="utf-8")
TIP_JS = """() => {
  if (window.__tips) return;
  window.__tips = true;
  const tip = document.createElement('div');
  tip.id = 'tip';
  tip.style.cssText = 'position:fixed;z-index:10000;pointer-events:none;display:none;max-width:420px;' +
    'background:#111827;color:#fff;font:12px/1.4 ui-sans-serif,system-ui,sans-serif;padding:5px 8px;' +
    'border-radius:5px;box-shadow:0 2px 8px rgba(0,0,0,.25);white-space:pre-wrap';
  document.body.appendChild(tip);
  const place = (e) => {
    const x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 6);
    const y = e.clientY + 18 + tip.offsetHeight > window.innerHeight ? e.clientY - tip.offsetHeight - 10 : e.clientY + 18;
    tip.style.left = Math.max(4, x) + 'px';
    tip.style.top = Math.max(4, y) + 'px';
  };
  document.addEventListener('mouseover', (e) => {
    const el = e.target.closest && e.target.closest('[data-tip]');
    if (!el) { tip.style.display = 'none'; return; }
    tip.textContent = el.getAttribute('data-tip');
    tip.style.display = 'block';
    place(e);
  });
  document.addEventListener('mousemove', (e) => { if (tip.style.display === 'block') place(e); });
  document.addEventListener('scroll', () => { tip.style.display = 'none'; }, true);
}"""


def build_demo() -> gr.Blocks:
    """The whole app; ``launch`` it with ``launch_options()`` for its theme and styles."""
    first = EXAMPLES[0]
    with gr.Blocks(title="Speculative Decoding Explorer", analytics_enabled=False,
                   delete_cache=(3600, 3600)) as demo:
        gr.Markdown(INTRO, elem_id="page-title")
        trace_state = gr.State(None)
        playing = gr.State(False)
        with gr.Tabs(elem_id="tabs", selected="watch"):
            with gr.Tab("Watch", id="watch", elem_id="tab-watch", render_children=True):
                with gr.Row(equal_height=False):
                    with gr.Column(scale=5, min_width=360):
                        prompt = gr.Textbox(label="Prompt", value=first.prompt, lines=6, max_lines=14, elem_id="prompt")
                        examples_slot = gr.Column()
                        with gr.Row():
                            run_btn = gr.Button("▶ Run", variant="primary", elem_id="run")
                            stop_btn = gr.Button("■ Stop", variant="stop", elem_id="stop")
                        # the headline, first under Run: quantized beside its 4-bit copy alone and plain decoding
                        # (filled after a run; hidden while one decodes, when the status below says how it goes)
                        keeping = gr.HTML(viz.keeping_html(None), css_template=viz.KEEPING_CSS, js_on_load=None,
                                          elem_id="keeping-cost", visible=first.method == "quantized")
                        status = gr.Markdown(READY, elem_id="status")
                        with gr.Row():
                            model = gr.Dropdown(MODELS, value="default", label="Target model", allow_custom_value=True,
                                                info="default: SmolLM2-135M-Instruct, or type hf:ORG/NAME", elem_id="model")
                            method = gr.Dropdown(list(explorer.METHODS), value=first.method, label="Method", elem_id="method")
                            precision = gr.Dropdown(list(PRECISIONS), value="float32", label="Precision",
                                                    info=precision_info(), elem_id="precision", min_width=130)
                            # only on a ZeroGPU Space: where a run decodes (the CPU when the GPU quota is spent)
                            hardware = gr.Radio(list(zerogpu.HARDWARE), value="GPU", label="Hardware",
                                                info="ZeroGPU: a shared GPU, charged to your quota; or this Space's CPU",
                                                visible=zerogpu.ON_ZERO_GPU, elem_id="hardware", min_width=130)
                        # where a GPU is present: the target where drafting pays (explorer.pairs)
                        pair_btn = gr.Button(f"GPU pair: {PAIRS[GPU_PAIR].label} drafted by the 135M default",
                                             visible=gpu_present(), size="sm", elem_id="gpu-pair")
                        with gr.Row():
                            draft = gr.Dropdown(draft_examples(), value=first.draft, label="Drafter", allow_custom_value=True,
                                                info=" · ".join(kind.form for kind in KINDS.values()), elem_id="draft")
                            # a dropdown, not eight radio buttons: one line until opened; its info is Markdown, where
                            # "*-ts, *-priced" showed as italics: the names are written out
                            controller = gr.Dropdown(list(CONTROLLERS), value=first.controller, label="γ controller",
                                                     info="how γ changes between rounds: fixed · heuristic (+2 after a "
                                                          "full accept, −1 otherwise) · dynamic-gamma (Theorem 3.8's "
                                                          "best γ at this run's α̂ and c) · cost-aware, beta-ts, cali-ts "
                                                          "and the -priced ones (draft only what pays here)",
                                                     elem_id="controller")
                        with gr.Row():
                            # Numbers, not sliders: a slider clamps a typed 100 to its end without a word; a number
                            # reaches the engine, whose limits (explorer/limits.py, the API's and the CLI's too)
                            # answer out-of-range values with one line on the page.
                            gamma = gr.Number(first.gamma, label="γ: tokens drafted per round", info=f"1 to {MAX_GAMMA}",
                                              elem_id="gamma")
                            max_new_tokens = gr.Number(64, label="max new tokens", info=f"1 to {MAX_NEW_TOKENS}",
                                                       elem_id="max-new-tokens")
                        with gr.Accordion("Sampling", open=True):
                            with gr.Row():
                                temperature = gr.Slider(0, 2, value=0.0, step=0.05, label="temperature (0 = greedy)",
                                                        elem_id="temperature")
                                top_p = gr.Slider(0.05, 1, value=1.0, step=0.05, label="top-p (1 = off)", elem_id="top-p")
                            with gr.Row():
                                top_k = gr.Number(0, label="top-k (0 = off)", elem_id="top-k")
                                seed = gr.Number(0, label="seed", info="0 to 2^63 − 1", elem_id="seed")
                        options = build_options_panel(first.method)
                        with gr.Accordion("Glossary: the words and symbols on this page", open=False, elem_id="glossary"):
                            gr.Markdown(glossary_markdown())
                        with examples_slot:
                            gr.Examples([[e.prompt, e.method, e.draft, e.gamma, e.controller] for e in EXAMPLES],
                                        inputs=[prompt, method, draft, gamma, controller],
                                        example_labels=[e.kind for e in EXAMPLES], label="Examples (prompt and a drafter that suits it)")
                    with gr.Column(scale=8):
                        banner = gr.HTML(viz.method_banner(first.method, explorer.METHODS.get(first.method)),
                                         css_template=viz.BANNER_CSS, js_on_load=None, elem_id="method-banner")
                        tokens = gr.HTML("<div class='tok-view'><span class='tok-empty'>Run a prompt (or upload a trace) "
                                         "to see its tokens round by round.</span></div>",
                                         css_template=viz.TOKEN_CSS, js_on_load=None, elem_id="tokens", min_height=160)
                        with gr.Row(elem_id="round-stepper", equal_height=True):
                            prev_btn = gr.Button("◀ Prev", size="sm", elem_id="prev-round", scale=0, min_width=80)
                            play_btn = gr.Button("▶ Play", size="sm", elem_id="play-rounds", scale=0, min_width=90)
                            next_btn = gr.Button("Next ▶", size="sm", elem_id="next-round", scale=0, min_width=80)
                            refusal_btn = gr.Button("Next refusal »", size="sm", elem_id="next-refusal", scale=0,
                                                    min_width=130)
                            round_slider = gr.Slider(1, 2, value=1, step=1, precision=0, label="Round", interactive=False,
                                                     elem_id="round-slider", scale=1)
                        timer = gr.Timer(0.8, active=False)
                        round_detail = gr.Plot(viz.round_detail_figure(None, 0), show_label=False, elem_id="round-detail")
                latency = gr.Plot(viz.latency_figure(None), show_label=False, elem_id="latency-plot")
                why = gr.Markdown("", elem_id="why-speed")
                view_slots = build_view_slots()
            with gr.Tab("Understand", id="understand", elem_id="tab-understand", render_children=True):
                gr.Markdown("### One round, step by step", elem_classes=["section-title"])
                gr.Markdown("The round selected in the Watch tab, as the algorithm runs it: draft → one parallel "
                            "verification → accept or reject each draft → the target's own correction or bonus token.")
                guide_step = gr.State(len(viz.GUIDE_STEPS))
                with gr.Row(elem_id="guide-stepper", equal_height=True):
                    guide_back = gr.Button("◀ Step back", size="sm", elem_id="guide-back", scale=0, min_width=110)
                    guide_next = gr.Button("Step ▶", size="sm", elem_id="guide-next", scale=0, min_width=90)
                    guide_play = gr.Button("▶ Play the round", size="sm", elem_id="guide-play", scale=0, min_width=150)
                guide_timer = gr.Timer(1.6, active=False)
                guided = gr.HTML(viz.guided_round_html(None, 0), css_template=viz.GUIDE_CSS, js_on_load=None,
                                 elem_id="guided-round")
                gr.Markdown("### Theory: expected speedup, optimal γ, arithmetic operations", elem_classes=["section-title"])
                with gr.Row():
                    theory_alpha = gr.Slider(0, 0.99, value=0.8, step=0.01, label="α: acceptance rate", elem_id="theory-alpha")
                    theory_c = gr.Slider(0, 1, value=0.1, step=0.01, label="c: draft / target time per forward",
                                         elem_id="theory-c")
                    theory_c_hat = gr.Slider(0, 1, value=0.1, step=0.01, label="ĉ: draft / target operations per token",
                                             elem_id="theory-c-hat")
                theory = gr.Plot(viz.theory_figure(0.8, 0.1, 0.1), show_label=False, elem_id="theory-plot")
                theory_lab_section(LONG_CONCURRENCY)  # the long jobs: their own queue (ui.long_jobs)
                whatif_section(LONG_CONCURRENCY)
            with gr.Tab("Compare", id="compare", elem_id="tab-compare", render_children=True):
                racing = race_section()
                mine = my_runs_section()
                compare = compare_section()
                bild_sweep_section(LONG_CONCURRENCY)
            with gr.Tab("Audit", id="audit", elem_id="tab-audit", render_children=True):
                audit = audit_section()
            with gr.Tab("Traces", id="traces", elem_id="tab-traces", render_children=True):
                gr.Markdown("### Traces: save a run, replay it anywhere without a model", elem_classes=["section-title"])
                with gr.Row():
                    download = gr.DownloadButton("⬇ Download this trace (.json)", interactive=False, elem_id="trace-download")
                    upload = gr.UploadButton("⬆ Upload a trace (.json) to replay", file_types=[".json"], type="binary",
                                             elem_id="trace-upload")
                # the answer to an upload, where it was made (the replay itself shows in Watch)
                trace_note = gr.Markdown("A trace you upload replays in the **Watch** tab: its rounds, views and "
                                         "audit, without the model.", elem_id="trace-upload-status")

        page = Page(prompt=prompt, model=model, precision=precision, hardware=hardware, pair_btn=pair_btn, method=method, draft=draft, gamma=gamma, controller=controller,
                    temperature=temperature, top_k=top_k, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed,
                    run_btn=run_btn, stop_btn=stop_btn, status=status, banner=banner, tokens=tokens,
                    round_slider=round_slider, prev_btn=prev_btn, play_btn=play_btn, next_btn=next_btn,
                    refusal_btn=refusal_btn, timer=timer,
                    round_detail=round_detail, latency=latency, why=why, keeping=keeping, audit=audit.greedy, guided=guided, guide_step=guide_step,
                    guide_back=guide_back, guide_next=guide_next, guide_play=guide_play, guide_timer=guide_timer, theory_alpha=theory_alpha, theory_c=theory_c,
                    theory_c_hat=theory_c_hat, theory=theory, download=download, upload=upload, trace_note=trace_note,
                    trace_state=trace_state, playing=playing, view_slots=view_slots, options=options)
        _wire(page, Handlers(page))
        wire_audit(page, audit, LONG_CONCURRENCY)
        wire_race(page, racing, compare, LONG_CONCURRENCY)
        wire_my_runs(mine, compare)
        demo.load(None, js=ROUND_KEYS_JS)  # ← → step through rounds (not while typing in a field)
        demo.load(None, js=TIP_JS)  # tooltips of [data-tip] elements, at once
        demo.load(None, js=FIT_FIGURES_JS)  # figures fitted to their box (and to a phone), after Plotly draws them
        demo.unload(forget_session)  # a closed page's trace file goes with it
        disk.start_trimming([TRACE_DIR])  # uploads and downloads bounded in total bytes
    return demo


def serving_demo() -> gr.Blocks:
    """The app as it is served (``python app.py``, the soak test): the page behind Gradio's queue, at most 64
    waiting events and 4 running at once unless an event sets its own limit (decodes: ``DECODE_CONCURRENCY``).
    ``launch`` it with ``launch_options()``."""
    demo = build_demo()
    demo.queue(default_concurrency_limit=4, max_size=64)
    return demo


def _wire(p: Page, h: Handlers) -> None:
    theory_inputs = [p.theory_alpha, p.theory_c, p.theory_c_hat]
    stepping = [p.trace_state, p.round_slider]
    play_outputs = [p.timer, p.play_btn, p.playing, p.round_slider, *p.round_views()]
    quiet = {"show_progress": "hidden", "api_visibility": "private"}
    # Run is greyed out while its decode runs (a second click would queue a second decode behind it) and
    # comes back when the decode ends, however it ends (``then`` follows success, error and Stop alike)
    # The run gives Run back as soon as its own rounds end (what it is weighed against is measured after, and a new
    # click ends that measurement: ``comparing``); the last chain of a session to end enables it for good
    p.run_btn.click(h.ask, outputs=[p.run_btn], queue=False, **quiet).then(
        gated(h.run),
        inputs=p.run_inputs(),
        outputs=[*p.everything(), p.run_btn, p.draft], concurrency_limit=DECODE_CONCURRENCY, concurrency_id="decode",
        show_progress="minimal", show_progress_on=[p.status], api_visibility="private",
    ).then(h.ran, outputs=[p.run_btn], queue=False, **quiet)
    # Not queued: a Stop must get through while this session's decode holds its place in the queue.
    p.stop_btn.click(h.stop, inputs=[p.status], outputs=[p.status], queue=False, **quiet)
    # `input` (not `change`): fired by the user's drag, click, arrow keys or number box, never by the
    # handlers' own updates, which draw the round themselves; so nothing is drawn twice.
    p.round_slider.input(h.show_round, inputs=stepping, outputs=p.round_views(), trigger_mode="always_last", **quiet)
    p.prev_btn.click(h.previous_round, inputs=stepping, outputs=[p.round_slider, *p.round_views()], **quiet)
    p.next_btn.click(h.next_round, inputs=stepping, outputs=[p.round_slider, *p.round_views()], **quiet)
    p.refusal_btn.click(h.next_refusal, inputs=stepping, outputs=[p.round_slider, *p.round_views()], **quiet)
    guiding = [p.trace_state, p.round_slider, p.guide_step]
    p.guide_back.click(lambda t, v, s: h.guide(t, v, s - 1), inputs=guiding, outputs=[p.guide_step, p.guided], **quiet)
    p.guide_next.click(lambda t, v, s: h.guide(t, v, s + 1), inputs=guiding, outputs=[p.guide_step, p.guided], **quiet)
    p.guide_play.click(h.play_guide, inputs=guiding, outputs=[p.guide_step, p.guided, p.guide_timer], **quiet)
    p.guide_timer.tick(h.guide_tick, inputs=guiding, outputs=[p.guide_step, p.guided, p.guide_timer], **quiet)
    p.play_btn.click(h.toggle_play, inputs=[*stepping, p.playing], outputs=play_outputs, **quiet)
    p.timer.tick(h.tick, inputs=stepping, outputs=play_outputs, **quiet)
    for slider in theory_inputs:  # `input`: drags, clicks and the arrow keys (`release` missed the keys)
        slider.input(h.theory, inputs=[*theory_inputs, p.trace_state], outputs=[p.theory],
                       trigger_mode="always_last", **quiet)
    p.method.change(h.method_changed, inputs=[p.method, p.model, p.draft, p.gamma, p.controller],
                    outputs=[p.banner, p.draft, p.controller, p.gamma, p.status, *p.options.boxes.values()], **quiet)
    for control in p.options.controls.values():  # an option that makes a run lossy (or not) shows in the banner
        control.change(h.options_changed, inputs={p.method, *p.options.components()}, outputs=[p.banner], **quiet)
    p.pair_btn.click(h.use_pair, outputs=[p.model, p.method, p.draft, p.gamma, p.status], **quiet)
    p.upload.upload(h.upload, inputs=[p.upload, *theory_inputs], outputs=[*p.everything(), p.trace_note], **quiet)
    gr.api(gated(h.api_decode), api_name="decode", concurrency_limit=DECODE_CONCURRENCY, concurrency_id="decode")
