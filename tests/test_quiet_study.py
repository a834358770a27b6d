"""scripts/quiet_study.py: its fitted function starts as the traditional evaluation, and what it
calls quiet (hand-checked positions)."""

import importlib.util
import random
import subprocess
import sys
from pathlib import Path

import chess
import numpy as np
import torch

from pipeline.play.search import TRADITIONAL_TABLES, MaterialEvaluator, board_arrays

_SPEC = importlib.util.spec_from_file_location("quiet_study", Path(__file__).parents[1] / "scripts" / "quiet_study.py")
study = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(study)


def test_the_fit_starts_from_the_traditional_evaluation_in_whites_view():
    rng, boards, board = random.Random(7), [], chess.Board()
    while len(boards) < 300:
        if board.is_game_over():
            board = chess.Board()
        board.push(rng.choice(list(board.legal_moves)))
        boards.append(board.copy(stack=False))
    planes, white, _ = board_arrays(boards)
    bits = torch.from_numpy(np.unpackbits(planes, axis=1, bitorder="little")).float()
    with torch.no_grad():
        fitted = study.Tapered()(bits, torch.from_numpy(white)).numpy()
    side_to_move = MaterialEvaluator().evaluate(boards)
    assert np.allclose(fitted, np.where(white, side_to_move, -side_to_move), atol=1e-3)
    # Black's tables are White's mirrored and negated, as the traditional ones are written.
    for table, traditional in zip((study.Tapered().middle, study.Tapered().end), TRADITIONAL_TABLES, strict=True):
        assert np.array_equal(table.detach().numpy(), traditional)


def test_quiet_means_no_check_and_no_capture():
    assert study.quiet(chess.Board())
    assert not study.quiet(chess.Board("rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 2"))  # exd5
    assert not study.quiet(chess.Board("rnbqkbnr/ppppp2p/5p2/6pQ/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 3"))  # check
    assert study.quiet(chess.Board("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"))


def test_a_negative_capture_search_is_refused_in_one_line_before_any_data_is_read(tmp_path):
    script = Path(__file__).parents[1] / "scripts" / "quiet_study.py"
    done = subprocess.run(
        [sys.executable, str(script), "--data", str(tmp_path / "absent"), "--quiescence", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith("error: --quiescence is 0 (none) or plies of captures, got -1")
    assert "Traceback" not in done.stderr
