"""Kaufman's delta as Sabatelli's thesis defines it (issue 37): per position, the distance between
Stockfish's deep evaluation of the position after the test's move and after the player's move,
from the mover's side, in pawns, a forced mate written as a symbolic 20 pawns; a player that plays
the test's move scores exactly 0 there. The figure is a mean over the 25 positions with n and a
seeded 95% interval, beside Stockfish's own delta as the scale."""

import chess
import pytest

from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import Limit
from pipeline.play.suites import (
    KAUFMAN_MATE_PAWNS,
    DeltaCp,
    engine_evaluations,
    kaufman_delta_cp,
    kaufman_scale,
    kaufman_summary,
    kept_kaufman_scale,
    load_epd,
    reference_moves,
)

DEEP = Limit("depth", 12)
"""Cheap stand-in for the configured depth 16: the facts below hold at any depth."""


def _delta(d: int) -> DeltaCp:
    return DeltaCp("p", "a", "b", 0, -d, d)


def test_the_summary_is_the_mean_in_pawns_with_n_and_a_seeded_interval():
    same = kaufman_summary([_delta(150)] * 25)
    assert (same.mean, same.low, same.high, same.n) == (1.5, 1.5, 1.5, 25)
    spread = [_delta(cp) for cp in (0, 0, 0, 100, 2000)]
    a, b = kaufman_summary(spread), kaufman_summary(spread)
    assert a == b and a.n == 5 and a.mean == pytest.approx(4.2)
    assert 0 <= a.low < a.mean < a.high <= KAUFMAN_MATE_PAWNS
    assert "n 5" in a.text() and "95%" in a.text()


def test_the_test_move_scores_zero_everywhere_and_every_delta_is_a_distance(shared_data, stockfish):
    positions = load_epd(shared_data / "epd" / "kaufman.epd")
    with EnginePool(stockfish, workers=1, clear_hash=True) as pool:
        best = engine_evaluations(pool, DEEP, ((p.index, p.board) for p in positions if not p.best_moves))
        refs = reference_moves(positions, {i: chess.Move.from_uci(e.best_move) for i, e in best.items()})
        perfect = kaufman_delta_cp(positions, refs, pool, DEEP)
        # Position 14 (Rxb2): Rfd1 is the move Stockfish at depth 8 plays there; deep search rates
        # it above the test's Rxb2, and the thesis's delta is a distance, never negative.
        p14 = positions[13]
        moves = list(refs)
        moves[13] = p14.board.parse_san("Rfd1")
        other = kaufman_delta_cp(positions, moves, pool, DEEP)
    assert [d.delta for d in perfect] == [0] * 25
    assert all(d.move == d.reference for d in perfect)
    assert all(d.delta == abs(d.eval_reference - d.eval_move) for d in other)
    got = other[13]
    assert (got.move, got.reference) == ("Rfd1", "Rxb2")
    assert got.eval_move > got.eval_reference and got.delta == got.eval_move - got.eval_reference > 0
    assert kaufman_summary(perfect).mean == 0.0


def test_a_forced_mate_is_a_symbolic_20_pawns_from_the_movers_side(shared_data, stockfish):
    positions = load_epd(shared_data / "epd" / "kaufman.epd")
    p11, p02 = positions[10], positions[1]  # Nf5 forces mate (White); Nxd4 wins for Black
    with EnginePool(stockfish, workers=1, clear_hash=True) as pool:
        mate = kaufman_delta_cp([p11], [p11.board.parse_san("Nf5")], pool, DEEP)[0]
        black = kaufman_delta_cp([p02], [p02.board.parse_san("Nxd4")], pool, DEEP)[0]
    assert (mate.eval_reference, mate.delta) == (KAUFMAN_MATE_PAWNS * 100, 0)
    assert p02.board.turn == chess.BLACK and black.eval_reference > 0  # the mover's (Black's) view


def test_stockfish_is_the_scale(shared_data, stockfish):
    """Stockfish as the player at depths 1 and 8: by depth, 25 deltas each, none negative, and the
    depth-8 player no worse than the depth-1 one on average."""
    positions = load_epd(shared_data / "epd" / "kaufman.epd")
    with EnginePool(stockfish, workers=1, clear_hash=True) as pool:
        scale = kaufman_scale(positions, pool, DEEP, depths=(1, 8))
    assert list(scale) == [1, 8]
    assert all(len(ds) == 25 and min(d.delta for d in ds) >= 0 for ds in scale.values())
    assert kaufman_summary(scale[8]).mean <= kaufman_summary(scale[1]).mean


def test_the_scale_is_searched_once_per_store_and_read_back_for_the_next_model(shared_data, stockfish, tmp_path):
    """Every model's eval_suites asset reports the same scale (about 40 s of Stockfish a model at
    depth 16): the first search is kept in the store and the next reads it, without the engine
    (here a pool already closed), the same deltas; another depth or another suite searches anew."""
    positions = load_epd(shared_data / "epd" / "kaufman.epd")[:6]
    folder = tmp_path / "store" / "reports" / "kaufman_scale"
    with EnginePool(stockfish, workers=1, clear_hash=True) as pool:
        first = kept_kaufman_scale(folder, positions, pool, Limit("depth", 6), depths=(1, 2))
        assert first == kaufman_scale(positions, pool, Limit("depth", 6), depths=(1, 2))  # a direct search
    assert len(list(folder.glob("*.json"))) == 1
    assert kept_kaufman_scale(folder, positions, pool, Limit("depth", 6), depths=(1, 2)) == first  # closed pool
    with pytest.raises(RuntimeError, match="outside"):  # not kept: a closed pool cannot search
        kept_kaufman_scale(folder, positions[:5], pool, Limit("depth", 6), depths=(1, 2))
    with pytest.raises(RuntimeError, match="outside"):
        kept_kaufman_scale(folder, positions, pool, Limit("depth", 7), depths=(1, 2))
    assert len(list(folder.glob("*.json"))) == 1  # nothing half-written by the failed ones


def test_the_report_row_shows_the_interval_beside_the_mean_and_n():
    from pipeline.research.published import EVALUATION_FIGURES
    from pipeline.research.reproduction import Ours, ReportInputs, figures_table

    f = EVALUATION_FIGURES[0]
    key = (f.model, f.table, f.where, f.metric)
    text = figures_table(ReportInputs([f], {key: Ours(2.71, 25, (1.37, 4.65))}, {}, [], {}))
    assert "| 2.71 pawns (95%: 1.37 pawns-4.65 pawns, n = 25) | 25 |" in text
