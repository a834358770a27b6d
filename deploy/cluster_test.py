"""`make cluster-test`: the cluster profile on this machine, with real servers, against the embedded one.

Starts Postgres (Dagster's runs, event logs, schedules), Redis (the Celery broker and result
backend), moto's S3 server, and Celery workers started with `dagster-celery worker start`: two
on the `stockfish` queue (the labels steps) and one on `dagster` (every other step). Then it
runs the pipeline through Dagster's own CLI (`dagster asset materialize -m assets.definitions`,
so the Definitions' Celery executor sends each step to the workers): two real archives from
../shared/data/pgn ingested (one run per archive partition, at once), the DuckDB views, labels
at depth 8 bounded to a few shards (a few thousand positions; one run per group of shards, at
once, so both stockfish workers get one), and one labelled dataset. It prints which worker ran
which step and each worker's task count (Celery's inspect stats), runs the same plan through
the embedded profile (SQLite instance, multiprocess executor, a local store) and compares: the
same games, positions and dataset rows, and the same labels for the same positions (the
reproducible label setting: hash cleared, one thread). Every server and worker it started is
stopped by its PID on the way out; the exit status is non-zero if any run or comparison failed.

The store of the cluster side is on the moto S3 server (`s3://chess-cluster/store`) when the
store supports S3 roots (pipeline/store/storage.py), else a temporary local folder every worker shares.

    .venv/bin/python -m deploy.cluster_test [--store auto|s3|local] [--keep] [--measure]

This module: the comparison, the scaling figures (--measure), the report and the command. Beside
it: deploy/cluster_setup.py (servers, workers, each profile's environment), deploy/cluster_runs.py
(the plan as Dagster runs), deploy/cluster_compare.py (what the runs left, compared; which worker
ran what), deploy/cluster_faults.py (the worker-kill check's step process).
"""

from __future__ import annotations

import argparse
import signal
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from deploy.cluster_compare import (
    Summary,
    check_routing,
    compare,
    label_rates,
    median,
    step_timings,
    steps_by_worker,
    summarize,
)
from deploy.cluster_runs import Plan, ingest, label_launches, run_plan, run_together
from deploy.cluster_setup import (
    DAGSTER_QUEUE,
    STOCKFISH_QUEUE,
    Cluster,
    ClusterTestFailed,
    Worker,
    cluster,
    embedded_env,
    worker_task_counts,
)
from deploy.servers import ServerFailed, ServerMissing

DEFAULT_PLAN = Plan()
"""The plan of `make cluster-test`: the two archives, four shards."""


@dataclass
class Result:
    embedded: Summary
    cluster: Summary
    steps: list[tuple[str, str, str]]
    task_counts: dict[str, int]
    label_seconds: dict[str, float]
    differences: list[str]
    """Where the two profiles' results differ (empty: the same)."""
    routing: list[str]
    """Steps that ran on a worker of the wrong queue."""

    @property
    def problems(self) -> list[str]:
        return self.differences + self.routing


def run_comparison(tmp: Path, plan: Plan = DEFAULT_PLAN, store: str = "auto", out=print) -> Result:
    """The plan through both profiles, compared; never raises for a difference (see problems)."""
    check_archives(plan)
    with cluster(tmp / "cluster", store=store) as c:
        return compare_on(c, plan, tmp / "embedded", out)


def check_archives(plan: Plan) -> None:
    for p in plan.archives:
        if not p.is_file():
            raise ClusterTestFailed(f"archive {p} not found (the shared data lives in ../shared/data)")


def compare_on(
    c: Cluster, plan: Plan, embedded_tmp: Path, out=print, resources: dict | None = None, together: bool = False
) -> Result:
    """The plan on a running cluster, then through the embedded profile (its instance and store
    under embedded_tmp), compared. resources: the cluster's store has the plan's archives
    ingested already (what ingest() returned); the embedded side ingests them itself.
    together: run the embedded side while the cluster side runs, not after it (they share no
    instance, store or log folder), so the comparison takes about the longer of the two rather
    than their sum; each side's seconds then include the other's load on the machine. Only with
    resources: both sides ingesting at once would race on os.environ (ingest sets the profile's
    variables in this process), so together without resources is refused."""
    if together and resources is None:
        raise ValueError(
            "compare_on(together=True) needs resources (the cluster store's archives ingested first, "
            "what ingest() returned): two ingests at once would race on os.environ"
        )
    seconds = {}
    out(
        f"cluster: postgres 127.0.0.1:{c.pg.port}, redis {c.broker.url}, "
        f"store {c.env['CHESS_PIPELINE_HOME']}" + (f" on {c.s3_endpoint}" if c.s3_endpoint else " (local folder)")
    )
    out(f"workers: {', '.join(f'{n} (pid {p.pid})' for n, p in c.workers.items())}")
    env = embedded_env(embedded_tmp)

    def embedded() -> tuple[float, float]:
        t0 = time.monotonic()
        return run_plan(plan, env, embedded_tmp / "logs"), time.monotonic() - t0

    with ThreadPoolExecutor(1) as side:
        embedded_run = side.submit(embedded) if together else None
        t0 = time.monotonic()
        seconds["cluster labels"] = run_plan(plan, c.env, c.logdir, resources)
        seconds["cluster total"] = time.monotonic() - t0
        if embedded_run is None:
            embedded_run = side.submit(embedded)
        seconds["embedded labels"], seconds["embedded total"] = embedded_run.result()
    steps = steps_by_worker(c.env)
    counts = worker_task_counts(c.broker.url)
    cluster_summary = summarize(plan, c.env)
    embedded_summary = summarize(plan, env)
    differences = compare(embedded_summary, cluster_summary)
    return Result(embedded_summary, cluster_summary, steps, counts, seconds, differences, check_routing(steps))


def measure(tmp: Path, plan: Plan = DEFAULT_PLAN, out=print) -> dict:
    """The README's scaling figures, on a local shared store: labels throughput with one
    stockfish worker (shards 0-3), then with two (shards 4-7: as many positions, give or take),
    each worker one engine; each engine's own positions/s; the Celery overhead per step."""
    first = tuple(plan.shards)
    second = tuple(s + len(first) for s in first)
    dagster_w, sf1, sf2 = (
        Worker("dagster-1", (DAGSTER_QUEUE,)),
        Worker("stockfish-1", (STOCKFISH_QUEUE,)),
        Worker("stockfish-2", (STOCKFISH_QUEUE,)),
    )
    figures: dict = {}
    with cluster(tmp, workers=(dagster_w, sf1), store="local") as c:
        resources = ingest(plan, c.env, c.logdir)
        for workers, shards in ((1, first), (2, second)):
            if workers == 2:
                c.start_workers((sf2,))
            before = {r.get("shards") for r in label_rates(c.env)}
            t0 = time.monotonic()
            run_together(label_launches(replace(plan, shards=shards), resources, "cluster"), c.env, c.logdir)
            wall = time.monotonic() - t0
            done = [r for r in label_rates(c.env) if r.get("shards") not in before]
            labelled = sum(r["labelled"] for r in done)
            figures[f"{workers} worker(s)"] = {
                "shards": shards,
                "labelled": labelled,
                "wall_s": round(wall, 1),
                "positions_per_s": round(labelled / wall, 1),
            }
        rates = [r["positions_per_second"] for r in label_rates(c.env) if r.get("engines") == 1]
        timings = step_timings(c.env)
    figures["per engine positions/s (median of steps)"] = round(median(rates), 1)
    figures["celery worker overhead per step, s (median: task taken to STEP_START)"] = round(
        median([t.overhead for t in timings]), 2
    )
    figures["celery queue wait per step, s (median: submitted to taken)"] = round(
        median([t.queued for t in timings]), 2
    )
    figures["labels step seconds (median)"] = round(median([t.seconds for t in timings if t.step == "labels"]), 1)
    emb = embedded_env(tmp / "embedded")
    ingest(plan, emb, tmp / "embedded" / "logs")
    figures["multiprocess overhead per step, s (median: subprocess launched to STEP_START, embedded ingest)"] = round(
        median([t.overhead for t in step_timings(emb)]), 2
    )
    for k, v in figures.items():
        out(f"{k}: {v}")
    return figures


def report(r: Result, out=print) -> None:
    out("steps by worker (from the runs' event logs in Postgres):")
    for worker, partition, step in r.steps:
        out(f"  {worker:12} {step:40} partition {partition}")
    out("tasks per worker (Celery inspect stats): " + ", ".join(f"{w} {n}" for w, n in sorted(r.task_counts.items())))
    per_step = Counter(w for w, _, _ in r.steps)
    out("steps per worker (event logs):          " + ", ".join(f"{w} {n}" for w, n in sorted(per_step.items())))
    s = r.cluster
    out(
        f"cluster:  {s.games} games, {s.positions} positions ({s.distinct} distinct), {len(s.labels)} labels, "
        f"dataset rows {s.dataset_rows}"
    )
    s = r.embedded
    out(
        f"embedded: {s.games} games, {s.positions} positions ({s.distinct} distinct), {len(s.labels)} labels, "
        f"dataset rows {s.dataset_rows}"
    )
    out("seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in r.label_seconds.items()))
    if r.problems:
        out("DIFFERENCES:\n  " + "\n  ".join(r.problems))
    else:
        out("same games, positions, dataset rows and labels in both profiles")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make cluster-test", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--store", choices=("auto", "s3", "local"), default="auto", help="where the cluster's store lives"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (logs) afterwards")
    parser.add_argument(
        "--measure", action="store_true", help="measure the README's scaling figures instead (1 vs 2 workers, overhead)"
    )
    args = parser.parse_args(argv)
    # SIGTERM (e.g. a CI timeout) unwinds like Ctrl-C, so every server and worker is stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    tmp = Path(tempfile.mkdtemp(prefix="cluster-test-"))
    try:
        if args.measure:
            measure(tmp)
            return 0
        result = run_comparison(tmp, store=args.store)
        report(result)
        return 1 if result.problems else 0
    except (ServerMissing, ServerFailed, ClusterTestFailed) as e:
        print(f"cluster-test: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("cluster-test: interrupted; servers and workers stopped", file=sys.stderr)
        return 130
    finally:
        if args.keep:
            print(f"cluster-test: logs kept in {tmp}", file=sys.stderr)
        else:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
