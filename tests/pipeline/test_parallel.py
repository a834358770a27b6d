"""Tasks spread over spawned processes: results in the tasks' order, each process set up once,
a task's error raised in the caller, and the worker count resolved from the usable cores."""

import multiprocessing
import os
import threading
from concurrent.futures.process import _ExecutorManagerThread

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
    with pytest.raises(ValueError, match=r"^workers is 0 \(one per usable core\) or a number of processes, got -1$"):
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
    # Nothing of the pool outlives the error: its manager thread, left running, raced the
    # interpreter's exit (a traceback after about one Ctrl-C in 70; before the fix it was still here).
    assert not [t for t in threading.enumerate() if isinstance(t, _ExecutorManagerThread)]
    assert not multiprocessing.active_children()


def _broken_setup() -> None:
    raise FileNotFoundError("no checkpoint at models/x/checkpoint.pt")


def _sleeper(task: tuple[str, float], _state) -> None:
    """Writes its process id to a file named in the task, then sleeps."""
    import time
    from pathlib import Path

    folder, seconds = task
    Path(folder, f"{os.getpid()}").touch()
    time.sleep(seconds)


def _gone(pids: list[int], within: float) -> bool:
    import time

    end = time.monotonic() + within
    while time.monotonic() < end:
        alive = []
        for pid in pids:
            try:
                os.kill(pid, 0)
                alive.append(pid)
            except ProcessLookupError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


def _workers_started(folder, n: int = 2, within: float = 30.0) -> list[int]:
    import time

    end = time.monotonic() + within
    while time.monotonic() < end:
        pids = [int(p.name) for p in folder.iterdir()]
        if len(pids) >= n:
            return pids
        time.sleep(0.1)
    raise AssertionError(f"fewer than {n} workers started in {within} s")


@pytest.mark.slow
def test_a_setup_error_reaches_the_caller_by_its_own_words():
    """Before: with two processes it came back as 'BrokenProcessPool: A process in the process
    pool was terminated abruptly', the reason only in a worker's stderr."""
    with pytest.raises(FileNotFoundError, match="no checkpoint at models/x/checkpoint.pt"):
        ordered_map(_task, [1, 2, 3], 2, _broken_setup)
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        ordered_map(_task, [1, 2, 3], 1, _broken_setup)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["interrupt", "kill"])
def test_the_workers_end_with_their_caller(tmp_path, how):
    """Interrupted, the caller ends the running tasks at once (before: it waited for them and one
    queued task more); killed with SIGKILL, its workers end by themselves (before: they stayed,
    each with its network loaded)."""
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    # The caller takes Ctrl-C as an interactive Python does, whatever this process was started with:
    # a suite started in the background by a shell without job control (`sh -c 'make test &'`)
    # inherits SIGINT ignored, and so would the caller, which then never saw the interrupt.
    code = (
        "import signal, sys\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from pipeline.parallel import ordered_map\n"
        "from tests.pipeline.test_parallel import _setup, _sleeper\n"
        "try:\n"
        f"    ordered_map(_sleeper, [({str(tmp_path)!r}, 60.0)] * 4, 2, _setup, (0,))\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    caller = subprocess.Popen([sys.executable, "-c", code], cwd=root, stderr=subprocess.PIPE, text=True)
    try:
        pids = _workers_started(tmp_path)
        start = time.monotonic()
        caller.send_signal(signal.SIGINT if how == "interrupt" else signal.SIGKILL)
        _, err = caller.communicate(timeout=30)
        assert caller.returncode == (130 if how == "interrupt" else -signal.SIGKILL), err
        assert "Traceback" not in err, err
        assert _gone(pids, within=10.0), f"workers {pids} still running"
        assert time.monotonic() - start < 10.0
    finally:
        caller.kill()
