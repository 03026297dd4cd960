"""The public Python API: ``decode`` (a whole run) and ``stream`` (round by round).

Both resolve the model, draft, controller and sampling settings, validate them (every bad value raises
``ExplorerError`` with one readable line), and run the engine's round loop. ``stream`` returns a
``Decoding``: iterate it for ``RoundTrace`` objects as they are decoded; ``Decoding.trace()`` is the
``RunTrace`` of what has been decoded so far, so a run stopped half way is still a usable trace.
"""

from __future__ import annotations

import dataclasses
import threading
from collections import OrderedDict
from typing import Iterator


from . import theory
from .engine.bild import BildConfig, bild_rounds
from .engine.controllers import check_controller, make_controller
from .engine.costs import verify_cost_curve
from .engine.drafters import make_drafter
from .engine.sampling import Rng, SamplingConfig
from .engine.speculative import decode_rounds
from .engine.trace import RoundTrace, RunTrace, Settings, Summary, alpha_hat
from .errors import ExplorerError
from .limits import MAX_NEW_TOKENS, MAX_PROMPT_CHARS, MODEL_CACHE_BYTES, MAX_SEED, MAX_SPEC_CHARS, clip
from . import exits
from .models import LoadedModel, load

METHODS = {
    "ar": "autoregressive: one target forward per token (the baseline)",
    "speculative": "speculative sampling (Leviathan et al.): draft γ tokens, verify them in one target pass",
    "eesd": "EESD: speculative decoding with a trained early-exit draft that shares the target's first layers, "
            "and a Thompson-sampling stop rule (the shipped preset for this model)",
    "bild": "Big Little Decoder (Kim et al.): the small model writes, the large one takes over and rolls back "
            "(lossy)",
    "bita": "BiTA (Lin et al.): trained mask tokens draft a token tree that the target verifies while drafting the "
            "next one, in one forward pass (no draft model)",
}
LOSSY = frozenset({"bild"})


class Decoding:
    """A run in progress: iterate for rounds; ``trace()`` at any time for the run so far."""

    def __init__(self, target: LoadedModel, method: str, draft_name: str | None, settings: Settings,
                 prompt_ids: list[int], prompt: str | None, rounds: Iterator[tuple[RoundTrace, float]],
                 draft_about: str | None = None):
        self.target = target
        self.draft_about = draft_about
        self.method = method
        self.draft_name = draft_name
        self.settings = settings
        self.prompt_ids = tuple(prompt_ids)
        self.prompt = prompt
        self.rounds: list[RoundTrace] = []
        self._record_s = 0.0
        self._source = rounds
        self._finished = False

    def __iter__(self) -> Iterator[RoundTrace]:
        for record, record_s in self._source:
            self.rounds.append(record)
            self._record_s += record_s
            yield record
        self._finished = True

    def run(self) -> RunTrace:
        """Decode to the end and return the trace."""
        for _ in self:
            pass
        return self.trace()

    def trace(self) -> RunTrace:
        """The run so far; ``summary.stop_reason`` is ``stopped`` when it has not finished."""
        rounds = tuple(self.rounds)
        output = [t for r in rounds for t in r.emitted]
        if not self._finished:
            stop = "stopped"
        elif output and output[-1] in self.target.eos_token_ids:
            stop = "eos"
        else:
            stop = "max_new_tokens"
        every_id = list(self.prompt_ids) + output
        for r in rounds:
            every_id += list(r.drafted)
            for rows in (r.draft_top, r.target_top):
                every_id += [i for row in rows for i, _ in row]
            every_id += [i for i, _ in (r.residual_top or ())]
            every_id += [n["token"] for n in (r.tree or {}).get("nodes", ())]
        return RunTrace(
            method=self.method, model=self.target.name, draft=self.draft_name, settings=self.settings,
            prompt_ids=self.prompt_ids, output_ids=tuple(output), text=self.target.decode(output),
            rounds=rounds, summary=summarize(rounds, self._record_s, stop, self.method), prompt=self.prompt,
            draft_about=self.draft_about,
            device=str(self.target.device), dtype=str(self.target.dtype).replace("torch.", ""),
            token_text=self.target.token_texts(every_id),
        )


def summarize(rounds: tuple[RoundTrace, ...], record_s: float, stop_reason: str, method: str = "speculative") -> Summary:
    """Run totals from the rounds (see ``Summary`` for the definitions). Theorem 3.8 predicts only the
    lossless speculative methods."""
    new_tokens = sum(len(r.emitted) for r in rounds)
    drafted = sum(len(r.drafted) for r in rounds)
    accepted = sum(r.n_accepted for r in rounds)
    target_forwards = sum(r.target_forwards for r in rounds)
    draft_forwards = sum(r.draft_forwards for r in rounds)
    draft_s = sum(r.timing.draft_s for r in rounds)
    verify_s = sum(r.timing.verify_s for r in rounds)
    other_s = sum(r.timing.other_s for r in rounds)
    wall_s = draft_s + verify_s + other_s + record_s
    drafting = [r for r in rounds if r.drafted]
    mean_gamma = sum(len(r.drafted) for r in drafting) / len(drafting) if drafting else 0.0
    alpha = alpha_hat(rounds)
    c = _cost_ratio(rounds)
    predicted = eq14 = None
    if alpha is not None and c is not None and mean_gamma > 0 and method not in LOSSY:
        predicted = float(theory.speedup(min(alpha, 1.0), mean_gamma, c))
    v_d = accepted / drafted if drafted else None
    r_d = accepted / new_tokens if drafted and new_tokens else None
    if v_d is not None and r_d is not None and c is not None and method not in LOSSY:
        # with nothing accepted eq. 14 is 0/0; eq. 13's time is then drafted·T_d + L·T_t
        eq14 = float(theory.eesd_speedup(v_d, r_d, c)) if accepted else 1 / (1 + c * drafted / new_tokens)
        eq14 = eq14 if abs(eq14) < float("inf") else None  # nan (0/0) when nothing was accepted and c = 0
    return Summary(
        new_tokens=new_tokens, rounds=len(rounds), drafted=drafted, accepted=accepted,
        acceptance_rate=accepted / drafted if drafted else None, alpha_hat=alpha, mean_gamma=mean_gamma,
        tokens_per_target_forward=new_tokens / target_forwards if target_forwards else None,
        target_forwards=target_forwards, draft_forwards=draft_forwards, draft_s=draft_s, verify_s=verify_s,
        other_s=other_s, wall_s=wall_s, tokens_per_s=new_tokens / wall_s if wall_s > 0 else None,
        c_measured=c, predicted_speedup=predicted, record_s=record_s, stop_reason=stop_reason,
        v_d=v_d, r_d=r_d, hm=theory.harmonic_mean(v_d, r_d) if v_d is not None else None, eq14_speedup=eq14,
    )


def _cost_ratio(rounds) -> float | None:
    """c = seconds per draft forward / seconds per target forward, over the rounds after the first (the
    first verification also runs the whole prompt, which would make the target look slow)."""
    later = [r for r in rounds[1:] if r.drafted and r.target_forwards]
    if not later:
        return None
    draft_forwards = sum(r.draft_forwards for r in later)
    per_target = sum(r.timing.verify_s for r in later) / sum(r.target_forwards for r in later)
    per_draft = sum(r.timing.draft_s for r in later) / draft_forwards if draft_forwards else 0.0
    return per_draft / per_target if per_target > 0 else None


def stream(model, prompt: str | None = None, *, prompt_ids: list[int] | None = None, method: str | None = None,
           draft=None, gamma: int | None = None, controller: str | None = None, temperature: float = 0.0, top_k: int = 0,
           top_p: float = 1.0, max_new_tokens: int = 64, seed: int = 0, chat: bool = True,
           fallback_threshold: float = 0.6, rollback_threshold: float | None = 5.0, max_small_steps: int = 10,
           bita_tree: str = "efficient", bita_masks: int | None = None, bita_top_k: int = 3,
           bita_tokens: str | None = None, device=None, dtype=None) -> Decoding:
    """Start a run and return it as an iterable ``Decoding`` of rounds.

    ``model`` and ``draft`` take a spec string (``default``, ``hf:ORG/NAME``, ``tiny-random:SEED``), a
    ``LoadedModel`` or a ``transformers`` model object; ``draft`` also takes ``early-exit:N`` and
    ``prompt-lookup:n``. ``method`` defaults to ``speculative`` when a draft is given, else ``ar``.
    ``bild`` takes the small model as ``draft`` and its thresholds α_FB, α_RB (``inf``/None: never roll
    back) and the cap on a small-model turn. ``eesd`` fills draft, controller and γ (the cap on a draft)
    from the preset shipped for the model (``exits.eesd_preset``) where they are not given.
    ``gamma`` defaults to 4 and ``controller`` to ``fixed``. ``bita`` needs no draft: ``bita_tree``
    (efficient | full | straightforward), ``bita_masks`` (M; default: all the tokens' masks), ``bita_top_k``
    and ``bita_tokens`` (auto: the tokens shipped for the model, else untrained; untrained; or a path).
    """
    model, draft = _spec(model, "model"), _spec(draft, "draft")
    target = _load_cached(model, device, dtype)
    method = method or ("speculative" if draft is not None else "ar")
    if method not in METHODS:
        raise ExplorerError(f"unknown method {method!r}: use one of {', '.join(METHODS)}")
    if method == "eesd":
        preset = exits.eesd_preset(target.model)
        draft = draft if draft is not None else preset["draft"]
        controller = controller or preset["controller"]
        gamma = gamma if gamma is not None else preset["gamma"]
    gamma = 4 if gamma is None else gamma
    controller = controller or "fixed"
    cfg = SamplingConfig(float(temperature), top_k, float(top_p))
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ExplorerError(f"seed must be a whole number from 0 to 2^63 - 1, got {clip(seed)}")
    curve = lambda: verify_cost_curve(target, max_tokens=gamma + 1)  # noqa: E731 (measured only if priced)
    check_controller(controller, gamma)  # refused before anything else runs
    if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ExplorerError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS}, got {max_new_tokens!r}")
    ids = _prompt_ids(target, prompt, prompt_ids, chat, max_new_tokens)
    drafter = None
    if method == "bita":  # no drafter: the target drafts for itself with mask tokens (BiTA section 3.2)
        settings = Settings(temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p, gamma=gamma,
                            controller=controller, seed=seed, max_new_tokens=max_new_tokens, chat=chat)
        return _bita(target, settings, cfg, ids, prompt, bita_tree, bita_masks, bita_top_k, bita_tokens, seed)
    if method != "ar":
        if draft is None:
            raise ExplorerError(f"method {method!r} needs a draft: model:<name>, early-exit:N or prompt-lookup:n")
        drafter = make_drafter(draft, target, lambda spec: _load_cached(spec, device, dtype))
    settings = Settings(temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p, gamma=gamma,
                        controller=controller, seed=seed, max_new_tokens=max_new_tokens, chat=chat)
    if method == "bild":
        if not drafter.gives_distributions:
            raise ExplorerError("bild needs a small model that gives distributions: model:<name> or early-exit:N")
        if rollback_threshold is not None and rollback_threshold == float("inf"):
            rollback_threshold = None
        bild = BildConfig(float(fallback_threshold), rollback_threshold, max_small_steps)
        settings = dataclasses.replace(settings, controller="bild", gamma=max_small_steps,
                                       fallback_threshold=bild.fallback_threshold,
                                       rollback_threshold=bild.rollback_threshold, max_small_steps=max_small_steps)
        rounds = bild_rounds(target, drafter, bild, cfg, ids, max_new_tokens, Rng(seed))
    else:
        ctrl = make_controller(controller, gamma, curve, seed, drafter)
        rounds = decode_rounds(target, drafter, ctrl, cfg, ids, max_new_tokens, Rng(seed))
    return Decoding(target, method, drafter.spec if drafter else None, settings, ids, prompt, rounds,
                    drafter.about if drafter else None)


def _bita(target: LoadedModel, settings: Settings, cfg: SamplingConfig, ids: list[int], prompt, tree: str,
          masks: int | None, top_k: int, tokens_spec: str | None, seed: int) -> Decoding:
    """BiTA's run: its tokens (shipped, untrained or a file) and tree; γ in the settings is M."""
    from .bita_tokens import tokens_for
    from .engine.bita import BitaConfig, bita_rounds

    tokens = tokens_for(target.model, tokens_spec, masks)
    bita = BitaConfig(tree, tokens.n_masks, top_k)
    settings = dataclasses.replace(settings, controller=f"bita-{bita.tree}", gamma=bita.masks)
    rounds = bita_rounds(target, tokens, bita, cfg, ids, settings.max_new_tokens, Rng(seed))
    return Decoding(target, "bita", f"bita:{tokens.name}", settings, ids, prompt, rounds, tokens.describe())


def eesd_preset(model="default", device=None, dtype=None) -> dict:
    """What ``method="eesd"`` runs for this model: {draft, controller, gamma, why}."""
    return exits.eesd_preset(_load_cached(model, device, dtype).model)


def decode(model, prompt: str | None = None, **kwargs) -> RunTrace:
    """Decode a whole run and return its ``RunTrace`` (same arguments as ``stream``)."""
    return stream(model, prompt, **kwargs).run()


# Loaded models, least recently used first, within ``limits.MODEL_CACHE_BYTES`` of weights: each
# distinct spec (tiny-random:1, :2, ... or any hf: id) would otherwise stay in memory for good.
_LOADED: OrderedDict[tuple, LoadedModel] = OrderedDict()
# One load at a time: ``transformers`` builds models under process-wide init contexts (meta device), so
# two threads loading at once (the app's preload and a first visitor) corrupt each other's weights.
_LOAD_LOCK = threading.Lock()


def _load_cached(spec, device, dtype) -> LoadedModel:
    """Load each model spec once per process (thread-safe) and keep the most recently used ones that
    fit the byte budget; loaded models are shared read-only. An evicted model that a decode still
    holds lives on until that decode ends (it holds a reference), then memory is returned."""
    with _LOAD_LOCK:
        if not isinstance(spec, str):
            return load(spec, device=device, dtype=dtype)
        key = (spec.strip(), str(device), str(dtype))
        if key in _LOADED:
            _LOADED.move_to_end(key)
            return _LOADED[key]
        loaded = _LOADED[key] = load(spec, device=device, dtype=dtype)
        while len(_LOADED) > 1 and sum(map(model_bytes, _LOADED.values())) > MODEL_CACHE_BYTES:
            _LOADED.popitem(last=False)
        return loaded


def model_bytes(loaded: LoadedModel) -> int:
    """Bytes of a model's parameters and buffers (tied weights counted once)."""
    tensors = {t.data_ptr(): t for t in [*loaded.model.parameters(), *loaded.model.buffers()]}
    return sum(t.numel() * t.element_size() for t in tensors.values())


def _spec(value, what: str):
    """A model or draft given as a spec string must be a short one (errors echo it); model objects and
    ``None`` pass through."""
    if value is None or not isinstance(value, (str, bytes, int, float, bool, list, tuple, dict)):
        return value  # a LoadedModel or a transformers model
    if not isinstance(value, str):
        raise ExplorerError(f"{what} must be a spec string such as 'default', got {type(value).__name__} {clip(value)}")
    if len(value) > MAX_SPEC_CHARS:
        raise ExplorerError(f"the {what} spec has {len(value)} characters (at most {MAX_SPEC_CHARS}): "
                            f"{clip(value, 40)}")
    return value


def _prompt_ids(target: LoadedModel, prompt, prompt_ids, chat: bool, max_new_tokens: int) -> list[int]:
    if prompt_ids is not None:
        if prompt is not None:
            raise ExplorerError("give either a prompt or prompt_ids, not both")
        ids = [int(i) for i in prompt_ids]
        bad = [i for i in ids if not 0 <= i < target.vocab_size]
        if bad:
            raise ExplorerError(f"prompt_ids has ids outside the vocabulary [0, {target.vocab_size}): {bad[:5]}")
    else:
        if prompt is None or not str(prompt).strip():
            raise ExplorerError("the prompt is empty: type some text (or pass prompt_ids)")
        prompt = str(prompt)
        if len(prompt) > MAX_PROMPT_CHARS:
            raise ExplorerError(f"the prompt has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS} "
                                "(EXPLORER_MAX_PROMPT_CHARS): shorten it")
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError as err:  # a lone surrogate, e.g. half of an emoji cut by a client
            raise ExplorerError(f"the prompt is not valid text (character {err.start + 1} is a lone surrogate "
                                f"{prompt[err.start]!r}): remove it or paste the text again") from None
        ids = target.encode(prompt, chat=chat)
    if not ids:
        raise ExplorerError("the prompt has no tokens")
    limit = getattr(target.model.config, "max_position_embeddings", None)
    if limit and len(ids) + max_new_tokens > limit:
        raise ExplorerError(
            f"the prompt ({len(ids)} tokens) plus max_new_tokens ({max_new_tokens}) exceeds the model's "
            f"context of {limit} tokens: shorten the prompt or ask for fewer tokens"
        )
    return ids


