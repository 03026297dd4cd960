"""The feature-head draft (EAGLE, Li et al. 2024, section 4): drafting in the target's feature space.

Two parts share the work:

``FeatureVerifier``  the target as the round loop's runner (a ``CachedForward``) that keeps its final
                     normed state f_j at every position it holds — the features the head reads. The
                     verification of round r computes them for the pending token and every draft, so
                     the next round's head has the target's true features up to the newest commit at no
                     extra target work.
``FeatureHeadDrafter`` the head (``head.FeatureHead``) with its own KV cache over the positions whose true
                     features are known. A draft first runs the head over the positions committed since
                     the last round (the accepted drafts, whose cache entries were computed from the head's
                     own predictions, are recomputed from the target's), whose last output predicts the
                     pending token's feature f̂_n and the first draft token; each further step feeds f̂ back
                     with the drafted token's embedding (section 4.1's autoregression over features). After
                     the target has scored the draft (``verified``), the round records how close each
                     predicted feature was to the target's (cosine), which is where EAGLE's drafts go wrong.

Positions: the target's cache holds the committed context except its last (pending) token, x_n, so f_0 …
f_{n−1} are known. The head's input at position j is (f_j, x_{j+1}); its output there predicts f_{j+1}.

Lossless like every draft: the target verifies with Algorithm 1; q is the head's warped distribution
(0 outside its V' rows). The first round drafts nothing: the prompt's features come from the forward that
also gives the first token, which costs no more than a prefill would (and a prefill's last logits would
be thrown away).

Shape legend: T positions, K drafted tokens, H hidden size, V vocabulary, V' scored rows.
"""

from __future__ import annotations

import torch

from ...drafts import DraftKind, register_kind
from ...engine.cache import CachedForward, common_prefix, crop_cache, new_cache
from ...engine.drafters import NO_PROPOSAL, Drafter, Proposal
from ...engine.fast import fast_linear, fast_view
from ...engine.forward import fast_decoder, lm_head, run_layers
from ...engine.sampling import choose, distribution
from ...errors import ExplorerError
from ...limits import MAX_GAMMA, clip
from ...untrusted import ListOf, Record, number
from .head import FeatureHead, head_for


class FeatureVerifier(CachedForward):
    """The whole target on its fast path, keeping the final normed state of every cached position."""

    def __init__(self, model: torch.nn.Module, device: torch.device):
        self.base, self.head = fast_decoder(model), lm_head(model)
        super().__init__(self._forward, device)
        self.features: torch.Tensor | None = None  # (1, len(ids), H): f_j, what the LM head reads at j

    def _forward(self, input_ids: torch.Tensor, cache, n_logits: int) -> torch.Tensor:
        past = cache.get_seq_length()
        hidden = run_layers(self.base, self.base.layers, self.base.embed_tokens(input_ids), past, cache)
        states = self.base.norm(hidden)  # (1, T, H)
        self.features = states if self.features is None or past == 0 else \
            torch.cat([self.features[:, :past], states], dim=1)
        return self.head(states[0, -n_logits:])  # (n_logits, V)

    def truncate(self, length: int) -> None:
        super().truncate(length)
        if self.features is not None and self.features.shape[1] > length:
            self.features = self.features[:, :length]


class FeatureHeadDrafter(Drafter):
    """Drafts with a feature head on the features its ``verifier`` (the round's target runner) keeps."""

    needs_round_verifier = True  # it reads the features only the speculative round loop's verifier gives

    def __init__(self, spec: str, head: FeatureHead, target):
        self.spec = spec
        self.head = head
        self.view = fast_view(head, like=target.model)
        self.verifier = FeatureVerifier(target.model, target.device)
        self.base = self.verifier.base
        self.vocab_size = int(target.model.get_output_embeddings().weight.shape[0])
        weight = target.model.get_output_embeddings().weight
        rows = weight if head.vocab is None else weight[head.vocab].detach().clone()  # (V', H)
        self.rows = lm_head(target.model) if head.vocab is None else fast_linear(rows, target.model)
        self.cache = new_cache()
        self.ids: list[int] = []  # x_0 … x_{len}: the tokens the head's cached positions read
        self.cached = 0  # head positions computed from true features
        self.predicted: list[torch.Tensor] = []  # f̂ of the latest draft's steps, for ``verified``
        self.drafted_at = 0  # n, the pending token's position, when the latest draft was made
        self.about = f"{spec}: {head.describe()}"
        accept = head.manifest.get("heldout_acceptance") if head.trained else None
        self.expected_acceptance = float(accept[0]) if isinstance(accept, list) and accept else None

    def propose(self, context, k, cfg, rng, stop) -> Proposal:
        n = len(context) - 1  # the pending token's position: the target holds f_0 … f_{n−1}
        self.predicted = []
        known = self.verifier.features
        if n < 1 or known is None or known.shape[1] < n or common_prefix(self.verifier.ids, context) < n:
            return NO_PROPOSAL  # the first round: the target has not run yet (see the module docstring)
        with torch.inference_mode():
            feature = self._catch_up(context, known)  # f̂_n  (1, 1, H)
            tokens, rows = [], []
            for step in range(k):
                q_row = distribution(self._scores(feature[0, 0]), cfg)  # (V,)
                token = choose(q_row, cfg, rng.on(q_row.device))
                tokens.append(token)
                rows.append(q_row)
                self.predicted.append(feature[0, 0])
                if not stop.keep_drafting(step, q_row) or step == k - 1:
                    break
                feature = self._step(token, feature, n + step)
            crop_cache(self.cache, self.cached)  # drop the positions made from predicted features
        self.drafted_at = n
        return Proposal(tokens, torch.stack(rows) if rows else None, len(tokens))

    def verified(self):
        """How close each predicted feature f̂ came to the target's own, computed in the verification just
        run (cosine similarity, one per draft step), for the round's ``detail``: taken now (before the
        caches are cut), computed off the timed path."""
        features = self.verifier.features
        n, predicted = self.drafted_at, self.predicted
        if not predicted or features is None or features.shape[1] < n + len(predicted):
            return None
        truth = features[0, n:n + len(predicted)]  # (K, H): a view that outlives the cache's cut

        def detail() -> dict:
            with torch.inference_mode():
                cos = torch.nn.functional.cosine_similarity(torch.stack(predicted), truth, dim=-1)  # (K,)
            return {"feature_cos": [round(float(c), 4) for c in cos]}
        return detail

    def rollback(self, context: list[int]) -> None:
        """Cut the head's cache to the positions whose inputs (f_j, x_{j+1}) are still those of ``context``."""
        self._cut(common_prefix(self.ids, context) - 1)

    # -- internals -----------------------------------------------------------------------------------------

    def _catch_up(self, context: list[int], known: torch.Tensor) -> torch.Tensor:
        """Run the head over positions ``cached`` … n−1 from the target's features; f̂_n (1, 1, H)."""
        n = len(context) - 1
        self._cut(min(common_prefix(self.ids, context) - 1, n - 1))
        start = self.cached
        new = torch.tensor([context[start + 1: n + 1]], dtype=torch.long, device=known.device)  # (1, T)
        x = self.view.inputs(self.base.embed_tokens(new), known[:, start:n])  # (1, T, H)
        out = self.view.norm(run_layers(self.base, self.view.layers, x, start, self.cache))
        self.cached, self.ids = n, list(context[: n + 1])
        return out[:, -1:]

    def _step(self, token: int, feature: torch.Tensor, position: int) -> torch.Tensor:
        """One autoregressive step in feature space at ``position``: (f̂, x̂) -> the next f̂ (1, 1, H)."""
        new = torch.tensor([[token]], dtype=torch.long, device=feature.device)  # (1, 1)
        x = self.view.inputs(self.base.embed_tokens(new), feature)
        return self.view.norm(run_layers(self.base, self.view.layers, x, position, self.cache))

    def _scores(self, feature: torch.Tensor) -> torch.Tensor:
        """f̂ (H,) -> logits (V,); −inf outside the scored rows."""
        if self.head.vocab is None:
            return self.rows(feature[None])[0]
        logits = torch.full((self.vocab_size,), float("-inf"), dtype=feature.dtype, device=feature.device)
        logits[self.head.vocab] = self.rows(feature[None])[0]
        return logits

    def _cut(self, length: int) -> None:
        length = max(length, 0)
        if length < self.cached:
            crop_cache(self.cache, length)
            self.cached = length
            del self.ids[length + 1:]


def feature_head_drafter(spec: str, trained: bool, target) -> FeatureHeadDrafter:
    """``feature-head`` (the head shipped for the target) or ``feature-head:untrained``."""
    return FeatureHeadDrafter(spec, head_for(target.model, trained=trained), target)


def _build(spec: str, argument: str, target, load_model) -> FeatureHeadDrafter:
    if argument not in ("", "untrained"):
        raise ExplorerError(f"bad draft {clip(spec, 60)}: write feature-head or feature-head:untrained")
    return feature_head_drafter(spec, argument != "untrained", target)


# the keys the feature-head view reads from a round's detail
DETAIL = Record({"feature_cos": ListOf(number(-1, 1), MAX_GAMMA, "a list of cosine similarities")}, strict=False)
register_kind(DraftKind("feature-head", "feature-head", _build, detail=DETAIL, examples=("feature-head",),
                        glossary="EAGLE's feature head (Li et al. 2024): one small layer that guesses the target's "
                                 "next internal state (its *feature*) from the current one and the next token, then "
                                 "reads the token through the target's own output layer."))
