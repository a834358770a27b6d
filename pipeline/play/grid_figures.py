"""The figures of Lubeck's grid (pipeline.play.lubeck_grid): a score's Elo difference, its interval
clustered by start position, and the score pooled over several cells."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from pipeline.research.intervals import mean_interval


class GameCounts(Protocol):
    """What pooling needs of a cell (pipeline.play.lubeck_grid.CellResult is one): its games'
    points and start positions, and its wins, draws and losses."""

    @property
    def points(self) -> Sequence[float]: ...
    @property
    def starts(self) -> Sequence[str]: ...
    @property
    def wins(self) -> int: ...
    @property
    def draws(self) -> int: ...
    @property
    def losses(self) -> int: ...


def elo_difference(score: float) -> float:
    """Elo difference a score (0..1) stands for; +/-inf at 1 and 0."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return -400.0 * math.log10(1.0 / score - 1.0)


def score_interval(points: Sequence[float], starts: Sequence[str]) -> tuple[float, float]:
    """95% interval of a score (points per game) from games played from start positions: a
    seeded bootstrap resampling start positions, each with all its games; (0, 1) with fewer than
    two start positions (one unit says nothing of the spread)."""
    if len(set(starts)) < 2:
        return 0.0, 1.0
    m = mean_interval(points, list(starts))
    return m.low, m.high


def fmt_elo(x: float) -> str:
    return "+inf" if x == math.inf else "-inf" if x == -math.inf else f"{x:+.0f}"


@dataclass(frozen=True)
class Pooled:
    """The network's score over the games of several cells (e.g. every cell of one time a move),
    its 95% interval by the cells' bootstrap clustered by start position (a start recurs in every
    cell of its kind, so its games are one unit across them), and the Elo difference."""

    label: str
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    score_low: float
    score_high: float

    @classmethod
    def of(cls, label: str, cells: Sequence[GameCounts]) -> Pooled:
        points = [x for c in cells for x in c.points]
        starts = [x for c in cells for x in c.starts]
        n = len(points)
        lo, hi = score_interval(points, starts)
        return cls(
            label,
            n,
            sum(c.wins for c in cells),
            sum(c.draws for c in cells),
            sum(c.losses for c in cells),
            sum(points) / n if n else 0.0,
            lo,
            hi,
        )

    def line(self) -> str:
        return (
            f"| {self.label} | {self.games} | {self.wins} {self.draws} {self.losses} | {self.score:.3f} "
            f"({self.score_low:.3f}-{self.score_high:.3f}) | {fmt_elo(elo_difference(self.score))} "
            f"({fmt_elo(elo_difference(self.score_low))} to {fmt_elo(elo_difference(self.score_high))}) |"
        )
