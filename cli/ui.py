"""`chess-pipeline ui`: the Dagster UI on 127.0.0.1, over the store's instance."""

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli.runtime import open_instance, open_store

STOP_GRACE_S = 15.0
"""Seconds `ui` gives `dagster dev` to stop its webserver, daemon and code servers after a
SIGTERM, SIGINT or SIGHUP before it kills what is left of them (they stop in 1-3 s here)."""
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:  # nothing left in the group
        pass


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it: while it is unreaped its pid, the
    group's id, cannot be taken by another process."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def run_group(cmd: list[str], name: str, grace_s: float = STOP_GRACE_S, **popen) -> int:
    """Run cmd in a process group of its own and stop the whole group with it: a SIGTERM,
    SIGINT or SIGHUP to this process goes to every process of the group, which gets grace_s to
    exit before the group is killed; whatever of the group outlives cmd is killed too. Returns
    cmd's exit status, or 128 + the signal when one stopped it."""
    proc = subprocess.Popen(cmd, start_new_session=True, **popen)
    received: list[int] = []

    def forward(signum, frame) -> None:
        received.append(signum)
        _signal_group(proc.pid, signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        deadline = None
        while not _exited(proc.pid):
            if received and deadline is None:
                deadline = time.monotonic() + grace_s
            if deadline is not None and time.monotonic() > deadline:
                print(
                    f"chess-pipeline ui: {name} did not stop within {grace_s:g} s of "
                    f"{signal.Signals(received[0]).name}: killing its processes",
                    file=sys.stderr,
                )
                break
            time.sleep(0.1)
    finally:
        _signal_group(proc.pid, signal.SIGKILL)  # what is left: a stuck child, or its orphans
        code = proc.wait()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 128 + received[0] if received else code


def ui_command(port: int) -> list[str]:
    """`dagster dev` through this interpreter (`python -m dagster`), so it runs without the venv
    on PATH, loading the module `assets.definitions` from where this CLI imported it (no
    workspace.yaml to find: that file is for running `dagster dev` by hand)."""
    import assets

    code_dir = str(Path(assets.__file__).resolve().parent.parent)
    module = ["-m", "assets.definitions", "-d", code_dir]
    return [sys.executable, "-m", "dagster", "dev", *module, "-h", "127.0.0.1", "-p", str(port)]


def cmd_ui(args: argparse.Namespace) -> None:
    store = open_store(args.home)
    open_instance(store)
    # A sensor tick hashes at most one new archive past its 20 s budget, but one 30 GB file
    # takes ~2 minutes at sha256's ~280 MB/s: give ticks 10 minutes, not Dagster's 60 s.
    env = {"DAGSTER_SENSOR_GRPC_TIMEOUT_SECONDS": "600", **os.environ, "CHESS_PIPELINE_HOME": str(store.root)}
    cmd = ui_command(args.port)
    print(" ".join(cmd), file=sys.stderr)
    # In a group of its own: a signal to this command (Ctrl-C, `kill`, a service manager's stop)
    # stops dagster dev with its webserver, daemon and code servers, and frees the port.
    raise SystemExit(run_group(cmd, "dagster dev", env=env, cwd=store.local_dir))


def add_parser(sub) -> None:
    s = sub.add_parser("ui", help="open the Dagster UI on 127.0.0.1")
    s.add_argument("--port", type=int, default=3000)
    s.set_defaults(func=cmd_ui)
