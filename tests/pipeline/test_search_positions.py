"""pipeline.search_positions' pieces by hand-checked positions, and the searched dataset's
settings and the `datasets` command's refusals (the whole build: tests/test_searched_dataset.py)."""

import chess
import chess.polyglot
import numpy as np
import pyarrow as pa
import pytest

from assets.cli.datasets import check_request
from pipeline.datasets import DATASETS, dataset_values
from pipeline.search_positions import children, rows_of

SEARCHED = "sabatelli_regression_search"


def test_children_are_legal_not_in_check_not_over_not_held_out_and_each_once():
    # White to move: Qxf7 mates (over), Bxf7 and Qxe5 check, the other 40 moves are quiet; a second
    # copy of the same position gives no child twice.
    fen = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4"
    board = chess.Board(fen)
    held = {chess.polyglot.zobrist_hash(board)}
    got = children([fen, fen], 100, 7, held)  # every legal move of each
    keys = [chess.polyglot.zobrist_hash(b) for b in got]
    assert len(keys) == len(set(keys)) and set(keys) <= held  # the kept keys are held out from now on
    expected = set()
    for move in board.legal_moves:
        board.push(move)
        if not board.is_check() and not board.is_game_over():
            expected.add(chess.polyglot.zobrist_hash(board))
        board.pop()
    assert set(keys) == expected and len(expected) == board.legal_moves.count() - 3  # not Qxf7#, Bxf7+ or Qxe5+
    assert all(b.halfmove_clock == 0 and b.fullmove_number == 1 for b in got)
    assert children([fen], 100, 7, held) == []  # all held out now


def test_the_same_seed_picks_the_same_children_and_another_seed_others():
    fens = [chess.Board().fen(), "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"]
    one = [b.fen() for b in children(fens, 2, 0, set())]
    assert one == [b.fen() for b in children(fens, 2, 0, set())]
    assert one != [b.fen() for b in children(fens, 2, 1, set())]
    assert len(one) == 4


@pytest.mark.parametrize("pov", ["side_to_move", "white"])
@pytest.mark.parametrize("target_kind", ["linear", "win_prob"])
def test_a_rows_score_and_targets_take_the_datasets_point_of_view(pov, target_kind):
    schema = pa.schema([("planes", pa.binary(96)), ("side_to_move", pa.string()), ("score", pa.int32()),
                        ("mirrored", pa.bool_()), ("linear", pa.float64()), ("win_prob", pa.float64()),
                        ("target", pa.float64()), ("game_id", pa.int64())])  # fmt: skip
    black = chess.Board("4k3/8/8/8/8/8/8/3QK3 b - - 0 1")  # Black to move, White a queen up
    values = {"pov": pov, "clip_cp": 1500, "wp_scale": 400.0, "target_kind": target_kind}
    row = rows_of([black], np.array([-900.4]), values, schema).to_pylist()[0]  # the side to move's view
    score = -900 if pov == "side_to_move" else 900
    assert row["score"] == score and row["mirrored"] == (pov == "side_to_move") and row["side_to_move"] == "b"
    assert row["linear"] == pytest.approx((score + 1500) / 3000)
    assert row["win_prob"] == pytest.approx(1 / (1 + 10 ** (-score / 400)))
    assert row["target"] == row[target_kind] and row["game_id"] is None


def test_the_searched_set_is_the_regression_sets_sql_on_static_labels_with_three_rounds():
    spec = DATASETS[SEARCHED]
    assert spec.sql == "sabatelli_regression" and spec.search and not spec.classes
    values = dataset_values(SEARCHED)
    assert values["label_kind"] == "static" and values["search_children"] == (2, 1, 1)
    base = dataset_values("sabatelli_regression")
    assert {k: v for k, v in values.items() if k in base and not k.startswith("label_")} == {
        k: v for k, v in base.items() if not k.startswith("label_")
    }


@pytest.mark.parametrize(
    "params, words",
    [
        ({"label_kind": "depth", "label_value": 8}, "label_kind must be static, got depth"),
        ({"search_children": ()}, r"search_children must be one or more counts of at least 1, got \[\]"),
        ({"search_children": (2, 0)}, r"got \[2, 0\]"),
    ],
)
def test_the_searched_sets_bad_settings_are_refused(params, words):
    with pytest.raises(ValueError, match=words):
        dataset_values(SEARCHED, params)


def test_datasets_with_a_depth_setting_leaves_the_searched_set_out_or_refuses_it_by_name(capsys):
    depth = {"label_kind": "depth", "label_value": 8}
    names = check_request([], depth)
    assert SEARCHED not in names and set(names) == set(DATASETS) - {SEARCHED}
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"chess-pipeline datasets: leaving out {SEARCHED}") and "\n" not in err
    with pytest.raises(SystemExit, match=f"{SEARCHED} is built on static labels only .*give --label-static"):
        check_request([SEARCHED, "sabatelli_3class"], depth)
    assert SEARCHED in check_request([], {"label_kind": "static", "label_value": 0})
    assert SEARCHED in check_request([], {})
