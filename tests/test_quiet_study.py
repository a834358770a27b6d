"""scripts/quiet_study.py: what it calls quiet (hand-checked positions), its refusals, and a run
through the training loop on a small generated dataset (the fitted model: tests/training/test_tapered.py)."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import chess
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.play.search import MaterialEvaluator, board_arrays
from tests.training.synthetic import random_games, white_material

pytestmark = pytest.mark.slow  # a script run end to end (a study's or a benchmark's): the full suite's

SCRIPT = Path(__file__).parents[1] / "scripts" / "quiet_study.py"

_SPEC = importlib.util.spec_from_file_location("quiet_study", SCRIPT)
study = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(study)


def test_quiet_means_no_check_and_no_capture():
    assert study.quiet(chess.Board())
    assert not study.quiet(chess.Board("rnbqkbnr/ppp1pppp/8/3p4/4P3/8/PPPP1PPP/RNBQKBNR w KQkq d6 0 2"))  # exd5
    assert not study.quiet(chess.Board("rnbqkbnr/ppppp2p/5p2/6pQ/4P3/8/PPPP1PPP/RNB1KBNR b KQkq - 1 3"))  # check
    assert study.quiet(chess.Board("4k3/8/8/8/8/8/4P3/4K3 w - - 0 1"))


def test_a_negative_capture_search_is_refused_in_one_line_before_any_data_is_read(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path / "absent"), "--quiescence", "-1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith("error: --quiescence is 0 (none) or plies of captures, got -1")
    assert "Traceback" not in done.stderr


def test_a_folder_that_is_not_a_sabatelli_regression_dataset_is_refused_in_one_line(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--data", str(tmp_path / "datasets" / "sabatelli_3class")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines()[-1].endswith(
        f"error: --data must be a sabatelli_regression dataset folder (STORE/datasets/sabatelli_regression), "
        f"got {tmp_path / 'datasets' / 'sabatelli_3class'}"
    )


def _win_prob(cp: np.ndarray) -> np.ndarray:
    return 1 / (1 + 10 ** (-cp / 400))


def _write_regression_set(folder: Path) -> dict[str, list[chess.Board]]:
    """train/val/test of a small sabatelli_regression as the dataset stores it (side to move's
    view: Black-to-move rows `mirrored`), the win probability of 200 cp a pawn of material for
    the side to move (twice the traditional tables' values); each split's boards."""
    boards, game = random_games(30, seed=3)
    material = np.array([white_material(b) * (1 if b.turn else -1) for b in boards], dtype=np.float64)
    planes, white, castling = board_arrays(boards)
    folder.mkdir(parents=True)
    out = {}
    for split, games in (("train", range(0, 18)), ("val", range(18, 24)), ("test", range(24, 30))):
        idx = np.flatnonzero(np.isin(game, list(games)))
        wp = _win_prob(200 * material[idx])
        cols = {
            "planes": pa.array([bytes(planes[i]) for i in idx], type=pa.binary(96)),
            "side_to_move": ["w" if white[i] else "b" for i in idx],
            "castling": pa.array(castling[idx], pa.uint8()),
            "ep_square": pa.array([boards[i].ep_square for i in idx], pa.int8()),
            "mirrored": pa.array(~white[idx]),
            "target": pa.array(wp),
            "win_prob": pa.array(wp),
            "game_id": pa.array(game[idx].astype(np.int64)),
        }
        pq.write_table(pa.table(cols), folder / f"{split}.parquet", row_group_size=128)
        out[split] = [boards[i] for i in idx]
    return out


def test_a_run_fits_through_the_training_loop_and_scores_both_test_sets(tmp_path):
    """Rows and quiet rows counted from the boards, the traditional tables' error computed here
    from MaterialEvaluator, and both fits lowering it on a target they can learn (material at twice its value)."""
    data = tmp_path / "store" / "datasets" / "sabatelli_regression"
    boards = _write_regression_set(data)
    done = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--data",
            str(data),
            "--epochs",
            "3",
            "--batch",
            "64",
            "--depth",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])

    def calm(b: chess.Board) -> bool:  # independent of the script's quiet(): no check, no capturing move
        return not b.is_check() and not any(b.is_capture(m) for m in b.legal_moves)

    quiet_test = [b for b in boards["test"] if calm(b)]
    assert out["rows"] == {
        "train": len(boards["train"]),
        "quiet_train": sum(map(calm, boards["train"])),
        "test": len(boards["test"]),
    }
    assert out["quiet_test_rows"] == len(quiet_test) > 0

    def traditional_error(bs: list[chess.Board]) -> float:
        material = np.array([white_material(b) * (1 if b.turn else -1) for b in bs], dtype=np.float64)
        return float(np.mean((_win_prob(MaterialEvaluator().evaluate(bs)) - _win_prob(200 * material)) ** 2))

    assert out["traditional"]["test_mse"] == pytest.approx(traditional_error(boards["test"]), rel=1e-4)
    assert out["traditional"]["quiet_test_mse"] == pytest.approx(traditional_error(quiet_test), rel=1e-4)
    for name, own in (("all_positions", "test_mse"), ("quiet_positions", "quiet_test_mse")):
        assert out[name][own] < out["traditional"][own]
        assert out[name]["best_epoch"] in range(3)
        assert set(out[name]["pieces"]) == {"middlegame", "endgame"}
        assert "match" not in out[name]  # --depth 0
