"""Stockfish labels for the distinct positions of the store, append-only and resumable.

A label setting is (engine name + version, limit kind, limit value). A distinct position is
(position_key, planes, side_to_move, castling, ep_square): the Zobrist key plus the full
position it stands for, so a key collision can never share a label. Clocks are not part of
it: each distinct position is searched once, from a FEN with halfmove clock 0.

Work is split into SHARDS shards by position_key (the labels asset's partitions). A run takes
a shard by locking it (`shard_lock`: flock on a local store, so a killed run releases it; a
lease object on an S3 store, where flock does not exist), labels what the shard still lacks,
and writes a new Parquet part every `flush_positions` labels or `flush_seconds`; a killed run
loses at most the part in hand and the next run picks those positions up again. Concurrent
runs of one setting, on one machine or many, skip each other's locked shards, so they split
the work without labelling anything twice.
"""

from __future__ import annotations

import fcntl
import logging
import math
import os
import re
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args

import duckdb
import pyarrow as pa

from pipeline.ingest.encoding import fens_from_columns
from pipeline.labels.engine import CP_BOUND, MATE_BOUND, EngineError, EnginePool, Evaluation, Failure, Job, Limit
from pipeline.progress import eta_seconds
from pipeline.store import storage
from pipeline.store.duck import load_sql, memory_connection, sql_string_literal
from pipeline.store.schemas import FAILURES_SCHEMA, LABELS_SCHEMA
from pipeline.store.storage import remove_stale_tmp as store_remove_stale_tmp
from pipeline.store.storage_leases import Lease
from pipeline.store.storage_paths import ObjectPath
from pipeline.store.store import Store
from pipeline.store.store_files import STALE_COPY_S, file_lock, write_parquet

log = logging.getLogger(__name__)
"""Warnings a run cannot report through its progress callback (stderr, unless logging is configured)."""
SHARDS = 16
SHARD_LEASE_TTL_S = 120.0
"""An S3 store's shard lease time by default (LabelRun.shard_lease_ttl_s): renewed every third
of this while held; a killed holder's shard is free again this long after its last renewal."""
SHARD_LEASE_MIN_TTL_S = 10.0
"""The shortest shard lease time a run may choose: its renewal (a PUT every third of it) must
reach the object store well within it, even on a loaded machine."""
Order = Literal["first_seen", "oldest", "most_used"]
ORDERS: tuple[str, ...] = get_args(Order)


@dataclass(frozen=True)
class Setting:
    """What produced a label: the engine's `id name`, the search limit, and whether the
    engine's hash was cleared before each position (column `hash_cleared`).

    hash_cleared (the default) gives reproducible labels: the same FEN, engine and limit
    give the same label whatever the order or the number of engines. The hash-kept mode
    (hash_cleared=False, EnginePool(clear_hash=False)) is faster, but a label depends on
    what its engine searched before; it is a setting of its own (slug suffix `_hash-kept`,
    its own folders, locks and pending positions) and never counts as the other's label.
    Static evaluations do not use the hash: they are always the reproducible setting."""

    engine: str
    limit: Limit
    hash_cleared: bool = True

    def __post_init__(self):
        if self.limit.kind == "static":
            object.__setattr__(self, "hash_cleared", True)

    @classmethod
    def of(cls, pool: EnginePool, limit: Limit) -> Setting:
        """The setting a pool's labels under `limit` belong to."""
        return cls(pool.name, limit, pool.clear_hash)

    @property
    def slug(self) -> str:
        name = re.sub(r"[^a-z0-9.]+", "-", self.engine.lower()).strip("-") or "engine"
        return f"{name}_{self.limit.slug}" + ("" if self.hash_cleared else "_hash-kept")

    def params(self) -> dict:
        """The setting as the bound parameters of sql/queries/*label*.sql. A row matches the
        mode when its hash_cleared equals it, or is NULL (failures recorded before the
        column existed), or the limit is static."""
        return {
            "engine": self.engine,
            "limit_kind": self.limit.kind,
            "limit_value": self.limit.value,
            "hash_cleared": self.hash_cleared,
        }

    def __str__(self) -> str:
        return f"{self.engine}, {self.limit}" + ("" if self.hash_cleared else ", hash kept")


@dataclass
class LabelProgress:
    done: int
    failed: int
    total: int
    """The positions this run was asked for: min(pending, max_positions); with a time bound,
    what the current rate gets through by then (the run's last report: what it did).
    0 until the pending positions are counted (beside the first query)."""
    seconds: float
    shard: str
    budget_left_s: float | None = None
    """Seconds left of the run's time bound (max_seconds); None without one."""
    retried: int = 0
    """Tries that failed and were tried again so far (EnginePool.retried, this run's)."""
    engine_restarts: int = 0
    """Engines restarted so far (crashed, hung or out of step), this run's."""

    @property
    def retries_text(self) -> str:
        """ ", or ", 3 retried (2 engine restarts)": what a summary line adds after its counts."""
        return retries_text(self.retried, self.engine_restarts)

    @property
    def rate(self) -> float:
        return self.done / self.seconds if self.seconds > 0 else 0.0

    @property
    def eta_seconds(self) -> float | None:
        """None until the total is known (it is counted while labelling starts); never
        beyond the end of the run's time bound."""
        return eta_seconds(self.done + self.failed, self.total, self.rate, self.budget_left_s)


def retries_text(retried: int, engine_restarts: int) -> str:
    """ ", 3 retried (2 engine restarts)" for the counts of a run's summary line; "" when both are 0."""
    if not retried and not engine_restarts:
        return ""
    restarts = f" ({engine_restarts:,} engine restart{'' if engine_restarts == 1 else 's'})" if engine_restarts else ""
    return f", {retried:,} retried{restarts}"


def planned_total(pending: int, run: LabelRun, handled: int, seconds: float, budget_left_s: float | None) -> int:
    """The positions a run is asked for: pending ones, at most max_positions; under a time
    bound, at most what the rate so far (`handled` in `seconds`) gets through in the time left."""
    total = min(pending, run.max_positions) if run.max_positions > 0 else pending
    if budget_left_s is not None and handled > 0 and seconds > 0:
        total = min(total, handled + int(handled / seconds * max(0.0, budget_left_s)))
    return total


@dataclass
class LabelStats:
    setting: str = ""
    labelled: int = 0
    failed: int = 0
    pending_before: int = 0
    seconds: float = 0.0
    engine_restarts: int = 0
    retried: int = 0
    """Tries that failed and were tried again (the positions then labelled or, after every try,
    recorded as failed)."""
    shards_done: list[int] = field(default_factory=list)
    shards_busy: list[int] = field(default_factory=list)
    parts_written: int = 0
    stopped_by: str = ""
    """'' when everything pending was labelled, else 'max_positions' or 'max_seconds'."""
    failure_reasons: dict[str, int] = field(default_factory=dict)
    score_sample: list[int] = field(default_factory=list)

    @property
    def positions_per_second(self) -> float:
        return self.labelled / self.seconds if self.seconds > 0 else 0.0


@dataclass(frozen=True)
class LabelRun:
    """One labelling run's choices (engine settings live on the pool)."""

    limit: Limit = Limit()
    relabel: bool = False
    """False: label positions with no label for this setting. True: re-label positions
    whose labels all fall short of it (shallower, or by another engine version)."""
    order: Order = "first_seen"
    """Re-labelling order: oldest (newest label oldest first) or most_used."""
    max_positions: int = 0
    """Stop handing out positions after this many (0: no bound)."""
    max_seconds: float = 0.0
    """Stop handing out positions after this long (0: no bound)."""
    retry_failed: bool = False
    """Try positions again that earlier runs recorded as failed for this setting."""
    shards: tuple[int, ...] = tuple(range(SHARDS))
    archives: tuple[str, ...] = ()
    """Only positions that occur in these archive partitions (by key); empty: the whole store."""
    flush_positions: int = 5000
    flush_seconds: float = 60.0
    run_id: str = ""
    shard_lease_ttl_s: float = SHARD_LEASE_TTL_S
    """S3 store only: seconds a shard's lease lasts without renewal (renewed every third of it
    while held); a killed run's shards are free again this long after its last renewal. At
    least 10 (SHARD_LEASE_MIN_TTL_S)."""

    def __post_init__(self):
        if self.order not in ORDERS:
            raise ValueError(f"order must be one of {ORDERS}, got {self.order!r}")
        ttl = self.shard_lease_ttl_s
        if not (isinstance(ttl, int | float) and math.isfinite(ttl) and ttl >= SHARD_LEASE_MIN_TTL_S):
            raise ValueError(
                f"shard_lease_ttl_s must be a number of seconds, at least {SHARD_LEASE_MIN_TTL_S:g} "
                f"(default {SHARD_LEASE_TTL_S:g}), got {ttl!r}"
            )
        bad = [s for s in self.shards if not 0 <= s < SHARDS]
        if bad:
            raise ValueError(f"shards must be in 0..{SHARDS - 1}, got {bad}")


TIMEOUT_FLOOR_S = 2.0
"""No search is given less than this: a depth-8 search or a static eval takes milliseconds,
and a loaded machine can stretch those tenfold without anything being wrong."""
TIMEOUT_MULTIPLE = 20
"""A search may take this many times the slowest calibration search before it is stopped."""
CALIBRATION_TIMEOUT_S = 60.0
"""Timeout of each calibration search itself, never the run's: a run's timeout is measured from
the calibration searches that finished (search_timeout)."""
CALIBRATION_FAILURES_PASSED_OVER = 1
"""Calibration searches that may fail (a crash, a malformed reply, a hang) and be passed over,
the timeout measured from the others; one more and the engine is refused."""
CALIBRATION_FENS = (
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
    "r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1",
    "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ - 0 1",
    "8/5pk1/6p1/8/3R4/6P1/5PKP/3r4 w - - 0 1",
)
"""Opening, a sharp middlegame (Kiwipete), a quiet middlegame and a rook endgame."""


@dataclass(frozen=True)
class SearchTimeout:
    seconds: float
    """The timeout to label with."""
    measured_s: float
    """The slowest calibration search that finished."""
    how: str
    failed: tuple[str, ...] = ()
    """Why each calibration search that failed (and was passed over) failed."""

    def __str__(self) -> str:
        return f"{self.seconds:g}s ({self.how})"


def search_timeout(pool: EnginePool, limit: Limit) -> SearchTimeout:
    """A timeout for searches under `limit` on this pool's engines, measured: the limit is run
    on CALIBRATION_FENS one at a time (each bounded by CALIBRATION_TIMEOUT_S, no retry), and a
    search may take TIMEOUT_MULTIPLE times the slowest of them, never less than TIMEOUT_FLOOR_S.
    A calibration search that fails is passed over (its reason in `how`), so the timeout is still
    measured from the others; more than CALIBRATION_FAILURES_PASSED_OVER failures raise
    EngineError: an engine that fails those searches cannot label. The pool's own timeout and
    retries are left as they were."""
    timeout, retries = pool.timeout_s, pool.retries
    pool.timeout_s, pool.retries = CALIBRATION_TIMEOUT_S, 0
    times: list[float] = []
    failed: list[str] = []
    try:
        for i, fen in enumerate(CALIBRATION_FENS):
            start = time.monotonic()
            results = list(pool.run([Job(("calibration", i), fen, fen.split()[1] == "w")], limit))
            if results and all(isinstance(r, Evaluation) for r in results):
                times.append(time.monotonic() - start)
                continue
            failed.append(re.sub(r"; \d+ tries$", "", results[0].reason) if results else "no result")
            if len(failed) > CALIBRATION_FAILURES_PASSED_OVER:
                break
    finally:
        pool.timeout_s, pool.retries = timeout, retries
    if len(failed) > CALIBRATION_FAILURES_PASSED_OVER or not times:
        raise EngineError(
            f"{pool.name or pool.path} failed {len(failed)} of {len(failed) + len(times)} calibration searches "
            f"({limit}): {' | '.join(failed)}; check the engine (the stockfish path), or give a search timeout "
            "(`label --timeout SECONDS`, the stockfish resource's timeout_s) to label without calibrating"
        )
    slowest = max(times)
    seconds = max(TIMEOUT_FLOOR_S, round(TIMEOUT_MULTIPLE * slowest, 1))
    how = (
        f"{TIMEOUT_MULTIPLE} x the slowest of {len(times)} calibration searches, {slowest * 1000:,.0f} ms"
        + (f"; floor {TIMEOUT_FLOOR_S:g}s" if seconds == TIMEOUT_FLOOR_S else "")
        + "".join(f"; a calibration search failed, passed over: {why}" for why in failed)
    )
    return SearchTimeout(seconds, slowest, how, tuple(failed))


def labels_dir(store: Store, setting: Setting) -> Path:
    return store.root / "labels" / setting.slug


def failures_dir(store: Store, setting: Setting) -> Path:
    return store.root / "label_failures" / setting.slug


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
    (_PartWriter.flush checks)."""
    if store.remote:  # an S3 store: a lease object, renewed while held (Store.lease)
        with store.lease(f"labels.{shard_lock_name(setting, shard)}", ttl_s) as lease:
            yield lease
        return
    with file_lock(store.root / "labels" / ".locks" / shard_lock_name(setting, shard), wait=False) as held:
        yield Lease(shard_lock_name(setting, shard), held)


def remove_stale_tmp(store: Store, setting: Setting) -> int:
    """Temporary part files left by killed runs of this setting (atomic_path holds a lock on
    each live one, so a free lock means a dead writer)."""
    return sum(
        store_remove_stale_tmp(d, min_age_s=STALE_COPY_S)
        for d in (labels_dir(store, setting), failures_dir(store, setting))
    )


class _PartWriter:
    """Buffers labels and failures; each flush writes one new part file per table, atomically."""

    def __init__(self, store: Store, setting: Setting, pool: EnginePool, run_id: str):
        self.store = store
        self.setting = setting
        self.pool = pool
        self.run_id = run_id
        self.labels: list[tuple] = []
        self.failures: list[tuple] = []
        self.parts = 0
        self.written: set[str] = set()
        """Every part this writer wrote (so a run tells its own parts from other writers')."""
        self.leases: list[Lease] = []
        """The shard leases the buffered rows were labelled under: a part is written only while
        every one is still held (an S3 lease can be lost; then the rows go, unwritten)."""

    def add(self, result: Evaluation | Failure) -> None:
        ident = result.job.id
        now = datetime.now(UTC)
        s = self.setting
        head = (*ident, result.job.fen, s.engine, s.limit.kind, s.limit.value)
        if isinstance(result, Failure):
            self.failures.append((*head, result.reason, result.attempts, now, self.run_id, s.hash_cleared))
        else:
            r = result
            self.labels.append(
                (
                    *head,
                    r.cp,
                    r.mate,
                    r.score,
                    r.best_move,
                    r.pv,
                    r.depth,
                    r.seldepth,
                    r.nodes,
                    r.time_ms,
                    self.pool.threads,
                    self.pool.hash_mb,
                    s.hash_cleared,
                    now,
                    self.run_id,
                )
            )

    def __len__(self) -> int:
        return len(self.labels) + len(self.failures)

    def flush(self) -> None:
        for lease in self.leases:
            if lease.lost:
                self.labels.clear()
                self.failures.clear()
                lease.check()  # raises LeaseLost: the worker that took the shard over labels them
        name = f"part-{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:12]}.parquet"
        for rows, schema, folder in (
            (self.failures, FAILURES_SCHEMA, failures_dir(self.store, self.setting)),
            (self.labels, LABELS_SCHEMA, labels_dir(self.store, self.setting)),
        ):
            if not rows:
                continue
            columns = list(zip(*rows))
            table = pa.Table.from_arrays([pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)
            write_parquet(folder / name, table)
            self.written.add(str(folder / name))
            self.parts += 1
            rows.clear()


def _jobs(reader: pa.RecordBatchReader) -> Iterator[Job]:
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
        return con.execute(sql, _relabel_params(setting, run, run.shards)).fetchall()[0][0]
    sql = f"SELECT count(*) FROM ({load_sql('queries/pending_labels').rstrip().rstrip(';')})"
    return con.execute(sql, _pending_params(setting, run, run.shards)).fetchall()[0][0]


def _pending_params(setting: Setting, run: LabelRun, shards) -> dict:
    return {
        **setting.params(),
        "shards": SHARDS,
        "shard_list": list(shards),
        "retry_failed": run.retry_failed,
        "archives": list(run.archives),
    }


def _relabel_params(setting: Setting, run: LabelRun, shards) -> dict:
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


class _PendingSnapshot:
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
                _pending_params(setting, run, run.shards),
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
        params = _pending_params(self.setting, self.run, [shard])
        return self.con.sql(load_sql("queries/pending_labels"), params=params).to_arrow_reader(4096)

    def close(self) -> None:
        Path(self.path).unlink(missing_ok=True)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def label_store(
    store: Store,
    pool: EnginePool,
    run: LabelRun,
    progress: Callable[[LabelProgress], None] | None = None,
    progress_every_s: float = 10.0,
) -> LabelStats:
    """Label (or re-label) the store's distinct positions with the pool's engine under run.limit.

    `pool` must be entered (`with EnginePool(...) as pool`); its engine's `id name` is the
    setting's engine. Returns counts; the labels are in labels/<setting>/part-*.parquet.
    """
    setting = Setting.of(pool, run.limit)
    stats = LabelStats(setting=str(setting))
    remove_stale_tmp(store, setting)
    writer = _PartWriter(store, setting, pool, run.run_id)
    start = time.monotonic()
    deadline = start + run.max_seconds if run.max_seconds > 0 else None
    handed = 0
    restarts_before, retried_before = pool.restarts, pool.retried
    last_report = last_flush = start

    def budget(jobs: Iterator[Job]) -> Iterator[Job]:
        nonlocal handed
        for job in jobs:
            if run.max_positions and handed >= run.max_positions:
                stats.stopped_by = "max_positions"
                return
            if deadline is not None and time.monotonic() >= deadline:
                stats.stopped_by = "max_seconds"
                return
            if any(lease.lost for lease in writer.leases):
                return  # no more work for a shard another worker took over; the flush raises LeaseLost
            handed += 1
            yield job

    def report(now: float, shard_name: str) -> LabelProgress:
        left = deadline - now if deadline is not None else None
        handled = stats.labelled + stats.failed
        total = planned_total(stats.pending_before, run, handled, now - start, left)
        if shard_name == "done" and stats.stopped_by == "max_seconds":
            total = handled  # what the time bound let this run do
        return LabelProgress(
            stats.labelled,
            stats.failed,
            total,
            now - start,
            shard_name,
            left,
            retried=pool.retried - retried_before,
            engine_restarts=pool.restarts - restarts_before,
        )

    def consume(results, shard_name: str) -> None:
        nonlocal last_report, last_flush
        try:
            for r in results:
                writer.add(r)
                if isinstance(r, Failure):
                    stats.failed += 1
                    reason = r.reason.split(";")[0]
                    stats.failure_reasons[reason] = stats.failure_reasons.get(reason, 0) + 1
                else:
                    stats.labelled += 1
                    if len(stats.score_sample) < 200_000:
                        stats.score_sample.append(r.score)
                now = time.monotonic()
                if len(writer) >= run.flush_positions or now - last_flush >= run.flush_seconds:
                    writer.flush()
                    last_flush = now
                if progress and now - last_report >= progress_every_s:
                    last_report = now
                    progress(report(now, shard_name))
        finally:
            writer.flush()  # what is done is kept, whatever stopped the run (short of SIGKILL)

    with memory_connection(store) as con, ExitStack() as locks:
        if run.relabel:
            leases = {s: locks.enter_context(shard_lock(store, setting, s, run.shard_lease_ttl_s)) for s in run.shards}
            held = [s for s, lease in leases.items() if lease]
            writer.leases = [leases[s] for s in held]
            stats.shards_busy = [s for s in run.shards if s not in held]
            if held:
                stats.pending_before = count_pending(con, setting, replace(run, shards=tuple(held)))
                params = _relabel_params(setting, run, held)
                reader = con.sql(load_sql("queries/relabel_candidates"), params=params).to_arrow_reader(4096)
                consume(pool.run(budget(_jobs(reader)), run.limit), "all")
                stats.shards_done = [] if stats.stopped_by else held
        else:
            # S3 store: one query of the store for every shard, read back shard by shard
            # (_PendingSnapshot); its row count is the total. Local store: a query per shard
            # (each is a local scan), the total counted beside the first one, not before it:
            # the engines start a fraction of a second sooner.
            snapshot = _PendingSnapshot(store, con, setting, run) if store.remote else None
            counter = cursor = None
            if snapshot is not None:
                stats.pending_before = snapshot.rows
            else:
                cursor = con.cursor()

                def count() -> None:
                    try:
                        stats.pending_before = count_pending(cursor, setting, run)
                    except Exception as e:  # the labelling goes on; only the total and the ETA are missing
                        log.warning(
                            "could not count the pending positions, so this run shows no total and no ETA: %s",
                            str(e).splitlines()[0] if str(e) else type(e).__name__,
                        )

                counter = threading.Thread(target=count, daemon=True)
                counter.start()
            try:
                for shard in run.shards:
                    if stats.stopped_by:
                        break
                    with shard_lock(store, setting, shard, run.shard_lease_ttl_s) as mine:
                        if not mine:
                            stats.shards_busy.append(shard)
                            continue
                        writer.leases = [mine]
                        if snapshot is not None:
                            reader = snapshot.reader(shard, writer.written)
                        else:
                            params = _pending_params(setting, run, [shard])
                            reader = con.sql(load_sql("queries/pending_labels"), params=params).to_arrow_reader(4096)
                        consume(pool.run(budget(_jobs(reader)), run.limit), f"{shard:02d}")
                        writer.leases = []
                        if not stats.stopped_by:
                            stats.shards_done.append(shard)
            finally:
                if snapshot is not None:
                    snapshot.close()
                if counter is not None:
                    counter.join()
                    cursor.close()
    stats.seconds = time.monotonic() - start
    stats.engine_restarts = pool.restarts - restarts_before
    stats.retried = pool.retried - retried_before
    stats.parts_written = writer.parts
    if progress:
        progress(report(start + stats.seconds, "done"))
    return stats


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
