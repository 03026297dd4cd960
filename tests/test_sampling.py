"""The one sampling warp shared by draft and target."""

import pytest
import torch

from explorer.engine.sampling import SamplingConfig, choose, distribution, warp
from explorer.errors import ExplorerError

LOGITS = torch.tensor([[2.0, 1.0, 0.0, -1.0, 3.0]])


def test_greedy_is_one_hot_argmax():
    probs = warp(LOGITS, SamplingConfig(temperature=0))
    assert probs.tolist() == [[0, 0, 0, 0, 1]]


def test_temperature_one_is_softmax_and_lower_temperature_sharpens():
    assert torch.allclose(warp(LOGITS, SamplingConfig(1.0)), LOGITS.softmax(-1))
    cold = warp(LOGITS, SamplingConfig(0.5))
    assert torch.allclose(cold, (LOGITS / 0.5).softmax(-1))
    assert cold.max() > LOGITS.softmax(-1).max()


def test_top_k_keeps_the_k_most_likely():
    probs = warp(LOGITS, SamplingConfig(1.0, top_k=2))
    assert (probs > 0).tolist() == [[True, False, False, False, True]]
    assert torch.isclose(probs.sum(), torch.tensor(1.0))


def test_top_p_keeps_the_smallest_set_reaching_p():
    base = LOGITS.softmax(-1)[0]  # 0.244, 0.090, 0.033, 0.012, 0.665 (sorted: 4, 0, 1, 2, 3)
    probs = warp(LOGITS, SamplingConfig(1.0, top_p=0.7))[0]
    assert (probs > 0).tolist() == [True, False, False, False, True]  # 0.665 < 0.7 needs token 0 too
    assert torch.allclose(probs[[0, 4]], base[[0, 4]] / base[[0, 4]].sum())
    only_top = warp(LOGITS, SamplingConfig(1.0, top_p=0.5))[0]
    assert (only_top > 0).tolist() == [False, False, False, False, True]


def test_greedy_distribution_keeps_softmax_for_the_trace_and_chooses_argmax():
    cfg = SamplingConfig(0)
    probs = distribution(LOGITS, cfg)
    assert torch.allclose(probs, LOGITS.softmax(-1))
    assert choose(probs[0], cfg, None) == 4


@pytest.mark.parametrize("kwargs", [
    {"temperature": -1}, {"temperature": float("nan")}, {"top_k": -2}, {"top_k": 1.5},
    {"top_p": 0}, {"top_p": 1.5},
])
def test_impossible_settings_are_refused(kwargs):
    with pytest.raises(ExplorerError):
        SamplingConfig(**kwargs)
