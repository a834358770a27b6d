"""The labels asset, its checks and the nightly re-labelling schedule, in a real Dagster instance."""

from datetime import UTC, datetime

import dagster as dg
import pytest

from assets.definitions import build_defs
from assets.labels import labels
from assets.partitions import ALL_SHARDS_TAGS
from assets.resources import StockfishResource, StoreResource
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
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


def _fen_after(moves: str) -> str:
    """The FEN the engine pool is sent for the position after these moves (clocks 0 1, as stored)."""
    import chess

    board = chess.Board()
    for san in moves.split():
        board.push_san(san)
    return " ".join(board.fen().split()[:4] + ["0", "1"])


def test_a_retry_that_succeeds_is_counted_in_the_metadata_the_log_and_the_cli_line(
    instance, store, stockfish, tmp_path
):
    """The engine crashes once on a chosen position: its label is stored, and the run's metadata,
    its log line, the coverage check and `chess-pipeline label`'s line say 1 retry, 1 restart."""
    from assets.labels import LabelsConfig
    from cli.label import label
    from tests.engines import search_fault_stockfish

    chosen = _fen_after("e4 e5 Nf3 Nc6 Bb5")
    path = search_fault_stockfish(tmp_path, stockfish, chosen, "crash")
    result = label(store, instance, LabelsConfig(), StockfishResource(path=path, workers=1))
    assert (tmp_path / f"{path}.faults").read_text().splitlines() == ["crash"]
    m = result.metadata
    assert (m.labelled, m.failed, m.retried, m.engine_restarts) == (DISTINCT, 0, 1, 1)
    assert f"{DISTINCT} labelled, 0 failed, 1 retried (1 engine restart) in " in result.line()
    (run,) = instance.get_run_records()
    logs = [e.user_message or "" for e in instance.all_logs(run.dagster_run.run_id)]
    assert any(f"{DISTINCT} labelled, 0 failed, 1 retried (1 engine restart) in " in line for line in logs), logs
    coverage = next(
        e.asset_check_evaluation
        for e in instance.all_logs(run.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION)
        if e.asset_check_evaluation.check_name == "coverage"
    )
    assert coverage.metadata["retried_this_run"].value == 1
    with memory_connection(store) as con:
        assert con.execute("SELECT count(*) FROM labels WHERE fen = ?", [chosen]).fetchall() == [(1,)]


def test_a_calibration_reply_without_bestmove_leaves_the_run_a_measured_timeout(instance, store, stockfish, tmp_path):
    """A calibration search answered with a junk line instead of `bestmove`: the run labels with a
    timeout measured from the other calibration searches (a depth-8 search takes milliseconds: the
    2 s floor, unless the machine is loaded), not the calibration's own 60 s, and its log says why
    one was passed over."""
    from pipeline.labels.calibration import CALIBRATION_FENS, CALIBRATION_TIMEOUT_S, TIMEOUT_FLOOR_S
    from tests.engines import search_fault_stockfish

    path = search_fault_stockfish(tmp_path, stockfish, CALIBRATION_FENS[1], "nobestmove")
    result = dg.materialize(
        [labels],
        instance=instance,
        tags=ALL_SHARDS_TAGS,
        run_config={"ops": {"labels": {"config": {}}}},
        resources={"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(path=path, workers=1)},
    )
    assert result.success
    meta = {k: v.value for k, v in result.get_asset_materialization_events()[0].materialization.metadata.items()}
    assert TIMEOUT_FLOOR_S <= meta["timeout_s"] < CALIBRATION_TIMEOUT_S / 4 and meta["labelled"] == DISTINCT
    logs = [e.user_message or "" for e in instance.all_logs(result.run_id)]
    assert any(
        f"search timeout {meta['timeout_s']:g}s (20 x the slowest of 3 calibration searches" in line
        and "passed over: malformed reply where `bestmove` was due; its line 'junk instead of bestmove'" in line
        for line in logs
    ), logs
