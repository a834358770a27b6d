"""pin_cores: each engine process of a pool on cores of its own, claimed per machine, so that
pools in several processes (a Celery worker's concurrency) never pin two engines to one core."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pipeline.labels.engine as engine
from pipeline.labels.engine import usable_cores
from pipeline.labels.pool import EnginePool, EngineSettings
from pipeline.labels.uci import Job, Limit

ROOT = Path(__file__).resolve().parents[2]
START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


@pytest.fixture(autouse=True)
def claims(tmp_path, monkeypatch):
    """The core claims of this test alone (not those of other pools on the machine)."""
    monkeypatch.setattr(engine, "CORE_CLAIMS", tmp_path / "cores")
    return tmp_path / "cores"


def _cores_of(pid: int) -> set[int]:
    """Every core any thread of process pid may run on, read from the kernel."""
    return {c for tid in os.listdir(f"/proc/{pid}/task") for c in os.sched_getaffinity(int(tid))}


@pytest.fixture
def two_cores():
    cores = usable_cores()
    if len(cores) < 2:
        pytest.skip(f"pinning two engines needs two usable cores, this process has {cores}")
    return cores


def test_pin_cores_is_off_by_default_and_declared_once():
    assert EngineSettings().pin_cores is False
    assert "pin_cores" in EngineSettings.__dataclass_fields__


def test_each_engine_is_pinned_to_a_core_of_its_own_and_stays_there_after_a_restart(stockfish, two_cores):
    with EnginePool(stockfish, workers=2, pin_cores=True) as pool:
        pinned = [_cores_of(pid) for pid in pool.pids]
        assert pinned == [{two_cores[0]}, {two_cores[1]}]
        # Every thread of the engine (the search thread too), not only its main thread.
        assert all(len(os.listdir(f"/proc/{pid}/task")) >= 2 for pid in pool.pids)
        os.kill(pool.pids[0], signal.SIGKILL)
        results = list(pool.run([Job(i, START, True) for i in range(4)], Limit("depth", 4)))
        assert len(results) == 4 and pool.restarts == 1
        assert [_cores_of(pid) for pid in pool.pids] == pinned


def test_unpinned_engines_keep_every_core(stockfish, two_cores):
    with EnginePool(stockfish, workers=1) as pool:
        assert _cores_of(pool.pids[0]) == set(two_cores)


def test_two_pools_on_one_machine_pin_different_cores_and_a_third_is_refused(stockfish, two_cores):
    with EnginePool(stockfish, workers=1, pin_cores=True) as a, EnginePool(stockfish, workers=1, pin_cores=True) as b:
        assert _cores_of(a.pids[0]) | _cores_of(b.pids[0]) == set(two_cores[:2])
        assert _cores_of(a.pids[0]) != _cores_of(b.pids[0])
        if len(two_cores) == 2:
            with pytest.raises(ValueError, match=r"pin_cores: 1 core\(s\) wanted, 0 of the 2 this process may use"):
                EnginePool(stockfish, workers=1, pin_cores=True).__enter__()
    # Closed pools give their cores back.
    with EnginePool(stockfish, workers=len(two_cores), pin_cores=True) as pool:
        assert sorted(c for pid in pool.pids for c in _cores_of(pid)) == two_cores


def test_more_engines_than_usable_cores_is_refused_in_one_line(stockfish):
    n = len(usable_cores())
    with pytest.raises(ValueError) as e:
        EnginePool(stockfish, workers=n + 1, pin_cores=True)
    assert str(e.value).startswith(f"pin_cores: {n + 1} engine(s) x 1 thread(s) need {n + 1} cores")
    assert "lower workers" in str(e.value) and "\n" not in str(e.value)


HOLD = """
import sys, time
from pathlib import Path
import pipeline.labels.engine as engine
from pipeline.labels.pool import EnginePool
from pipeline.labels.uci import find_stockfish
engine.CORE_CLAIMS = Path(sys.argv[1])
with EnginePool(find_stockfish(), workers=1, pin_cores=True) as pool:
    print(sorted(engine.usable_cores()).index(next(iter(pool.cores[0]))), flush=True)
    time.sleep(600)
"""


def test_a_killed_pool_frees_its_core_claim(stockfish, two_cores, claims):
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(claims)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "0"
        with EnginePool(stockfish, workers=1, pin_cores=True) as pool:
            assert pool.cores == [(two_cores[1],)]  # core 0 is the other process's
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    time.sleep(0.2)  # its engine child sees its stdin close and exits; the claim went with the holder
    with EnginePool(stockfish, workers=2, pin_cores=True) as pool:
        assert pool.cores == [(two_cores[0],), (two_cores[1],)]
