"""DeepChess through Dagster: the model asset on the shared loop, then its evaluations (the 1-ply
comparison player in the suites and matches, Experiment 1's buckets, the STS solution ranking)."""

import os

import dagster as dg
import pytest

from assets.deepchess import SUITE, deepchess_assets
from assets.evaluation import evaluation_assets
from assets.resources import StockfishResource, StoreResource
from assets.training import model_assets
from pipeline.datasets.datasets import SplitConfig, build_dataset
from pipeline.play.suites import read_epd
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.stores import add_pgn, first_games
from training.deepchess import BUCKETS

MODEL = "deepchess_net"


@pytest.fixture
def one_core(monkeypatch):
    """The loop takes every core by default; on a shared test machine one is faster."""
    monkeypatch.setattr(os, "cpu_count", lambda: 1)


def test_deepchess_model_and_evaluations_end_to_end(instance, tmp_path, stockfish, fics_2022, shared_data, one_core):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", first_games(fics_2022, 150, tmp_path / "src.pgn"))
    build_dataset(store, "deepchess", {}, SplitConfig(val_fraction=0.2, test_fraction=0.2))
    resources = {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=1)}
    trained = dg.materialize(
        model_assets,
        selection=[MODEL],
        instance=instance,
        resources=resources,
        run_config={"ops": {MODEL: {"config": {"epochs": 1, "batch_size": 64, "max_train_rows": 600}}}},
    )
    assert trained.success
    meta = trained.asset_materializations_for_node(MODEL)[0].metadata
    assert {"material_baseline", "pretraining", "learning_curves", "train_pair_accuracy"} <= set(meta)
    assert "material_baseline_test_accuracy" in meta and "layer | epochs" in meta["pretraining"].value

    epd = tmp_path / "suites"
    epd.mkdir()
    lines = (shared_data / "epd" / "STS1-STS15_LAN_v3.epd").read_text().splitlines()[:12]
    (epd / "sts.epd").write_text("\n".join(lines) + "\n")
    ops = {
        f"eval_suites_{MODEL}": {"config": {"suites_dir": str(epd), "depths": [1, 2], "max_positions": 6}},
        f"eval_matches_{MODEL}": {
            "config": {
                "openings": 1,
                "random_plies": 20,
                "stockfish_skills": [],
                "search_depths": [1, 2],
                "movetime": 0.02,
                "max_plies": 40,
                "endgames": 0,
            }
        },
        f"eval_pairs_{MODEL}": {"config": {"suites_dir": str(epd)}},
    }
    result = dg.materialize(
        [*evaluation_assets, *deepchess_assets],
        selection=list(ops),
        instance=instance,
        resources=resources,
        run_config={"ops": ops},
    )
    assert result.success
    with memory_connection(store) as con:
        got = {
            (s, k): (v, n, d)
            for s, k, v, n, d in con.sql(
                "SELECT suite, metric, value, n, detail FROM evaluation_results WHERE model = $m", params={"m": MODEL}
            ).fetchall()
        }
        matches = {r[0] for r in con.sql("SELECT DISTINCT match FROM match_games").fetchall()}
        metrics = {
            (s, k): v
            for s, k, v in con.sql(
                "SELECT split, metric, value FROM model_metrics WHERE model = $m", params={"m": MODEL}
            ).fetchall()
        }
    # The comparison player plays 1-ply only: depth 2 and the timed match are left out.
    assert ("sts", "points_1ply") in got and ("sts", "points_depth2") not in got
    assert matches == {"vs random", "depth 1 vs traditional"}
    # Experiment 1: one metric per bucket, n = pairs, and the bucket sizes in the detail.
    for bucket in BUCKETS:
        value, n, detail = got[(SUITE, bucket)]
        assert 0 <= value <= 1 and n >= 0 and "from White wins" in detail and "published" in detail
        low, high = got[(SUITE, f"{bucket}_low95")], got[(SUITE, f"{bucket}_high95")]
        assert low[0] <= value <= high[0] and low[1] == high[1] == n and "clustered by game" in low[2]
    value, n, detail = got[(SUITE, "static_evals")]
    assert 0 < value <= n  # every test position but those in check got a static evaluation
    several = sum(len(p.points) >= 2 for p in read_epd(epd / "sts.epd").positions)
    _, n, _ = got[("sts", "solution_ranking")]
    assert n == several
    assert {("test", "accuracy"), ("test", "material_baseline_accuracy"), ("train", "pair_accuracy")} <= set(metrics)
    # Which protocol the figures are on: ours (by game, leakage guard), not the published one.
    assert (metrics[("test", "split_by_position")], metrics[("test", "leakage_guard")]) == (0.0, 1.0)
    assert (got[(SUITE, "split_by_position")][0], got[(SUITE, "leakage_guard")][0]) == (0.0, 1.0)
    assert meta["split_protocol"].value == "split by game, leakage guard on (ours)"
