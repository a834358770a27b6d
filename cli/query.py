"""`chess-pipeline sql "SELECT ..."` and `chess-pipeline report NAME`: read the store (never write)."""

import argparse
from typing import get_args

from cli.output import Format, print_table
from cli.runtime import open_store
from pipeline.store import duck
from pipeline.store.store import Store


def run_sql(store: Store, query: str):
    """The query's rows (Arrow). Read-only (duck.read_statement), on the store's own DuckDB file,
    rebuilt first when it was built for another place (a copied or moved store): see
    duck.read_only_connection."""
    return duck.query(store, query)


def run_report(store: Store, name: str):
    """The rows of the ready query sql/reports/<name>.sql; SystemExit when there is none."""
    try:
        sql = duck.load_sql(f"reports/{name}")
    except FileNotFoundError:
        raise SystemExit(f"chess-pipeline report: no report {name!r}; see sql/reports/") from None
    return duck.query(store, sql)


def cmd_sql(args: argparse.Namespace) -> None:
    print_table(run_sql(open_store(args.home), args.query), args.format)


def cmd_report(args: argparse.Namespace) -> None:
    print_table(run_report(open_store(args.home), args.name), args.format)


def add_parsers(sub) -> None:
    s = sub.add_parser(
        "sql",
        help="run SQL over the store (views: games, rejected_games, positions, archive_summary, "
        "labels, best_labels, labelled_positions, label_failures, datasets, model_metrics, "
        "evaluation_results, match_games)",
    )
    s.add_argument("query")
    s.add_argument("--format", choices=get_args(Format), default="table")
    s.set_defaults(func=cmd_sql)

    s = sub.add_parser("report", help="run a ready query from sql/reports/")
    s.add_argument("name", help="e.g. reject_reasons, most_common_positions")
    s.add_argument("--format", choices=get_args(Format), default="table")
    s.set_defaults(func=cmd_report)
