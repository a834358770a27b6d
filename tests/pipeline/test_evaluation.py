"""Won endgames from the store and converting them, against direct engine calls."""

import chess
import chess.engine

from pipeline.duck import memory_connection
from pipeline.engine import EnginePool
from pipeline.evaluation import EndgameConfig, find_won_endgames, run_endgames
from pipeline.search import MaterialEvaluator
from tests.stores import labelled_store

# A rook-and-pawn ending White wins easily, a queen ending, and a level one.
ENDGAMES = """[Event "won rook"]\n[SetUp "1"]\n[FEN "8/8/8/4k3/8/8/3PK3/7R w - - 0 1"]\n[Result "*"]

1. Rh5+ Ke6 2. d4 Kd6 3. Kd3 *

[Event "won queen"]\n[SetUp "1"]\n[FEN "8/8/3k4/8/8/8/8/3QK3 w - - 0 1"]\n[Result "*"]

1. Qd4 Ke6 2. Kf2 *

[Event "level"]\n[SetUp "1"]\n[FEN "8/4k3/8/3p4/3P4/8/4K3/8 w - - 0 1"]\n[Result "*"]

1. Kd3 Kd6 2. Kc3 *
"""


def _material(board: chess.Board) -> int:
    values = {chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}
    return sum(values[p.piece_type] for p in board.piece_map().values())


def test_won_endgames_are_confirmed_and_played_out(tmp_path, stockfish):
    store = labelled_store(tmp_path, ENDGAMES, stockfish)
    cfg = EndgameConfig(positions=3, verify_depth=12, defender_depth=4, max_plies=12, player_depth=2)
    with memory_connection(store) as con, EnginePool(stockfish, workers=1) as pool:
        found = find_won_endgames(con, pool, cfg)
    assert found, "the rook and queen endings are won"
    with chess.engine.SimpleEngine.popen_uci(stockfish) as engine:
        for p in found:
            assert _material(p.board) <= cfg.max_material
            info = engine.analyse(p.board, chess.engine.Limit(depth=cfg.verify_depth))
            assert info["score"].relative.score(mate_score=32000) > cfg.min_cp, p.board.fen()
    # The level pawn ending never qualifies.
    assert all("3p4/3P4" not in p.board.fen() for p in found)
    m, rows = run_endgames("material_pst", MaterialEvaluator, found, stockfish, cfg, log=lambda s: None)
    assert len(m.games) == len(found)
    wins = sum(1 for g in m.games if g.white_score == (1.0 if g.white == m.a else 0.0))
    (suite, metric, value, n, detail), = rows
    assert (suite, metric, n) == ("endgame conversion", "converted", len(found)) and value == wins / len(found)
    for g, p in zip(m.games, found):
        assert g.game.board().fen() == p.board.fen()  # each game starts from its endgame
        assert (g.white == m.a) == (p.board.turn == chess.WHITE)  # the player takes the winning side
