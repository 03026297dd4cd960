"""The app's API: ``/decode`` (Gradio's client and MCP), a decode whose per-round progress streams back and
whose last message is the trace as JSON."""

from __future__ import annotations

import logging
from typing import Iterator

import gradio as gr

import explorer
from explorer import methods
from explorer.drafts import draft_forms
from explorer.engine.controllers import DEFAULT_GAMMA
from explorer.errors import one_line
from explorer.limits import MAX_GAMMA, MAX_NEW_TOKENS, MAX_TEMPERATURE, MIN_TEMPERATURE

from . import zerogpu
from .inputs import decode_options
from .session import history_session

log = logging.getLogger(__name__)


class ApiDecode:
    """``/decode``: a handler of the page's (``handlers.Handlers``) that draws nothing."""

    def api_decode(self, prompt: str, method: str = "speculative", draft: str | None = "early-exit:8",
                   gamma: int = DEFAULT_GAMMA, temperature: float = 0.0, max_new_tokens: int = 64, seed: int = 0,
                   model: str = "default", request: gr.Request = None) -> Iterator[str]:
        # its docstring, Gradio's API documentation and the MCP tool's description, is ``api_doc()``

        # A generator on purpose: Gradio resumes it once per round, so a cancelled job or a client that
        # went away ends the decode at the next round instead of running it to the end on cores whose
        # concurrency slot was already given to someone else.
        try:
            # no controller: the engine's default (fixed γ), except eesd's Thompson sampling from its preset
            options = decode_options(method, draft, gamma, None, temperature, 0, 1.0, max_new_tokens, seed)
            # the caller's session (a suffix run drafts from its own earlier outputs, never another caller's; an MCP
            # call, which cannot be told from other MCP calls, from none)
            session = history_session(request, api=True)
            if zerogpu.ON_ZERO_GPU:  # the whole decode in one GPU call
                yield "decoding on a ZeroGPU GPU (the whole run in one call)"
                yield zerogpu.decode(model, prompt, session, options, baseline=False)[0].to_json()
                return
            decoding = explorer.stream(model, prompt, session=session, **options)
            tokens = searched = 0
            for r in decoding.steps():
                if r is None:  # a step of work between rounds (beam search): a cancelled job ends here
                    searched += 1
                    yield f"searching: {searched} search rounds without a newly settled round"
                    continue
                tokens += len(r.emitted)
                yield f"round {r.index + 1}: {tokens} / {options['max_new_tokens']} tokens"
            yield decoding.trace().to_json()
        except explorer.ExplorerError as err:
            raise gr.Error(one_line(err), print_exception=False) from None  # API clients get the plain line
        except Exception:
            log.exception("api decode failed")
            raise gr.Error("something went wrong on the server while decoding (it is logged)",
                           print_exception=False) from None


def api_doc() -> str:
    """``api_decode``'s docstring: its arguments, with the methods and draft kinds read from the registry."""
    every = methods.discover()  # every method registers its draft kinds as it is imported
    draftless = [name for name, method in every.items() if method.draft == "none"]
    return f"""Decode a prompt with a speculative-decoding method and return its per-round trace as JSON.

        Args:
            prompt: the text to continue; it is wrapped in the model's chat template.
            method: {", ".join(every)}.
            draft: the drafter: {draft_forms()}; {", ".join(draftless)} ignore it.
            gamma: tokens drafted per round, 1 to {MAX_GAMMA}.
            temperature: 0 for greedy decoding, else the sampling temperature, {MIN_TEMPERATURE:g} to {MAX_TEMPERATURE:g}.
            max_new_tokens: how many tokens to generate, 1 to {MAX_NEW_TOKENS}.
            seed: the random seed, 0 to 2^63 - 1.
            model: default (SmolLM2-135M-Instruct, offline) or hf:ORG/NAME.
        Returns:
            One progress line per round (or per search step that settles no round), then the trace as JSON
            (schema spec-explorer/trace@2; what Client.predict returns, and explorer.load_trace reads back).
        """


ApiDecode.api_decode.__doc__ = api_doc()
