"""The alpha-beta search and the evaluators, against brute force and hand-checked positions."""

import random
import time

import chess
import numpy as np
import pytest

from pipeline.ingest.encoding import pack_planes, planes_from_records
from pipeline.play.search import (
    MATE,
    TRADITIONAL_TABLES,
    AlphaBeta,
    MaterialEvaluator,
    RandomPlayer,
    StockfishPlayer,
    board_arrays,
    board_bits,
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


def _over(board: chess.Board, ply: int) -> float | None:
    if not any(board.generate_legal_moves()):
        return -(MATE - ply) if board.is_check() else 0.0
    if board.is_insufficient_material() or board.halfmove_clock >= 100:
        return 0.0
    return None


def _minimax(
    board: chess.Board, depth: int, evaluator, ply: int = 0, captures: int = 0, by_capture: bool = False
) -> float:
    """Plain negamax without pruning or table, same rules: the reference for alpha-beta. With
    `captures`, a leaf reached by a capture is scored by every capture line up to that many
    plies, the side to move taking the best of standing and capturing, or in check the best
    evasion (standing only when no ply is left)."""
    over = _over(board, ply)
    if over is not None:
        return over
    if depth == 0:
        stand = float(evaluator.evaluate([board])[0])
        if not (by_capture and captures):
            return stand
        if board.is_check():
            return max(_after(board, m, 0, evaluator, ply, captures - 1, True) for m in list(board.legal_moves))
        return max(
            [stand] + [_after(board, m, 0, evaluator, ply, captures - 1, True) for m in board.generate_legal_captures()]
        )
    return max(
        _after(board, m, depth - 1, evaluator, ply, captures, board.is_capture(m)) for m in list(board.legal_moves)
    )


def _after(
    board: chess.Board, move: chess.Move, depth: int, evaluator, ply: int, captures: int, by_capture: bool
) -> float:
    board.push(move)
    try:
        return -_minimax(board, depth, evaluator, ply + 1, captures, by_capture)
    finally:
        board.pop()


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


@pytest.mark.parametrize(("depth", "captures"), [(1, 3), (2, 2)])
def test_a_capture_search_scores_equal_every_capture_line_searched_out(depth, captures):
    ev = MaterialEvaluator()
    for board in _positions(8, seed=10 + depth):
        fresh = chess.Board(board.fen())
        got = AlphaBeta(ev, depth=depth, quiescence=captures).search(fresh)
        assert got.score == pytest.approx(_minimax(fresh, depth, ev, captures=captures)), fresh.fen()
        # the move played is worth its score, not just bounded by it (a capture that fails low
        # at the best score so far is no better than it)
        chosen = _after(fresh, got.move, depth - 1, ev, 0, captures, fresh.is_capture(got.move))
        assert chosen == pytest.approx(got.score), fresh.fen()


def test_a_capture_search_plays_the_move_worth_its_score_when_a_capture_ties_at_the_bound():
    # Found by a review over random positions: a3d6 fails low at exactly the best quiet score,
    # and is worth 30 cp less (-311.25, the reference); d2e4 and others are worth -281.25.
    board = chess.Board("4kb1r/r1p2p1n/p1nq4/3p2p1/3p1N1B/Q5PP/PPPNbP2/2R2RK1 w - - 0 23")
    ev = MaterialEvaluator()
    got = AlphaBeta(ev, depth=1, quiescence=3).search(board)
    assert got.score == pytest.approx(_minimax(board, 1, ev, captures=3)) == pytest.approx(-281.25)
    assert got.move != chess.Move.from_uci("a3d6")
    assert _after(board, got.move, 0, ev, 0, 3, board.is_capture(got.move)) == pytest.approx(-281.25)


def test_a_mate_inside_the_capture_search_is_scored_by_its_plies():
    # Rxb8 (a capture) and the capture search finds the mate two plies later: mate in 3 plies.
    board = chess.Board("Rn2kbnr/1p2p1p1/4b2p/4N3/7P/2P5/1P1PPPP1/2BK1B1R w - - 3 15")
    ev = MaterialEvaluator()
    got = AlphaBeta(ev, depth=1, quiescence=3).search(board)
    assert (got.move, got.score) == (chess.Move.from_uci("a8b8"), MATE - 3)
    assert _minimax(board, 1, ev, captures=3) == MATE - 3


def test_a_capture_search_sees_the_recapture_a_plain_leaf_does_not():
    # Qxd5 wins a pawn on its face; c6xd5 takes the queen back. Hand-checked with the
    # traditional tables: standing pat after any quiet queen move keeps a queen against two pawns.
    board = chess.Board("4k3/8/2p5/3p4/8/8/8/3QK3 w - - 0 1")
    plain = AlphaBeta(MaterialEvaluator(), depth=1).search(board)
    resolved = AlphaBeta(MaterialEvaluator(), depth=1, quiescence=1).search(board)
    assert plain.move == chess.Move.from_uci("d1d5")
    assert resolved.move != chess.Move.from_uci("d1d5")
    assert resolved.score > 500  # still a queen up, not the pawn grab's minus a queen
    assert resolved.nodes > plain.nodes  # the recapture was searched and counted
    assert "plies of captures" in AlphaBeta(MaterialEvaluator(), depth=1, quiescence=1).name


def test_depth_one_finishes_its_capture_search_whatever_the_budget():
    # A budget smaller than the root's moves: depth 1 still resolves Qxd5 cxd5 and keeps the queen.
    board = chess.Board("4k3/8/2p5/3p4/8/8/8/3QK3 w - - 0 1")
    for budget in (1, 10):
        result = AlphaBeta(MaterialEvaluator(), nodes=budget, max_depth=6, quiescence=4).search(board)
        assert result.depth == 1 and result.move != chess.Move.from_uci("d1d5") and result.score > 500


def test_later_iterations_keep_the_node_budget_inside_the_capture_search():
    board = chess.Board("r1bqkb1r/pppp1ppp/2n2n2/4p3/2B1P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 4 4")
    widest = 0  # the most children one depth-1 node of the second iteration scores in a batch
    for move in list(board.legal_moves):
        board.push(move)
        widest = max(widest, len(list(board.legal_moves)))
        board.pop()
    for budget in (150, 400, 1000):
        result = AlphaBeta(MaterialEvaluator(), nodes=budget, max_depth=2, quiescence=4).search(board)
        # past the budget by at most the node that crossed it and one depth-1 node's batch of
        # children: the capture search below them stops at the budget
        assert result.nodes <= budget + 1 + widest, budget
        assert result.depth >= 1 and board.is_legal(result.move)


def test_a_negative_capture_search_is_refused():
    with pytest.raises(ValueError, match="^quiescence is 0 \\(none\\) or plies of captures, got -1$"):
        AlphaBeta(MaterialEvaluator(), depth=1, quiescence=-1)


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
    from pipeline.ingest.encoding import board_from_row

    board = chess.Board("r3k2r/pp3ppp/8/3pP3/8/8/PP3PPP/R3K2R w Kq d6 0 12")
    planes, white, castling = board_arrays([board])
    back = board_from_row(planes[0].tobytes(), "w", int(castling[0]), None, 0, 12)
    assert back.board_fen() == board.board_fen() and back.castling_rights == board.castling_rights
    assert white[0] and castling[0] == 1 | 8


def test_board_bits_are_the_store_planes_unpacked_and_name_each_piece():
    boards, rng, b = [], random.Random(5), chess.Board()
    while len(boards) < 300:  # random games: promotions, en passant, castled kings, bare endings
        b = chess.Board() if b.is_game_over() else b
        b.push(rng.choice(list(b.legal_moves)))
        boards.append(b.copy(stack=False))
    bits = board_bits(boards)
    assert bits.shape == (300, 768) and bits.dtype == np.uint8
    # the store's planes as ingest builds them: piece-type bitboards split by colour
    rec = np.array(
        [(b.pawns, b.knights, b.bishops, b.rooks, b.queens, b.kings, b.occupied_co[chess.WHITE]) for b in boards],
        dtype=np.uint64,
    )
    stored = pack_planes(planes_from_records(*rec.T))
    np.testing.assert_array_equal(bits, np.unpackbits(stored, axis=1, bitorder="little"))
    np.testing.assert_array_equal(board_arrays(boards)[0], stored)
    planes = "PNBRQKpnbrqk"  # feature plane * 64 + square, a1 = 0: checked against python-chess's own map
    for board, row in zip(boards[::37], bits[::37]):
        named = {int(f) % 64: planes[int(f) // 64] for f in np.flatnonzero(row)}
        assert named == {sq: p.symbol() for sq, p in board.piece_map().items()}
    assert board_bits([]).shape == (0, 768)


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
