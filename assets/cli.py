"""`chess-pipeline`: the command line, running the same assets through Dagster.

Every command that materialises something does it with the store's persistent Dagster
instance, so `chess-pipeline ui` shows those runs. The CLI lives beside the assets,
not in pipeline/, because it drives Dagster and pipeline/ must not import it.
"""

import argparse
import json
import os
import subprocess
import sys
import threading
from contextlib import contextmanager
from pathlib import Path

import dagster as dg
from tqdm import tqdm

from pipeline import duck
from pipeline.engine import find_stockfish
from pipeline.selfplay import SelfPlayConfig, play_games
from pipeline.store import ARCHIVE_SUFFIXES, Store, default_root, is_archive_name

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
DAGSTER_YAML = "telemetry:\n  enabled: false\n"


def _store(args) -> Store:
    return Store(Path(args.home).expanduser().resolve() if args.home else default_root()).ensure()


def _instance(store: Store) -> dg.DagsterInstance:
    """The persistent instance: DAGSTER_HOME if set, else <store>/dagster."""
    home = os.environ.get("DAGSTER_HOME")
    if not home:
        home = str(store.dagster_home)
        os.environ["DAGSTER_HOME"] = home
    Path(home).mkdir(parents=True, exist_ok=True)
    cfg = Path(home) / "dagster.yaml"
    if not cfg.exists():
        cfg.write_text(DAGSTER_YAML)
    return dg.DagsterInstance.get()


def _resources(store: Store, workers: int = 0) -> dict:
    from assets.resources import StockfishResource, StoreResource

    return {"store": StoreResource(root=str(store.root)), "stockfish": StockfishResource(workers=workers)}


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


def ingest_keys(store: Store, instance: dg.DagsterInstance, keys: list[str], workers: int = 0) -> list[dict]:
    """Materialise the archive tables of each partition key, one Dagster run per archive."""
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
        result = dg.materialize([archive_tables], partition_key=key, instance=instance,
                                resources=_resources(store), run_config=run_config, raise_on_error=False)
        if not result.success:
            failures.append((key, failure_message(result)))
            continue
        meta = {}
        for mat in result.get_asset_materialization_events():
            m = mat.materialization
            meta[m.asset_key.to_user_string()] = {k: v.value for k, v in m.metadata.items()}
        summaries.append({
            "archive": key, "games": meta["games"]["rows"], "rejected": meta["rejected_games"]["rows"],
            "positions": meta["positions"]["rows"], "plies_per_second": meta["games"]["plies_per_second"],
            "bytes_per_position": meta["positions"]["bytes_per_position"],
        })
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


def materialize_with_bar(assets: list, selection: list[str] | None, store: Store, instance: dg.DagsterInstance,
                         run_config: dict, resources: dict, folder: str, desc: str, unit: str, what: str):
    """One Dagster run with a progress bar fed through the run tag PROGRESS_TAG (a JSON file
    under <store>/<folder>). Raises SystemExit with the reason when the run fails."""
    from assets.labels import PROGRESS_TAG

    progress = store.root / folder / f".progress-{os.getpid()}.json"
    progress.parent.mkdir(parents=True, exist_ok=True)
    with progress_bar(progress, desc, unit):
        result = dg.materialize(assets, selection=selection, instance=instance, resources=resources,
                                run_config={**run_config, **QUIET}, tags={PROGRESS_TAG: str(progress)},
                                raise_on_error=False)
    if not result.success:
        raise SystemExit(f"chess-pipeline: {what} failed: {failure_message(result)}")
    return result


def label_positions(store: Store, instance: dg.DagsterInstance, config: dict, workers: int = 0) -> dict:
    """Materialise `labels` once with this LabelsConfig (as a dict); returns its metadata
    and check results. Raises SystemExit with the reason when the run fails."""
    from assets.labels import labels

    result = materialize_with_bar([labels], None, store, instance, {"ops": {"labels": {"config": config}}},
                                  _resources(store, workers), "labels",
                                  "re-label" if config.get("relabel") else "label", "position", "labelling")
    mat = result.get_asset_materialization_events()[0].materialization
    out = {k: v.value for k, v in mat.metadata.items() if not isinstance(v.value, str) or len(v.value) < 200}
    out["checks"] = {e.asset_check_evaluation_data.check_name: e.asset_check_evaluation_data.passed
                     for e in result.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"}
    return out


def failure_message(result) -> str:
    """The user-code error behind a failed run (Dagster wraps it in its own error)."""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            while error.cause is not None:
                error = error.cause
            return error.message.strip()
    return "run failed (see the Dagster UI for the run's logs)"


def _print_table(table, fmt: str) -> None:
    if fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, sys.stdout.buffer)
        sys.stdout.flush()
    elif fmt == "json":
        print(json.dumps(table.to_pylist(), default=_json_default, indent=1))
    else:
        import polars as pl

        with pl.Config(tbl_rows=200, tbl_cols=30, fmt_str_lengths=60, tbl_width_chars=200):
            print(pl.from_arrow(table))


def _json_default(v):
    if isinstance(v, bytes):
        return v.hex()
    return str(v)


def cmd_ingest(args) -> None:
    store = _store(args)
    instance = _instance(store)
    keys = []
    for path in _expand(args.paths):
        keys.append(store.add_archive(path, copy=args.copy))
    for s in ingest_keys(store, instance, keys, workers=args.workers):
        print(f"{s['archive']}: {s['games']} games, {s['rejected']} rejected, {s['positions']} positions "
              f"({s['plies_per_second']:,} plies/s, {s['bytes_per_position']} bytes/position)")
    duck.create_views(store)


def cmd_demo(args) -> None:
    store = _store(args)
    instance = _instance(store)
    if not store.find_archives():
        out = store.archives_dir / "selfplay-sample.pgn"
        print(f"no archives in {store.archives_dir}: making a sample archive by Stockfish self-play ({args.games} games)")
        bar = tqdm(total=args.games, unit="game", desc="self-play", disable=None)
        play_games(find_stockfish(), out, SelfPlayConfig(games=args.games),
                   progress=lambda done, total: bar.update(1))
        bar.close()
    keys = sorted(store.find_archives())
    ingest_keys(store, instance, keys, workers=args.workers)
    from assets.ingest import duckdb_views

    dg.materialize([duckdb_views], instance=instance, resources=_resources(store), run_config=QUIET)
    _print_label_summary(label_positions(store, instance, {}, workers=args.workers))
    # The sample is small: a fifth of its games each for val and test, so neither is empty.
    cmd_datasets(argparse.Namespace(home=str(store.root), names=[], seed=None, val_fraction=0.2, test_fraction=0.2))
    cmd_train(argparse.Namespace(home=str(store.root), models=[], profile="quick", epochs=0, device="auto"))
    cmd_evaluate(argparse.Namespace(home=str(store.root), models=["mlp_bitmap_3class"], suites=None, quick=True,
                                    depths=None, openings=None, only=None))
    print(f"store: {store.root}")
    _print_table(duck.query(store, "SELECT * FROM archive_summary"), "table")
    print(f"query it: chess-pipeline sql \"SELECT source, count(*) FROM games GROUP BY source\"  "
          f"or  duckdb -readonly {store.duckdb_path}")


def _print_label_summary(m: dict) -> None:
    print(f"labels ({m['engine']}, {m['limit']}, {m['mode']}): {m['labelled']:,} labelled, {m['failed']:,} failed "
          f"in {m['seconds']:,}s ({m['positions_per_second']:,} positions/s on {m['engines']} engine(s)); "
          f"coverage {m['coverage']:.2%} of {m['distinct_positions']:,} distinct positions "
          f"({m['positions']:,} positions, {m['repeat_share']:.1%} repeats)")
    failed = [k for k, ok in m["checks"].items() if not ok]
    if failed:
        print(f"checks not passed: {', '.join(failed)}")


def cmd_label(args) -> None:
    store = _store(args)
    instance = _instance(store)
    if args.static:
        limit, value = "static", 0
    elif args.nodes:
        limit, value = "nodes", args.nodes
    else:
        limit, value = "depth", args.depth
    config = {"limit": limit, "value": value, "max_positions": args.limit, "max_minutes": args.minutes,
              "relabel": args.relabel, "order": args.order, "retry_failed": args.retry_failed}
    _print_label_summary(label_positions(store, instance, config, workers=args.workers))
    duck.create_views(store)


def _materialize_all(assets: list, names: list[str], config: dict, store: Store, instance: dg.DagsterInstance,
                     what: str):
    """One Dagster run materialising the named assets, each with the same config."""
    run_config = {"ops": {n: {"config": config} for n in names}, **QUIET}
    result = dg.materialize(assets, selection=names, instance=instance, resources=_resources(store),
                            run_config=run_config, raise_on_error=False)
    if not result.success:
        raise SystemExit(f"chess-pipeline: {what} failed: {failure_message(result)}")
    return result


def cmd_datasets(args) -> None:
    from assets.datasets import dataset_assets
    from pipeline.datasets import DATASETS, SPLITS

    names = args.names or list(DATASETS)
    unknown = [n for n in names if n not in DATASETS]
    if unknown:
        raise SystemExit(f"chess-pipeline datasets: no dataset {', '.join(unknown)}; known: {', '.join(DATASETS)}")
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
    result = _materialize_all(dataset_assets, names, config, store, instance, "datasets")
    checks = {}
    for e in result.get_asset_check_evaluations():
        checks.setdefault(e.asset_key.to_user_string(), []).append((e.check_name, e.passed))
    for mat in result.get_asset_materialization_events():
        m = {k: v.value for k, v in mat.materialization.metadata.items()}
        name = mat.materialization.asset_key.to_user_string()
        rows = ", ".join(f"{s} {m[f'rows_{s}']:,}" for s in SPLITS)
        removed = ", ".join(f"{s} {m[f'removed_by_guard_{s}']:,}" for s in SPLITS)
        failed = [c for c, ok in checks.get(name, []) if not ok]
        print(f"{name}: {rows} (leakage guard removed {removed}); label coverage {m['label_coverage']:.2%}"
              + (f"; checks not passed: {', '.join(failed)}" if failed else ""))
    duck.create_views(store)


def cmd_train(args) -> None:
    from assets.training import MODELS, model_assets

    names = args.models or ["mlp_bitmap_3class"]
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        raise SystemExit(f"chess-pipeline train: no model {', '.join(unknown)}; known: {', '.join(MODELS)}")
    store = _store(args)
    instance = _instance(store)
    config = {"profile": args.profile, "device": args.device}
    if args.epochs:
        config["epochs"] = args.epochs
    result = _materialize_all(model_assets, names, config, store, instance, "training")
    for mat in result.get_asset_materialization_events():
        m = {k: v.value for k, v in mat.materialization.metadata.items()}
        name = mat.materialization.asset_key.to_user_string()
        score = (f"test accuracy {m['test_accuracy']:.2%} (majority class {m['majority_class_accuracy']:.2%})"
                 if "test_accuracy" in m else f"test MSE {m['test_mse']:.5f}, cp MAE {m['test_cp_mae']:.0f}")
        print(f"{name}: {score} on {m['rows_test']:,} test positions; {m['epochs']} epochs on {m['rows_train']:,} "
              f"rows in {m['seconds']:.0f}s ({m['train_positions_per_second']:,} positions/s, {m['device']}); "
              f"published: {m['published']}")
    from assets.training import model_results

    dg.materialize([model_results], instance=instance, resources=_resources(store), run_config=QUIET)
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
        raise SystemExit(f"chess-pipeline evaluate: not trained yet: {', '.join(untrained) or 'any model'} "
                         f"(chess-pipeline train ...)")
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
    materialize_with_bar(evaluation_assets, selection, store, instance, {"ops": ops}, _resources(store),
                         "evaluation_results", "evaluate", "step", "evaluation")
    duck.create_views(store)
    rows = duck.query(store, "SELECT model, suite, metric, round(value, 4) AS value, n FROM evaluation_results "
                             "WHERE model IN (SELECT unnest($models)) AND suite NOT LIKE '%/%' "
                             "ORDER BY model, suite, metric", params={"models": names})
    _print_table(rows, "table")
    print(f"reports: {store.root / 'reports' / 'evaluation'}")


def cmd_sql(args) -> None:
    store = _store(args)
    try:
        table = duck.query(store, args.query)
    except Exception as e:  # duckdb's errors carry the position in the query
        raise SystemExit(f"chess-pipeline sql: {e}")
    _print_table(table, args.format)


def cmd_report(args) -> None:
    store = _store(args)
    try:
        sql = duck.load_sql(f"reports/{args.name}")
    except FileNotFoundError:
        raise SystemExit(f"chess-pipeline report: no report {args.name!r}; see sql/reports/")
    _print_table(duck.query(store, sql), args.format)


def cmd_ui(args) -> None:
    store = _store(args)
    _instance(store)
    workspace = Path(__file__).resolve().parent.parent / "workspace.yaml"
    env = {**os.environ, "CHESS_PIPELINE_HOME": str(store.root)}
    cmd = ["dagster", "dev", "-w", str(workspace), "-h", "127.0.0.1", "-p", str(args.port)]
    print(" ".join(cmd), file=sys.stderr)
    raise SystemExit(subprocess.call(cmd, env=env, cwd=workspace.parent))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="chess-pipeline", description="PGN archives -> position store -> evaluators")
    p.add_argument("--home", help="store root (default: $CHESS_PIPELINE_HOME, else ./store)")
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
    s.add_argument("--relabel", action="store_true",
                   help="re-label positions whose labels fall short of this setting (what the nightly job does)")
    s.add_argument("--order", choices=("first_seen", "oldest", "most_used"), default="first_seen",
                   help="which positions first when re-labelling under a bound")
    s.add_argument("--retry-failed", action="store_true", help="try positions recorded as failed again")
    s.set_defaults(func=cmd_label)

    s = sub.add_parser("datasets", help="materialise training sets (sql/datasets/) with train/val/test splits")
    s.add_argument("names", nargs="*", help="datasets to build (default: all)")
    s.add_argument("--seed", type=int, default=None, help="seed of the split by game (default 0)")
    s.add_argument("--val-fraction", type=float, default=None, help="share of games in val (default 0.1)")
    s.add_argument("--test-fraction", type=float, default=None, help="share of games in test (default 0.1)")
    s.add_argument("--split-by", choices=("game", "position"),
                   help="game (default), or position: rows split one by one, as the thesis did (for comparison)")
    s.add_argument("--no-leakage-guard", action="store_true",
                   help="keep test and val positions in train (for comparison with the published splits)")
    s.set_defaults(func=cmd_datasets)

    s = sub.add_parser("train", help="train value networks from the datasets (default: the 3-class MLP)")
    s.add_argument("models", nargs="*", help="model assets to train (default: mlp_bitmap_3class)")
    s.add_argument("--profile", choices=("quick", "full"), default="quick",
                   help="quick: a few CPU minutes; full: the published schedules")
    s.add_argument("--epochs", type=int, default=0, help="override the profile's epochs")
    s.add_argument("--device", default="auto", help="auto, cpu or cuda")
    s.set_defaults(func=cmd_train)

    s = sub.add_parser("evaluate", help="test suites, matches and Elo of trained models (default: all trained)")
    s.add_argument("models", nargs="*", help="model assets to evaluate (default: every trained one)")
    s.add_argument("--suites", help="folder of .epd suites (default: $CHESS_PIPELINE_SUITES, else <home>/suites)")
    s.add_argument("--quick", action="store_true",
                   help="a first look: 100 positions a suite at 1 ply, 4 openings, fewer opponents")
    s.add_argument("--depths", type=int, nargs="+", help="search depths for the suites (default: 1 2)")
    s.add_argument("--openings", type=int, help="openings per match, each played with both colours (default: 20)")
    s.add_argument("--only", choices=("suites", "matches"), help="run only the suites or only the matches (and Elo)")
    s.set_defaults(func=cmd_evaluate)

    s = sub.add_parser("sql", help="run SQL over the store (views: games, rejected_games, positions, archive_summary, "
                                   "labels, best_labels, labelled_positions, label_failures, datasets, model_metrics, "
                                   "evaluation_results, match_games)")
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


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    args.func(args)


if __name__ == "__main__":
    main()
