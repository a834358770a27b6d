"""The labels asset, its checks and the nightly re-labelling schedule, in a real Dagster instance."""

from datetime import datetime, timezone

import dagster as dg
import pytest

from assets.definitions import build_defs
from assets.labels import labels
from assets.resources import StockfishResource, StoreResource
from pipeline.duck import memory_connection
from pipeline.ingest import IngestConfig, ingest_archive
from pipeline.store import Store

GAMES = ('[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
         '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n')
DISTINCT = 13  # 18 position rows; the first five (start to 2...Nc6) are shared


@pytest.fixture
def store(tmp_path):
    st = Store(tmp_path / "store").ensure()
    path = tmp_path / "two.pgn"
    path.write_text(GAMES)
    key = st.add_archive(path)
    ingest_archive(st, key, path, IngestConfig(workers=1))
    return st


def _run(instance, store, **config):
    result = dg.materialize([labels], instance=instance, run_config={"ops": {"labels": {"config": config}}},
                            resources={"store": StoreResource(root=str(store.root)),
                                       "stockfish": StockfishResource(workers=2)})
    assert result.success
    meta = {k: v.value for k, v in result.get_asset_materialization_events()[0].materialization.metadata.items()}
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    return meta, checks


def test_labels_asset_bounded_then_complete_then_nothing_to_do(instance, store, stockfish):
    meta, checks = _run(instance, store, max_positions=4)
    assert meta["labelled"] == 4 and meta["stopped_by"] == "max_positions"
    assert meta["distinct_positions"] == DISTINCT and meta["positions"] == 18
    assert not checks["coverage"].passed and checks["coverage"].severity == dg.AssetCheckSeverity.WARN
    assert checks["coverage"].metadata["unlabelled"].value == DISTINCT - 4
    assert checks["scores_in_range"].passed and checks["no_duplicate_labels"].passed

    meta, checks = _run(instance, store)
    assert meta["labelled"] == DISTINCT - 4 and meta["coverage"] == 1.0
    assert all(c.passed for c in checks.values())
    assert "data:image/png;base64," in meta["eval_histogram"]

    meta, _ = _run(instance, store)
    assert meta["labelled"] == 0 and meta["failed"] == 0


def test_nightly_schedule_tick_launches_a_relabel_run_that_works(instance, store, stockfish, monkeypatch):
    _run(instance, store)
    monkeypatch.setenv("CHESS_PIPELINE_HOME", str(store.root))
    defs = build_defs({"CHESS_PIPELINE_RELABEL_DEPTH": "9", "CHESS_PIPELINE_RELABEL_POSITIONS": "5",
                       "CHESS_PIPELINE_RELABEL_TZ": "UTC"})
    schedule = defs.resolve_schedule_def("nightly_relabel")
    tick = datetime(2026, 11, 26, 2, 0, tzinfo=timezone.utc)
    requests = schedule.evaluate_tick(dg.build_schedule_context(instance=instance, scheduled_execution_time=tick))
    (request,) = requests.run_requests
    result = defs.resolve_job_def(schedule.job_name).execute_in_process(run_config=request.run_config,
                                                                        instance=instance)
    assert result.success
    with memory_connection(store) as con:
        rows = con.sql("SELECT limit_value, count(*) FROM labels GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [(8, DISTINCT), (9, 5)]


def test_ingesting_an_archive_makes_the_automation_request_a_labels_run(instance, tmp_path, monkeypatch):
    from assets.ingest import archive_tables
    from assets.partitions import archives_partitions

    st = Store(tmp_path / "auto").ensure()
    monkeypatch.setenv("CHESS_PIPELINE_HOME", str(st.root))
    defs = build_defs({})
    first = dg.evaluate_automation_conditions(defs=defs, instance=instance)
    assert first.total_requested == 0
    path = tmp_path / "two.pgn"
    path.write_text(GAMES)
    key = st.add_archive(path)
    instance.add_dynamic_partitions(archives_partitions.name, [key])
    assert dg.materialize([archive_tables], partition_key=key, instance=instance,
                          resources={"store": StoreResource(root=str(st.root))}).success
    after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=first.cursor)
    assert after.total_requested == 1 and after.get_num_requested(dg.AssetKey("labels")) == 1
