"""Runs whose process died stay STARTED in Dagster: find them and mark them failed.

Dagster's run monitoring (on in the instance's dagster.yaml, see cli.py) fails runs
that never start or never finish cancelling, under the daemon that `chess-pipeline ui`
runs. It cannot tell that the process of a STARTED run is gone: the default run launcher
has no worker health check, and runs the CLI makes with `materialize` are not launched at
all. So the CLI does that check itself when it starts: a STARTED (or STARTING) run whose
RUN_START event came from a process that is no longer alive is marked failed, with a
message saying so. Only for a SQLite instance (the embedded profile, one machine): with a
shared instance the pid may belong to another machine.
"""

from __future__ import annotations

import os

import dagster as dg
from dagster._core.storage.runs.sqlite.sqlite_run_storage import SqliteRunStorage

from pipeline.store.store import pid_alive, process_start_time

IN_FLIGHT = [dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING]
START_SLACK_S = 2.0
"""A process that started this long after its run's start cannot be the run's process (a reused pid)."""


def run_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of the process that executes the run (the one that logged RUN_START)."""
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START):
        if entry.dagster_event is not None and entry.dagster_event.pid:
            return int(entry.dagster_event.pid)
    return None


def process_gone(pid: int, run_started: float | None) -> bool:
    if pid == os.getpid() or pid <= 0:
        return False
    if not pid_alive(pid):
        return True
    began = process_start_time(pid)
    return began is not None and run_started is not None and began > run_started + START_SLACK_S


def fail_dead_runs(instance: dg.DagsterInstance) -> list[tuple[str, int]]:
    """Mark failed every in-flight run whose process is gone; returns (run id, pid) of each."""
    if not isinstance(instance.run_storage, SqliteRunStorage):
        return []
    failed = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=IN_FLIGHT)):
        run = record.dagster_run
        pid = run_pid(instance, run.run_id)
        if pid is None:
            continue  # not started yet: the daemon's start timeout covers it
        started = record.start_time or record.create_timestamp.timestamp()
        if process_gone(pid, started):
            instance.report_run_failed(
                run,
                f"the process running this run (pid {pid}) is gone (killed, or out of memory); "
                "marked failed by chess-pipeline",
            )
            failed.append((run.run_id, pid))
    return failed
