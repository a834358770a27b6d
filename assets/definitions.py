"""The one Definitions object of the code location (workspace.yaml loads this module)."""

import dagster as dg

from assets import ingest, sensors
from assets.resources import StoreResource

defs = dg.Definitions(
    assets=[ingest.archive_tables, ingest.duckdb_views],
    jobs=[ingest.ingest_job],
    sensors=[sensors.archives_sensor],
    resources={"store": StoreResource()},
)
