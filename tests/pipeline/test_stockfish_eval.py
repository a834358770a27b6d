"""Stockfish's static evaluation as a search's evaluator (pipeline/play/stockfish_eval.py), checked
against Stockfish's `eval` called directly, one process a position; and engines that lie."""

import fcntl
import random
import threading
import time

import chess
import chess.engine
import pytest

from pipeline.labels.engine import EngineError
from pipeline.play.lubeck_grid import Cell, GridConfig, StartPosition, Task, calibrate, play_task
from pipeline.play.search import EVAL_CLIP, AlphaBeta
from pipeline.play.stockfish_eval import BATCH, StockfishStaticEvaluator
from tests.engines import faulty_stockfish, static_cp

MIDDLEGAME = "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 9"


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


def test_a_position_in_check_gets_stockfishs_depth_1_search_and_is_counted(evaluator, stockfish):
    """`eval` scores no position in check: Stockfish's depth-1 search does, from a cleared hash,
    so a fresh engine's depth-1 search (python-chess's own UCI client) gives the same figure,
    whatever the evaluator searched before."""
    checks = [b for b in _playout(600, seed=11) if b.is_check() and not b.is_game_over()][:6]
    assert len(checks) == 6
    got = evaluator.evaluate([chess.Board(MIDDLEGAME), *checks])
    again = evaluator.evaluate(checks[::-1])[::-1]
    assert (evaluator.evaluated, evaluator.in_check) == (1, 12)
    for board, score, score_again in zip(checks, got[1:], again, strict=True):
        fresh = chess.engine.SimpleEngine.popen_uci(stockfish)
        try:
            fresh.configure({"Threads": 1, "Hash": 16})
            info = fresh.analyse(board, chess.engine.Limit(depth=1), game=object())
        finally:
            fresh.quit()
        want = info["score"].relative.score(mate_score=EVAL_CLIP)
        assert score == score_again == max(-EVAL_CLIP, min(EVAL_CLIP, want)), board.fen()


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
    and calibrate's nodes/s counts them: well below the figure from this process's time alone
    (about 2.3 times higher here)."""
    before = evaluator.cpu_seconds()
    evaluator.evaluate(_playout(2000))
    assert evaluator.cpu_seconds() - before > 0.05
    board = chess.Board(MIDDLEGAME)
    nps = calibrate(evaluator, [board], 2)
    t = time.process_time()
    nodes = AlphaBeta(evaluator, depth=2).search(board).nodes
    own_only = nodes / (time.process_time() - t)
    assert nodes > 100
    assert nps < 0.8 * own_only, (nps, own_only)


@pytest.mark.parametrize(
    "mode, words",
    [("garbage", r"Stockfish's evaluation is not a number: 'Final evaluation +\+zz\.q"), ("crash", "exited")],
)
def test_an_engine_that_lies_or_dies_is_one_clear_error(tmp_path, stockfish, mode, words):
    ev = StockfishStaticEvaluator(faulty_stockfish(tmp_path, stockfish, mode, 3))
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
        engine_before = ev.cpu_seconds()
        result = play_task(task, ev)
        engine_spent = ev.cpu_seconds() - engine_before
    finally:
        ev.close()
    assert len(result.games) == 2 and all(len(list(g.game.mainline_moves())) <= 6 for g in result.games)
    nodes = [n for game in result.network for _, n in game]
    assert len(nodes) == 6 and max(nodes) <= 150 + 218  # the most legal moves of a position
    assert engine_spent > 0 and result.seconds > engine_spent  # this process's time and the engine's


def test_pipes_of_one_page_do_not_deadlock(evaluator):
    """A pipe gets a one-page buffer once its user passes the kernel's soft limit. Writing 256
    positions' commands at once then blocked on a full pipe while the engine blocked writing its
    traces to us (found in review): a batch's commands fit in one page, so this finishes."""
    F_SETPIPE_SZ, F_GETPIPE_SZ = 1031, 1032  # linux/fcntl.h
    for pipe in (evaluator.engine.proc.stdin, evaluator.engine.proc.stdout):
        fcntl.fcntl(pipe.fileno(), F_SETPIPE_SZ, 4096)
        assert fcntl.fcntl(pipe.fileno(), F_GETPIPE_SZ) == 4096
    boards = [b for b in _playout(400, seed=5) if not b.is_check()][:300]
    done = threading.Event()
    watchdog = threading.Timer(60.0, lambda: done.is_set() or evaluator.engine.kill())  # a hang: fail, not wait
    watchdog.start()
    try:
        scores = evaluator.evaluate(boards)
    finally:
        done.set()
        watchdog.cancel()
    assert len(scores) == 300 and evaluator.evaluated == 300


def test_a_checkpoint_with_stockfish_as_the_challenger_is_refused():
    refused = "checkpoint is played by the network challenger only, not by stockfish_static"
    with pytest.raises(ValueError, match=refused):
        GridConfig(challenger="stockfish_static", checkpoint="run/checkpoint.pt")
