"""DuckDB over the store: views from sql/views, ad-hoc queries, reports.

A store on S3 is read through fsspec's s3fs, registered on every connection this module opens
(`register_filesystem`; the PyPI duckdb wheel has no httpfs and nothing is downloaded at run
time), so the views' `s3://bucket/prefix/<table>/**/*.parquet` globs read it. The DuckDB file of
such a store stays local, in the store's cache folder (Store.local_dir, see pipeline/store/storage.py).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import threading
import weakref
from importlib import resources
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.store import storage
from pipeline.store.schemas import table_schemas
from pipeline.store.store import Store
from pipeline.store.store_files import atomic_path

VIEW_ORDER = (
    "store_guard",
    "macros",
    "games",
    "rejected_games",
    "positions",
    "position_book",
    "archives",
    "distinct_positions",
    "labels",
    "label_failures",
    "best_labels",
    "labelled_positions",
    "label_macros",
    "datasets",
    "model_metrics",
    "evaluation_results",
)
SCHEMA_FILE = "_schema.parquet"
_PLACEHOLDER = re.compile(r"\{\{(parquet:[a-z_]+|store_file|store_guard|views_version)\}\}")
_GLOB_SPECIAL = re.compile(r"([\[*?])")


def load_sql(name: str) -> str:
    """Text of sql/<name>.sql, e.g. load_sql('views/games')."""
    return resources.files("sql").joinpath(f"{name}.sql").read_text(encoding="utf-8")


def sql_string_literal(value: str) -> str:
    """A SQL string literal. Only for DDL, where DuckDB accepts no bound parameters
    (the file globs inside CREATE VIEW); every query binds its values instead."""
    return "'" + value.replace("'", "''") + "'"


def ensure_schema_files(store: Store) -> None:
    """A zero-row Parquet file per table, so the views bind before anything is written. Each
    is read whole (a few hundred bytes: one GET on S3, where an s3fs open costs a new client,
    a HEAD and ranged GETs)."""
    for table, schema in table_schemas().items():
        path = store.root / table / SCHEMA_FILE
        try:
            if pq.read_schema(pa.BufferReader(storage.read_bytes(path))).equals(schema):
                continue
        except FileNotFoundError:
            pass
        with atomic_path(path) as tmp:
            pq.write_table(schema.empty_table(), tmp)


def glob_escape(path: str) -> str:
    """`path` as a DuckDB file glob that matches that path only.

    DuckDB's globs have no backslash escape; a special character stands for itself inside
    brackets: `[` as `[[]`, `*` as `[*]`, `?` as `[?]` (checked against DuckDB 2.0: the
    store `store[2]` unescaped reads `store2`, `store*` reads every `store...`). A backslash
    cannot be matched at all, so such a path is refused rather than read wrongly."""
    if "\\" in path:
        raise ValueError(
            f"{path}: a store path with a backslash cannot be read by DuckDB's file globs; "
            "move the store to a folder without one"
        )
    return _GLOB_SPECIAL.sub(r"[\1]", path)


def store_file(store: Store) -> str:
    """The DuckDB file's own path as DuckDB reports it (symlinks resolved)."""
    return os.path.realpath(store.duckdb_path)


def view_sql(store: Store, name: str, in_file: bool = False) -> str:
    """The DDL of sql/views/<name>.sql for this store. `in_file`: for the store's chess.duckdb,
    whose Parquet views carry the guard that fails when the file was copied or moved away
    from this store (see store_guard.sql); in-memory sessions need no guard."""
    root = glob_escape(str(store.root) if store.remote else os.path.realpath(store.root))

    def fill(m: re.Match) -> str:
        what = m.group(1)
        if what.startswith("parquet:"):
            return sql_string_literal(f"{root}/{what.removeprefix('parquet:')}/**/*.parquet")
        if what == "store_file":
            return sql_string_literal(store_file(store)) if in_file else "NULL::VARCHAR"
        if what == "views_version":
            return sql_string_literal(views_version())
        return "chess_store_guard()" if in_file else "true"

    return _PLACEHOLDER.sub(fill, load_sql(f"views/{name}"))


def create_views(store: Store) -> Path:
    """(Re)create the DuckDB file with every view; returns its path.

    The new file is built beside the old one and renamed over it, so no writer ever opens
    the file readers have open: any number of `duckdb -readonly` sessions can stay open
    across runs (they keep the file they opened; views read the Parquet globs, so they see
    new data either way). The views read this store by absolute, glob-escaped paths and
    fail, saying so, when the file is opened from anywhere else (a copy or a moved store)."""
    if "?" in store_file(store):
        raise ValueError(
            f"{store.root}: DuckDB cannot keep a database file under a path with '?' (it reads the "
            "rest as options); move the store to a folder without one"
        )
    store.ensure()
    ensure_schema_files(store)
    with atomic_path(store.duckdb_path) as tmp:
        tmp.unlink()  # DuckDB makes its own file; an empty one is not a database
        with duckdb.connect(str(tmp)) as con:
            attach_storage(con, store)
            create_views_in(con, store, in_file=True)
    return store.duckdb_path


def attach_storage(con: duckdb.DuckDBPyConnection, store: Store) -> duckdb.DuckDBPyConnection:
    """Let con read the store and nothing from elsewhere: DuckDB's automatic install and load of
    known extensions off (a query naming e.g. iceberg_scan would otherwise download one and write
    it under ~/.duckdb), and an S3 store's s3fs filesystem registered (the store's reads need no
    extension: Parquet and JSON are built in)."""
    if not con.sql("SELECT current_setting('lock_configuration')").fetchall()[0][0]:  # else set before the lock
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
    if store.remote:
        con.register_filesystem(storage.fsspec_filesystem())
    return con


def create_views_in(con: duckdb.DuckDBPyConnection, store: Store, in_file: bool = False) -> None:
    for name in VIEW_ORDER:
        con.execute(view_sql(store, name, in_file))


def views_built_for(path: Path) -> tuple[str, str] | None:
    """(the DuckDB file path, the views' version) the views of the file at `path` were built
    for; None: no such file, or one from before the guard or the version."""
    try:
        with duckdb.connect(str(path), read_only=True) as con:
            return con.sql("SELECT chess_store_file(), chess_views_version()").fetchall()[0]
    except duckdb.Error:
        return None


@functools.cache
def views_version() -> str:
    """A digest of sql/views: a store's DuckDB file built from other views is built again."""
    digest = hashlib.sha256()
    for name in VIEW_ORDER:
        digest.update(load_sql(f"views/{name}").encode())
    return digest.hexdigest()[:16]


def refresh_views(store: Store) -> Path:
    """The store's DuckDB file, rebuilt first when it is missing, was built for another place
    (the store was copied or moved), so its views read this store, or from other views (an
    older version of the project's sql/views)."""
    if views_built_for(store.duckdb_path) != (store_file(store), views_version()):
        create_views(store)
    return store.duckdb_path


def memory_connection(store: Store) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB with the store's views: no file, so no lock shared with anyone."""
    store.ensure()
    ensure_schema_files(store)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    attach_storage(con, store)
    create_views_in(con, store)
    return con


def connect(store: Store, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A connection to the store's DuckDB file (built on first use, rebuilt when it was built
    for another place)."""
    return attach_storage(duckdb.connect(str(refresh_views(store)), read_only=read_only), store)


# Read-only queries ------------------------------------------------------------------------


class QueryRefused(ValueError):
    """A statement given to a read-only query interface would write or change settings."""


READ_PRAGMAS = frozenset(
    {
        "table_info",
        "show_tables",
        "show_tables_expanded",
        "show_databases",
        "database_list",
        "database_size",
        "storage_info",
        "show",
        "version",
        "platform",
        "functions",
        "collations",
        "user_agent",
        "metadata_info",
    }
)
"""PRAGMAs that only read (others change settings, and IMPORT DATABASE parses as a PRAGMA)."""

READ_NODES = frozenset({"SELECT_NODE", "SET_OPERATION_NODE", "RECURSIVE_CTE_NODE", "CTE_NODE"})
"""Query nodes of a statement that reads; `WITH d AS (DELETE ... RETURNING *) SELECT ...`
parses as a SELECT but holds a DELETE_QUERY_NODE."""

SIDE_EFFECT_FUNCTIONS = frozenset(
    {
        "enable_logging",
        "disable_logging",
        "truncate_duckdb_logs",
        "enable_profiling",
        "disable_profiling",
        "checkpoint",
        "force_checkpoint",
        "create_external_resource",
        "register_external_resource",
        "register_external_resource_type",
        "destroy_external_resource",
        "deregister_external_resource",
        "add_grammar_extension",
        "remove_grammar_extension",
        "nextval",
        # these run SQL text this check never sees
        "query",
        "json_execute_serialized_sql",
    }
)
"""Functions callable inside a SELECT that write files (enable_logging(storage = 'file', ...))
or change the session; refused by name, and the session's configuration is locked besides."""

READ_KINDS = "SELECT, WITH, FROM, VALUES, PIVOT, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN, PRAGMA table_info"
_LEADING = re.compile(r"(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*", re.S)
_EXPLAIN = re.compile(r"EXPLAIN\s+(?:ANALY[SZ]E\s+|\((?:[^()']|'[^']*')*\)\s*)?(.*)\Z", re.S | re.I)
_PRAGMA = re.compile(r"PRAGMA\s+([A-Za-z_]+)", re.I)


def _body(statement: duckdb.Statement) -> str:
    return statement.query[_LEADING.match(statement.query).end() :]


def _refuse(statement: duckdb.Statement, why: str) -> QueryRefused:
    words = _body(statement).split()
    head = " ".join(words[:3]) + (" ..." if len(words) > 3 else "") if words else statement.type.name
    return QueryRefused(
        f"refused `{head}`: {why}; only statements that read run here ({READ_KINDS}). "
        "To keep a result, redirect the output: --format csv > result.csv"
    )


def _walk(node, nodes: set, functions: set) -> None:
    if isinstance(node, dict):
        kind = node.get("type")
        if isinstance(kind, str) and kind.endswith("_NODE"):
            nodes.add(kind)
        name = node.get("function_name")
        if isinstance(name, str):
            functions.add(name.lower())
        for value in node.values():
            _walk(value, nodes, functions)
    elif isinstance(node, list):
        for value in node:
            _walk(value, nodes, functions)


def _check_select(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement) -> None:
    import json

    tree = json.loads(con.sql("SELECT json_serialize_sql($1::VARCHAR)", params=[statement.query]).fetchall()[0][0])
    if tree.get("error"):
        raise _refuse(statement, f"it could not be checked ({tree.get('error_message', 'not a plain query')})")
    nodes: set[str] = set()
    functions: set[str] = set()
    _walk(tree, nodes, functions)
    if nodes - READ_NODES:
        raise _refuse(
            statement,
            "it changes data inside a WITH ("
            + ", ".join(sorted(n.removesuffix("_QUERY_NODE") for n in nodes - READ_NODES))
            + ")",
        )
    if functions & SIDE_EFFECT_FUNCTIONS:
        raise _refuse(
            statement, f"{', '.join(sorted(functions & SIDE_EFFECT_FUNCTIONS))}() writes files or changes the session"
        )


WRITE_KEYWORDS = frozenset(
    {
        "insert",
        "update",
        "delete",
        "merge",
        "copy",
        "attach",
        "detach",
        "create",
        "drop",
        "alter",
        "set",
        "reset",
        "call",
        "export",
        "import",
        "load",
        "install",
        "truncate",
        "vacuum",
        "checkpoint",
        "pragma",
        "prepare",
        "execute",
        "use",
    }
)
_WORD = re.compile(r'"?([A-Za-z_][A-Za-z0-9_$]*)')


def _check_pivot(statement: duckdb.Statement) -> None:
    """A PIVOT without an IN list is a MULTI statement (DuckDB first makes an enum of the values
    it pivots on, in the session) that json_serialize_sql cannot show: its tokens must hold no
    keyword that writes and no function of SIDE_EFFECT_FUNCTIONS."""
    text = statement.query
    for start, kind in duckdb.tokenize(text):
        if kind not in (duckdb.token_type.keyword, duckdb.token_type.identifier):
            continue
        m = _WORD.match(text, start)
        word = m.group(1).lower() if m else ""
        if (kind == duckdb.token_type.keyword and word in WRITE_KEYWORDS) or word in SIDE_EFFECT_FUNCTIONS:
            raise _refuse(statement, f"a PIVOT holding {word.upper()} may write")


def _check(con: duckdb.DuckDBPyConnection, statement: duckdb.Statement, inner: bool = False) -> None:
    kind = statement.type
    if kind == duckdb.StatementType.SELECT:
        _check_select(con, statement)
    elif kind == duckdb.StatementType.EXPLAIN and not inner:
        m = _EXPLAIN.match(_body(statement))
        explained = duckdb.extract_statements(m.group(1)) if m else []
        if len(explained) != 1:
            raise _refuse(statement, "only EXPLAIN [ANALYZE] of one query is allowed")
        try:
            _check(con, explained[0], inner=True)
        except QueryRefused:
            raise _refuse(statement, "it explains (and with ANALYZE runs) a statement that writes") from None
    elif kind == duckdb.StatementType.MULTI and _body(statement)[:5].upper() == "PIVOT":
        _check_pivot(statement)
    elif kind == duckdb.StatementType.PRAGMA and not inner:
        m = _PRAGMA.match(_body(statement))
        if not m or m.group(1).lower() not in READ_PRAGMAS:
            raise _refuse(statement, "this PRAGMA changes settings or data")
    else:
        raise _refuse(statement, f"a {kind.name} statement writes data, files or settings")


def read_statement(con: duckdb.DuckDBPyConnection, sql: str) -> duckdb.Statement:
    """The one statement of `sql`, checked to only read; QueryRefused saying why otherwise.
    DuckDB classifies the statement (its parser's statement type; for a SELECT, its parse tree
    as json_serialize_sql gives it); the statement object checked is the one that runs."""
    statements = duckdb.extract_statements(sql)
    if not statements:
        raise QueryRefused("no statement given")
    for statement in statements:
        _check(con, statement)
    if len(statements) > 1:
        raise QueryRefused(f"{len(statements)} statements given; run one query per call")
    return statements[0]


_SHARED: dict[str, list] = {}
"""DuckDB file path -> [its configured read-only connection, how many of its cursors are out]."""
_SHARED_LOCK = threading.Lock()


def read_only_connection(store: Store) -> duckdb.DuckDBPyConnection:
    """The store's DuckDB file, opened read-only with its configuration locked (no SET, no
    logging or profiling to files), after refresh_views made sure its views read this store.
    (An in-memory session building the views afresh reads the same but costs about 1 s more
    on a store of 200 archives: every view binds its Parquet footers.)

    DuckDB keeps one database instance per file within a process, and `lock_configuration` is
    a setting of that instance, while the progress bar is one of each connection: a second
    connection to a locked instance could not turn its progress bar off (it prints into the
    `sql` output). So each file has one hidden connection per process, configured once (progress
    bar off, the store's filesystem registered, configuration locked), and every caller gets a
    cursor of it (a connection of its own to the same instance, with those settings). The hidden
    one is closed once the last cursor handed out is garbage-collected (CPython: when its last
    reference goes), so the instance is let go as before."""
    if "?" in store_file(store):  # no DuckDB file can live there (create_views): views in memory
        con = memory_connection(store)
        con.execute("SET lock_configuration = true")
        return con
    path = str(refresh_views(store))
    with _SHARED_LOCK:
        shared = _SHARED.get(path)
        if shared is None:
            base = attach_storage(duckdb.connect(path, read_only=True), store)
            if not base.sql("SELECT current_setting('lock_configuration')").fetchall()[0][0]:
                base.execute("SET enable_progress_bar = false")  # else locked by a connection
                base.execute("SET lock_configuration = true")  # opened otherwise: as it is
            shared = _SHARED[path] = [base, 0]
        con = shared[0].cursor()
        shared[1] += 1
    weakref.finalize(con, _release_shared, path, shared)
    return con


def _release_shared(path: str, shared: list) -> None:
    """One cursor of the file's hidden connection is gone; the last one closes that connection."""
    with _SHARED_LOCK:
        shared[1] -= 1
        if shared[1] == 0:
            if _SHARED.get(path) is shared:
                del _SHARED[path]
            shared[0].close()


def query(store: Store, sql: str, params: list | dict | None = None) -> pa.Table:
    """The result of one query that reads (see read_statement) over this store's views."""
    with read_only_connection(store) as con:
        statement = read_statement(con, sql)
        try:
            return con.sql(statement, params=params).to_arrow_table()
        except duckdb.Error as e:
            unavailable = storage_error(e, store)
            if unavailable is None:
                raise
            raise unavailable from e


def storage_error(e: duckdb.Error, store: Store) -> storage.StoreUnavailable | None:
    """An S3 store's read that failed inside DuckDB (its message is the Python traceback of the
    registered filesystem) as one line naming the settings to check; None for other errors."""
    lines = [line.strip() for line in str(e).splitlines() if line.strip()]
    if not store.remote or not lines or not lines[0].startswith("Traceback (most recent call last)"):
        return None
    s = storage.S3Settings.from_env()
    return storage.StoreUnavailable(
        f"{store.root}: reading from the S3 server at {s.where} failed ({lines[-1]}); check "
        f"{s.endpoint_setting}, AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY and that the bucket exists"
    )
