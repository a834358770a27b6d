"""`chess-pipeline labels export FILE` and `labels import FILE`: a store's labels to one Parquet
file and back into a store holding the same games (pipeline/labels/exchange.py). Plain library
calls, no Dagster run: the labels asset's next run finds the imported positions labelled."""

import argparse
from pathlib import Path

from cli.runtime import open_store
from pipeline.labels.exchange import ExchangeError, export_labels, import_labels
from pipeline.store import duck


def cmd_export(args: argparse.Namespace) -> None:
    store = open_store(args.home)
    try:
        stats = export_labels(store, Path(args.file))
    except ExchangeError as e:
        raise SystemExit(f"chess-pipeline labels export: {e}") from None
    print(f"labels export: {stats.labels:,} labels to {stats.path} ({stats.settings_text()})")


def cmd_import(args: argparse.Namespace) -> None:
    store = open_store(args.home)
    try:
        stats = import_labels(store, Path(args.file))
    except ExchangeError as e:
        raise SystemExit(f"chess-pipeline labels import: {e}") from None
    added = sum(stats.added.values())
    print(
        f"labels import: {stats.labels:,} labels in {stats.path}, {added:,} new to the store, "
        f"{stats.labels - added:,} it had already ({stats.settings_text(stats.added)} new)"
    )
    duck.create_views(store)


def add_parser(sub) -> None:
    s = sub.add_parser("labels", help="carry labels between stores: export them to a Parquet file, import one")
    actions = s.add_subparsers(dest="action", required=True)
    e = actions.add_parser(
        "export", help="every label of the store (engine, version, limit, scores) to one Parquet file"
    )
    e.add_argument("file", metavar="FILE", help="the Parquet file to write (replaced if there)")
    e.set_defaults(func=cmd_export)
    i = actions.add_parser(
        "import",
        help="add the labels of an export file to this store, checked, all or none (labels it has are skipped)",
    )
    i.add_argument("file", metavar="FILE", help="a file `chess-pipeline labels export` wrote")
    i.set_defaults(func=cmd_import)
    s.subcommands = [e, i]  # cli.app gives each its --home, as it gives every command's
