"""Entry point of the `chess-pipeline` console script, free of imports at module level.

Worker processes (ingest's pool, started through the forkserver) re-import the script that
started their parent before they run anything. Pointing the script here instead of at
cli keeps that re-import instant rather than a second Dagster import (about 1 s) in
every worker.
"""


def main() -> None:
    from cli import main as cli_main

    cli_main()
