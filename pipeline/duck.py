"""DuckDB over the store: views from sql/views, ad-hoc queries, reports."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.store import Store, atomic_path

VIEW_ORDER = ("macros", "games", "rejected_games", "positions", "archives", "distinct_positions",
              "labels", "label_failures", "best_labels", "labelled_positions", "label_macros", "datasets",
              "model_metrics", "evaluation_results")
SCHEMA_FILE = "_schema.parquet"
_PLACEHOLDER = re.compile(r"\{\{parquet:([a-z_]+)\}\}")


def load_sql(name: str) -> str:
    """Text of sql/<name>.sql, e.g. load_sql('views/games')."""
    return resources.files("sql").joinpath(f"{name}.sql").read_text(encoding="utf-8")


def sql_string_literal(value: str) -> str:
    """A SQL string literal. Only for DDL, where DuckDB accepts no bound parameters
    (the file globs inside CREATE VIEW); every query binds its values instead."""
    return "'" + value.replace("'", "''") + "'"


def table_schemas() -> dict[str, pa.Schema]:
    """The Parquet tables of the store and their schemas."""
    from pipeline.games import GAMES_SCHEMA, POSITIONS_SCHEMA, REJECTED_SCHEMA
    from pipeline.datasets import SCHEMA as DATASETS_SCHEMA  # these modules import this one
    from pipeline.labels import FAILURES_SCHEMA, LABELS_SCHEMA

    metrics = pa.schema([("model", pa.string()), ("dataset", pa.string()), ("split", pa.string()),
                         ("metric", pa.string()), ("value", pa.float64()), ("run_id", pa.string()),
                         ("materialised_at", pa.timestamp("us", tz="UTC"))])
    made = ("materialised_at", pa.timestamp("us", tz="UTC"))
    results = pa.schema([("model", pa.string()), ("suite", pa.string()), ("metric", pa.string()),
                         ("value", pa.float64()), ("n", pa.int64()), ("detail", pa.string()),
                         ("asset", pa.string()), ("run_id", pa.string()), made])
    games = pa.schema([("asset", pa.string()), ("match", pa.string()), ("white", pa.string()),
                       ("black", pa.string()), ("result", pa.string()), ("termination", pa.string()),
                       ("plies", pa.int32()), ("opening", pa.string()), ("round", pa.string()),
                       ("pgn_path", pa.string()), ("run_id", pa.string()), made])
    return {"games": GAMES_SCHEMA, "rejected_games": REJECTED_SCHEMA, "positions": POSITIONS_SCHEMA,
            "labels": LABELS_SCHEMA, "label_failures": FAILURES_SCHEMA, "datasets": DATASETS_SCHEMA,
            "model_metrics": metrics, "evaluation_results": results, "match_games": games}


def ensure_schema_files(store: Store) -> None:
    """A zero-row Parquet file per table, so the views bind before anything is written."""
    for table, schema in table_schemas().items():
        path = store.root / table / SCHEMA_FILE
        if path.exists() and pq.read_schema(path).equals(schema):
            continue
        with atomic_path(path) as tmp:
            pq.write_table(schema.empty_table(), tmp)


def view_sql(store: Store, name: str) -> str:
    def glob(m: re.Match) -> str:
        return sql_string_literal(str(store.root / m.group(1) / "**" / "*.parquet"))

    return _PLACEHOLDER.sub(glob, load_sql(f"views/{name}"))


def create_views(store: Store) -> Path:
    """(Re)create the DuckDB file with every view; returns its path.

    The new file is built beside the old one and renamed over it, so no writer ever opens
    the file readers have open: any number of `duckdb -readonly` sessions can stay open
    across runs (they keep the file they opened; views read the Parquet globs, so they see
    new data either way)."""
    store.ensure()
    ensure_schema_files(store)
    with atomic_path(store.duckdb_path) as tmp:
        tmp.unlink()  # DuckDB makes its own file; an empty one is not a database
        with duckdb.connect(str(tmp)) as con:
            create_views_in(con, store)
    return store.duckdb_path


def create_views_in(con: duckdb.DuckDBPyConnection, store: Store) -> None:
    for name in VIEW_ORDER:
        con.execute(view_sql(store, name))


def memory_connection(store: Store) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the store's views: no file, so no lock shared with anyone."""
    store.ensure()
    ensure_schema_files(store)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    create_views_in(con, store)
    return con


def connect(store: Store, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A connection to the store's DuckDB file (created on first use)."""
    if not store.duckdb_path.exists():
        create_views(store)
    return duckdb.connect(str(store.duckdb_path), read_only=read_only)


def query(store: Store, sql: str, params: list | dict | None = None) -> pa.Table:
    with connect(store) as con:
        return con.sql(sql, params=params).to_arrow_table()
