"""TD self-play on a store on S3 (moto's server mode on loopback, as in
tests/pipeline/test_storage_s3.py): a generation's games are an object of the store's archives
that ingest puts into `games`, its checkpoint an object of the store's selfplay/ prefix; the
line resumes from that checkpoint and td_evaluation reads it back."""

from __future__ import annotations

import dagster as dg
import pytest

from pipeline.store import duck, storage
from pipeline.store.store import Store
from tests.pipeline.test_storage_s3 import bucket, endpoint, keys  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slow  # an S3 server of its own

TINY = dict(name="s3line", depth=1, games=2, max_plies=16, curve_games=0, workers=1, seed=5)


def test_a_selfplay_generation_on_s3_lands_in_the_store_and_resumes(bucket, tmp_path):  # noqa: F811
    from assets.resources import StoreResource
    from assets.selfplay import TDEvaluationConfig, TDSelfPlayConfig, td_evaluation, td_selfplay
    from tests.stores import materialize_archive

    root = f"s3://{bucket}/stores/sp"
    store = Store(root).ensure()
    instance = dg.DagsterInstance.ephemeral()
    resources = {"store": StoreResource(root=root)}

    def run(selection, ops):
        return dg.materialize(
            [td_selfplay, td_evaluation],
            selection=selection,
            instance=instance,
            resources=resources,
            run_config=dg.RunConfig(ops=ops),
        )

    first = run(["td_selfplay"], {"td_selfplay": TDSelfPlayConfig(**TINY)})
    assert first.success
    meta = first.asset_materializations_for_node("td_selfplay")[0].metadata
    (key,) = meta["archives"].value
    names = keys(bucket, "stores/sp")
    assert "stores/sp/archives/selfplay/s3line/gen-0001.pgn" in names
    assert meta["checkpoint"].value == f"s3://{bucket}/stores/sp/selfplay/s3line/gen-0001.pt"
    assert "stores/sp/selfplay/s3line/gen-0001.pt" in names
    assert not [n for n in names if n.endswith(".tmp")]
    assert not (store.local_dir / "archives").exists() and not (store.local_dir / "selfplay").exists()

    # The archive goes through the normal ingest: its two games are in `games` as source selfplay.
    assert key in store.find_archives()
    assert materialize_archive(instance, store, key).success
    duck.create_views(store)
    rows = duck.query(store, "SELECT source, count(*) AS n FROM games GROUP BY source").to_pylist()
    assert rows == [{"source": "selfplay", "n": 2}]

    # The same line again continues after generation 1, from the checkpoint on S3.
    second = run(["td_selfplay"], {"td_selfplay": TDSelfPlayConfig(**TINY)})
    assert second.success
    meta2 = second.asset_materializations_for_node("td_selfplay")[0].metadata
    assert meta2["generation"].value == 2
    assert storage.exists(storage.parse_root(f"s3://{bucket}/stores/sp/archives/selfplay/s3line/gen-0002.pgn"))

    # td_evaluation finds the line's checkpoint on S3 and plays it.
    ev = TDEvaluationConfig(line="s3line", batches=1, batch_games=2, openings=0, workers=1)
    evaluated = run(["td_evaluation"], {"td_evaluation": ev})
    assert evaluated.success
    em = evaluated.asset_materializations_for_node("td_evaluation")[0].metadata
    assert em["checkpoint"].value == meta2["checkpoint"].value and em["games"].value == 2


def test_a_generation_on_s3_never_replaces_an_archive_another_run_wrote_meanwhile(bucket):  # noqa: F811
    # As on a local store (tests/training/test_td.py): the other run's gen-0001.pgn, registered
    # while this run plays generation 1, keeps its bytes; this run's games get a numbered name.
    import hashlib

    from training.td.config import TDConfig
    from training.td.play import play_line

    store = Store(f"s3://{bucket}/stores/race").ensure()
    theirs = store.archives_dir / "selfplay" / "race" / "gen-0001.pgn"
    other = b'[Event "the other run"]\n[Result "*"]\n\n*\n'

    def other_run_writes():
        if storage.head(theirs) is None:
            with storage.atomic_upload(theirs, metadata={"sha256": hashlib.sha256(other).hexdigest()}) as tmp:
                tmp.write_bytes(other)
            store.scan_archives()

    cfg = TDConfig(**{**TINY, "name": "race", "generations": 1})
    line = play_line(store, cfg, on_game=other_run_writes, log=lambda s: None)
    assert storage.read_bytes(theirs) == other
    (mine,) = line.archives
    assert mine.name == "gen-0001-1.pgn" and storage.read_bytes(mine) != other
    found = store.find_archives()
    assert found[line.history[-1]["archive"]] == mine and theirs in found.values()
