"""A model asset trains from its dataset in a real Dagster instance and reports its metrics."""

import dagster as dg
import torch

from assets.datasets import dataset_assets
from assets.resources import StoreResource
from assets.training import model_assets
from pipeline.store.duck import connect, create_views
from tests.stores import first_games, labelled_store


def test_model_asset_trains_reports_and_lands_in_model_metrics(instance, tmp_path, stockfish, fics_2022):
    store = labelled_store(tmp_path, first_games(fics_2022, 24, tmp_path / "src.pgn"), stockfish)
    resources = {"store": StoreResource(root=str(store.root))}
    split = {"seed": 0, "val_fraction": 0.2, "test_fraction": 0.2}
    assert dg.materialize(
        dataset_assets,
        selection=["sabatelli_3class"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"sabatelli_3class": {"config": {**split, "min_elo": 1500}}}},
    ).success
    result = dg.materialize(
        model_assets,
        selection=["mlp_bitmap_3class"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"mlp_bitmap_3class": {"config": {"epochs": 2}}}},
    )
    assert result.success
    mat = result.get_asset_materialization_events()[0].materialization
    meta = {k: v.value for k, v in mat.metadata.items()}
    assert 0 <= meta["test_accuracy"] <= 1 and meta["epochs"] == 2 and meta["device"] == "cpu"
    assert "data:image/png;base64," in meta["learning_curves"] and "data:image/png;base64," in meta["confusion_matrix"]
    # The checkpoint of this very run, with its lineage.
    ck = torch.load(meta["checkpoint"], weights_only=False)
    assert result.run_id in meta["checkpoint"] and ck["dataset"]["name"] == "sabatelli_3class"
    create_views(store)
    with connect(store) as con:
        got = dict(
            con.sql(
                "SELECT metric, value FROM model_metrics WHERE split = 'test' AND model = 'mlp_bitmap_3class'"
            ).fetchall()
        )
    assert abs(got["accuracy"] - meta["test_accuracy"]) < 1e-4 and got["rows"] == meta["rows_test"]


def test_a_model_on_an_empty_dataset_fails_saying_why_before_training(instance, tmp_path):
    from cli import failure_message
    from pipeline.store.store import Store
    from tests.fixtures_pgn import RATED_GAMES
    from tests.stores import add_pgn

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", RATED_GAMES)  # ingested, never labelled
    resources = {"store": StoreResource(root=str(store.root))}
    assert dg.materialize(
        dataset_assets, selection=["sabatelli_3class"], instance=instance, resources=resources
    ).success
    result = dg.materialize(
        model_assets, selection=["mlp_bitmap_3class"], instance=instance, resources=resources, raise_on_error=False
    )
    assert not result.success
    assert failure_message(result) == (
        "ValueError: sabatelli_3class has no rows: the store has no labels yet; its 47 candidate positions need "
        "depth-8 labels (run `chess-pipeline label --depth 8`)"
    )
    assert not (store.root / "models" / "mlp_bitmap_3class").exists()
