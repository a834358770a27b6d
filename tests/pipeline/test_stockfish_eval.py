"""Stockfish's static evaluation as a search's evaluator (pipeline/stockfish_eval.py), checked
against Stockfish's `eval` called directly, one process a position; and engines that lie."""

import random
import stat
import sys

import chess
import pytest

from pipeline.engine import EngineError
from pipeline.lubeck_grid import Cell, GridConfig, StartPosition, Task, calibrate, play_task
from pipeline.search import AlphaBeta, MaterialEvaluator
from pipeline.stockfish_eval import BATCH, StockfishStaticEvaluator
from tests.engines import static_cp

MIDDLEGAME = "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9"
IN_CHECK = "rnb1kbnr/pppp1ppp/8/4p3/6Pq/5P2/PPPPP2P/RNBQKBNR w KQkq - 1 3"  # fool's mate: White in check, mated


def _playout(n: int, seed: int = 7) -> list[chess.Board]:
    """n positions of random games from the start (a new game when one ends), both sides to move."""
    rng = random.Random(seed)
    board, out = chess.Board(), []
    while len(out) < n:
        if board.is_game_over():
            board = chess.Board()
        board.push(rng.choice(list(board.legal_moves)))
        out.append(board.copy())
    return out


@pytest.fixture
def evaluator(stockfish):
    ev = StockfishStaticEvaluator(stockfish)
    yield ev
    ev.close()


def test_scores_are_stockfishs_eval_from_the_side_to_moves_view(evaluator, stockfish):
    boards = [b for b in _playout(40) if not b.is_check()][:12] + [chess.Board(MIDDLEGAME)]
    assert {b.turn for b in boards} == {chess.WHITE, chess.BLACK}
    got = evaluator.evaluate(boards)
    for board, score in zip(boards, got, strict=True):
        white = static_cp(stockfish, board.fen())
        assert score == pytest.approx(white if board.turn == chess.WHITE else -white, abs=0.5), board.fen()
    assert list(evaluator.evaluate(boards)) == list(got)  # the same again: no state between calls
    assert (evaluator.evaluated, evaluator.in_check) == (2 * len(boards), 0)


def test_a_position_in_check_gets_the_traditional_evaluation_and_is_counted(evaluator):
    board = chess.Board(IN_CHECK)
    assert board.is_check()
    got = evaluator.evaluate([chess.Board(MIDDLEGAME), board])
    assert got[1] == MaterialEvaluator().evaluate([board])[0]
    assert (evaluator.evaluated, evaluator.in_check) == (1, 1)


def test_more_positions_than_a_batch_come_back_in_order(evaluator):
    """Over BATCH positions, positions in check among them: each score is the one that
    position gets on its own."""
    boards = _playout(BATCH + 90, seed=3)
    assert any(b.is_check() for b in boards)
    together = evaluator.evaluate(boards)
    alone = [evaluator.evaluate([b])[0] for b in boards[::37]]
    assert list(together[::37]) == alone


def test_the_engines_cpu_time_is_counted_in_a_searchs_cost(evaluator):
    """The engine process does the evaluating: its CPU seconds grow with the positions asked,
    and calibrate's nodes/s counts them (a figure from this process's time alone would be
    several times higher)."""
    before = evaluator.cpu_seconds()
    evaluator.evaluate(_playout(2000))
    assert evaluator.cpu_seconds() - before > 0.05
    board = chess.Board(MIDDLEGAME)
    nps = calibrate(evaluator, [board], 2)
    nodes = AlphaBeta(evaluator, depth=2).search(board).nodes
    assert nodes > 100
    assert nps < 20_000  # Stockfish's eval trace costs it well over 50 us a position here


def _liar(tmp_path, stockfish: str, mode: str) -> str:
    """Stockfish, with its third `Final evaluation` line mangled (garbage) or the process ended
    there (crash)."""
    path = tmp_path / f"stockfish-{mode}"
    path.write_text(
        f"#!{sys.executable}\n"
        "import subprocess, sys\n"
        f"sf = subprocess.Popen([{stockfish!r}], stdin=sys.stdin, stdout=subprocess.PIPE)\n"
        "seen = 0\n"
        "for line in sf.stdout:\n"
        "    if line.startswith(b'Final evaluation'):\n"
        "        seen += 1\n"
        "        if seen == 3:\n"
        f"            if {mode!r} == 'crash':\n"
        "                sf.kill(); sys.exit(3)\n"
        "            line = b'Final evaluation       +zz.q (white side)\\n'\n"
        "    sys.stdout.buffer.write(line); sys.stdout.buffer.flush()\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


@pytest.mark.parametrize(
    "mode, words",
    [("garbage", r"Stockfish's evaluation is not a number: 'Final evaluation +\+zz\.q"), ("crash", "exited")],
)
def test_an_engine_that_lies_or_dies_is_one_clear_error(tmp_path, stockfish, mode, words):
    ev = StockfishStaticEvaluator(_liar(tmp_path, stockfish, mode))
    try:
        with pytest.raises(EngineError, match=words.replace(" +", r"\s+")):
            ev.evaluate(_playout(8))
    finally:
        ev.close()


def test_a_challenger_the_grid_does_not_know_is_refused_naming_the_valid_ones():
    with pytest.raises(ValueError, match="challenger must be one of network, stockfish_static, got 'stockfish'"):
        GridConfig(challenger="stockfish")


def test_stockfish_plays_a_grid_task_within_its_node_budget(stockfish):
    """A grid task with Stockfish's evaluation as the challenger: both games end or are cut at
    max_plies, no search of it over its budget by more than one frontier's children, and the
    task's CPU time counts the engine's."""
    ev = StockfishStaticEvaluator(stockfish)
    try:
        start = StartPosition("quiet", "quiet.01", MIDDLEGAME, 0, 0)
        task = Task(Cell("quiet", 3, 1.0), start, 150, 1500, 6, ev.name)
        result = play_task(task, ev)
    finally:
        ev.close()
    assert len(result.games) == 2 and all(len(list(g.game.mainline_moves())) <= 6 for g in result.games)
    nodes = [n for game in result.network for _, n in game]
    assert len(nodes) == 6 and max(nodes) <= 150 + 218  # the most legal moves of a position
    assert result.seconds > 0
