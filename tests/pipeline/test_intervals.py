"""The project's interval helpers (pipeline.research.intervals) against independent facts."""

import math

import numpy as np
import pytest

from pipeline.research.intervals import (
    interval_rows,
    interval_text,
    mean_interval,
    ratio_draws,
    small_sample,
    two_way_interval,
    wilson_interval,
)


def test_wilson_matches_the_hand_computed_interval():
    # 8 of 10, z = 1.96: centre (0.8 + 0.19208) / 1.38416 = 0.716737, half 1.96 * sqrt(0.016 + 0.009604)
    # / 1.38416 = 0.226580 (by hand from Wilson's formula): 0.4902-0.9433, the textbook figure
    lo, hi = wilson_interval(8, 10)
    assert lo == pytest.approx(0.4902, abs=1e-4)
    assert hi == pytest.approx(0.9433, abs=1e-4)
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 5)[0] == 0.0 and wilson_interval(5, 5)[1] == 1.0


def test_plain_bootstrap_is_the_textbook_resampling_of_the_observations():
    x = np.random.default_rng(5).normal(2.0, 1.0, 25)
    m = mean_interval(x, resamples=4000, seed=3)
    # the same draws, made the textbook way: indices with replacement, the mean of each resample
    means = x[np.random.default_rng(3).integers(0, len(x), (4000, len(x)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert (m.low, m.high) == pytest.approx((low, high), abs=1e-12)
    assert m.mean == pytest.approx(x.mean()) and m.n == 25 and m.clusters is None


def test_clustered_bootstrap_with_singleton_clusters_is_the_plain_one():
    x = np.random.default_rng(1).random(40)
    plain = mean_interval(x, seed=9)
    single = mean_interval(x, clusters=[f"game{i}" for i in range(40)], seed=9)
    assert (single.low, single.high) == pytest.approx((plain.low, plain.high), abs=1e-12)
    assert single.clusters == 40


def test_clustered_bootstrap_is_wider_when_clusters_are_copies():
    """Each observation four times over in one cluster: 10 independent values, not 40; the
    clustered interval is the 10 values' one, the plain one (40 'independent') is about half as wide."""
    base = np.random.default_rng(2).random(10)
    x, games = np.repeat(base, 4), np.repeat(np.arange(10), 4)
    clustered, plain, truth = mean_interval(x, games, seed=0), mean_interval(x, seed=0), mean_interval(base, seed=0)
    assert (clustered.low, clustered.high) == pytest.approx((truth.low, truth.high), abs=1e-12)
    assert (plain.high - plain.low) < 0.7 * (clustered.high - clustered.low)


def test_seeded_bootstrap_gives_the_same_interval_twice_and_another_seed_another():
    x = np.random.default_rng(0).random(30)
    games = np.arange(30) // 3
    assert mean_interval(x, games, seed=4) == mean_interval(x, games, seed=4)
    assert mean_interval(x, games, seed=4) != mean_interval(x, games, seed=5)


def test_ratio_draws_resample_numerator_and_denominator_together():
    num, den = np.array([[2.0, 1.0], [4.0, 3.0]]), np.array([[1.0, 1.0], [2.0, 1.0]])
    draws = ratio_draws(num, den, resamples=50, seed=0)
    assert draws.shape == (50, 2)
    # a draw is both clusters once (3), one of them twice (2 or 2, 4/2): each column's draws lie in
    # the set of ratios the three possible resamples give
    assert set(np.round(draws[:, 0], 6)) <= {2.0, round(6 / 3, 6)}
    assert set(np.round(draws[:, 1], 6)) <= {1.0, 2.0, round(4 / 2, 6), 3.0, round(7 / 3, 6), 1.5}


def test_the_words_and_the_rows():
    assert interval_text("72.00%", "65.00%", "78.00%", 1210) == "72.00% (95%: 65.00%-78.00%, n = 1,210)"
    assert small_sample(8) == "n = 8 games: indicative only"
    assert small_sample(30) == ""
    rows = interval_rows("kaufman", "avg", 1.0, 2.0, 25, "seeded bootstrap")
    assert [r[1] for r in rows] == ["avg_low95", "avg_high95"] and all(r[3] == 25 for r in rows)
    with pytest.raises(ValueError):
        mean_interval([])
    assert math.isfinite(mean_interval([3.0]).low)


def _pairs(effect: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """400 pairs of 20 White-won by 20 Black-won games, each pair once; a pair's score (right or
    not) set by its `effect` game: half the games always right, half always wrong."""
    left, right = np.repeat(np.arange(20), 20), np.tile(np.arange(20), 20)
    good = np.random.default_rng(7).permutation(20) < 10
    score = good[left if effect == "left" else right].astype(np.float64)
    return score, left, right


@pytest.mark.parametrize("effect", ["left", "right"])
def test_two_way_interval_counts_the_games_of_either_side(effect):
    """All the variation is between the games of one side: 20 independent outcomes, not 400. The
    interval is the one of those 20 games' scores (at least), whichever side they are on; the
    plain one, taking the 400 pairs for independent, is far narrower."""
    score, left, right = _pairs(effect)
    two_way, plain = two_way_interval(score, left, right, seed=0), mean_interval(score, seed=0)
    truth = mean_interval(score.reshape(20, 20).mean(axis=1 if effect == "left" else 0), seed=0)
    assert two_way.mean == plain.mean == 0.5 and two_way.n == 400 and two_way.clusters == 40
    assert two_way.high - two_way.low >= truth.high - truth.low - 1e-12
    assert two_way.low <= plain.low and two_way.high >= plain.high
    assert plain.high - plain.low < 0.4 * (two_way.high - two_way.low)


def test_two_way_interval_is_the_plain_one_when_no_two_pairs_share_a_game():
    score = np.random.default_rng(3).integers(0, 3, 150) / 2  # right, wrong, or half (shown both ways)
    plain = mean_interval(score, seed=2)
    two_way = two_way_interval(score, [f"w{i}" for i in range(150)], [f"b{i}" for i in range(150)], seed=2)
    assert (two_way.low, two_way.high) == pytest.approx((plain.low, plain.high), abs=1e-12)


def test_two_way_interval_is_the_same_with_the_same_seed():
    score, left, right = _pairs("left")
    score = np.where(np.random.default_rng(1).random(400) < 0.2, 1 - score, score)  # some noise
    assert two_way_interval(score, left, right, seed=4) == two_way_interval(score, left, right, seed=4)
    assert two_way_interval(score, left, right, seed=4) != two_way_interval(score, left, right, seed=5)
