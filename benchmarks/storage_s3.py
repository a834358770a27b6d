"""A store on S3 against a local store, in the same process: ingest, queries and labels.

    .venv/bin/python benchmarks/storage_s3.py [--archive PATH] [--games 10] [--depth 4]

Starts moto's S3 server on loopback (deploy.servers.moto_s3), then for a local store (the
baseline) and an S3 store: adds and ingests one real archive (one worker), runs
`count(*) FROM positions` twice (the first builds the DuckDB file and the schema files), and
labels the distinct positions of the archive's first `--games` games at `--depth` with two
engines, then runs the labelling again with nothing left to label (the run's fixed cost:
finding the pending positions of 16 shards and taking each shard's lock). Prints the seconds
of each and the S3/local ratio. moto is a single-threaded Python server: the ratios bound from
above what a real S3 endpoint's latency adds per request.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from deploy.servers import moto_s3  # noqa: E402

DEFAULT_ARCHIVE = ROOT.parent / "shared" / "data" / "pgn" / "ficsgamesdb_202201_standard2000_nomovetimes_263567.pgn.zst"


def run(store, archive: Path, pgn: Path, depth: int) -> dict[str, float]:
    from pipeline.ingest.ingest import IngestConfig, ingest_archive
    from pipeline.labels.labels import label_store
    from pipeline.labels.pool import EnginePool
    from pipeline.labels.setting import LabelRun
    from pipeline.labels.uci import Limit, find_stockfish
    from pipeline.store.duck import query

    out = {}
    t = time.perf_counter()
    key = store.add_archive(archive, copy=True)
    with store.local_archive(key) as path:
        ingest_archive(store, key, path, IngestConfig(workers=1))
    out["add + ingest"] = time.perf_counter() - t
    for name in ("first query", "query again"):
        t = time.perf_counter()
        query(store, "SELECT count(*) FROM positions")
        out[name] = time.perf_counter() - t
    key = store.add_archive(pgn)
    with store.local_archive(key) as path:
        ingest_archive(store, key, path, IngestConfig(workers=1))
    with EnginePool(find_stockfish(), workers=2) as pool:
        t = time.perf_counter()
        stats = label_store(store, pool, LabelRun(limit=Limit("depth", depth), archives=(key,)))
        out[f"label {stats.labelled} positions"] = time.perf_counter() - t
        t = time.perf_counter()  # nothing left: the run's fixed cost (its queries, 16 shard locks)
        stats = label_store(store, pool, LabelRun(limit=Limit("depth", depth), archives=(key,)))
        assert stats.labelled == 0, stats
        out["label again, none pending"] = time.perf_counter() - t
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archive", type=Path, default=DEFAULT_ARCHIVE)
    p.add_argument("--games", type=int, default=10)
    p.add_argument("--depth", type=int, default=4)
    args = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-s3-") as tmp, moto_s3() as url:
        os.environ.update(
            AWS_ACCESS_KEY_ID="bench",
            AWS_SECRET_ACCESS_KEY="bench",
            AWS_DEFAULT_REGION="us-east-1",
            CHESS_PIPELINE_S3_ENDPOINT=url,
            CHESS_PIPELINE_CACHE=str(Path(tmp) / "cache"),
        )
        from pipeline.store import storage
        from pipeline.store.store import Store
        from tests.stores import first_games

        storage.client().create_bucket(Bucket="bench-store")
        pgn = Path(tmp) / "sample.pgn"
        first_games(args.archive, args.games, pgn)
        local = run(Store(Path(tmp) / "local").ensure(), args.archive, pgn, args.depth)
        s3 = run(Store("s3://bench-store/p").ensure(), args.archive, pgn, args.depth)
    print(f"{'step':28s} {'local s':>8s} {'S3 s':>8s} {'S3/local':>9s}")
    for (name, a), b in zip(local.items(), s3.values()):
        print(f"{name:28s} {a:8.2f} {b:8.2f} {b / a:8.1f}x")


if __name__ == "__main__":
    main()
