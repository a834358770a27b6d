"""pipeline.datasets.search_positions' pieces by hand-checked positions, and the searched dataset's
settings and the `datasets` command's refusals (the whole build: tests/test_searched_dataset.py)."""

from datetime import UTC, datetime

import chess
import chess.polyglot
import numpy as np
import pyarrow as pa
import pytest

from cli.datasets import check_request
from pipeline.datasets.datasets import DATASETS, SearchEngine, _check_engine, _searched, dataset_values
from pipeline.datasets.search_positions import Children, children, rows_of
from pipeline.ingest.encoding import fens_from_columns
from pipeline.labels.engine import EngineError
from pipeline.labels.pool import EnginePool
from tests.engines import faulty_stockfish, static_cp

SEARCHED = "sabatelli_regression_search"


def test_children_are_legal_not_in_check_not_over_not_held_out_and_each_once():
    # White to move: Qxf7 mates (over), Bxf7 and Qxe5 check, the other 40 moves are quiet; a second
    # copy of the same position gives no child twice.
    fen = "r1bqkbnr/pppp1ppp/2n5/4p2Q/2B1P3/8/PPPP1PPP/RNB1K1NR w KQkq - 4 4"
    board = chess.Board(fen)
    held = {chess.polyglot.zobrist_hash(board)}
    got = children([fen, fen], 100, 7, held)  # every legal move of each
    keys = got.keys.tolist()
    assert len(keys) == len(set(keys)) and set(keys) <= held  # the kept keys are held out from now on
    assert [chess.polyglot.zobrist_hash(chess.Board(f)) for f in got.fens()] == keys  # python-chess's keys
    expected = set()
    for move in board.legal_moves:
        board.push(move)
        if not board.is_check() and not board.is_game_over():
            expected.add(chess.polyglot.zobrist_hash(board))
        board.pop()
    assert set(keys) == expected and len(expected) == board.legal_moves.count() - 3  # not Qxf7#, Bxf7+ or Qxe5+
    assert all(f.endswith(" 0 1") for f in got.fens())  # clocks as `label --static` gives them
    assert len(children([fen], 100, 7, held)) == 0  # all held out now


def test_a_childs_en_passant_square_is_kept_only_where_a_pawn_can_take_there():
    # e2-e4 beside Black's d4 pawn: e3 stays (polyglot's rule, the store's); f2-f4 beside no pawn:
    # none. Each child's key is python-chess's.
    fen = "4k3/8/8/8/3p4/8/4PP2/4K3 w - - 0 1"
    got = children([fen], 100, 3, set())
    fens = got.fens()
    by_move = {}
    for move in chess.Board(fen).legal_moves:
        board = chess.Board(fen)
        board.push(move)
        by_move[move.uci()] = chess.polyglot.zobrist_hash(board)
    ep = dict(zip(got.keys.tolist(), got.ep.tolist(), strict=True))
    assert ep[by_move["e2e4"]] == chess.E3 and ep[by_move["f2f4"]] == -1 and ep[by_move["e2e3"]] == -1
    assert sorted(got.keys.tolist()) == sorted(by_move.values())
    assert "4k3/8/8/8/3pP3/8/5P2/4K3 b - e3 0 1" in fens and "4k3/8/8/8/3p1P2/8/4P3/4K3 b - - 0 1" in fens


def test_children_drawn_in_two_processes_are_those_of_one(monkeypatch):
    # Tasks of 3 rows, so each process draws several: the same children in the same order,
    # the same held-out keys, whichever process drew a row.
    monkeypatch.setattr("pipeline.datasets.search_positions.DRAW_ROWS", 3)
    board, fens = chess.Board(), []
    for uci in ("e2e4", "e7e5", "g1f3", "b8c6", "f1b5", "a7a6", "b5a4", "g8f6", "e1g1", "f8e7", "f1e1"):
        board.push_uci(uci)
        fens.append(board.fen())
    runs = []
    for workers in (1, 2):
        held = {chess.polyglot.zobrist_hash(chess.Board(f)) for f in fens}
        seen = []
        got = children(fens + fens[:4], 3, 5, held, workers, lambda done, total, seen=seen: seen.append((done, total)))
        runs.append((got.fens(), got.keys.tolist(), sorted(held), seen[-1]))
    assert runs[0] == runs[1] and runs[0][3] == (15, 15) and len(runs[0][0]) > 20


def test_the_same_seed_picks_the_same_children_and_another_seed_others():
    fens = [chess.Board().fen(), "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3"]
    one = children(fens, 2, 0, set()).fens()
    assert one == children(fens, 2, 0, set()).fens()
    assert one != children(fens, 2, 1, set()).fens()
    assert len(one) == 4


@pytest.mark.parametrize("pov", ["side_to_move", "white"])
@pytest.mark.parametrize("target_kind", ["linear", "win_prob"])
def test_a_rows_score_and_targets_take_the_datasets_point_of_view(pov, target_kind):
    schema = pa.schema([("planes", pa.binary(96)), ("side_to_move", pa.string()), ("score", pa.int32()),
                        ("mirrored", pa.bool_()), ("linear", pa.float64()), ("win_prob", pa.float64()),
                        ("target", pa.float64()), ("game_id", pa.int64())])  # fmt: skip
    black = chess.Board("4k3/8/8/8/8/8/8/3QK3 b - - 0 1")  # Black to move, White a queen up
    values = {"pov": pov, "clip_cp": 1500, "wp_scale": 400.0, "target_kind": target_kind}
    row = rows_of(Children.of([black]), np.array([900.0]), values, schema).to_pylist()[0]  # White's view, as labels
    score = -900 if pov == "side_to_move" else 900
    assert row["score"] == score and row["mirrored"] == (pov == "side_to_move") and row["side_to_move"] == "b"
    assert row["linear"] == pytest.approx((score + 1500) / 3000)
    assert row["win_prob"] == pytest.approx(1 / (1 + 10 ** (-score / 400)))
    assert row["target"] == row[target_kind] and row["game_id"] is None


def test_the_searched_set_is_the_regression_sets_sql_on_static_labels_with_three_rounds():
    spec = DATASETS[SEARCHED]
    assert spec.sql == "sabatelli_regression" and spec.search and not spec.classes
    values = dataset_values(SEARCHED)
    assert values["label_kind"] == "static" and values["search_children"] == (2, 1, 1, 1)
    # the regression set's settings but its target: the win probability, which the search plays best
    assert values["target_kind"] == "win_prob"
    base = dataset_values("sabatelli_regression")
    own = ("label_", "target_kind")
    assert {k: v for k, v in values.items() if k in base and not k.startswith(own)} == {
        k: v for k, v in base.items() if not k.startswith(own)
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


def test_datasets_builds_the_searched_set_when_named_on_static_labels_and_with_stockfish(monkeypatch, tmp_path):
    depth = {"label_kind": "depth", "label_value": 8}
    for label in ({}, depth, {"label_kind": "static", "label_value": 0}):
        assert check_request([], label) == [n for n in DATASETS if not n.endswith("_search")]  # all: the SQL ones
    engine = tmp_path / "stockfish"  # an executable where STOCKFISH_PATH says: the check asks no more
    engine.write_text("#!/bin/sh\n")
    engine.chmod(0o755)
    monkeypatch.setenv("STOCKFISH_PATH", str(engine))
    assert check_request([SEARCHED], {}) == [SEARCHED]
    assert check_request(["sabatelli_3class_search"], {}) == ["sabatelli_3class_search"]
    with pytest.raises(SystemExit, match=f"{SEARCHED} is built on static labels only .*give --static"):
        check_request([SEARCHED, "sabatelli_3class"], depth)
    monkeypatch.setenv("STOCKFISH_PATH", str(tmp_path / "absent"))
    with pytest.raises(SystemExit) as e:
        check_request([SEARCHED], {})
    assert str(e.value).startswith(f"chess-pipeline datasets: {SEARCHED} labels with Stockfish: Stockfish at ")
    assert "does not exist" in str(e.value) and "\n" not in str(e.value)


SCHEMA = pa.schema(
    [("dataset", pa.string()), ("position_key", pa.uint64()), ("planes", pa.binary(96)),
     ("side_to_move", pa.string()), ("castling", pa.uint8()), ("ep_square", pa.int8()),
     ("halfmove_clock", pa.uint32()), ("fullmove_number", pa.uint32()), ("game_id", pa.uint64()),
     ("cp_white", pa.int32()), ("score", pa.int32()), ("linear", pa.float64()), ("win_prob", pa.float64()),
     ("target", pa.float64()), ("mirrored", pa.bool_()), ("split", pa.string()),
     ("materialised_at", pa.timestamp("us", tz="UTC"))]
)  # fmt: skip
"""A dataset file's columns, those the growing reads and writes."""


def _splits() -> dict:
    """train: the start position; val and test: two of its children (1. e4, 1. d4)."""
    boards = {"train": chess.Board()}
    for split, move in (("val", "e2e4"), ("test", "d2d4")):
        boards[split] = chess.Board()
        boards[split].push_uci(move)
    values = dataset_values(SEARCHED)
    return {s: rows_of(Children.of([b]), np.array([10.0]), values, SCHEMA) for s, b in boards.items()}


def test_the_searched_children_leave_out_val_and_tests_positions_and_do_not_depend_on_the_engines(stockfish):
    made = datetime(2026, 1, 2, tzinfo=UTC)
    values = dataset_values(SEARCHED, {"search_children": (30,)})  # every move of the start position
    runs = []
    for workers in (1, 2):
        with EnginePool(stockfish, workers=workers, timeout_s=30) as pool:
            runs.append(_searched(SEARCHED, _splits(), values, made, SearchEngine(pool, lambda _: None)))
    got, again = runs
    grown, added, unlabelled = got.train, got.added, got.unlabelled
    assert again.train.equals(grown)  # one engine or two: the same rows in the same order
    start = chess.Board()
    expected = {}
    for move in start.legal_moves:
        if move.uci() not in ("e2e4", "d2d4"):  # val's and test's
            start.push(move)
            expected[chess.polyglot.zobrist_hash(start)] = start.fen()
            start.pop()
    assert added == [18] and unlabelled == 0 and len(grown) == 19
    new = grown.slice(1).to_pydict()
    assert sorted(new["position_key"]) == sorted(expected)
    for key, cp in list(zip(new["position_key"], new["cp_white"], strict=True))[:3]:
        assert cp == static_cp(stockfish, expected[key])
    assert set(grown.column("dataset").to_pylist()) == {SEARCHED}
    assert set(grown.column("materialised_at").to_pylist()) == {made}


def test_an_engine_that_evaluates_nothing_fails_the_growing_in_one_line(stockfish, tmp_path):
    engine = faulty_stockfish(tmp_path, stockfish, "garbage", 1, every=True)
    values = dataset_values(SEARCHED, {"search_children": (30,)})
    with EnginePool(engine, workers=1, timeout_s=30, retries=1) as pool:
        with pytest.raises(EngineError) as e:
            _searched(SEARCHED, _splits(), values, datetime.now(UTC), SearchEngine(pool, lambda _: None))
    message = str(e.value)
    assert "gave no static evaluation for any of round 1's 18 children, the first: " in message
    assert "+zz.q" in message and "\n" not in message


def test_a_child_the_engine_gives_no_evaluation_is_left_out_and_counted(stockfish, tmp_path):
    """The engine garbles every figure after its first and the pool does not retry: one child
    kept, labelled as Stockfish labels it, the other 17 left out and counted."""
    engine = faulty_stockfish(tmp_path, stockfish, "garbage", 2, every=True)
    values = dataset_values(SEARCHED, {"search_children": (30,)})
    with EnginePool(engine, workers=1, timeout_s=30, retries=0) as pool:
        got = _searched(SEARCHED, _splits(), values, datetime.now(UTC), SearchEngine(pool, lambda _: None))
    grown, added, unlabelled = got.train, got.added, got.unlabelled
    assert added == [1] and unlabelled == 17 and len(grown) == 2
    (row,) = grown.slice(1).to_pylist()
    board = chess.Board(fens_from_columns([row["planes"]], [row["side_to_move"]], [row["castling"]], [None])[0])
    assert chess.polyglot.zobrist_hash(board) == row["position_key"]
    assert row["cp_white"] == static_cp(stockfish, board.fen()) and row["score"] == -row["cp_white"]  # Black to move


def test_the_children_must_be_labelled_by_the_engine_the_labels_name():
    with pytest.raises(ValueError, match="static labels are by Stockfish 99, but its children would be labelled by"):
        _check_engine(None, {"label_engine": "Stockfish 99"}, "Stockfish 15.1")
    _check_engine(None, {"label_engine": "Stockfish 15.1"}, "Stockfish 15.1")


def test_without_label_engine_the_children_take_the_engine_of_the_labels_the_rows_use():
    import duckdb

    con = duckdb.connect()
    con.execute(
        "CREATE TABLE candidate AS SELECT * FROM (VALUES (1, 0.5), (2, 0.4), (3, NULL)) t(position_key, target)"
    )
    con.execute(
        "CREATE TABLE labels AS SELECT * FROM (VALUES ('Stockfish 15.1', 'static', 1), "
        "('Stockfish 15.1', 'static', 2), ('Stockfish 16', 'static', 9), ('Stockfish 16', 'depth', 1)) "
        "t(engine, limit_kind, position_key)"
    )
    _check_engine(con, {"label_engine": ""}, "Stockfish 15.1")  # 16's labels are of other positions or depth
    with pytest.raises(ValueError, match="static labels are by Stockfish 15.1, but its children would be labelled by"):
        _check_engine(con, {"label_engine": ""}, "Stockfish 16")
    con.execute("INSERT INTO labels VALUES ('Stockfish 16', 'static', 2)")
    both = "static labels are by Stockfish 15.1 and Stockfish 16: "
    with pytest.raises(ValueError, match=both + r"choose Stockfish 15.1's, .*--label-engine \"Stockfish 15.1\""):
        _check_engine(con, {"label_engine": ""}, "Stockfish 15.1")
    with pytest.raises(ValueError, match=both + r"none is its children's engine \(Stockfish 17\)"):
        _check_engine(con, {"label_engine": ""}, "Stockfish 17")
