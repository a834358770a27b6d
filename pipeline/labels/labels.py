"""Stockfish labels for the distinct positions of the store, append-only and resumable.

A label setting, a run's choices and the store's shards are pipeline.labels.setting's; the shard
locks and the pending positions pipeline.labels.shards'; the search timeout
pipeline.labels.calibration's. This module runs the labelling and writes its parts.

Work is split into SHARDS shards by position_key (the labels asset's partitions). A run takes
a shard by locking it (`shard_lock`: flock on a local store, so a killed run releases it; a
lease object on an S3 store, where flock does not exist), labels what the shard still lacks,
and writes a new Parquet part every `flush_positions` labels or `flush_seconds`; a killed run
loses at most the part in hand and the next run picks those positions up again. Concurrent
runs of one setting, on one machine or many, skip each other's locked shards, so they split
the work without labelling anything twice.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

import pyarrow as pa

from pipeline.labels.pool import EnginePool
from pipeline.labels.setting import LabelRun, Setting, failures_dir, labels_dir
from pipeline.labels.shards import (
    PendingSnapshot,
    count_pending,
    jobs_of,
    pending_params,
    relabel_params,
    shard_lock,
)
from pipeline.labels.uci import Evaluation, Failure, Job
from pipeline.progress import eta_seconds
from pipeline.store.duck import load_sql, memory_connection
from pipeline.store.schemas import FAILURES_SCHEMA, LABELS_SCHEMA
from pipeline.store.storage import remove_stale_tmp as store_remove_stale_tmp
from pipeline.store.storage_leases import Lease
from pipeline.store.store import Store
from pipeline.store.store_files import STALE_COPY_S, write_parquet

log = logging.getLogger(__name__)
"""Warnings a run cannot report through its progress callback (stderr, unless logging is configured)."""


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
                params = relabel_params(setting, run, held)
                reader = con.sql(load_sql("queries/relabel_candidates"), params=params).to_arrow_reader(4096)
                consume(pool.run(budget(jobs_of(reader)), run.limit), "all")
                stats.shards_done = [] if stats.stopped_by else held
        else:
            # S3 store: one query of the store for every shard, read back shard by shard
            # (PendingSnapshot); its row count is the total. Local store: a query per shard
            # (each is a local scan), the total counted beside the first one, not before it:
            # the engines start a fraction of a second sooner.
            snapshot = PendingSnapshot(store, con, setting, run) if store.remote else None
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
                            params = pending_params(setting, run, [shard])
                            reader = con.sql(load_sql("queries/pending_labels"), params=params).to_arrow_reader(4096)
                        consume(pool.run(budget(jobs_of(reader)), run.limit), f"{shard:02d}")
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
