"""SQL datasets: class edges by hand, splits by game without leakage, bound parameters."""

import chess
import duckdb
import pyarrow.parquet as pq
import pytest

from pipeline.datasets.datasets import DATASETS, SPLITS, SplitConfig, build_dataset, dataset_dir
from pipeline.store.duck import load_sql, memory_connection
from tests.fixtures_pgn import RATED_GAMES
from tests.stores import labelled_store

# (cp from the target's side, 3-class, 15-class, 20-class), worked out by hand from the edges:
# 3: loss < -150 <= draw <= 150 < win.  15: 0 below -750, 1 [-750,-650), ..., 6 [-250,-150),
# 7 draw [-150,150], 8 (150,250], ..., 13 (650,750], 14 above 750.  20: as 15 outside the draw
# region, which splits into 7 [-150,-100), 8 [-100,-50), 9 [-50,0), 10 [0,50), 11 [50,100),
# 12 [100,150]; wins are 13..19.
EDGES = [
    (-32000, 0, 0, 0),
    (-751, 0, 0, 0),
    (-750, 0, 1, 1),
    (-651, 0, 1, 1),
    (-650, 0, 2, 2),
    (-251, 0, 5, 5),
    (-250, 0, 6, 6),
    (-151, 0, 6, 6),
    (-150, 1, 7, 7),
    (-101, 1, 7, 7),
    (-100, 1, 7, 8),
    (-51, 1, 7, 8),
    (-50, 1, 7, 9),
    (-1, 1, 7, 9),
    (0, 1, 7, 10),
    (49, 1, 7, 10),
    (50, 1, 7, 11),
    (100, 1, 7, 12),
    (150, 1, 7, 12),
    (151, 2, 8, 13),
    (250, 2, 8, 13),
    (251, 2, 9, 14),
    (750, 2, 13, 18),
    (751, 2, 14, 19),
    (31999, 2, 14, 19),
]


@pytest.fixture(scope="module")
def macros():
    con = duckdb.connect()
    con.execute(load_sql("views/macros"))
    yield con
    con.close()


@pytest.mark.parametrize("cp,c3,c15,c20", EDGES)
def test_sabatelli_class_edges(macros, cp, c3, c15, c20):
    got = macros.execute(
        "SELECT sabatelli_class3($cp), sabatelli_class15($cp), sabatelli_class20($cp)", {"cp": cp}
    ).fetchall()[0]
    assert got == (c3, c15, c20)


def test_every_class_index_is_reachable(macros):
    got = macros.execute(
        "SELECT count(DISTINCT sabatelli_class15(c)), count(DISTINCT sabatelli_class20(c)) FROM range(-1000, 1001) t(c)"
    ).fetchall()[0]
    assert got == (15, 20)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, stockfish):
    return labelled_store(tmp_path_factory.mktemp("ds"), RATED_GAMES, stockfish)


def _strip(rows):
    return {s: [{k: v for k, v in r.items() if k != "materialised_at"} for r in rs] for s, rs in rows.items()}


def _rows(store, name):
    return {s: pq.read_table(dataset_dir(store, name) / f"{s}.parquet").to_pylist() for s in SPLITS}


def test_sabatelli_targets_follow_the_label_from_the_side_to_move(small_store):
    stats = build_dataset(small_store, "sabatelli_3class", split=SplitConfig(val_fraction=0.3, test_fraction=0.3))
    rows = [r for split in _rows(small_store, "sabatelli_3class").values() for r in split]
    with memory_connection(small_store) as con:
        score = {(r[0], r[1]): r[2] for r in con.sql("SELECT position_key, side_to_move, score FROM labels").fetchall()}
    # g3 has a player under 2000: out. g1 twice and g2 are in.
    assert {r["white_elo"] for r in rows} == {2300, 2100}
    assert stats.unlabelled == 0
    for r in rows:
        s = score[(r["position_key"], r["side_to_move"])]
        s = -s if r["side_to_move"] == "b" else s
        assert r["score"] == s and r["mirrored"] == (r["side_to_move"] == "b")
        assert r["target"] == (0 if s < -150 else 2 if s > 150 else 1)
    # The final position of g1 (Black has mated; White to move) is a loss for the side to move.
    mated = [r for r in rows if r["ply"] == 14 and r["result"] == "0-1"]
    assert mated and all(r["target"] == 0 for r in mated)


def test_split_is_by_game_disjoint_by_position_and_deterministic(small_store):
    cfg = SplitConfig(seed=3, val_fraction=0.3, test_fraction=0.3)
    first = build_dataset(small_store, "lubeck_wdl", split=cfg)
    rows = _rows(small_store, "lubeck_wdl")
    # Identical move sequences (g1 twice) land in one split.
    splits_of_g1 = {s for s, rs in rows.items() for r in rs if r["ply"] == 14 and r["result"] == "0-1"}
    assert len(splits_of_g1) == 1
    keys = {s: {r["position_key"] for r in rs} for s, rs in rows.items()}
    assert not keys["train"] & keys["val"] and not keys["train"] & keys["test"] and not keys["val"] & keys["test"]
    assert first.overlap == {"train/val": 0, "train/test": 0, "val/test": 0}
    # The start position is in every game: it stays only in the most held-out split that has it.
    start = chess.polyglot.zobrist_hash(chess.Board())
    held = [s for s in ("test", "val", "train") if rows[s]]
    assert [s for s in SPLITS if start in keys[s]] == held[:1]
    assert sum(first.removed.values()) > 0
    # Same seed, same rows; another seed, another split.
    again = build_dataset(small_store, "lubeck_wdl", split=cfg)
    assert again.rows == first.rows and _strip(_rows(small_store, "lubeck_wdl")) == _strip(rows)
    assignments = {
        build_dataset(
            small_store, "lubeck_wdl", split=SplitConfig(seed=k, val_fraction=0.3, test_fraction=0.3)
        ).games.get("test", 0)
        for k in range(6)
    }
    assert len(assignments) > 1


def test_split_by_position_without_guard_is_the_thesis_split(small_store):
    cfg = SplitConfig(seed=1, val_fraction=0.3, test_fraction=0.3, by="position", guard=False)
    stats = build_dataset(small_store, "lubeck_wdl", split=cfg)
    rows = _rows(small_store, "lubeck_wdl")
    with memory_connection(small_store) as con:
        n = con.sql(
            "SELECT count(*) FROM positions p JOIN games g USING (game_id) WHERE g.outcome IN ('1-0', '0-1', '1/2-1/2')"
        ).fetchall()[0][0]
    # Every row is kept, games straddle splits, and the splits share positions (the start, at least).
    assert sum(len(r) for r in rows.values()) == n and sum(stats.removed.values()) == 0
    games = {s: {r["game_id"] for r in rs} for s, rs in rows.items()}
    assert games["train"] & games["test"]
    assert stats.overlap["train/test"] > 0
    with pytest.raises(ValueError, match="game or position"):
        SplitConfig(by="move")


def test_lubeck_targets_are_the_game_results(small_store):
    build_dataset(small_store, "lubeck_wdl", split=SplitConfig(val_fraction=0, test_fraction=0))
    rows = _rows(small_store, "lubeck_wdl")["train"]
    expected = {"1-0": 2, "1/2-1/2": 1, "0-1": 0}
    assert {r["result"] for r in rows} == {"0-1", "1-0", "1/2-1/2"}
    assert all(r["target"] == expected[r["result"]] for r in rows)


def test_deepchess_draws_ten_late_quiet_positions_per_decisive_game(small_store):
    build_dataset(small_store, "deepchess", {"per_game": 3}, SplitConfig(val_fraction=0, test_fraction=0))
    rows = _rows(small_store, "deepchess")["train"]
    per_game = {}
    for r in rows:
        per_game.setdefault(r["game_id"], []).append(r)
    assert len(per_game) == 3 and all(len(v) == 3 for v in per_game.values())  # g1, g1 again, g2
    assert all(r["ply"] >= 10 and r["result"] in ("1-0", "0-1") for r in rows)
    assert all(r["target"] == (1 if r["winner"] == "white" else 0) for r in rows)
    with memory_connection(small_store) as con:
        captured = {(g, p) for g, p in con.sql("SELECT game_id, ply FROM positions WHERE is_capture").fetchall()}
    assert not {(r["game_id"], r["ply"]) for r in rows} & captured
    # The draw is deterministic for a sample seed and changes with it.
    build_dataset(small_store, "deepchess", {"per_game": 3}, SplitConfig(val_fraction=0, test_fraction=0))
    assert [r["ply"] for r in _rows(small_store, "deepchess")["train"]] == [r["ply"] for r in rows]


def test_hui_checkmate_takes_the_end_of_mated_games(small_store):
    build_dataset(small_store, "hui_checkmate", {"gamestage": 0.3}, SplitConfig(val_fraction=0, test_fraction=0))
    rows = _rows(small_store, "hui_checkmate")["train"]
    assert rows and all(r["ply_count"] == 14 and r["ply"] >= 14 * 0.7 and r["target"] == 0 for r in rows)


def test_parameters_holding_quotes_and_semicolons_are_data(small_store):
    evil = "Stockfish'; DROP VIEW labels; --"
    stats = build_dataset(
        small_store, "piece_values", {"label_engine": evil}, SplitConfig(val_fraction=0, test_fraction=0)
    )
    assert stats.candidates > 0 and stats.unlabelled == stats.candidates  # no engine has that name
    with memory_connection(small_store) as con:
        assert con.sql("SELECT count(*) FROM labels").fetchall()[0][0] > 0
    with pytest.raises(ValueError, match="no parameters"):
        build_dataset(small_store, "piece_values", {"min_elo; --": 1})


def test_every_dataset_builds_with_its_defaults(small_store, stockfish):
    from pipeline.datasets.datasets import SearchEngine
    from pipeline.labels.pool import EnginePool

    split = SplitConfig(val_fraction=0.2, test_fraction=0.2)
    with EnginePool(stockfish, workers=1, timeout_s=30) as pool:
        for name, spec in DATASETS.items():
            stats = build_dataset(small_store, name, split=split, engine=SearchEngine(pool) if spec.search else None)
            assert stats.candidates > 0, name
            assert stats.overlap == {"train/val": 0, "train/test": 0, "val/test": 0}, name
            if spec.search:  # the store has depth labels only: no rows, and why (growing: test_search_positions)
                assert stats.empty_reason.startswith("no static labels for its 47 candidate positions"), name
                # static only: no other setting to build from
                assert stats.searched == [] and "--label-" not in stats.empty_reason
                assert "build from those" not in stats.empty_reason
                with pytest.raises(ValueError, match="labelled by Stockfish: give it the engine pool"):
                    build_dataset(small_store, name, split=split)  # without the engine: one line, nothing built


def test_a_tiny_dataset_still_gets_every_split(small_store):
    # Three games (g1 twice is one group) and shares of 1%: by hash alone val and test would be
    # empty; the groups with the largest hashes fill them instead.
    stats = build_dataset(small_store, "lubeck_wdl", split=SplitConfig(seed=5, val_fraction=0.01, test_fraction=0.01))
    assert all(stats.rows[s] > 0 for s in SPLITS), stats.rows
    assert sum(stats.games.values()) == 4 and stats.overlap == {"train/val": 0, "train/test": 0, "val/test": 0}


# Why a set is empty, worked out from the store. RATED_GAMES: g1 twice (14 plies) and g2 (16) have
# both players over 2000: 15 + 15 + 17 = 47 candidate rows of the Sabatelli sets; g3 (10 plies,
# a 1900 player) adds 11 with min_elo 0.
SABATELLI_CANDIDATES, ALL_RATED_ROWS = 47, 58


@pytest.fixture(scope="module")
def depth6_store(tmp_path_factory, stockfish):
    from pipeline.labels.labels import label_store
    from pipeline.labels.pool import EnginePool
    from pipeline.labels.setting import LabelRun
    from pipeline.labels.uci import Limit
    from pipeline.store.store import Store
    from tests.stores import add_pgn

    folder = tmp_path_factory.mktemp("depth6")
    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "games.pgn", RATED_GAMES)
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun(limit=Limit("depth", 6)))
    return store


@pytest.fixture(scope="module")
def unlabelled_store(tmp_path_factory):
    from pipeline.store.store import Store
    from tests.stores import add_pgn

    folder = tmp_path_factory.mktemp("unlabelled")
    store = Store(folder / "store").ensure()
    add_pgn(store, folder, "games.pgn", RATED_GAMES)
    return store


def test_a_set_without_labels_of_its_setting_names_the_settings_the_store_has(depth6_store):
    stats = build_dataset(depth6_store, "sabatelli_3class")
    assert stats.candidates == SABATELLI_CANDIDATES and stats.unlabelled == SABATELLI_CANDIDATES
    assert sum(stats.rows.values()) == 0 and stats.label_coverage == 0.0
    assert stats.empty_reason.startswith(
        "no depth-8 labels for its 47 candidate positions; the store has labels for depth 6 (47 of them)"
    )
    assert "`chess-pipeline label --depth 8`" in stats.empty_reason
    assert "`chess-pipeline datasets sabatelli_3class --depth 6`" in stats.empty_reason
    # ... and that setting builds it, every row's target from its depth-6 label.
    stats = build_dataset(
        depth6_store, "sabatelli_3class", {"label_value": 6}, SplitConfig(val_fraction=0, test_fraction=0)
    )
    assert stats.rows["train"] == SABATELLI_CANDIDATES and stats.label_coverage == 1.0 and not stats.empty_reason


def test_an_engine_no_label_came_from_is_named_with_the_one_that_did(depth6_store):
    stats = build_dataset(depth6_store, "piece_values", {"label_value": 6, "label_engine": "Stockfish 99"})
    with memory_connection(depth6_store) as con:
        [(engine,)] = con.sql("SELECT DISTINCT engine FROM labels").fetchall()
    assert stats.empty_reason.startswith(
        f"no depth-6 labels by Stockfish 99 for its {ALL_RATED_ROWS} candidate "
        f"positions; the store has labels for depth 6 by {engine}"
    )
    assert f'--depth 6 --label-engine "{engine}"`' in stats.empty_reason


def test_a_store_without_labels_says_to_label_it(unlabelled_store):
    stats = build_dataset(unlabelled_store, "sabatelli_15class", {"label_kind": "static"})
    assert stats.candidates == SABATELLI_CANDIDATES and sum(stats.rows.values()) == 0
    assert stats.empty_reason == (
        "the store has no labels yet; its 47 candidate positions need static labels "
        "(run `chess-pipeline label --static`)"
    )


def test_no_candidates_is_no_coverage_and_names_the_filter(unlabelled_store, tmp_path):
    from pipeline.store.store import Store

    stats = build_dataset(unlabelled_store, "sabatelli_3class", {"min_elo": 3000})
    assert stats.candidates == 0 and stats.label_coverage is None  # not 100% of nothing
    assert stats.empty_reason == (
        "none of the store's 4 games gives positions of games whose players are both rated over 3000, or of engine "
        f"games (min_elo 0 would keep {ALL_RATED_ROWS} positions: set min_elo lower in the run config)"
    )
    stats = build_dataset(Store(tmp_path / "empty").ensure(), "lubeck_wdl")
    assert stats.candidates == 0 and stats.empty_reason.startswith("the store has no games")


def test_a_label_setting_is_checked_and_static_has_no_value(unlabelled_store):
    with pytest.raises(ValueError, match="limit kind must be one of"):
        build_dataset(unlabelled_store, "sabatelli_3class", {"label_kind": "deep"})
    with pytest.raises(ValueError, match="depth limit must be at least 1"):
        build_dataset(unlabelled_store, "sabatelli_3class", {"label_value": 0})


def test_static_labels_are_found_whatever_label_value_says(tmp_path, stockfish):
    # The labels store static as limit_value 0; the config's label_value default (8) must not hide them.
    from pipeline.labels.labels import label_store
    from pipeline.labels.pool import EnginePool
    from pipeline.labels.setting import LabelRun
    from pipeline.labels.uci import Limit
    from pipeline.store.store import Store
    from tests.stores import add_pgn

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", RATED_GAMES)
    with EnginePool(stockfish, workers=2) as pool:
        label_store(store, pool, LabelRun(limit=Limit("static")))
    stats = build_dataset(store, "piece_values", {"label_kind": "static"})
    assert stats.candidates - stats.unlabelled > 0 and not stats.empty_reason


def test_dataset_problem_says_what_keeps_training_from_starting(depth6_store):
    from pipeline.datasets.datasets import dataset_problem

    assert dataset_problem(depth6_store, "sabatelli_20class") == (
        "sabatelli_20class is not built yet (run `chess-pipeline datasets sabatelli_20class`)"
    )
    build_dataset(depth6_store, "sabatelli_20class")
    problem = dataset_problem(depth6_store, "sabatelli_20class")
    assert problem.startswith("sabatelli_20class has no rows: no depth-8 labels for its 47 candidate positions")
    assert "--depth 6`" in problem
    build_dataset(depth6_store, "sabatelli_20class", {"label_value": 6}, SplitConfig(val_fraction=0, test_fraction=0))
    assert dataset_problem(depth6_store, "sabatelli_20class").startswith(
        "sabatelli_20class has no val or test rows (train 47, val 0, test 0)"
    )
    # g3 too (min_elo 1500): three games (g1 twice counts once), one for each split.
    build_dataset(
        depth6_store,
        "sabatelli_20class",
        {"label_value": 6, "min_elo": 1500},
        SplitConfig(val_fraction=0.3, test_fraction=0.3),
    )
    assert dataset_problem(depth6_store, "sabatelli_20class") == ""
