"""One honesty rule for every ratio of times (#48), as numbers (no model): the figures #48 met — the theory lab's
"× ar 33.10 at 6.40 tokens/round", bench's "suffix ×2.99 at 1.48 tokens a target forward" and "T(n)/T(1) 1.00 for
every n", profile's "T(16)/T(1) = 0.11" and parts adding up to 277 % — are refused, and their honest neighbours
pass. The same rule on traces is tests/test_pace.py's; on bench reports, on the theory lab and on profile, their
own tests'."""

from __future__ import annotations

import pytest

from explorer import ratios
from explorer.shipped import MARKER, assets_dir


def test_a_lossless_speedup_above_its_tokens_per_target_forward_is_impossible():
    assert ratios.impossible_speedup(2.99, 1.48, lossy=False) is not None  # bench --quick's suffix
    assert "at most ×1.48" in ratios.impossible_speedup(2.99, 1.48, lossy=False)
    assert ratios.impossible_speedup(33.10, 6.40, lossy=False) is not None  # the theory lab's
    assert ratios.impossible_speedup(2.08, 12.8, lossy=False) is None  # quantized in the README
    assert ratios.impossible_speedup(1.7, 1.48, lossy=False) is None  # within the noise allowed
    assert ratios.impossible_speedup(2.98, None, lossy=True) is None  # the copy alone skips the target: no bound
    assert ratios.impossible_speedup(9.0, 1.2, lossy=None) is None  # not known to be lossless: not judged


def test_a_moved_pace_is_said_in_words_and_a_held_one_is_silent():
    assert ratios.pace_moved([1.6, 1.7, 1.65], [1.7, 1.62]) is None
    assert ratios.pace_moved([1.6, 1.7, 1.65], [4.9, 5.2]) == pytest.approx(5.05 / 1.65)
    words = ratios.pace_words([1.6, 1.7, 1.65], [4.9, 5.2], "suffix", "plain decoding")
    assert "1.6 ms while suffix ran and 5.1 ms while plain decoding did (3.1× apart" in words
    assert ratios.pace_words([], [4.9]) is None  # nothing to compare with: not judged


def test_a_verification_cost_below_one_forward_or_above_n_is_impossible():
    assert ratios.verify_ratio_doubt(0.11, 16) is not None  # profile's T(16)/T(1)
    assert ratios.verify_ratio_doubt(19.39, 9) is not None  # the theory lab's T(9)/T(1)
    assert ratios.verify_ratio_doubt(1.4, 3) is None and ratios.verify_ratio_doubt(0.95, 2, ratios.FLOOR_NOISE) is None


def test_a_curve_whose_first_forward_was_slowed_is_refused():
    """A running maximum over medians in which T(1) was slowed prints 1.00 for every n (bench --quick): the medians
    behind it show T(n) below T(1)."""
    slowed = [0.080, 0.041, 0.043, 0.045, 0.047]
    assert set(ratios.curve_doubts(slowed, ratios.FLOOR_NOISE)) == {2, 3, 4, 5}
    assert "T(2)/T(1) = 0.51" in ratios.curve_words(ratios.curve_doubts(slowed), [t / slowed[0] for t in slowed])
    assert ratios.curve_doubts([0.040, 0.039, 0.046, 0.050], ratios.FLOOR_NOISE) == {}  # a dip of noise, smoothed
    assert ratios.curve_doubts({1: 0.040, 16: 0.0044}) == {16: ratios.verify_ratio_doubt(0.11, 16, who="the forwards")}


def test_parts_of_a_forward_never_add_up_to_more_than_it():
    assert ratios.shares_doubt(2.77) is not None and "277%" in ratios.shares_doubt(2.77)
    assert ratios.shares_doubt(0.93) is None and ratios.shares_doubt(1.02) is None


def test_the_shipped_assets_are_found_and_may_be_pointed_elsewhere(monkeypatch, tmp_path):
    assert (assets_dir() / MARKER).is_file()
    monkeypatch.setenv("EXPLORER_ASSETS", str(tmp_path))
    assert assets_dir() == tmp_path.resolve()
