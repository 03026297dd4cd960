"""The settings: the method's controls follow its record when the method changes, a model pair fills in
the page, and the theory figure follows its sliders."""

from __future__ import annotations

import gradio as gr

import explorer
from explorer import methods, viz
from explorer.engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA
from explorer.limits import MAX_GAMMA
from explorer.pairs import GPU_PAIR, get_pair

from .baseline import BASELINES
from .showing import Showing


class Controls(Showing):
    """The method menu, the model pair button and the theory sliders."""

    def theory(self, alpha, c, c_hat, trace):
        baseline = BASELINES.get(trace) if trace is not None else None
        return {self.page.theory: viz.theory_figure(alpha, c, c_hat, trace, baseline)}

    def method_changed(self, method, model="default", draft=None, gamma=None, controller=None):
        """The banner describes the chosen method and the controls follow its record: no drafter for a
        method that drafts by itself (said in the box); a preset method (eesd, eagle) fills in what it
        runs for this model; any other keeps a draft the user typed when it is one the method runs, and
        otherwise switches to the method's default draft and says why, and γ and the controller go back
        to the defaults (a preset's γ cap or Thompson controller does not carry over). γ and the
        controller show only where they apply."""
        p = self.page
        chosen = methods.discover().get(method)
        if chosen is None:
            return {}
        takes_draft = chosen.draft != "none"
        defaults = chosen.make_options({})
        note = f"1 to {MAX_GAMMA}" if chosen.uses_gamma else f"not used by {method}"
        updates = {p.banner: viz.method_banner(method, chosen.summary, chosen.is_lossy(defaults)),
                   p.draft: gr.Dropdown(interactive=takes_draft, info=None),
                   # what does not apply is hidden, not just greyed out (γ and the controller for bita, say)
                   p.gamma: gr.Number(interactive=chosen.uses_gamma, visible=chosen.uses_gamma, info=note),
                   p.controller: gr.Dropdown(interactive=chosen.controller, visible=chosen.controller),
                   **p.options.visible_for(method)}
        typed = str(draft or "").strip()
        if not takes_draft:  # the box shows no draft rather than one that would not run
            updates[p.draft] = gr.Dropdown(value="", interactive=False, info=chosen.draft_words or None, allow_custom_value=True)
        elif chosen.preset is not None:  # eesd, eagle: what the method runs for this model
            try:
                preset = explorer.method_preset(method, (model or "default").strip())
            except explorer.ExplorerError as err:
                return {**updates, p.status: f"⚠️ {viz.safe_markdown(err)}"}
            updates.update({p.draft: gr.Dropdown(value=preset["draft"], interactive=True, info=None, allow_custom_value=True),
                            p.controller: gr.Dropdown(value=preset["controller"], interactive=True, visible=True),
                            p.gamma: gr.Number(value=preset["gamma"], interactive=True, visible=True, info=note),
                            p.status: f"{method.upper()} preset: {preset['draft']}, {preset['controller']}, γ cap "
                                      f"{preset['gamma']}. {preset.get('why', '')}"})
        else:
            said = []
            if not chosen.accepts_draft(typed, defaults):
                updates[p.draft] = gr.Dropdown(value=chosen.default_draft, interactive=True, info=None,
                                               allow_custom_value=True)
                said.append(f"{chosen.draft_words} " if chosen.draft_words else "")
                said.append(f"The drafter is now {chosen.default_draft}.")
            reset = []
            if chosen.uses_gamma and gamma is not None and gamma != DEFAULT_GAMMA:
                updates[p.gamma] = gr.Number(value=DEFAULT_GAMMA, interactive=True, visible=True, info=note)
                reset.append(f"γ {DEFAULT_GAMMA}")
            if chosen.controller and controller is not None and controller != DEFAULT_CONTROLLER:
                updates[p.controller] = gr.Dropdown(value=DEFAULT_CONTROLLER, interactive=True, visible=True)
                reset.append(f"controller {DEFAULT_CONTROLLER}")
            if reset:
                said.append(f" Back to the defaults for {method}: {' and '.join(reset)} (set them again to "
                            "change them).")
            if said:
                updates[p.status] = viz.safe_markdown("".join(said).strip())
        return updates

    def options_changed(self, values: dict) -> dict:
        """A method's option changed: the banner says whether a run with these options is lossy (the copy's role
        *alone* made ``quantized`` lossy while the banner still called it lossless, #48)."""
        p = self.page
        method = values.get(p.method)
        chosen = methods.discover().get(method)
        if chosen is None:
            return {}
        try:
            lossy = chosen.is_lossy(chosen.make_options(p.options.keywords(method, values)))
        except (explorer.ExplorerError, TypeError, ValueError):  # a value still being typed: the run will say
            return {}
        return {p.banner: viz.method_banner(method, chosen.summary, lossy)}

    def use_pair(self, name: str = GPU_PAIR) -> dict:
        """A model pair (``explorer.pairs``) on the page: its target, speculative decoding with its first draft and
        its γ, and why drafting pays there in the status."""
        p, pair = self.page, get_pair(name)
        return {p.model: pair.target, p.method: "speculative",
                p.draft: gr.Dropdown(value=pair.drafts[0], interactive=True, allow_custom_value=True),
                p.gamma: gr.Number(value=pair.gamma, interactive=True, visible=True),
                p.status: viz.safe_markdown(f"{pair.why()} {pair.fetch[:1].upper() + pair.fetch[1:] + '. ' if pair.fetch else ''}"
                                            "Press Run.")}


def draft_left_behind(method: str, model: str, draft) -> str | None:
    """The drafter ``method`` runs in place of ``draft`` where ``draft`` is one the page put there for another method
    (a default or a preset) and ``method`` refuses it; None otherwise. Why: Run clicked right after the method
    changed reads the drafter box before the method's own drafter has reached it (``method_changed``), and sent,
    say, ``quantized``'s ``int4`` to ``hierarchical``, which refused it. A drafter the user typed is theirs: one that
    is no method's default or preset is left for the run to refuse in its own words. An empty box is the page's too:
    it empties the box for a method that drafts by itself (``method_changed``), and Run pressed right after switching
    from one (``eagle-tree`` to ``bild``, say) read it empty."""
    registry = methods.discover()
    chosen = registry.get(method)
    typed = str(draft or "").strip()
    if chosen is None or chosen.draft == "none" or (typed and chosen.accepts_draft(typed, chosen.make_options({}))):
        return None
    model = (model or "default").strip()
    presets = {}
    for name, record in registry.items():
        if record.preset is not None:
            try:
                presets[name] = explorer.method_preset(name, model)["draft"]
            except explorer.ExplorerError:  # no preset for this model: nothing of it can be on the page
                pass
    if typed and typed not in {record.default_draft for record in registry.values()} | set(presets.values()):
        return None
    return presets.get(method, chosen.default_draft)
