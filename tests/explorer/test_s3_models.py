"""The explorer over a store on S3 (moto's S3 server on loopback, as in
tests/pipeline/test_storage_s3.py): the trained networks whose checkpoints are objects of the
store are listed (by their model asset's latest materialisation, as the CLI lists them), score
positions as the same checkpoint does as a local file, and a replaced object is loaded again."""

from __future__ import annotations

import chess
import dagster as dg
import pytest
from fastapi.testclient import TestClient

from explorer.app import create_app
from explorer.evaluations import TrainedModel
from pipeline.store import storage
from pipeline.store.store import Store
from tests.pipeline.test_storage_s3 import bucket, endpoint  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # an S3 server of its own, a real archive, a (one-epoch) training

MODEL = "lubeck_wdl_mlp"
"""Lubeck's WDL network: its dataset's target is the game result, so no labels (no engine) are needed."""


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory, fics_2022):
    """A real checkpoint: Lubeck's WDL MLP trained one epoch on the first 16 games of a FICS archive."""
    from pipeline.datasets.datasets import SplitConfig, build_dataset
    from tests.stores import add_pgn, first_games
    from training.train import TrainConfig, train

    tmp = tmp_path_factory.mktemp("explorer_s3")
    store = Store(tmp / "store").ensure()
    add_pgn(store, tmp, "games.pgn", first_games(fics_2022, 16, tmp / "src.pgn"))
    build_dataset(store, "lubeck_wdl", {}, split=SplitConfig(seed=0, val_fraction=0.2, test_fraction=0.2))
    config = TrainConfig(
        store=str(store.root), dataset="lubeck_wdl", model="lubeck", encoder="bitmap768", epochs=1, out=str(tmp / "run")
    )
    return train(config).checkpoint


def test_the_networks_of_an_s3_store_are_listed_and_score_positions(bucket, checkpoint, tmp_path):  # noqa: F811
    from cli.explore import trained_models
    from training.evaluator import NetworkEvaluator

    store = Store(f"s3://{bucket}/p").ensure()
    stored = store.root / "models" / MODEL / "run-1" / "checkpoint.pt"  # where the model asset uploads it
    storage.upload_file(checkpoint, stored)
    gone = store.root / "models" / "cnn_bitmap_3class" / "run-2" / "checkpoint.pt"
    with dg.instance_for_test() as instance:
        for asset, path in ((MODEL, stored), ("cnn_bitmap_3class", gone)):
            meta = {"checkpoint": dg.MetadataValue.path(str(path)), "dataset": "lubeck_wdl", "model": "lubeck"}
            instance.report_runless_asset_event(dg.AssetMaterialization(asset, metadata=meta))
        listed = trained_models(instance)
    # The object that exists, as the object (not a local path); the one that is gone is not listed.
    assert listed == [TrainedModel(MODEL, stored, "lubeck_wdl", "lubeck")]

    board = chess.Board("r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3")
    board.push_san("Bb5")  # Black to move: the White's-view sign matters
    expected = -float(NetworkEvaluator(checkpoint).evaluate([board])[0])  # the local file, side to move
    with TestClient(create_app(store, lambda: listed), base_url="http://127.0.0.1") as c:
        models = c.get("/api/models").json()
        assert models["value_networks"] == [
            {"name": MODEL, "dataset": "lubeck_wdl", "preset": "lubeck", "checkpoint": str(stored)}
        ]
        [net] = c.get("/api/evaluations", params={"fen": board.fen()}).json()["networks"]
        assert net["model"] == MODEL and net["score"] == pytest.approx(expected, abs=0.06), net
        # A new version of the object (here not a checkpoint at all) is read again, not served
        # from the network loaded before.
        (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
        storage.upload_file(tmp_path / "bad.pt", stored)
        [net] = c.get("/api/evaluations", params={"fen": board.fen()}).json()["networks"]
        assert "score" not in net and net["error"], net
