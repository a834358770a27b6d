"""Labels carried between stores: one Parquet file out (export_labels), checked and added in
(import_labels).

Labels are the expensive, deterministic part of the pipeline: a store on another machine that
holds the same games takes them from a file instead of labelling again. The file holds the
store's labels table as it is (every column of LABELS_SCHEMA: engine name and version, limit,
hash mode, scores, best move, PV, when and by which run), one row per distinct position and
setting, in a fixed order, plus the Parquet key EXPORT_KEY: the settings it holds and how many
labels of each. The same labels give the same bytes, so export -> import -> export round-trips.

An import is checked whole before anything is written, and refused in one line (ExchangeError:
what is wrong, on which row, and what to do) when the file is not such an export, a row's
setting is not one the file declares, a label fails the store's validation (check_label, the
score agreeing with cp / mate, the FEN the position's), a position is not in the store, or a
reproducible label differs from this store's label of the same position and setting (or was made
with other threads / hash than this store's labels of that setting): such labels were not made
with the setting they claim. Labels the store already has are skipped, so importing a file
twice adds nothing the second time. Each setting's new labels are one part file
labels/<setting>/part-*.parquet, all written under temporary names before any is renamed into
place, while every shard lock of those settings is held (no labelling run writes beside it).
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.ingest.encoding import fens_from_columns
from pipeline.labels.setting import SHARDS, Setting, labels_dir
from pipeline.labels.shards import shard_lock
from pipeline.labels.uci import Evaluation, Job, Limit, check_label, white_pov
from pipeline.store.duck import memory_connection
from pipeline.store.schemas import LABELS_SCHEMA
from pipeline.store.store import Store
from pipeline.store.store_files import PARQUET_OPTIONS, AtomicParquetWriter, atomic_path

EXPORT_KEY = b"chess_pipeline.labels"
"""The Parquet key-value metadata of an export: {"format": 1, "settings": [...], "labels": n}."""
FORMAT = 1
ROW_GROUP_ROWS = 1 << 17
"""Rows per row group of an export: fixed, so the same labels always give the same bytes."""
POSITION = ("position_key", "planes", "side_to_move", "castling", "ep_square")
SETTING = ("engine", "limit_kind", "limit_value", "hash_cleared")
DETERMINISTIC = ("cp", "mate", "score", "best_move", "pv", "depth", "seldepth", "nodes")
"""What a reproducible label is a function of its position and setting for (not the time taken)."""
EXPORT_AGAIN = "export the labels again from their store (`chess-pipeline labels export FILE`) and copy the whole file"
NOTHING = "nothing was imported"


class ExchangeError(ValueError):
    """A file that cannot be imported (or a store with nothing to export), said in one line."""


def _setting_of(engine: str, kind: str, value: int, hash_cleared: bool) -> Setting:
    return Setting(engine, Limit(kind, value), hash_cleared)


def _setting_key(s: Setting) -> tuple:
    return (s.engine, s.limit.kind, s.limit.value, s.hash_cleared)


@dataclass
class ExchangeStats:
    path: Path
    settings: dict[Setting, int] = field(default_factory=dict)
    """Labels of each setting in the file."""
    added: dict[Setting, int] = field(default_factory=dict)
    """Import: labels of each setting written to the store (the others it had already)."""

    @property
    def labels(self) -> int:
        return sum(self.settings.values())

    def settings_text(self, counts: dict[Setting, int] | None = None) -> str:
        counts = self.settings if counts is None else counts
        return "; ".join(f"{s}: {n:,}" for s, n in counts.items())


# Export --------------------------------------------------------------------------------------

_ORDER = ", ".join((*SETTING, *POSITION[:4], "ep_square NULLS FIRST"))
_ONE_PER_POSITION = (
    f"SELECT {', '.join(LABELS_SCHEMA.names)} FROM labels "
    f"QUALIFY row_number() OVER (PARTITION BY {', '.join((*SETTING, *POSITION))} "
    "ORDER BY labelled_at, run_id, depth DESC, nodes) = 1"
)


def export_labels(store: Store, path: Path) -> ExchangeStats:
    """Write every label of the store to `path` (atomically), one per distinct position and
    setting (a store holding a defective duplicate gives its first-made label), ordered by
    setting and position."""
    path = Path(path)
    stats = ExchangeStats(path)
    with memory_connection(store) as con:
        counts = con.execute(
            f"SELECT {', '.join(SETTING)}, count(*) FROM ({_ONE_PER_POSITION}) GROUP BY ALL "
            f"ORDER BY {', '.join(SETTING)}"
        ).fetchall()
        if not counts:
            raise ExchangeError(
                f"{store.root} holds no labels: nothing to export; label its positions first (`chess-pipeline label`)"
            )
        for engine, kind, value, cleared, n in counts:
            stats.settings[_setting_of(engine, kind, value, cleared is not False)] = n
        meta = {
            "format": FORMAT,
            "labels": stats.labels,
            "settings": [
                {"engine": e, "limit_kind": k, "limit_value": v, "hash_cleared": c, "labels": n}
                for e, k, v, c, n in counts
            ],
        }
        schema = LABELS_SCHEMA.with_metadata({EXPORT_KEY: json.dumps(meta, sort_keys=True).encode()})
        reader = con.sql(f"{_ONE_PER_POSITION} ORDER BY {_ORDER}").to_arrow_reader(ROW_GROUP_ROWS)
        writer = AtomicParquetWriter(path, schema, PARQUET_OPTIONS)
        try:
            for group in _row_groups(reader, schema):
                writer.write(group)
            writer.commit()
        except BaseException as e:
            writer.abort(e)
            raise
    return stats


def _row_groups(reader: pa.RecordBatchReader, schema: pa.Schema) -> Iterator[pa.Table]:
    """The reader's rows as tables of exactly ROW_GROUP_ROWS rows (the last one fewer), in
    `schema`, whatever batch sizes the query gave."""
    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in reader:
        held.append(batch)
        rows += batch.num_rows
        while rows >= ROW_GROUP_ROWS:
            table = pa.Table.from_batches(held).cast(schema)
            yield table.slice(0, ROW_GROUP_ROWS)
            rest = table.slice(ROW_GROUP_ROWS)
            held, rows = rest.to_batches(), rest.num_rows
    if rows:
        yield pa.Table.from_batches(held).cast(schema)


# Import --------------------------------------------------------------------------------------


def read_export(path: Path) -> tuple[pa.Table, dict[Setting, int]]:
    """The labels of an export file and the settings it declares, or ExchangeError saying why
    the file is not an export."""
    path = Path(path)
    if not path.is_file():
        raise ExchangeError(
            f"{path}: no such file; {NOTHING}: give the path of a file `chess-pipeline labels export` wrote"
        )
    try:
        file = pq.ParquetFile(path)
        meta = file.schema_arrow.metadata or {}
        table = file.read()
    except (pa.ArrowException, OSError) as e:
        raise ExchangeError(
            f"{path}: not a whole Parquet file ({str(e).splitlines()[0] if str(e) else type(e).__name__}); "
            f"{NOTHING}: {EXPORT_AGAIN}"
        ) from None
    if EXPORT_KEY not in meta:
        raise ExchangeError(
            f"{path}: a Parquet file, but not a labels export (no {EXPORT_KEY.decode()} metadata); {NOTHING}: "
            "make the file with `chess-pipeline labels export FILE`"
        )
    try:
        declared = json.loads(meta[EXPORT_KEY])
        if declared.get("format") != FORMAT:
            raise ExchangeError(
                f"{path}: labels export format {declared.get('format')!r}, this version reads format {FORMAT}; "
                f"{NOTHING}: export the labels with this version of chess-pipeline"
            )
        settings = {
            _setting_of(s["engine"], s["limit_kind"], s["limit_value"], s["hash_cleared"]): int(s["labels"])
            for s in declared["settings"]
        }
    except ExchangeError:
        raise
    except (ValueError, KeyError, TypeError) as e:
        raise ExchangeError(
            f"{path}: its {EXPORT_KEY.decode()} metadata is not what an export writes ({e}); {NOTHING}: {EXPORT_AGAIN}"
        ) from None
    for f in LABELS_SCHEMA:
        if f.name not in table.schema.names:
            raise ExchangeError(f"{path}: no column {f.name!r}, which every label has; {NOTHING}: {EXPORT_AGAIN}")
        got = table.schema.field(f.name).type
        if got != f.type:
            raise ExchangeError(f"{path}: column {f.name!r} is {got}, a label's is {f.type}; {NOTHING}: {EXPORT_AGAIN}")
    return table.select(LABELS_SCHEMA.names).cast(LABELS_SCHEMA), settings


def _refuse(path: Path, rows: list[int], table: pa.Table, what: str, why: str, todo: str) -> ExchangeError:
    """One line: `what` (a label ...) at the first of `rows`, with its FEN and setting, how many
    more there are, `why`, and `todo`."""
    i = rows[0]
    r = {name: table.column(name)[i].as_py() for name in ("fen", *SETTING)}
    limit = "static" if r["limit_kind"] == "static" else f"{r['limit_kind']} {r['limit_value']}"
    setting = f"{r['engine']}, {limit}" + (", hash kept" if r["hash_cleared"] is False else "")  # as str(Setting)
    more = f" and {len(rows) - 1:,} more like it" if len(rows) > 1 else ""
    return ExchangeError(f"{path}: {what}, row {i} ({r['fen']}; {setting}){more}: {why}; {NOTHING}: {todo}")


def _check_settings(path: Path, table: pa.Table, declared: dict[Setting, int]) -> list[Setting]:
    """Every row's setting, checked against what the file declares."""
    columns = [table.column(c).to_pylist() for c in SETTING]
    settings: list[Setting] = []
    made: dict[tuple, Setting | str] = {}
    for key in zip(*columns):
        s = made.get(key)
        if s is None:
            engine, kind, value, cleared = key
            try:
                if cleared is None:
                    raise ValueError("hash_cleared is missing")
                s = _setting_of(engine, kind, value, cleared)
                if _setting_key(s) != key:
                    raise ValueError(f"limit value {value} with limit {kind}")
                if s not in declared:
                    s = f"the file declares only {'; '.join(map(str, declared))}"
            except ValueError as e:
                s = f"not a label setting: {e}"
            made[key] = s
        if isinstance(s, str):
            bad = [j for j, k in enumerate(zip(*columns)) if made.get(k) == s]
            raise _refuse(path, bad, table, "a label of a setting the file does not declare", s, EXPORT_AGAIN)
        settings.append(s)
    counts = Counter(settings)
    for s, n in declared.items():
        if counts.get(s, 0) != n:
            raise ExchangeError(
                f"{path}: it declares {n:,} labels of {s} but holds {counts.get(s, 0):,}; {NOTHING}: {EXPORT_AGAIN}"
            )
    return settings


def _check_labels(path: Path, table: pa.Table, settings: list[Setting]) -> None:
    """Each label as the store validates what it writes (check_label), its score the one its
    cp / mate give, and its FEN the one its position columns give."""
    c = {name: table.column(name).to_pylist() for name in table.schema.names}
    fens = fens_from_columns(c["planes"], c["side_to_move"], c["castling"], c["ep_square"])
    problems: dict[str, list[int]] = {}
    for i, s in enumerate(settings):
        fen = c["fen"][i]
        white = c["side_to_move"][i] == "w"
        job = Job(i, fen, white)
        if fen != fens[i]:
            why = f"its FEN is not its position's ({fens[i]})"
        else:
            sign = 1 if white else -1
            cp, mate = c["cp"][i], c["mate"][i]
            ev = Evaluation(
                job,
                cp,
                mate,
                c["score"][i],
                c["best_move"][i],
                c["pv"][i],
                c["depth"][i],
                c["seldepth"][i],
                c["nodes"][i],
                c["time_ms"][i],
                1,
            )
            why = check_label(ev, s.limit)
            if (
                why is None
                and ev.score
                != white_pov(job, None if cp is None else sign * cp, None if mate is None else sign * mate)[2]
            ):
                why = f"score {ev.score} is not what cp {cp} / mate {mate} give"
        if why is not None:
            problems.setdefault(why, []).append(i)
    if problems:
        rows = sorted(i for bad in problems.values() for i in bad)
        first = next(why for why, bad in problems.items() if rows[0] in bad)
        raise _refuse(
            path,
            rows,
            table,
            "a label that fails the store's validation",
            first,
            f"{EXPORT_AGAIN}; a label is never changed by hand",
        )


def _check_against_store(store: Store, path: Path, table: pa.Table) -> pa.Array:
    """Positions the store must have, duplicates, and agreement with the store's labels of the
    same settings; returns a mask of the rows the store does not have yet."""
    with memory_connection(store) as con:
        con.register("f", table.append_column("row", pa.array(range(table.num_rows), pa.int64())))
        on = " AND ".join(f"x.{k} IS NOT DISTINCT FROM f.{k}" for k in POSITION)
        same = " AND ".join(f"x.{k} IS NOT DISTINCT FROM f.{k}" for k in (*POSITION, *SETTING))
        dup = con.execute(
            f"SELECT list(row ORDER BY row) FROM f GROUP BY {', '.join((*POSITION, *SETTING))} HAVING count(*) > 1"
        ).fetchall()
        if dup:
            rows = sorted(r for (group,) in dup for r in group[1:])
            raise _refuse(
                path,
                rows,
                table,
                "a label repeated",
                "one label per position and setting",
                EXPORT_AGAIN,
            )
        missing = [
            r for (r,) in con.execute(f"SELECT row FROM f ANTI JOIN positions x ON {on} ORDER BY row").fetchall()
        ]
        if missing:
            raise _refuse(
                path,
                missing,
                table,
                "a label of a position this store does not have",
                f"{store.root} has no game reaching it",
                "ingest the archives the labels were made from first (`chess-pipeline ingest PATH...`), "
                "then import again",
            )
        differ = con.execute(
            f"SELECT f.row, {', '.join(f'x.{k}, f.{k}' for k in DETERMINISTIC)} "
            f"FROM f JOIN labels x ON {same} WHERE f.hash_cleared AND f.limit_kind <> 'static' AND ("
            + " OR ".join(f"x.{k} IS DISTINCT FROM f.{k}" for k in DETERMINISTIC)
            + ") ORDER BY f.row"
        ).fetchall()
        # Static evaluations: score and cp / mate are the whole label.
        differ += con.execute(
            f"SELECT f.row, x.cp, f.cp, x.mate, f.mate FROM f JOIN labels x ON {same} "
            "WHERE f.limit_kind = 'static' AND (x.cp IS DISTINCT FROM f.cp OR x.mate IS DISTINCT FROM f.mate) "
            "ORDER BY f.row"
        ).fetchall()
        if differ:
            first = differ[0][1:]
            names = DETERMINISTIC if len(first) == 2 * len(DETERMINISTIC) else ("cp", "mate")
            what = next(
                f"{k} {first[2 * j]!r} in the store, {first[2 * j + 1]!r} in the file"
                for j, k in enumerate(names)
                if first[2 * j] != first[2 * j + 1]
            )
            raise _refuse(
                path,
                sorted(r[0] for r in differ),
                table,
                "a label that differs from this store's label of the same position and setting",
                f"{what}: a reproducible label is the same wherever it is made, "
                "so these were made with another setting",
                "label those positions here instead (`chess-pipeline label`)",
            )
        engines = con.execute(
            f"SELECT f.row, x.threads, x.hash_mb, f.threads, f.hash_mb FROM f "
            f"JOIN (SELECT DISTINCT {', '.join(SETTING)}, threads, hash_mb FROM labels) x "
            f"ON {' AND '.join(f'x.{k} = f.{k}' for k in SETTING)} "
            f"WHERE f.hash_cleared AND f.limit_kind <> 'static' "
            f"QUALIFY bool_and(x.threads IS DISTINCT FROM f.threads OR x.hash_mb IS DISTINCT FROM f.hash_mb) "
            f"OVER (PARTITION BY f.row) ORDER BY f.row"
        ).fetchall()
        if engines:
            row, threads, hash_mb, f_threads, f_hash = engines[0]
            raise _refuse(
                path,
                sorted({r[0] for r in engines}),
                table,
                "a label made with other engine options than this store's labels of its setting",
                f"threads {f_threads} and hash {f_hash} MB, this store's labels {threads} and {hash_mb} MB "
                "(a reproducible setting keeps them)",
                "import into a store without labels of that setting, "
                "or label those positions here (`chess-pipeline label`)",
            )
        have = {r for (r,) in con.execute(f"SELECT f.row FROM f SEMI JOIN labels x ON {same}").fetchall()}
    return pa.array([i not in have for i in range(table.num_rows)])


def import_labels(store: Store, path: Path) -> ExchangeStats:
    """Add the labels of an export file the store does not have yet, all of them or none
    (ExchangeError, one line, when any label cannot be taken). Holds every shard lock of the
    file's settings meanwhile: a labelling run of those settings must finish first."""
    path = Path(path)
    table, declared = read_export(path)
    stats = ExchangeStats(path, dict(declared))
    settings = _check_settings(path, table, declared)
    _check_labels(path, table, settings)
    with ExitStack() as locks:
        for s in declared:
            for shard in range(SHARDS):
                if not locks.enter_context(shard_lock(store, s, shard)):
                    raise ExchangeError(
                        f"{store.root}: shard {shard:02d} of {s} is being labelled by another run; {NOTHING}: "
                        "import when that run has finished"
                    )
        new = _check_against_store(store, path, table)
        stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-import-{uuid.uuid4().hex[:12]}"
        with ExitStack() as parts:  # every part under its temporary name first, then each renamed
            for s in declared:
                mask = pa.array([ok and t == s for ok, t in zip(new.to_pylist(), settings)])
                rows = table.filter(mask)
                stats.added[s] = rows.num_rows
                if rows.num_rows:
                    tmp = parts.enter_context(atomic_path(labels_dir(store, s) / f"part-{stamp}.parquet"))
                    pq.write_table(rows, tmp, **PARQUET_OPTIONS)
    return stats
