"""The labels asset partitioned by position-key shard (issue 15): one run over every partition,
or one run per partition, label the same positions the same way; a partition run twice, or by
two processes at once, labels nothing twice; a process killed mid-partition loses nothing."""

import io
import json
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import chess
import chess.pgn
import chess.polyglot
import dagster as dg
import pytest

from assets.definitions import build_defs
from assets.labels import POOL, budget_shares, label_run_requests, labels
from assets.partitions import (
    ALL_SHARDS_TAGS,
    RANGE_END_TAG,
    RANGE_START_TAG,
    SHARD_KEYS,
    partition_runs,
    shards_of,
)
from assets.resources import StockfishResource, StoreResource
from pipeline.ingest.ingest import IngestConfig, ingest_archive
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import SHARDS, LabelRun, Setting
from pipeline.labels.shards import coverage, integrity, shard_lock
from pipeline.labels.uci import Limit
from pipeline.store.duck import memory_connection
from pipeline.store.store import Store
from tests.stores import first_games, materialize_archive

ROOT = Path(__file__).resolve().parents[2]
DEPTH8 = Setting("Stockfish 15.1", Limit("depth", 8))
GAMES = (
    '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
    '[Event "y"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Bc5 4. c3 Nf6 *\n\n'
    '[Event "z"]\n[Result "*"]\n\n1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7 *\n\n'
    '[Event "w"]\n[Result "0-1"]\n\n1. f3 e5 2. g4 Qh4# 0-1\n'
)
LABEL_COLUMNS = (
    "position_key, planes, side_to_move, castling, ep_square, fen, cp, mate, score, best_move, pv, depth, nodes"
)
"""What a reproducible label says about its position (not when or by which run it was made)."""


def _keys_by_shard(text: str) -> dict[int, set[str]]:
    """Distinct positions of the games by python-chess (EPD), by shard: polyglot key % SHARDS."""
    out: dict[int, set[str]] = {}
    f = io.StringIO(text)
    while (game := chess.pgn.read_game(f)) is not None:
        board = game.board()
        for move in [None, *game.mainline_moves()]:
            if move is not None:
                board.push(move)
            out.setdefault(chess.polyglot.zobrist_hash(board) % SHARDS, set()).add(board.epd())
    return out


def _store(folder: Path, text: str = GAMES) -> Store:
    store = Store(folder / "store").ensure()
    path = folder / "games.pgn"
    path.write_text(text)
    key = store.add_archive(path)
    ingest_archive(store, key, path, IngestConfig(workers=1))
    return store


def _label_rows(store: Store) -> list[tuple]:
    with memory_connection(store) as con:
        return sorted(con.sql(f"SELECT {LABEL_COLUMNS} FROM labels").fetchall())


def _resources(store: Store, **engine) -> dict:
    # timeout_s set: no calibration searches, so a run per partition stays quick on 2 cores.
    return {
        "store": StoreResource(root=str(store.root)),
        "stockfish": StockfishResource(**{"workers": 1, "timeout_s": 20.0, **engine}),
    }


def _materialize(instance, store: Store, **kw) -> tuple[dict, dict]:
    result = dg.materialize([labels], instance=instance, resources=_resources(store), **kw)
    assert result.success
    (mat, *rest) = result.get_asset_materialization_events()
    meta = {k: v.value for k, v in mat.materialization.metadata.items()}
    return meta, {c.check_name: c for c in result.get_asset_check_evaluations()}


# Fast tier: how launchers split the partitions -------------------------------------------------


def test_partition_keys_are_the_shards_and_a_wrong_key_names_the_valid_ones():
    assert SHARD_KEYS == tuple(f"{i:02d}" for i in range(SHARDS)) and len(SHARD_KEYS) == 16
    assert shards_of(["00", "07", "15"]) == (0, 7, 15)
    with pytest.raises(ValueError, match="labels partitions are 00..15, got 16, 3"):
        shards_of(["16", "3"])
    assert ALL_SHARDS_TAGS == {RANGE_START_TAG: "00", RANGE_END_TAG: "15"}


def test_a_backfill_policy_splits_the_shards_into_runs():
    assert partition_runs(dg.BackfillPolicy.single_run()) == [list(SHARD_KEYS)]
    assert partition_runs(dg.BackfillPolicy.multi_run(1)) == [[k] for k in SHARD_KEYS]
    assert partition_runs(dg.BackfillPolicy.multi_run(5)) == [
        list(SHARD_KEYS[0:5]),
        list(SHARD_KEYS[5:10]),
        list(SHARD_KEYS[10:15]),
        ["15"],
    ]


def test_a_positions_budget_is_shared_out_and_never_turns_into_no_bound():
    assert budget_shares(0, 16) == [0] * 16  # no bound stays no bound in every run
    assert budget_shares(100, 16) == [7] * 4 + [6] * 12 and sum(budget_shares(100, 16)) == 100
    shares = budget_shares(5, 16)
    assert sum(shares) == 5 and shares.count(0) == 11
    # A run whose share is 0 is not requested: 0 would mean "no bound" to it.
    requests = label_run_requests(dg.BackfillPolicy.multi_run(1), {"max_positions": 5})
    assert [r.partition_key for r in requests] == ["00", "01", "02", "03", "04"]
    assert all(r.run_config["ops"]["labels"]["config"]["max_positions"] == 1 for r in requests)


def test_the_labels_step_is_in_the_stockfish_pool_in_both_profiles():
    for environ, policy in (({}, None), ({"CHESS_PIPELINE_PROFILE": "cluster"}, 1)):
        asset = build_defs(environ).resolve_assets_def("labels")
        assert asset.op.pool == POOL == "stockfish"
        assert asset.partitions_def.get_partition_keys() == list(SHARD_KEYS)
        assert asset.backfill_policy.max_partitions_per_run == policy


def test_the_cluster_profile_sensor_and_schedule_request_one_run_per_partition(instance, tmp_path, monkeypatch):
    """Under the cluster profile the asset's policy is multi_run(1): the labels_automation sensor
    asks for a run per shard (each with the archives and the minutes budget, the positions budget
    shared out), and so does the nightly schedule."""
    st = Store(tmp_path / "store").ensure()
    monkeypatch.setenv("CHESS_PIPELINE_HOME", str(st.root))
    monkeypatch.setenv("CHESS_PIPELINE_AUTO_LABEL_POSITIONS", "40")
    defs = build_defs({"CHESS_PIPELINE_PROFILE": "cluster", "CHESS_PIPELINE_RELABEL_TZ": "UTC"})
    sensor = defs.resolve_sensor_def("labels_automation")
    first = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=None, definitions=defs))
    path = tmp_path / "new.pgn"
    path.write_text(GAMES)
    key = st.add_archive(path)
    assert materialize_archive(instance, st, key).success
    tick = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=first.cursor, definitions=defs))
    assert [r.partition_key for r in tick.run_requests] == list(SHARD_KEYS)
    assert len({r.run_key for r in tick.run_requests}) == SHARDS
    configs = [r.run_config["ops"]["labels"]["config"] for r in tick.run_requests]
    assert all(c["archives"] == [key] and c["max_minutes"] == 10.0 for c in configs)
    assert sum(c["max_positions"] for c in configs) == 40 and all(c["max_positions"] > 0 for c in configs)

    schedule = defs.resolve_schedule_def("nightly_relabel")
    context = dg.build_schedule_context(
        instance=instance, scheduled_execution_time=datetime(2026, 11, 26, 2, 0, tzinfo=UTC), repository_def=None
    )
    # Without the definitions the schedule falls back to the module's asset: one run.
    (alone,) = schedule.evaluate_tick(context).run_requests
    assert ALL_SHARDS_TAGS.items() <= alone.tags.items()
    with dg.build_schedule_context(
        instance=instance,
        scheduled_execution_time=datetime(2026, 11, 26, 2, 0, tzinfo=UTC),
        repository_def=defs.get_repository_def(),
    ) as context:
        nightly = schedule.evaluate_tick(context).run_requests
    assert [r.partition_key for r in nightly] == list(SHARD_KEYS)
    assert all(r.run_config["ops"]["labels"]["config"]["relabel"] for r in nightly)


# Slow tier: real Stockfish ---------------------------------------------------------------------


def test_a_run_with_no_partition_fails_in_one_line(instance, tmp_path, stockfish):
    store = _store(tmp_path)
    result = dg.materialize([labels], instance=instance, resources=_resources(store), raise_on_error=False)
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.user_failure_data.description
    assert message.startswith("labels is partitioned by position-key shard (00..15): run it for a partition")
    assert _label_rows(store) == []


def test_a_shard_lease_time_below_the_floor_fails_the_run_in_one_line(instance, tmp_path, stockfish):
    store = _store(tmp_path)
    result = dg.materialize(
        [labels],
        instance=instance,
        resources=_resources(store),
        partition_key="00",
        run_config={"ops": {"labels": {"config": {"shard_lease_ttl_s": 5.0}}}},
        raise_on_error=False,
    )
    assert not result.success
    (failure,) = [e for e in result.all_events if e.is_step_failure]
    message = failure.step_failure_data.user_failure_data.description
    assert message == (
        "labels run config: shard_lease_ttl_s must be a number of seconds, at least 10 (default 120), got 5.0"
    )
    assert _label_rows(store) == []


def test_one_run_over_every_partition_and_a_run_per_partition_give_the_unpartitioned_labels(tmp_path, stockfish):
    """The same games in three stores: labelled by the library over every shard at once (what the
    unpartitioned asset ran), by one Dagster run over the partition range 00..15, and by 16 runs
    of one partition each. The same label rows, every distinct position once. Each partition's
    run covers its own shard: its coverage check and counts are that shard's. Each store's runs
    go to an in-memory instance of their own (a SQLite one writes every event of the 19 runs to
    disk: most of this test's time before), so the per-partition runs alone must have
    materialised every partition."""
    by_shard = _keys_by_shard(GAMES)
    distinct = sum(len(v) for v in by_shard.values())

    reference = _store(tmp_path / "reference")
    with EnginePool(stockfish, workers=1) as pool:
        assert label_store(reference, pool, LabelRun()).labelled == distinct
    want = _label_rows(reference)
    assert len(want) == distinct

    single = _store(tmp_path / "single")
    with dg.DagsterInstance.ephemeral() as instance:
        meta, checks = _materialize(instance, single, tags=ALL_SHARDS_TAGS)
    assert meta["labelled"] == meta["distinct_positions"] == distinct and meta["shards"] == "00..15"
    assert all(c.passed for c in checks.values())
    assert _label_rows(single) == want

    per_partition = _store(tmp_path / "per_partition")
    with dg.DagsterInstance.ephemeral() as instance:
        for key in SHARD_KEYS:
            meta, checks = _materialize(instance, per_partition, partition_key=key)
            shard = len(by_shard.get(int(key), ()))
            assert (meta["labelled"], meta["distinct_positions"], meta["shards"]) == (shard, shard, key)
            assert checks["coverage"].passed and checks["coverage"].metadata["labelled"].value == shard
            assert checks["no_duplicate_labels"].passed
        assert _label_rows(per_partition) == want

        # The partitions' materialisations are Dagster's: every shard of the store is materialised.
        materialized = instance.get_materialized_partitions(dg.AssetKey("labels"))
        assert materialized == set(SHARD_KEYS)

        # Run again, a partition labels nothing: everything in it is labelled.
        busiest = max(by_shard, key=lambda s: len(by_shard[s]))
        meta, _ = _materialize(instance, per_partition, partition_key=SHARD_KEYS[busiest])
    assert meta["labelled"] == 0 and meta["failed"] == 0
    assert integrity(per_partition, DEPTH8)["duplicates"] == 0


def test_a_partition_held_by_another_worker_is_skipped_not_labelled_twice(instance, tmp_path, stockfish):
    store = _store(tmp_path)
    by_shard = _keys_by_shard(GAMES)
    busiest = max(by_shard, key=lambda s: len(by_shard[s]))
    key = SHARD_KEYS[busiest]
    with shard_lock(store, DEPTH8, busiest) as held:
        assert held
        meta, checks = _materialize(instance, store, partition_key=key)
    assert meta["labelled"] == 0 and meta["shards_busy"] == key
    assert not checks["coverage"].passed  # said, as a WARN: the shard is not labelled yet
    meta, checks = _materialize(instance, store, partition_key=key)
    assert meta["labelled"] == len(by_shard[busiest]) and meta["shards_busy"] == "none"
    assert checks["coverage"].passed


PARTITION_SCRIPT = """
import dataclasses, json, sys
import dagster as dg
import assets.labels as A
from assets.resources import StockfishResource, StoreResource

root, key, flush = sys.argv[1], sys.argv[2], int(sys.argv[3])
label_store = A.label_store
# Parts every `flush` labels (the default, 5,000, is more than a test shard holds).
A.label_store = lambda st, pool, run, *a, **k: label_store(
    st, pool, dataclasses.replace(run, flush_positions=flush), *a, **k
)
result = dg.materialize(
    [A.labels],
    partition_key=key,
    instance=dg.DagsterInstance.ephemeral(),
    resources={"store": StoreResource(root=root), "stockfish": StockfishResource(workers=1, timeout_s=20.0)},
)
meta = result.get_asset_materialization_events()[0].materialization.metadata
print(json.dumps({"labelled": meta["labelled"].value, "busy": meta["shards_busy"].value}))
"""


def _spawn_partition(store: Store, key: str, flush: int) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", PARTITION_SCRIPT, str(store.root), key, str(flush)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


@pytest.fixture
def real_store(tmp_path, fics_search):
    """The first 20 games of a real FICS archive: about 50 distinct positions a shard."""
    store = Store(tmp_path / "store").ensure()
    path = tmp_path / "real.pgn"
    first_games(fics_search, 20, path)
    key = store.add_archive(path)
    ingest_archive(store, key, path, IngestConfig(workers=1))
    return store


def _busiest_shard(store: Store) -> tuple[int, int]:
    """The shard with the most distinct positions, and how many it has."""
    with memory_connection(store) as con:
        return con.sql(
            f"SELECT position_key % {SHARDS} AS s, count(*) AS n FROM distinct_positions GROUP BY 1 ORDER BY 2 DESC, 1 "
            "LIMIT 1"
        ).fetchall()[0]


def test_two_processes_running_one_partition_at_once_label_each_position_once(real_store, stockfish):
    shard, distinct = _busiest_shard(real_store)
    runs = [_spawn_partition(real_store, SHARD_KEYS[shard], 1000) for _ in range(2)]
    out = [json.loads(p.communicate(timeout=300)[0]) for p in runs]
    assert all(p.returncode == 0 for p in runs)
    # One run took the shard and labelled all of it; the other found it taken (or done).
    assert sorted(o["labelled"] for o in out) == [0, distinct]
    cov = coverage(real_store, DEPTH8, [shard])
    assert cov["labelled"] == cov["distinct_positions"] == distinct
    assert integrity(real_store, DEPTH8, shards=[shard])["rows"] == distinct
    assert integrity(real_store, DEPTH8)["duplicates"] == 0
    assert coverage(real_store, DEPTH8)["labelled"] == distinct  # no other shard was touched


def test_a_partition_run_killed_mid_shard_then_run_again_loses_and_repeats_nothing(real_store, stockfish, instance):
    shard, distinct = _busiest_shard(real_store)
    parts = real_store.root / "labels" / DEPTH8.slug
    proc = _spawn_partition(real_store, SHARD_KEYS[shard], 8)
    deadline = time.monotonic() + 180
    while len(list(parts.glob("part-*.parquet"))) < 2:
        assert time.monotonic() < deadline and proc.poll() is None, "the run ended before it could be killed"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = coverage(real_store, DEPTH8, [shard])["labelled"]
    assert 0 < before < distinct, "killed mid-shard: some labels written, some not"
    # The kill freed the shard at once (flock): the next run takes it and labels the rest.
    meta, checks = _materialize(instance, real_store, partition_key=SHARD_KEYS[shard])
    assert meta["labelled"] == distinct - before and meta["shards_busy"] == "none"
    assert checks["coverage"].passed and checks["no_duplicate_labels"].passed
    cov = coverage(real_store, DEPTH8, [shard])
    assert cov["labelled"] == cov["distinct_positions"] == distinct
    assert integrity(real_store, DEPTH8)["duplicates"] == 0
    assert integrity(real_store, DEPTH8)["rows"] == distinct


def _blocked_on_pool(instance) -> bool:
    """Whether the instance's one run logged Dagster's "Step blocked by limit for pool stockfish"."""
    records = instance.get_run_records()
    if not records:
        return False
    logs = instance.all_logs(records[0].dagster_run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
    return any(f"blocked by limit for pool {POOL}" in (e.message or "") for e in logs)


def test_the_stockfish_pool_limit_holds_a_labels_step_until_a_slot_is_free(tmp_path, stockfish):
    """A pool limit of 1 with its slot taken by another run: the labels step waits (no engine
    started, nothing labelled), and runs once the slot is freed."""
    import threading

    store = _store(tmp_path)
    with dg.instance_for_test() as instance:
        events = instance.event_log_storage
        events.set_concurrency_slots(POOL, 1)
        assert events.claim_concurrency_slot(POOL, "another-run", "labels").is_claimed
        out = []
        run = threading.Thread(
            target=lambda: out.append(_materialize(instance, store, partition_key="00")), daemon=True
        )
        run.start()
        # Until Dagster says the step is blocked on the pool (polled, not a fixed sleep): then it
        # has asked for the slot and been refused, and must hold until the slot is freed.
        deadline = time.monotonic() + 120
        while not _blocked_on_pool(instance) and run.is_alive() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _blocked_on_pool(instance), "the labels step was never blocked on the pool"
        assert run.is_alive() and _label_rows(store) == []
        (waiting,) = instance.get_run_records()
        assert waiting.dagster_run.status == dg.DagsterRunStatus.STARTED
        events.free_concurrency_slots_for_run("another-run")
        run.join(timeout=180)
        assert not run.is_alive()
        (meta, checks) = out[0]
        assert checks["coverage"].passed and meta["shards"] == "00"


def test_pin_cores_on_the_stockfish_resource_pins_the_runs_engines(instance, tmp_path, stockfish, monkeypatch):
    import pipeline.labels.engine as engine

    cores = engine.usable_cores()
    if len(cores) < 2:
        pytest.skip(f"pinning two engines needs two usable cores, this process has {cores}")
    monkeypatch.setattr(engine, "CORE_CLAIMS", tmp_path / "cores")
    store = _store(tmp_path)
    result = dg.materialize(
        [labels],
        instance=instance,
        tags=ALL_SHARDS_TAGS,
        resources=_resources(store, workers=2, pin_cores=True),
    )
    assert result.success
    logs = [e.user_message for e in instance.all_logs(result.run_id) if "labelling shard(s)" in (e.user_message or "")]
    assert len(logs) == 1 and f"on 2 engine(s) pinned to cores {cores[0]}, {cores[1]}, new positions" in logs[0]
