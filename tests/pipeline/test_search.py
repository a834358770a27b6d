"""The alpha-beta search and the evaluators, against brute force and hand-checked positions."""

import random
import time

import chess
import numpy as np
import pytest

from pipeline.search import (
    MATE,
    TRADITIONAL_TABLES,
    AlphaBeta,
    MaterialEvaluator,
    RandomPlayer,
    StockfishPlayer,
    board_arrays,
)

MATE_IN_2 = "r2qkb1r/pp2nppp/3p4/2pNN1B1/2BnP3/3P4/PPP2PPP/R2bK2R w KQkq - 1 1"  # 1. Nf6+ gxf6 2. Bxf7#


def _mates_in_one(board: chess.Board) -> list[chess.Move]:
    out = []
    for m in board.legal_moves:
        board.push(m)
        if board.is_checkmate():
            out.append(m)
        board.pop()
    return out


def _forces_mate_next(board: chess.Board, move: chess.Move) -> bool:
    """After move, every reply allows a mate in one (brute force with python-chess)."""
    board.push(move)
    try:
        replies = list(board.legal_moves)
        ok = bool(replies)
        for r in replies:
            board.push(r)
            ok = ok and bool(_mates_in_one(board))
            board.pop()
        return ok
    finally:
        board.pop()


@pytest.mark.parametrize("fen", ["6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1", "r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1"])
@pytest.mark.parametrize("depth", [1, 2, 3])
def test_finds_mate_in_one_at_every_depth(fen, depth):
    board = chess.Board(fen)
    r = AlphaBeta(MaterialEvaluator(), depth=depth).search(board)
    assert r.move in _mates_in_one(board)
    assert r.mate_in == 1 and r.score == MATE - 1


@pytest.mark.parametrize("mirror", [False, True])
def test_finds_mate_in_two(mirror):
    board = chess.Board(MATE_IN_2)
    if mirror:
        board = board.mirror()  # the same mate for Black
    assert not _mates_in_one(board)
    r = AlphaBeta(MaterialEvaluator(), depth=3).search(board)
    assert r.mate_in == 2 and r.score == MATE - 3
    assert _forces_mate_next(board, r.move)
    # Shallower, it cannot see the mate: it does not claim one.
    assert AlphaBeta(MaterialEvaluator(), depth=2).search(board).mate_in is None


def test_sees_being_mated():
    # Black to move, any move allows Ra8# ... except none: White mates next whatever Black does.
    board = chess.Board("7k/8/6K1/8/8/8/8/R7 b - - 0 1")
    r = AlphaBeta(MaterialEvaluator(), depth=2).search(board)
    assert r.mate_in == -1


def _minimax(board: chess.Board, depth: int, evaluator, ply: int = 0) -> float:
    """Plain negamax without pruning or table, same rules: the reference for alpha-beta."""
    if not any(board.generate_legal_moves()):
        return -(MATE - ply) if board.is_check() else 0.0
    if board.is_insufficient_material() or board.halfmove_clock >= 100:
        return 0.0
    if depth == 0:
        return float(evaluator.evaluate([board])[0])
    best = -np.inf
    for m in list(board.legal_moves):
        board.push(m)
        best = max(best, -_minimax(board, depth - 1, evaluator, ply + 1))
        board.pop()
    return best


def _positions(n: int, seed: int) -> list[chess.Board]:
    """Boards from seeded random playouts (castling, captures, checks, promotions come up)."""
    rng = random.Random(seed)
    out = []
    while len(out) < n:
        b = chess.Board()
        for _ in range(rng.randrange(4, 60)):
            moves = list(b.legal_moves)
            if not moves:
                break
            b.push(rng.choice(moves))
        if not b.is_game_over():
            out.append(b)
    return out


@pytest.mark.parametrize("depth", [1, 2])
def test_alpha_beta_scores_equal_plain_minimax(depth):
    ev = MaterialEvaluator()
    for board in _positions(12, seed=depth):
        fresh = chess.Board(board.fen())  # no history: repetition plays no part in either
        got = AlphaBeta(ev, depth=depth).search(fresh).score
        assert got == pytest.approx(_minimax(fresh, depth, ev)), fresh.fen()


def test_search_only_ever_returns_legal_moves():
    ev = MaterialEvaluator()
    for depth in (1, 2):
        search = AlphaBeta(ev, depth=depth)
        for board in _positions(40, seed=10 + depth):
            assert search.search(board).move in board.legal_moves, board.fen()
    # Special moves: en passant, castling and under-promotion positions.
    for fen in [
        "rnbqkbnr/ppp1p1pp/8/3pPp2/8/8/PPPP1PPP/RNBQKBNR w KQkq f6 0 3",
        "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",
        "8/1P4k1/8/8/8/8/6K1/8 w - - 0 1",
    ]:
        board = chess.Board(fen)
        assert AlphaBeta(ev, depth=2).search(board).move in board.legal_moves


def test_time_per_move_is_kept_and_deepens():
    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    start = time.monotonic()
    r = AlphaBeta(MaterialEvaluator(), movetime=0.3).search(board)
    took = time.monotonic() - start
    assert r.move in board.legal_moves and r.depth >= 2
    assert took < 0.3 + 0.25  # the node-count clock check stops it soon after the deadline


def test_repetition_is_a_draw_inside_the_search():
    # White is a rook down; Nf3 Kd8 Ng1 Ke8, and Nf3 again repeats the position after the first Nf3.
    board = chess.Board("r3k3/8/8/8/8/8/8/4K1N1 w - - 0 1")
    for san in ("Nf3", "Kd8", "Ng1", "Ke8"):
        board.push_san(san)
    for depth in (1, 3):
        r = AlphaBeta(MaterialEvaluator(), depth=depth).search(board)
        assert r.move == chess.Move.from_uci("g1f3") and r.score == 0.0
    # The same position without that history is just material down (a knight against a rook).
    assert AlphaBeta(MaterialEvaluator(), depth=1).search(chess.Board(board.fen())).score < -100


def test_material_evaluator_is_symmetric_and_counts_material():
    ev = MaterialEvaluator()
    start = chess.Board()
    assert ev.evaluate([start])[0] == 0
    no_black_queen = chess.Board("rnb1kbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1")
    v = ev.evaluate([no_black_queen, no_black_queen.mirror()])
    assert v[0] > 800 and v[1] == pytest.approx(v[0])  # side to move's view: the mirror is as good for Black


def test_material_evaluator_takes_other_tables_of_its_form():
    """Tables of the traditional form (scripts/quiet_study.py's learnt ones) score by the same
    rule: a knight's value moved onto one square is counted there, for either side."""
    middle, end = (t.copy() for t in TRADITIONAL_TABLES)
    assert np.array_equal(
        MaterialEvaluator(middle, end).evaluate([chess.Board()]), MaterialEvaluator().evaluate([chess.Board()])
    )
    for t in (middle, end):  # White's knight on f3 worth 1,000 more; Black's on f6 (mirrored) the same for Black
        t[1 * 64 + chess.F3] += 1000
        t[7 * 64 + chess.F6] -= 1000
    learnt = MaterialEvaluator(middle, end, "learnt")
    after = chess.Board("rnbqkb1r/pppppppp/5n2/8/8/5N2/PPPPPPPP/RNBQKB1R w KQkq - 2 2")
    one_side = chess.Board("rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1")
    base, moved = MaterialEvaluator().evaluate([after, one_side]), learnt.evaluate([after, one_side])
    assert learnt.name == "learnt" and moved[0] == pytest.approx(base[0])  # both knights there: it cancels
    assert moved[1] == pytest.approx(base[1] - 1000)  # Black to move: White's knight counts against Black


def test_board_arrays_match_the_store_encoding():
    from pipeline.encoding import board_from_row

    board = chess.Board("r3k2r/pp3ppp/8/3pP3/8/8/PP3PPP/R3K2R w Kq d6 0 12")
    planes, white, castling = board_arrays([board])
    back = board_from_row(planes[0].tobytes(), "w", int(castling[0]), None, 0, 12)
    assert back.board_fen() == board.board_fen() and back.castling_rights == board.castling_rights
    assert white[0] and castling[0] == 1 | 8


def test_random_and_stockfish_players_play_legal_moves(stockfish):
    board = chess.Board()
    rnd = RandomPlayer(seed=3)
    assert all(rnd.choose(board) in board.legal_moves for _ in range(20))
    weak, strong = StockfishPlayer(stockfish, skill=0, depth=3), StockfishPlayer(stockfish, skill=20, depth=3)
    try:
        assert weak.choose(board) in board.legal_moves
        mate = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1")
        assert strong.choose(mate) in _mates_in_one(mate)
    finally:
        weak.close()
        strong.close()
    with pytest.raises(ValueError):
        StockfishPlayer(stockfish, skill=21, depth=1)
