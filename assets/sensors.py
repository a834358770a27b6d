"""New archives dropped into the archives folder become partitions and runs."""


import json

import dagster as dg

from assets.ingest import ingest_job
from assets.partitions import archives_partitions
from assets.resources import StoreResource


def _signature(path) -> str:
    st = path.stat()
    return f"{st.st_size}:{st.st_mtime_ns}"


@dg.sensor(job=ingest_job, minimum_interval_seconds=30, default_status=dg.DefaultSensorStatus.RUNNING,
           description="Adds each new (or changed) archive in the archives folder as a partition and requests its run.")
def archives_sensor(context: dg.SensorEvaluationContext, store: StoreResource) -> dg.SensorResult:
    st = store.get()
    seen: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
    found = st.find_archives()
    existing = set(context.instance.get_dynamic_partitions(archives_partitions.name))
    current = {}
    for key, path in found.items():
        try:
            current[key] = _signature(path)
        except OSError:
            continue  # a dangling link or a file being replaced: next tick
    new_keys = sorted(k for k in current if k not in existing)
    changed = sorted(k for k, sig in current.items() if k in existing and seen.get(k) not in (None, sig))
    run_requests = [
        dg.RunRequest(run_key=f"{k}:{current[k]}", partition_key=k) for k in new_keys + changed
    ]
    # Partitions that exist but were never seen by this cursor (e.g. added by the CLI) are
    # only recorded, not re-run.
    return dg.SensorResult(
        run_requests=run_requests,
        dynamic_partitions_requests=[archives_partitions.build_add_request(new_keys)] if new_keys else [],
        cursor=json.dumps(current, sort_keys=True),
    )
