"""What a run of `make cluster-test` left, read back and compared: each profile's games,
positions, dataset rows and labels (`summarize`, `compare`), which worker ran which step and on
which queue (`steps_by_worker`, `check_routing`), and the steps' timings from the event logs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from deploy.cluster_runs import Plan
from deploy.cluster_setup import DAGSTER_QUEUE, STOCKFISH_QUEUE, WORKERS, Worker, environ


@dataclass
class Summary:
    games: int
    positions: int
    distinct: int
    dataset_rows: dict[str, int]
    labels: dict[int, tuple]
    """position_key -> (cp, mate, best_move, depth, nodes) of the depth-`depth` labels."""
    duplicate_labels: int
    """Labels beyond one per position under the setting (must be 0)."""


def summarize(plan: Plan, env: Mapping[str, str]) -> Summary:
    from pipeline.store import duck
    from pipeline.store.store import Store

    with environ(env):
        store = Store(env["CHESS_PIPELINE_HOME"])
        duck.refresh_views(store)

        def one(sql: str, params=None):
            return duck.query(store, sql, params).to_pylist()

        games = one("SELECT count(*) AS n FROM games")[0]["n"]
        positions = one("SELECT count(*) AS n FROM positions")[0]["n"]
        distinct = one("SELECT count(DISTINCT position_key) AS n FROM positions")[0]["n"]
        rows = {
            r["split"]: r["n"]
            for r in one("SELECT split, count(*) AS n FROM datasets WHERE dataset = ? GROUP BY split", [plan.dataset])
        }
        labels = one(
            "SELECT position_key, cp, mate, best_move, depth, nodes FROM labels "
            "WHERE limit_kind = 'depth' AND limit_value = ? AND hash_cleared",
            [plan.depth],
        )
    table: dict[int, tuple] = {}
    dup = 0
    for r in labels:
        if r["position_key"] in table:
            dup += 1
        table[r["position_key"]] = (r["cp"], r["mate"], r["best_move"], r["depth"], r["nodes"])
    return Summary(games, positions, distinct, rows, table, dup)


def compare(a: Summary, b: Summary, names: tuple[str, str] = ("embedded", "cluster")) -> list[str]:
    """The differences between two profiles' results (empty: the same)."""
    out = []
    for what in ("games", "positions", "distinct", "dataset_rows"):
        if getattr(a, what) != getattr(b, what):
            out.append(f"{what}: {names[0]} {getattr(a, what)} != {names[1]} {getattr(b, what)}")
    for s, name in zip((a, b), names):
        if s.duplicate_labels:
            out.append(f"{name}: {s.duplicate_labels} positions labelled twice under one setting")
        if not s.labels:
            out.append(f"{name}: no labels")
    if set(a.labels) != set(b.labels):
        out.append(
            f"labelled positions differ: {len(set(a.labels) - set(b.labels))} only in {names[0]}, "
            f"{len(set(b.labels) - set(a.labels))} only in {names[1]}"
        )
    differing = [k for k in set(a.labels) & set(b.labels) if a.labels[k] != b.labels[k]]
    if differing:
        k = differing[0]
        out.append(f"{len(differing)} positions labelled differently, e.g. {k}: {a.labels[k]} != {b.labels[k]}")
    return out


# --- which worker ran what ------------------------------------------------------------------


def steps_by_worker(env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(worker, run's partition or '-', step) for every step a Celery worker ran, from the runs'
    event logs in Postgres (dagster-celery's "Executing steps ... in celery worker" event)."""
    import dagster as dg

    out = []
    with environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for run in instance.get_runs():
            for record in instance.all_logs(run.run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
                event = record.dagster_event
                if event is None:
                    continue
                meta = event.engine_event_data.metadata
                if "Celery worker" in meta:
                    worker = str(meta["Celery worker"].value).split("@")[0]
                    out.append((worker, run.tags.get("dagster/partition", "-"), event.step_key or "?"))
    return sorted(out)


HANDED_OVER = ("Submitting celery task", "Launching subprocess")
"""The executors' events that hand a step over: dagster-celery's engine event, the multiprocess
executor's STEP_WORKER_STARTING."""


@dataclass(frozen=True)
class StepTiming:
    run_id: str
    step: str
    handed: float
    """When the run's executor handed the step over: dagster-celery's "Submitting celery task"
    (the cluster profile), the multiprocess executor's "Launching subprocess" (embedded)."""
    picked: float
    """When a Celery worker took the task ("Executing steps ... in celery worker"); for the
    multiprocess executor the same as handed (no queue)."""
    started: float
    """STEP_START, in the worker (or the step's subprocess)."""
    ended: float
    """STEP_SUCCESS or STEP_FAILURE."""

    @property
    def queued(self) -> float:
        """Seconds in the queue, waiting for a free worker."""
        return self.picked - self.handed

    @property
    def overhead(self) -> float:
        """Seconds from taking the step to starting it: loading the code location, building the
        plan, starting the resources (a Celery worker, or the multiprocess executor's subprocess)."""
        return self.started - self.picked

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def step_timings(env: Mapping[str, str]) -> list[StepTiming]:
    """Every step of every run in the profile's instance, from the event logs."""
    import dagster as dg

    out = []
    with environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        for run in instance.get_runs():
            handed: dict[str, float] = {}
            picked: dict[str, float] = {}
            started: dict[str, float] = {}
            for record in instance.all_logs(run.run_id):
                event = record.dagster_event
                if event is None or not event.step_key:
                    continue
                kind, key = event.event_type_value, event.step_key
                message = event.message or ""
                if kind in ("ENGINE_EVENT", "STEP_WORKER_STARTING") and message.startswith(HANDED_OVER):
                    handed.setdefault(key, record.timestamp)
                elif kind == "ENGINE_EVENT" and "Celery worker" in event.engine_event_data.metadata:
                    picked[key] = record.timestamp
                elif kind == "STEP_START":
                    started[key] = record.timestamp
                elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and key in handed and key in started:
                    t = StepTiming(run.run_id, key, handed[key], picked.get(key, handed[key]), started[key], 0.0)
                    out.append(replace(t, ended=record.timestamp))
    return out


def label_rates(env: Mapping[str, str]) -> list[dict]:
    """Each labels materialisation's own figures (the asset's metadata): shards, labelled,
    seconds, positions_per_second, engines."""
    import dagster as dg

    out = []
    with environ(env), dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        records = instance.fetch_materializations(dg.AssetKey("labels"), limit=1000).records
        for r in records:
            meta = r.asset_materialization.metadata if r.asset_materialization else {}
            keys = ("shards", "labelled", "seconds", "positions_per_second", "engines")
            out.append({k: meta[k].value for k in keys if k in meta})
    return out


def median(values: list[float]) -> float:
    v = sorted(values)
    return (v[len(v) // 2] + v[(len(v) - 1) // 2]) / 2 if v else float("nan")


def queue_of(worker: str, workers: tuple[Worker, ...] = WORKERS) -> tuple[str, ...]:
    return next((w.queues for w in workers if w.name == worker), ())


def check_routing(steps: list[tuple[str, str, str]], workers: tuple[Worker, ...] = WORKERS) -> list[str]:
    """Labels steps on stockfish workers only, every other step on dagster workers."""
    out = []
    for worker, _, step in steps:
        want = STOCKFISH_QUEUE if step.startswith("labels") else DAGSTER_QUEUE
        if want not in queue_of(worker, workers):
            queues = ", ".join(queue_of(worker, workers))
            out.append(f"step {step} ran on {worker} (queues {queues}), not on a {want} worker")
    if not any(s.startswith("labels") for _, _, s in steps):
        out.append("no labels step ran on a Celery worker")
    return out
