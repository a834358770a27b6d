"""`chess-pipeline ui`: the Dagster UI on 127.0.0.1, over the store's instance."""

import argparse
import os
import subprocess
import sys
from pathlib import Path

from assets.cli.runtime import open_instance, open_store


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
    proc = subprocess.Popen(cmd, env=env, cwd=store.local_dir)
    try:
        code = proc.wait()
    except KeyboardInterrupt:  # Ctrl-C reaches dagster dev too: let it shut down its processes
        code = proc.wait()
    raise SystemExit(code)


def add_parser(sub) -> None:
    s = sub.add_parser("ui", help="open the Dagster UI on 127.0.0.1")
    s.add_argument("--port", type=int, default=3000)
    s.set_defaults(func=cmd_ui)
