"""The evaluation assets on two small trained models, in a real Dagster instance."""

import chess.pgn
import dagster as dg
import pytest

from assets.datasets import dataset_assets
from assets.evaluation import evaluation_assets, player_model
from assets.resources import StockfishResource, StoreResource
from assets.training import model_assets
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store.duck import memory_connection
from tests.stores import first_games, labelled_store

MODELS = ["mlp_bitmap_3class", "cnn_features_3class"]


def _train(instance, tmp_path, stockfish, fics_2022, games: int, models: list[str]):
    """A store of `games` real labelled games and `models` trained one epoch on them."""
    store = labelled_store(tmp_path, first_games(fics_2022, games, tmp_path / "src.pgn"), stockfish)
    resources = {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=1)}
    split = {"seed": 0, "val_fraction": 0.2, "test_fraction": 0.2, "min_elo": 1500}
    assert dg.materialize(
        dataset_assets,
        selection=["sabatelli_3class"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"sabatelli_3class": {"config": split}}},
    ).success
    assert dg.materialize(
        model_assets,
        selection=models,
        instance=instance,
        resources=resources,
        run_config={"ops": {m: {"config": {"epochs": 1}} for m in models}},
    ).success
    return store, resources


@pytest.fixture
def trained(instance, tmp_path, stockfish, fics_2022):
    return _train(instance, tmp_path, stockfish, fics_2022, 24, MODELS)


def test_evaluation_assets_end_to_end(instance, trained, shared_data):
    store, resources = trained
    suites = {"suites_dir": str(shared_data / "epd"), "depths": [1, 2], "max_positions": 4, "kaufman_depth": 8}
    matches = {
        "openings": 1,
        "random_plies": 30,
        "stockfish_skills": [0],
        "stockfish_depth": 2,
        "search_depths": [1],
        "movetime": 0.02,
        "time_openings": 1,
        "max_plies": 120,
        "endgames": 1,
        "endgame_verify_depth": 8,
        "endgame_defender_depth": 2,
        "endgame_max_plies": 10,
    }
    ops = {f"eval_suites_{m}": {"config": suites} for m in MODELS}
    ops.update({f"eval_matches_{m}": {"config": matches} for m in MODELS})
    ops["eval_head_to_head"] = {"config": {"openings": 2, "max_plies": 120}}
    selection = [*ops, "elo_ratings", *(f"eval_report_{m}" for m in MODELS)]
    result = dg.materialize(
        evaluation_assets, selection=selection, instance=instance, resources=resources, run_config={"ops": ops}
    )
    assert result.success
    with memory_connection(store) as con:
        got = {
            (m, s, k): (v, n)
            for m, s, k, v, n in con.sql("SELECT model, suite, metric, value, n FROM evaluation_results").fetchall()
        }
        games = con.sql("SELECT asset, match, white, black, result, plies, pgn_path FROM match_games").fetchall()
    for m in MODELS:
        # Suites: 4 STS positions (max 40 points) and 4 Kaufman positions at both depths.
        for d in ("1ply", "depth2"):
            points, n = got[(m, "STS1-STS15_LAN_v3", f"points_{d}")]
            assert n == 4 and 0 <= points <= 40
            delta, n = got[(m, "kaufman", f"avg_delta_cp_{d}")]
            assert n == 4 and delta >= -50  # the suite's moves are (nearly) best: deltas are not negative
        # Matches: 2 games per opponent, random mover's win ratio with its interval.
        for opponent in ("random", "stockfish skill 0 depth 2", "material_pst depth 1", "material_pst 0.02 s a move"):
            assert got[(m, opponent, "score")][1] == 2, opponent
        # Elo of its 1-ply player.
        assert (m, "elo", f"{m} 1-ply") in got
    elo = [
        e
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key.to_user_string() == "elo_ratings"
    ][0].materialization.metadata
    anchor = elo["anchor"].value
    assert got[(player_model(anchor), "elo", anchor)][0] == 0
    assert got[("mlp_bitmap_3class", "cnn_features_3class 1-ply", "score")][1] == 4
    assert got[("cnn_features_3class", "mlp_bitmap_3class 1-ply", "score")][0] == pytest.approx(
        1 - got[("mlp_bitmap_3class", "cnn_features_3class 1-ply", "score")][0]
    )
    # Every game is in its PGN, which the pipeline ingests as an archive with nothing rejected.
    per_file = {}
    for _asset, _match, white, black, res, plies, path in games:
        per_file.setdefault(path, []).append((white, black, res, plies))
    for path, rows in per_file.items():
        with open(path) as f:
            pgn_games = []
            while (g := chess.pgn.read_game(f)) is not None:
                pgn_games.append(
                    (g.headers["White"], g.headers["Black"], g.headers["Result"], len(list(g.mainline_moves())))
                )
        assert sorted(pgn_games) == sorted(rows)
        key = store.add_archive(path)
        stats = ingest_archive(store, key, path, IngestConfig(workers=1))
        assert (stats.games, stats.rejected) == (len(rows), 0)
    # The reports: a file each, with the published figures beside ours.
    for m in MODELS:
        text = (store.root / "reports" / "evaluation" / f"{m}.md").read_text()
        assert "1,160 / 15,000" in text and "kaufman" in text and "elo.png" in text
    reports = [
        e
        for e in result.get_asset_materialization_events()
        if e.materialization.asset_key.to_user_string() == "eval_report_mlp_bitmap_3class"
    ]
    assert "data:image/png;base64," in reports[0].materialization.metadata["elo"].value


@pytest.mark.slow  # StockfishResource starts the real engine
def test_evaluation_fails_clearly_before_the_model_is_trained(instance, tmp_path):
    from pipeline.store.store import Store

    store = Store(tmp_path / "store").ensure()
    result = dg.materialize(
        evaluation_assets,
        selection=["eval_suites_mlp_bitmap_3class"],
        instance=instance,
        resources={"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=1)},
        raise_on_error=False,
    )
    assert not result.success
    assert "has not been materialised" in str(result.get_step_failure_events()[0].event_specific_data.error)


@pytest.fixture
def one_model(instance, tmp_path, stockfish, fics_2022):
    """The 3-class MLP trained one epoch on 8 real games: the cheapest model the suites can load."""
    return _train(instance, tmp_path, stockfish, fics_2022, 8, MODELS[:1])


def test_bad_suites_and_lines_do_not_stop_the_suites_asset(instance, one_model, tmp_path):
    """A folder with a good STS suite, a public collection (c0 comments, bad lines) and
    unreadable files: the asset succeeds, scores what reads and reports the rest. Before: the
    free-text c0 failed the whole asset (ValueError: invalid literal for int())."""
    from tests.pipeline.test_suites import PUBLIC, STS_LINES

    store, resources = one_model
    folder = tmp_path / "suites"
    folder.mkdir()
    (folder / "sts_mini.epd").write_bytes(STS_LINES.encode())
    (folder / "public.epd").write_bytes("\r\n".join(PUBLIC).encode())
    (folder / "junk.epd").write_bytes(bytes(range(256)) * 4)
    (folder / "gone.epd").symlink_to(tmp_path / "nowhere.epd")
    model = MODELS[0]
    result = dg.materialize(
        evaluation_assets,
        selection=[f"eval_suites_{model}"],
        instance=instance,
        resources=resources,
        run_config={"ops": {f"eval_suites_{model}": {"config": {"suites_dir": str(folder), "depths": [1]}}}},
    )
    assert result.success
    meta = result.asset_materializations_for_node(f"eval_suites_{model}")[0].metadata
    assert (meta["suites"].value, meta["suites_unreadable"].value, meta["positions_failed"].value) == (2, 2, 7)
    assert "| public | 7 | illegal position (opposite check) |" in meta["failed_positions"].value
    assert "| junk | " in meta["unreadable_suites"].value and "binary data" in meta["unreadable_suites"].value
    with memory_connection(store) as con:
        got = {
            (s, k): (v, n, d)
            for s, k, v, n, d in con.sql(
                "SELECT suite, metric, value, n, detail FROM evaluation_results WHERE model = $m", params={"m": model}
            ).fetchall()
        }
    assert got[("sts_mini", "points_1ply")][1] == 2 and got[("sts_mini", "points_1ply")][2].startswith("of 20; ")
    assert ("sts_mini", "points_1ply_low95") in got and ("sts_mini", "points_1ply_high95") in got
    assert got[("public", "solved_1ply")][1] == 3 and got[("public", "positions_failed")][:2] == (7, 13)
    assert got[("junk", "unreadable")][:2] == (1, 0) and "no such file" in got[("gone", "unreadable")][2]
