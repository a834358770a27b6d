"""The labels asset, its checks and the nightly re-labelling schedule, in a real Dagster instance."""

from datetime import UTC, datetime

import dagster as dg
import pytest

from assets.definitions import build_defs
from assets.labels import labels
from assets.partitions import ALL_SHARDS_TAGS
from assets.resources import StockfishResource, StoreResource
from pipeline.duck import memory_connection
from pipeline.ingest import IngestConfig, ingest_archive
from pipeline.store import Store
from tests.stores import materialize_archive

GAMES = (
    '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
    '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n'
)
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
    result = dg.materialize(
        [labels],
        instance=instance,
        tags=ALL_SHARDS_TAGS,  # one run over every shard partition, as `chess-pipeline label` starts
        run_config={"ops": {"labels": {"config": config}}},
        resources={"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=2)},
    )
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
    defs = build_defs(
        {
            "CHESS_PIPELINE_RELABEL_DEPTH": "9",
            "CHESS_PIPELINE_RELABEL_POSITIONS": "5",
            "CHESS_PIPELINE_RELABEL_TZ": "UTC",
        }
    )
    schedule = defs.resolve_schedule_def("nightly_relabel")
    tick = datetime(2026, 11, 26, 2, 0, tzinfo=UTC)
    requests = schedule.evaluate_tick(dg.build_schedule_context(instance=instance, scheduled_execution_time=tick))
    (request,) = requests.run_requests
    assert request.partition_key is None and ALL_SHARDS_TAGS.items() <= request.tags.items()  # embedded: one run
    result = defs.resolve_job_def(schedule.job_name).execute_in_process(
        run_config=request.run_config, instance=instance, tags=request.tags
    )
    assert result.success
    with memory_connection(store) as con:
        rows = con.sql("SELECT limit_value, count(*) FROM labels GROUP BY 1 ORDER BY 1").fetchall()
    assert rows == [(8, DISTINCT), (9, 5)]


ARCHIVE_B = (
    '[Event "b1"]\n[Result "*"]\n\n1. d4 d5 2. c4 e6 3. Nc3 Nf6 *\n\n'
    '[Event "b2"]\n[Result "*"]\n\n1. e4 c5 2. Nf3 d6 *\n'
)


def _epds(text: str) -> set[str]:
    """Distinct positions of the games by python-chess (board, side, castling, legal en passant)."""
    import io

    import chess.pgn

    out = set()
    f = io.StringIO(text)
    while (game := chess.pgn.read_game(f)) is not None:
        board = game.board()
        out.add(board.epd())
        for move in game.mainline_moves():
            board.push(move)
            out.add(board.epd())
    return out


def test_labels_automation_labels_only_the_new_archive_within_a_budget(instance, tmp_path, monkeypatch, stockfish):
    """The sensor's run after an ingest is restricted to the archive just ingested and bounded,
    not a run over the whole backlog; CHESS_PIPELINE_AUTO_LABEL=off stops it."""
    st = Store(tmp_path / "auto").ensure()
    monkeypatch.setenv("CHESS_PIPELINE_HOME", str(st.root))
    monkeypatch.setenv("CHESS_PIPELINE_AUTO_LABEL_MINUTES", "5")
    defs = build_defs({})
    sensor = defs.resolve_sensor_def("labels_automation")

    def ingest(name: str, text: str) -> str:
        path = tmp_path / name
        path.write_text(text)
        key = st.add_archive(path)
        assert materialize_archive(instance, st, key).success
        return key

    def tick(cursor):
        return sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=cursor, definitions=defs))

    ingest("backlog.pgn", GAMES)  # before the sensor's first tick: left to `chess-pipeline label`
    first = tick(None)
    assert not first.run_requests
    key = ingest("new.pgn", ARCHIVE_B)
    second = tick(first.cursor)
    (request,) = second.run_requests
    config = request.run_config["ops"]["labels"]["config"]
    assert config["archives"] == [key] and config["max_minutes"] == 5.0
    assert ALL_SHARDS_TAGS.items() <= request.tags.items()  # the embedded profile: one run over every shard
    result = defs.resolve_job_def(sensor.job_name).execute_in_process(
        run_config=request.run_config, instance=instance, tags=request.tags
    )
    assert result.success
    with memory_connection(st) as con:
        fens = [r[0] for r in con.sql("SELECT fen FROM labels").fetchall()]
        distinct = con.sql("SELECT count(*) FROM distinct_positions").fetchall()[0][0]
    assert sorted(" ".join(f.split()[:4]) for f in fens) == sorted(_epds(ARCHIVE_B))
    assert distinct == len(_epds(GAMES) | _epds(ARCHIVE_B)) > len(fens)  # the backlog is left alone
    # The labels run materialised no positions: nothing new, no run.
    third = tick(second.cursor)
    assert not third.run_requests

    monkeypatch.setenv("CHESS_PIPELINE_AUTO_LABEL", "off")
    ingest("later.pgn", GAMES.replace("Bb5 a6", "Bb5 Nf6"))
    off = tick(third.cursor)
    assert not off.run_requests and "off" in off.skip_message
    assert int(off.cursor) > int(third.cursor)


def test_labels_automation_settings_are_checked_with_the_valid_values_in_the_message():
    from assets.labels import auto_label_settings

    assert auto_label_settings({}) == {"enabled": True, "minutes": 10.0, "positions": 0}
    assert auto_label_settings({"CHESS_PIPELINE_AUTO_LABEL": "OFF"})["enabled"] is False
    assert auto_label_settings(
        {"CHESS_PIPELINE_AUTO_LABEL_MINUTES": "0", "CHESS_PIPELINE_AUTO_LABEL_POSITIONS": "500"}
    ) == {"enabled": True, "minutes": 0.0, "positions": 500}
    with pytest.raises(ValueError, match="must be one of on, 1, true, yes, off"):
        auto_label_settings({"CHESS_PIPELINE_AUTO_LABEL": "sometimes"})
    with pytest.raises(ValueError, match="CHESS_PIPELINE_AUTO_LABEL_MINUTES must be a number"):
        auto_label_settings({"CHESS_PIPELINE_AUTO_LABEL_MINUTES": "ten"})
    with pytest.raises(ValueError, match="need a budget"):
        auto_label_settings({"CHESS_PIPELINE_AUTO_LABEL_MINUTES": "0"})


def test_progress_file_and_log_count_the_positions_asked_for(instance, store, stockfish, tmp_path):
    """max_positions 4 of 13 pending: the CLI's progress file and the run's log say 4."""
    import json

    from assets.progress import PROGRESS_TAG

    progress = tmp_path / "progress.json"
    result = dg.materialize(
        [labels],
        instance=instance,
        tags={PROGRESS_TAG: str(progress), **ALL_SHARDS_TAGS},
        run_config={"ops": {"labels": {"config": {"max_positions": 4}}}},
        resources={"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=1)},
    )
    assert result.success
    assert json.loads(progress.read_text()) == {"done": 4, "failed": 0, "total": 4}
    logs = [e.user_message for e in instance.all_logs(result.run_id) if " of " in (e.user_message or "")]
    assert any(m.startswith("4 of 4 positions") for m in logs), logs


def test_a_hash_kept_run_reports_its_own_setting_not_the_reproducible_one(instance, store, stockfish):
    result = dg.materialize(
        [labels],
        instance=instance,
        tags=ALL_SHARDS_TAGS,
        run_config={"ops": {"labels": {"config": {}}}},
        resources={
            "store": StoreResource(root=str(store.root)),
            "stockfish": StockfishResource(workers=1, clear_hash=False),
        },
    )
    assert result.success
    meta = result.get_asset_materialization_events()[0].materialization.metadata
    assert meta["path"].value.endswith("_hash-kept")
    coverage = {c.check_name: c for c in result.get_asset_check_evaluations()}["coverage"]
    assert coverage.passed and coverage.metadata["labelled"].value == DISTINCT
