"""95% intervals of the figures the project reports, in one place (no torch, no Dagster).

- `wilson_interval`: a proportion (wins of n games, right pairs of n pairs; a float count such as
  a score with draws as half points is accepted).
- `mean_interval`: a mean (or, through `total`, a sum) with a seeded percentile bootstrap, over
  single observations or clustered: where observations are not independent (positions of one
  game, the two games of one start position), whole clusters are resampled, never the
  observations inside them. With every cluster a singleton it is the plain bootstrap.
- `two_way_interval`: a mean whose observations each belong to two clusters of different kinds
  (DeepChess's pairs: two games each), mean_interval's bootstraps combined by the two-way rule.
- `ratio_draws`: the bootstrap draws of a ratio of sums over clusters (piece values: the mean
  value of a piece type over the pawn's), for a caller with more than one column.
- `interval_rows` / `interval_text` / `small_sample`: how an interval is written in
  evaluation_results (`<metric>_low95` / `<metric>_high95` rows beside the figure, as the
  reproduction report reads them) and in words ('0.72 (95%: 0.65-0.78, n = 210)'; a figure
  from fewer than SMALL_N games or positions says it is indicative only).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RESAMPLES = 10_000
"""Bootstrap draws of an interval (seeded: the same data give the same interval)."""
SMALL_N = 30
"""A figure from fewer observations than this is flagged 'indicative only'."""
_CHUNK_CELLS = 4_000_000
"""Most draws x clusters held at once (the draws are made in chunks of rows; the stream is the same)."""


def wilson_interval(wins: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """95% confidence interval of a proportion (Wilson score interval); (0, 1) when n is 0."""
    if n == 0:
        return 0.0, 1.0
    p = wins / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class MeanInterval:
    """A figure with its 95% interval and n (observations; `clusters` resampled where fewer)."""

    mean: float
    low: float
    high: float
    n: int
    clusters: int | None = None
    """Independent units the interval resampled (games, start positions); None: the observations."""

    def text(self, unit: str = "pawns") -> str:
        return f"{self.mean:.2f} {unit} (95% interval {self.low:.2f}-{self.high:.2f}, n {self.n})"


def cluster_weights(clusters: int, resamples: int = RESAMPLES, seed: int = 0):
    """Chunks of (rows, clusters) counts: how often each cluster is drawn in each bootstrap
    resample (`clusters` draws with replacement per resample), from one seeded stream."""
    rng = np.random.default_rng(seed)
    step = max(1, _CHUNK_CELLS // max(clusters, 1))
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        idx = rng.integers(0, clusters, (rows, clusters))
        flat = (idx + (np.arange(rows) * clusters)[:, None]).ravel()
        yield np.bincount(flat, minlength=rows * clusters).reshape(rows, clusters).astype(np.float64)


def ratio_draws(numerator: np.ndarray, denominator: np.ndarray, resamples: int = RESAMPLES, seed: int = 0):
    """Bootstrap draws of sum(numerator) / sum(denominator) with whole clusters resampled: both
    arrays (clusters,) or (clusters, k), one row a cluster's sums; returns (resamples,) or
    (resamples, k). A draw whose denominator is 0 gives NaN."""
    num, den = np.asarray(numerator, dtype=np.float64), np.asarray(denominator, dtype=np.float64)
    out = []
    with np.errstate(invalid="ignore", divide="ignore"):
        for w in cluster_weights(len(num), resamples, seed):
            out.append((w @ num) / (w @ den))
    return np.concatenate(out)


def percentile_interval(draws: np.ndarray, estimate: float) -> tuple[float, float]:
    """The 2.5 and 97.5 percentiles of bootstrap draws (NaN draws left out), widened to hold the
    estimate itself."""
    d = np.asarray(draws, dtype=np.float64)
    d = d[np.isfinite(d)]
    if not len(d):
        return math.nan, math.nan
    low, high = np.percentile(d, [2.5, 97.5])
    return float(min(low, estimate)), float(max(high, estimate))


def mean_interval(values, clusters=None, resamples: int = RESAMPLES, seed: int = 0) -> MeanInterval:
    """The mean of `values` with a seeded percentile bootstrap 95% interval: resampling the
    observations, or with `clusters` (one label per value) whole clusters (the mean of a draw is
    its values' sum over its observations' count)."""
    x = np.asarray(values, dtype=np.float64)
    if not len(x):
        raise ValueError("no values to summarise")
    if clusters is None:
        keys, g = np.arange(len(x)), len(x)
    else:
        if len(clusters) != len(x):
            raise ValueError(f"{len(clusters)} cluster labels for {len(x)} values")
        # clusters numbered in order of first appearance, so singleton clusters given in order
        # resample exactly as the observations would
        _, first, inverse = np.unique(np.asarray(clusters), return_index=True, return_inverse=True)
        rank = np.empty(len(first), dtype=np.int64)
        rank[np.argsort(first)] = np.arange(len(first))
        keys, g = rank[inverse.ravel()], len(first)
    sums = np.bincount(keys, weights=x, minlength=g)
    counts = np.bincount(keys, minlength=g).astype(np.float64)
    mean = float(x.mean())
    low, high = percentile_interval(ratio_draws(sums, counts, resamples, seed), mean)
    return MeanInterval(mean, low, high, len(x), None if clusters is None else g)


PAIR_GAMES = "bootstrap clustered by game, both games of each pair (pairs sharing a game are not independent)"
"""How DeepChess's pair accuracies get their 95% interval (two_way_interval over each pair's two
games: training.deepchess.pair_interval), as their rows and metadata say it."""


def two_way_interval(values, first, second, resamples: int = RESAMPLES, seed: int = 0) -> MeanInterval:
    """The mean of observations each of which belongs to two clusters of different kinds (a
    DeepChess pair: the White-won game of its left position and the Black-won game of its right
    one; one game gives many positions, so many pairs), with a 95% interval that counts both.

    Resampling by one kind alone (say the pair's White-won game) would take pairs sharing only a
    Black-won game for independent, and a bucket whose Black-won positions come from few games
    would look surer than it is. Here the spread is Cameron, Gelbach and Miller's two-way rule
    (J. Bus. Econ. Stat. 2011): clustered by `first`, plus clustered by `second`, less the plain
    one, each tail's distance from the mean taken from mean_interval with the same seed, and never
    narrower than any of the three (the rule's sum can fall below them on a sample). With every
    game in one pair, both clusterings are the plain bootstrap, and so is this interval."""
    x = np.asarray(values, dtype=np.float64)
    plain = mean_interval(x, resamples=resamples, seed=seed)
    by = [mean_interval(x, c, resamples, seed) for c in (first, second)]
    m = plain.mean

    def tail(bounds: list[float], sign: int) -> float:
        d = [abs(b - m) for b in bounds]  # plain, first, second
        two_way = math.sqrt(max(d[1] ** 2 + d[2] ** 2 - d[0] ** 2, 0.0))
        if two_way <= max(d):
            return bounds[d.index(max(d))]
        return float(np.clip(m + sign * two_way, x.min(), x.max()))  # a mean stays within its values

    low = tail([plain.low, by[0].low, by[1].low], -1)
    high = tail([plain.high, by[0].high, by[1].high], 1)
    return MeanInterval(m, low, high, len(x), by[0].clusters + by[1].clusters)


def interval_text(figure: str, low: str, high: str, n: int | None) -> str:
    """'figure (95%: low-high, n = N)', as the reports write a figure with its interval."""
    return f"{figure} (95%: {low}-{high}" + ("" if n is None else f", n = {n:,}") + ")"


def small_sample(n: int, unit: str = "games") -> str:
    """'n = 8 games: indicative only' for a figure from fewer than SMALL_N, else ''."""
    return f"n = {n} {unit}: indicative only" if n < SMALL_N else ""


def interval_rows(suite: str, metric: str, low: float, high: float, n: int, how: str) -> list[tuple]:
    """evaluation_results rows (suite, metric_low95 / metric_high95, value, n, detail) of a
    figure's interval: the reproduction report finds them beside the figure's own row."""
    return [
        (suite, f"{metric}_low95", float(low), n, f"95% interval, {how}"),
        (suite, f"{metric}_high95", float(high), n, f"95% interval, {how}"),
    ]
