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
    """The checkpoint of the model's latest making (a file, or an object of an S3 store): the one
    its latest materialisation in this instance recorded, unless the store's reproduce record of
    the model (pipeline.research.step_records) is of a later run, or this instance has none (a
    second machine on the same store, which kept the model another machine trained): then
    models/<model>/<the record's run folder>/checkpoint.pt."""
    from training.train import store_location

    event = context.instance.get_latest_materialization_event(dg.AssetKey(model))
    meta = {} if event is None or event.asset_materialization is None else event.asset_materialization.metadata
    record = _store_record(context, model)
    if event is not None and (record is None or event.timestamp >= record[1]):
        if "checkpoint" not in meta:
            raise dg.Failure(f"model {model}'s latest materialisation records no checkpoint")
        path, made = store_location(meta["checkpoint"].value), "latest materialisation"
    elif record is not None:
        path, made = record[0], "run recorded in the store (reproduce/steps)"
    else:
        raise dg.Failure(f"model {model} has not been materialised: train it first (chess-pipeline train {model})")
    if not storage.exists(path):
        raise dg.Failure(f"{path}: checkpoint of {model}'s {made} is gone; re-materialise {model}")
    return path


def _store_record(context: dg.AssetExecutionContext, model: str) -> tuple[StorePath, float] | None:
    """The checkpoint the store's finished reproduce record of the model names, with when its run
    began; None without a store resource or such a record."""
    from pipeline.research import step_records

    resource = getattr(context.resources, "store", None)
    if resource is None:
        return None
    root = resource.get().root
    record = step_records.read_record(root, model)
    if record is None or not record.finished or not record.folder:
        return None
    return root / "models" / model / record.folder / "checkpoint.pt", record.began


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
