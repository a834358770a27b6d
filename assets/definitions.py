"""The one Definitions object of the code location (workspace.yaml loads this module).

Built by a @dg.definitions function, so the nightly schedule's settings
(CHESS_PIPELINE_RELABEL_*) are read when Dagster loads the code location, not at import.
"""

import os

import dagster as dg

from assets import datasets, deepchess, evaluation, ingest, labels, piece_values, reproduce, selfplay, sensors, training
from assets.lubeck_grid import lubeck_grid
from assets.profile import executor, profile_from_env
from assets.resources import StockfishResource, StoreResource


def build_defs(environ=os.environ) -> dg.Definitions:
    # CHESS_PIPELINE_PROFILE (assets/profile.py): embedded keeps Dagster's multiprocess executor;
    # cluster sends each step to a Celery worker (labels to the `stockfish` queue). Either way a
    # labels step starts one engine per core its process may use (the stockfish resource's
    # `workers`), so a machine runs (its stockfish worker's concurrency) x that many engines.
    profile = profile_from_env(environ)
    return dg.Definitions(
        assets=[
            ingest.archive_tables,
            ingest.duckdb_views,
            labels.labels_for_profile(profile),  # embedded: one run over every shard; cluster: a run each
            *datasets.dataset_assets,
            *datasets.searched_dataset_assets,
            *training.model_assets,
            training.model_results,
            *evaluation.evaluation_assets,
            *deepchess.deepchess_assets,
            *selfplay.selfplay_assets,
            *piece_values.piece_values_assets,
            lubeck_grid,
            *reproduce.reproduction_assets,
        ],
        jobs=[ingest.ingest_job, labels.relabel_job, reproduce.reproduction_job, reproduce.reproduction_ours_job],
        sensors=[sensors.archives_sensor, labels.labels_automation],
        schedules=[labels.relabel_schedule_from_env(environ)],
        resources={"store": StoreResource(), "stockfish": StockfishResource()},
        executor=executor(profile),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return build_defs()
