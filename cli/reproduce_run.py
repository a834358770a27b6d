"""A whole `chess-pipeline reproduce` run: the archives chosen and ingested, their positions
labelled, then the job's steps (cli/reproduce_steps.py); with --hours, the time budget's ledger
opened, kept across commands with the same settings (budget_key) and closed when every step is
done. Resuming: an archive ingested with the same bytes is not ingested again, labels label only
what has no label of the setting, and the step loop keeps what is up to date; each is decided from
the store (pipeline.research.step_records), so a second machine on the same store redoes nothing.
"""

import contextlib
import json
import time
from dataclasses import asdict
from pathlib import Path

import dagster as dg

from cli.reproduce_config import ReproduceConfig, bounds_text
from cli.reproduce_steps import run_steps, save_ledger, warn
from cli.runtime import materialize
from pipeline.research import step_records
from pipeline.store import duck, storage
from pipeline.store.store import Store


def select_archives(cfg: ReproduceConfig) -> list[Path]:
    folder = Path(cfg.data).expanduser()
    if not folder.is_dir():
        raise SystemExit(f"chess-pipeline reproduce: {folder}: no such folder (give the archives' folder with --data)")
    suffixes = (".pgn", ".pgn.zst", ".pgn.bz2", ".pgn.gz")
    found = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.name.endswith(suffixes) and p.relative_to(folder).match(cfg.archives)
    )
    if not found:
        raise SystemExit(
            f"chess-pipeline reproduce: no archive in {folder} matches --archives {cfg.archives!r} "
            f"(files ending {', '.join(suffixes)})"
        )
    return found


def check_models(models: tuple[str, ...]) -> list[str]:
    from assets.reproduce import REPRODUCED
    from assets.training import MODELS

    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline reproduce: no model {', '.join(unknown)}; known: {', '.join(REPRODUCED)}")
    ours = [m for m in models if m not in REPRODUCED]
    if ours:
        datasets = sorted({MODELS[m].dataset for m in ours})
        raise SystemExit(
            f"chess-pipeline reproduce: {', '.join(ours)} {'is' if len(ours) == 1 else 'are'} not part of the "
            f"reproduction (trained on {', '.join(datasets)}, ours, with no published figure); label, build and "
            f"train with `chess-pipeline label --static`, `chess-pipeline datasets {datasets[0]}` and "
            f"`chess-pipeline train {ours[0]}`"
        )
    return list(models) or list(REPRODUCED)


def ingest_missing(
    store: Store, instance: dg.DagsterInstance, paths: list[Path], workers: int
) -> tuple[list[str], int]:
    """Link the archives and ingest those whose bytes are not the ones last ingested (the sha256
    the games run recorded; where this instance has no run of it, the sha256 the store's ingest
    record holds, its games written; a run from before it recorded one: the file changed since);
    their keys and how many were ingested. A file touched, or copied again, with the same bytes
    is not ingested again, and so does not redo the datasets and models downstream; the store's
    ingest record (step_records, archive_tables) says when anything was, and what."""
    from assets.records import GamesMetadata
    from cli import ingest
    from pipeline.ingest.ingest import IngestConfig

    keys = [store.add_archive(p) for p in paths]
    hashes = store.scan_archives().hashes
    kept = step_records.read_record(store.root, "archive_tables") or step_records.StepRecord()
    todo = []
    for key, path in zip(keys, paths, strict=True):
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("games"), asset_partitions=[key]), limit=1
        ).records
        if not records:  # not in this instance: the store's record (another machine's ingest)
            ingested = kept.archives.get(key)
            if (
                ingested is None
                or ingested != hashes.get(key)
                or not storage.exists(store.partition_file("games", key))
            ):
                todo.append(key)
            continue
        meta = records[0].asset_materialization.metadata if records[0].asset_materialization else {}
        ingested = GamesMetadata.read(meta).sha256 if meta else None
        if ingested is not None:
            changed = ingested != hashes.get(key)
        else:  # ingested before the runs recorded the bytes' hash
            changed = records[0].timestamp < path.stat().st_mtime
        if changed:
            todo.append(key)
    print(f"ingest: {len(keys) - len(todo)} of {len(keys)} archives already ingested; {len(todo)} to ingest")
    if todo:
        result = ingest.ingest_archives(store, instance, todo, IngestConfig(workers=workers))
        if result.failures:
            key, why = result.failures[0]
            raise SystemExit(f"chess-pipeline reproduce: ingest of {key} failed: {why}")
    archives = {**kept.archives, **{k: hashes[k] for k in keys if k in hashes}}
    if todo or archives != kept.archives:  # made_at: when an archive last changed the tables
        made_at = time.time() if todo else kept.made_at
        step_records.write_record(
            store.root, "archive_tables", step_records.StepRecord(made_at=made_at, archives=archives)
        )
    return keys, len(todo)


def reproduce(store: Store, instance: dg.DagsterInstance, cfg: ReproduceConfig) -> list[str]:
    """Ingest, labels, then the job's assets; the failed steps (empty: all done)."""
    from pipeline.research.budget import LEDGER_DIR, BudgetLedger, ledger_name

    started = time.monotonic()  # the time budget (--hours) counts from here, or goes on (BudgetLedger)
    models = check_models(cfg.models)  # a bad setting is said before a budget is opened or saved
    paths = select_archives(cfg)
    if not Path(cfg.suites).expanduser().is_dir():
        raise SystemExit(f"chess-pipeline reproduce: {cfg.suites}: no such folder (give the EPD suites with --suites)")
    ledger = None
    if cfg.hours:
        key = budget_key(cfg)
        ledger = BudgetLedger.open(store.root / LEDGER_DIR / ledger_name(key), key, cfg.hours, new=cfg.new_budget)
        if ledger.commands > 1:
            print(
                f"time budget {cfg.hours:g} h: going on with the budget of {ledger.commands - 1} earlier command(s) "
                f"with these settings, {ledger.spent_before / 60:.1f} min spent (--new-budget starts afresh)",
                flush=True,
            )
        save_ledger(ledger)
    failures: list[str] | None = None  # None: stopped before the end
    try:
        with ledger.heartbeat(warn=warn) if ledger is not None else contextlib.nullcontext():
            failures = _reproduce(store, instance, cfg, models, paths, started, ledger)
    finally:  # failed steps, or stopped: the command run again goes on with the budget
        if ledger is not None:
            save_ledger(ledger, finished=failures == [])
    if ledger is not None:
        took = ledger.elapsed()
        verdict = "within it" if took <= cfg.hours * 3600 else f"over it by {(took - cfg.hours * 3600) / 60:.1f} min"
        so_far = f", {took / 60:.1f} min over {ledger.commands} commands" if ledger.commands > 1 else ""
        this = (time.monotonic() - started) / 60
        print(f"time budget {cfg.hours:g} h: the command took {this:.1f} min{so_far}, {verdict}")
    return failures


def budget_key(cfg: ReproduceConfig) -> str:
    """The settings a time budget belongs to: a command with other settings starts a new one. The
    same settings written otherwise are the same (a relative folder, the models' order, 0 train
    rows or none); the workers and --new-budget are not settings of what is made."""
    key = {k: v for k, v in asdict(cfg).items() if k not in ("workers", "new_budget")}
    key.update(
        data=str(Path(cfg.data).expanduser().resolve()),
        suites=str(Path(cfg.suites).expanduser().resolve()),
        models=sorted(check_models(cfg.models)),
        max_epochs=cfg.caps.epochs or 0,  # the key as before ScheduleOverrides: a budget left open then goes on
        max_train_rows=cfg.caps.max_train_rows or 0,
    )
    del key["caps"]
    return json.dumps(key, sort_keys=True)


def _reproduce(
    store: Store,
    instance: dg.DagsterInstance,
    cfg: ReproduceConfig,
    models: list[str],
    paths: list[Path],
    started: float,
    ledger,
) -> list[str]:
    from assets.ingest import duckdb_views
    from assets.labels import LabelsConfig
    from assets.resources import StockfishResource
    from cli import label

    keys, ingested = ingest_missing(store, instance, paths, cfg.workers)
    materialize([duckdb_views], store, instance)
    setting = LabelsConfig.of(cfg.label, archives=keys)
    labelled = label.label(store, instance, setting, StockfishResource(workers=cfg.workers))
    label.print_result(labelled)
    if labelled.metadata.labelled:  # the labels changed: what was made from them is redone, here or elsewhere
        step_records.write_record(store.root, "labels", step_records.StepRecord(cfg.label.slug, time.time()))
    if ledger is not None:
        save_ledger(ledger)
    outcomes = {
        "archive_tables": "done" if ingested else "kept",
        "labels": "done" if labelled.metadata.labelled else "kept",
    }
    settings = {
        "archives": f"{len(keys)} ({cfg.archives!r} in {cfg.data})",
        "labels": ("Stockfish static evaluation" if cfg.label.kind == "static" else f"Stockfish {cfg.label}")
        + ", reproducible setting (fresh hash each position)",
        "profile": cfg.profile,
        "bounds": bounds_text(cfg),
        "evaluation": ("quick (evaluate --quick settings)" if cfg.quick_eval else "full")
        + (f", {cfg.openings} openings a match" if cfg.openings else ""),
        "suites": cfg.suites,
        "models": ", ".join(models),
    }
    failures = run_steps(store, instance, cfg, models, settings, outcomes, started, ledger)
    duck.create_views(store)
    return failures
