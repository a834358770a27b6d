"""The TD(lambda) / TD-Leaf(lambda) update of one self-play game (the formula is in
training/td/__init__.py): temporal differences, their lambda-weighted sums, the weight change."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from training.td.config import ClockEnd, Learner

CLOCK_TERMINATIONS = frozenset({"fifty-move rule (claimed)", "seventy-five-move rule"})
"""The terminations (pipeline.play.matches.game_end, _selfplay_end) that a move counter decides."""


def td_coefficients(values: np.ndarray, final: float | None, lam: float) -> tuple[np.ndarray, np.ndarray]:
    """The temporal differences d_t = J_{t+1} - J_t (the last one against the result when there
    is one) and each position's weight sum_{j >= t} lambda^(j-t) d_j (as many as differences:
    without a result the last position gets no update)."""
    values = np.asarray(values, dtype=np.float64)
    d = np.diff(values)
    if final is not None:
        d = np.append(d, final - values[-1])
    c = np.zeros_like(d)
    acc = 0.0
    for t in range(len(d) - 1, -1, -1):
        acc = d[t] + lam * acc
        c[t] = acc
    return d, c


@dataclass
class GameRecord:
    """One self-play game: its PGN and what the update needs, for each searched position."""

    pgn: str
    result: str
    plies: int
    nodes: int
    seconds: float
    roots: np.ndarray  # (n, 384) int8: the positions the search started from (TD(lambda))
    leaves: np.ndarray  # (n, 384) int8: the leaves of their principal variations (TD-Leaf)
    leaf_over: np.ndarray  # (n,) float: NaN, or the result (White's view) of a leaf the rules end
    termination: str = ""  # how the game ended (the PGN's Termination)


def outcome_value(result: str) -> float | None:
    return {"1-0": 1.0, "0-1": -1.0, "1/2-1/2": 0.0}.get(result)


def td_final(record: GameRecord, clock_ends: ClockEnd = "draw") -> float | None:
    """The game's last TD target: its result, or None (unfinished: the cap, or with clock_ends
    'unfinished' the fifty-move or seventy-five-move rule)."""
    if clock_ends == "unfinished" and record.termination in CLOCK_TERMINATIONS:
        return None
    return outcome_value(record.result)


def td_update(
    model, record: GameRecord, learner: Learner, lam: float, lr: float, clock_ends: ClockEnd = "draw"
) -> tuple[np.ndarray, np.ndarray]:
    """The weight change of one game (not applied) and its temporal differences."""
    x = (record.leaves if learner == "td_leaf" else record.roots).astype(np.float64)
    if len(x) == 0:
        return np.zeros_like(model.params), np.zeros(0)
    values = model.value(x)
    grads = model.grad(x)
    if learner == "td_leaf":
        over = ~np.isnan(record.leaf_over)
        values = np.where(over, record.leaf_over, values)
        grads[over] = 0.0
    d, c = td_coefficients(values, td_final(record, clock_ends), lam)
    return lr * (c[:, None] * grads[: len(c)]).sum(axis=0), d
