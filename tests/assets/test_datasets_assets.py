"""Dataset assets in a real Dagster instance: files, metadata, checks and the `datasets` view."""

import dagster as dg
import pyarrow.parquet as pq

from assets.datasets import dataset_assets
from assets.resources import StoreResource
from pipeline.datasets.datasets import SPLITS, dataset_dir
from pipeline.store.duck import connect, create_views
from tests.fixtures_pgn import RATED_GAMES
from tests.stores import labelled_store


def test_dataset_assets_write_splits_report_them_and_pass_their_checks(instance, tmp_path, stockfish):
    store = labelled_store(tmp_path, RATED_GAMES, stockfish)
    names = ["sabatelli_3class", "lubeck_wdl"]
    split = {"seed": 0, "val_fraction": 0.0, "test_fraction": 0.5}
    result = dg.materialize(
        dataset_assets,
        selection=names,
        instance=instance,
        resources={"store": StoreResource(root=str(store.root))},
        run_config={"ops": {n: {"config": split} for n in names}},
    )
    assert result.success
    checks = {(c.asset_key.to_user_string(), c.check_name): c for c in result.get_asset_check_evaluations()}
    for mat in result.get_asset_materialization_events():
        name = mat.materialization.asset_key.to_user_string()
        meta = {k: v.value for k, v in mat.materialization.metadata.items()}
        on_disk = {s: pq.read_metadata(dataset_dir(store, name) / f"{s}.parquet").num_rows for s in SPLITS}
        assert {s: meta[f"rows_{s}"] for s in SPLITS} == on_disk
        assert checks[(name, "disjoint_splits")].passed
        assert checks[(name, "label_coverage")].passed and meta["label_coverage"] == 1.0
        # val is empty by configuration: the check says so.
        assert not checks[(name, "rows_per_split")].passed and on_disk["val"] == 0
        assert "class_histogram" in meta and "data:image/png;base64," in meta["class_shares"]
    create_views(store)
    with connect(store) as con:
        got = dict(con.sql("SELECT dataset, count(*) FROM datasets GROUP BY 1").fetchall())
        shared = con.sql(
            "SELECT count(*) FROM datasets a JOIN datasets b USING (dataset, position_key) "
            "WHERE a.split = 'train' AND b.split = 'test'"
        ).fetchall()[0][0]
    assert got == {
        n: sum(pq.read_metadata(dataset_dir(store, n) / f"{s}.parquet").num_rows for s in SPLITS) for n in names
    }
    assert shared == 0


def test_a_set_with_no_candidates_reports_no_coverage_and_why(instance, tmp_path):
    from pipeline.store.store import Store
    from tests.stores import add_pgn

    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", RATED_GAMES)  # no game has both players over 3000
    result = dg.materialize(
        dataset_assets,
        selection=["sabatelli_3class"],
        instance=instance,
        resources={"store": StoreResource(root=str(store.root))},
        run_config={"ops": {"sabatelli_3class": {"config": {"min_elo": 3000}}}},
    )
    assert result.success
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["candidates"].value == 0 and meta["rows"].value == 0
    assert meta["label_coverage"] == dg.MetadataValue.null()  # not 100% of nothing
    assert "rated over 3000" in meta["empty_reason"].value and "min_elo 0 would keep" in meta["empty_reason"].value
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert not checks["label_coverage"].passed and not checks["rows_per_split"].passed
    assert "rated over 3000" in checks["label_coverage"].metadata["empty_reason"].value


def test_a_searched_set_warns_when_children_were_left_unlabelled_and_passes_when_none_were():
    """searched_children_labelled (WARN): the children the engine gave no evaluation after the pool's
    retries (left out of train), against the children asked for; only a searched set has it."""
    from assets.datasets import _results
    from pipeline.datasets.datasets import DatasetStats

    def check(name: str, **searched) -> dict | None:
        stats = DatasetStats(
            name,
            candidates=10,
            rows={s: 5 for s in SPLITS},
            removed={s: 0 for s in SPLITS},
            target_summary={s: (0.5, 0.1, 0.0, 1.0) for s in SPLITS},
            overlap={},
            **searched,
        )
        found = [r for r in _results(name, stats) if getattr(r, "check_name", "") == "searched_children_labelled"]
        if not found:
            return None
        assert found[0].severity == dg.AssetCheckSeverity.WARN
        return {"passed": found[0].passed, **{k: v.value for k, v in found[0].metadata.items()}}

    left_out = check("sabatelli_regression_search", searched=[30, 40, 13], searched_unlabelled=17)
    assert left_out == {"passed": False, "searched_unlabelled": 17, "searched_children": 100, "unlabelled_share": 0.17}
    assert check("sabatelli_regression_search", searched=[30, 40, 30])["passed"] is True
    assert check("sabatelli_regression") is None
