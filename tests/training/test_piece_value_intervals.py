"""Piece values' 95% intervals (issue 37): a seeded bootstrap of whole test games."""

import numpy as np
import pytest

from training.models import PIECE_TYPES
from training.piece_values import PieceValueReport, value_intervals


def _games(knight_per_game):
    """(game x 6) sums and counts: each game 4 pawns worth 1 each and 2 knights worth k each."""
    g = len(knight_per_game)
    sums, counts = np.zeros((g, 6)), np.zeros((g, 6))
    sums[:, 0], counts[:, 0] = 4.0, 4
    sums[:, 1], counts[:, 1] = 2.0 * np.asarray(knight_per_game), 2
    return sums.ravel(), counts.ravel()


def test_games_that_all_agree_give_a_point_interval():
    sums, counts = _games([3.0] * 12)
    got = value_intervals(sums, counts, {"pawn": 1.0, "knight": 3.0})
    assert got["pawn"] == (1.0, 1.0) and got["knight"] == pytest.approx((3.0, 3.0))
    assert set(got) == {"pawn", "knight"} <= set(PIECE_TYPES)


def test_games_that_disagree_give_an_interval_inside_their_range_around_the_value():
    knights = np.linspace(2.0, 4.0, 20)
    sums, counts = _games(knights)
    low, high = value_intervals(sums, counts, {"pawn": 1.0, "knight": 3.0})["knight"]
    assert 2.0 < low < 3.0 < high < 4.0
    assert value_intervals(sums, counts, {"pawn": 1.0, "knight": 3.0}, seed=0)["knight"] == (low, high)


def test_the_rows_carry_the_interval_beside_the_value():
    rep = PieceValueReport(rows=100, relative={"pawn": 1.0, "knight": 3.1}, intervals={"knight": (2.9, 3.3)})
    rep.interval_games = 12
    rep.counts = {"opening": {"pawn": 40, "knight": 8}}
    got = {m: (v, n, d) for _, m, v, n, d in rep.result_rows()}
    assert got["value_knight_low95"][0] == 2.9 and got["value_knight_high95"][0] == 3.3
    assert got["value_knight"][2].startswith("3.10 (95%: 2.90-3.30, n = ")
    assert "12 games" in got["value_knight"][2]
    assert "(95%: 2.90-3.30)" in rep.table_md()
