"""Matches: FIDE's draw rules on positions built to trigger each, PGN that re-ingests, Elo."""

import math

import chess
import pytest

from pipeline.play.matches import MatchSpec, fit_elo, game_end, play_game, play_match, write_pgn
from pipeline.play.openings import sabatelli_openings
from pipeline.play.search import AlphaBeta, MaterialEvaluator, RandomPlayer, SearchPlayer
from pipeline.research.intervals import wilson_interval


class Scripted:
    """Plays the given moves (SAN) in turn; then the first legal move."""

    def __init__(self, name: str, moves: list[str]):
        self.name = name
        self.moves = list(moves)

    def choose(self, board):
        return board.parse_san(self.moves.pop(0)) if self.moves else next(iter(board.legal_moves))

    def close(self):
        pass


def _shuffle(n: int) -> tuple[Scripted, Scripted]:
    """Knights out and back, n times each side."""
    return (Scripted("w", ["Nf3", "Ng1"] * n), Scripted("b", ["Nf6", "Ng8"] * n))


def test_threefold_repetition_is_claimed():
    w, b = _shuffle(4)
    g = play_game(w, b, chess.Board())
    # The start position stands after plies 0, 4 and 8: the third time, the draw is claimed.
    assert (g.result, g.termination, g.plies) == ("1/2-1/2", "threefold repetition (claimed)", 8)


def test_fivefold_repetition_ends_the_game_without_a_claim():
    w, b = _shuffle(10)
    g = play_game(w, b, chess.Board(), claim_draws=False)
    assert (g.result, g.termination, g.plies) == ("1/2-1/2", "fivefold repetition", 16)


def test_fifty_moves_claimed_and_seventy_five_automatic():
    quiet = "8/8/4k3/8/8/3K4/8/R7 w - - {} 80"
    w, b = Scripted("w", ["Ra2"]), Scripted("b", [])
    g = play_game(w, b, chess.Board(quiet.format(99)))
    assert (g.termination, g.plies, g.result) == ("fifty-move rule (claimed)", 1, "1/2-1/2")
    # Unclaimed it goes on until the 150th half-move without capture or pawn move.
    w, b = Scripted("w", ["Ra2", "Ra1", "Ra2"]), Scripted("b", ["Ke7", "Ke6"])
    g = play_game(w, b, chess.Board(quiet.format(145)), claim_draws=False)
    assert (g.termination, g.plies) == ("seventy-five-move rule", 5)


def test_checkmate_on_the_fiftieth_move_stands():
    board = chess.Board("6k1/5ppp/8/8/8/8/8/R5K1 w - - 99 80")
    g = play_game(Scripted("w", ["Ra8#"]), Scripted("b", []), board)
    assert (g.result, g.termination) == ("1-0", "checkmate")


def test_stalemate_and_dead_positions():
    g = play_game(Scripted("w", ["Qg6"]), Scripted("b", []), chess.Board("7k/8/5K2/8/8/8/8/6Q1 w - - 0 1"))
    assert (g.result, g.termination) == ("1/2-1/2", "stalemate")
    # Black takes the last pawn: king and bishop against king cannot mate.
    g = play_game(Scripted("w", ["Kd2"]), Scripted("b", ["Kxe4"]), chess.Board("8/8/8/3k4/4P3/8/8/2B1K3 w - - 0 1"))
    assert (g.result, g.termination, g.plies) == ("1/2-1/2", "insufficient material", 2)


def test_ply_limit_leaves_the_game_unfinished_and_illegal_moves_raise():
    g = play_game(RandomPlayer(1), RandomPlayer(2), chess.Board(), max_plies=6)
    assert (g.result, g.plies, g.white_score) == ("*", 6, None)
    bad = Scripted("w", [])
    bad.choose = lambda board: chess.Move.from_uci("e2e5")
    with pytest.raises(RuntimeError, match="illegal move e2e5"):
        play_game(bad, RandomPlayer(0), chess.Board())


def test_game_end_matches_python_chess_outcome():
    for fen in ["7k/5Q2/6K1/8/8/8/8/8 b - - 0 1", "7k/6Q1/6K1/8/8/8/8/8 b - - 0 1", "8/8/8/8/8/8/8/K6k w - - 0 1"]:
        board = chess.Board(fen)
        assert game_end(board, True)[0] == board.outcome(claim_draw=True).result()
    assert game_end(chess.Board(), True) is None


def test_match_pgn_reingests_cleanly(tmp_path):
    from pipeline.ingest.ingest import IngestConfig, ingest_archive
    from pipeline.store.duck import memory_connection
    from pipeline.store.store import Store

    openings = sabatelli_openings()[:2]
    spec = MatchSpec(
        "material vs random",
        lambda: SearchPlayer(AlphaBeta(MaterialEvaluator(), depth=1)),
        lambda: RandomPlayer(5),
        max_plies=60,
    )
    m = play_match(spec, openings)
    assert len(m.games) == 4 and [g.white for g in m.games][:2] == [m.a, m.b]
    pgn = tmp_path / "match.pgn"
    write_pgn(m.games, pgn)
    store = Store(tmp_path / "store").ensure()
    key = store.add_archive(pgn)
    ingest_archive(store, key, pgn, IngestConfig(workers=1))
    with memory_connection(store) as con:
        rows = con.sql(
            "SELECT white, black, result, ply_count, moves_uci, start_fen FROM games ORDER BY game_index"
        ).fetchall()
        rejected = con.sql("SELECT count(*) FROM rejected_games").fetchall()[0][0]
    assert rejected == 0 and len(rows) == 4
    for g, (white, black, result, plies, moves, start_fen) in zip(m.games, rows):
        assert (white, black, result, plies) == (g.white, g.black, g.result, g.plies)
        assert moves.split() == [mv.uci() for mv in g.game.mainline_moves()]
        assert chess.Board(start_fen).board_fen() == g.game.board().board_fen()


def test_wilson_interval_hand_computed():
    lo, hi = wilson_interval(84, 100)  # p 0.84: centre 0.8274, half-width 0.0716
    assert lo == pytest.approx(0.7558, abs=1e-3) and hi == pytest.approx(0.8990, abs=1e-3)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_elo_from_a_known_score():
    # A scores 75% against B: 400 log10(3) = 190.8 Elo; B and C even.
    games = [("A", "B", 1.0)] * 150 + [("B", "A", 1.0)] * 50 + [("B", "C", 0.5)] * 200
    fit = fit_elo(games, anchor="B", prior_sd=10_000)
    assert fit.ratings["B"] == 0 and fit.ratings["A"] == pytest.approx(400 * math.log10(3), abs=0.5)
    assert abs(fit.ratings["C"]) < 0.5 and fit.games["A"] == 200
    # Error bars against the pool's average: two players alone sit half their difference's
    # error (1.96 x 400 / ln10 / sqrt(n p (1-p))) either side of it.
    two = fit_elo([g for g in games if "C" not in g[:2]], anchor="B", prior_sd=10_000)
    half = 1.96 * 400 / math.log(10) / math.sqrt(200 * 0.75 * 0.25) / 2
    assert two.errors["A"] == pytest.approx(half, rel=0.02) and two.errors["B"] == pytest.approx(half, rel=0.02)
    # Only wins: the prior keeps the rating finite.
    assert math.isfinite(fit_elo([("A", "B", 1.0)] * 10, anchor="B").ratings["A"])


def test_default_openings_are_the_shared_list(shared_data):
    lines = [ln for ln in (shared_data / "openings" / "sabatelli20.epd").read_text().splitlines() if ln.strip()]
    shared = [chess.Board.from_epd(ln)[0] for ln in lines]
    ours = [p.board for p in sabatelli_openings()]
    assert [b.fen() for b in ours] == [b.fen() for b in shared] and len(ours) == 20
    assert all(b.is_valid() and b.turn == chess.WHITE for b in ours)


def test_a_long_game_crosses_processes_whole():
    """Before: a long game's chain of PGN nodes was deeper than pickle's recursion limit (about
    250 plies), so a long match game played in another process failed on its way back."""
    import pickle

    game = play_game(RandomPlayer(1), RandomPlayer(2), chess.Board(), max_plies=400, opening="random")
    assert game.plies > 300
    back = pickle.loads(pickle.dumps(game))
    assert (back.white, back.black, back.result, back.termination, back.plies, back.opening) == (
        game.white,
        game.black,
        game.result,
        game.termination,
        game.plies,
        game.opening,
    )
    assert list(back.game.mainline_moves()) == list(game.game.mainline_moves())
    assert dict(back.game.headers) == dict(game.game.headers)


def test_a_match_game_depends_on_its_place_only_and_each_random_game_has_its_own_moves():
    """Fresh players per game, the random mover reseeded from the game's place: a game played
    alone is the match's game, and a match played twice is the same match. Before, one random
    stream ran through the match (a game's moves depended on the games before it)."""
    from pipeline.play.matches import play_pairing

    openings = sabatelli_openings()[:2]
    spec = MatchSpec(
        "vs random", lambda: SearchPlayer(AlphaBeta(MaterialEvaluator(), depth=1)), lambda: RandomPlayer(7), 30
    )
    first, again = play_match(spec, openings), play_match(spec, openings)
    moves = [[m.uci() for m in g.game.mainline_moves()] for g in first.games]
    assert moves == [[m.uci() for m in g.game.mainline_moves()] for g in again.games]
    alone = play_pairing(spec, openings[1], 1, 1)
    assert [m.uci() for m in alone.game.mainline_moves()] == moves[3]
    assert alone.game.headers["Round"] == "2.2" and alone.white == "random"
    # Its moves replay from its seed and the game's place alone: game 2.2, the random mover White.
    import random

    from pipeline.parallel import task_seed

    rng, board = random.Random(task_seed("random mover", 7, "vs random", 1, 1)), openings[1].board.copy()
    for uci in moves[3]:
        if board.turn == chess.WHITE:
            assert rng.choice(list(board.legal_moves)).uci() == uci
        board.push_uci(uci)
