"""Tasks spread over spawned processes: results in the tasks' order, each process set up once,
a task's error raised in the caller, and the worker count resolved from the usable cores."""

import os

import pytest

from pipeline.parallel import ordered_map, resolve_workers, usable_cores


def _setup(offset: int) -> dict:
    return {"offset": offset, "pid": os.getpid(), "setups": 1}


def _task(x: int, state: dict) -> tuple[int, int]:
    if x < 0:
        raise ValueError(f"task {x} refused")
    return x * x + state["offset"], state["pid"]


def test_one_worker_runs_here_in_order_with_progress():
    seen = []
    out = ordered_map(_task, [3, 1, 2], 1, _setup, (10,), progress=lambda d, t: seen.append((d, t)))
    assert [v for v, _ in out] == [19, 11, 14]
    assert {pid for _, pid in out} == {os.getpid()}
    assert seen == [(1, 3), (2, 3), (3, 3)]
    assert ordered_map(_task, [], 2, _setup, (0,)) == []


def test_workers_resolve_to_the_usable_cores_and_never_more_than_the_tasks():
    assert usable_cores() == len(os.sched_getaffinity(0))
    assert resolve_workers(0, 1_000) == usable_cores()
    assert resolve_workers(8, 3) == 3 and resolve_workers(0, 1) == 1 and resolve_workers(1, 0) == 1
    with pytest.raises(ValueError, match="workers must be 0"):
        resolve_workers(-1, 5)


@pytest.mark.slow
def test_two_processes_keep_the_order_and_raise_a_tasks_error():
    """Slow tier: spawning two interpreters costs about a second each."""
    tasks = list(range(40, 0, -1))
    seen = []
    out = ordered_map(_task, tasks, 2, _setup, (5,), progress=lambda d, t: seen.append((d, t)))
    assert [v for v, _ in out] == [x * x + 5 for x in tasks]
    pids = {pid for _, pid in out}
    assert os.getpid() not in pids and 1 <= len(pids) <= 2
    assert seen == [(i, 40) for i in range(1, 41)]
    with pytest.raises(ValueError, match="task -1 refused"):
        ordered_map(_task, [1, 2, -1, 3], 2, _setup, (0,))
