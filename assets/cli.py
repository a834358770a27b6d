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


def _resources(store: Store) -> dict:
    from assets.resources import StoreResource

    return {"store": StoreResource(root=str(store.root))}


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
    print(f"store: {store.root}")
    _print_table(duck.query(store, "SELECT * FROM archive_summary"), "table")
    print(f"query it: chess-pipeline sql \"SELECT source, count(*) FROM games GROUP BY source\"  "
          f"or  duckdb -readonly {store.duckdb_path}")


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

    s = sub.add_parser("sql", help="run SQL over the store (views: games, rejected_games, positions, archive_summary)")
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
