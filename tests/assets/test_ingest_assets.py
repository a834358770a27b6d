"""The ingest assets through a real Dagster instance, on real FICS archives."""

import hashlib
import io

import chess.pgn
import dagster as dg
import duckdb
import pytest

from assets.ingest import archive_tables, duckdb_views
from assets.partitions import archives_partitions
from assets.resources import StoreResource
from assets.sensors import archives_sensor
from cli import failure_message
from pipeline.ingest.archive import open_archive
from pipeline.ingest.ingest import TABLES
from pipeline.store.store import Store
from tests.stores import materialize_archive


@pytest.fixture
def store(tmp_path):
    return Store(tmp_path / "store").ensure()


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_materialize_partition_reconciles_and_is_reproducible(instance, store, fics_2022):
    key = store.add_archive(fics_2022)
    result = materialize_archive(instance, store, key)
    assert result.success
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks["reconciles_with_file"].passed and checks["one_position_per_ply"].passed
    games_meta = next(
        m.metadata
        for m in result.asset_materializations_for_node("archive_tables")
        if m.asset_key == dg.AssetKey("games")
    )
    for chart in ("game_lengths", "ratings"):
        assert games_meta[chart].value.startswith("![") and "data:image/png;base64," in games_meta[chart].value
    # The ratings chart counts each player once, by name, as python-chess reads the headers
    # (not the 4,458 rating tags).
    players, rated = set(), set()
    with open_archive(fics_2022) as raw:
        text = io.TextIOWrapper(raw, encoding="utf-8")
        while (headers := chess.pgn.read_headers(text)) is not None:
            for side in ("White", "Black"):
                players.add(headers[side])
                if headers.get(f"{side}Elo", "").isdigit():
                    rated.add(headers[side])
    assert games_meta["players"].value == len(players) == 238
    assert games_meta["rated_players"].value == len(rated)
    files = {t: store.partition_file(t, key) for t in TABLES}
    first = {t: _digest(p) for t, p in files.items()}
    # The shared data's README (../shared/data/README.md) for this file: 2229 games, none rejected, 166,803 plies.
    dg.materialize([duckdb_views], instance=instance, resources={"store": StoreResource(root=str(store.root))})
    with duckdb.connect(str(store.duckdb_path), read_only=True) as con:
        assert con.sql("SELECT games, rejected, plies, positions FROM archive_summary").fetchall() == [
            (2229, 0, 166803, 166803 + 2229)
        ]
        # The FICS game whose Result tag disagrees with its movetext is kept and flagged.
        row = con.sql("SELECT result, result_movetext, outcome FROM games WHERE result_mismatch").fetchall()
        assert row == [("1/2-1/2", "0-1", "0-1")]
        assert con.sql("SELECT DISTINCT source FROM games").fetchall() == [("fics",)]
    # Re-materialising gives byte-identical files, whatever the number of workers (the first
    # run used one per core, this one parses in the run's own process).
    assert materialize_archive(
        instance, store, key, run_config={"ops": {"archive_tables": {"config": {"workers": 1}}}}
    ).success
    assert {t: _digest(p) for t, p in files.items()} == first


def test_broken_archive_fails_only_its_partition(instance, store, fics_search, tmp_path):
    good = store.add_archive(fics_search)
    assert materialize_archive(instance, store, good).success
    before = {t: _digest(store.partition_file(t, good)) for t in TABLES}
    data = fics_search.read_bytes()
    bad_file = tmp_path / "broken.pgn.zst"
    bad_file.write_bytes(data[: len(data) // 2])
    bad = store.add_archive(bad_file)
    result = materialize_archive(instance, store, bad, raise_on_error=False)
    assert not result.success
    assert "zstd stream is truncated" in failure_message(result)
    for t in TABLES:  # no half-written files, and no empty partition folders either
        assert not store.partition_dir(t, bad).exists(), t
    assert {t: _digest(store.partition_file(t, good)) for t in TABLES} == before


def test_sensor_adds_new_archive_as_partition_and_requests_its_run(instance, store, fics_search, tmp_path):
    resources = {"store": StoreResource(root=str(store.root))}
    ctx = dg.build_sensor_context(instance=instance, resources=resources)
    first = archives_sensor(ctx)
    assert not first.run_requests
    # Dropping a file into the archives folder is how users backfill.
    dropped = store.archives_dir / "new-month.pgn.zst"
    dropped.write_bytes(fics_search.read_bytes())
    ctx = dg.build_sensor_context(instance=instance, resources=resources, cursor=first.cursor)
    result = archives_sensor(ctx)
    assert [r.partition_key for r in result.run_requests] == ["new-month.pgn.zst"]
    assert result.dynamic_partitions_requests[0].partition_keys == ["new-month.pgn.zst"]
    instance.add_dynamic_partitions(archives_partitions.name, ["new-month.pgn.zst"])
    # Next tick: nothing new, nothing requested.
    ctx = dg.build_sensor_context(instance=instance, resources=resources, cursor=result.cursor)
    again = archives_sensor(ctx)
    assert not again.run_requests and not again.dynamic_partitions_requests
    # The requested run ingests the partition.
    assert dg.materialize(
        [archive_tables], partition_key="new-month.pgn.zst", instance=instance, resources=resources
    ).success
    assert store.partition_file("games", "new-month.pgn.zst").exists()


def _tick(instance, store, cursor=None):
    ctx = dg.build_sensor_context(
        instance=instance, resources={"store": StoreResource(root=str(store.root))}, cursor=cursor
    )
    result = archives_sensor(ctx)
    for req in result.dynamic_partitions_requests:
        instance.add_dynamic_partitions(archives_partitions.name, list(req.partition_keys))
    return result


def test_sensor_knows_archives_by_content(instance, store, fics_search, tmp_path):
    data = fics_search.read_bytes()
    (store.archives_dir / "month.pgn.zst").write_bytes(data)
    first = _tick(instance, store)
    assert [r.partition_key for r in first.run_requests] == ["month.pgn.zst"]
    # Re-added with the same bytes (a new modification time), and the same bytes under
    # another name: both known, nothing to run.
    (store.archives_dir / "month.pgn.zst").unlink()
    (store.archives_dir / "month.pgn.zst").write_bytes(data)
    (store.archives_dir / "copy-of-month.pgn.zst").write_bytes(data)
    second = _tick(instance, store, first.cursor)
    assert not second.run_requests and not second.dynamic_partitions_requests
    # A changed file under the same name: the same partition, run again.
    (store.archives_dir / "copy-of-month.pgn.zst").unlink()
    (store.archives_dir / "month.pgn.zst").write_bytes(data[:-1000] + data[-1000:][::-1])
    third = _tick(instance, store, second.cursor)
    assert [r.partition_key for r in third.run_requests] == ["month.pgn.zst"]
    assert not third.dynamic_partitions_requests


def test_sensor_with_a_symlink_loop_requests_one_run_per_file(instance, store, fics_search):
    (store.archives_dir / "month.pgn.zst").write_bytes(fics_search.read_bytes())
    (store.archives_dir / "loop").symlink_to(".")  # (two loops: see tests/pipeline/test_store.py)
    result = _tick(instance, store)
    assert [r.partition_key for r in result.run_requests] == ["month.pgn.zst"]
