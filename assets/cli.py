"""`chess-pipeline`: the command line, running the same assets through Dagster.

Every command that materialises something does it with the store's persistent Dagster
instance, so `chess-pipeline ui` shows those runs. The CLI lives beside the assets,
not in pipeline/, because it drives Dagster and pipeline/ must not import it.
"""

import argparse
import contextvars
import json
import logging
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from tqdm import tqdm

from pipeline import duck
from pipeline.engine import CP_BOUND, MATE_BOUND, find_stockfish
from pipeline.selfplay import SelfPlayConfig, play_games
from pipeline.store import (
    ARCHIVE_SUFFIXES,
    ArchiveNameError,
    NoSpaceError,
    Store,
    default_root,
    is_archive_name,
    no_space_error,
    remove_stale_progress_files,
)

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
COMMAND_TAG = "chess-pipeline/command"
ASSETS_TAG = "chess-pipeline/assets"
_command = contextvars.ContextVar("chess_pipeline_command", default="python")
"""The CLI command running (set by main), named in the tags of the runs it starts."""


def run_tags(assets: list, selection: list[str] | None = None) -> dict[str, str]:
    """Tags for a run the CLI starts: Dagster names every `materialize` run
    `__ephemeral_asset_job__`, so the tags say which command started it and what it makes
    (the partition is Dagster's own `dagster/partition` tag)."""
    names = list(selection) if selection else sorted(k.to_user_string() for a in assets for k in a.keys)
    text = ", ".join(names)
    return {COMMAND_TAG: _command.get(), ASSETS_TAG: text if len(text) <= 250 else text[:246] + " ..."}


DAGSTER_YAML = """telemetry:
  enabled: false
# Runs launched from the UI whose worker never starts (or never stops when cancelled) are
# marked failed by the daemon that `chess-pipeline ui` runs. Runs whose process was killed
# (kill -9, out of memory) stay STARTED under Dagster's own monitoring, which cannot check a
# local process; chess-pipeline marks those failed when it next starts (assets/runs.py).
run_monitoring:
  enabled: true
  start_timeout_seconds: 180
  cancel_timeout_seconds: 180
  poll_interval_seconds: 60
"""
OLD_DAGSTER_YAML = "telemetry:\n  enabled: false\n"
"""What earlier versions wrote: replaced by DAGSTER_YAML (a file a user changed is kept)."""


def _store(args) -> Store:
    """The store the command works on, created if missing: a new one is named on stderr, so a
    command run from another directory does not pass for one on the usual store."""
    store = Store(Path(args.home).expanduser().resolve() if args.home else default_root())
    new = not store.archives_dir.is_dir()
    store.ensure()
    if new:
        print(
            f"chess-pipeline: created a new store at {store.root} (set CHESS_PIPELINE_HOME or --home to use another)",
            file=sys.stderr,
        )
    return store


def _instance(store: Store) -> dg.DagsterInstance:
    """The persistent instance: DAGSTER_HOME if set, else <store>/dagster."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(store.dagster_home)
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    cfg = Path(home) / "dagster.yaml"
    if not cfg.exists() or cfg.read_text() == OLD_DAGSTER_YAML:
        cfg.write_text(DAGSTER_YAML)
    instance = dg.DagsterInstance.get()
    from assets.runs import fail_dead_runs

    for run_id, pid in fail_dead_runs(instance):
        print(
            f"chess-pipeline: run {run_id} was left STARTED by process {pid}, which is gone: marked failed",
            file=sys.stderr,
        )
    remove_stale_progress_files(store)
    return instance


def _resources(store: Store, workers: int = 0, **stockfish) -> dict:
    """The run's resources; stockfish: further StockfishResource fields (timeout_s, retries)."""
    from assets.resources import StockfishResource, StoreResource

    return {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=workers, **stockfish)}


def _expand(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file() and is_archive_name(q.name)))
        elif p.exists():
            out.append(p)
        else:
            raise SystemExit(f"chess-pipeline: {p}: no such file or directory")
    return out


def ingest_keys(
    store: Store, instance: dg.DagsterInstance, keys: list[str], workers: int = 0, on_done=None
) -> list[dict]:
    """Materialise the archive tables of each partition key, one Dagster run per archive.
    on_done(summary) is called as each archive succeeds, so a later failure hides nothing."""
    from assets.ingest import archive_tables
    from assets.partitions import archives_partitions

    known = set(instance.get_dynamic_partitions(archives_partitions.name))
    new = [k for k in keys if k not in known]
    if new:
        instance.add_dynamic_partitions(archives_partitions.name, new)
    summaries = []
    failures = []
    bar = tqdm(keys, unit="archive", desc="ingest", disable=None)
    for key in bar:
        bar.set_postfix_str(key[:40])
        run_config = {"ops": {"archive_tables": {"config": {"workers": workers}}}, **QUIET}
        result = dg.materialize(
            [archive_tables],
            partition_key=key,
            instance=instance,
            tags=run_tags([archive_tables]),
            resources=_resources(store),
            run_config=run_config,
            raise_on_error=False,
        )
        if not result.success:
            failures.append((key, failure_message(result)))
            continue
        meta = {}
        for mat in result.get_asset_materialization_events():
            m = mat.materialization
            meta[m.asset_key.to_user_string()] = {k: v.value for k, v in m.metadata.items()}
        summaries.append(
            {
                "archive": key,
                "games": meta["games"]["rows"],
                "rejected": meta["rejected_games"]["rows"],
                "positions": meta["positions"]["rows"],
                "plies_per_second": meta["games"]["plies_per_second"],
                "bytes_per_position": meta["positions"]["bytes_per_position"],
            }
        )
        if on_done is not None:
            on_done(summaries[-1])
        errors, warnings = failed_checks(result)
        failures.extend((key, line) for line in errors)
        for line in warnings:  # a WARN check: said, but the archive is ingested
            print(f"chess-pipeline: note: archive {key}: {line}", file=sys.stderr)
    for key, msg in failures:
        print(f"chess-pipeline: archive {key} failed: {msg}", file=sys.stderr)
    if failures:
        raise SystemExit(1)
    return summaries


@contextmanager
def progress_bar(path: Path, desc: str, unit: str):
    """A tqdm bar fed by the JSON progress file a running asset keeps up to date."""
    bar = tqdm(total=0, unit=unit, desc=desc, disable=None)
    stop = threading.Event()

    def poll() -> None:
        try:
            d = json.loads(path.read_text())
        except (FileNotFoundError, ValueError):
            return
        bar.total = d["total"]
        bar.n = d["done"] + d["failed"]
        bar.refresh()

    def loop() -> None:
        while not stop.wait(0.5):
            poll()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        poll()
        bar.close()
        path.unlink(missing_ok=True)


def materialize_with_bar(
    assets: list,
    selection: list[str] | None,
    store: Store,
    instance: dg.DagsterInstance,
    run_config: dict,
    resources: dict,
    folder: str,
    desc: str,
    unit: str,
    what: str,
):
    """One Dagster run with a progress bar fed through the run tag PROGRESS_TAG (a JSON file
    under <store>/<folder>). Raises SystemExit with the reason when the run fails."""
    from assets.labels import PROGRESS_TAG

    progress = store.root / folder / f".progress-{os.getpid()}.json"
    progress.parent.mkdir(parents=True, exist_ok=True)
    with progress_bar(progress, desc, unit):
        result = dg.materialize(
            assets,
            selection=selection,
            instance=instance,
            resources=resources,
            run_config={**run_config, **QUIET},
            tags={**run_tags(assets, selection), PROGRESS_TAG: str(progress)},
            raise_on_error=False,
        )
    if not result.success:
        raise SystemExit(f"chess-pipeline: {what} failed: {failure_message(result)}")
    return result


def label_positions(store: Store, instance: dg.DagsterInstance, config: dict, workers: int = 0, **stockfish) -> dict:
    """Materialise `labels` once with this LabelsConfig (as a dict) and these StockfishResource
    fields; returns its metadata, check results, and one line per check that did not pass
    (check_errors: ERROR severity, check_warnings: the rest). Raises SystemExit with the
    reason when the run fails."""
    from assets.labels import labels

    result = materialize_with_bar(
        [labels],
        None,
        store,
        instance,
        {"ops": {"labels": {"config": config}}},
        _resources(store, workers, **stockfish),
        "labels",
        "re-label" if config.get("relabel") else "label",
        "position",
        "labelling",
    )
    mat = result.get_asset_materialization_events()[0].materialization
    out = {k: v.value for k, v in mat.metadata.items() if not isinstance(v.value, str) or len(v.value) < 200}
    out["checks"] = {e.check_name: e.passed for e in result.get_asset_check_evaluations()}
    out["check_errors"], out["check_warnings"] = failed_checks(result)
    return out


CHECK_ADVICE = {
    "coverage": lambda m: (
        f"{m['unlabelled']:,} distinct position(s) have no {m['setting']} label yet (coverage {m['coverage']:.2%}): "
        f"`chess-pipeline label` again goes on where this run stopped"
    ),
    "scores_in_range": lambda m: (
        f"{m['out_of_range']:,} label(s) of {m['setting']} break the label contract (scores {m['min_score']} to "
        f"{m['max_score']}; {m.get('out_of_range_this_run') or 'none'} by this run"
        f"{'' if m.get('out_of_range_this_run') else ', so written before labels were validated'}): "
        f'do not train on them; `chess-pipeline sql "SELECT run_id, count(*) FROM labels '
        f'WHERE abs(cp) >= {CP_BOUND} OR abs(mate) > {MATE_BOUND} OR (cp IS NULL) = (mate IS NULL) GROUP BY 1"` '
        "names the runs that wrote them"
    ),
    "no_duplicate_labels": lambda m: (
        f"{m['duplicates']:,} position(s) labelled twice under {m['setting']}: two runs labelled the same shard; "
        f"the views use one label each, but report it (labels/.locks should prevent it)"
    ),
    "reconciles_with_file": lambda m: (
        f"{m['games_in_unclosed_comments']:,} game(s) lost inside an unclosed {{ comment (python-chess loses them "
        f"too; the games metadata's archive_warnings gives the line): close the comment and ingest the file again"
        if m.get("games_in_unclosed_comments") and m["games"] + m["rejected"] == m["games_in_file (python-chess)"]
        else f"the store holds {m['games']:,} games + {m['rejected']:,} rejected, python-chess counts "
        f"{m['games_in_file (python-chess)']:,} games in the file: games were merged or split (odd line ends, a "
        f"byte-order mark, broken tags?); check the file, and `chess-pipeline report reject_reasons`"
    ),
    "one_position_per_ply": lambda m: (
        f"{m['positions']:,} positions written, {m['sum(ply_count + 1)']:,} expected: ingest the archive again"
    ),
}
"""What a failed check means and what to do, from its metadata (one line each)."""


def failed_checks(result) -> tuple[list[str], list[str]]:
    """One line per asset check of the run that did not pass, (those of ERROR severity, the
    rest): the check, the asset, what its metadata says and what to do."""
    errors, warnings = [], []
    for e in result.get_asset_check_evaluations():
        if e.passed:
            continue
        meta = {k: v.value for k, v in e.metadata.items()}
        try:
            detail = CHECK_ADVICE[e.check_name](meta)
        except (KeyError, TypeError, ValueError):
            detail = ", ".join(f"{k} {v}" for k, v in meta.items()) or "see the check in the Dagster UI"
        line = f"check {e.check_name} of {e.asset_key.to_user_string()} did not pass: {detail}"
        (errors if e.severity == dg.AssetCheckSeverity.ERROR else warnings).append(line)
    return errors, warnings


def failure_message(result) -> str:
    """The user-code error behind a failed run (Dagster wraps it in its own error)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            message = error.message.strip()
            # "pipeline.archive.ArchiveError: <text>": our own errors' text is the message, their
            # module path noise (a builtin's name, e.g. KeyError, stays: it says something).
            head, sep, rest = message.partition(": ")
            if sep and "." in head and error.cls_name and head.rsplit(".", 1)[-1] == error.cls_name:
                return rest.strip()
            return message
    return "run failed (see the Dagster UI for the run's logs)"


def _print_table(table, fmt: str) -> None:
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(_csv_ready(table), sys.stdout.buffer)
        sys.stdout.flush()
    elif fmt == "json":
        print(json.dumps(table.to_pylist(), default=_json_default, indent=1))
    else:
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
            print(pl.from_arrow(table))


def _csv_ready(table):
    """CSV holds text: bytes (planes) as hex, as the JSON output gives them, and nested values
    (extra_headers' map, lists) as JSON, instead of Arrow's refusal to write them."""
    import pyarrow as pa

    for i, f in enumerate(table.schema):
        t = f.type
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            values = [None if v is None else v.hex() for v in table.column(i).to_pylist()]
        elif pa.types.is_nested(t):
            as_map = pa.types.is_map(t)
            values = [
                None if v is None else json.dumps(dict(v) if as_map else v, default=_json_default)
                for v in table.column(i).to_pylist()
            ]
        else:
            continue
        table = table.set_column(i, f.name, pa.array(values, pa.string()))
    return table


def _json_default(v):
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def cmd_ingest(args) -> None:
    store = _store(args)
    instance = _instance(store)
    keys = []
    for path in _expand(args.paths):
        try:
            key = store.add_archive(path, copy=args.copy)
        except (ArchiveNameError, FileNotFoundError, NoSpaceError) as e:
            raise SystemExit(f"chess-pipeline ingest: {e}") from None
        if key not in keys:  # the same content twice is one archive
            keys.append(key)

    def done(s: dict) -> None:
        tqdm.write(
            f"{s['archive']}: {s['games']} games, {s['rejected']} rejected, {s['positions']} positions "
            f"({s['plies_per_second']:,} plies/s, {s['bytes_per_position']} bytes/position)",
            file=sys.stdout,
        )

    try:
        ingest_keys(store, instance, keys, workers=args.workers, on_done=done)
    finally:
        duck.create_views(store)  # the archives that succeeded show up even when one failed


def cmd_demo(args) -> None:
    store = _store(args)
    instance = _instance(store)
    if not store.find_archives():
        out = store.archives_dir / "selfplay-sample.pgn"
        print(
            f"no archives in {store.archives_dir}: making a sample archive by Stockfish self-play ({args.games} games)"
        )
        bar = tqdm(total=args.games, unit="game", desc="self-play", disable=None)
        play_games(find_stockfish(), out, SelfPlayConfig(games=args.games), progress=lambda done, total: bar.update(1))
        bar.close()
    keys = sorted(store.find_archives())
    ingest_keys(store, instance, keys, workers=args.workers)
    from assets.ingest import duckdb_views

    dg.materialize(
        [duckdb_views], instance=instance, resources=_resources(store), run_config=QUIET, tags=run_tags([duckdb_views])
    )
    summary = label_positions(store, instance, {}, workers=args.workers)
    _print_label_summary(summary)
    _exit_on_check_errors(summary, "demo")
    # The sample is small: a fifth of its games each for val and test, so neither is empty.
    cmd_datasets(argparse.Namespace(home=str(store.root), names=[], seed=None, val_fraction=0.2, test_fraction=0.2))
    cmd_train(argparse.Namespace(home=str(store.root), models=[], profile="quick", epochs=0, device="auto"))
    cmd_evaluate(
        argparse.Namespace(
            home=str(store.root),
            models=["mlp_bitmap_3class"],
            suites=None,
            quick=True,
            depths=None,
            openings=None,
            only=None,
        )
    )
    print(f"store: {store.root}")
    _print_table(duck.query(store, "SELECT * FROM archive_summary"), "table")
    print(
        f'query it: chess-pipeline sql "SELECT source, count(*) FROM games GROUP BY source"  '
        f"or  duckdb -readonly {store.duckdb_path}"
    )


def _print_label_summary(m: dict) -> None:
    print(
        f"labels ({m['engine']}, {m['limit']}, {m['mode']}): {m['labelled']:,} labelled, {m['failed']:,} failed "
        f"in {m['seconds']:,}s ({m['positions_per_second']:,} positions/s on {m['engines']} engine(s)); "
        f"coverage {m['coverage']:.2%} of {m['distinct_positions']:,} distinct positions "
        f"({m['positions']:,} positions, {m['repeat_share']:.1%} repeats)"
    )
    for line in m.get("check_warnings", []):
        print(f"note: {line}")


def cmd_label(args) -> None:
    store = _store(args)
    instance = _instance(store)
    if args.static:
        limit, value = "static", 0
    elif args.nodes:
        limit, value = "nodes", args.nodes
    else:
        limit, value = "depth", args.depth
    config = {
        "limit": limit,
        "value": value,
        "max_positions": args.limit,
        "max_minutes": args.minutes,
        "relabel": args.relabel,
        "order": args.order,
        "retry_failed": args.retry_failed,
    }
    engine = {
        "timeout_s": args.timeout,
        **({"retries": args.retries} if args.retries is not None else {}),
        **({"clear_hash": False} if args.keep_hash else {}),
    }
    summary = label_positions(store, instance, config, workers=args.workers, **engine)
    _print_label_summary(summary)
    duck.create_views(store)
    _exit_on_check_errors(summary, "label")


def _exit_on_check_errors(summary: dict, command: str) -> None:
    """A check of ERROR severity that did not pass fails the command: one line per check."""
    errors = summary.get("check_errors", [])
    if errors:
        raise SystemExit("\n".join(f"chess-pipeline {command}: {line}" for line in errors))


def _materialize_all(assets: list, configs: dict[str, dict], store: Store, instance: dg.DagsterInstance, what: str):
    """One Dagster run materialising the assets named in configs, each with its config."""
    names = list(configs)
    run_config = {"ops": {n: {"config": c} for n, c in configs.items()}, **QUIET}
    result = dg.materialize(
        assets,
        selection=names,
        instance=instance,
        resources=_resources(store),
        run_config=run_config,
        raise_on_error=False,
        tags=run_tags(assets, names),
    )
    if not result.success:
        raise SystemExit(f"chess-pipeline: {what} failed: {failure_message(result)}")
    return result


def _label_setting(args) -> dict:
    """The dataset config's label fields the --label-* flags set ({} when none is given)."""
    from pipeline.engine import LIMIT_KINDS, Limit

    setting = {}
    for kind in LIMIT_KINDS:
        given = getattr(args, f"label_{kind}", None)
        if given is not None and given is not False:
            try:
                limit = Limit(kind, 0 if given is True else given)
            except ValueError as e:
                raise SystemExit(f"chess-pipeline datasets: --label-{kind}: {e}") from None
            setting = {"label_kind": limit.kind, "label_value": limit.value}
    if getattr(args, "label_engine", None) is not None:
        setting["label_engine"] = args.label_engine
    return setting


def _add_label_flags(parser: argparse.ArgumentParser) -> None:
    """--label-depth N / --label-nodes N / --label-static and --label-engine NAME: the label fields
    of the datasets' run config (LabelSettingConfig), their help and defaults taken from it."""
    from assets.config import describe
    from assets.datasets import LabelSettingConfig
    from pipeline.datasets import DATASETS, setting_text
    from pipeline.engine import LIMIT_KINDS

    fields = LabelSettingConfig.model_fields
    kind, value, engine = (fields[f].default for f in ("label_kind", "label_value", "label_engine"))
    takers = ", ".join(n for n, spec in DATASETS.items() if "label_kind" in spec.defaults)
    g = parser.add_argument_group(
        "label setting",
        f"{describe(LabelSettingConfig, 'label_kind')} Default: {setting_text(kind, value)}. "
        f"For the datasets built from labels: {takers}.".replace("%", "%%"),
    )
    one = g.add_mutually_exclusive_group()
    for k in LIMIT_KINDS:
        if k == "static":
            one.add_argument("--label-static", action="store_true", help="the labels of `label --static`")
        else:
            one.add_argument(f"--label-{k}", type=int, metavar="N", help=f"the labels of `label --{k} N`")
    g.add_argument(
        "--label-engine",
        metavar="NAME",
        help=describe(LabelSettingConfig, "label_engine").replace("%", "%%")
        + (f" Default: {engine!r}." if engine else ""),
    )


def cmd_datasets(args) -> None:
    from assets.datasets import coverage_text, dataset_assets
    from pipeline.datasets import DATASETS, SPLITS

    names = args.names or list(DATASETS)
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise SystemExit(f"chess-pipeline datasets: no dataset {', '.join(unknown)}; known: {', '.join(DATASETS)}")
    label = _label_setting(args)
    takers = [n for n in names if "label_kind" in DATASETS[n].defaults]
    if label and not takers:
        raise SystemExit(
            f"chess-pipeline datasets: {', '.join(names)} {'takes' if len(names) == 1 else 'take'} no "
            f"label setting (built from the games alone); the --label-* flags are for "
            f"{', '.join(n for n, d in DATASETS.items() if 'label_kind' in d.defaults)}"
        )
    store = _store(args)
    instance = _instance(store)
    config = {"seed": args.seed} if args.seed is not None else {}
    if args.val_fraction is not None:
        config["val_fraction"] = args.val_fraction
    if args.test_fraction is not None:
        config["test_fraction"] = args.test_fraction
    if getattr(args, "split_by", None):
        config["split_by"] = args.split_by
    if getattr(args, "no_leakage_guard", False):
        config["leakage_guard"] = False
    configs = {n: {**config, **(label if n in takers else {})} for n in names}
    result = _materialize_all(dataset_assets, configs, store, instance, "datasets")
    checks = {}
    for e in result.get_asset_check_evaluations():
        checks.setdefault(e.asset_key.to_user_string(), []).append((e.check_name, e.passed))
    empty = []
    for mat in result.get_asset_materialization_events():
        m = {k: v.value for k, v in mat.materialization.metadata.items()}
        name = mat.materialization.asset_key.to_user_string()
        if not m["rows"]:
            empty.append(name)
            print(
                f"chess-pipeline datasets: {name} has no rows: {m.get('empty_reason', 'see its checks in the UI')}",
                file=sys.stderr,
            )
            continue
        rows = ", ".join(f"{s} {m[f'rows_{s}']:,}" for s in SPLITS)
        removed = ", ".join(f"{s} {m[f'removed_by_guard_{s}']:,}" for s in SPLITS)
        failed = [c for c, ok in checks.get(name, []) if not ok]
        print(
            f"{name}: {rows} (leakage guard removed {removed}); label coverage "
            f"{coverage_text(m['label_coverage'], m['candidates'])}"
            + (f"; checks not passed: {', '.join(failed)}" if failed else "")
        )
    duck.create_views(store)
    if len(empty) == len(names):  # nothing useful built
        raise SystemExit(1)


def cmd_train(args) -> None:
    from assets.training import MODELS, model_assets
    from pipeline.datasets import dataset_problem

    names = args.models or ["mlp_bitmap_3class"]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline train: no model {', '.join(unknown)}; known: {', '.join(MODELS)}")
    store = _store(args)
    by_dataset: dict[str, list[str]] = {}
    for n in names:
        by_dataset.setdefault(MODELS[n].dataset, []).append(n)
    problems = [
        f"chess-pipeline train: {', '.join(models)} cannot train: {problem}"
        for dataset, models in by_dataset.items()
        if (problem := dataset_problem(store, dataset))
    ]
    if problems:  # before Dagster and torch start: one line each, what is missing and the fix
        raise SystemExit("\n".join(problems))
    instance = _instance(store)
    config = {"profile": args.profile, "device": args.device}
    if args.epochs:
        config["epochs"] = args.epochs
    result = _materialize_all(model_assets, {n: config for n in names}, store, instance, "training")
    for mat in result.get_asset_materialization_events():
        m = {k: v.value for k, v in mat.materialization.metadata.items()}
        name = mat.materialization.asset_key.to_user_string()
        score = (
            f"test accuracy {m['test_accuracy']:.2%} (majority class {m['majority_class_accuracy']:.2%})"
            if "test_accuracy" in m
            else f"test MSE {m['test_mse']:.5f}, cp MAE {m['test_cp_mae']:.0f}"
        )
        print(
            f"{name}: {score} on {m['rows_test']:,} test positions; {m['epochs']} epochs on {m['rows_train']:,} "
            f"rows in {m['seconds']:.0f}s ({m['train_positions_per_second']:,} positions/s, {m['device']}); "
            f"published: {m['published']}"
        )
    from assets.training import model_results

    dg.materialize(
        [model_results],
        instance=instance,
        resources=_resources(store),
        run_config=QUIET,
        tags=run_tags([model_results]),
    )
    print(f"results table: {store.root / 'reports' / 'model_results.md'}")
    duck.create_views(store)


QUICK_EVALUATION = {
    "suites": {"depths": [1], "max_positions": 100, "kaufman_depth": 12},
    "matches": {"openings": 4, "stockfish_skills": [0], "movetime": 0.0, "endgames": 2, "endgame_max_plies": 60},
    "head_to_head": {"openings": 4},
}
"""--quick: a few minutes a model (fewer positions, openings, opponents), for a first look."""


def cmd_evaluate(args) -> None:
    from assets.evaluation import HEAD_TO_HEAD_MODELS, evaluation_assets
    from assets.training import MODELS

    store = _store(args)
    instance = _instance(store)
    trained = [m for m in MODELS if instance.get_latest_materialization_event(dg.AssetKey(m)) is not None]
    names = args.models or trained
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline evaluate: no model {', '.join(unknown)}; known: {', '.join(MODELS)}")
    untrained = [n for n in names if n not in trained]
    if untrained or not names:
        raise SystemExit(
            f"chess-pipeline evaluate: not trained yet: {', '.join(untrained) or 'any model'} "
            f"(chess-pipeline train ...)"
        )
    quick = QUICK_EVALUATION if args.quick else {"suites": {}, "matches": {}, "head_to_head": {}}
    suites = dict(quick["suites"], **({"suites_dir": str(Path(args.suites).resolve())} if args.suites else {}))
    matches, head = dict(quick["matches"]), dict(quick["head_to_head"])
    if args.depths:
        suites["depths"] = args.depths
    if args.openings:
        matches["openings"] = head["openings"] = args.openings
        matches["time_openings"] = min(args.openings, 10)
    ops = {}
    for m in names:
        if args.only != "matches":
            ops[f"eval_suites_{m}"] = {"config": suites}
        if args.only != "suites":
            ops[f"eval_matches_{m}"] = {"config": matches}
    selection = [*ops, *(["elo_ratings"] if args.only != "suites" else []), *(f"eval_report_{m}" for m in names)]
    if args.only != "suites" and all(m in names for m in HEAD_TO_HEAD_MODELS):
        selection.append("eval_head_to_head")
        ops["eval_head_to_head"] = {"config": head}
    materialize_with_bar(
        evaluation_assets,
        selection,
        store,
        instance,
        {"ops": ops},
        _resources(store),
        "evaluation_results",
        "evaluate",
        "step",
        "evaluation",
    )
    duck.create_views(store)
    rows = duck.query(
        store,
        "SELECT model, suite, metric, round(value, 4) AS value, n FROM evaluation_results "
        "WHERE model IN (SELECT unnest($models)) AND suite NOT LIKE '%/%' "
        "ORDER BY model, suite, metric",
        params={"models": names},
    )
    _print_table(rows, "table")
    print(f"reports: {store.root / 'reports' / 'evaluation'}")


def cmd_sql(args) -> None:
    store = _store(args)
    # Read-only (duck.read_statement), on the store's own DuckDB file, rebuilt first when it was
    # built for another place (a copied or moved store): see duck.read_only_connection.
    _print_table(duck.query(store, args.query), args.format)


def cmd_report(args) -> None:
    store = _store(args)
    try:
        sql = duck.load_sql(f"reports/{args.name}")
    except FileNotFoundError:
        raise SystemExit(f"chess-pipeline report: no report {args.name!r}; see sql/reports/") from None
    _print_table(duck.query(store, sql), args.format)


def cmd_ui(args) -> None:
    """`dagster dev` through this interpreter (`python -m dagster`), so it runs without the venv on
    PATH, loading the module `assets.definitions` from where this CLI imported it (no
    workspace.yaml to find: that file is for running `dagster dev` by hand)."""
    import assets

    store = _store(args)
    _instance(store)
    code_dir = str(Path(assets.__file__).resolve().parent.parent)
    # A sensor tick hashes at most one new archive past its 20 s budget, but one 30 GB file
    # takes ~2 minutes at sha256's ~280 MB/s: give ticks 10 minutes, not Dagster's 60 s.
    env = {"DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS": "600", **os.environ, "CHESS_PIPELINE_HOME": str(store.root)}
    cmd = [
        sys.executable,
        "-m",
        "dagster",
        "dev",
        "-m",
        "assets.definitions",
        "-d",
        code_dir,
        "-h",
        "127.0.0.1",
        "-p",
        str(args.port),
    ]
    print(" ".join(cmd), file=sys.stderr)
    proc = subprocess.Popen(cmd, env=env, cwd=store.root)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # Ctrl-C reaches dagster dev too: let it shut down its processes
        code = proc.wait()
    raise SystemExit(code)


def _seconds(text: str) -> float:
    """argparse type of --timeout: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (0 or more)")
    return value


def _count(text: str) -> int:
    """argparse type of --retries: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number (0 or more)")
    return value


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line: what is wrong and where the help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    from typing import get_args

    from pipeline.datasets import SplitBy
    from pipeline.labels import Order
    from training.choices import Device, Profile

    p = _Parser(prog="chess-pipeline", description="PGN archives -> position store -> evaluators")
    p.add_argument("--home", help="store root (default: $CHESS_PIPELINE_HOME, else ./store)")
    p.add_argument(
        "--debug", action="store_true", help="show the Python traceback of an error (also: CHESS_PIPELINE_DEBUG=1)"
    )
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("ingest", help="add archives (files or folders) and ingest them through Dagster")
    s.add_argument("paths", nargs="+", help=f"archive files ({', '.join(ARCHIVE_SUFFIXES)}) or folders")
    s.add_argument("--copy", action="store_true", help="copy into the store instead of linking")
    s.add_argument("--workers", type=int, default=0, help="worker processes per archive (0 = one per core)")
    s.set_defaults(func=cmd_ingest)

    s = sub.add_parser("demo", help="run the whole asset graph on the store (self-play sample if it has no archives)")
    s.add_argument("--games", type=int, default=SelfPlayConfig.games, help="self-play games for the sample archive")
    s.add_argument("--workers", type=int, default=0)
    s.set_defaults(func=cmd_demo)

    s = sub.add_parser("label", help="label distinct positions with Stockfish through Dagster (the labels asset)")
    g = s.add_mutually_exclusive_group()
    g.add_argument("--depth", type=int, default=8, help="search depth (default 8)")
    g.add_argument("--nodes", type=int, default=0, help="search nodes instead of a depth")
    g.add_argument("--static", action="store_true", help="Stockfish's static evaluation (`eval`), no search")
    s.add_argument("--limit", type=int, default=0, help="label at most this many positions in this run")
    s.add_argument("--minutes", type=float, default=0, help="stop handing out positions after this long")
    s.add_argument("--workers", type=int, default=0, help="engine processes (0 = one per core)")
    s.add_argument(
        "--relabel",
        action="store_true",
        help="re-label positions whose labels fall short of this setting (what the nightly job does)",
    )
    s.add_argument(
        "--order",
        choices=get_args(Order),
        default="first_seen",
        help="which positions first when re-labelling under a bound",
    )
    s.add_argument("--retry-failed", action="store_true", help="try positions recorded as failed again")
    s.add_argument(
        "--timeout",
        type=_seconds,
        default=0.0,
        metavar="SECONDS",
        help="stop a search after this long, restart a hung engine (default 0: measured, 20x the "
        "limit's slowest calibration search, at least 2 s)",
    )
    s.add_argument(
        "--retries",
        type=_count,
        default=None,
        metavar="N",
        help="further tries of a position whose engine hung or crashed before it goes to label_failures (default 2)",
    )
    s.add_argument(
        "--keep-hash",
        action="store_true",
        help="the faster hash-kept setting: labels depend on what the engine searched before, "
        "stored apart as <engine>_<limit>_hash-kept (default: reproducible labels)",
    )
    s.set_defaults(func=cmd_label)

    s = sub.add_parser("datasets", help="materialise training sets (sql/datasets/) with train/val/test splits")
    s.add_argument("names", nargs="*", help="datasets to build (default: all)")
    s.add_argument("--seed", type=int, default=None, help="seed of the split by game (default 0)")
    s.add_argument("--val-fraction", type=float, default=None, help="share of games in val (default 0.1)")
    s.add_argument("--test-fraction", type=float, default=None, help="share of games in test (default 0.1)")
    s.add_argument(
        "--split-by",
        choices=get_args(SplitBy),
        help="game (default), or position: rows split one by one, as the thesis did (for comparison)",
    )
    s.add_argument(
        "--no-leakage-guard",
        action="store_true",
        help="keep test and val positions in train (for comparison with the published splits)",
    )
    _add_label_flags(s)
    s.set_defaults(func=cmd_datasets)

    s = sub.add_parser("train", help="train value networks from the datasets (default: the 3-class MLP)")
    s.add_argument("models", nargs="*", help="model assets to train (default: mlp_bitmap_3class)")
    s.add_argument(
        "--profile",
        choices=get_args(Profile),
        default="quick",
        help="quick: a few CPU minutes; full: the published schedules",
    )
    s.add_argument("--epochs", type=int, default=0, help="override the profile's epochs")
    s.add_argument("--device", choices=get_args(Device), default="auto", help="auto, cpu or cuda")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("evaluate", help="test suites, matches and Elo of trained models (default: all trained)")
    s.add_argument("models", nargs="*", help="model assets to evaluate (default: every trained one)")
    s.add_argument("--suites", help="folder of .epd suites (default: $CHESS_PIPELINE_SUITES, else <home>/suites)")
    s.add_argument(
        "--quick", action="store_true", help="a first look: 100 positions a suite at 1 ply, 4 openings, fewer opponents"
    )
    s.add_argument("--depths", type=int, nargs="+", help="search depths for the suites (default: 1 2)")
    s.add_argument("--openings", type=int, help="openings per match, each played with both colours (default: 20)")
    s.add_argument("--only", choices=("suites", "matches"), help="run only the suites or only the matches (and Elo)")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser(
        "sql",
        help="run SQL over the store (views: games, rejected_games, positions, archive_summary, "
        "labels, best_labels, labelled_positions, label_failures, datasets, model_metrics, "
        "evaluation_results, match_games)",
    )
    s.add_argument("query")
    s.add_argument("--format", choices=("table", "csv", "json"), default="table")
    s.set_defaults(func=cmd_sql)

    s = sub.add_parser("report", help="run a ready query from sql/reports/")
    s.add_argument("name", help="e.g. reject_reasons, most_common_positions")
    s.add_argument("--format", choices=("table", "csv", "json"), default="table")
    s.set_defaults(func=cmd_report)

    s = sub.add_parser("ui", help="open the Dagster UI on 127.0.0.1")
    s.add_argument("--port", type=int, default=3000)
    s.set_defaults(func=cmd_ui)
    return p


BAD_INPUT = (
    ValueError,
    LookupError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)
"""Errors that mean a wrong argument, path or query: their message is what the user needs."""


def one_line(text: str) -> str:
    """An error message as one line: its lines joined, up to DuckDB's `LINE 1: ...` excerpt."""
    lines = []
    for line in text.splitlines():
        if line.strip().startswith("LINE ") and lines:
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines)


def error_line(e: BaseException, args) -> str:
    """What went wrong, in one line, for an exception no command turned into a message."""
    import duckdb

    from pipeline.engine import EngineNotFound

    full = no_space_error(e, [Path(os.environ.get("DAGSTER_HOME") or "."), Path(args.home or default_root())])
    if full is not None:
        return full
    while isinstance(e, dg.DagsterUserCodeExecutionError) and e.user_exception is not None:
        e = e.user_exception  # the error of our code inside a run, not Dagster's wrapper
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, (*BAD_INPUT, EngineNotFound, duckdb.Error, OSError)):
        return one_line(str(e)) or type(e).__name__
    return (
        f"{type(e).__name__}: {one_line(str(e))} (unexpected; run again with --debug, or "
        "CHESS_PIPELINE_DEBUG=1, for the traceback)"
    )


class _NoTracebackLogger(logging.Logger):
    """Dagster's console logger is built from logging.getLoggerClass(); with this class its
    failure records keep their first line only, not the stack trace Dagster appends: the CLI
    prints the cause itself, in one line (the run's page in the UI keeps the whole trace)."""

    def handle(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            text = record.getMessage()
            if "Stack Trace:" in text or "Traceback (most recent call last)" in text:
                record.msg, record.args = text.split("\n", 1)[0], ()
        super().handle(record)


def main(argv: list[str] | None = None) -> None:
    """The CLI. Every error ends in one line on stderr (what is wrong; the message says what to
    do) and a non-zero exit: 1, or 130 when interrupted; --debug shows the traceback instead."""
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get("CHESS_PIPELINE_DEBUG", "") not in ("", "0")
    _command.set(args.command)
    if not debug:
        logging.setLoggerClass(_NoTracebackLogger)
    try:
        args.func(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"chess-pipeline {args.command}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        # The reader went away (`... | head`): as Unix tools do, stop quietly. Python would
        # report the pipe again when it flushes stdout at exit, so point stdout at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141 if not debug else 1) from None
    except Exception as e:
        if debug:
            raise
        raise SystemExit(f"chess-pipeline {args.command}: {error_line(e, args)}") from None


if __name__ == "__main__":
    main()
