"""The public Python API: ``decode`` (a whole run) and ``stream`` (round by round).

Both resolve the model, draft, controller and sampling settings, validate them (every bad value raises
``ExplorerError`` with one readable line), and run the engine's round loop. ``stream`` returns a
``Decoding``: iterate it for ``RoundTrace`` objects as they are decoded; ``Decoding.trace()`` is the
``RunTrace`` of what has been decoded so far, so a run stopped half way is still a usable trace.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
import weakref
from collections import OrderedDict, deque

from . import methods
from .engine import fast
from .engine.controllers import DEFAULT_CONTROLLER, DEFAULT_GAMMA, check_controller
from .engine.sampling import SamplingConfig
from .trace import RunTrace, Settings
from .drafts import draft_forms
from .errors import ExplorerError
from .limits import (MAX_NEW_TOKENS, MAX_PROMPT_CHARS, MODEL_CACHE_BYTES, MAX_SEED, MAX_SPEC_CHARS,
                     VISITOR_MODEL_LOADS, VISITOR_LOADS_WINDOW_S, clip)
from .models import LoadedModel, load, resolve_device, resolve_dtype
from .models.loaded import derived_bytes, resident_bytes
from .run import Decoding, summarize  # noqa: F401 (summarize: public here since the first release)

METHODS = methods.Summaries()  # name → one line, from the registry (explorer/methods)


def stream(model, prompt: str | None = None, *, prompt_ids: list[int] | None = None, method: str | None = None,
           draft=None, gamma: int | None = None, controller: str | None = None, temperature: float = 0.0, top_k: int = 0,
           top_p: float = 1.0, max_new_tokens: int = 64, seed: int = 0, chat: bool = True, device=None, dtype=None,
           session: str | None = "", **options) -> Decoding:
    """Start a run and return it as an iterable ``Decoding`` of rounds.

    ``model`` and ``draft`` take a spec string (``default``, ``hf:ORG/NAME``, ``tiny-random:SEED``), a
    ``LoadedModel`` or a ``transformers`` model object; ``draft`` also takes the other draft kinds
    (``model:<name>``, ``prompt-lookup:n``, ``early-exit:N``, ``feature-head``, ``int4``, ``int8``). ``method`` (one
    of ``METHODS``) defaults to ``speculative`` when a draft is given, else ``ar``. ``gamma`` defaults to
    ``DEFAULT_GAMMA`` (4) and ``controller`` to ``fixed``; the preset methods (``quantized``, ``eesd``, ``eagle``,
    ``hierarchical``) fill draft, controller and γ from the preset shipped for the model (``method_preset``) where they are not given.

    ``options`` are the method's own, each defined once in its module under ``explorer/methods`` (default,
    range, help, paper reference): ``bild`` takes ``fallback_threshold`` (α_FB), ``rollback_threshold``
    (α_RB; ``inf``/None: never roll back) and ``max_small_steps``; ``bita`` takes ``bita_tree``,
    ``bita_masks``, ``bita_top_k`` and ``bita_tokens``. ``python -m explorer run --help`` lists them all.
    ``session`` names who is decoding: a method that learns from earlier runs (``suffix``) keeps each session's
    apart (the page passes its visitor's; the CLI and this API share one); ``None`` is a caller who cannot be told
    apart from others (the app's MCP calls): such a run neither drafts from earlier outputs nor is remembered.
    """
    with _LOAD_LOCK:  # one start at a time: loads, and the drafts a start builds, share process-wide state
        return _start(model, prompt, prompt_ids, method, draft, gamma, controller, temperature, top_k, top_p,
                      max_new_tokens, seed, chat, device, dtype, session, options)


def _start(model, prompt, prompt_ids, method, draft, gamma, controller, temperature, top_k, top_p, max_new_tokens,
           seed, chat, device, dtype, session, options) -> Decoding:
    model, draft = _spec(model, "model"), _spec(draft, "draft")
    chosen = methods.get(method or ("speculative" if draft is not None else "ar"))
    method_options = methods.split_options(chosen, options)  # refused before anything loads
    target = load_cached(model, device, dtype)
    if chosen.preset is not None:
        preset = chosen.preset(target)
        draft = draft if draft is not None else preset["draft"]
        controller = controller or preset["controller"]
        gamma = gamma if gamma is not None else preset["gamma"]
    gamma = DEFAULT_GAMMA if gamma is None else gamma
    controller = controller or DEFAULT_CONTROLLER
    cfg = SamplingConfig(float(temperature), top_k, float(top_p))
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise ExplorerError(f"seed must be a whole number from 0 to 2^63 - 1, got {clip(seed)}")
    check_controller(controller, gamma)
    if not isinstance(max_new_tokens, int) or not 1 <= max_new_tokens <= MAX_NEW_TOKENS:
        raise ExplorerError(f"max_new_tokens must be a whole number from 1 to {MAX_NEW_TOKENS}, got {max_new_tokens!r}")
    ids = _prompt_ids(target, prompt, prompt_ids, chat, max_new_tokens)
    if chosen.draft == "required" and draft is None:
        raise ExplorerError(f"method {chosen.name!r} needs a draft: {draft_forms()}")
    chosen.check_draft(draft, method_options)
    settings = Settings(temperature=cfg.temperature, top_k=cfg.top_k, top_p=cfg.top_p, gamma=gamma,
                        controller=controller, seed=seed, max_new_tokens=max_new_tokens, chat=chat,
                        options=method_options.as_dict() if method_options is not None else {},
                        lossy=chosen.is_lossy(method_options))
    if session is not None and (not isinstance(session, str) or len(session) > 200):
        raise ExplorerError("session must be text of at most 200 characters, or None")
    request = methods.Request(target, prompt, ids, cfg, settings, draft if chosen.draft != "none" else None,
                              lambda spec: load_cached(spec, device, dtype), chosen.round_tokens, session)
    return chosen.start(request, method_options)


def method_preset(method: str, model="default", device=None, dtype=None) -> dict:
    """What one of the preset methods (``quantized``, ``eesd``, ``eagle``, ``hierarchical``) runs for this model:
    {draft, controller, gamma, why}; ``ExplorerError`` for a method without a preset or a model none ships for."""
    chosen = methods.get(method)
    if chosen.preset is None:
        raise ExplorerError(f"method {chosen.name} has no preset: it runs with the draft, controller and γ given")
    return chosen.preset(load_cached(model, device, dtype))


def decode(model, prompt: str | None = None, **kwargs) -> RunTrace:
    """Decode a whole run and return its ``RunTrace`` (same arguments as ``stream``)."""
    return stream(model, prompt, **kwargs).run()


# Loaded models, least recently used first, within ``limits.MODEL_CACHE_BYTES`` of weights: each
# distinct spec (tiny-random:1, :2, ... or any hf: id) would otherwise stay in memory for good.
_LOADED: OrderedDict[tuple, LoadedModel] = OrderedDict()
# One load at a time: ``transformers`` builds models under process-wide init contexts (meta device), so
# two threads loading at once (the app's preload and a first visitor) corrupt each other's weights. A run's
# start (its model, the draft layers it builds) holds it too, so callers need no lock of their own.
_LOAD_LOCK = threading.RLock()
_GREW: dict[int, int] = {}  # id of a cached LoadedModel → resident bytes its load added
# a model → the bytes of its parameters and buffers, counted once: a loaded model is shared read-only, and walking
# every module on each cache hit (``_evict`` sums every cached model) cost the default ≈ 1 ms, and a hit 3.8 ms
# with 32 models cached: a tiny model's 4-token decode took 20 ms instead of 9
_TENSOR_BYTES: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
MAX_CACHED_MODELS = 32  # whatever their size: each holds Python objects, a tokenizer and a loading's garbage
# The embedded default stays whatever visitors load (70 distinct tiny models evicted it: the next visitor's first
# token took 12.4 s instead of ≈ 1 s, issue 51); it counts in the budget like any other.
PINNED = frozenset({"default"})
# Who is loading (``loads_by``): a visitor of the served app; None for the Python API and the CLI (the machine's owner)
_VISITOR: contextvars.ContextVar[str | None] = contextvars.ContextVar("explorer_visitor", default=None)
_LOADS: OrderedDict[str, deque] = OrderedDict()  # visitor → the times of their recent loads (newest visitors last)
MAX_VISITORS_KEPT = 4096


@contextlib.contextmanager
def loads_by(visitor: str | None):
    """Model loads in this block are ``visitor``'s: at most ``limits.VISITOR_MODEL_LOADS`` of models not yet
    loaded (the default aside) within ``limits.VISITOR_LOADS_WINDOW_S``; more are refused in one line."""
    token = _VISITOR.set(visitor)
    try:
        yield
    finally:
        _VISITOR.reset(token)


def _admit_load(spec: str) -> None:
    """Count a load against the visitor loading it, or refuse it in one line (``loads_by``)."""
    visitor = _VISITOR.get()
    if visitor is None or spec in PINNED:
        return
    now = time.monotonic()
    loads = _LOADS.setdefault(visitor, deque())
    _LOADS.move_to_end(visitor)
    while loads and now - loads[0] > VISITOR_LOADS_WINDOW_S:
        loads.popleft()
    if len(loads) >= VISITOR_MODEL_LOADS:
        wait = VISITOR_LOADS_WINDOW_S - (now - loads[0])
        raise ExplorerError(f"{clip(spec, 60)} is not loaded, and you loaded {len(loads)} models in the last "
                            f"{VISITOR_LOADS_WINDOW_S // 60} minutes (at most {VISITOR_MODEL_LOADS}): use one of "
                            f"those or the default, or try again in {max(1, round(wait / 60))} min")
    loads.append(now)
    while len(_LOADS) > MAX_VISITORS_KEPT:
        _LOADS.popitem(last=False)


def load_cached(spec, device, dtype) -> LoadedModel:
    """Load each model spec once per process (thread-safe) and keep the most recently used ones that
    fit the byte budget (the default always: ``PINNED``); loaded models are shared read-only. An evicted model
    that a decode still holds lives on until that decode ends (it holds a reference), then memory is returned.
    A visitor's loads are bounded (``loads_by``)."""
    with _LOAD_LOCK:
        if not isinstance(spec, str):
            return load(spec, device=device, dtype=dtype)
        dev = resolve_device(device)
        key = (spec.strip(), str(dev), str(resolve_dtype(dtype, dev)))  # dtype None and its default: one model
        if key in _LOADED:
            _LOADED.move_to_end(key)
            _evict(keep=key)  # what was built from a model since (a low-bit copy) counts from now on
            return _LOADED[key]
        _admit_load(key[0])
        before = resident_bytes()
        loaded = _LOADED[key] = load(spec, device=device, dtype=dtype)
        # what loading took from the machine (modules, tokenizer, allocator): a tiny model's tensors are a
        # quarter of it. Freed memory reused makes the growth an underestimate, never an overestimate.
        _GREW[id(loaded)] = max(0, resident_bytes() - before)
        _evict(keep=key)
        return loaded


def _evict(keep: tuple) -> None:
    """Drop the least recently used models (never ``keep``, the model just asked for, nor a ``PINNED`` one) while
    the cache holds more than ``MAX_CACHED_MODELS`` or more bytes than ``MODEL_CACHE_BYTES``."""
    while len(_LOADED) > MAX_CACHED_MODELS or sum(map(model_bytes, _LOADED.values())) > MODEL_CACHE_BYTES:
        victim = next((k for k in _LOADED if k != keep and k[0] not in PINNED), None)
        if victim is None:
            return
        _GREW.pop(id(_LOADED.pop(victim)), None)


def model_bytes(loaded: LoadedModel) -> int:
    """What a cached model costs: its parameters and buffers (tied weights counted once), the packed copies
    the CPU fast path made of its linears and what was built from it since (``models.loaded.derived_bytes``: the
    low-bit copies), or the resident memory its load took, whichever is more."""
    counted = _tensor_bytes(loaded.model) + fast.view_bytes(loaded.model)
    return max(counted, _GREW.get(id(loaded), 0)) + derived_bytes(loaded.model)


def _tensor_bytes(model) -> int:
    """The bytes of ``model``'s parameters and buffers, tied weights once (``_TENSOR_BYTES``)."""
    counted = _TENSOR_BYTES.get(model)
    if counted is None:
        tensors = {t.data_ptr(): t for t in [*model.parameters(), *model.buffers()]}
        counted = _TENSOR_BYTES[model] = sum(t.numel() * t.element_size() for t in tensors.values())
    return counted


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


