"""The worker-kill check's view of a worker: its process tree from /proc, and the pool process
running a labels step (the one whose children are Stockfish engines), for a test to SIGKILL.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

from deploy.cluster_setup import ClusterTestFailed


def _children(pid: int) -> list[int]:
    """The processes whose parent is pid (forked by any of its threads)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rindex(")") + 2 :].split()
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _is_engine(pid: int) -> bool:
    """Whether the process runs a Stockfish binary (its argv[0] is named stockfish*)."""
    try:
        argv0 = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return False
    return Path(argv0).name.startswith("stockfish")


def step_process(worker: subprocess.Popen) -> int | None:
    """The PID of the worker's pool process that runs engines right now (a labels step), or None.

    The tree of a worker: dagster-celery (the PID we started) -> celery main -> pool
    processes -> stockfish engines."""
    stack, seen = [worker.pid], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        kids = _children(pid)
        if any(_is_engine(k) for k in kids):
            return pid
        stack.extend(kids)
    return None


def wait_for_step_process(workers: Mapping[str, subprocess.Popen], timeout: float = 300.0) -> tuple[str, int]:
    """(worker name, PID) of the first worker process seen running engines."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, proc in workers.items():
            pid = step_process(proc)
            if pid is not None:
                return name, pid
        time.sleep(0.2)
    raise ClusterTestFailed(f"no worker started a labels step within {timeout:.0f} s")
