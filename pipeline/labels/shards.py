"""A setting's shards in the store: each shard's lock (a flock on a local store, a lease object
on an S3 store), the positions a shard still lacks labels for (or, re-labelling, the candidates),
read as Jobs, and the coverage and integrity of a setting's labels by shard.

On an S3 store a run reads every shard's pending positions with one query (PendingSnapshot) and
uses a shard's rows only while the store is as that query read it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import duckdb
import pyarrow as pa

from pipeline.ingest.encoding import fens_from_columns
from pipeline.labels.setting import SHARD_LEASE_TTL_S, SHARDS, LabelRun, Setting, failures_dir, labels_dir
from pipeline.labels.uci import CP_BOUND, MATE_BOUND, Job
from pipeline.store import storage
from pipeline.store.duck import load_sql, memory_connection, sql_string_literal
from pipeline.store.storage_leases import Lease
from pipeline.store.storage_paths import ObjectPath
from pipeline.store.store import Store
from pipeline.store.store_files import file_lock


def shard_lock_name(setting: Setting, shard: int) -> str:
    """The name of one shard's lock under the store's labels/.locks/ (one per setting and shard)."""
    return f"{setting.slug}.shard-{shard:02d}.lock"


@contextmanager
def shard_lock(store: Store, setting: Setting, shard: int, ttl_s: float = SHARD_LEASE_TTL_S) -> Iterator[Lease]:
    """Try to take one shard of one setting without waiting; yields a Lease, true when this
    process holds the shard. Held while the shard's pending positions are queried, labelled and
    written, so a run that takes the shard after it sees every label written under it (no
    position twice), whichever worker or machine it runs on.

    Local store: an `flock` on a file under the store root, dropped by the kernel when its
    holder dies, so a SIGKILLed run frees its shard at once. S3 store (flock does not exist
    there): the store's lease object (Store.lease), renewed every ttl_s/3 while held and free
    again ttl_s after a killed holder's last renewal (the holder's ttl_s, which the lease object
    records); a holder that learns it lost its lease stops before it writes another part
    (the labels run's part writer checks before each flush)."""
    if store.remote:  # an S3 store: a lease object, renewed while held (Store.lease)
        with store.lease(f"labels.{shard_lock_name(setting, shard)}", ttl_s) as lease:
            yield lease
        return
    with file_lock(store.root / "labels" / ".locks" / shard_lock_name(setting, shard), wait=False) as held:
        yield Lease(shard_lock_name(setting, shard), held)


def jobs_of(reader: pa.RecordBatchReader) -> Iterator[Job]:
    """The Jobs of a pending-positions query's rows: the position's columns as the id, its FEN."""
    for batch in reader:
        c = batch.to_pydict()
        fens = fens_from_columns(c["planes"], c["side_to_move"], c["castling"], c["ep_square"])
        for ident, fen in zip(
            zip(c["position_key"], c["planes"], c["side_to_move"], c["castling"], c["ep_square"]), fens
        ):
            yield Job(ident, fen, ident[2] == "w")


def count_pending(con: duckdb.DuckDBPyConnection, setting: Setting, run: LabelRun) -> int:
    if run.relabel:
        sql = f"SELECT count(*) FROM ({load_sql('queries/relabel_candidates').rstrip().rstrip(';')})"
        return con.execute(sql, relabel_params(setting, run, run.shards)).fetchall()[0][0]
    sql = f"SELECT count(*) FROM ({load_sql('queries/pending_labels').rstrip().rstrip(';')})"
    return con.execute(sql, pending_params(setting, run, run.shards)).fetchall()[0][0]


def pending_params(setting: Setting, run: LabelRun, shards) -> dict:
    return {
        **setting.params(),
        "shards": SHARDS,
        "shard_list": list(shards),
        "retry_failed": run.retry_failed,
        "archives": list(run.archives),
    }


def relabel_params(setting: Setting, run: LabelRun, shards) -> dict:
    return {
        **setting.params(),
        "shards": SHARDS,
        "shard_list": list(shards),
        "order": run.order,
        "max_positions": run.max_positions if run.max_positions > 0 else 1 << 62,
        "archives": list(run.archives),
    }


def _read_state(store: Store, setting: Setting) -> frozenset[tuple[str, str]]:
    """(object, ETag) of everything a pending query of `setting` reads on an S3 store: the
    positions and games partitions and the setting's label and failure parts (a LIST each, at once)."""
    folders = (store.root / "positions", store.root / "games", labels_dir(store, setting), failures_dir(store, setting))

    def listed(folder: ObjectPath) -> list[tuple[str, str]]:
        objects = storage.list_objects(folder)
        return [(str(ObjectPath(folder.bucket, o["Key"])), str(o.get("ETag", ""))) for o in objects]

    with ThreadPoolExecutor(len(folders)) as ex:
        return frozenset(item for items in ex.map(listed, folders) for item in items)


class PendingSnapshot:
    """An S3 store's pending positions of every shard of a run, from ONE query, in a local file.

    Over s3fs each query lists and opens every positions, games and label file again (a HEAD
    and ranged GETs per file), so one query per shard cost seconds each, whatever the number of
    positions. Here the store is read once, into a Parquet spool file (flock'ed while in use,
    so storage.remove_stale_tmp clears one a killed run left), and each shard's positions are
    read back from it. The store state the query read is recorded first (`_read_state`); a
    shard's rows are used only if, once its lease is held, that state is unchanged but for this
    run's own parts. Otherwise (another worker labelled, an archive was ingested meanwhile) the
    shard is queried again from the store, under its lease, as before: no label twice, none
    missed."""

    def __init__(self, store: Store, con: duckdb.DuckDBPyConnection, setting: Setting, run: LabelRun):
        self.store, self.con, self.setting, self.run = store, con, setting, run
        self.state = _read_state(store, setting)  # before the query: a later write shows as a change
        fd, self.path = tempfile.mkstemp(prefix=".pending-labels.", suffix=storage.TMP_SUFFIX, dir=storage.spool_dir())
        os.close(fd)
        self._fd: int | None = None
        try:
            pending = load_sql("queries/pending_labels").rstrip().rstrip(";")
            # A projection keeps the query's first-seen order (DuckDB preserves insertion order).
            con.execute(
                f"COPY (SELECT q.*, q.position_key % {SHARDS} AS shard FROM ({pending}) q) "
                f"TO {sql_string_literal(self.path)} (FORMAT parquet)",
                pending_params(setting, run, run.shards),
            )
            # DuckDB wrote a new file under the name: lock that one (the file is seconds old,
            # younger than the spool's stale age, so nothing removes it before).
            self._fd = os.open(self.path, os.O_RDONLY)
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            count = f"SELECT count(*) FROM read_parquet({sql_string_literal(self.path)})"
            self.rows: int = con.execute(count).fetchall()[0][0]
        except BaseException:
            self.close()
            raise

    def reader(self, shard: int, written: set[str]) -> pa.RecordBatchReader:
        """Shard `shard`'s pending positions (its lease held): from the snapshot while the store
        is as it was read, else from a new query of the store."""
        now = _read_state(self.store, self.setting)
        if {(key, etag) for key, etag in now if key not in written} == self.state:
            sql = (
                "SELECT position_key, planes, side_to_move, castling, ep_square, occurrences "
                f"FROM read_parquet({sql_string_literal(self.path)}) WHERE shard = $shard"
            )
            return self.con.sql(sql, params={"shard": shard}).to_arrow_reader(4096)
        params = pending_params(self.setting, self.run, [shard])
        return self.con.sql(load_sql("queries/pending_labels"), params=params).to_arrow_reader(4096)

    def close(self) -> None:
        Path(self.path).unlink(missing_ok=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _shard_params(shards: Iterable[int] | None) -> dict:
    """The bound parameters that restrict a query to some shards (None: all of them)."""
    return {"shards": SHARDS, "shard_list": list(range(SHARDS) if shards is None else shards)}


def coverage(store: Store, setting: Setting, shards: Iterable[int] | None = None) -> dict:
    """Positions, distinct positions, and how many of them this setting labelled or failed,
    in the given shards (None: the whole store)."""
    with memory_connection(store) as con:
        params = {**setting.params(), **_shard_params(shards)}
        row = con.execute(load_sql("queries/label_coverage"), params).fetchall()[0]
    positions, distinct, labelled, failed = row
    return {
        "positions": positions,
        "distinct_positions": distinct,
        "labelled": labelled,
        "failed": failed,
        "coverage": labelled / distinct if distinct else 1.0,
        "repeat_share": 1 - distinct / positions if positions else 0.0,
    }


def integrity(store: Store, setting: Setting, run_id: str = "", shards: Iterable[int] | None = None) -> dict:
    """Rows, duplicate labels and out-of-contract scores of one setting in the given shards
    (None: the whole store; out_of_range_this_run: those written by run_id; every label is
    validated before it is written, so only labels from before that validation, or a defect,
    can break the contract)."""
    with memory_connection(store) as con:
        rows, dups, bad, bad_now, lo, hi = con.execute(
            load_sql("queries/label_checks"),
            {
                **setting.params(),
                **_shard_params(shards),
                "run_id": run_id,
                "cp_bound": CP_BOUND,
                "mate_bound": MATE_BOUND,
            },
        ).fetchall()[0]
    return {
        "rows": rows,
        "duplicates": dups,
        "out_of_range": bad,
        "out_of_range_this_run": bad_now,
        "min_score": lo,
        "max_score": hi,
    }
