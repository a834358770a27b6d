"""`chess-pipeline explore`: the explorer page (explorer/) on 127.0.0.1, over the store.

The page's models follow lineage: each is the checkpoint its model asset's latest
materialisation recorded in the store's Dagster instance, never the newest file in a folder."""

import argparse
import errno
import socket
import sys

import dagster as dg

from cli.runtime import open_instance, open_store


def trained_models(instance: dg.DagsterInstance) -> list:
    """Every asset whose latest materialisation recorded a checkpoint that still exists (a file,
    or an object of an S3 store), with the dataset and model preset it was trained as (the model
    assets' `checkpoint`, `dataset` and `model` metadata)."""
    from explorer.evaluations import TrainedModel, stored_checkpoint

    out = []
    for key in instance.get_asset_keys():
        event = instance.get_latest_materialization_event(key)
        mat = event.asset_materialization if event is not None else None
        if mat is None or "checkpoint" not in mat.metadata:
            continue
        path = stored_checkpoint(str(mat.metadata["checkpoint"].value))
        if path is not None:
            dataset, preset = (mat.metadata.get(k) for k in ("dataset", "model"))
            out.append(
                TrainedModel(
                    key.to_user_string(),
                    path,
                    str(dataset.value) if dataset is not None else "",
                    str(preset.value) if preset is not None else "",
                )
            )
    return out


def cmd_explore(args: argparse.Namespace) -> None:
    import uvicorn

    from explorer.app import SERVER_OPTIONS, create_app, vendor_dir

    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be from 1 to 65535, got {args.port}")
    store = open_store(args.home)
    instance = open_instance(store)
    if not (vendor_dir() / "Chessboard.js").is_file():
        print(
            f"chess-pipeline explore: the board library is missing from {vendor_dir()}: run `make install`; "
            "the JSON API under /api/ works without it",
            file=sys.stderr,
        )
    app = create_app(store, lambda: trained_models(instance))
    sock = bind_loopback(args.port)  # before saying where it serves: a taken port is one line, not a promise
    print(f"chess-pipeline explore: http://127.0.0.1:{args.port}/ (Ctrl-C to stop)", file=sys.stderr)
    config = uvicorn.Config(app, log_level="warning", **SERVER_OPTIONS)
    uvicorn.Server(config).run(sockets=[sock])


def bind_loopback(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port`, or ValueError naming --port when it is taken."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(2048)
    except OSError as e:
        sock.close()
        if e.errno in (errno.EADDRINUSE, errno.EACCES):
            why = "is in use (another explorer or server?)" if e.errno == errno.EADDRINUSE else "is not allowed"
            raise ValueError(f"port {port} on 127.0.0.1 {why}: choose another with --port N") from None
        raise
    sock.set_inheritable(True)
    return sock


def add_parser(sub) -> None:
    s = sub.add_parser(
        "explore", help="the explorer page on 127.0.0.1: board, piece values, evaluations, the store's games"
    )
    s.add_argument("--port", type=int, default=8000)
    s.set_defaults(func=cmd_explore)
