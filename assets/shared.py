"""Names several asset modules share, kept below all of them so none imports a sibling asset
module for them: the asset groups, the tags runs and assets carry, the models trained twice, and
the helpers every evaluation uses (the checkpoint its model last recorded, the report folder, the
suites folder, atomic PNG writes, a rows table).

May import: dagster, pipeline, training. Imported by: every asset module and the CLI; imports
no other assets module but assets.metadata."""

import os
from pathlib import Path

import dagster as dg

from assets.metadata import md_cell
from pipeline.research import published
from pipeline.store import storage
from pipeline.store.storage_paths import StorePath
from pipeline.store.store import Store
from pipeline.store.store_files import atomic_path
from training.catalog import MODELS

MODELS_GROUP = "models"
EVALUATION_GROUP = "evaluation"
REPRODUCTION_GROUP = "reproduction"

MODEL_TAG = "model"
"""The tag every model asset and its evaluation assets (eval_<kind>_<model>: suites, matches,
report, DeepChess's pairs, the piece values) carry: the model asset's name (the UI filters by it;
reproduction_job leaves models out by it)."""
RUN_FOLDER_TAG = "chess-pipeline/run-folder"
"""The tag naming the run folder a model run trains in (models/<model>/<folder>; default: the run's
id): reproduce gives a model run killed half-way its first folder again, so it trains on from its checkpoint."""
COMMAND_TAG = "chess-pipeline/command"
"""The tag of every run the CLI starts: the command that started it (the reproduction's steps
sum the runs of `reproduce`)."""

SPLIT_MODELS = [m for m in MODELS if m in published.SPLIT_MODELS]
"""Sabatelli's, Lubeck's, DeepChess's and Team 44's (centipawn) networks, whose figures were measured on
a split of their own data: trained on the published split too (pipeline.research.published.SPLIT_MODELS)."""


def suites_folder(configured: str, store: Store) -> StorePath:
    """The EPD suites: the asset config, else CHESS_PIPELINE_SUITES, else <home>/suites (a
    folder, or an s3:// prefix: the store's own when the store is on S3)."""
    given = configured or os.environ.get("CHESS_PIPELINE_SUITES")
    if not given:
        return store.root / "suites"
    return storage.parse_root(given) if "://" in given else Path(given).expanduser()


def checkpoint_of(context: dg.AssetExecutionContext, model: str) -> StorePath:
    """The checkpoint the model asset's latest materialisation recorded (a file, or an object of
    an S3 store)."""
    from training.train import store_location

    event = context.instance.get_latest_materialization_event(dg.AssetKey(model))
    if event is None or event.asset_materialization is None:
        raise dg.Failure(f"model {model} has not been materialised: train it first (chess-pipeline train {model})")
    meta = event.asset_materialization.metadata
    if "checkpoint" not in meta:
        raise dg.Failure(f"model {model}'s latest materialisation records no checkpoint")
    path = store_location(meta["checkpoint"].value)
    if not storage.exists(path):
        raise dg.Failure(f"{path}: checkpoint of {model}'s latest materialisation is gone; re-materialise {model}")
    return path


def rows_md(rows) -> str:
    lines = ["| suite | metric | value | n | detail |", "|---|---|---|---|---|"]
    for suite, metric, value, n, detail in rows:
        lines.append(f"| {suite} | {metric} | {value:.4g} | {n} | {md_cell(detail)} |")
    return "\n".join(lines)


def report_dir(st: Store, model: str) -> StorePath:
    return st.root / "reports" / "evaluation" / model


def write_png(path: StorePath, png: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(png)
