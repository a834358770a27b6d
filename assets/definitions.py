"""The one Definitions object of the code location (workspace.yaml loads this module).

Built by a @dg.definitions function, so the nightly schedule's settings
(CHESS_PIPELINE_RELABEL_*) are read when Dagster loads the code location, not at import.
"""

import os

import dagster as dg

from assets import datasets, evaluation, ingest, labels, sensors, training
from assets.resources import StockfishResource, StoreResource


def build_defs(environ=os.environ) -> dg.Definitions:
    return dg.Definitions(
        assets=[
            ingest.archive_tables,
            ingest.duckdb_views,
            labels.labels,
            *datasets.dataset_assets,
            *training.model_assets,
            training.model_results,
            *evaluation.evaluation_assets,
        ],
        jobs=[ingest.ingest_job, labels.relabel_job],
        sensors=[sensors.archives_sensor, labels.labels_automation],
        schedules=[labels.relabel_schedule_from_env(environ)],
        resources={"store": StoreResource(), "stockfish": StockfishResource()},
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs()
