"""New archives dropped into the archives folder become partitions and runs."""

import json

import dagster as dg

from assets.ingest import ingest_job
from assets.partitions import archives_partitions
from assets.resources import StoreResource
from pipeline.store.storage import mtime_ns

DUPLICATES = "~duplicates"
"""Cursor entry listing the duplicate files already logged (no partition key starts with ~)."""


SENSOR_HASH_BUDGET_S = 20.0
"""Hashing new archives in one tick stops starting new files after this long (Dagster gives a
sensor tick 60 s); the rest are hashed by the next ticks."""


@dg.sensor(
    job=ingest_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds each new (or changed) archive in the archives folder as a partition and requests its run. "
    "Archives are told apart by content: a file with the bytes of a known archive is that archive.",
)
def archives_sensor(context: dg.SensorEvaluationContext, store: StoreResource) -> dg.SensorResult:
    st = store.get()
    # The cursor holds each partition's content hash; a cursor from before hashes (size:mtime)
    # counts as unknown, so its partitions are recorded, not re-run.
    seen: dict = json.loads(context.cursor) if context.cursor else {}
    scan = st.scan_archives(hash_budget_s=SENSOR_HASH_BUDGET_S)
    if scan.unhashed:
        context.log.info(f"{scan.unhashed} new or changed archive(s) not hashed yet: the next tick goes on")
    told = set(seen.get(DUPLICATES, []))
    for path, key in sorted(scan.duplicates.items()):
        if str(path) not in told:  # said once, not every tick
            context.log.info(f"{path} has the same content as archive {key}: not a new partition")
    for path in scan.dangling:
        context.log.warning(f"{path} is a link to a missing file: skipped")
    existing = set(context.instance.get_dynamic_partitions(archives_partitions.name))
    current = scan.hashes
    new_keys = sorted(k for k in current if k not in existing)
    changed = sorted(
        k for k, digest in current.items() if k in existing and ":" not in seen.get(k, ":") and seen[k] != digest
    )
    # The modification time in the run key lets content that changes back (A, B, A) run again.
    run_requests = [
        dg.RunRequest(run_key=f"{k}:{current[k][:16]}:{_mtime_ns(scan.archives[k])}", partition_key=k)
        for k in new_keys + changed
    ]
    # Partitions that exist but were never seen by this cursor (e.g. added by the CLI) are
    # only recorded, not re-run.
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[archives_partitions.build_add_request(new_keys)] if new_keys else [],
        # Keys this tick did not get to (hash budget) keep what the cursor knew of them.
        cursor=json.dumps(
            {
                **{k: v for k, v in seen.items() if k != DUPLICATES and k not in current},
                **current,
                DUPLICATES: sorted(map(str, scan.duplicates)),
            },
            sort_keys=True,
        ),
    )


def _mtime_ns(path) -> int:
    try:
        return mtime_ns(path)  # a file, or an S3 store's object
    except OSError:
        return 0
