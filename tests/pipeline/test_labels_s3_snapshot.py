"""A label run on an S3 store reads the store once for the pending positions of all its shards
(one query over s3fs, not one per shard: each such query lists and opens every file again), and
still labels each position once: a shard that another worker labelled after that read is
queried again under its lease. Against moto's S3 server on loopback (tests/pipeline/test_storage_s3.py)."""

from __future__ import annotations

import json
from contextlib import contextmanager

import pytest
import s3fs

import pipeline.labels.labels as labels_module
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import SHARDS, LabelRun, Setting
from pipeline.labels.shards import shard_lock
from pipeline.labels.uci import Limit
from pipeline.store import storage, storage_leases, storage_paths
from pipeline.store.duck import memory_connection, query
from pipeline.store.store import Store
from tests.pipeline.test_storage_s3 import bucket, endpoint  # noqa: F401  (fixtures)
from tests.stores import add_pgn

pytestmark = pytest.mark.slow  # an S3 server of its own, and Stockfish

GAMES = (
    '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 *\n\n'
    '[Event "z"]\n[Result "*"]\n\n1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7 5. e3 O-O *\n'
)
DEPTH1 = Limit("depth", 1)


def _labels(store: Store) -> tuple[int, int, int]:
    """(labels, distinct positions labelled, distinct positions in the store) by SQL."""
    sql = "SELECT count(*) AS n, count(DISTINCT (position_key, planes, side_to_move, castling, ep_square)) AS d"
    [row] = query(store, f"{sql} FROM labels").to_pylist()
    [positions] = query(store, "SELECT count(*) AS n FROM distinct_positions").to_pylist()
    return row["n"], row["d"], positions["n"]


def test_a_label_run_reads_the_positions_once_for_every_shard(bucket, stockfish, tmp_path, monkeypatch):  # noqa: F811
    store = Store(f"s3://{bucket}/p").ensure()
    add_pgn(store, tmp_path, "games.pgn", GAMES)
    opened: list[str] = []
    real_open = s3fs.S3FileSystem._open

    def counting_open(self, path, *args, **kwargs):
        opened.append(str(path))
        return real_open(self, path, *args, **kwargs)

    with monkeypatch.context() as m, EnginePool(stockfish, workers=1) as pool:
        m.setattr(s3fs.S3FileSystem, "_open", counting_open)
        stats = label_store(store, pool, LabelRun(limit=DEPTH1))
    positions = [p for p in opened if "/positions/archive=" in p]
    # s3fs opens the file a few times per query (binding the views, then reading). Before: the
    # pending query once per shard plus the count beside them, 105 opens; now 9, fewer than one a shard.
    assert 0 < len(positions) < SHARDS, positions
    assert stats.shards_done == list(range(SHARDS)) and stats.labelled == stats.pending_before > 20
    rows, labelled, distinct = _labels(store)
    assert rows == labelled == distinct == stats.labelled  # every position once


def test_a_shard_labelled_by_another_worker_after_the_read_is_not_labelled_twice(
    bucket,  # noqa: F811
    stockfish,
    tmp_path,
    monkeypatch,
):
    store = Store(f"s3://{bucket}/p").ensure()
    add_pgn(store, tmp_path, "games.pgn", GAMES)
    with memory_connection(store) as con:
        shards = [
            r[0] for r in con.sql(f"SELECT DISTINCT position_key % {SHARDS} FROM positions ORDER BY 1").fetchall()
        ]
    taken = shards[len(shards) // 2]  # a shard the run reaches after its one read of the store
    real_lock = labels_module.shard_lock
    other = []
    started = []

    @contextmanager
    def other_worker_first(st, setting, shard, ttl_s):
        if shard == taken and not started:  # another worker labels this shard in between
            started.append(shard)  # (its own run takes the shard through this lock too)
            with EnginePool(stockfish, workers=1) as pool2:
                other.append(label_store(st, pool2, LabelRun(limit=DEPTH1, shards=(taken,))))
        with real_lock(st, setting, shard, ttl_s) as lease:
            yield lease

    monkeypatch.setattr(labels_module, "shard_lock", other_worker_first)
    with EnginePool(stockfish, workers=1) as pool:
        stats = label_store(store, pool, LabelRun(limit=DEPTH1))
    [theirs] = other
    assert theirs.labelled > 0 and theirs.shards_done == [taken]
    assert stats.pending_before == stats.labelled + theirs.labelled  # the read counted that shard too
    rows, labelled, distinct = _labels(store)
    assert rows == labelled == distinct == stats.labelled + theirs.labelled  # none twice, none missed


def test_a_shard_lease_object_lasts_the_time_the_run_gave_it(bucket):  # noqa: F811
    """shard_lock's ttl_s (a run's LabelRun.shard_lease_ttl_s) is the lease object's, which is what
    a contender counts the dead holder's expiry from."""
    store = Store(f"s3://{bucket}/p").ensure()
    setting = Setting("Stockfish 15.1", DEPTH1)
    with shard_lock(store, setting, 5, 12.0) as held:
        assert held
        [obj] = storage.list_objects(store.root / storage_leases.LEASES)
        fetched = storage.get(storage_paths.ObjectPath(store.root.bucket, obj["Key"]))
        assert json.loads(fetched.data)["ttl_s"] == 12.0 and "shard-05" in obj["Key"]
        with shard_lock(store, setting, 5, 12.0) as other:
            assert not other  # held and renewed: nobody else gets it
    assert list(storage.list_objects(store.root / storage_leases.LEASES)) == []  # released
