"""Training and evaluation on a store on S3 (a real S3-compatible server on loopback, moto's
server mode, as in tests/pipeline/test_storage_s3.py) give what they give on a local store:
the same dataset, trained with the same seed, gives the same test figures and weights, its
checkpoint is an object of the store's models/ prefix, and the evaluation assets read that
checkpoint, the store's suites and their own charts back from the store."""

from __future__ import annotations

import dagster as dg
import pytest
import torch

from pipeline.store import storage
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from pipeline.store.store_files import atomic_path
from tests.pipeline.test_storage_s3 import bucket, endpoint, keys  # noqa: F401  (fixtures)
from tests.pipeline.test_suites import STS_LINES
from tests.stores import first_games

pytestmark = pytest.mark.slow  # an S3 server, Stockfish, two trainings

MODEL = "lubeck_wdl_mlp"
"""The Lubeck WDL network: its dataset's target is the game result, so no labels are needed."""


def _train_and_evaluate(st: Store, pgn) -> dict:
    """Ingest pgn, build lubeck_wdl, train MODEL two epochs with seed 0, score it on a suite
    kept in the store's suites/ folder and write its report; each store in its own instance."""
    from assets.datasets import dataset_assets
    from assets.evaluation import evaluation_assets
    from assets.resources import StockfishResource, StoreResource
    from assets.training import model_assets
    from pipeline.ingest.ingest import IngestConfig, ingest_archive

    key = st.add_archive(pgn)
    ingest_archive(st, key, pgn, IngestConfig(workers=1))
    with atomic_path(st.root / "suites" / "sts_mini.epd") as tmp:
        tmp.write_bytes(STS_LINES.encode())
    instance = dg.DagsterInstance.ephemeral()
    resources = {"store": StoreResource(root=str(st.root)), "stockfish": StockfishResource(workers=1)}
    split = {"seed": 0, "val_fraction": 0.2, "test_fraction": 0.2}
    assert dg.materialize(
        dataset_assets,
        selection=["lubeck_wdl"],
        instance=instance,
        resources=resources,
        run_config={"ops": {"lubeck_wdl": {"config": split}}},
    ).success
    trained = dg.materialize(
        model_assets,
        selection=[MODEL],
        instance=instance,
        resources=resources,
        run_config={"ops": {MODEL: {"config": {"epochs": 2, "seed": 0, "device": "cpu", "max_train_rows": 3000}}}},
    )
    assert trained.success
    meta = {k: v.value for k, v in trained.asset_materializations_for_node(MODEL)[0].metadata.items()}
    evaluated = dg.materialize(
        evaluation_assets,
        selection=[f"eval_suites_{MODEL}", f"eval_report_{MODEL}"],
        instance=instance,
        resources=resources,
        run_config={"ops": {f"eval_suites_{MODEL}": {"config": {"depths": [1], "max_positions": 2}}}},
    )
    assert evaluated.success
    suites_meta = evaluated.asset_materializations_for_node(f"eval_suites_{MODEL}")[0].metadata
    with memory_connection(st) as con:
        metrics = sorted(con.sql("SELECT metric, value FROM model_metrics WHERE split = 'test'").fetchall())
        results = sorted(con.sql("SELECT suite, metric, value, n, detail FROM evaluation_results").fetchall())
    return {
        "run_id": trained.run_id,
        "meta": meta,
        "metrics": metrics,
        "results": results,
        "suites": suites_meta["suites"].value,
        "report": storage.read_bytes(st.root / "reports" / "evaluation" / f"{MODEL}.md").decode(),
    }


def test_a_model_trained_and_evaluated_on_s3_equals_the_local_one(bucket, fics_2022, tmp_path):  # noqa: F811
    from training.train import load_model

    pgn = tmp_path / "games.pgn"
    first_games(fics_2022, 40, pgn)  # real games, players over 2000: Lubeck's dataset takes them
    s3 = Store(f"s3://{bucket}/stores/main").ensure()
    local = Store(tmp_path / "local").ensure()
    got = {name: _train_and_evaluate(st, pgn) for name, st in (("s3", s3), ("local", local))}

    # The checkpoint is an object under the store's models/ prefix, written whole (no temporary
    # object), its lineage naming the dataset objects; nothing of it went to a local models/.
    run_id = got["s3"]["run_id"]
    checkpoint = got["s3"]["meta"]["checkpoint"]
    assert checkpoint == f"s3://{bucket}/stores/main/models/{MODEL}/{run_id}/checkpoint.pt"
    names = keys(bucket, "stores/main")
    assert f"stores/main/models/{MODEL}/{run_id}/checkpoint.pt" in names
    assert not [n for n in names if n.endswith(".tmp")]
    assert not (s3.local_dir / "models").exists()
    s3_model, s3_ck = load_model(checkpoint)
    local_model, local_ck = load_model(got["local"]["meta"]["checkpoint"])
    assert s3_ck["dataset"]["splits"]["train"]["path"] == f"s3://{bucket}/stores/main/datasets/lubeck_wdl/train.parquet"
    assert s3_ck["dataset"]["splits"] == {
        s: {**v, "path": s3_ck["dataset"]["splits"][s]["path"], "mtime": s3_ck["dataset"]["splits"][s]["mtime"]}
        for s, v in local_ck["dataset"]["splits"].items()
    }  # the same rows and bytes in each split

    # Same data, same seed: the same weights and the same test figures.
    s3_state, local_state = s3_model.state_dict(), local_model.state_dict()
    assert s3_state.keys() == local_state.keys()
    assert all(torch.equal(s3_state[k], local_state[k]) for k in s3_state)
    assert got["s3"]["metrics"] == got["local"]["metrics"]
    assert dict(got["s3"]["metrics"])["rows"] > 0 and 0 <= dict(got["s3"]["metrics"])["accuracy"] <= 1
    for k in ("test_accuracy", "rows_train", "rows_val", "rows_test", "epochs"):
        assert got["s3"]["meta"][k] == got["local"]["meta"][k], k

    # The evaluation read the checkpoint and the suites folder from the store: the same suite
    # scores, and the same report, which links the chart it read back from the store.
    assert got["s3"]["suites"] == got["local"]["suites"] == 1
    assert got["s3"]["results"] == got["local"]["results"]
    assert [r for r in got["s3"]["results"] if r[0] == "sts_mini" and r[1] == "points_1ply"][0][3] == 2
    assert got["s3"]["report"] == got["local"]["report"]
    assert f"{MODEL}/sts_mini_themes.png" in got["s3"]["report"]
    assert f"stores/main/reports/evaluation/{MODEL}/sts_mini_themes.png" in names

    # Two read-only DuckDB sessions of the S3 store at once in this process (the explorer's case).
    from pipeline.store.duck import read_only_connection

    with read_only_connection(s3) as one, read_only_connection(s3) as two:
        assert one.sql("SELECT count(*) FROM games").fetchall() == two.sql("SELECT count(*) FROM games").fetchall()
