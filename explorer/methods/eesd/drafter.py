"""EESD's draft (section 3.1): the target's first N layers plus a trained exit layer, drafting and
verifying in one shared KV cache, with the θ_M predictor that calibrated Thompson sampling reads (eq. 5)."""

from __future__ import annotations

from ...drafts import DraftKind, positive_int, register_kind
from ...engine.drafters import ForwardDrafter
from ...errors import ExplorerError
from .exits import exit_for, shipped_depths
from .hf_assistant import hf_assistant
from .self_draft import DraftRunner, SelfSpeculation, SharedVerifier
from .theta_predictor import find_predictor, load_predictor


def early_exit_drafter(spec: str, n: int, trained: bool, target) -> ForwardDrafter:
    """The target's first ``n`` layers + the exit layer trained for this model and n when one ships
    (``trained``; else, or when not ``trained``, the untrained exit); drafting and verification share
    one cache (EESD 3.1)."""
    head = exit_for(target.model, n, trained=trained)
    shared = SelfSpeculation(target.model, head, target.device)
    about = f"{spec}: first {n} layers + {head.describe()}" + (_missing(target.model, n) if trained else "")
    agreement = head.manifest.get("heldout_agreement") if head.trained else None
    predictor = _theta_predictor(target.model, head)
    theta_model = None
    if predictor is not None:  # cali-ts's θ_M (EESD eq. 5) from the target's and the exit's states
        def theta_model(step: int, q_row) -> float | None:
            states = shared.theta_states(step)
            return predictor(step + 1, *states) if states is not None else None

        about += " + its trained θ_M predictor"
    # drafting and verification share one cache; a trained exit's held-out agreement is a prior for α
    return ForwardDrafter(spec, runner=DraftRunner(shared), verifier=SharedVerifier(shared), about=about,
                          expected_acceptance=float(agreement) if isinstance(agreement, (int, float)) else None,
                          theta_model=theta_model, row_scorer=shared.row_scorer)


def _missing(model, n: int) -> str:
    """Where a trained exit was wanted and none fits: which depths do ship for this model, or that none does
    ("" when one ships at ``n``)."""
    depths = shipped_depths(model)
    if n in depths:
        return ""
    if not depths:
        return (" — no trained exit ships for this model's weights (exits are found by the model's fingerprint; "
                "`python -m explorer train early-exit` makes one)")
    listed = ", ".join(map(str, depths[:-1])) + f" and {depths[-1]}" if len(depths) > 1 else str(depths[0])
    return (f" — no trained exit ships for {n} layers of this model; trained ones ship for {listed} layers "
            f"(early-exit:{depths[0]}, …)")


def _theta_predictor(model, head):
    """The trained θ_M predictor shipped beside a trained exit, if any."""
    path = find_predictor(model, head.n_layers) if head.trained else None
    return load_predictor(model, path) if path is not None else None


def _build(spec: str, argument: str, target, load_model) -> ForwardDrafter:
    n_text, _, variant = argument.partition(":")
    n = positive_int(n_text, spec, "early-exit:N (N = layers of the target to keep)")
    if variant not in ("", "untrained"):
        raise ExplorerError(f"bad draft {spec!r}: write early-exit:N or early-exit:N:untrained")
    return early_exit_drafter(spec, n, variant != "untrained", target)


def menu() -> tuple[str, ...]:
    """The drafter menu's exits: every depth a trained exit ships for, and one untrained, named so, at the middle
    of them (the same layers with and without their exit layer: what the training bought)."""
    depths = shipped_depths()
    if not depths:
        return ("early-exit:8:untrained",)
    return tuple(f"early-exit:{n}" for n in depths) + (f"early-exit:{depths[len(depths) // 2]}:untrained",)


register_kind(DraftKind("early-exit", "early-exit:N", _build, gives_distributions=True, examples=menu,
                        hf_assistant=hf_assistant,
                        glossary="the target's own first N layers plus a trained **exit layer** (EESD 3.1): a draft "
                                 "that shares the target's cache, so drafting and verifying reuse the same work."))
