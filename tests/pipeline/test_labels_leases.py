"""A run that loses its shard's lease (an S3 store's lease whose renewal failed, so another worker
may have taken the shard over) writes no further part: the labels in hand are dropped, the run
stops with LeaseLost, and the shard's next holder labels those positions once. The lease time is
a run setting (LabelRun.shard_lease_ttl_s, the labels asset's `shard_lease_ttl_s`), checked where
it enters."""

from contextlib import contextmanager

import pytest

import pipeline.labels.labels as labels_module
from pipeline.labels.labels import label_store
from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import SHARD_LEASE_TTL_S, LabelRun, Setting
from pipeline.labels.shards import coverage, integrity
from pipeline.labels.uci import Limit
from pipeline.store.storage_leases import Lease, LeaseLost
from pipeline.store.store import Store
from tests.stores import add_pgn

GAMES = (
    '[Event "x"]\n[Result "*"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 *\n\n'
    '[Event "z"]\n[Result "*"]\n\n1. d4 d5 2. c4 e6 3. Nc3 Nf6 4. Bg5 Be7 *\n'
)
DEPTH8 = Setting("Stockfish 15.1", Limit("depth", 8))


def test_a_lost_lease_stops_the_run_before_it_writes_another_part(tmp_path, stockfish, monkeypatch):
    store = Store(tmp_path / "store").ensure()
    add_pgn(store, tmp_path, "games.pgn", GAMES)
    distinct = coverage(store, DEPTH8)["distinct_positions"]
    leases = []
    ttls = set()

    @contextmanager
    def held_lease(store, setting, shard, ttl_s):
        lease = Lease(f"shard-{shard}", True)
        leases.append(lease)
        ttls.add(ttl_s)
        yield lease

    monkeypatch.setattr(labels_module, "shard_lock", held_lease)
    lost_at = []

    def lose_after_four(progress):
        if progress.done >= 4 and leases and not lost_at:
            lost_at.append(progress.done)
            leases[-1]._lost.set()  # what the heartbeat does when another worker took the lease over

    with EnginePool(stockfish, workers=1) as pool, pytest.raises(LeaseLost, match="was lost"):
        label_store(
            store,
            pool,
            LabelRun(flush_positions=2, flush_seconds=3600, shard_lease_ttl_s=15),
            progress=lose_after_four,
            progress_every_s=0.0,
        )
    written = coverage(store, DEPTH8)["labelled"]
    # Parts were written while the lease was held (at most flush_positions - 1 = 1 label was in
    # hand when it was lost, and is dropped); nothing labelled after the loss was written.
    (done,) = lost_at
    assert done - 1 <= written <= done < distinct
    assert ttls == {15}  # every shard lock of the run got the run's lease time
    monkeypatch.undo()
    with EnginePool(stockfish, workers=1) as pool:
        rest = label_store(store, pool, LabelRun())
    assert written + rest.labelled == coverage(store, DEPTH8)["labelled"] == distinct
    assert integrity(store, DEPTH8)["duplicates"] == 0


def test_the_shard_lease_time_is_a_run_setting_checked_where_it_enters():
    from assets.labels import LabelsConfig

    assert LabelRun().shard_lease_ttl_s == SHARD_LEASE_TTL_S == 120.0
    assert LabelRun(shard_lease_ttl_s=10).shard_lease_ttl_s == 10
    # The labels asset's run config carries it (the launchpad field, and what reaches a Celery worker).
    assert LabelsConfig().shard_lease_ttl_s == 120.0
    assert LabelsConfig(shard_lease_ttl_s=20).to_dataclass(LabelRun).shard_lease_ttl_s == 20
    for bad in (9.5, 0, -1, float("nan"), float("inf"), "20"):
        with pytest.raises(ValueError) as e:
            LabelRun(shard_lease_ttl_s=bad)
        msg = str(e.value)
        assert "\n" not in msg and "shard_lease_ttl_s" in msg and "at least 10" in msg and repr(bad) in msg, msg
