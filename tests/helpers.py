"""Plain helpers shared by several test files (no fixtures: those are in conftest.py; the browser's
helpers are in conftest_ui.py), so that no test file imports another:

- the saved traces in tests/data: ``DATA``, ``load``;
- the sampling checks on the tiny random models: ``PREFIX``, ``exact_two_token_distribution``,
  ``chi_square_pvalue`` (a target's exact two-token distribution and a chi-square fit against it);
- ``busy``: busy loops in other processes, more than this machine's cores, for the busy-machine tests;
- ``run_cli``: ``python -m explorer …`` run in this process (what a subprocess shows, without a cold start);
- ``page_handlers``, ``run_values``: the page's handlers as ``python app.py`` builds them, and Run's inputs;
- hand-built EESD Thompson-sampling traces whose ``controller`` dicts follow the engine's contract:
  ``make_trace`` (and the rounds, controllers and summary it is built from)."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch
from scipy.stats import chisquare

import explorer
from explorer.engine.sampling import warp
from explorer.trace import RoundTrace, RunTrace, Settings, Summary, Timing, check_invariants

DATA = Path(__file__).parent / "data"


@contextlib.contextmanager
def busy(processes: int | None = None):
    """``processes`` busy loops (three per core unless told), ended however the block ends. With three in all, a
    test worker's one-thread plain decoding once ran at 13.8 tokens/s after a run's 18.9 and the pace moved less
    than its 1.5× tolerance, so the page rightly printed a ratio; three a core leave a decode about a quarter of a
    core."""
    count = processes or 3 * len(os.sched_getaffinity(0))
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """``python -m explorer *args`` in this process: its exit status, stdout and stderr as a subprocess would give
    them (argparse's refusals exit through SystemExit; ``__main__`` passes ``main``'s value to ``sys.exit``).
    A cold interpreter costs ≈ 5 s an invocation here; tests/test_cli.py keeps real subprocesses for what only a
    new process shows (the entry point, nothing printed before the first line)."""
    from explorer.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    return subprocess.CompletedProcess(["python", "-m", "explorer", *args], code or 0, out.getvalue(), err.getvalue())


def page_handlers():
    """The page's handlers (``explorer.ui``) from a freshly built demo; their ``page`` holds its components."""
    from explorer.ui import layout

    demo = layout.build_demo()
    return next(f.fn for f in demo.fns.values() if getattr(f, "name", None) == "run").__wrapped__.__self__


def run_values(page, changes: dict) -> dict:
    """What Run reads (``Page.run_inputs``), each component at its value on a fresh page, ``changes`` applied."""
    return {c: c.value for c in page.run_inputs()} | changes


def load(name: str):
    """The saved trace ``tests/data/trace_<name>.json``."""
    return explorer.load_trace((DATA / f"trace_{name}.json").read_text())


# -- sampling checks -------------------------------------------------------------------------------------

PREFIX = [3, 7, 1]


def exact_two_token_distribution(model, cfg, prefix=PREFIX):
    """P(x0) and P(x1) = Σ_x0 P(x0) P(x1 | x0) after ``prefix`` under the warped target, by enumeration."""
    with torch.inference_mode():
        logits0 = model.model(torch.tensor([prefix])).logits[0, -1]
        p0 = warp(logits0[None], cfg)[0]
        contexts = torch.tensor([prefix + [x] for x in range(p0.shape[0])])
        p1_given = warp(model.model(contexts).logits[:, -1], cfg)  # (V, V)
    return p0.numpy(), (p0[:, None] * p1_given).sum(0).numpy()


def chi_square_pvalue(counts, probs):
    """Goodness of fit, merging cells whose expected count is below 5."""
    expected = probs * counts.sum()
    order = np.argsort(expected)
    small = expected[order] < 5
    obs = np.concatenate([counts[order][~small], [counts[order][small].sum()]]) if small.any() else counts
    exp = np.concatenate([expected[order][~small], [expected[order][small].sum()]]) if small.any() else expected
    keep = exp > 0
    return chisquare(obs[keep], exp[keep] * obs[keep].sum() / exp[keep].sum()).pvalue


# -- hand-built Thompson-sampling traces -----------------------------------------------------------------

GAMMA = 4


def make_round(index: int, context: int, drafted: int, accepted: int, controller: dict) -> RoundTrace:
    """A round that drafted ``drafted`` tokens (ids 100, 101, …) and accepted the first ``accepted``:
    rejected at ``accepted`` when some were refused, a bonus after all, one target token after none."""
    ids = tuple(100 + i for i in range(drafted))
    if drafted == 0:
        event, kinds, rejected_at = "no-draft", ("target",), None
    elif accepted < drafted:
        event, kinds, rejected_at = "rejected", ("accepted",) * accepted + ("corrected",), accepted
    else:
        event, kinds, rejected_at = "all-accepted", ("accepted",) * accepted + ("bonus",), None
    emitted = ids[:accepted] + (7,)
    return RoundTrace(
        index=index, context_len=context, drafted=ids, q_drafted=(0.5,) * drafted, p_drafted=(0.4,) * drafted,
        n_accepted=accepted, emitted=emitted, emitted_kind=kinds, p_emitted=(0.4,) * len(emitted), event=event,
        timing=Timing(0.001 * drafted, 0.01, 0.0001), rejected_at=rejected_at, draft_forwards=drafted,
        target_forwards=1, controller=controller)


def beta_controller(alpha: float, beta: float, thetas: list[float], accepted: int) -> dict:
    """Algorithm 2's state for one round: χ = 1 until the last step, which stops the draft unless it hit
    the γ cap; after verification r = |Q_v| − 1, n = min(|Q_v| + 1, |Q_d|) (eq. 3–4)."""
    k = len(thetas)
    cont = [True] * k if k == GAMMA else [True] * (k - 1) + [False] * (k > 0)
    q_v = accepted + 1
    r, n = (q_v - 1, min(q_v + 1, k)) if k else (0, 0)
    return {"kind": "beta-ts", "alpha_before": alpha, "beta_before": beta, "alpha_after": alpha + r,
            "beta_after": beta + (n - r), "theta": thetas, "continue": cont, "r": r, "n": n}


def cali_controller(n: int, hat: float, models: list[float], accepted: int, sigma_m=0.2, sigma_s=0.5) -> dict:
    """Algorithm 3's state for one round: μ and σ from eq. 6–7 at each step, θ̂ updated by eq. 10."""
    k = len(models)
    w = sigma_s ** 2 / (n * sigma_m ** 2 + sigma_s ** 2)
    mu = [w * m + (1 - w) * hat for m in models]
    sigma = [math.sqrt(sigma_m ** 2 * sigma_s ** 2 / (sigma_s ** 2 + n * sigma_m ** 2))] * k
    cont = [True] * k if k == GAMMA else [True] * (k - 1) + [False] * (k > 0)
    return {"kind": "cali-ts", "theta_model": models, "mu": mu, "sigma": sigma,
            "theta": [min(1.0, m + 0.05) for m in mu], "continue": cont,
            "theta_hat": hat, "theta_hat_after": (hat * (n + 1) + accepted / max(k, 1)) / (n + 2), "n": n}


def make_summary(rounds, **extra) -> Summary:
    """The run's totals; ``extra`` (e.g. ``hm``) become Summary fields, added by a subclass where this
    checkout's Summary does not have them yet."""
    drafted = sum(len(r.drafted) for r in rounds)
    accepted = sum(r.n_accepted for r in rounds)
    new_tokens = sum(len(r.emitted) for r in rounds)
    fields = dict(new_tokens=new_tokens, rounds=len(rounds), drafted=drafted, accepted=accepted,
                  acceptance_rate=accepted / drafted if drafted else None, alpha_hat=None, mean_gamma=GAMMA,
                  tokens_per_target_forward=new_tokens / len(rounds), target_forwards=len(rounds),
                  draft_forwards=drafted, draft_s=0.01, verify_s=0.1, other_s=0.001, wall_s=0.12,
                  tokens_per_s=new_tokens / 0.12, c_measured=0.1, predicted_speedup=1.5, record_s=0.0,
                  stop_reason="max_new_tokens")
    known = {f.name for f in dataclasses.fields(Summary)}
    missing = [(name, object, None) for name in extra if name not in known]
    cls = dataclasses.make_dataclass("SummaryWithEESD", missing, bases=(Summary,), frozen=True) if missing else Summary
    return cls(**fields, **extra)


def make_trace(kind: str, plan: list[tuple[int, int]], **summary_extra) -> RunTrace:
    """A run of ``kind`` with one round per (drafted, accepted) in ``plan``."""
    rounds, context, alpha, beta, hat = [], 10, 1.0, 1.0, 0.5
    for i, (k, a) in enumerate(plan):
        if kind == "beta-ts":
            c = beta_controller(alpha, beta, [0.9 - 0.1 * j for j in range(k)], a)
            alpha, beta = c["alpha_after"], c["beta_after"]
        else:
            c = cali_controller(i, hat, [0.8 - 0.05 * j for j in range(k)], a)
            hat = c["theta_hat_after"]
        rounds.append(make_round(i, context, k, a, c))
        context += len(rounds[-1].emitted)
    rounds = tuple(rounds)
    settings = Settings(temperature=0.0, top_k=0, top_p=1.0, gamma=GAMMA, controller=kind, seed=0,
                        max_new_tokens=64)
    trace = RunTrace(method="eesd", model="test-model", draft="early-exit:2", settings=settings,
                     prompt_ids=tuple(range(10)), output_ids=tuple(t for r in rounds for t in r.emitted), text="",
                     rounds=rounds, summary=make_summary(rounds, **summary_extra), token_text={100: "A", 101: "B"})
    assert check_invariants(trace) == []
    return trace
