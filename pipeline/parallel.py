"""Independent tasks (games, searches) spread over processes, results in the tasks' order.

    results = ordered_map(play, tasks, workers=2, setup=functools.partial(load_evaluator, ck))

Each process calls `setup(*setup_args)` once (loading a network, say) and then
`fn(task, state)` for every task it is given; with one worker that all happens in this process.
`fn` and `setup` must be picklable (module-level functions or functools.partial of them), as
must the tasks and results: processes are spawned, because torch and forked processes do not
mix. A result must depend on its task and the state only, never on which process played it or
what that process played before; then any number of workers gives the same results.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")

_STATE: dict[str, Any] = {}

_JOIN_S = 5.0
"""Seconds to wait for a killed worker's end (it takes milliseconds: SIGKILL is not deferred)."""


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, not the machine's count)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def check_workers(workers: int) -> int:
    """A `workers` setting (the evaluation's configs, ordered_map): refused below 0, in one line."""
    if workers < 0:
        raise ValueError(f"workers is 0 (one per usable core) or a number of processes, got {workers}")
    return workers


def resolve_workers(workers: int, tasks: int) -> int:
    """workers 0 is one per usable core; never more processes than tasks, never fewer than one."""
    return max(1, min(check_workers(workers) or usable_cores(), tasks))


def task_seed(*parts: object) -> int:
    """A seed for one task from what identifies it (the run's seed, the task's place in the run):
    the same whichever process runs the task and whatever ran there before."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "little")


def watch_parent(parent: int) -> None:
    """Run in a worker process as it starts (a pool's initializer, with the caller's os.getpid()):
    a daemon thread ends the worker once its parent is gone (killed, out of memory), instead of
    leaving it waiting for tasks forever, with a network loaded."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1.0)
        os._exit(1)

    threading.Thread(target=watch, name="watch-parent", daemon=True).start()


def _setup(parent: int, setup: Callable[..., Any] | None, args: tuple) -> None:
    watch_parent(parent)
    try:
        _STATE["value"] = setup(*args) if setup else None
    except Exception as e:  # each task raises it: the caller sees why, not a broken pool
        _STATE["error"] = e


def _call(fn: Callable[[Any, Any], Any], task: Any) -> Any:
    if "error" in _STATE:
        raise _STATE["error"]
    return fn(task, _STATE["value"])


def close(state: Any) -> None:
    """A setup's state closed, where it has a close() (an evaluator that runs an engine process:
    pipeline.play.stockfish_eval). In a worker process the process's exit ends such an engine (it
    reads the end of its input as `quit`)."""
    if callable(getattr(state, "close", None)):
        state.close()


def ordered_map(
    fn: Callable[[T, Any], R],
    tasks: Sequence[T],
    workers: int,
    setup: Callable[..., Any] | None = None,
    setup_args: tuple = (),
    progress: Callable[[int, int], None] | None = None,
) -> list[R]:
    """fn(task, setup(*setup_args)) for every task (state None without a setup), in `workers`
    processes (0: one per usable core; 1: here); progress(done, total) after each. The first
    task to raise (or setup: each task then raises its error) stops the rest: the processes are
    ended at once, and the error is raised here; so is an interrupt."""
    total = len(tasks)
    if not total:
        return []
    n = resolve_workers(workers, total)
    out: list[Any] = [None] * total
    if n == 1:
        state = setup(*setup_args) if setup else None
        try:
            for i, task in enumerate(tasks):
                out[i] = fn(task, state)
                if progress:
                    progress(i + 1, total)
        finally:
            close(state)
        return out
    ex = ProcessPoolExecutor(
        n,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_setup,
        initargs=(os.getpid(), setup, setup_args),
    )
    try:
        futures = {ex.submit(_call, fn, task): i for i, task in enumerate(tasks)}
        for done, fut in enumerate(as_completed(futures), 1):
            out[futures[fut]] = fut.result()
            if progress:
                progress(done, total)
    except BaseException:  # a task's error, an interrupt (Ctrl-C; SIGTERM where Dagster turns it into one)
        # SIGKILL, which no worker can block, ignore or outlive: a worker's results are only what it
        # returns (an engine it started reads the end of its input as `quit`). Then the pool is joined:
        # left running, its manager thread raced the interpreter's exit and printed `OSError: Bad file
        # descriptor` after about one Ctrl-C in 70.
        processes = list((getattr(ex, "_processes", None) or {}).values())
        for process in processes:
            process.kill()
        for process in processes:
            process.join(_JOIN_S)
        ex.shutdown(wait=True, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return out
